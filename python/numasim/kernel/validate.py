"""``numasim validate``: a kernel's runs beside numasim's runs of their twin workload.

1. Read the kernel runs (the boots of one ``numasim kernel-run``: one machine, one workload).
2. Build the machine from the runs' distance table and CPUs, and the twin workload
   (numasim.kernel.twin) with the start and release spans the kernel took.
3. Run numasim over ``seeds`` seeds (traced), in a process pool; measure each run with
   numasim.kernel.compare, the same metrics as each boot.
4. Per metric: the kernel's mean, interval and range over its boots, numasim's over its seeds,
   their ratio, and where numasim's mean lies against the kernel's run-to-run range: inside it
   ("in range"), within 1.5× of it ("≤ 1.5×"), or "outside".
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable, Sequence
from concurrent.futures import as_completed
from dataclasses import dataclass

from numasim import _core
from numasim._core import InputError
from numasim.kernel.compare import UNDEFINED_WITHOUT_GAPS, Observed, observe_kernel, observe_sim
from numasim.kernel.schema import KernelRun
from numasim.kernel.twin import Twin
from numasim.machine import Machine
from numasim.stats import t_interval

#: How far outside the kernel's run-to-run range a value may lie and still be "close".
CLOSE = 1.5


def machine_text(run: KernelRun) -> str:
    """The machine a kernel run booted, as a machine file's JSON: its CPUs and distances."""
    m = run.machine
    spec = {"name": m.name, "description": f"the machine of a kernel run ({m.name})",
            "source": "the distance table and CPUs a kernel run booted with",
            "cpus": [len(c) for c in m.cpus], "distances": m.slit}  # fmt: skip
    return json.dumps(spec)


def _machine(text: str) -> Machine:
    return Machine(_core.Machine.from_json_str(text, "the kernel run's machine"))


def check_same(runs: Sequence[tuple[str, KernelRun]]) -> None:
    """Every run, named by where it was read, is a boot of the same machine and workload
    (else an InputError naming the first that is not)."""
    if not runs:
        raise InputError("validate: no kernel runs")
    name, first = runs[0]
    for other, r in runs[1:]:
        for what in ("machine", "workload"):
            if getattr(r, what) != getattr(first, what):
                raise InputError(
                    f"{other}: another {what} than {name}; validate the boots of one "
                    "kernel-run at a time"
                )


def twin_of(runs: Sequence[KernelRun]) -> Twin:
    """The twin workload of the boots of one workload: spans are medians over the boots."""
    w = runs[0].workload
    spans = []
    for r in runs:
        window = r.window.end_ns - r.window.start_ns
        starts = [window - t.alive_ns for t in r.tasks]
        spans.append(max(starts) - min(starts) if starts else 0)
    release_ns = None if w.release_ms is None else w.release_ms * 1_000_000
    first = [r.window.release_ns for r in runs if r.window.release_ns is not None]
    widened = [
        r.window.released_ns - r.window.release_ns
        for r in runs
        if r.window.release_ns is not None and r.window.released_ns is not None
    ]
    if first:  # when the guest really widened the affinities
        release_ns = int(statistics.median(first))
    return Twin(
        tasks=w.tasks,
        start=w.start,
        window_ns=int(w.window_s * 1e9),
        release_ns=release_ns,
        release_span_ns=int(statistics.median(widened)) if widened else 0,
        mem_mb=float(w.mem_mb),
        start_span_ns=int(statistics.median(spans)) if spans else 0,
        numa_balancing=w.numa_balancing,
    )


def level_names(machine: Machine, builder: str = "linux") -> dict[int, str]:
    """Level index → its name in the first CPU's domains (``MC``, ``NUMA``)."""
    levels = machine.domains(builder)["cpus"]["0"] if machine.cpus else []
    return {i: lv["name"] for i, lv in enumerate(levels)}


def level_cpus(machine: Machine, builder: str) -> dict[int, int]:
    """Level index → how many CPUs have a domain at that level."""
    counts: dict[int, int] = {}
    for levels in machine.domains(builder)["cpus"].values():
        for i in range(len(levels)):
            counts[i] = counts.get(i, 0) + 1
    return counts


