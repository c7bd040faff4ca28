"""Paper-shaped tables, result files and figures of an experiment.

Conventions (docs/experiments.md, "Reading the tables and figures"):

- gain (times) or reduction (counts, factors) % = (baseline − policy) / baseline × 100, paired
  per replication: positive = the policy is better (its metric is lower);
- ± and error bars are the half-width of the t-interval at the experiment's confidence;
- "—" marks a value that does not exist, and a footnote under the table says why;
- figures: one per machine and workload, the metric against n on the left and the gain on the
  right; one n only (``numasim compare``) gives a dot plot with the variants as categories.
  Files are byte-reproducible (no dates, fixed SVG ids).
"""

from __future__ import annotations

import math
import os
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from numasim.assumptions import describe
from numasim.experiment import METRIC_LABELS, Experiment, Reference, WorkloadDef
from numasim.names import file_stem

#: What a table shows for a value that does not exist (never "nan").
DASH = "—"
#: Per metric: the short name of its table columns, and what its gain is called in figures.
METRIC_NAMES = {
    "mean_tat_ms": ("TAT", "TAT reduction"),
    "median_tat_ms": ("median TAT", "median TAT reduction"),
    "p95_tat_ms": ("p95 TAT", "p95 TAT reduction"),
    "makespan_ms": ("makespan", "makespan reduction"),
    "far_from_origin": ("far", "reduction in processes far from origin"),
    "far_from_origin_pct": ("far %", "reduction in the share of processes far from origin"),
    "mean_remote_factor": ("remote factor", "reduction in the mean remote-access factor"),
    "mean_app_tat_ms": ("response", "response-time reduction"),
    "app_remote_share": ("remote share", "reduction in the applications' remote-access share"),
    "cross_node_migrations_per_s": ("x-node mig/s", "reduction in migrations between nodes"),
    "remote_share": ("remote share", "reduction in the remote-access share"),
}
_FOOTNOTES = {
    "interval": f"{DASH} after ±: fewer than 2 replications, no interval",
    "gain": f"{DASH} as a gain or reduction: the baseline is 0 in every replication, so there is "
    "no relative change",
    "runs": f"{DASH}: no runs for this n",
}


def metric_names(metric: str) -> tuple[str, str]:
    """(short column name, name of its gain) of ``metric``."""
    return METRIC_NAMES.get(metric, (metric, f"{metric} reduction"))


def _timed(metric: str) -> bool:
    return metric.endswith("_ms")


def _nan(x: Any) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def fmt(x: float | None, digits: int = 1) -> str:
    """``x`` with ``digits`` decimals; NaN is "—" and a negative zero prints as 0."""
    if _nan(x):
        return DASH
    text = f"{x:.{digits}f}"
    return text.lstrip("-") if float(text) == 0 else text


def _pm(mean: float, half: float, digits: int, notes: set[str], what: str = "runs") -> str:
    if _nan(mean):
        notes.add(what)
        return DASH
    if _nan(half):
        notes.add("interval")
        return f"{fmt(mean, digits)} ± {DASH}"
    return f"{fmt(mean, digits)} ± {fmt(half, digits)}"


def experiment_title(exp: Experiment) -> str:
    """The experiment's title, or what it compares when it has none (``numasim compare``)."""
    if exp.title:
        return exp.title
    # " and ", not ", ": a policy's options have commas of their own (origin-aware:v1=off,v2=off).
    return f"{' and '.join(v.label for v in exp.policies)} vs {exp.baseline.label}"


#: What a workload spec that gives only ``n`` generates (docs/workloads.md, the defaults; a test
#: holds the two to the same processes): how such a workload is labelled and its files named.
DEFAULT_WORKLOAD = "kind=cpu,exec=200,arrival=same"


def _ad_hoc(exp: Experiment) -> bool:
    """An untitled one-workload experiment (``numasim compare``, whose workload is named "w")."""
    return not exp.title and len(exp.workloads) == 1


