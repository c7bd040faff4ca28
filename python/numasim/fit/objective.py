"""The fit's objective: how far an experiment simulated under one setting is from its published
table.

```
published [reference]                     simulated under a Setting (common random numbers)
  rows: (workload, n) → baseline, policy    x[cell, column, r]  mean turnaround of replication r
  or:   average_gain_pct                    the same seeds for every setting
                  │                                   │
                  └──────── J = mean over published numbers of (ln numasim − ln published)²
                            (rows: baseline and policy columns, absolute values of the
                            experiment's metric, mean turnaround unless it says), or
                            ((gain numasim − gain published) / 100)² for an average gain
```

1. The cells are the table's (workload, n) pairs on the experiment's first machine; a file with
   only an average gain uses every cell of its sweep and numasim's mean gain over them
   (as the reproduction report compares them).
2. Replication r of a cell has the seed ``experiment.replication_seed`` gives, whatever the
   setting: every setting is compared on the same workloads (common random numbers), so the
   differences between settings are not blurred by drawing new workloads.
3. J's noise is its jackknife standard error over the replications (leave one out, recompute J):
   what the fit's uncertainty is measured against.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np

from numasim import experiment as ex
from numasim.fit.space import Setting, apply


@dataclass(frozen=True)
class Target:
    """The published numbers one fit is held to."""

    machine: str
    #: ``(workload, n)`` of every simulated cell.
    cells: list[tuple[str, int]]
    #: ``(cell index, column, published)``: column 0 the baseline, 1 the compared policy.
    points: list[tuple[int, int, float]]
    #: The published average gain (%) when the file gives only that.
    average_gain_pct: float | None

    @property
    def size(self) -> int:
        return len(self.points) if self.points else 1


def target(exp) -> Target:
    """Step 1: the cells and published numbers of ``exp``'s ``[reference]``; InputError if it
    has none a fit can use."""
    from numasim._core import InputError

    ref = exp.reference
    if ref is None:
        raise InputError(f"{exp.origin}: no [reference] table: nothing to fit")
    if exp.metric in ex.APP_RUN_METRICS:
        raise InputError(
            f"{exp.origin}: metric: {exp.metric} is a metric of applications; fit compares "
            "run metrics (mean turnaround, counts)"
        )
    machine = exp.machines[0]
    cells, points = [], []
    for (workload, n), (base, pol, _) in ref.rows.items():
        if base is None and pol is None:
            continue
        cells.append((workload, n))
        # A log ratio needs a positive published value; a 0 is left out.
        if base is not None and base > 0:
            points.append((len(cells) - 1, 0, float(base)))
        if pol is not None and pol > 0:
            points.append((len(cells) - 1, 1, float(pol)))
    if points:
        return Target(machine, cells, points, None)
    if ref.average_gain_pct is None:
        raise InputError(
            f"{exp.origin}: reference: only gains per cell, no turnarounds or average gain to fit"
        )
    cells = [(w.name, n) for w in exp.workloads for n in exp.ns_of(w)]
    return Target(machine, cells, [], float(ref.average_gain_pct))


#: Where a simulated value of 0 (a count) is read in the log ratio.
TINY = 1e-9


class Evaluator:
    """Simulates settings and scores them (steps 2–3), remembering every setting it ran."""

    def __init__(self, exp, tgt: Target, replications: int, executor=None) -> None:
        from numasim.machine import Machine

        self.exp, self.target, self.replications = exp, tgt, replications
        self.machine_json = json.dumps(Machine.load(tgt.machine).info)
        self.executor = executor
        self.cache: dict[Setting, np.ndarray] = {}
        self.runs = 0

    def _variants(self, e) -> list[tuple[str, str, str]]:
        # The compared policy: the one the table is of (the first without a table).
        label = e.reference.policy if e.reference else e.policies[0].label
        pol = next(v for v in e.policies if v.label == label)
        return [(v.label, v.policy, v.domains) for v in (e.baseline, pol)]

    def values(self, s: Setting) -> np.ndarray:
        """``x[cell, column, r]``: the experiment's metric (mean turnaround unless its file says
        otherwise) for each cell, column and replication."""
        if s in self.cache:
            return self.cache[s]
        e = apply(self.exp, s)
        variants = self._variants(e)
        specs = {w.name: w.spec for w in e.workloads}
        assumed = ",".join(f"{k}={v}" for k, v in e.assumptions.items())
        tasks = []
        for workload, n in self.target.cells:
            reps = [(r, ex.replication_seed(e.seed, self.target.machine, workload, n, r))
                    for r in range(self.replications)]  # fmt: skip
            tasks.append((self.machine_json, specs[workload], n, reps, variants, assumed))
        if self.executor is None:
            results = [ex.run_batch(*t) for t in tasks]
        else:
            results = [f.result() for f in [self.executor.submit(ex.run_batch, *t) for t in tasks]]
        metric = self.exp.metric
        x = np.array([[[rows[r * 2 + c][metric] for r in range(self.replications)]
                       for c in range(2)] for rows in results])  # fmt: skip
        self.runs += x.size
        self.cache[s] = x
        return x

    def score(self, x: np.ndarray) -> float:
        """J of the per-replication values ``x`` (module doc)."""
        mean = x.mean(axis=2)
        if self.target.points:
            return float(np.mean([(math.log(max(mean[i, c], TINY)) - math.log(v)) ** 2
                                  for i, c, v in self.target.points]))  # fmt: skip
        gains = (mean[:, 0] - mean[:, 1]) / mean[:, 0] * 100
        return float(((gains.mean() - self.target.average_gain_pct) / 100) ** 2)

    def objective(self, s: Setting) -> float:
        return self.score(self.values(s))

    def noise(self, s: Setting) -> float:
        """Step 3: the jackknife standard error of J at ``s``."""
        x = self.values(s)
        r = x.shape[2]
        if r < 2:
            return float("nan")
        loo = np.array([self.score(np.delete(x, i, axis=2)) for i in range(r)])
        return float(math.sqrt((r - 1) / r * np.sum((loo - loo.mean()) ** 2)))

    def residuals(self, s: Setting) -> list[dict]:
        """Each published number beside numasim's under ``s``."""
        mean = self.values(s).mean(axis=2)
        if not self.target.points:
            gains = (mean[:, 0] - mean[:, 1]) / mean[:, 0] * 100
            g = float(gains.mean())
            return [{"what": "average gain %", "published": self.target.average_gain_pct,
                     "numasim": round(g, 3),
                     "difference_pp": round(g - self.target.average_gain_pct, 3)}]  # fmt: skip
        out = []
        for i, c, v in self.target.points:
            workload, n = self.target.cells[i]
            out.append({"workload": workload, "n": n,
                        "column": ("baseline", "policy")[c], "published": v,
                        "numasim": round(float(mean[i, c]), 3),
                        "residual_pct": round((float(mean[i, c]) / v - 1) * 100, 3)})  # fmt: skip
        return out
