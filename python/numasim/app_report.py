"""Per-application results of an experiment whose workloads have applications (``app=`` specs
and mixes): tables, files and figures beside the usual turnaround table.

```
run rows (experiment.run_batch): row["apps"] = [{app, name, threads, turnaround_ms, ...}]
        │ experiment.app_rows
        ▼
apps (one row per run and application)                                  OUT/apps.{csv,parquet}
  ├─ stats.app_summary   completion and remote share per policy         OUT/app_summary.*
  ├─ stats.app_gains     paired speed-up and gain per application       OUT/app_gains.*
  └─ stats.app_average   gain averaged over the applications, paired    (in the text, --json)
runs ── stats.evaluations  candidate evaluations per balancing pass      (in the text, --json)
        ▼
text (after the turnaround table) · figures/NAME-apps-{completion,gain}-MACHINE-WORKLOAD.*
```

An application's completion time is the turnaround of its last thread (arrival of the first
to completion of the last). Gain = (baseline − policy) / baseline × 100 of that time, per
replication on the same workload instance, reported as the mean and t interval over the
replications; speed-up = baseline / policy as the geometric mean, its interval from the logs
(stats.py). The average over the applications averages one replication's applications first,
so its interval is paired too. The published
average (``[reference] average_gain_pct``) is set beside that average.
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from numasim import report, stats
from numasim.assumptions import describe
from numasim.experiment import Experiment
from numasim.names import file_stem

#: The figures of each cell, in the order ``figure_tasks`` draws them.
FIGURE_KINDS = ("completion", "gain")
#: Captions of the figures, by kind (the part of the file name after ``-apps-``).
FIGURE_CAPTIONS = {
    "completion": "numasim: completion time of each application (its last thread) per policy, "
    "with intervals.",
    "gain": "numasim: gain in each application's completion time vs the baseline (left; the "
    "paper's average dotted) and each application's remote-access share (right).",
}


@dataclass
class AppResults:
    """Everything the per-application part of a reproduction shows."""

    apps: pd.DataFrame
    summary: pd.DataFrame
    gains: pd.DataFrame
    average: pd.DataFrame
    evaluations: pd.DataFrame
    confidence: float
    #: The figures written (``figure_tasks``, ``record``), each with its caption.
    captions: dict[Path, str] = field(default_factory=dict)

    @property
    def figures(self) -> list[Path]:
        return list(self.captions)


def compute(exp: Experiment, runs: pd.DataFrame, apps: pd.DataFrame,
            confidence: float) -> AppResults | None:  # fmt: skip
    """The statistics of ``apps`` (``Outcome.apps``); None when no workload has applications."""
    if apps.empty:
        return None
    return AppResults(apps, stats.app_summary(apps, confidence),
                      stats.app_gains(apps, exp, confidence),
                      stats.app_average(apps, exp, confidence),
                      stats.evaluations(runs, confidence), confidence)  # fmt: skip


def write_tables(out: Path, a: AppResults) -> list[Path]:
    """CSV and Parquet of the per-application rows, their summary and their gains."""
    tables = [("apps", a.apps), ("app_summary", a.summary), ("app_gains", a.gains)]
    return report.write_frames(out, tables)


# --- text ---------------------------------------------------------------------------------


def _aligned(rows: list[list[str]]) -> list[str]:
    """Columns padded to their widest cell: the first (names) to the left, numbers right."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  " + "  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                             for i, (c, w) in enumerate(zip(r, widths, strict=True)))
            for r in rows]  # fmt: skip


def _pm(mean: float, half: float, digits: int) -> str:
    return report._pm(mean, half, digits, set())


def _ratio(r: Any) -> str:
    """A speed-up and its interval, which is not symmetric: ``1.052 [1.031, 1.074]``."""
    if math.isnan(r.speedup_ci_low):
        return f"{report.fmt(r.speedup, 3)} [{report.DASH}]"
    return (f"{report.fmt(r.speedup, 3)} [{report.fmt(r.speedup_ci_low, 3)}, "
            f"{report.fmt(r.speedup_ci_high, 3)}]")  # fmt: skip