def workload_label(exp: Experiment, w: WorkloadDef) -> str:
    """``W1 (kind=cpu,exec=200)``; an untitled one-workload experiment (``numasim compare``,
    whose workload is named "w") is labelled by its spec alone, or by the defaults' values."""
    if _ad_hoc(exp):
        return w.spec or f"{DEFAULT_WORKLOAD} (the defaults)"
    if w.mix:  # a mix's spec is long: its name says it (numasim run --workload MIX prints it)
        return f"{w.name} (mix {w.mix})"
    return f"{w.name} ({w.spec})" if w.spec else w.name


def confidence_text(confidence: float) -> str:
    return f"{confidence * 100:g} %"


def _replications_text(counts: pd.Series) -> str:
    lo, hi = (int(counts.min()), int(counts.max())) if len(counts) else (0, 0)
    return str(lo) if lo == hi else f"{lo}–{hi}"


def table_text(
    exp: Experiment,
    summary: pd.DataFrame,
    gains: pd.DataFrame,
    confidence: float,
    runs: pd.DataFrame | None = None,
    reference_gains: pd.DataFrame | None = None,
) -> str:
    """Rows = process counts; per workload the baseline's metric, each policy's and its gain %
    (for far-from-origin counts, a breakdown by the distance of the node where they ran most).
    A published average gain is set beside ``reference_gains`` when given (for applications:
    ``stats.app_average``), else beside the mean of ``gains``."""
    label = METRIC_LABELS[exp.metric]
    timed = _timed(exp.metric)
    how = "paired gain" if timed else "paired reduction relative to the baseline"
    lines = [f"{exp.name}: {experiment_title(exp)}"]
    if exp.source:
        lines.append(f"source: {exp.source}")
    lines.append(describe(exp.assumptions))
    lines.append(f"{label} and {how} (%, positive = the policy is better), "
                 f"± half-width of the {confidence_text(confidence)} t-interval")  # fmt: skip
    notes: set[str] = set()
    for machine in exp.machines:
        for w in exp.workloads:
            lines += ["", f"{machine} · {workload_label(exp, w)}"]
            lines += _cell_table(exp, exp.metric, summary, gains, machine, w, notes)
            if runs is not None and exp.metric.startswith("far_from_origin"):
                lines += ["", "  far from origin by the distance of the node where they ran most "
                          "(mean processes per run)"]  # fmt: skip
                lines += _far_breakdown(exp, runs, machine, w.name)
    if exp.reference:
        lines += ["", *_reference_lines(exp, gains if reference_gains is None
                                        else reference_gains)]  # fmt: skip
    reps = _replications_text(summary["replications"] if len(summary) else pd.Series([]))
    lines += ["", f"replications per cell: {reps} (paired: every variant runs the same workloads)"]
    lines += [_FOOTNOTES[k] for k in _FOOTNOTES if k in notes]
    return "\n".join(lines)


def _digits(metric: str) -> int:
    """Decimals of ``metric``'s means: 1 for times, percentages and counts, else 3."""
    return 1 if metric.endswith(("_ms", "_pct", "_per_s")) or metric.startswith("far") else 3


def _cell_table(exp: Experiment, metric: str, summary: pd.DataFrame, gains: pd.DataFrame,
                machine: str, w: WorkloadDef, notes: set[str]) -> list[str]:  # fmt: skip
    """One machine and workload: per n, the baseline's ``metric``, each policy's and its gain
    or reduction % (and the paper's numbers when ``metric`` is the experiment's and the paper
    publishes this workload)."""
    short = metric_names(metric)[0]
    timed = _timed(metric)
    digits = _digits(metric)
    ref = exp.reference if exp.reference and exp.reference.rows else None
    ref_here = metric == exp.metric and ref and any(wl == w.name for wl, _ in ref.rows)
    header = ["n", f"{exp.baseline.label} {short}"]
    for v in exp.policies:
        header += [f"{v.label} {short}", "gain %" if timed else "reduction %"]
    if ref_here:
        header += ["paper: base", "policy", "gain %", "Δ gain (pp)"]
    rows = [header]
    for n in exp.ns_of(w):
        s = summary[(summary.machine == machine) & (summary.workload == w.name)
                    & (summary.n == n)].set_index("policy")  # fmt: skip
        g = gains[(gains.machine == machine) & (gains.workload == w.name)
                  & (gains.n == n)].set_index("policy")  # fmt: skip
        row = [str(n)]
        for v in exp.variants:
            if v.label not in s.index:
                notes.add("runs")
                row.append(DASH)
            else:
                p = s.loc[v.label]
                row.append(_pm(p["mean"], p["half_width"], digits, notes))
            if v is exp.baseline:
                continue
            if v.label not in g.index:
                row.append(DASH)
            else:
                gg = g.loc[v.label]
                half = gg["gain_ci_high"] - gg["gain_pct"]
                row.append(_pm(gg["gain_pct"], half, 2, notes, "gain"))
        if ref_here:
            row += _published(ref, w.name, n, g)
        rows.append(row)
    return _aligned(rows)


