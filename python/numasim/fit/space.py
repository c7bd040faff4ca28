"""What ``numasim fit`` searches: the discrete modelling assumptions and at most three continuous
parameters, each with its documented physical range, and how a point of that space becomes an
experiment's setting.

```
point = {discrete: memory, slice, wake, exec, cost (kernel | paper)}
        + {continuous, each scaled to [0, 1] for the optimiser}
   m             memory intensity of CPU-bound processes   0.05 … 0.95     linear
   cost_scale    the S of cost=paper:S                      1 … 1000        log
   remote_scale  the R of remote=scaled:R                   1 … 3           linear
   ──► Setting(assume="memory=…,slice=…,wake=…,exec=…,cost=paper:S,…,remote=scaled:R", m=…)
```

1. A discrete assumption is searched when it can change the experiment: ``exec`` only with
   IO-bound processes; ``cost`` always. The default search is ``memory``, ``exec`` and ``cost``:
   the readings no sentence settles (docs/assumptions.md); ``--discrete`` names others.
2. ``m`` is searched when the open choice ``m`` applies (CPU-bound or mixed workloads without
   ``mem``/``mem_cpu``); ``cost_scale`` only when ``cost=paper``; ``remote_scale`` always (every
   workload has memory); R = 1 is ``remote=slit``.
3. A setting is the experiment's own resolved assumptions with the searched ones set, and ``m``
   set through the open choice (``choices.apply``), exactly as ``--ablate`` sets it.

Ranges: ``m`` is a share of a process's all-local running time spent waiting on memory, so it
lies in (0, 1); the ends (a process that never, or only, waits on memory) are left out.
``cost_scale`` runs from the kernel's rates (1) to one runqueue examined costing a whole 1 ms
tick (1000): ``Cost::SCALE_MIN``/``SCALE_MAX`` of the core (data/assumptions.toml, ``cost``).
``remote_scale`` runs from the SLIT distance itself (1) to three times it (3):
``Remote::SCALE_MIN``/``SCALE_MAX`` (data/assumptions.toml, ``remote``). For one process the
slowdown is 1 + m·R·(L_slit − 1): m and R trade off exactly where every process has the same m,
and only processes of another intensity (IO-bound ones, ``mem_io``) or the remote factor itself
tell them apart, so on a CPU-bound table their profiles show a ridge, not a point.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from numasim import assumptions as assume
from numasim import choices
from numasim._core import InputError


@dataclass(frozen=True)
class Continuous:
    name: str
    low: float
    high: float
    log: bool
    meaning: str

    def value(self, u: float) -> float:
        """The parameter at ``u`` in [0, 1]."""
        u = min(1.0, max(0.0, u))
        if self.log:
            return math.exp(math.log(self.low) + u * (math.log(self.high) - math.log(self.low)))
        return self.low + u * (self.high - self.low)

    def unit(self, value: float) -> float:
        """``value`` scaled to [0, 1]."""
        if self.log:
            return (math.log(value) - math.log(self.low)) / (
                math.log(self.high) - math.log(self.low)
            )
        return (value - self.low) / (self.high - self.low)


#: The continuous parameters, with their physical ranges (module doc).
CONTINUOUS = {
    "m": Continuous("m", 0.05, 0.95, False,
                    "memory intensity of CPU-bound processes (open choice m, workload key "
                    "mem_cpu)"),
    "cost_scale": Continuous("cost_scale", 1.0, 1000.0, True,
                             "the scale S of cost=paper:S (1: the kernel's rates; 1000: a 1 ms "
                             "tick per runqueue examined)"),
    "remote_scale": Continuous("remote_scale", 1.0, 3.0, False,
                               "the scale R of remote=scaled:R (1: a remote access costs its "
                               "SLIT distance / 10; 3: three times that)"),
}  # fmt: skip

DEFAULT_DISCRETE = ("memory", "exec", "cost")


@dataclass(frozen=True)
class Setting:
    """One point: the full resolved assumptions (canonical text) and ``m`` (None: the
    experiment's own, where the choice does not apply or is not searched)."""

    assume: str
    m: float | None

    def label(self) -> str:
        return self.assume + (f", m={self.m:.3g}" if self.m is not None else "")


@dataclass(frozen=True)
class Space:
    """The searched space of one experiment."""

    base: dict[str, str]
    discrete: dict[str, tuple[str, ...]]
    continuous: tuple[str, ...]

    def combos(self) -> list[dict[str, str]]:
        """Every combination of the discrete values, in registry order."""
        names = list(self.discrete)
        return [dict(zip(names, vals, strict=True))
                for vals in itertools.product(*(self.discrete[n] for n in names))]  # fmt: skip

    def active(self, combo: dict[str, str]) -> list[Continuous]:
        """The continuous parameters that act under ``combo``."""
        out = []
        for name in self.continuous:
            if name == "cost_scale" and combo.get("cost", self.base["cost"]) == "kernel":
                continue
            out.append(CONTINUOUS[name])
        return out

    def setting(self, combo: dict[str, str], values: dict[str, float]) -> Setting:
        resolved = {**self.base, **combo}
        if resolved["cost"] != "kernel":
            scale = values.get("cost_scale")
            resolved["cost"] = "paper" if scale is None else f"paper:{scale:.6g}"
        if "remote_scale" in values:
            # scaled:1 is slit: the core prints it so
            resolved["remote"] = f"scaled:{values['remote_scale']:.6g}"
        text = assume.canonical(assume.resolve(assume.canonical(resolved), "fit"))
        return Setting(text, values.get("m"))


def build(exp, discrete: list[str] | None, continuous: list[str] | None) -> Space:
    """The space of ``exp`` (module doc, steps 1–2); bad names are an InputError."""
    names = assume.names()
    wanted = list(DEFAULT_DISCRETE if discrete is None else discrete)
    for n in wanted:
        if n not in names:
            raise InputError(
                f"--discrete: unknown assumption '{n}'; choose from {', '.join(names)}"
            )
    io = any(choices.has_io(w) for w in exp.workloads)
    space_d = {}
    for n in names:  # registry order
        if n not in wanted or (n == "exec" and not io):
            continue
        space_d[n] = tuple(assume.entry(n)["values"])
    cont = list(CONTINUOUS if continuous is None else continuous)
    for c in cont:
        if c not in CONTINUOUS:
            raise InputError(
                f"--continuous: unknown parameter '{c}'; choose from {', '.join(CONTINUOUS)}"
            )
    if len(cont) > len(CONTINUOUS):
        raise InputError("--continuous: at most three parameters")
    if "m" in cont and choices.current(choices.entry("m"), exp) is None:
        cont.remove("m")  # no workload it applies to
    if "cost_scale" in cont and "cost" not in space_d and exp.assumptions["cost"] == "kernel":
        cont.remove("cost_scale")
    return Space(dict(exp.assumptions), space_d, tuple(cont))


def apply(exp, setting: Setting):
    """A copy of ``exp`` run under ``setting`` (module doc, step 3)."""
    import copy

    out = copy.copy(exp)
    out.assume = setting.assume
    if setting.m is not None:
        out = choices.apply(choices.entry("m"), f"{setting.m:.6g}", out)
    return out
