"""The real schedule of a trace beside numasim's replay of it, task by task.

Per task, on both sides: run time, time waiting runnable, delay per wake-up (from a wake-up
to the switch-in that follows it: the mean over the task's wake-ups), turnaround (arrival to
exit, or to its last run for a thread alive when the trace ended), migrations (by kind, by
SLIT distance and by scheduling-domain level) and CPU time per node. Paired per-task
differences (simulated − real) with a t-interval, and for waiting times per task and delays
per wake-up the two-sample Kolmogorov–Smirnov test and the Wasserstein distance (scipy,
imported when asked for). numasim's migration kinds are named as the kernel's
(numasim.kernel.compare.sim_migrations).

A migration's domain level is the lowest level of the destination CPU's hierarchy whose span
holds the source CPU (where the kernel's balancer pulling to that CPU would have found it),
in the hierarchy numasim's ``linux`` builder makes of the machine, on each side its own
machine; a fork placement counts as any move.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from typing import Any

from numasim.kernel.compare import sim_migrations
from numasim.machine import Machine
from numasim.replay.build import Imported
from numasim.replay.schedule import Schedule
from numasim.stats import t_interval

NS_PER_MS = 1e6
#: The per-task metrics compared, in ms (migrations: a count). ``wake_delay_ms`` is ``None``
#: for a task without a wake-up: its pairs are the tasks woken on both sides.
METRICS = ("run_ms", "wait_ms", "wake_delay_ms", "turnaround_ms", "migrations")


def real_tasks(sched: Schedule, imported: Imported, machine: Machine) -> list[dict[str, Any]]:
    """The per-task metrics of the traced schedule (times from the workload's time 0)."""
    node = _node_of(machine)
    level = domain_levels(machine)
    out = []
    for t in imported.threads:
        arrival = t.first_ts
        end = t.exit_ts if t.exit_ts is not None else max(b for _, b, _ in t.runs)
        per_node = [0.0] * machine.nodes
        for a, b, c in t.runs:
            per_node[node[c]] += (b - a) / NS_PER_MS
        moves = [m for m in t.migrations if m[1] != m[2]]
        delays = [(b - a) / NS_PER_MS for a, b, woken in t.waits if woken]
        out.append(
            {
                "run_ms": t.run_ns / NS_PER_MS,
                "wait_ms": sum(b - a for a, b, _ in t.waits) / NS_PER_MS,
                "wake_delay_ms": _mean(delays),
                "turnaround_ms": (end - arrival) / NS_PER_MS,
                "migrations": len(moves),
                "by_kind": dict(Counter(m[3] for m in moves)),
                "by_distance": _distances(machine, node, [(m[1], m[2]) for m in moves]),
                "by_domain_level": dict(Counter(level(m[1], m[2]) for m in moves)),
                "cpu_ms_by_node": per_node,
                "wake_delays_ms": delays,
            }
        )
    return out


def sim_tasks(raw: dict[str, Any], machine: Machine) -> list[dict[str, Any]]:
    """The same metrics of a traced numasim run (``Result.raw``)."""
    node = _node_of(machine)
    level = domain_levels(machine)
    procs = raw["processes"]
    moves = sim_migrations(raw, 1 << 62, [p["pid"] for p in procs])
    delays = wake_delays(raw)
    out = []
    for p in procs:
        mine = [m for m in moves if m.pid == p["pid"]]
        per_node = [0.0] * machine.nodes
        for n, ms in p["cpu_ms_by_node"]:
            per_node[n] += ms
        out.append(
            {
                "run_ms": p["cpu_ms"],
                "wait_ms": p["waiting_ms"],
                "wake_delay_ms": _mean(delays[p["pid"]]),
                "turnaround_ms": p["turnaround_ms"],
                "migrations": len(mine),
                "by_kind": dict(Counter(m.kind for m in mine)),
                "by_distance": _distances(machine, node, [(m.src, m.dst) for m in mine]),
                "by_domain_level": dict(Counter(level(m.src, m.dst) for m in mine)),
                "cpu_ms_by_node": per_node,
                "wake_delays_ms": delays[p["pid"]],
            }
        )
    return out


def wake_delays(raw: dict[str, Any]) -> list[list[float]]:
    """Per process of a traced run (numasim's, or a trace's real schedule as run events), the
    delay of each of its wake-ups in ms: from ``trace_events.wakeups``' time to the start of its
    first running interval from then on. A wake-up no interval follows (a trace that ended
    first) has no delay and is left out."""
    starts: list[list[int]] = [[] for _ in raw["processes"]]
    for s in raw["trace"]:
        starts[s["pid"]].append(s["start_ns"])
    for row in starts:
        row.sort()
    out: list[list[float]] = [[] for _ in raw["processes"]]
    for t, pid in raw["trace_events"].get("wakeups", []):
        i = bisect.bisect_left(starts[pid], t)
        if i < len(starts[pid]):
            out[pid].append((starts[pid][i] - t) / NS_PER_MS)
    return out


def domain_levels(machine: Machine):
    """``level(src, dst)``: the lowest level of ``dst``'s scheduling domains (the ``linux``
    builder's) whose span holds ``src``, as ``"INDEX NAME"`` (``"1 NUMA"``: the kernel names
    every NUMA level NUMA); ``"none"`` when no level does (a machine the builder gives no
    domain, such as one CPU)."""
    cpus = machine.domains("linux")["cpus"]
    spans = {
        int(cpu): [(f"{lv['level']} {lv['name']}", set(lv["span"])) for lv in levels]
        for cpu, levels in cpus.items()
    }

    def level(src: int, dst: int) -> str:
        return next((name for name, span in spans[dst] if src in span), "none")

    return level


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _node_of(machine: Machine) -> dict[int, int]:
    return {c: n for n in range(machine.nodes) for c in machine.node_cpus(n)}


def _distances(machine: Machine, node: dict[int, int], moves: list[tuple[int, int]]) -> dict:
    d = machine.distances
    return dict(Counter(str(d[node[a]][node[b]]) for a, b in moves))


def compare(
    real: list[dict[str, Any]], sim: list[dict[str, Any]], confidence: float = 0.95
) -> dict[str, Any]:
    """Paired differences per metric, totals of migrations by kind and distance, and the
    distribution distances of per-task waiting times."""
    from scipy.stats import ks_2samp, wasserstein_distance

    paired = {}
    for metric in METRICS:
        pairs = [(a[metric], b[metric]) for a, b in zip(real, sim, strict=True)
                 if a[metric] is not None and b[metric] is not None]  # fmt: skip
        if not pairs:
            paired[metric] = {"tasks": 0, "real_mean": None, "sim_mean": None,
                              "diff_mean": None, "diff_half_width": None}  # fmt: skip
            continue
        diff = [b - a for a, b in pairs]
        mean, _, half = t_interval(diff, confidence)
        paired[metric] = {
            "tasks": len(pairs),
            "real_mean": sum(a for a, _ in pairs) / len(pairs),
            "sim_mean": sum(b for _, b in pairs) / len(pairs),
            "diff_mean": mean,
            "diff_half_width": None if math.isnan(half) else half,
        }
    waits_r = [t["wait_ms"] for t in real]
    waits_s = [t["wait_ms"] for t in sim]
    ks = ks_2samp(waits_r, waits_s)
    delays_r = [d for t in real for d in t["wake_delays_ms"]]
    delays_s = [d for t in sim for d in t["wake_delays_ms"]]
    wake = {"wakeups_real": len(delays_r), "wakeups_sim": len(delays_s), "ks_statistic": None,
            "ks_p": None, "wasserstein_ms": None}  # fmt: skip
    if delays_r and delays_s:
        ks_wake = ks_2samp(delays_r, delays_s)
        wake.update(ks_statistic=float(ks_wake.statistic), ks_p=float(ks_wake.pvalue),
                    wasserstein_ms=float(wasserstein_distance(delays_r, delays_s)))  # fmt: skip
    return {
        "tasks": len(real),
        "confidence": confidence,
        "paired": paired,
        "migrations_by_kind": {"real": _total(real, "by_kind"), "sim": _total(sim, "by_kind")},
        "migrations_by_distance": {
            "real": _total(real, "by_distance"),
            "sim": _total(sim, "by_distance"),
        },
        "migrations_by_domain_level": {
            "real": _total(real, "by_domain_level", _level_order),
            "sim": _total(sim, "by_domain_level", _level_order),
        },
        "cpu_ms_by_node": {
            "real": [sum(t["cpu_ms_by_node"][n] for t in real) for n in range(_nodes(real))],
            "sim": [sum(t["cpu_ms_by_node"][n] for t in sim) for n in range(_nodes(sim))],
        },
        "wait_distribution": {
            "ks_statistic": float(ks.statistic),
            "ks_p": float(ks.pvalue),
            "wasserstein_ms": float(wasserstein_distance(waits_r, waits_s)),
        },
        "wake_delay_distribution": wake,
    }


def _total(tasks: list[dict[str, Any]], key: str, order=None) -> dict[str, int]:
    out: Counter[str] = Counter()
    for t in tasks:
        out.update(t[key])
    return dict(sorted(out.items(), key=order))


def _level_order(item: tuple[str, int]) -> tuple[int, str]:
    """Domain levels from the lowest ("0 MC", "1 NUMA", …, then "none")."""
    head = item[0].split(" ", 1)[0]
    return (int(head), item[0]) if head.isdigit() else (1 << 30, item[0])


def _nodes(tasks: list[dict[str, Any]]) -> int:
    return len(tasks[0]["cpu_ms_by_node"]) if tasks else 0


def text(result: dict[str, Any], real: list[dict], sim: list[dict], pids: list[int]) -> str:
    """The comparison as text: one row per task, then the paired differences."""
    lines = [
        f"{'task':>6} {'run ms real/sim':>21} {'wait ms real/sim':>19} "
        f"{'wake-up delay ms r/s':>19} {'turnaround ms real/sim':>25} {'migr r/s':>9}"
    ]
    for pid, r, s in zip(pids, real, sim, strict=True):
        lines.append(
            f"{pid:>6} {r['run_ms']:>10.1f}/{s['run_ms']:<10.1f} {r['wait_ms']:>9.1f}/"
            f"{s['wait_ms']:<9.1f} {_ms(r['wake_delay_ms']):>9}/{_ms(s['wake_delay_ms']):<9} "
            f"{r['turnaround_ms']:>12.1f}/{s['turnaround_ms']:<12.1f} "
            f"{r['migrations']:>4}/{s['migrations']:<4}"
        )
    c = round(100 * result["confidence"])
    lines.append("")
    lines.append(f"paired differences, simulated − real, mean ± {c} % t-interval:")
    for metric, v in result["paired"].items():
        if v["diff_mean"] is None:
            lines.append(f"  {metric:<14} no task on both sides")
            continue
        half = v["diff_half_width"]
        shown = "n/a" if half is None else f"{half:.2f}"
        over = "" if v["tasks"] == result["tasks"] else f"  ({v['tasks']} tasks woken on both)"
        lines.append(
            f"  {metric:<14} real {v['real_mean']:10.2f}  sim {v['sim_mean']:10.2f}  "
            f"diff {v['diff_mean']:+10.2f} ± {shown}{over}"
        )
    for what in ("migrations_by_kind", "migrations_by_distance", "migrations_by_domain_level"):
        lines.append(f"{what.replace('_', ' ')}: real {result[what]['real']}, "
                     f"sim {result[what]['sim']}")  # fmt: skip
    nodes = result["cpu_ms_by_node"]
    lines.append(
        "CPU ms per node: real "
        + " ".join(f"{x:.0f}" for x in nodes["real"])
        + ", sim "
        + " ".join(f"{x:.0f}" for x in nodes["sim"])
    )
    w = result["wait_distribution"]
    lines.append(
        f"waiting times per task: KS statistic {w['ks_statistic']:.3f} (p = {w['ks_p']:.3g}), "
        f"Wasserstein distance {w['wasserstein_ms']:.2f} ms"
    )
    lines.append(wake_text(result["wake_delay_distribution"]))
    return "\n".join(lines)


def wake_text(w: dict[str, Any]) -> str:
    """The delays per wake-up as distributions, in a sentence."""
    counts = f"{w['wakeups_real']} real, {w['wakeups_sim']} simulated"
    if w["ks_statistic"] is None:
        return f"delays per wake-up ({counts}): a side without wake-ups, no distance"
    return (
        f"delays per wake-up ({counts}): KS statistic {w['ks_statistic']:.3f} "
        f"(p = {w['ks_p']:.3g}), Wasserstein distance {w['wasserstein_ms']:.3f} ms"
    )