def metrics_frames(exp: Experiment, runs: pd.DataFrame, confidence: float):
    """``(summary, gains)`` of the experiment's further metrics (``metrics``), each frame the
    concatenation over the metrics of what ``stats.summarize`` and ``stats.gains`` give (its
    ``metric`` column names which)."""
    from numasim import stats

    sums = [stats.summarize(runs, confidence, m) for m in exp.metrics]
    gains = [stats.gains(runs, exp, confidence, m) for m in exp.metrics]
    return pd.concat(sums, ignore_index=True), pd.concat(gains, ignore_index=True)


def metrics_text(exp: Experiment, summary: pd.DataFrame, gains: pd.DataFrame,
                 confidence: float) -> str:  # fmt: skip
    """The tables of the further metrics (``metrics_frames``), one per metric, machine and
    workload, as the main table is laid out."""
    lines: list[str] = []
    notes: set[str] = set()
    for metric in exp.metrics:
        timed = _timed(metric)
        how = "paired gain" if timed else "paired reduction relative to the baseline"
        lines += ["", f"{METRIC_LABELS[metric]} and {how} (%, positive = lower than "
                  f"{exp.baseline.label}), ± half-width of the {confidence_text(confidence)} "
                  "t-interval"]  # fmt: skip
        s = summary[summary.metric == metric]
        g = gains[gains.metric == metric]
        for machine in exp.machines:
            for w in exp.workloads:
                lines += ["", f"{machine} · {workload_label(exp, w)} · {metric_names(metric)[0]}"]
                lines += _cell_table(exp, metric, s, g, machine, w, notes)
    lines += [_FOOTNOTES[k] for k in _FOOTNOTES if k in notes]
    return "\n".join(lines[1:])


def _published(ref: Reference, workload: str, n: int, g: pd.DataFrame) -> list[str]:
    """The paper's baseline, policy and gain of a cell, and numasim's gain minus the paper's."""
    row = ref.rows.get((workload, n))
    if row is None:
        return [DASH] * 4
    base, pol, _ = row
    gain = ref.gain(workload, n)
    ours = g.loc[ref.policy, "gain_pct"] if ref.policy in g.index else float("nan")
    diff = ours - gain if gain is not None and not _nan(ours) else None
    return [fmt(base), fmt(pol), fmt(gain, 2), DASH if diff is None else f"{diff:+.2f}"]


def _reference_lines(exp: Experiment, gains: pd.DataFrame) -> list[str]:
    """Where the published numbers come from; for a published average, numasim's beside it."""
    ref = exp.reference
    assert ref is not None
    lines = [f"paper: {ref.source} — numbers of {ref.policy} vs {exp.baseline.label}"]
    if ref.quote:
        lines.append(f'  "{ref.quote}"')
    if ref.average_gain_pct is not None:
        for machine in exp.machines:
            g = gains[(gains.machine == machine) & (gains.policy == ref.policy)]
            ours = g.gain_pct.mean() if len(g) else float("nan")
            lines.append(f"  {machine}: paper's average gain {ref.average_gain_pct:.2f} %, "
                         f"numasim's {average_basis(gains)} {fmt(ours, 2)} % "
                         f"(Δ {fmt(ours - ref.average_gain_pct, 2)} pp)")  # fmt: skip
    return lines


