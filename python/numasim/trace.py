"""Chrome/Perfetto trace-event JSON of a run (opens in ui.perfetto.dev).

Tracks: one process per node (``pid`` = node, named "node N"), one thread per CPU (``tid`` = CPU,
named "cpu C (speed S)"). Events (times in µs):

- ``X`` a slice per running interval, named "pid P", with the process's origin and remote factor;
- ``s``/``f`` a flow per migration, from the end of the process's last slice on the source CPU to
  the start of its next slice on the destination CPU (migrations of processes that had not run
  there yet, e.g. fork placement, have no source slice and no arrow);
- ``i`` an instant per balancing attempt, on the balancing CPU, with level, kind and moves;
- ``C`` a counter per CPU with its runqueue length;
- ``M`` metadata naming every process and thread track.

``window=(start_ms, end_ms)`` keeps only that part of the run (slices are clipped to it).
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from typing import Any

from numasim.machine import Machine

NS_PER_US = 1000.0


def chrome_trace(
    machine: Machine, raw: dict[str, Any], window: tuple[float, float] | None = None
) -> dict[str, Any]:
    """The trace-event JSON object of a traced run (``raw`` = the engine's result dict)."""
    lo, hi = (window[0] * 1e6, window[1] * 1e6) if window else (0.0, float("inf"))
    node_of = {c["id"]: c["node"] for c in machine.info["cpus"]}
    procs = {p["pid"]: p for p in raw["processes"]}
    events: list[dict[str, Any]] = []
    for n in machine.info["nodes"]:
        events.append({"ph": "M", "name": "process_name", "pid": n["id"],
                       "args": {"name": f"node {n['id']}"}})  # fmt: skip
        events.append({"ph": "M", "name": "process_sort_index", "pid": n["id"],
                       "args": {"sort_index": n["id"]}})  # fmt: skip
    for c in machine.info["cpus"]:
        events.append({"ph": "M", "name": "thread_name", "pid": c["node"], "tid": c["id"],
                       "args": {"name": f"cpu {c['id']} (speed {c['speed']:g})"}})  # fmt: skip
        events.append({"ph": "M", "name": "thread_sort_index", "pid": c["node"], "tid": c["id"],
                       "args": {"sort_index": c["id"]}})  # fmt: skip
    slices_of: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    for s in raw["trace"]:
        slices_of[(s["pid"], s["cpu"])].append((s["start_ns"], s["end_ns"]))
        start, end = max(s["start_ns"], lo), min(s["end_ns"], hi)
        if end <= start:
            continue
        p = procs[s["pid"]]
        events.append({"ph": "X", "name": f"pid {s['pid']}", "cat": "run", "pid": node_of[s["cpu"]],
                       "tid": s["cpu"], "ts": start / NS_PER_US, "dur": (end - start) / NS_PER_US,
                       "args": {"pid": s["pid"], "origin_node": p["origin_node"],
                                "origin_cpu": p["origin_cpu"],
                                "remote_factor": round(p["remote_factor"], 4)}})  # fmt: skip
    for v in slices_of.values():
        v.sort()
    flow_id = 0
    for t, pid, src, dst, kind in raw["trace_events"]["migrations"]:
        before = [e for _, e in slices_of[(pid, src)] if e <= t]
        after = [s for s, _ in slices_of[(pid, dst)] if s >= t]
        if not before or not after:
            continue
        t0, t1 = before[-1] - 1, after[0]  # inside the source slice; at the destination's start
        if t0 < lo or t1 > hi:
            continue
        flow_id += 1
        common = {"name": f"migrate pid {pid}", "cat": "migration", "id": flow_id}
        events.append({**common, "ph": "s", "pid": node_of[src], "tid": src,
                       "ts": t0 / NS_PER_US, "args": {"kind": kind}})  # fmt: skip
        events.append({**common, "ph": "f", "bp": "e", "pid": node_of[dst], "tid": dst,
                       "ts": t1 / NS_PER_US})  # fmt: skip
    for t, cpu, level, kind, moved in raw["trace_events"]["balances"]:
        if not lo <= t <= hi or cpu not in node_of:
            continue
        events.append({"ph": "i", "s": "t", "name": f"balance L{level} {kind}", "cat": "balance",
                       "pid": node_of[cpu], "tid": cpu, "ts": t / NS_PER_US,
                       "args": {"level": level, "kind": kind, "moved": moved}})  # fmt: skip
    for t, cpu, n in raw["trace_events"]["runqueue"]:
        if lo <= t <= hi:
            events.append({"ph": "C", "name": f"runqueue cpu {cpu}", "pid": node_of[cpu],
                           "ts": t / NS_PER_US, "args": {"nr_running": n}})  # fmt: skip
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"machine": machine.name, "generator": "numasim"}}  # fmt: skip


