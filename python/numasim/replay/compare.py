"""The real schedule of a trace beside numasim's replay of it, task by task.

Per task, on both sides: run time, time waiting runnable, turnaround (arrival to exit, or to
its last run for a thread alive when the trace ended), migrations (by kind and by SLIT
distance) and CPU time per node. Paired per-task differences (simulated − real) with a
t-interval, and for waiting times the two-sample Kolmogorov–Smirnov test and the Wasserstein
distance (scipy, imported when asked for). numasim's migration kinds are named as the kernel's
(numasim.kernel.compare.sim_migrations).
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from numasim.kernel.compare import sim_migrations
from numasim.machine import Machine
from numasim.replay.build import Imported
from numasim.replay.schedule import Schedule
from numasim.stats import t_interval

NS_PER_MS = 1e6
#: The per-task metrics compared, in ms (migrations: a count).
METRICS = ("run_ms", "wait_ms", "turnaround_ms", "migrations")


def real_tasks(sched: Schedule, imported: Imported, machine: Machine) -> list[dict[str, Any]]:
    """The per-task metrics of the traced schedule (times from the workload's time 0)."""
    node = _node_of(machine)
    out = []
    for t in imported.threads:
        arrival = t.first_ts
        end = t.exit_ts if t.exit_ts is not None else max(b for _, b, _ in t.runs)
        per_node = [0.0] * machine.nodes
        for a, b, c in t.runs:
            per_node[node[c]] += (b - a) / NS_PER_MS
        moves = [m for m in t.migrations if m[1] != m[2]]
        out.append(
            {
                "run_ms": t.run_ns / NS_PER_MS,
                "wait_ms": sum(b - a for a, b, _ in t.waits) / NS_PER_MS,
                "turnaround_ms": (end - arrival) / NS_PER_MS,
                "migrations": len(moves),
                "by_kind": dict(Counter(m[3] for m in moves)),
                "by_distance": _distances(machine, node, [(m[1], m[2]) for m in moves]),
                "cpu_ms_by_node": per_node,
            }
        )
    return out


def sim_tasks(raw: dict[str, Any], machine: Machine) -> list[dict[str, Any]]:
    """The same metrics of a traced numasim run (``Result.raw``)."""
    node = _node_of(machine)
    procs = raw["processes"]
    moves = sim_migrations(raw, 1 << 62, [p["pid"] for p in procs])
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
                "turnaround_ms": p["turnaround_ms"],
                "migrations": len(mine),
                "by_kind": dict(Counter(m.kind for m in mine)),
                "by_distance": _distances(machine, node, [(m.src, m.dst) for m in mine]),
                "cpu_ms_by_node": per_node,
            }
        )
    return out


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
        r = [t[metric] for t in real]
        s = [t[metric] for t in sim]
        diff = [b - a for a, b in zip(r, s, strict=True)]
        mean, _, half = t_interval(diff, confidence)
        paired[metric] = {
            "real_mean": sum(r) / len(r),
            "sim_mean": sum(s) / len(s),
            "diff_mean": mean,
            "diff_half_width": None if math.isnan(half) else half,
        }
    waits_r = [t["wait_ms"] for t in real]
    waits_s = [t["wait_ms"] for t in sim]
    ks = ks_2samp(waits_r, waits_s)
    return {
        "tasks": len(real),
        "confidence": confidence,
        "paired": paired,
        "migrations_by_kind": {"real": _total(real, "by_kind"), "sim": _total(sim, "by_kind")},
        "migrations_by_distance": {
            "real": _total(real, "by_distance"),
            "sim": _total(sim, "by_distance"),
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
    }


def _total(tasks: list[dict[str, Any]], key: str) -> dict[str, int]:
    out: Counter[str] = Counter()
    for t in tasks:
        out.update(t[key])
    return dict(sorted(out.items()))


def _nodes(tasks: list[dict[str, Any]]) -> int:
    return len(tasks[0]["cpu_ms_by_node"]) if tasks else 0


def text(result: dict[str, Any], real: list[dict], sim: list[dict], pids: list[int]) -> str:
    """The comparison as text: one row per task, then the paired differences."""
    lines = [
        f"{'task':>6} {'run ms real/sim':>21} {'wait ms real/sim':>19} "
        f"{'turnaround ms real/sim':>25} {'migr r/s':>9}"
    ]
    for pid, r, s in zip(pids, real, sim, strict=True):
        lines.append(
            f"{pid:>6} {r['run_ms']:>10.1f}/{s['run_ms']:<10.1f} {r['wait_ms']:>9.1f}/"
            f"{s['wait_ms']:<9.1f} {r['turnaround_ms']:>12.1f}/{s['turnaround_ms']:<12.1f} "
            f"{r['migrations']:>4}/{s['migrations']:<4}"
        )
    c = round(100 * result["confidence"])
    lines.append("")
    lines.append(f"paired differences, simulated − real, mean ± {c} % t-interval:")
    for metric, v in result["paired"].items():
        half = v["diff_half_width"]
        shown = "n/a" if half is None else f"{half:.2f}"
        lines.append(
            f"  {metric:<14} real {v['real_mean']:10.2f}  sim {v['sim_mean']:10.2f}  "
            f"diff {v['diff_mean']:+10.2f} ± {shown}"
        )
    for what in ("migrations_by_kind", "migrations_by_distance"):
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
    return "\n".join(lines)
