"""What a run decided, measured the same way in a real kernel and in numasim.

```
 kernel run (one boot)                      numasim run (one seed, traced)
 ──────────────────────                     ───────────────────────────────
 migrations: kind from the call stack       trace_events.migrations: the policy's kind
 passes: /proc/schedstat lb_count deltas    trace_events.balances: one per balancing attempt
          per CPU, domain, idle type                  idle type from the runqueue trace
                 │                                             │
                 └──────────────► Observed ◄───────────────────┘
                     metric name → value, normalised by guest time
```

Every metric is a rate or a share, so boots of different lengths and numasim's runs compare:

- ``migrations/<kind>``, ``migrations/distance <d>``, ``migrations/all``: migrations of the
  workload's tasks per task-second (one task alive for one second of guest time in the
  window). ``all`` and the distances count moves: every migration but fork placements and
  moves forced by an affinity change;
- ``passes/<level>/<idle type>``: balancing passes (``sched_balance_rq`` calls, as schedstat's
  ``lb_count`` counts them: also those ``should_we_balance`` turns away) per second of each CPU
  that has the level, by domain level and idle type (``idle``, ``busy``, ``newly_idle``);
- ``active/<level>``: active balances that moved a task (schedstat ``alb_pushed``, counted at
  the pulling CPU's lowest level spanning the source) per second of each CPU with the level;
- ``tasks moved``: the share of tasks moved at least once;
- ``gap median ms`` and ``gaps < 20 ms``: between two successive moves of one task.

Kinds are the kernel's call paths (docs/kernel-runs.md). numasim's map onto them with the
balancing attempt that made the move (``sim_migrations``): a pull by a newly-idle attempt →
newidle, by a periodic attempt done on the CPU's behalf by a kicked CPU → nohz_idle (the
idle-load balancer's), by the CPU's own periodic attempt → periodic; ``active`` → active
(numa_move when the per-task tick made it, as NUMA balancing's moves are), ``exchange`` →
numa_swap, ``placement`` → fork, ``wakeup``, ``affinity`` as they are, anything else → other.
``periodic + nohz_idle`` is the sum to hold a model that balances idle CPUs on their own
timers against.
"""

from __future__ import annotations

import bisect
import itertools
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from numasim.kernel.parse import KINDS as KERNEL_KINDS

if TYPE_CHECKING:
    from numasim.kernel.schema import KernelRun
    from numasim.machine import Machine

#: Migration kinds in report order: the kernel's, with the periodic + nohz_idle sum after them.
KINDS = (*KERNEL_KINDS[:2], "periodic + nohz_idle", *KERNEL_KINDS[2:])
#: Migrations that are not moves: placement at fork, and a move an affinity change forced.
NOT_MOVES = frozenset({"fork", "affinity"})
#: Metrics a run without two moves of one task does not define.
UNDEFINED_WITHOUT_GAPS = frozenset({"gap median ms", "gaps < 20 ms"})
#: A gap between two moves of one task shorter than this counts as a quick bounce.
QUICK_GAP_MS = 20.0
NS = 1e9

#: numasim's migration kinds → the kernel's (pulls are told apart by their attempt).
SIM_KIND = {"active": "active", "exchange": "numa_swap", "placement": "fork", "wakeup": "wakeup",
            "affinity": "affinity"}  # fmt: skip