def average_basis(gains: pd.DataFrame) -> str:
    """What numasim's number beside a published average is: the per-application average
    (``stats.app_average``, which has an ``apps`` column) or the mean gain over the sweep."""
    if "apps" in gains:
        return "gain in application completion time, averaged over the applications"
    return "mean gain over the sweep"


def _aligned(rows: list[list[str]], indent: str = "") -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [indent + "  ".join(c.rjust(wd) for c, wd in zip(r, widths, strict=True)) for r in rows]


def _far_breakdown(exp: Experiment, runs: pd.DataFrame, machine: str, workload: str) -> list[str]:
    cell = runs[(runs.machine == machine) & (runs.workload == workload)]
    cols = [c for c in cell.columns if c.startswith("far_at_") and cell[c].notna().any()]
    rows = [["n", "policy", *(c.removeprefix("far_at_") for c in cols)]]
    w = next(w for w in exp.workloads if w.name == workload)
    for n in exp.ns_of(w):
        for v in exp.variants:
            r = cell[(cell.n == n) & (cell.policy == v.label)]
            if not r.empty:
                rows.append([str(n), v.label, *(fmt(r[c].mean()) for c in cols)])
    return _aligned(rows, "  ")


def json_rows(exp: Experiment, gains: pd.DataFrame) -> dict[str, Any]:
    """The `--json` rows of a reproduction: one row per cell and policy, the means in ``unit``."""

    def num(x: float) -> float | None:
        return None if math.isnan(x) else float(x)

    rows = [{"machine": r.machine, "workload": r.workload, "n": int(r.n), "baseline": r.baseline,
             "policy": r.policy, "unit": r.unit, "baseline_mean": num(r.baseline_mean),
             "policy_mean": num(r.policy_mean), "gain_pct": num(r.gain_pct),
             "gain_ci_low": num(r.gain_ci_low), "gain_ci_high": num(r.gain_ci_high),
             "confidence": float(r.confidence),
             "replications": int(r.replications)} for r in gains.itertuples()]  # fmt: skip
    return {"experiment": exp.name, "metric": exp.metric, "rows": rows}


def records(df: pd.DataFrame) -> list[dict[str, Any]]:
    """``df``'s rows as JSON-ready dicts: numpy numbers as Python ones, NaN as None."""

    def clean(v: Any) -> Any:
        if isinstance(v, float | np.floating):
            return None if math.isnan(v) else float(v)
        if isinstance(v, np.integer):
            return int(v)
        return v

    return [{k: clean(v) for k, v in r.items()} for r in df.to_dict("records")]


def write_tables(out: Path, runs: pd.DataFrame, summary: pd.DataFrame, gains: pd.DataFrame):
    """CSV and Parquet of every run, of the per-cell summary and of the gains."""
    return write_frames(out, [("runs", runs), ("summary", summary), ("gains", gains)])


def write_frames(out: Path, tables: list[tuple[str, pd.DataFrame]]) -> list[Path]:
    """``OUT/NAME.csv`` and ``OUT/NAME.parquet`` of each ``(NAME, frame)``, each written whole
    or not at all (a temporary file, then a rename)."""
    paths = []
    for name, df in tables:
        for ext in ("csv", "parquet"):
            p = out / f"{name}.{ext}"
            if ext == "csv":
                write_whole(p, lambda tmp, df=df: df.to_csv(tmp, index=False))
            else:
                write_whole(p, lambda tmp, df=df: df.to_parquet(tmp, index=False))
            paths.append(p)
    return paths