def problems(trace: dict[str, Any]) -> list[str]:
    """Violations of the trace-event rules numasim promises (empty when the trace is sound):
    every X has ts and dur ≥ 0; X slices on one thread never overlap; every flow id has one start
    and one finish, the finish not before the start; metadata names every track used."""
    out: list[str] = []
    named_pids, named_tids = set(), set()
    for e in trace["traceEvents"]:
        if e["ph"] == "M" and e["name"] == "process_name":
            named_pids.add(e["pid"])
        if e["ph"] == "M" and e["name"] == "thread_name":
            named_tids.add((e["pid"], e["tid"]))
    by_thread: dict[tuple[int, int], list[tuple[float, float]]] = defaultdict(list)
    flows: dict[int, dict[str, dict[str, Any]]] = defaultdict(dict)
    for e in trace["traceEvents"]:
        ph = e["ph"]
        if ph == "M":
            continue
        if e["pid"] not in named_pids:
            out.append(f"{ph} event on unnamed process {e['pid']}")
        if ph in "Xsfi" and (e["pid"], e["tid"]) not in named_tids:
            out.append(f"{ph} event on unnamed thread {e['pid']}/{e['tid']}")
        if ph == "X":
            if "ts" not in e or "dur" not in e or e["dur"] < 0:
                out.append(f"X without ts/dur: {e}")
                continue
            by_thread[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
        if ph in "sf":
            if ph in flows[e["id"]]:
                out.append(f"flow {e['id']} has two '{ph}'")
            flows[e["id"]][ph] = e
    for track, spans in by_thread.items():
        spans.sort()
        for (s0, e0), (s1, _) in itertools.pairwise(spans):
            if s1 < e0 - 1e-9:
                out.append(f"overlapping slices on {track}: {s0}-{e0} and {s1}")
    for fid, ends in flows.items():
        if set(ends) != {"s", "f"}:
            out.append(f"flow {fid} lacks an end: has {sorted(ends)}")
        elif ends["f"]["ts"] < ends["s"]["ts"]:
            out.append(f"flow {fid} finishes before it starts")
    return out


def migration_table(machine: Machine, raw: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per migration of a traced run: time, process, CPUs, nodes, kind and the memory
    access level of the move (0 = inside a node)."""
    node_of = {c["id"]: c["node"] for c in machine.info["cpus"]}
    mals = machine.mals
    rows = []
    for t, pid, src, dst, kind in raw["trace_events"]["migrations"]:
        a, b = node_of[src], node_of[dst]
        rows.append({"time_ms": t / 1e6, "pid": pid, "from_cpu": src, "to_cpu": dst,
                     "from_node": a, "to_node": b, "kind": kind,
                     "level": mals.index(machine.distances[a][b])})  # fmt: skip
    return rows


def process_traces(machine: Machine, raw: dict[str, Any], count: int) -> str:
    """SPEC §6.2's per-process migration traces for the first ``count`` processes that moved
    after they first ran: origin, each move CPU→CPU with its time, the node where the process
    ran most, and whether it ended at its origin node, a nearest neighbour, or farther."""
    moves: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for m in migration_table(machine, raw):
        if m["kind"] != "placement":
            moves[m["pid"]].append(m)
    procs = {p["pid"]: p for p in raw["processes"]}
    nearest = machine.mals[1] if len(machine.mals) > 1 else None
    lines = []
    for pid in sorted(moves)[:count]:
        p = procs[pid]
        origin = p["origin_node"]
        path = " ".join(f"{m['from_cpu']}→{m['to_cpu']}@{m['time_ms']:.1f}ms" for m in moves[pid])
        last = moves[pid][-1]["to_node"]
        d = machine.distances[origin][last]
        where = ("home" if last == origin else "nearest neighbour" if d == nearest
                 else f"distance {d}")  # fmt: skip
        lines.append(f"pid {pid:>5}  origin node {origin} cpu {p['origin_cpu']}  moves {path}  "
                     f"ran most on node {p['most_node']}  ended: {where}")  # fmt: skip
    if not lines:
        return "no process moved after it first ran"
    return "\n".join(lines)