def _cells(exp: Experiment, a: AppResults):
    """``(machine, workload, n)`` of the experiment that have applications, in its order."""
    have = set(zip(a.apps.machine, a.apps.workload, a.apps.n, strict=True))
    for machine, w, n in exp.cells():
        if (machine, w.name, n) in have:
            yield machine, w, n


def _cell(df: pd.DataFrame, machine: str, workload: str, n: int) -> pd.DataFrame:
    if df.empty:
        return df
    return df[(df.machine == machine) & (df.workload == workload) & (df.n == n)]


def text(exp: Experiment, a: AppResults) -> str:
    """Per cell: completion time per application and policy; speed-up and gain per
    application with their average and the paper's; remote share; evaluations per pass."""
    conf = report.confidence_text(a.confidence)
    base = exp.baseline.label
    lines = [f"{exp.name}: per application (completion = turnaround of its last thread)",
             f"± half-width of the {conf} t-interval over the replications; gain % = (baseline − "
             "policy) / baseline × 100", "of the completion time, paired per replication (mean); "
             "speed-up = baseline / policy (geometric mean)"]  # fmt: skip
    ref = exp.reference
    for machine, w, n in _cells(exp, a):
        s = _cell(a.summary, machine, w.name, n)
        g = _cell(a.gains, machine, w.name, n)
        avg = _cell(a.average, machine, w.name, n)
        ev = _cell(a.evaluations, machine, w.name, n)
        order = list(dict.fromkeys(s.app))
        head = f"{machine} · {report.workload_label(exp, w)}" + (
            f" · n = {n}" if len(exp.all_ns) > 1 else "")  # fmt: skip
        lines += ["", head, "", "  completion time (ms)"]
        rows = [["app", "threads", *(v.label for v in exp.variants)]]
        for app in order:
            row = s[s.app == app].set_index("policy")
            rows.append([app, str(int(row.threads.iloc[0]))] + [
                _pm(row.loc[v.label, "tat_mean"], row.loc[v.label, "tat_half_width"], 1)
                if v.label in row.index else report.DASH for v in exp.variants])  # fmt: skip
        lines += _aligned(rows)
        lines += ["", f"  vs {base}: speed-up (× [interval]) and gain (%) of the completion time"]
        header = ["app"]
        for v in exp.policies:
            header += [f"{v.label} speed-up", "gain %"]
        rows = [header]
        for app in order:
            rows.append([app, *_gain_cells(exp, g[g.app == app].set_index("policy"))])
        by_policy = avg.set_index("policy") if not avg.empty else avg
        rows.append([f"average of {len(order)}", *_gain_cells(exp, by_policy)])
        lines += _aligned(rows)
        if ref is not None and ref.average_gain_pct is not None and ref.policy in by_policy.index:
            ours = by_policy.loc[ref.policy, "gain_pct"]
            lines += [f"  paper ({ref.source}): average improvement {ref.average_gain_pct:g} % "
                      f"for {ref.policy};",
                      f"  numasim's average gain {report.fmt(ours, 2)} % "
                      f"(Δ {report.fmt(ours - ref.average_gain_pct, 2)} pp)"]  # fmt: skip
        lines += ["", "  remote-access share (% of accesses to another node's memory, "
                  "time-weighted)"]  # fmt: skip
        rows = [["app", *(v.label for v in exp.variants)]]
        for app in order:
            row = s[s.app == app].set_index("policy")
            rows.append([app] + [
                _pm(100 * row.loc[v.label, "remote_share_mean"],
                    100 * row.loc[v.label, "remote_share_half_width"], 1)
                if v.label in row.index else report.DASH for v in exp.variants])  # fmt: skip
        lines += _aligned(rows)
        if not ev.empty:
            lines += ["", "  balancing: candidate evaluations per balancing pass (selection "
                      "policies count them; 0 for the others)"]  # fmt: skip
            rows = [["policy", "evaluations/pass", "evaluations/run", "passes/run"]]
            for v in exp.variants:
                r = ev[ev.policy == v.label]
                if r.empty:
                    continue
                r = r.iloc[0]
                rows.append([v.label, _pm(r.evaluations_per_pass, r.half_width, 3),
                             report.fmt(r.evaluations, 0), report.fmt(r.passes, 0)])  # fmt: skip
            lines += _aligned(rows)
            lines += _select_lines(exp, ev)
    return "\n".join(lines)