def write_whole(path: Path, write: Callable[[Path], object]) -> None:
    """``write(tmp)`` into ``PATH.tmp``, then renamed to ``path``: the file is whole or absent,
    and a failed write (a full disk) leaves no ``.tmp`` behind."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        write(tmp)
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


#: Marker and line style per variant (baseline first); hollow markers and distinct dashes keep
#: a curve visible under another.
_MARKERS = "osD^v<>p"
_LINES = ["-", "--", "-.", ":"]
#: Horizontal offset between the variants' points, as a share of the sweep's span.
_DODGE = 0.012
#: Height of the caption's strip at the bottom of a figure (inches): two lines, the error bars
#: and the modelling assumptions.
CAPTION_IN = 0.45
#: SVG ids derive from this salt instead of a random one: the same data give the same bytes.
SVG_SALT = "numasim"


def _style(i: int) -> dict[str, Any]:
    return {"color": f"C{i}", "marker": _MARKERS[i % len(_MARKERS)], "mfc": "none", "mew": 1.4,
            "ms": 6, "capsize": 3, "elinewidth": 1}  # fmt: skip


#: The smallest span of a gain panel's axis, in percentage points: a 0.0005 % difference is drawn
#: as the nothing it is, not across the whole panel.
MIN_GAIN_SPAN_PP = 1.0
#: The smallest span of a metric panel's axis, as a share of its values' size.
MIN_METRIC_SPAN = 0.02


def caption(exp: Experiment, summary: pd.DataFrame) -> str:
    """What the error bars are: the interval, its confidence and the replication count; with
    2 replications, that the interval is wide, and where a metric's bars are cut at 0."""
    counts = summary["replications"] if len(summary) else pd.Series([0])
    if counts.max() < 2:
        return "no error bars: fewer than 2 replications\n" + describe(exp.assumptions)
    conf = summary["confidence"].iloc[0] if "confidence" in summary else exp.confidence
    note = ""
    if counts.min() == 2:
        from scipy import stats as sst

        t = float(sst.t.ppf((1 + conf) / 2, 1))
        note = f"; with 2 replications the interval is ±{t:.3g} standard errors: wide"
    if len(summary) and (summary["mean"] - summary["half_width"].fillna(0) < 0).any():
        note += f"; {metric_names(exp.metric)[0]} bars stop at 0"
    return (f"error bars: {confidence_text(conf)} t-interval, {_replications_text(counts)} "
            f"paired replications (every variant runs the same workloads){note}\n"
            + describe(exp.assumptions))  # fmt: skip


def _metric_err(d: pd.DataFrame) -> list[Any]:
    """A metric's error bars, below and above: no metric is negative, so none reaches below 0
    (a 2-replication interval of a turnaround can)."""
    half = d["half_width"].fillna(0)
    return [np.minimum(half, d["mean"].clip(lower=0)), half]


def _readable(ax: Any, axis: str, min_span: float, share: float = 0.0) -> None:
    """Plain tick labels on ``axis`` (no "+2e2" offset, no scientific notation), and a range
    narrower than ``min_span`` or ``share`` of its values' size widened to it around its
    centre, so that a difference too small to mean anything does not fill the panel."""
    ax.ticklabel_format(axis=axis, useOffset=False, style="plain")
    lo, hi = ax.get_xlim() if axis == "x" else ax.get_ylim()
    need = max(min_span, share * max(abs(lo), abs(hi)))
    if hi - lo < need:
        mid = (lo + hi) / 2
        (ax.set_xlim if axis == "x" else ax.set_ylim)(mid - need / 2, mid + need / 2)


def gain_title(exp: Experiment) -> str:
    """The gain panel's title: the metric, the baseline and the sign."""
    noun = metric_names(exp.metric)[1]
    return f"{noun} vs {exp.baseline.label}, % — higher is better"