def run_seed(machine_json: str, twin: Twin, policy: str, seed: int) -> dict[str, float]:
    """One seed of numasim's side: the metrics of a traced run of the twin workload."""
    from numasim.sim import default_domains, simulate

    machine = _machine(machine_json)
    workload = twin.workload(machine, seed)
    spec = twin.policy(policy)
    builder = default_domains(spec)
    result = simulate(machine, workload, spec, builder, trace=True)
    arrivals = [p["arrival_ns"] for p in json.loads(workload._core.to_json())["processes"]]
    tasks = list(twin.loops)
    alive = [twin.window_ns - arrivals[pid] for pid in tasks]
    cpus = level_cpus(machine, builder)
    return observe_sim(result.raw, machine, twin.window_ns, tasks, alive, cpus).values


@dataclass
class Row:
    """One metric over the kernel's boots and numasim's seeds."""

    metric: str
    kernel: list[float]
    sim: list[float]

    @staticmethod
    def stats(side: list[float], confidence: float) -> tuple[float, float, float, float]:
        """(mean, half-width, min, max) of one side's values."""
        if not side:
            return math.nan, math.nan, math.nan, math.nan
        mean, _, half = t_interval(side, confidence)
        return mean, half, min(side), max(side)

    def verdict(self) -> str:
        """``in range``, ``≤ 1.5×`` or ``outside``: numasim's mean against the kernel's range
        over its boots; empty when either side has no value."""
        if not self.kernel or not self.sim:
            return ""
        lo, hi = min(self.kernel), max(self.kernel)
        mean = statistics.fmean(self.sim)
        if lo <= mean <= hi:
            return "in range"
        if lo / CLOSE <= mean <= hi * CLOSE:
            return f"≤ {CLOSE:g}×"
        return "outside"


@dataclass
class Validation:
    """A kernel's boots and numasim's seeds, metric by metric."""

    policy: str
    twin: Twin
    machine: Machine
    runs: list[KernelRun]
    kernel: list[Observed]
    sim: list[dict[str, float]]
    levels: dict[int, str]

    def rows(self) -> list[Row]:
        """Every metric either side has, in report order (kinds, distances, the rest)."""
        names: list[str] = []
        for values in [o.values for o in self.kernel] + self.sim:
            names += [k for k in values if k not in names]
        names.sort(key=_order)
        kernel = [o.values for o in self.kernel]
        return [Row(n, _column(n, kernel), _column(n, self.sim)) for n in names]


def _column(metric: str, runs: Sequence[dict[str, float]]) -> list[float]:
    """A metric over runs: a count a run lacks is 0; a statistic of gaps a run has none of
    (no task moved twice) is left out."""
    if metric in UNDEFINED_WITHOUT_GAPS:
        return [r[metric] for r in runs if metric in r]
    return [r.get(metric, 0.0) for r in runs]


def _order(metric: str) -> tuple[int, str]:
    from numasim.kernel.compare import KINDS

    head, _, rest = metric.partition("/")
    if head == "migrations":
        if rest in KINDS:
            return (0, f"{KINDS.index(rest):02d}")
        if rest.startswith("distance"):
            return (1, rest.rsplit(" ", 1)[1].rjust(4))
        return (2, rest)
    return ({"passes": 3, "active": 4}.get(head, 5), metric)


def validate(
    runs: Sequence[KernelRun],
    policy: str = "linux",
    seeds: int = 20,
    jobs: int = 1,
    progress: Callable[[], None] | None = None,
) -> Validation:
    """Runs numasim on the twin of ``runs`` (the boots of one workload: ``check_same``) over
    ``seeds`` seeds."""
    from numasim.experiment import _executor

    text = machine_text(runs[0])
    machine = _machine(text)
    twin = twin_of(runs)
    kernel = [observe_kernel(r) for r in runs]
    sims: list[dict[str, float]] = [{} for _ in range(seeds)]
    with _executor(jobs, None) as ex:
        futures = {ex.submit(run_seed, text, twin, policy, s): s for s in range(seeds)}
        for f in as_completed(futures):
            sims[futures[f]] = f.result()
            if progress:
                progress()
    levels = {**level_names(machine), **kernel[0].levels}
    return Validation(policy, twin, machine, list(runs), kernel, sims, levels)
