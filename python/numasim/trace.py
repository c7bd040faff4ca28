"""Traces of a run: the Chrome/Perfetto trace-event JSON (built by the core,
``numasim_core::trace``; docs/traces.md), its rules, and per-process migration tables.

Tracks: one process per node (``pid`` = node, "node N"), one thread per CPU (``tid`` = CPU,
"cpu C (speed S)"); ``X`` slices per running interval, ``s``/``f`` flows per migration, ``i``
instants per balancing attempt, ``C`` runqueue counters, ``M`` names.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from numasim import _core
from numasim.machine import Machine

#: Migration kinds that place a process where it first runs (numasim's, and the kernel's in a
#: trace's real schedule): not moves after it first ran.
PLACEMENTS = frozenset({"placement", "fork"})


def trace_text(
    machine: Machine,
    run_json: str,
    window: tuple[float, float] | None = None,
    origin: str = "run",
) -> str:
    """The trace-event JSON text of a traced run (``run_json``: the engine's result text, as
    ``Result.raw_json`` or a saved run's events.json); ``window`` = (start_ms, end_ms)."""
    from numasim.sim import _check_type

    _check_type("machine", machine, Machine, "numasim.Machine.preset('mehta-m1')")
    _check_type("run_json", run_json, str, "numasim.simulate(m, w, trace=True).raw_json")
    start, end = window if window else (None, None)
    return _core.chrome_trace(machine._core, run_json, origin, start, end)


def chrome_trace(
    machine: Machine, run_json: str, window: tuple[float, float] | None = None
) -> dict[str, Any]:
    """The trace-event JSON object of a traced run (see ``trace_text``)."""
    return json.loads(trace_text(machine, run_json, window))


def problems(trace: dict[str, Any]) -> list[str]:
    """Violations of the trace-event rules numasim promises (empty when the trace is sound):
    every X has ts and dur ≥ 0; X slices on one thread never overlap; every flow id has one start
    and one finish, the finish not before the start; metadata names every track used."""
    return _core.trace_problems(json.dumps(trace))


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
    """Per-process migration traces for the first ``count`` processes that moved after they
    first ran: origin, each move CPU→CPU with its time, the node where the process ran most, and
    whether it ended at its origin node, a nearest neighbour of it, or farther — the last line
    says what those words mean on this machine."""
    moves: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for m in migration_table(machine, raw):
        if m["kind"] not in PLACEMENTS:
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
        where = ("home" if last == origin else f"nearest neighbour (distance {d})"
                 if d == nearest else f"distance {d}")  # fmt: skip
        lines.append(f"pid {pid:>5}  origin node {origin} cpu {p['origin_cpu']}  moves {path}  "
                     f"ran most on node {p['most_node']}  ended: {where}")  # fmt: skip
    if not lines:
        return "no process moved after it first ran"
    neighbour = (f", nearest neighbour: a node at distance {nearest}, the smallest between two "
                 "nodes" if nearest is not None else "")  # fmt: skip
    lines.append(f"ended: the node of the last move, seen from the origin node (home: the origin "
                 f"node itself{neighbour}; otherwise the distance)")  # fmt: skip
    return "\n".join(lines)