def _select_lines(exp: Experiment, ev: pd.DataFrame) -> list[str]:
    """The pulls between nodes of ``linux:select=…`` variants, per run: ``detach_tasks`` passes,
    tasks picked, picks with two thread groups or more to choose from, picks that differ from
    the kernel's, evaluations per pick (none when no variant selects)."""
    if "select_picks" not in ev:
        return []
    rows = [["policy", "pulls/run", "picks/run", "with a choice", "changed", "evaluations/pick"]]
    for v in exp.variants:
        r = ev[ev.policy == v.label]
        if r.empty or pd.isna(r.iloc[0].get("select_picks")):
            continue
        r = r.iloc[0]
        per_pick = r.select_evaluations / r.select_picks if r.select_picks else 0.0
        rows.append([v.label, report.fmt(r.select_passes, 1), report.fmt(r.select_picks, 1),
                     report.fmt(r.select_picks_with_choice, 2),
                     report.fmt(r.select_picks_changed, 2), report.fmt(per_pick, 2)])  # fmt: skip
    if len(rows) == 1:
        return []
    return ["", "  selection between nodes (linux:select): detach_tasks passes from another "
            "node and tasks picked per run; picks with two thread groups or more to choose "
            "from; picks of another task than the kernel's; evaluations per pick",
            *_aligned(rows)]  # fmt: skip


def json_rows(a: AppResults) -> dict[str, Any]:
    """The per-application part of ``--json``: the rows of each table (a missing value is
    null)."""
    return {"app_gains": report.records(a.gains), "app_average": report.records(a.average),
            "app_summary": report.records(a.summary),
            "evaluations": report.records(a.evaluations)}  # fmt: skip


# --- figures ------------------------------------------------------------------------------


def _caption(exp: Experiment, a: AppResults, reps: int) -> str:
    return (f"error bars: {report.confidence_text(a.confidence)} t-interval, {reps} paired "
            "replications (every variant runs the same workloads)\n"
            + describe(exp.assumptions))  # fmt: skip


