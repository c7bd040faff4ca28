"""One self-contained HTML page: a trace's real schedule beside numasim's replay of it
(``numasim replay TRACE --report FILE.html``), in the run report's style.

```
<h1> trace · policy on machine · tasks
 Differences   paired per-task differences (simulated − real), distances of waiting times and
               of delays per wake-up
 Runs          the run report's summary of each side (the real schedule as run events)
 Schedules     the two schedules: each CPU's running tasks over time, real above, simulated below
 Waiting       per-task waiting time, real beside simulated; delays per wake-up as two CDFs
 Migrations    by kind, by SLIT distance and by domain level, both sides
 Tasks         one row per task
```
"""

from __future__ import annotations

import html
from typing import Any

from numasim.render import summary_items
from numasim.run_report import _figure, _pyplot, _svg, _table, page_head

SCHEDULE_CAPTION = (
    "Each CPU's running tasks over time (one colour per task), the traced run above, numasim's "
    "replay below; time from the first replayed task's arrival."
)
WAIT_CAPTION = "Time each task waited runnable (not running), real and simulated."
DELAY_CAPTION = (
    "Delay of each wake-up (from the wake-up to the task's next switch-in), as the share of "
    "wake-ups with at most that delay: real and simulated."
)
RUNS_CAPTION = (
    "The run report's summary of each side: the real schedule read as numasim's run events "
    "(a trace holds no balancing attempt, memory placement or cache refill: those read 0 or "
    "all local). Real migrations are named by the kernel's kinds, simulated ones by "
    "numasim's; the migration table below names both the kernel's way."
)


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


def delay_figure(real: list[float], sim: list[float]) -> str:
    """The delays per wake-up of each side as an empirical CDF."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(10, 3.2), constrained_layout=True)
    for values, label, color in ((real, "real", "#4c72b0"), (sim, "simulated", "#dd8452")):
        if values:
            xs = sorted(values)
            ys = [(i + 1) / len(xs) for i in range(len(xs))]
            ax.step([0.0, *xs], [0.0, *ys], where="post", color=color,
                    label=f"{label} ({len(xs)} wake-ups)")  # fmt: skip
    ax.set(xlabel="delay per wake-up (ms)", ylabel="share of wake-ups")
    ax.set_ylim(0, 1.02)
    ax.set_xlim(left=0)
    if real or sim:
        ax.legend(loc="lower right")
    else:
        ax.text(0.5, 0.5, "no task woke up on either side", ha="center", va="center",
                transform=ax.transAxes, color="#555")  # fmt: skip
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
    real_raw: dict[str, Any],
    sim_raw: dict[str, Any],
) -> str:
    from numasim import __version__

    esc = html.escape
    c = round(100 * summary["confidence"])
    paired = _table(
        ["per task", "real", "simulated", f"difference (simulated − real), {c} % interval"],
        [_paired_row(m, v, summary["tasks"]) for m, v in summary["paired"].items()],
        {1, 2, 3},
    )
    wd = summary["wake_delay_distribution"]
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
    ml = summary["migrations_by_domain_level"]
    by_level = _table(["domain level", "real", "simulated"],
                      [[k, ml["real"].get(k, 0), ml["sim"].get(k, 0)]
                       for k in _ordered(ml["real"], ml["sim"])], {1, 2})  # fmt: skip
    tasks = _table(
        ["traced pid", "run ms real", "sim", "wait ms real", "sim", "wake-up delay ms real",
         "sim", "turnaround ms real", "sim", "migrations real", "sim"],
        [[p, f"{r['run_ms']:.1f}", f"{s['run_ms']:.1f}", f"{r['wait_ms']:.1f}",
          f"{s['wait_ms']:.1f}", _ms(r["wake_delay_ms"]), _ms(s["wake_delay_ms"]),
          f"{r['turnaround_ms']:.1f}", f"{s['turnaround_ms']:.1f}",
          r["migrations"], s["migrations"]] for p, r, s in zip(pids, real, sim, strict=True)],
        set(range(11)),
    )  # fmt: skip
    real_items = summary_items(real_raw["summary"], real_raw["processes"])
    sim_items = dict(summary_items(sim_raw["summary"], sim_raw["processes"]))
    runs = _table(["", "real", "simulated"],
                  [[k, v, sim_items.get(k, "")] for k, v in real_items])  # fmt: skip
    parts = [
        *page_head(f"numasim · {title}", title),
        f'<p class="sub">{esc(sub)}; numasim {esc(__version__)}</p>',
        "<h2>Differences</h2>",
        paired,
        f"<p>Waiting times per task: two-sample Kolmogorov–Smirnov statistic "
        f"{w['ks_statistic']:.3f} (p = {w['ks_p']:.3g}), Wasserstein distance "
        f"{w['wasserstein_ms']:.2f} ms.</p>",
        f"<p>{esc(_wake_sentence(wd))}</p>",
        "<h2>Runs</h2>",
        runs,
        f"<p>{esc(RUNS_CAPTION)}</p>",
        "<h2>Schedules</h2>",
        _figure(schedules_figure(real_spans, sim_spans, len(pids)), SCHEDULE_CAPTION),
        "<h2>Waiting</h2>",
        _figure(
            wait_figure(
                [r["wait_ms"] for r in real], [s["wait_ms"] for s in sim], [str(p) for p in pids]
            ),
            WAIT_CAPTION,
        ),
        _figure(
            delay_figure(
                [d for r in real for d in r["wake_delays_ms"]],
                [d for s in sim for d in s["wake_delays_ms"]],
            ),
            DELAY_CAPTION,
        ),
        "<h2>Migrations</h2>",
        by_kind,
        by_dist,
        by_level,
        "<h2>Tasks</h2>",
        tasks,
        "</body></html>",
    ]
    return "\n".join(p for p in parts if p) + "\n"


def _paired_row(metric: str, v: dict[str, Any], tasks: int) -> list[str]:
    if v["diff_mean"] is None:
        return [metric, "n/a", "n/a", "no task on both sides"]
    half = "n/a" if v["diff_half_width"] is None else f"{v['diff_half_width']:.2f}"
    over = "" if v["tasks"] == tasks else f" ({v['tasks']} tasks)"
    return [metric, f"{v['real_mean']:.2f}", f"{v['sim_mean']:.2f}",
            f"{v['diff_mean']:+.2f} ± {half}{over}"]  # fmt: skip


def _wake_sentence(w: dict[str, Any]) -> str:
    counts = f"{w['wakeups_real']} real and {w['wakeups_sim']} simulated wake-ups"
    if w["ks_statistic"] is None:
        return f"Delays per wake-up: {counts}; a side without any has no distance."
    return (
        f"Delays per wake-up ({counts}): two-sample Kolmogorov–Smirnov statistic "
        f"{w['ks_statistic']:.3f} (p = {w['ks_p']:.3g}), Wasserstein distance "
        f"{w['wasserstein_ms']:.3f} ms."
    )


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def _ordered(*sides: dict[str, int]) -> list[str]:
    """Keys in the order first seen (the compare orders domain levels from the lowest)."""
    out: list[str] = []
    for side in sides:
        out += [k for k in side if k not in out]
    return out
