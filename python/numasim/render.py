"""Text rendering of machines and domain hierarchies for the terminal."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from numasim.assumptions import describe
from numasim.machine import Machine


def cpulist(ids: Iterable[int]) -> str:
    """Kernel-style CPU list: ``[0, 1, 2, 5]`` → ``"0-2,5"``."""
    ids = sorted(ids)
    parts: list[str] = []
    i = 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        parts.append(str(ids[i]) if i == j else f"{ids[i]}-{ids[j]}")
        i = j + 1
    return ",".join(parts) or "-"


def machine_text(m: Machine) -> str:
    """Nodes, CPUs, speeds, the distance table and the MALs."""
    info = m.info
    lines = [f"{m.name}: {m.description}" if m.description else m.name]
    if m.source:
        lines.append(f"source: {m.source}")
    lines.append(
        f"{m.nodes} nodes, {m.cpus} CPUs, {len(m.mals)} memory access levels "
        f"(MALs: {' '.join(map(str, m.mals))})"
    )
    speeds = m.speeds
    asymmetric = len(set(speeds)) > 1
    header = "node  cpus" + ("            speeds" if asymmetric else "")
    lines.append(header)
    for node in info["nodes"]:
        cpus = node["cpus"]
        row = f"{node['id']:>4}  {cpulist(cpus) if cpus else '(memory only)':<14}"
        if asymmetric:
            row += "  " + " ".join(f"{speeds[c]:g}" for c in cpus)
        lines.append(row.rstrip())
    width = max(len(str(v)) for row in m.distances for v in row)
    width = max(width, len(str(m.nodes - 1)))
    lines.append("distances:")
    lines.append("      " + " ".join(f"{j:>{width}}" for j in range(m.nodes)))
    for i, row in enumerate(m.distances):
        lines.append(f"  {i:>{width}}: " + " ".join(f"{v:>{width}}" for v in row))
    return "\n".join(lines)


def domains_text(shown: dict[str, Any], description: str) -> str:
    """Each distinct CPU hierarchy once (``Machine.hierarchies``: CPU sets as cpulists), with
    the CPUs that share it."""
    lines = [f"domains: {shown['builder']} ({description})"]
    lines.append(f"{len(shown['hierarchies'])} distinct hierarchies")
    for h in shown["hierarchies"]:
        lines.append("")
        lines.append(f"CPUs {h['cpus']} (node {h['nodes']}), shown for CPU {h['first']}:")
        if not h["levels"]:
            lines.append("  (no level: nothing to balance)")
        for level in h["levels"]:
            lines.append(
                f"  level {level['level']}  {level['name']:<8} span {level['span']}"
                f"  ({level['span_cpus']} CPUs, {len(level['groups'])} groups)"
            )
            lines.append(
                f"      interval {level['min_interval_ms']}-{level['max_interval_ms']} ms,"
                f" busy_factor {level['busy_factor']}, imbalance_pct {level['imbalance_pct']},"
                f" cache_nice_tries {level['cache_nice_tries']},"
                f" cache-hot {level['cache_hot_ns'] / 1e6:g} ms"
            )
            lines.append(f"      flags {' '.join(f.removeprefix('SD_') for f in level['flags'])}")
            groups = [
                "{" + span + ("" if mask == span else f" mask {mask}") + "}"
                for span, mask in level["groups"]
            ]
            lines.append("      groups " + " ".join(groups))
    return "\n".join(lines)


def summary_items(s: dict[str, Any], procs: Any) -> list[tuple[str, str]]:
    """The run summary as (label, text) pairs: the terminal's lines and the report's table.
    ``s`` is the engine's summary dict, ``procs`` the processes (DataFrame or list of dicts)."""
    b = s["balance"]
    kinds = ", ".join(f"{k} {v}" for k, v in s["migrations_by_kind"] if v)
    levels = " ".join(f"{d}:{n}" for d, n in zip(s["mals"], s["migrations_by_level"], strict=True))
    far_levels = " ".join(
        f"{d}:{n}" for d, n in zip(s["mals"][1:], s["far_by_level"][1:], strict=True)
    )
    items = [
        ("turnaround", f"mean {s['mean_tat_ms']:.1f} ms, median {s['median_tat_ms']:.1f} ms, "
                       f"p95 {s['p95_tat_ms']:.1f} ms"),
        ("response", f"mean {s['mean_response_ms']:.2f} ms; "
                     f"waiting mean {s['mean_waiting_ms']:.1f} ms"),
        ("makespan", f"{s['makespan_ms']:.1f} ms; utilisation {100 * s['utilisation']:.1f} %"),
        ("migrations", f"{s['migrations']} ({kinds or 'none'}); by distance {levels}"),
        ("balancing", f"periodic {sum(b['periodic'])}, newly idle {sum(b['newidle'])}, "
                      f"active {sum(b['active'])}; cost {b['cost_ms']:.3f} ms"
                      + (f"; candidate evaluations {b['evaluations']}"
                         if b.get("evaluations") else "")),
        ("memory", f"stall {s['memory_ms']:.1f} ms; mean remote factor "
                   f"{s['mean_remote_factor']:.3f}"),
        ("far from origin", f"{s['far_from_origin']} ({s['far_from_origin_pct']:.1f} %); "
                            f"by distance {far_levels or '-'}"),
    ]  # fmt: skip
    fast = sum(p["fast_cpu_ms"] for p in _records(procs))
    if fast > 0:  # a machine with speed cores
        slow = sum(p["slow_cpu_ms"] for p in _records(procs))
        items.append(
            ("core classes", f"fast {fast:.1f} ms, slow {slow:.1f} ms of CPU time; idle "
                             f"balancing fast {b['idle_fast']}, slow {b['idle_slow']}; "
                             f"migrations between classes {s['migrations_between_classes']}")
        )  # fmt: skip
    metrics = s.get("policy_metrics") or []
    if metrics:  # what the policy itself counted (e.g. linux's NUMA balancing)
        items.append(("policy", "; ".join(f"{name} {_number(v)}" for name, v in metrics)))
    return items