def figure(exp: Experiment, machine: str, w: WorkloadDef, summary: pd.DataFrame,
           gains: pd.DataFrame):  # fmt: skip
    """The figure of one machine and workload: the metric (left) and the gain (right) against
    n, or a dot plot of the variants when the sweep has a single n."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = summary[(summary.machine == machine) & (summary.workload == w.name)]
    g = gains[(gains.machine == machine) & (gains.workload == w.name)]
    title = f"{machine} · {workload_label(exp, w)}"
    ns = exp.ns_of(w)
    single = len(ns) == 1
    k = len(exp.variants)
    height = 1.9 + 0.45 * k if single else 4.8
    fig = plt.figure(figsize=(11, height + CAPTION_IN), layout="constrained")
    # Panels (and their legend) above, the caption in a strip of its own below: nothing the
    # layout places can run into it.
    panels, foot = fig.subfigures(2, 1, height_ratios=[height, CAPTION_IN])
    if single:
        _dot_plot(panels, exp, s, g)
        title += f" · n = {ns[0]}"
    else:
        _sweep_plot(panels, exp, s, g, ns)
    fig.suptitle(title)
    foot.text(0.5, 0.5, caption(exp, s), ha="center", va="center", fontsize=8, color="#444")
    return fig


def _no_gain(g: pd.DataFrame) -> str:
    """Why a cell's gains are missing ("" when one is not)."""
    if g.empty:
        return "no runs"
    if g.gain_pct.isna().all():
        return "baseline 0: no reduction" if (g.baseline_mean == 0).all() else "no gain"
    return ""


def _sweep_plot(fig: Any, exp: Experiment, s: pd.DataFrame, g: pd.DataFrame,
                ns: list[int]) -> None:  # fmt: skip
    """The metric and the gain against n (the workload's ``ns``); one legend for both, under
    them."""
    ax1, ax2 = fig.subplots(1, 2)
    ns = sorted(ns)
    span = (ns[-1] - ns[0]) or 1
    k = len(exp.variants)

    def dodge(i: int, among: int = k) -> float:
        """The x offset of the i-th of ``among`` series: centred on n, a little apart."""
        return _DODGE * span * (i - (among - 1) / 2)

    for i, v in enumerate(exp.variants):
        d = s[s.policy == v.label].sort_values("n")
        ax1.errorbar(d.n + dodge(i), d["mean"], yerr=_metric_err(d), label=v.label,
                     ls=_LINES[i % len(_LINES)], **_style(i))  # fmt: skip
    for i, v in enumerate(exp.policies, start=1):
        d = g[g.policy == v.label].sort_values("n")
        err = (d.gain_ci_high - d.gain_pct).fillna(0)
        # The same colour, marker and dashes as the policy's curve on the left; dodged among
        # the policies only (one policy sits on its n).
        ax2.errorbar(d.n + dodge(i - 1, k - 1), d.gain_pct, yerr=err, ls=_LINES[i % len(_LINES)],
                     **_style(i))  # fmt: skip
    ax2.axhline(0, color="grey", lw=0.8)
    _overlay_published(ax2, exp, g)
    # An n without a gain (no runs, or a baseline of 0) keeps its place on the axis, marked.
    for n in ns:
        why = _no_gain(g[g.n == n])
        if why:
            ax2.text(n, 0, why, rotation=90, ha="center", va="bottom", fontsize=8, color="#666")
    pad = 0.05 * span
    for ax in (ax1, ax2):
        ax.set_xticks(ns)
        ax.set_xlim(ns[0] - pad, ns[-1] + pad)
        ax.set_xlabel("processes (n)")
        ax.grid(alpha=0.3)
    _readable(ax1, "y", 0.0, MIN_METRIC_SPAN)
    _readable(ax2, "y", MIN_GAIN_SPAN_PP)
    ax1.set_ylabel(METRIC_LABELS[exp.metric])
    ax2.set_ylabel(f"{metric_names(exp.metric)[1]} (%)")
    ax2.set_title(textwrap.fill(gain_title(exp), 60), fontsize=10)
    ax1.set_title(METRIC_LABELS[exp.metric], fontsize=10)
    # One legend for both panels (a policy has the same style on each), outside the axes.
    handles, labels = ax1.get_legend_handles_labels()
    extra = ax2.get_legend_handles_labels()
    # Four columns fit the figure's width with short labels; long ones (options) take three.
    wide = max(len(label) for label in labels + extra[1]) > 32
    fig.legend(handles + extra[0], labels + extra[1], loc="outside lower center",
               ncol=min(k + len(extra[0]), 3 if wide else 4), frameon=False)  # fmt: skip


