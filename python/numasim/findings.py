"""What an experiment without published numbers shows, computed from its numbers alone.

An experiment that reproduces no paper (no ``[reference]``, no claims) has nothing to agree or
disagree with; its text still says what it found, whatever that is. For the main metric and
every further metric (``metrics``), from the paired gains against the baseline (stats.gains):

1. Per compared policy, over every cell (machine, workload, n): in how many its metric is
   lower than the baseline's with the interval of the paired change excluding 0, in how many
   higher, in how many neither; the largest change each way and its cell; the range.
2. Per cell, the variant (baseline included) with the lowest mean: how many cells each
   variant has (a tie counts for each tied variant).

Nothing is judged better or worse: "lower" and "higher" are the numbers' words (a lower
turnaround is faster; a lower migration rate is neither good nor bad by itself).
"""

from __future__ import annotations

import pandas as pd

from numasim.experiment import METRIC_LABELS, Experiment
from numasim.report import confidence_text, fmt


def _cell(r: object) -> str:
    return f"{r.machine} · {r.workload} · n = {int(r.n)}"  # type: ignore[attr-defined]


def policy_line(policy: str, baseline: str, g: pd.DataFrame, conf: str) -> str:
    """Step 1 for one policy: ``g`` holds its gains (``gain_pct``, positive = lower than the
    baseline) with their intervals, one row per cell."""
    cells = len(g)
    known = g[g.gain_pct.notna()]
    lower = known[known.gain_ci_low > 0]
    higher = known[known.gain_ci_high < 0]
    neither = len(known) - len(lower) - len(higher)
    parts = [f"{policy} vs {baseline}: lower in {len(lower)}, higher in {len(higher)} of "
             f"{cells} cells where the {conf} interval of the paired change excludes 0 "
             f"(neither in {neither}"
             + (f", no change computable in {cells - len(known)}" if len(known) < cells else "")
             + ")"]  # fmt: skip
    if len(lower):
        r = lower.loc[lower.gain_pct.idxmax()]
        parts.append(f"lower by up to {fmt(r.gain_pct, 2)} % ({_cell(r)})")
    if len(higher):
        r = higher.loc[higher.gain_pct.idxmin()]
        parts.append(f"higher by up to {fmt(-r.gain_pct, 2)} % ({_cell(r)})")
    if len(known):
        parts.append(f"changes from {fmt(known.gain_pct.min(), 2)} to "
                     f"{fmt(known.gain_pct.max(), 2)} % (positive = lower)")  # fmt: skip
    return "; ".join(parts) + "."


def lowest_line(exp: Experiment, summary: pd.DataFrame) -> str:
    """Step 2: per cell, which variant has the lowest mean, counted over the cells."""
    counts = {v.label: 0 for v in exp.variants}
    cells = 0
    for _, d in summary.groupby(["machine", "workload", "n"], sort=False):
        d = d[d["mean"].notna()]
        if d.empty:
            continue
        cells += 1
        low = d["mean"].min()
        for label in d[d["mean"] == low].policy:
            counts[label] = counts.get(label, 0) + 1
    ranked = sorted(counts.items(), key=lambda kv: -kv[1])
    text = ", ".join(f"{label} {k}" for label, k in ranked if k)
    return f"lowest mean per cell (of {cells}; a tie counts for each): {text or 'none'}."


def text(exp: Experiment, frames: list[tuple[str, pd.DataFrame, pd.DataFrame]],
         confidence: float) -> list[str]:  # fmt: skip
    """The findings, one paragraph per metric: ``frames`` holds ``(metric, summary, gains)``
    for each metric to describe (stats.summarize and stats.gains of it)."""
    conf = confidence_text(confidence)
    out = [f"What it shows ({exp.name} publishes no numbers to compare with; every sentence "
           "below is computed from the tables above):"]  # fmt: skip
    for metric, summary, gains in frames:
        lines = [f"{METRIC_LABELS[metric]}:"]
        for v in exp.policies:
            g = gains[gains.policy == v.label]
            lines.append("  " + policy_line(v.label, exp.baseline.label, g, conf))
        lines.append("  " + lowest_line(exp, summary))
        out += lines
    return out