@dataclass
class Observed:
    """The metrics of one run (a boot, or one seed of numasim)."""

    values: dict[str, float] = field(default_factory=dict)
    #: Level index → the level's name (``MC``, ``NUMA``), for labels.
    levels: dict[int, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Migration:
    t_ns: int
    pid: int
    src: int
    dst: int
    kind: str


def task_moves(migrations: Iterable[Migration]) -> dict[int, list[int]]:
    """Each task's move times, in order (fork placements and forced moves left out)."""
    moves: dict[int, list[int]] = defaultdict(list)
    for m in migrations:
        if m.kind not in NOT_MOVES:
            moves[m.pid].append(m.t_ns)
    for ts in moves.values():
        ts.sort()
    return moves


def gaps_ms(moves: Mapping[int, Sequence[int]]) -> list[float]:
    """The gaps between each task's successive moves, ms, sorted."""
    return sorted((b - a) / 1e6 for ts in moves.values() for a, b in itertools.pairwise(ts))


def median(xs: Sequence[float]) -> float:
    """The median of sorted ``xs``."""
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def observe(
    migrations: Sequence[Migration],
    passes: Mapping[tuple[int, str], float],
    active: Mapping[int, float],
    *,
    tasks: Sequence[int],
    task_seconds: float,
    cpu_seconds: Mapping[int, float],
    distance: Callable[[int, int], int],
    levels: Mapping[int, str],
) -> Observed:
    """The metrics of one run from its migrations (of the workload's tasks, in the window),
    its pass counts per (level, idle type) and active balances per level, and its task- and
    CPU-seconds (per level: of the CPUs that have it). ``distance(src_cpu, dst_cpu)`` gives
    the SLIT distance of a move."""
    v: dict[str, float] = {}
    by_kind: dict[str, int] = defaultdict(int)
    by_distance: dict[int, int] = defaultdict(int)
    for m in migrations:
        by_kind[m.kind] += 1
        if m.kind not in NOT_MOVES:
            by_distance[distance(m.src, m.dst)] += 1
    by_kind["periodic + nohz_idle"] = by_kind["periodic"] + by_kind["nohz_idle"]
    for kind in KINDS:
        v[f"migrations/{kind}"] = by_kind[kind] / task_seconds
    for d in sorted(by_distance):
        v[f"migrations/distance {d}"] = by_distance[d] / task_seconds
    v["migrations/all"] = sum(by_distance.values()) / task_seconds
    for (level, idle), count in sorted(passes.items()):
        v[f"passes/{level}/{idle}"] = count / cpu_seconds[level]
    for level, count in sorted(active.items()):
        v[f"active/{level}"] = count / cpu_seconds[level]
    moves = task_moves(migrations)
    v["tasks moved"] = sum(1 for pid in tasks if moves.get(pid)) / max(1, len(tasks))
    gaps = gaps_ms(moves)
    if gaps:
        v["gap median ms"] = median(gaps)
        v["gaps < 20 ms"] = sum(1 for g in gaps if g < QUICK_GAP_MS) / len(gaps)
    return Observed(values=v, levels=dict(levels))


# ---------------------------------------------------------------------------------------------
# numasim's side


def sim_migrations(raw: Mapping[str, Any], window_ns: int, tasks: Iterable[int]) -> list[Migration]:
    """A traced numasim run's migrations of ``tasks`` in ``[0, window_ns]``, with the kernel's
    kind names. numasim's kinds say who moved a task (``pull``: a busy CPU, ``idle``: an idle
    one, ``active``: a migration thread); the balancing attempt recorded at the same instant
    says why: at the destination, ``newidle`` → newidle, ``kicked`` (balanced on its behalf by
    a kicked CPU) → nohz_idle, ``periodic`` → periodic; at the source, the tick's work
    (``other``) → numa_move."""
    te = raw["trace_events"]
    why: dict[tuple[int, int], str] = {}
    for t, cpu, _level, kind, moved in te["balances"]:
        if moved and t <= window_ns:
            why.setdefault((t, cpu), kind)
    wanted = set(tasks)
    out = []
    for t, pid, src, dst, kind in te["migrations"]:
        if t > window_ns or pid not in wanted:
            continue
        k = SIM_KIND.get(kind, "other")
        if kind in ("pull", "idle"):
            k = {"newidle": "newidle", "kicked": "nohz_idle"}.get(why.get((t, dst), ""), "periodic")
        elif kind == "active" and why.get((t, src)) == "other":
            k = "numa_move"
        out.append(Migration(t, pid, src, dst, k))
    return out


def observe_sim(
    raw: Mapping[str, Any],
    machine: Machine,
    window_ns: int,
    tasks: Sequence[int],
    alive_ns: Sequence[int],
    level_cpus: Mapping[int, int],
) -> Observed:
    """The metrics of a traced numasim run (``Result.raw``) over ``[0, window_ns]``; its
    domains have ``level_cpus[l]`` CPUs with a level ``l``."""
    te = raw["trace_events"]
    idle_at = _idle_lookup(te["runqueue"], machine.cpus)
    passes: dict[tuple[int, str], float] = defaultdict(float)
    active: dict[int, float] = defaultdict(float)
    for t, cpu, level, kind, moved in te["balances"]:
        if t > window_ns or cpu >= machine.cpus:
            continue
        if kind in ("periodic", "kicked"):
            passes[(level, "idle" if idle_at(cpu, t) else "busy")] += 1
        elif kind == "newidle":
            passes[(level, "newly_idle")] += 1
        elif kind == "active" and moved:
            active[level] += 1
    dist = machine.distances
    node = {cpu: n for n in range(machine.nodes) for cpu in machine.node_cpus(n)}
    return observe(
        sim_migrations(raw, window_ns, tasks), passes, active,
        tasks=tasks,
        task_seconds=sum(alive_ns) / NS,
        cpu_seconds={level: n * window_ns / NS for level, n in level_cpus.items()},
        distance=lambda a, b: dist[node[a]][node[b]],
        levels={},
    )  # fmt: skip


def _idle_lookup(runqueue: Sequence[Sequence[int]], cpus: int) -> Callable[[int, int], bool]:
    """``idle(cpu, t)``: whether the CPU had nothing to run just before ``t`` (from the
    runqueue trace: ``(t, cpu, nr_running)`` at every change; a CPU starts empty)."""
    times: list[list[int]] = [[] for _ in range(cpus)]
    counts: list[list[int]] = [[] for _ in range(cpus)]
    for t, cpu, nr in runqueue:
        times[cpu].append(t)
        counts[cpu].append(nr)

    def idle(cpu: int, t: int) -> bool:
        i = bisect.bisect_left(times[cpu], t)
        return i == 0 or counts[cpu][i - 1] == 0

    return idle


# ---------------------------------------------------------------------------------------------
# The kernel's side


def kernel_migrations(run: KernelRun) -> list[Migration]:
    """A boot's migrations of its loops inside the window."""
    window_ns = run.window.end_ns - run.window.start_ns
    return [Migration(m.t_ns, m.pid, m.from_, m.to, m.kind) for m in run.migrations
            if 0 <= m.t_ns <= window_ns]  # fmt: skip


def observe_kernel(run: KernelRun) -> Observed:
    """The metrics of one boot's record."""
    slit = run.machine.slit
    node = {cpu: n for n, cpus in enumerate(run.machine.cpus) for cpu in cpus}
    passes: dict[tuple[int, str], float] = defaultdict(float)
    active: dict[int, float] = defaultdict(float)
    levels: dict[int, str] = {}
    cpus: dict[int, int] = defaultdict(int)
    for p in run.passes:
        levels.setdefault(p.level, p.name or f"L{p.level}")
        cpus[p.level] += 1
        for idle, count in p.lb_count.model_dump().items():
            passes[(p.level, idle)] += count
        active[p.level] += p.alb_pushed
    return observe(
        kernel_migrations(run), passes, active,
        tasks=[t.pid for t in run.tasks],
        task_seconds=sum(t.alive_ns for t in run.tasks) / NS,
        cpu_seconds={level: n * run.window.guest_s for level, n in cpus.items()},
        distance=lambda a, b: slit[node[a]][node[b]],
        levels=levels,
    )  # fmt: skip
