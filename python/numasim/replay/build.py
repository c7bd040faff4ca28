"""A numasim workload from a real schedule: one process per traced thread.

The workload model draws an IO-bound process's bursts and waits from exponentials with given
means; it has no per-process sequence of bursts and sleeps. The smallest faithful replay it
can carry is taken (docs/workloads.md, "Replaying a real trace"):

- **demand**: the thread's CPU time in the trace, each running interval scaled by the speed of
  the CPU it ran on (work at speed 1.0);
- **kind**: ``io`` when it slept at least once, else ``cpu``; then ``burst_mean_ns`` is the
  mean CPU burst that ended in a sleep (the burst after the last sleep is cut by the thread's
  end, as numasim cuts its last burst to the demand left, so it does not count) and
  ``wait_mean_ns`` its mean sleep;
- **arrival** at its fork (or the trace's start, for a thread alive when the trace began),
  relative to the first kept thread's, **spawn CPU** the parent's CPU at the fork (else the
  CPU it first ran on);
- **mem** 0 unless asked: the traced CPU time already holds whatever memory stalls the real
  run had, and numasim's remote-memory factor would add to them;
- **thread groups** from the trace's tgid column (``record-tgid``, perf's ``pid/tid``), else one
  group per thread; pids renumbered 0, 1, … by arrival (the workload's rule), the traced pid
  kept in the mapping.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from numasim._core import InputError
from numasim.replay.closed import Closed, plans
from numasim.replay.schedule import Schedule, Thread

#: A private seed per process, from the import's seed and the process's index (splitmix64's
#: constants: far-apart seeds for neighbouring indices).
_GOLDEN = 0x9E3779B97F4A7C15
_MASK = (1 << 64) - 1


def _seed(seed: int, i: int) -> int:
    z = (seed + (i + 1) * _GOLDEN) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return (z ^ (z >> 31)) >> 11  # 53 bits: exact in JSON readers that use doubles


@dataclass
class Imported:
    """A workload made from a trace, and what the import left out or could not carry."""

    workload: dict[str, Any]
    #: numasim pid → the traced thread.
    threads: list[Thread]
    #: Trace time (ns) of the workload's time 0.
    t0_ns: int
    dropped_kernel: list[Thread] = field(default_factory=list)
    never_ran: list[Thread] = field(default_factory=list)
    not_selected: int = 0
    #: Kept threads alive when the trace began (they arrive at its start) and when it ended
    #: (their demand is the CPU time traced).
    alive_at_start: list[Thread] = field(default_factory=list)
    alive_at_end: list[Thread] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: A closed-loop import's plans and what became of its sleeps (``None``: open loop).
    closed: Closed | None = None

    def mapping(self) -> list[dict[str, Any]]:
        """One row per process: numasim pid, traced pid, name."""
        return [{"pid": i, "traced_pid": t.pid, "comm": t.comm} for i, t in enumerate(self.threads)]


def to_workload(
    sched: Schedule,
    speeds: list[float],
    origin: str,
    *,
    pids: set[int] | None = None,
    comm: str | None = None,
    keep_kernel: bool = False,
    mem: float = 0.0,
    seed: int = 0,
    closed_loop: bool = False,
) -> Imported:
    """The workload of ``sched`` on a machine whose CPUs run at ``speeds``: the traced threads
    in ``pids`` (or whose name matches ``comm``), per-CPU kernel threads left out unless
    ``keep_kernel`` (then pinned to their CPU, as the kernel has them). ``closed_loop``: each
    sleep whose waker is replayed waits for it (numasim.replay.closed), each thread group an
    application whose threads have consecutive pids."""
    if sched.cpus > len(speeds):
        raise InputError(
            f"{origin}: the trace has CPU {sched.cpus - 1}, the machine only "
            f"{len(speeds)} CPUs: give the machine the trace was taken on (--machine)"
        )
    try:
        pattern = re.compile(comm) if comm is not None else None
    except re.error as e:
        raise InputError(f"--comm: {comm!r} is not a regular expression: {e}") from None
    kept: list[Thread] = []
    out = Imported({}, [], 0)
    for t in sorted(sched.threads.values(), key=lambda t: (t.first_ts, t.pid)):
        if (pids is not None and t.pid not in pids) or (
            pattern is not None and not pattern.search(t.comm)
        ):
            out.not_selected += 1
        elif t.per_cpu_kthread is not None and not keep_kernel:
            out.dropped_kernel.append(t)
        elif not t.runs:
            out.never_ran.append(t)
        else:
            kept.append(t)
    if pids is not None:
        missing = sorted(pids - set(sched.threads))
        if missing:
            raise InputError(f"{origin}: no thread with pid {missing[0]} in the trace")
    if not kept:
        raise InputError(f"{origin}: no thread to replay (none selected ran in the trace)")
    t0 = kept[0].first_ts
    out.t0_ns = t0
    if closed_loop:  # an application's threads are consecutive pids: groups kept together
        first: dict[int, tuple[int, int]] = {}
        for t in kept:
            first.setdefault(_group(t), (t.first_ts, t.pid))
        kept.sort(key=lambda t: (first[_group(t)], t.first_ts, t.pid))
    leaders: dict[int, int] = {}  # traced tgid → numasim pid of its first kept thread
    processes = []
    for i, t in enumerate(kept):
        demand = round(sum((b - a) * speeds[c] for a, b, c in t.runs))
        woke = t.sleeps
        bursts = _bursts(t, speeds)
        spawn = t.fork_cpu if t.fork_cpu is not None else t.runs[0][2]
        tgid = leaders.setdefault(_group(t), i)
        p: dict[str, Any] = {
            "pid": i,
            "tgid": tgid,
            "arrival_ns": t.first_ts - t0,
            "demand_ns": max(1, demand),
            "kind": "io" if woke else "cpu",
            "mem": mem,
            "spawn_cpu": spawn,
            "burst_mean_ns": max(1, round(sum(bursts) / len(bursts) if bursts else demand))
            if woke
            else 0,
            "wait_mean_ns": max(1, round(sum(b - a for a, b, _ in woke) / len(woke)))
            if woke
            else 0,
            "seed": _seed(seed, i),
        }
        cpu = t.per_cpu_kthread
        if cpu is not None:
            p["affinity"] = [{"at_ns": 0, "cpus": str(cpu)}]
            p["spawn_cpu"] = cpu
            out.notes.append(f"pid {t.pid} ({t.comm}): a per-CPU kernel thread, pinned to {cpu}")
        processes.append(p)
        if t.exit_ts is None and t.state != "dead":
            out.alive_at_end.append(t)
        if t.fork_ts is None:
            out.alive_at_start.append(t)
        moved = [m for m in t.migrations if m[3] == "affinity"]
        if moved:
            out.notes.append(
                f"pid {t.pid} ({t.comm}): its CPUs were changed (sched_setaffinity) "
                f"{len(moved)} time(s); the replay does not pin it"
            )
    out.workload = {"processes": processes}
    out.threads = kept
    if closed_loop:
        _close(out, speeds)
    return out


def _group(t: Thread) -> int:
    """The thread group of ``t``: its traced tgid, else a group of its own."""
    return t.tgid if t.tgid is not None else -1 - t.pid


def _close(out: Imported, speeds: list[float]) -> None:
    """Turns ``out``'s processes into the threads of one application per thread group, their
    plans read from the trace (numasim.replay.closed)."""
    closed = plans(out.threads, speeds)
    processes = out.workload["processes"]
    apps = []
    for p, plan in zip(processes, closed.plans, strict=True):
        p["demand_ns"] = sum(s["work_ns"] for s in plan)
        p["kind"] = "cpu"  # its bursts and sleeps are its plan's
        p["burst_mean_ns"] = p["wait_mean_ns"] = 0
        if p["tgid"] == p["pid"]:
            apps.append({"tgid": p["pid"], "name": out.threads[p["pid"]].comm or "traced",
                         "footprint_mb": 0.0, "shared": 0.0, "points": closed.points,
                         "plans": [], "shared_points": True})  # fmt: skip
        apps[-1]["plans"].append(plan)
    out.workload["apps"] = apps
    out.closed = closed


def _bursts(t: Thread, speeds: list[float]) -> list[float]:
    """The work (at speed 1.0) of each CPU burst of ``t`` that ended in a sleep."""
    ends = {a for a, _, _ in t.sleeps}
    out, current = [], 0.0
    for a, b, c in t.runs:
        current += (b - a) * speeds[c]
        if b in ends:
            out.append(current)
            current = 0.0
    return out
