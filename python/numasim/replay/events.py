"""A trace's real schedule as numasim's own run events: the result a traced ``numasim run``
produces (``processes``, ``summary``, ``trace``, ``trace_events``), so that the Perfetto
export, the run report, the migration tables and ``numasim trace DIR`` read the real run as
they read a simulated one (docs/workloads.md, "The real schedule as run events").

```text
  traced thread (Schedule)             run events of process i (the workload's pid)
  ───────────────────────              ────────────────────────────────────────────
  runs (start, end, CPU)        ──►    trace: {cpu, pid, start_ns, end_ns}
  migrations (t, from, to, kind) ──►   trace_events.migrations: (t, pid, from, to, kind)
  waits after a wake-up (start) ──►    trace_events.wakeups: (t, pid)
  fork/trace start, exit        ──►    processes[i]: arrival, completion, waiting, …
```

Times are ns from the workload's time 0 (the first kept thread's arrival). Only the kept
threads are events: the CPU time of the threads left out (the shell, kernel threads) is in no
slice, so utilisation is that of the replayed threads. What a trace does not hold is written
as numasim's neutral value and said here: no balancing attempt is traced (the balancing
counts are 0 and ``balances`` is empty: schedstat counts them, see numasim validate), no
runqueue length (``runqueue`` is empty: nr_running is in no scheduler event), no memory
placement (remote factor 1, no memory stall, no cache refill). Migration kinds are the
kernel's (numasim.kernel.parse.KINDS, as the trace classified them), not numasim's.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from numasim.kernel.parse import KINDS
from numasim.machine import Machine
from numasim.replay.build import Imported

NS_PER_MS = 1e6


def real_run(imported: Imported, machine: Machine) -> dict[str, Any]:
    """The run events of the traced threads ``imported`` kept, on the traced ``machine``."""
    t0 = imported.t0_ns
    node = {c: n for n in range(machine.nodes) for c in machine.node_cpus(n)}
    speeds = machine.speeds
    mals = list(machine.mals)
    dist = machine.distances

    def level(a: int, b: int) -> int:
        return mals.index(dist[node[a]][node[b]])

    seen = {m[3] for t in imported.threads for m in t.migrations if m[1] != m[2]}
    kinds = list(KINDS) + sorted(seen - set(KINDS))
    slices, moves, wakeups, procs = [], [], [], []
    busy = [0] * machine.cpus
    for pid, (t, w) in enumerate(zip(imported.threads, imported.workload["processes"],
                                     strict=True)):  # fmt: skip
        by_node: dict[int, int] = {}
        fast = slow = 0
        for a, b, c in t.runs:
            slices.append({"cpu": c, "pid": pid, "start_ns": a - t0, "end_ns": b - t0})
            by_node[node[c]] = by_node.get(node[c], 0) + (b - a)
            busy[c] += b - a
            if speeds[c] > 1.0:
                fast += b - a
            else:
                slow += b - a
        mine = [m for m in t.migrations if m[1] != m[2]]
        by_kind = Counter(m[3] for m in mine)
        by_level = [0] * len(mals)
        for ts, src, dst, kind in mine:
            moves.append([ts - t0, pid, src, dst, kind])
            by_level[level(src, dst)] += 1
        wakeups.extend([a - t0, pid] for a, _, woken in t.waits if woken)
        arrival = t.first_ts - t0
        first = t.runs[0][0] - t0
        completion = (t.exit_ts if t.exit_ts is not None else max(b for _, b, _ in t.runs)) - t0
        cpu_ns = sum(by_node.values())
        origin_cpu = t.runs[0][2]
        origin_node = node[origin_cpu]
        # The engine's rule: most CPU time, ties to the origin node, then the lowest node.
        most = max(by_node.items(), key=lambda kv: (kv[1], kv[0] == origin_node, -kv[0]))[0]
        procs.append(
            {
                "pid": pid,
                "tgid": w["tgid"],
                "kind": w["kind"],
                "demand_ms": w["demand_ns"] / NS_PER_MS,
                "arrival_ms": arrival / NS_PER_MS,
                "first_run_ms": first / NS_PER_MS,
                "completion_ms": completion / NS_PER_MS,
                "turnaround_ms": (completion - arrival) / NS_PER_MS,
                "response_ms": (first - arrival) / NS_PER_MS,
                "waiting_ms": sum(b - a for a, b, _ in t.waits) / NS_PER_MS,
                "cpu_ms": cpu_ns / NS_PER_MS,
                "fast_cpu_ms": fast / NS_PER_MS,
                "slow_cpu_ms": slow / NS_PER_MS,
                "refill_ms": 0.0,
                "io_wait_ms": sum(b - a for a, b, _ in t.sleeps) / NS_PER_MS,
                "work_ms": sum((b - a) * speeds[c] for a, b, c in t.runs) / NS_PER_MS,
                "memory_ms": 0.0,
                "remote_factor": 1.0,
                "remote_share": 0.0,
                "sync_wait_ms": 0.0,
                "origin_cpu": origin_cpu,
                "origin_node": origin_node,
                "most_node": most,
                "most_level": mals.index(dist[origin_node][most]),
                "migrations": len(mine),
                "migrations_by_kind": [by_kind.get(k, 0) for k in kinds],
                "migrations_by_level": by_level,
                "class_migrations": sum(
                    speeds[src] != speeds[dst] for _, src, dst, k in mine if k != "fork"
                ),
                "cpu_ms_by_node": [[n, ns / NS_PER_MS] for n, ns in by_node.items()],
            }
        )
    slices.sort(key=lambda s: (s["end_ns"], s["cpu"]))
    moves.sort(key=lambda m: (m[0], m[1]))
    wakeups.sort()
    return {
        "processes": procs,
        "summary": _summary(procs, kinds, busy, machine, mals),
        "trace": slices,
        "trace_events": {
            "migrations": moves,
            "balances": [],
            "runqueue": [],
            "segments": [],
            "wakeups": wakeups,
        },
        "events": 0,
    }


def _summary(procs: list[dict], kinds: list[str], busy: list[int], machine: Machine,
             mals: list[int]) -> dict[str, Any]:  # fmt: skip
    """The run's summary, by the engine's formulas (numasim_core::engine::metrics)."""
    n = len(procs)
    tats = sorted(p["turnaround_ms"] for p in procs)
    median = tats[n // 2] if n % 2 else (tats[n // 2 - 1] + tats[n // 2]) / 2
    p95 = tats[min(max(-(-95 * n // 100), 1), n) - 1]
    makespan = max(p["completion_ms"] for p in procs)
    first_arrival = min(p["arrival_ms"] for p in procs)
    span_ns = max((makespan - first_arrival) * NS_PER_MS, 1.0)
    util = [b / span_ns for b in busy]
    by_kind = [sum(p["migrations_by_kind"][i] for p in procs) for i in range(len(kinds))]
    far = [p for p in procs if p["most_node"] != p["origin_node"]]
    far_by_level = [0] * len(mals)
    for p in far:
        far_by_level[p["most_level"]] += 1
    zeros = [0] * len(mals)
    return {
        "processes": n,
        "makespan_ms": makespan,
        "mean_tat_ms": sum(tats) / n,
        "median_tat_ms": median,
        "p95_tat_ms": p95,
        "mean_response_ms": sum(p["response_ms"] for p in procs) / n,
        "mean_waiting_ms": sum(p["waiting_ms"] for p in procs) / n,
        "utilisation": sum(util) / len(util),
        "utilisation_per_cpu": util,
        "migrations": sum(by_kind),
        "migrations_by_kind": [[k, v] for k, v in zip(kinds, by_kind, strict=True)],
        "migrations_by_level": [
            sum(p["migrations_by_level"][i] for p in procs) for i in range(len(mals))
        ],
        "migrations_between_classes": sum(p["class_migrations"] for p in procs),
        "balance": {
            "periodic": zeros,
            "newidle": zeros,
            "active": zeros,
            "moved_periodic": zeros,
            "moved_newidle": zeros,
            "moved_active": zeros,
            "other": zeros,
            "moved_other": zeros,
            "cost_ms": 0.0,
            "rejected": 0,
            "idle_per_cpu": [0] * machine.cpus,
            "idle_fast": 0,
            "idle_slow": 0,
        },
        "memory_ms": 0.0,
        "mean_remote_factor": 1.0,
        "far_from_origin": len(far),
        "far_from_origin_pct": 100.0 * len(far) / n,
        "far_by_level": far_by_level,
        "mals": mals,
    }


def real_run_json(imported: Imported, machine: Machine) -> str:
    """``real_run`` as the JSON text a saved run keeps (its ``events.json``)."""
    return json.dumps(real_run(imported, machine))


#: How a saved real run names what ran it (run.json's policy and domains; the run report's
#: title reads "MACHINE · the traced kernel over its own domains · N processes").
REAL_POLICY = "the traced kernel"
REAL_DOMAINS = "its own domains"


def save(imported: Imported, machine: Machine, workload, label: str, seed: int,
         out: str | Path) -> list[str]:  # fmt: skip
    """Saves the real schedule as ``numasim run --out DIR`` saves a run (its tables, run.json
    and events.json), so ``numasim trace DIR [--report FILE]`` reads it; ``workload`` is the
    imported workload (a ``sim.Workload``), ``label`` what run.json names as its workload."""
    from numasim.cli import _save_run
    from numasim.saved import RunRecord
    from numasim.sim import Result

    raw = real_run(imported, machine)
    result = Result(raw, json.dumps(raw), {})
    record = RunRecord(machine, REAL_POLICY, REAL_DOMAINS, label, seed, result.raw_json, {})
    record.__dict__["result"] = raw
    return _save_run(record, result, workload, Path(out))