def completion_figure(exp: Experiment, a: AppResults, machine: str, w: Any, n: int):
    """One panel per application: its completion time under each policy, with intervals."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    s = _cell(a.summary, machine, w.name, n)
    order = list(dict.fromkeys(s.app))
    cols = min(4, len(order))
    rows = -(-len(order) // cols)
    k = len(exp.variants)
    panel_h = 0.9 + 0.32 * k
    width = max(8.0, 3.0 * cols + 1.6)
    fig = plt.figure(figsize=(width, panel_h * rows + 0.9 + report.CAPTION_IN),
                     layout="constrained")  # fmt: skip
    panels, foot = fig.subfigures(2, 1, height_ratios=[panel_h * rows + 0.9, report.CAPTION_IN])
    axes = panels.subplots(rows, cols, squeeze=False)
    labels = [v.label for v in exp.variants]
    for i, app in enumerate(order):
        ax = axes[i // cols][i % cols]
        d = s[s.app == app].set_index("policy")
        for j, v in enumerate(exp.variants):
            if v.label not in d.index:
                continue
            mean = d.loc[v.label, "tat_mean"]
            h = 0 if pd.isna(h := d.loc[v.label, "tat_half_width"]) else h
            # No completion time is negative: a wide interval's bar stops at 0.
            ax.errorbar(mean, j, xerr=[[min(h, max(mean, 0))], [h]], ls="none",
                        **report._style(j))  # fmt: skip
        ax.set_yticks(range(k), labels if i % cols == 0 else [""] * k)
        ax.set_ylim(k - 0.5, -0.5)
        ax.set_title(f"{app} ({int(d.threads.iloc[0])} threads)", fontsize=9)
        ax.tick_params(axis="x", labelsize=8)
        ax.xaxis.set_major_locator(MaxNLocator(nbins=4))  # 4-digit ms labels must not touch
        ax.grid(axis="x", alpha=0.3)
        ax.margins(x=0.25)
        report._readable(ax, "x", 0.0, report.MIN_METRIC_SPAN)
        if i // cols == rows - 1 or i + cols >= len(order):
            ax.set_xlabel("completion time (ms)", fontsize=8)
    for i in range(len(order), rows * cols):
        axes[i // cols][i % cols].set_visible(False)
    reps = int(s.replications.min()) if len(s) else 0
    title = (f"{machine} · {report.workload_label(exp, w)}"
             + (f" · n = {n}" if len(exp.all_ns) > 1 else "")
             + ": completion time of each application (last thread)")  # fmt: skip
    panels.suptitle(textwrap.fill(title, int(width * 9)))
    foot.text(0.5, 0.5, _caption(exp, a, reps), ha="center", va="center", fontsize=8,
              color="#444")  # fmt: skip
    return fig


def gain_figure(exp: Experiment, a: AppResults, machine: str, w: Any, n: int):
    """Left: each application's gain vs the baseline per policy (and their average, with the
    paper's average dotted); right: each application's remote share per policy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = _cell(a.summary, machine, w.name, n)
    g = _cell(a.gains, machine, w.name, n)
    avg = _cell(a.average, machine, w.name, n)
    order = list(dict.fromkeys(s.app))
    m = len(order)
    height = 1.6 + 0.42 * (m + 1)
    fig = plt.figure(figsize=(12, height + report.CAPTION_IN), layout="constrained")
    panels, foot = fig.subfigures(2, 1, height_ratios=[height, report.CAPTION_IN])
    ax1, ax2 = panels.subplots(1, 2, sharey=True)
    k = len(exp.variants)
    step = 0.7 / max(1, k)

    def off(j: int) -> float:
        return (j - (k - 1) / 2) * step

    for j, v in enumerate(exp.variants):
        if j > 0:
            d = g[g.policy == v.label].set_index("app")
            ys = [i + off(j) for i, app in enumerate(order) if app in d.index]
            xs = [d.loc[app, "gain_pct"] for app in order if app in d.index]
            err = [d.loc[app, "gain_ci_high"] - d.loc[app, "gain_pct"]
                   for app in order if app in d.index]  # fmt: skip
            r = avg[avg.policy == v.label]
            if not r.empty:
                ys.append(m + off(j))
                xs.append(r.gain_pct.iloc[0])
                err.append(r.gain_ci_high.iloc[0] - r.gain_pct.iloc[0])
            ax1.errorbar(xs, ys, xerr=pd.Series(err).fillna(0), ls="none", label=v.label,
                         **report._style(j))  # fmt: skip
        d = s[s.policy == v.label].set_index("app")
        ys = [i + off(j) for i, app in enumerate(order) if app in d.index]
        xs = [100 * d.loc[app, "remote_share_mean"] for app in order if app in d.index]
        err = [100 * d.loc[app, "remote_share_half_width"] for app in order if app in d.index]
        shares = pd.DataFrame({"mean": xs, "half_width": err})
        ax2.errorbar(xs, ys, xerr=report._metric_err(shares), ls="none",
                     label=v.label if j == 0 else None, **report._style(j))  # fmt: skip
    ax1.axvline(0, color="grey", lw=0.8)
    ax1.axhline(m - 0.5, color="#bbb", lw=0.8)
    ref = exp.reference
    if ref is not None and ref.average_gain_pct is not None:
        ax1.axvline(ref.average_gain_pct, color="black", ls=":", lw=1.4,
                    label=f"paper: average {ref.average_gain_pct:g} % ({ref.policy})")  # fmt: skip
    ax1.set_yticks(range(m + 1), [*order, "average"])
    ax1.set_ylim(m + 0.5, -0.5)
    base = exp.baseline.label
    ax1.set_title(textwrap.fill(f"gain in completion time vs {base}, % — higher is better", 75),
                  fontsize=10)  # fmt: skip
    ax1.set_xlabel(f"({base} − policy) / {base} × 100 (%)")
    ax2.set_title("remote-access share, % — lower is nearer its memory", fontsize=10)
    ax2.set_xlabel("share of accesses to another node's memory (%)")
    ax2.tick_params(axis="y", left=False)
    report._readable(ax1, "x", report.MIN_GAIN_SPAN_PP)
    report._readable(ax2, "x", report.MIN_GAIN_SPAN_PP)
    for ax in (ax1, ax2):
        ax.grid(axis="x", alpha=0.3)
    # One legend: the variants in their order (the baseline's marker from the right panel),
    # then the paper's average.
    h2, l2 = ax2.get_legend_handles_labels()
    h1, l1 = ax1.get_legend_handles_labels()
    handles = dict(zip(l1, h1, strict=True)) | dict(zip(l2, h2, strict=True))
    order_labels = [v.label for v in exp.variants] + [lb for lb in l1 if lb.startswith("paper")]
    panels.legend([handles[lb] for lb in order_labels], order_labels, loc="outside lower center",
                  ncol=min(len(order_labels), 4), frameon=False)  # fmt: skip
    several = len(exp.all_ns) > 1
    panels.suptitle(textwrap.fill(f"{machine} · {report.workload_label(exp, w)}"
                                  + (f" · n = {n}" if several else ""), 110))  # fmt: skip
    reps = int(g.replications.min()) if len(g) else 0
    foot.text(0.5, 0.5, _caption(exp, a, reps), ha="center", va="center", fontsize=8,
              color="#444")  # fmt: skip
    return fig


