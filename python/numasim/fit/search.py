"""The search: for every combination of the discrete assumptions, the continuous parameters that
minimise the objective, then the best of all, with how well each parameter is determined.

```
for each discrete combination            (space.Space.combos)
    coarse start: J on a grid (5 points per parameter, 3 for three parameters)
    scipy.optimize.minimize(method="Nelder-Mead", bounds [0, 1]^k) from the best grid point,
        its first simplex the grid's spacing
best = argmin J
profile: J along each parameter over its whole range and near the optimum (others there)
    a profile point below J*: the minimum was local; that point becomes best, profile again
        (at most POLISH_ROUNDS times)
    interval = where J ≤ J* + 2 · noise(J*)   (noise: objective.Evaluator.noise)
```

1. Every discrete combination is fitted on its own; the report lists each combination's best J,
   which is the discrete parameters' profile.
2. Nelder–Mead needs no gradient (the objective is made of simulated turnarounds, rugged at
   fixed seeds), follows a ridge along which two parameters trade off (m and the cost scale
   both lengthen turnarounds), and respects the bounds; it stops after ``budget`` evaluations
   per combination, grid included.
3. A parameter's interval is the set of values along its profile that the objective cannot tell
   from the optimum: within twice J's standard error. The ends are interpolated linearly between
   profile points; an interval that reaches the end of the range says the table does not bound
   the parameter there.

Known limits: Nelder–Mead finds a local minimum; the grid start makes a far-off one less
likely, not impossible, and the profiles catch one that lies along a single parameter (the
best's own point is then never reported with a lower J beside it). The profile varies one
parameter at a time (no joint interval).
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import minimize

from numasim.fit.objective import Evaluator
from numasim.fit.space import Continuous, Setting, Space

#: The coarse start's points per parameter (unit cube), by how many parameters act: 5, 25 or 27
#: evaluations before Powell's method.
GRID = {1: (0.1, 0.3, 0.5, 0.7, 0.9), 2: (0.1, 0.3, 0.5, 0.7, 0.9), 3: (1 / 6, 1 / 2, 5 / 6)}
#: Profile points per parameter over its whole range (unit cube), besides the optimum.
PROFILE_POINTS = 9
#: Further profile points at these distances on either side of the optimum (unit cube), where
#: the interval's ends usually are.
NEAR = (0.02, 0.05, 0.1)
#: J ≤ J* + NOISE_MULTIPLE · noise: settings the objective cannot tell from the best.
NOISE_MULTIPLE = 2.0
#: Times a profile point below the optimum may replace it before the profiles are kept as they are.
POLISH_ROUNDS = 3


@dataclass
class ParameterFit:
    name: str
    value: float
    low: float
    high: float
    #: The interval's ends reach the range's end (the table does not bound it there).
    open_low: bool
    open_high: bool
    #: ``(value, J)`` along the profile.
    profile: list[tuple[float, float]]


@dataclass
class ComboFit:
    combo: dict[str, str]
    setting: Setting
    objective: float
    evaluations: int


@dataclass
class FitResult:
    best: ComboFit
    combos: list[ComboFit]
    parameters: list[ParameterFit]
    noise: float
    residuals: list[dict]
    evaluations: int
    runs: int
    seconds: float
    replications: int
    extra: dict = field(default_factory=dict)


def _fit_combo(ev: Evaluator, space: Space, combo: dict[str, str], budget: int) -> ComboFit:
    params = space.active(combo)

    def at(u) -> Setting:
        return space.setting(combo, {p.name: p.value(x) for p, x in zip(params, u, strict=True)})

    calls = 0

    def j(u) -> float:
        nonlocal calls
        calls += 1
        return ev.objective(at(np.clip(u, 0.0, 1.0)))

    if not params:
        s = at([])
        return ComboFit(combo, s, j([]), calls)
    grid = list(itertools.product(GRID[len(params)], repeat=len(params)))
    start = np.array(min(grid, key=j))
    left = max(1, budget - len(grid))
    # A simplex of the grid's spacing around the best grid point, kept inside the cube.
    step = 0.2 if len(params) < 3 else 1 / 3
    simplex = [start] + [np.clip(start + step * np.eye(len(params))[i]
                                 * (1 if start[i] + step <= 1 else -1), 0.0, 1.0)
                         for i in range(len(params))]  # fmt: skip
    res = minimize(j, start, method="Nelder-Mead", bounds=[(0.0, 1.0)] * len(params),
                   options={"maxfev": left, "initial_simplex": np.array(simplex),
                            "xatol": 1e-3, "fatol": 1e-7})  # fmt: skip
    u = np.clip(res.x, 0.0, 1.0) if res.fun <= j(start) else start
    s = at(u)
    return ComboFit(combo, s, ev.objective(s), calls)


def _values_of(space: Space, best: ComboFit) -> dict[str, float]:
    assumed = dict(i.split("=", 1) for i in best.setting.assume.split(","))
    out = {}
    for p in space.active(best.combo):
        if p.name == "m":
            out["m"] = best.setting.m
        elif p.name == "cost_scale":
            text = assumed["cost"]
            out["cost_scale"] = float(text.split(":")[1]) if ":" in text else 30.0
        elif p.name == "remote_scale":
            out["remote_scale"] = remote_scale(assumed["remote"])
    return out


def remote_scale(text: str) -> float:
    """R of a ``remote`` value: ``slit`` 1, ``scaled`` 2, ``scaled:R`` R."""
    if text == "slit":
        return 1.0
    return float(text.split(":")[1]) if ":" in text else 2.0


def _profile(
    ev: Evaluator, space: Space, best: ComboFit, p: Continuous, noise: float
) -> ParameterFit:
    values = _values_of(space, best)
    u0 = p.unit(values[p.name])
    near = [u0 + d for d in NEAR for d in (d, -d)]
    us = sorted({*np.linspace(0.0, 1.0, PROFILE_POINTS), u0, *(u for u in near if 0 < u < 1)})
    prof = []
    for u in us:
        s = space.setting(best.combo, {**values, p.name: p.value(u)})
        prof.append((u, ev.objective(s)))
    limit = best.objective + NOISE_MULTIPLE * (noise if math.isfinite(noise) else 0.0)
    i0 = us.index(u0)
    lo_i = i0
    while lo_i > 0 and prof[lo_i - 1][1] <= limit:
        lo_i -= 1
    hi_i = i0
    while hi_i < len(us) - 1 and prof[hi_i + 1][1] <= limit:
        hi_i += 1

    def cross(a: int, b: int) -> float:
        (ua, ja), (ub, jb) = prof[a], prof[b]
        if jb == ja:
            return ub
        return ua + (limit - ja) / (jb - ja) * (ub - ua)

    u_lo = 0.0 if lo_i == 0 else cross(lo_i, lo_i - 1)
    u_hi = 1.0 if hi_i == len(us) - 1 else cross(hi_i, hi_i + 1)
    return ParameterFit(p.name, values[p.name], p.value(u_lo), p.value(u_hi),
                        lo_i == 0, hi_i == len(us) - 1,
                        [(p.value(u), jv) for u, jv in prof])  # fmt: skip


def fit(ev: Evaluator, space: Space, budget: int = 40) -> FitResult:
    """Runs the search (module doc); ``budget``: objective evaluations per combination."""
    t0 = time.monotonic()
    combos = [_fit_combo(ev, space, c, budget) for c in space.combos()]
    best = min(combos, key=lambda c: c.objective)
    noise = ev.noise(best.setting)
    params = [_profile(ev, space, best, p, noise) for p in space.active(best.combo)]
    for _ in range(POLISH_ROUNDS):
        # A profile point below the optimum: Nelder–Mead stopped in a local minimum.
        lower = [(jv, p.name, v) for p in params for v, jv in p.profile if jv < best.objective]
        if not lower:
            break
        _, name, value = min(lower)
        s = space.setting(best.combo, {**_values_of(space, best), name: value})
        moved = ComboFit(best.combo, s, ev.objective(s), best.evaluations)
        combos = [moved if c is best else c for c in combos]
        best = min(combos, key=lambda c: c.objective)
        noise = ev.noise(best.setting)
        params = [_profile(ev, space, best, p, noise) for p in space.active(best.combo)]
    return FitResult(best, combos, params, noise, ev.residuals(best.setting),
                     evaluations=len(ev.cache), runs=ev.runs,
                     seconds=time.monotonic() - t0, replications=ev.replications)  # fmt: skip