def _overlay_published(ax: Any, exp: Experiment, g: pd.DataFrame) -> None:
    """The paper's gains of this workload on the gain panel: crosses per n, or its average as
    a dotted line."""
    ref = exp.reference
    if ref is None or g.empty:
        return
    workload = g.workload.iloc[0]
    pts = sorted((n, ref.gain(wl, n)) for wl, n in ref.rows if wl == workload)
    pts = [(n, v) for n, v in pts if v is not None]
    if pts:
        ax.plot([n for n, _ in pts], [v for _, v in pts], ls="none", marker="x", ms=8, mew=1.8,
                color="black", label=f"paper ({ref.source.split('(')[0].strip()})")  # fmt: skip
    if ref.average_gain_pct is not None:
        ax.axhline(ref.average_gain_pct, color="black", ls=":", lw=1.4,
                   label=f"paper: average gain {ref.average_gain_pct:g} %")  # fmt: skip


def _dot_plot(fig: Any, exp: Experiment, s: pd.DataFrame, g: pd.DataFrame) -> None:
    """One n: the variants are categories (rows), the values dots with their intervals."""
    k = len(exp.variants)
    ax1, ax2 = fig.subplots(1, 2, sharey=True)
    for i, v in enumerate(exp.variants):
        d = s[s.policy == v.label]
        ax1.errorbar(d["mean"], [i] * len(d), xerr=_metric_err(d), ls="none",
                     **_style(i))  # fmt: skip
    for i, v in enumerate(exp.policies, start=1):
        d = g[g.policy == v.label]
        err = (d.gain_ci_high - d.gain_pct).fillna(0)
        ax2.errorbar(d.gain_pct, [i] * len(d), xerr=err, ls="none", **_style(i))
        why = _no_gain(d)
        if why:
            ax2.text(0, i, why, ha="center", va="center", fontsize=8, color="#666")
    ax2.axvline(0, color="grey", lw=0.8)
    ax1.set_yticks(range(k), [v.label for v in exp.variants])
    ax1.set_ylim(k - 0.5, -0.5)  # the baseline on top
    ax2.tick_params(axis="y", left=False)
    # The baseline's row has no gain: say so instead of leaving a blank.
    ax2.text(0.5, 0, "(baseline)", transform=ax2.get_yaxis_transform(), ha="center",
             va="center", fontsize=8, color="grey")  # fmt: skip
    _readable(ax1, "x", 0.0, MIN_METRIC_SPAN)
    _readable(ax2, "x", MIN_GAIN_SPAN_PP)
    ax1.set_xlabel(METRIC_LABELS[exp.metric])
    ax2.set_xlabel(f"{metric_names(exp.metric)[1]} (%)")
    ax2.set_title(textwrap.fill(gain_title(exp), 60), fontsize=10)
    ax1.set_title(METRIC_LABELS[exp.metric], fontsize=10)
    for ax in (ax1, ax2):
        ax.grid(axis="x", alpha=0.3)


def figure_tasks(out: Path, exp: Experiment, summary: pd.DataFrame,
                 gains: pd.DataFrame) -> list[FigureTask]:  # fmt: skip
    """Per machine and workload, a task that writes ``figures/NAME-MACHINE-WORKLOAD.{png,svg}``
    (see ``figure``) and returns the two files; the same data give the same bytes (no dates or
    software versions, a fixed SVG id salt). ``FigureDrawing`` runs them."""
    fig_dir = out / "figures"
    fig_dir.mkdir(exist_ok=True)

    def task(machine: str, w: WorkloadDef) -> FigureTask:
        stem = file_stem(exp.name, Path(machine).stem, workload_file_name(exp, w))
        return lambda: save_figure(figure(exp, machine, w, summary, gains), fig_dir / stem)

    return [task(machine, w) for machine in exp.machines for w in exp.workloads]


def workload_file_name(exp: Experiment, w: WorkloadDef) -> str:
    """A workload's part of a file name: its name, or for ``numasim compare`` (whose workload is
    named "w") its spec or the defaults' values."""
    return (w.spec or DEFAULT_WORKLOAD) if _ad_hoc(exp) else w.name


