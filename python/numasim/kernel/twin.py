"""The numasim workload that is a kernel run's twin: the same loops, started the same way.

A kernel run (docs/kernel-runs.md) runs N busy loops in a guest; its twin is N CPU-bound
processes on the same machine:

1. **Demand**: more work than the window can hold (the window × the fastest CPU's speed, plus
   1 ms), so no process ends inside the window and everything numasim records there is what
   endless loops would get (the simulation is causal: what comes after the window cannot
   change what happened in it).
2. **Start**: ``fork`` — created one after another by a parent on CPU 0 (spawn CPU 0, placed
   by the policy's fork balancing); the parent is a process of its own (pid 0), kept on
   CPU 0 from the start until just after its last fork, as the kernel run's parent shell runs
   there while it forks; ``pinned`` — loop i allowed only CPU i mod CPUs, created
   there; ``released`` — every loop created on CPU 0 and allowed only CPU 0, then allowed every
   CPU at its release: the kernel's harness widens the loops' affinities one after another, so
   the releases are spread uniformly over the span it took (the median over its boots).
3. **Start times**: the first loop at once (1 µs after the parent in ``fork`` mode), the
   others uniform over the span the kernel took to start
   them (measured in its trace, the median over its boots), drawn from the seed: this is what
   differs between numasim's seeds (the engine is otherwise deterministic).
4. **Memory**: each loop its own group, its footprint the loops' resident memory (``mem_mb``
   when they touch memory, else ``LOOP_RSS_MB``), so NUMA balancing scans what the kernel's
   scans; memory intensity 0 for pure loops (their few pages stay in cache), numasim's default
   0.5 for loops that touch their buffer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from numasim import _core
from numasim.machine import Machine
from numasim.sim import Workload

#: Resident memory of one busy loop (a shell running ``while :; do :; done``), MB: a modelling
#: choice of the order of a busybox shell's resident set, which the records do not hold.
LOOP_RSS_MB = 1.0
#: Memory intensity of loops that touch their buffer (numasim's default for CPU-bound work).
TOUCH_MEM = 0.5
MS = 1_000_000
#: When the parent shell of a ``fork`` run forks its first loop, and how long it works after
#: its last: a modelling choice (the records time the forks, not the shell's own work).
PARENT_NS = 1_000


@dataclass(frozen=True)
class Twin:
    """How a kernel run started its loops (read from its file's ``workload`` and trace)."""

    tasks: int
    start: str
    window_ns: int
    release_ns: int | None = None
    #: Span over which the kernel widened the loops' affinities (first to last), ns.
    release_span_ns: int = 0
    mem_mb: float = 0.0
    #: Span over which the kernel started its loops (first to last), ns.
    start_span_ns: int = 0
    numa_balancing: bool = True

    def policy(self, base: str = "linux") -> str:
        """``base`` with the run's NUMA balancing setting when it is ``linux`` and does not set
        it itself (other policies as given)."""
        name, _, options = base.partition(":")
        if name != "linux" or "numa_balancing=" in options:
            return base
        setting = f"numa_balancing={'on' if self.numa_balancing else 'off'}"
        return f"linux:{options},{setting}" if options else f"linux:{setting}"

    @property
    def parent(self) -> bool:
        """Whether the twin has the kernel's parent shell: in ``fork`` mode it runs on CPU 0
        while it forks the loops, so fork balancing sees CPU 0 busy."""
        return self.start == "fork"

    @property
    def loops(self) -> range:
        """The pids of the loops (the parent, when there is one, is pid 0)."""
        first = int(self.parent)
        return range(first, first + self.tasks)

    def workload(self, machine: Machine, seed: int) -> Workload:
        """The twin workload for ``seed``."""
        cpus = machine.cpus
        fastest = max(machine.speeds)
        demand = int(self.window_ns * fastest) + MS
        rng = np.random.Generator(np.random.PCG64(seed))
        offsets = [0, *sorted(int(x) for x in rng.uniform(0, self.start_span_ns, self.tasks - 1))]
        release = self.release_ns or 0
        releases = sorted(
            release + int(x) for x in rng.uniform(0, self.release_span_ns, self.tasks)
        )
        everything = f"0-{cpus - 1}"
        processes, apps = [], []

        def add(pid: int, arrival: int, work: int, mem: float, footprint: float, spawn: int):
            processes.append({"pid": pid, "tgid": pid, "arrival_ns": arrival, "demand_ns": work,
                              "kind": "cpu", "mem": mem, "spawn_cpu": spawn, "burst_mean_ns": 0,
                              "wait_mean_ns": 0, "seed": pid})  # fmt: skip
            apps.append({"tgid": pid, "name": "loop", "footprint_mb": footprint, "shared": 0.0,
                         "points": 0, "plans": [[{"work_ns": work}]]})  # fmt: skip
            return processes[-1]

        if self.parent:
            # Forks from 1 µs on; it works until the last fork, then waits (leaves the CPU).
            parent = add(0, 0, self.start_span_ns + PARENT_NS, 0.0, LOOP_RSS_MB, 0)
            parent["affinity"] = [{"at_ns": 0, "cpus": "0"}]
        footprint = self.mem_mb if self.mem_mb > 0 else LOOP_RSS_MB
        mem = TOUCH_MEM if self.mem_mb > 0 else 0.0
        for i, (pid, offset) in enumerate(zip(self.loops, offsets, strict=True)):
            arrival = offset + (PARENT_NS if self.parent else 0)
            spawn = i % cpus if self.start == "pinned" else 0
            row = add(pid, arrival, demand, mem, footprint, spawn)
            if self.start == "pinned":
                row["affinity"] = [{"at_ns": 0, "cpus": str(spawn)}]
            elif self.start == "released" and (widened := max(arrival, releases[i])) > 0:
                row["affinity"] = [
                    {"at_ns": 0, "cpus": "0"},
                    {"at_ns": widened, "cpus": everything},
                ]
        text = json.dumps({"processes": processes, "apps": apps})
        w = Workload(_core.Workload.from_json(text, "the twin workload"))
        w._core.validate(machine._core, "the twin workload")
        return w
