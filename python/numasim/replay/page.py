"""One self-contained HTML page: a trace's real schedule beside numasim's replay of it
(``numasim replay TRACE --report FILE.html``), in the run report's style.

```
<h1> trace · policy on machine · tasks
 Differences   paired per-task differences (simulated − real), distances of waiting times
 Schedules     the two schedules: each CPU's running tasks over time, real above, simulated below
 Waiting       per-task waiting time, real beside simulated
 Migrations    by kind and by SLIT distance, both sides
 Tasks         one row per task
```
"""

from __future__ import annotations

import html
from typing import Any

from numasim.run_report import _figure, _pyplot, _svg, _table, page_head

SCHEDULE_CAPTION = (
    "Each CPU's running tasks over time (one colour per task), the traced run above, numasim's "
    "replay below; time from the first replayed task's arrival."
)
WAIT_CAPTION = "Time each task waited runnable (not running), real and simulated."


def spans(imported, traced, raw: dict[str, Any], machine) -> tuple[list, list]:
    """Per CPU, its (start ms, end ms, task index) intervals: the traced run's (on the traced
    machine's CPUs) and the replay's (``Result.raw`` of a traced run)."""
    real: list[list[tuple[float, float, int]]] = [[] for _ in range(traced.cpus)]
    for i, t in enumerate(imported.threads):
        for a, b, c in t.runs:
            real[c].append(((a - imported.t0_ns) / 1e6, (b - imported.t0_ns) / 1e6, i))
    sim: list[list[tuple[float, float, int]]] = [[] for _ in range(machine.cpus)]
    for r in raw["trace"]:
        sim[r["cpu"]].append((r["start_ns"] / 1e6, r["end_ns"] / 1e6, r["pid"]))
    return real, sim


def schedules_figure(
    real: list[list[tuple[float, float, int]]],
    sim: list[list[tuple[float, float, int]]],
    tasks: int,
) -> str:
    """``real``/``sim``: per CPU, its (start ms, end ms, task index) intervals."""
    plt = _pyplot()
    cmap = plt.get_cmap("tab20")
    rows = max(len(real), len(sim))
    fig, axes = plt.subplots(2, 1, figsize=(10, 1.6 + 0.5 * rows), sharex=True,
                             constrained_layout=True)  # fmt: skip
    for ax, side, title in ((axes[0], real, "real"), (axes[1], sim, "simulated")):
        for cpu, spans in enumerate(side):
            for task in sorted({k for _, _, k in spans}):
                bars = [(a, b - a) for a, b, k in spans if k == task]
                ax.broken_barh(bars, (cpu - 0.4, 0.8), color=cmap(task % 20))
        ax.set_ylim(rows - 0.5, -0.5)
        ax.set_yticks(range(rows))
        ax.set(ylabel="CPU", title=f"{title} schedule ({tasks} tasks)")
    axes[1].set_xlabel("time (ms)")
    return _svg(fig)


def wait_figure(real: list[float], sim: list[float], labels: list[str]) -> str:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(10, 3.2), constrained_layout=True)
    x = range(len(real))
    ax.bar([i - 0.2 for i in x], real, width=0.4, label="real", color="#4c72b0")
    ax.bar([i + 0.2 for i in x], sim, width=0.4, label="simulated", color="#dd8452")
    ax.set_xticks(list(x), labels, rotation=90 if len(labels) > 16 else 0)
    ax.set(xlabel="traced pid", ylabel="waiting (ms)")
    ax.set_ylim(bottom=0)
    ax.legend()
    return _svg(fig)


def html_page(
    title: str,
    sub: str,
    summary: dict[str, Any],
    real: list[dict],
    sim: list[dict],
    pids: list[int],
    real_spans,
    sim_spans,
) -> str:
    from numasim import __version__

    esc = html.escape
    c = round(100 * summary["confidence"])
    paired = _table(
        ["per task", "real", "simulated", f"difference (simulated − real), {c} % interval"],
        [[m, f"{v['real_mean']:.2f}", f"{v['sim_mean']:.2f}",
          f"{v['diff_mean']:+.2f} ± " + ("n/a" if v["diff_half_width"] is None
                                          else f"{v['diff_half_width']:.2f}")]
         for m, v in summary["paired"].items()],
        {1, 2, 3},
    )  # fmt: skip
    w = summary["wait_distribution"]
    kinds = sorted(
        set(summary["migrations_by_kind"]["real"]) | set(summary["migrations_by_kind"]["sim"])
    )
    mk = summary["migrations_by_kind"]
    by_kind = _table(["migration kind", "real", "simulated"],
                     [[k, mk["real"].get(k, 0), mk["sim"].get(k, 0)] for k in kinds],
                     {1, 2})  # fmt: skip
    dists = sorted(set(summary["migrations_by_distance"]["real"])
                   | set(summary["migrations_by_distance"]["sim"]), key=int)  # fmt: skip
    by_dist = _table(["SLIT distance", "real", "simulated"],
                     [[d, summary["migrations_by_distance"]["real"].get(d, 0),
                       summary["migrations_by_distance"]["sim"].get(d, 0)] for d in dists],
                     {0, 1, 2})  # fmt: skip
    tasks = _table(
        ["traced pid", "run ms real", "sim", "wait ms real", "sim", "turnaround ms real", "sim",
         "migrations real", "sim"],
        [[p, f"{r['run_ms']:.1f}", f"{s['run_ms']:.1f}", f"{r['wait_ms']:.1f}",
          f"{s['wait_ms']:.1f}", f"{r['turnaround_ms']:.1f}", f"{s['turnaround_ms']:.1f}",
          r["migrations"], s["migrations"]] for p, r, s in zip(pids, real, sim, strict=True)],
        set(range(9)),
    )  # fmt: skip
    parts = [
        *page_head(f"numasim · {title}", title),
        f'<p class="sub">{esc(sub)}; numasim {esc(__version__)}</p>',
        "<h2>Differences</h2>",
        paired,
        f"<p>Waiting times per task: two-sample Kolmogorov–Smirnov statistic "
        f"{w['ks_statistic']:.3f} (p = {w['ks_p']:.3g}), Wasserstein distance "
        f"{w['wasserstein_ms']:.2f} ms.</p>",
        "<h2>Schedules</h2>",
        _figure(schedules_figure(real_spans, sim_spans, len(pids)), SCHEDULE_CAPTION),
        "<h2>Waiting</h2>",
        _figure(
            wait_figure(
                [r["wait_ms"] for r in real], [s["wait_ms"] for s in sim], [str(p) for p in pids]
            ),
            WAIT_CAPTION,
        ),
        "<h2>Migrations</h2>",
        by_kind,
        by_dist,
        "<h2>Tasks</h2>",
        tasks,
        "</body></html>",
    ]
    return "\n".join(p for p in parts if p) + "\n"