def write_figures(out: Path, exp: Experiment, summary: pd.DataFrame, gains: pd.DataFrame):
    """The files of ``figure_tasks``, drawn here, one after the other."""
    return [p for task in figure_tasks(out, exp, summary, gains) for p in task()]


#: Draws and saves one figure, and returns its files (``save_figure``).
FigureTask = Callable[[], list[Path]]


class FigureDrawing:
    """``with FigureDrawing(tasks, jobs) as drawing: ...; files = drawing.result()``. Draws
    ``tasks`` in up to ``jobs`` processes forked from this one while the caller goes
    on (the CLI writes the tables); ``result()`` waits and gives each task's files, in order.

    The processes inherit the tasks, closures over the results, so only the paths come back
    (over a pipe); a task's error is raised by ``result()``, as if it had run here. Each process
    draws a fixed share of the tasks and exits, ignores Ctrl-C (the command handles it), and is
    terminated when the ``with`` block ends early (an error, Ctrl-C, SIGTERM) or killed when
    the command is (numasim.lifeline): no figure process outlives the command's work. Fewer
    than two tasks, one job, or not Linux (``fork`` is the start method that inherits the
    tasks, and only Linux's is safe with the libraries loaded): the tasks run here, in
    ``result()``. The caller forks before writing Parquet, whose Arrow
    threads a fork must not copy mid-work."""

    def __init__(self, tasks: list[FigureTask], jobs: int) -> None:
        self.tasks = tasks
        self.procs: list[tuple[Any, Any, list[int]]] = []
        n = min(jobs, len(tasks))
        if n < 2 or sys.platform != "linux":
            return
        import multiprocessing

        ctx = multiprocessing.get_context("fork")
        for k in range(n):
            share = list(range(k, len(tasks), n))
            recv, send = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_draw_share, args=(tasks, share, send, os.getpid()),
                               daemon=True)  # fmt: skip
            proc.start()
            send.close()
            self.procs.append((proc, recv, share))

    def __enter__(self) -> FigureDrawing:
        return self

    def __exit__(self, *exc: object) -> None:
        for proc, recv, _ in self.procs:
            if proc.is_alive():
                proc.terminate()
            proc.join()
            recv.close()

    @property
    def pids(self) -> list[int]:
        return [proc.pid for proc, _, _ in self.procs]

    def result(self) -> list[list[Path]]:
        if not self.procs:
            return [task() for task in self.tasks]
        files: list[list[Path]] = [[] for _ in self.tasks]
        for proc, recv, share in self.procs:
            try:
                ok, value = recv.recv()
            except EOFError:  # it died without a word (killed)
                raise RuntimeError(f"a figure process ended with code {proc.exitcode}") from None
            if not ok:
                raise value
            for i, paths in zip(share, value, strict=True):
                files[i] = paths
        return files


def _draw_share(tasks: list[FigureTask], share: list[int], send: Any, command_pid: int) -> None:
    """A figure process: draws its share of ``tasks`` and sends back ``(True, files)``, or
    ``(False, error)`` at the first that fails; it ends with the command, even a killed one."""
    import pickle
    import signal

    from numasim.lifeline import die_with

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the command's handler is not this one's
    die_with(command_pid)
    try:
        message = (True, [tasks[i]() for i in share])
    except Exception as e:  # sent to the parent, which raises it
        try:
            pickle.dumps(e)
            message = (False, e)
        except Exception:  # an error that does not pickle: its text
            message = (False, RuntimeError(f"{type(e).__name__}: {e}"))
    send.send(message)
    send.close()


def save_figure(fig: Any, stem: Path) -> list[Path]:
    """``STEM.png`` and ``STEM.svg``, reproducible (no dates or versions, a fixed SVG id
    salt); closes the figure."""
    import matplotlib
    import matplotlib.pyplot as plt

    paths = []
    with matplotlib.rc_context({"svg.hashsalt": SVG_SALT}):
        for ext, meta in (("png", {"Software": None}), ("svg", {"Date": None})):
            p = stem.with_name(f"{stem.name}.{ext}")
            fig.savefig(p, dpi=150, metadata=meta)
            paths.append(p)
    plt.close(fig)
    return paths