def figure_tasks(out: Path, exp: Experiment, a: AppResults) -> list[report.FigureTask]:
    """Per cell with applications, tasks that write
    ``figures/NAME-apps-completion-MACHINE-WORKLOAD[-nN].{png,svg}`` and ``...-apps-gain-...``,
    byte-reproducible as ``report.save_figure`` makes them; ``report.FigureDrawing`` runs them,
    and ``record`` keeps their files with their captions."""
    fig_dir = out / "figures"
    fig_dir.mkdir(exist_ok=True)

    def task(draw: Any, machine: str, w: Any, n: int, stem: Path) -> report.FigureTask:
        return lambda: report.save_figure(draw(exp, a, machine, w, n), stem)

    tasks = []
    for machine, w, n in _cells(exp, a):
        tail = file_stem(Path(machine).stem, report.workload_file_name(exp, w)) + (
            f"-n{n}" if len(exp.all_ns) > 1 else ""
        )
        for kind, draw in zip(FIGURE_KINDS, (completion_figure, gain_figure), strict=True):
            tasks.append(
                task(draw, machine, w, n, fig_dir / f"{file_stem(exp.name, 'apps', kind)}-{tail}")
            )
    return tasks


def record(a: AppResults, files: list[list[Path]]) -> list[Path]:
    """Keeps the files of ``figure_tasks`` (one list per task, in order: each cell's
    ``FIGURE_KINDS``) with their captions."""
    for i, paths in enumerate(files):
        for p in paths:
            a.captions[p] = FIGURE_CAPTIONS[FIGURE_KINDS[i % len(FIGURE_KINDS)]]
    return a.figures


def _gain_cells(exp: Experiment, by_policy: pd.DataFrame) -> list[str]:
    """Speed-up and gain cells of each policy (a dash for a policy without a row)."""
    cells: list[str] = []
    for v in exp.policies:
        if v.label not in by_policy.index:
            cells += [report.DASH, report.DASH]
            continue
        r = by_policy.loc[v.label]
        cells += [_ratio(r), _pm(r.gain_pct, r.gain_ci_high - r.gain_pct, 2)]
    return cells