def _number(v: float) -> str:
    """A policy metric: whole counts without a fraction, others to four significant digits."""
    return str(int(v)) if float(v).is_integer() else f"{v:.4g}"


def _records(procs: Any) -> list[dict[str, Any]]:
    return procs.to_dict("records") if hasattr(procs, "to_dict") else list(procs)


def summary_text(machine: str, policy: str, builder: str, result: Any) -> str:
    """The run summary for the terminal; a workload with applications adds their table."""
    s = result.raw_summary
    lines = [f"{machine} · {policy} over {builder} domains · {s['processes']} processes",
             describe(result.assumptions)]  # fmt: skip
    for label, text in summary_items(s, result.raw["processes"]):
        lines.append(f"{label:<12} {text}" if len(label) <= 12 else f"{label}  {text}")
    apps = result.raw.get("apps")
    if apps:
        lines += ["", "applications: completion and turnaround of the last thread; remote share: "
                  "time-weighted share", "of accesses to other nodes; threads per node: "
                  "node:threads by the node each thread ran on most"]  # fmt: skip
        rows = app_rows(apps)
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        for r in rows:
            cells = [c.ljust(w) if i == 0 else c.rjust(w)
                     for i, (c, w) in enumerate(zip(r, widths, strict=True))]  # fmt: skip
            lines.append("  " + "  ".join(cells).rstrip())
    return "\n".join(lines)


#: Header of the per-application table (terminal and run report).
APP_HEADER = ["app", "threads", "arrival ms", "completion ms", "turnaround ms",
              "remote share %", "sync wait ms", "threads per node"]  # fmt: skip


def app_rows(apps: list[dict[str, Any]]) -> list[list[str]]:
    """The per-application table of a run (``raw["apps"]``), header first; threads per node as
    ``node:count`` for the nodes where a thread ran most."""
    from numasim.apps import app_labels

    rows = [APP_HEADER]
    for label, a in zip(app_labels(apps), apps, strict=True):
        nodes = " ".join(f"{k}:{c}" for k, c in enumerate(a["threads_by_node"]) if c)
        rows.append([label, str(a["threads"]), f"{a['arrival_ms']:.1f}",
                     f"{a['completion_ms']:.1f}", f"{a['turnaround_ms']:.1f}",
                     f"{100 * a['remote_share']:.1f}", f"{a['sync_wait_ms']:.1f}",
                     nodes])  # fmt: skip
    return rows
