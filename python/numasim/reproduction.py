"""Reproductions: which modelling assumption carries a result (``numasim reproduce NAME
--ablate``), and one page that sets a paper's published numbers beside numasim's
(``--report FILE.html``).

```
experiment, setting S (its profile, the file's values, --assume)
  ├─ runs under S                          ─┐
  ├─ runs under S,memory=OTHER  (one flip)  │ one store, OUT/results.sqlite: every run is keyed
  ├─ runs under S,slice=OTHER               │ by its resolved assumptions, so the settings never
  ├─ runs under S,wake=OTHER                │ mix and a rerun reuses them all
  ├─ runs under S,exec=OTHER (IO workloads)  │
  ├─ runs under S,cost=paper                │
  ├─ runs under S,remote=scaled             │
  └─ runs with one open choice set         ─┘ (m, random-window, place, si: choices.py)
        │ stats.gains per setting
        ▼
  ablation rows (machine, workload, n, policy, assumption, gain under S, gain flipped, Δ pp)
        ▼
  printed table · OUT/ablation.csv · OUT/figures/NAME-ablation-MACHINE-WORKLOAD.{png,svg}
  HTML page: setup, assumptions with sources, published vs numasim, figures, ablation, reading
```

Ablation, one factor at a time:

1. The current profile is the one whose values S has (``assumptions.profile_of``), else the
   experiment's own profile; the other profile is the other of ``PROFILES``.
2. Every assumption whose value under S differs from the other profile's is flipped alone: a
   copy of the experiment with ``,NAME=VALUE`` appended to its ``assume``. An assumption whose
   value under S is already the other profile's is listed as not flipped. An assumption both
   profiles give the same value (``exec``, ``cost``, ``load``, ``remote``) is flipped to each of
   its other values; one that acts on nothing in the experiment (``APPLIES``: ``exec`` without
   IO-bound processes, ``load`` without a load level) is not flipped.
   2b. Every open choice (``choices.py``: memory intensity, the window of random arrivals,
   capability-aware's ``place``, origin-aware's ``si``) that applies to the experiment is set
   to each of its alternatives, alone.
3. Each copy runs through ``experiment.execute`` into the same directory. Replication seeds do
   not depend on the assumptions, so a flipped run of replication r simulates the same workload
   as the unflipped one.
4. Δ = gain flipped − gain under S, in percentage points. For times, its interval is the paired
   t interval of the per-replication differences g_flip,r − g_S,r (whose mean is Δ exactly).

The reading (on the page), per machine and workload of the compared policy, from the numbers:

1. SIGN: at how many of the published n the published and numasim gains have the same sign.
2. TREND: Spearman's rank correlation ρ of gain vs n, for each; "rises" if ρ ≥ 0.5, "falls" if
   ρ ≤ −0.5, else "no clear trend"; needs 3 n or more. Trends agree when both rise or both fall.
3. MAGNITUDE: the mean |published − numasim| in pp, and how many published gains lie inside
   numasim's interval.

A file with only a published average gain is compared with numasim's mean gain over the sweep
(sign and difference; no trend). Without ``[reference]`` the page says so and describes
numasim's results alone.

Known limits: one factor at a time does not see interactions (two assumptions that matter only
together); the published numbers carry no interval, so "inside" is numasim's interval only.
"""

from __future__ import annotations

import base64
import copy
import html
import math
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from numasim import assumptions as assume
from numasim import choices, report, run_report, stats
from numasim.experiment import METRIC_LABELS, Experiment, execute
from numasim.names import file_stem

#: |Spearman ρ| of gain vs n from which the gains are said to rise or fall.
TREND_RHO = 0.5
#: Caption of the experiment's own figures on the page.
FIGURE_CAPTION = "numasim: the metric (left) and the gain (right) vs n."
#: Fewest n for a trend.
TREND_MIN_POINTS = 3


@dataclass(frozen=True)
class Flip:
    """One assumption flipped from its value under the experiment's setting to the other
    profile's value, or one open choice (``choices.py``) set to one of its alternatives
    (``choice`` true)."""

    name: str
    value: str
    flipped: str
    choice: bool = False

    @property
    def label(self) -> str:
        return f"{self.name}={self.flipped}"


@dataclass(frozen=True)
class Plan:
    """What the ablation flips: ``current`` is the profile of the setting, ``other`` the one
    flipped to; ``kept`` are ``(name, value)`` already at the other profile's value."""

    current: str
    other: str
    flips: list[Flip]
    kept: list[tuple[str, str]]


def _has_load_level(exp: Experiment) -> bool:
    return any("load=" in w.spec for w in exp.workloads)


#: Assumptions that act only on some experiments, by name: whether one does on ``exp``. The
#: ``load`` reading acts only on workloads with a load level (``load=``); elsewhere it is not
#: flipped (its runs would be the unflipped ones).
APPLIES = {
    # exec reads IO-bound processes only
    "exec": lambda exp: any(choices.has_io(w) for w in exp.workloads),
    "load": _has_load_level,
}


def plan(exp: Experiment) -> Plan:
    """Steps 1–2 of the ablation: the flips of ``exp`` under its setting, then every
    alternative of every open choice that applies to it (step 2b)."""
    resolved = exp.assumptions
    current = assume.profile_of(resolved) or exp.profile
    other = next(p for p in assume.PROFILES if p != current)
    flips, kept = [], []
    for name, value in resolved.items():
        if name in APPLIES and not APPLIES[name](exp):
            continue  # it changes nothing here: no flip, no runs
        e = assume.entry(name)
        target = e[other]["value"]
        if e[current]["value"] == target:
            # Not a difference of the profiles (both read it alike): every other value.
            flips += [Flip(name, value, v) for v in e["values"] if v != value]
        elif value == target:
            kept.append((name, value))
        else:
            flips.append(Flip(name, value, target))
    for c in choices.registry():
        now = choices.current(c, exp)
        flips += [Flip(c.name, now, alt, choice=True) for alt in choices.alternatives(c, exp)]
    return Plan(current, other, flips, kept)


def flipped(exp: Experiment, flip: Flip) -> Experiment:
    """A copy of ``exp`` with one assumption flipped (appended to its ``assume``), or one open
    choice set."""
    if flip.choice:
        return choices.apply(choices.entry(flip.name), flip.flipped, exp)
    out = copy.copy(exp)
    # An item of --assume naming the same assumption gives way to the flip (a setting names
    # each assumption once).
    kept = [t for t in (exp.assume or "").split(",") if t.split("=")[0].strip() != flip.name]
    out.assume = ",".join(t for t in (*kept, flip.label) if t.strip())
    return out


def rows_of(rows: pd.DataFrame, f: Flip) -> pd.DataFrame:
    """The ablation rows of one flip (a choice may have several alternatives)."""
    return rows[(rows.assumption == f.name) & (rows.flipped_value == f.flipped)]


@dataclass
class Ablation:
    """The ablation's result: ``rows`` (one per cell, policy and flip) and each setting's gains."""

    plan: Plan
    confidence: float
    base: pd.DataFrame
    gains: dict[str, pd.DataFrame]
    rows: pd.DataFrame
    computed: int
    reused: int
    #: The runs as run, and per flipped assumption its runs (claims re-evaluated: comparison.py).
    base_runs: pd.DataFrame | None = None
    runs: dict[str, pd.DataFrame] = field(default_factory=dict)


#: Columns of ``ablation.csv``.
COLUMNS = ["machine", "workload", "n", "policy", "assumption", "value", "flipped_value",
           "gain_pct", "gain_ci_low", "gain_ci_high", "flipped_gain_pct", "flipped_gain_ci_low",
           "flipped_gain_ci_high", "delta_pp", "delta_ci_low", "delta_ci_high", "replications",
           "confidence"]  # fmt: skip


def ablate(
    exp: Experiment,
    out: Path,
    base_runs: pd.DataFrame,
    confidence: float,
    jobs: int | None = None,
    cluster: str | None = None,
    on_progress: Callable[[str], Callable[[int, int], None] | None] | None = None,
) -> Ablation:
    """Runs each flip of ``exp`` into ``out`` (steps 3–4); ``base_runs`` are the runs under
    the experiment's setting; ``on_progress(label)`` gives each flip's progress callback."""
    p = plan(exp)
    metric = exp.metric
    base = stats.gains(base_runs, exp, confidence, metric)
    base_per_rep = _per_replication(base_runs, exp, metric)
    gains, rows, computed, reused, flipped_runs = {}, [], 0, 0, {}
    for f in p.flips:
        fexp = flipped(exp, f)
        outcome = execute(fexp, out, jobs=jobs, cluster=cluster,
                          on_progress=on_progress(f.label) if on_progress else None)  # fmt: skip
        computed, reused = computed + outcome.computed, reused + outcome.reused
        runs = flipped_runs[f.label] = outcome.runs
        g = stats.gains(runs, fexp, confidence, metric)
        gains[f.label] = g
        per_rep = _per_replication(runs, fexp, metric)
        fg = g.set_index(["machine", "workload", "n", "policy"])
        for b in base.itertuples():
            key = (b.machine, b.workload, b.n, b.policy)
            x = fg.loc[key]
            delta = x.gain_pct - b.gain_pct
            lo = hi = math.nan
            if per_rep is not None and base_per_rep is not None:
                d = (per_rep[key] - base_per_rep[key]).dropna()
                if len(d) >= 2:
                    _, _, half = stats.t_interval(d.to_list(), confidence)
                    lo, hi = delta - half, delta + half
            rows.append([b.machine, b.workload, int(b.n), b.policy, f.name, f.value, f.flipped,
                         b.gain_pct, b.gain_ci_low, b.gain_ci_high, x.gain_pct, x.gain_ci_low,
                         x.gain_ci_high, delta, lo, hi, int(b.replications),
                         confidence])  # fmt: skip
    table = pd.DataFrame(rows, columns=COLUMNS)
    return Ablation(p, confidence, base, gains, table, computed, reused, base_runs, flipped_runs)


def _per_replication(runs: pd.DataFrame, exp: Experiment, metric: str) -> dict | None:
    """``(machine, workload, n, policy) → g_r`` by replication for times (None for counts and
    factors, whose gain is not a mean of per-replication gains)."""
    return stats.replication_gains(runs, exp, metric) if metric.endswith("_ms") else None


# --- text ---------------------------------------------------------------------------------


def _gain(x: float, lo: float, hi: float) -> str:
    if report._nan(x):
        return report.DASH
    half = hi - x
    return f"{report.fmt(x, 2)} ± {report.fmt(half, 2)}"


def _delta(x: float, lo: float, hi: float) -> str:
    if report._nan(x):
        return report.DASH
    sign = "+" if round(x, 2) > 0 else ""
    text = f"{sign}{report.fmt(x, 2)}"
    return text if report._nan(lo) else f"{text} ± {report.fmt(hi - x, 2)}"


def setting_text(exp: Experiment) -> str:
    """The experiment's setting as its profile, or its items."""
    profile = assume.profile_of(exp.assumptions)
    return f"{profile} profile" if profile else assume.canonical(exp.assumptions)


def table_text(exp: Experiment, a: Ablation) -> str:
    """Per machine, workload and policy: n, the gain under the setting, then per flip the gain
    with that assumption flipped and Δ in pp (flipped − setting)."""
    p = a.plan
    noun = "gain" if exp.metric.endswith("_ms") else "reduction"
    lines = [
        f"{exp.name}: ablation, one assumption at a time from the {p.current} values to the "
        f"{p.other} values"
        + (", then each open choice's alternatives" if any(f.choice for f in p.flips) else ""),
        assume.describe(exp.assumptions),
        f"{noun} % of each policy vs {exp.baseline.label} ({METRIC_LABELS[exp.metric]}), "
        f"± half-width of the {report.confidence_text(a.confidence)} t-interval; Δ pp = "
        f"flipped − as run (paired)",
    ]
    if p.kept:
        kept = ", ".join(f"{n}={v}" for n, v in p.kept)
        lines.append(f"not flipped (already the {p.other} value): {kept}")
    if not p.flips:
        lines.append(f"nothing to flip: every assumption already has its {p.other} value")
        return "\n".join(lines)
    for (machine, workload, policy), g in a.rows.groupby(
        ["machine", "workload", "policy"], sort=False
    ):
        lines += ["", f"{machine} · {workload} · {policy}"]
        header = ["n", f"as run ({setting_text(exp)})"]
        for f in p.flips:
            header += [f.label, "Δ pp"]
        out = [header]
        for n, cell in g.groupby("n", sort=False):
            first = cell.iloc[0]
            row = [str(n), _gain(first.gain_pct, first.gain_ci_low, first.gain_ci_high)]
            for f in p.flips:
                r = rows_of(cell, f).iloc[0]
                row += [_gain(r.flipped_gain_pct, r.flipped_gain_ci_low, r.flipped_gain_ci_high),
                        _delta(r.delta_pp, r.delta_ci_low, r.delta_ci_high)]  # fmt: skip
            out.append(row)
        lines += report._aligned(out)
    lines += ["", *effects_text(exp, a)]
    return "\n".join(lines)


def effects(a: Ablation) -> pd.DataFrame:
    """Per flip: mean Δ, mean |Δ|, the largest |Δ|, the cells whose gain changes sign and the
    cells whose Δ interval excludes 0 — which assumption carries the result."""
    out = []
    for f in a.plan.flips:
        r = rows_of(a.rows, f)
        # Strictly opposite signs: a gain that becomes 0.00 has not changed sign.
        flips_sign = (r.gain_pct.round(2) * r.flipped_gain_pct.round(2) < 0).sum()
        clear = ((r.delta_ci_low > 0) | (r.delta_ci_high < 0)).sum()
        d = r.delta_pp
        # Cells without a gain under either setting ("—") are not counted.
        out.append({"assumption": f.name, "flipped": f.label, "cells": int(d.notna().sum()),
                    "mean_delta_pp": d.mean(), "mean_abs_delta_pp": d.abs().mean(),
                    "max_abs_delta_pp": d.abs().max(), "sign_changes": int(flips_sign),
                    "clear": int(clear),
                    "has_interval": bool(r.delta_ci_low.notna().any())})  # fmt: skip
    return pd.DataFrame(out)


def effects_text(exp: Experiment, a: Ablation) -> list[str]:
    """One line per flip, largest mean |Δ| first."""
    e = effects(a)
    if e.empty:
        return []
    lines = ["effect of each flip over all cells (largest first):"]
    for r in e.sort_values("mean_abs_delta_pp", ascending=False).itertuples():
        clear = (f", Δ's interval excludes 0 in {r.clear} of {r.cells}" if r.has_interval
                 else "")  # fmt: skip
        lines.append(
            f"  {r.flipped}: mean Δ {_delta(r.mean_delta_pp, math.nan, math.nan)} pp, mean |Δ| "
            f"{report.fmt(r.mean_abs_delta_pp, 2)} pp (largest {report.fmt(r.max_abs_delta_pp, 2)}"
            f"); the gain changes sign in {r.sign_changes} of {r.cells} cells{clear}"
        )
    return lines


def write_ablation(out: Path, exp: Experiment, a: Ablation) -> list[Path]:
    """``ablation.csv`` and the ablation figures (none for an experiment with an x axis: its
    cells are one n each, and its ablation is shown as the claims' verdicts, comparison.py)."""
    path = out / "ablation.csv"
    report.write_whole(path, lambda tmp: a.rows.to_csv(tmp, index=False))
    return [path] if exp.has_x else [path, *write_figures(out, exp, a)]


def json_rows(a: Ablation) -> list[dict[str, Any]]:
    """The ablation rows for ``--json`` (a missing value is null)."""
    return report.records(a.rows)


# --- figures ------------------------------------------------------------------------------


def ablation_caption(exp: Experiment, a: Ablation) -> str:
    reps = report._replications_text(a.base["replications"]) if len(a.base) else "0"
    p = a.plan
    return (f"error bars: {report.confidence_text(a.confidence)} t-interval, {reps} paired "
            f"replications; each other curve flips one assumption to its {p.other} value "
            f"or sets one open choice\n"
            + assume.describe(exp.assumptions))  # fmt: skip


def figure(exp: Experiment, a: Ablation, machine: str, workload: str):
    """Gain vs n under the setting and with each flip; one panel per compared policy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    w = next(w for w in exp.workloads if w.name == workload)
    ns = sorted(exp.ns_of(w))
    span = (ns[-1] - ns[0]) or 1
    series = [("as run (" + setting_text(exp) + ")", a.base, None)]
    series += [(f.label, a.gains[f.label], f) for f in a.plan.flips]
    k = len(series)
    panels_n = len(exp.policies)
    fig = plt.figure(figsize=(max(7.5, 5.5 * panels_n), 4.6 + report.CAPTION_IN),
                     layout="constrained")  # fmt: skip
    panels, foot = fig.subfigures(2, 1, height_ratios=[4.6, report.CAPTION_IN])
    axes = np.atleast_1d(panels.subplots(1, panels_n, sharey=True))
    noun = report.metric_names(exp.metric)[1]
    for ax, v in zip(axes, exp.policies, strict=True):
        for i, (label, g, _) in enumerate(series):
            d = g[(g.machine == machine) & (g.workload == workload) & (g.policy == v.label)]
            d = d.sort_values("n")
            x = d.n + report._DODGE * span * (i - (k - 1) / 2)
            err = (d.gain_ci_high - d.gain_pct).fillna(0)
            ax.errorbar(x, d.gain_pct, yerr=err, label=label,
                        ls="-" if i == 0 else report._LINES[1 + (i - 1) % 3],
                        **report._style(i))  # fmt: skip
        ax.axhline(0, color="grey", lw=0.8)
        ax.set_xticks(ns)
        pad = 0.05 * span
        ax.set_xlim(ns[0] - pad, ns[-1] + pad)
        ax.set_xlabel("processes (n)")
        ax.set_title(textwrap.fill(f"{v.label} vs {exp.baseline.label}", 60), fontsize=10)
        ax.grid(alpha=0.3)
    report._readable(axes[0], "y", report.MIN_GAIN_SPAN_PP)  # the axes share y
    axes[0].set_ylabel(f"{noun} (%) — higher is better")
    panels.suptitle(f"{machine} · {report.workload_label(exp, w)} · ablation")
    panels.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center",
                  ncol=min(k, 4), frameon=False)  # fmt: skip
    foot.text(0.5, 0.5, ablation_caption(exp, a), ha="center", va="center", fontsize=8,
              color="#444")  # fmt: skip
    return fig


def write_figures(out: Path, exp: Experiment, a: Ablation) -> list[Path]:
    """``figures/NAME-ablation-MACHINE-WORKLOAD.{png,svg}``, byte-reproducible as report's."""
    if not a.plan.flips:
        return []
    fig_dir = out / "figures"
    fig_dir.mkdir(exist_ok=True)
    paths = []
    for machine in exp.machines:
        for w in exp.workloads:
            fig = figure(exp, a, machine, w.name)
            stem = file_stem(
                exp.name, "ablation", Path(machine).stem, report.workload_file_name(exp, w)
            )
            paths += report.save_figure(fig, fig_dir / stem)
    return paths


# --- published vs numasim, and the reading ------------------------------------------------


def versus(exp: Experiment, gains: pd.DataFrame) -> pd.DataFrame:
    """Per machine and published row: the published baseline, policy and gain beside numasim's
    means and gain with its interval, the difference (numasim − published, pp) and whether the
    published gain lies inside numasim's interval."""
    ref = exp.reference
    cols = ["machine", "workload", "n", "published_baseline", "published_policy",
            "published_gain_pct", "baseline_mean", "policy_mean", "gain_pct", "gain_ci_low",
            "gain_ci_high", "diff_pp", "inside"]  # fmt: skip
    if ref is None or not ref.rows:
        return pd.DataFrame(columns=cols)
    g = gains[gains.policy == ref.policy].set_index(["machine", "workload", "n"])
    out = []
    for machine in exp.machines:
        for (workload, n), (pb, pp, _) in ref.rows.items():
            pub = ref.gain(workload, n)
            key = (machine, workload, n)
            x = g.loc[key] if key in g.index else None
            gain = x.gain_pct if x is not None else math.nan
            lo = x.gain_ci_low if x is not None else math.nan
            hi = x.gain_ci_high if x is not None else math.nan
            diff = gain - pub if pub is not None else math.nan
            inside = pub is not None and not math.isnan(lo) and lo <= pub <= hi
            out.append([machine, workload, n, pb, pp, pub if pub is not None else math.nan,
                        x.baseline_mean if x is not None else math.nan,
                        x.policy_mean if x is not None else math.nan, gain, lo, hi, diff,
                        inside])  # fmt: skip
    return pd.DataFrame(out, columns=cols)


def trend(ns: list[int], values: list[float]) -> tuple[str, float]:
    """("rises" | "falls" | "no clear trend" | "too few n", Spearman ρ) of values vs n."""
    pairs = [(n, v) for n, v in zip(ns, values, strict=True) if not report._nan(v)]
    if len(pairs) < TREND_MIN_POINTS:
        return "too few n", math.nan
    x, y = zip(*pairs, strict=True)
    if len(set(y)) == 1:
        return "no clear trend", 0.0
    from scipy import stats as sps  # here only: its import costs a second

    rho = float(sps.spearmanr(x, y).statistic)
    if rho >= TREND_RHO:
        return "rises", rho
    if rho <= -TREND_RHO:
        return "falls", rho
    return "no clear trend", rho


def _rho(rho: float) -> str:
    return "" if math.isnan(rho) else f" (ρ = {rho:.2f})"


def _ns(ns: list[int]) -> str:
    return ", ".join(str(n) for n in ns)


def _sign(x: float) -> int:
    return int(np.sign(round(x, 2)))


def reading(exp: Experiment, gains: pd.DataFrame, confidence: float,
            reference_gains: pd.DataFrame | None = None) -> list[str]:  # fmt: skip
    """The honest reading: one paragraph per machine and workload (see the module doc). A
    published average is compared with ``reference_gains`` when given (applications:
    ``stats.app_average``)."""
    ref = exp.reference
    conf = report.confidence_text(confidence)
    out = []
    if ref is None:
        out.append("The experiment file carries no published numbers ([reference]: held back or "
                   "not in the paper), so there is nothing to compare: numasim's results "
                   "only.")  # fmt: skip
        return out + _own(exp, gains, conf)
    if not ref.rows:
        return out + _average(exp, gains if reference_gains is None else reference_gains, conf)
    v = versus(exp, gains)
    out.append(f"Compared variant: {ref.policy} vs {exp.baseline.label}, at the n the paper "
               f"publishes ({ref.source}). Trend: Spearman's ρ of gain vs n, rises if ρ ≥ "
               f"{TREND_RHO}, falls if ρ ≤ −{TREND_RHO}. Published gains carry no interval; "
               f"'inside' means inside numasim's {conf} interval.")  # fmt: skip
    for (machine, workload), d in v.groupby(["machine", "workload"], sort=False):
        d = d[d.published_gain_pct.notna() & d.gain_pct.notna()].sort_values("n")
        head = f"{machine} · {workload}: "
        if d.empty:
            out.append(head + "no cell with both a published and a numasim gain.")
            continue
        m = len(d)
        same = [int(r.n) for r in d.itertuples()
                if _sign(r.published_gain_pct) == _sign(r.gain_pct)]  # fmt: skip
        other = [int(n) for n in d.n if int(n) not in same]
        if not other:
            sign = f"SIGN agrees: the same sign at all {m} n"
        elif not same:
            sign = f"SIGN disagrees: the opposite sign (or one of them 0) at all {m} n"
        else:
            sign = (f"SIGN agrees at {len(same)} of {m} n only; it differs at n = "
                    f"{_ns(other)}")  # fmt: skip
        pt, prho = trend(list(d.n), list(d.published_gain_pct))
        nt, nrho = trend(list(d.n), list(d.gain_pct))
        if "too few n" in (pt, nt):
            tr = f"TREND not assessed: {m} n (a trend needs {TREND_MIN_POINTS})"
        elif pt == nt and pt != "no clear trend":
            tr = (f"TREND agrees: both {pt.removesuffix('s')} with n (published ρ = "
                  f"{prho:.2f}, numasim ρ = {nrho:.2f})")  # fmt: skip
        elif pt == nt:
            tr = (f"TREND: neither shows a clear trend (published{_rho(prho)}, "
                  f"numasim{_rho(nrho)})")  # fmt: skip
        else:
            tr = (f"TREND disagrees: the published gain {pt}{_rho(prho)}, numasim's "
                  f"{nt}{_rho(nrho)}")  # fmt: skip
        mad = d.diff_pp.abs().mean()
        inside = int(d.inside.sum())
        verdict = "agrees" if inside == m else "disagrees" if inside == 0 else "partly agrees"
        mag = (f"MAGNITUDE {verdict}: mean |numasim − published| {report.fmt(mad, 2)} pp, "
               f"{inside} of {m} published gains inside numasim's interval")  # fmt: skip
        out.append(head + "; ".join([sign, tr, mag]) + ".")
    published = set(zip(v.machine, v.workload, strict=True))
    rest = gains[[(m, w) not in published for m, w in zip(gains.machine, gains.workload,
                                                          strict=True)]]  # fmt: skip
    if not rest.empty:
        out.append("No published numbers for the other workloads or machines: numasim's "
                   "results only.")  # fmt: skip
        out += _own(exp, rest, conf)
    return out


def _average(exp: Experiment, gains: pd.DataFrame, conf: str) -> list[str]:
    ref = exp.reference
    pub = ref.average_gain_pct
    basis = report.average_basis(gains)
    out = [f"The paper publishes one number, an average gain of {report.fmt(pub, 2)} % for "
           f"{ref.policy} ({ref.source}): it is compared with numasim's {basis} (every workload "
           "and n). There is no published trend to compare."]  # fmt: skip
    g = gains[gains.policy == ref.policy]
    for machine, d in g.groupby("machine", sort=False):
        mean = d.gain_pct.mean()
        same = _sign(mean) == _sign(pub)
        out.append(f"{machine}: numasim's {basis} {report.fmt(mean, 2)} % "
                   f"(cells from {report.fmt(d.gain_pct.min(), 2)} to "
                   f"{report.fmt(d.gain_pct.max(), 2)} %). SIGN "
                   f"{'agrees' if same else 'disagrees'}; MAGNITUDE: numasim − published = "
                   f"{_delta(mean - pub, math.nan, math.nan)} pp; the published average lies "
                   f"inside numasim's {conf} interval in {_inside_count(d, pub)} of {len(d)} "
                   "cells.")  # fmt: skip
    return out + _own(exp, gains, conf)


def _inside_count(d: pd.DataFrame, value: float) -> int:
    return int(((d.gain_ci_low <= value) & (value <= d.gain_ci_high)).sum())


def _own(exp: Experiment, gains: pd.DataFrame, conf: str) -> list[str]:
    """numasim's results alone: per machine, workload and policy, sign, trend and range."""
    out = []
    for (machine, workload, policy), d in gains.groupby(["machine", "workload", "policy"],
                                                        sort=False):  # fmt: skip
        d = d.sort_values("n")
        m = len(d)
        pos = int((d.gain_pct.round(2) > 0).sum())
        neg = int((d.gain_pct.round(2) < 0).sum())
        clear = int(((d.gain_ci_low > 0) | (d.gain_ci_high < 0)).sum())
        t, rho = trend(list(d.n), list(d.gain_pct))
        out.append(f"numasim, {machine} · {workload} · {policy}: gains from "
                   f"{report.fmt(d.gain_pct.min(), 2)} to {report.fmt(d.gain_pct.max(), 2)} %, "
                   f"positive at {pos} and negative at {neg} of {m} n; the {conf} interval "
                   f"excludes 0 at {clear} of {m}; trend vs n: {t}{_rho(rho)}.")  # fmt: skip
    return out


def ablation_reading(exp: Experiment, a: Ablation) -> list[str]:
    """Which flip moves the gains most and, with published rows, whether it brings numasim
    nearer to them (mean |numasim − published| before and after)."""
    if not a.plan.flips:
        return [f"Nothing to flip: every assumption already has its {a.plan.other} value."]
    out = []
    e = effects(a).sort_values("mean_abs_delta_pp", ascending=False)
    top = e.iloc[0]
    out.append(f"Largest effect: {top.flipped} (mean |Δ| "
               f"{report.fmt(top.mean_abs_delta_pp, 2)} pp over {top.cells} cells; the gain "
               f"changes sign in {top.sign_changes}).")  # fmt: skip
    ref = exp.reference
    if ref is not None and ref.rows:
        base = versus(exp, a.base).diff_pp.abs().mean()
        for f in a.plan.flips:
            after = versus(exp, a.gains[f.label]).diff_pp.abs().mean()
            word = ("nearer to" if after < base else "further from" if after > base
                    else "as far from")  # fmt: skip
            out.append(f"With {f.label}, numasim is {word} the published gains: mean "
                       f"|numasim − published| {report.fmt(base, 2)} → "
                       f"{report.fmt(after, 2)} pp.")  # fmt: skip
    return out


# --- the HTML page ------------------------------------------------------------------------

#: The run report's stylesheet, with what this page adds (wide tables, quotes, the reading).
_STYLE = (
    run_report.PAGE_STYLE
    + """
td.num { white-space: nowrap; }
td.why { max-width: 640px; font-size: 0.92em; }
div.wide { overflow-x: auto; } table { font-size: 0.95em; }
blockquote { color: #444; border-left: 3px solid #ccc; margin: 0.5em 0; padding-left: 1em; }
ul.reading li { margin-bottom: 0.5em; }
pre { overflow-x: auto; }
"""
)


def _table(header: list[str], rows: list[list[Any]], numeric: set[int] = frozenset(),
           wide: set[int] = frozenset()) -> str:  # fmt: skip
    def cell(tag: str, i: int, v: Any) -> str:
        cls = ' class="num"' if i in numeric else ' class="why"' if i in wide else ""
        return f"<{tag}{cls}>{html.escape(str(v))}</{tag}>"

    head = "".join(cell("th", i, h) for i, h in enumerate(header))
    body = "".join(
        "<tr>" + "".join(cell("td", i, v) for i, v in enumerate(r)) + "</tr>" for r in rows
    )
    return f'<div class="wide"><table><tr>{head}</tr>{body}</table></div>'


#: Figures are saved at 150 dpi; the page shows them at 100 px per inch (then no wider than
#: the page), so every figure has the same text size.
_PAGE_SCALE = 100 / 150


def _img(path: Path, caption: str) -> str:
    raw = path.read_bytes()
    width = int.from_bytes(raw[16:20], "big")  # the PNG header (IHDR) holds the size
    data = base64.b64encode(raw).decode("ascii")
    return (f'<figure><img alt="{html.escape(path.stem)}" width="{round(width * _PAGE_SCALE)}" '
            f'src="data:image/png;base64,{data}">'
            f"<figcaption>{html.escape(caption)}</figcaption></figure>")  # fmt: skip


def _num(x: Any, digits: int = 1) -> str:
    return report.fmt(float(x), digits) if x is not None else report.DASH


def _setup(exp: Experiment, confidence: float) -> list[str]:
    from numasim.machine import Machine

    esc = html.escape
    machines = []
    for name in exp.machines:
        m = Machine.load(name)
        machines.append([name, m.description or "", m.nodes, m.cpus,
                         " / ".join(map(str, m.mals))])  # fmt: skip
    variants = [["baseline", exp.baseline.label, exp.baseline.policy, exp.baseline.domains]]
    variants += [["policy", v.label, v.policy, v.domains] for v in exp.policies]
    sources = exp.assumption_sources()
    parts = [
        "<h2>Setup</h2>",
        f"<p>{esc(exp.source)}</p>" if exp.source else "",
        f"<p>{esc(exp.notes)}</p>" if exp.notes else "",
        "<h3>Machines</h3>",
        _table(["machine", "description", "nodes", "CPUs", "MALs (distances)"], machines, {2, 3}),
        "<h3>Workloads</h3>",
        _table(
            ["workload", *([exp.x_label] if exp.has_x else []), "spec", "n"],
            [
                [w.name, *([f"{w.x:g}"] if exp.has_x else []), w.spec, _ns(exp.ns_of(w))]
                for w in exp.workloads
            ],
        ),
        "<h3>Variants</h3>",
        _table(["role", "label", "policy", "domains"], variants),
        f"<p>{exp.replications} replications per cell (paired: every variant runs the same "
        f"workloads), {report.confidence_text(confidence)} t-intervals, master seed {exp.seed}, "
        f"metric: {esc(METRIC_LABELS[exp.metric])}.</p>",
        "<h3>Modelling assumptions</h3>",
        f"<p>{esc(assume.describe(exp.assumptions))}</p>",
        _table(["assumption", "value", "source"], [list(s) for s in sources], wide={2}),
    ]
    return parts


def _published(exp: Experiment, gains: pd.DataFrame, confidence: float,
               reference_gains: pd.DataFrame | None = None) -> list[str]:  # fmt: skip
    esc = html.escape
    ref = exp.reference
    parts = ["<h2>Published and reproduced</h2>"]
    if ref is None:
        parts.append("<p>The experiment file carries no published numbers (held back or not in "
                     "the paper): only numasim's results are shown.</p>")  # fmt: skip
        return parts
    parts.append(f"<p>Published in {esc(ref.source)}, for <code>{esc(ref.policy)}</code> vs "
                 f"<code>{esc(exp.baseline.label)}</code>.</p>")  # fmt: skip
    if ref.quote:
        parts.append(f"<blockquote>{esc(ref.quote)}</blockquote>")
    unit = stats.unit(exp.metric)
    if ref.rows:
        v = versus(exp, gains)
        many = len(exp.machines) > 1
        header = (["machine"] if many else []) + [
            "workload", "n", "published baseline", "published policy", "published gain %",
            f"numasim baseline ({unit})", f"numasim policy ({unit})", "numasim gain %",
            "difference (pp)", "published inside interval"]  # fmt: skip
        rows = []
        for r in v.itertuples():
            rows.append(([r.machine] if many else []) + [
                r.workload, r.n, _num(r.published_baseline), _num(r.published_policy),
                report.fmt(r.published_gain_pct, 2), report.fmt(r.baseline_mean),
                report.fmt(r.policy_mean), _gain(r.gain_pct, r.gain_ci_low, r.gain_ci_high),
                _delta(r.diff_pp, math.nan, math.nan), "yes" if r.inside else "no"])  # fmt: skip
        off = 1 if many else 0
        parts.append(_table(header, rows, {off + i for i in range(1, 9)}))
        parts.append(
            f"<p>numasim's gain ± the half-width of its "
            f"{report.confidence_text(confidence)} interval; difference = numasim − "
            "published; the published values as printed in the paper (its units).</p>"
        )
    else:
        ours = gains if reference_gains is None else reference_gains
        g = ours[ours.policy == ref.policy]
        rows = [[m, report.fmt(ref.average_gain_pct, 2), report.fmt(d.gain_pct.mean(), 2),
                 _delta(d.gain_pct.mean() - ref.average_gain_pct, math.nan, math.nan)]
                for m, d in g.groupby("machine", sort=False)]  # fmt: skip
        parts.append(_table(["machine", "published average gain %",
                             f"numasim's {report.average_basis(ours)} (%)", "difference (pp)"],
                            rows, {1, 2, 3}))  # fmt: skip
    return parts


def _ablation_section(exp: Experiment, a: Ablation, figures: list[Path]) -> list[str]:
    esc = html.escape
    p = a.plan
    parts = ["<h2>Ablation: which assumption carries the result</h2>",
             f"<p>One assumption at a time, from its {esc(p.current)} value to its "
             f"{esc(p.other)} value, then each open choice (numbers and options the papers "
             f"leave open: <code>numasim list assumptions</code>) set to each alternative; "
             f"everything else as run. Δ = gain with the flip − gain as run "
             "(pp, paired interval).</p>"]  # fmt: skip
    if p.kept:
        kept = ", ".join(f"{n}={v}" for n, v in p.kept)
        parts.append(f"<p>Not flipped (already the {esc(p.other)} value): {esc(kept)}.</p>")
    if not p.flips:
        return [*parts, "<p>Nothing to flip.</p>"]
    e = effects(a)
    rows = [[r.flipped, r.cells, _delta(r.mean_delta_pp, math.nan, math.nan),
             report.fmt(r.mean_abs_delta_pp, 2), report.fmt(r.max_abs_delta_pp, 2),
             r.sign_changes, r.clear if r.has_interval else report.DASH]
            for r in e.itertuples()]  # fmt: skip
    parts.append(_table(["flip", "cells", "mean Δ pp", "mean |Δ| pp", "largest |Δ| pp",
                         "gain changes sign", "Δ interval excludes 0"], rows,
                        {1, 2, 3, 4, 5, 6}))  # fmt: skip
    parts.append("<ul class='reading'>" + "".join(
        f"<li>{esc(t)}</li>" for t in ablation_reading(exp, a)) + "</ul>")  # fmt: skip
    header = ["n", "as run gain %"]
    for f in p.flips:
        header += [f"{f.label} gain %", "Δ pp"]
    for (m, w, pol), block in a.rows.groupby(["machine", "workload", "policy"], sort=False):
        rows = []
        for n, cell in block.groupby("n", sort=False):
            first = cell.iloc[0]
            row = [n, _gain(first.gain_pct, first.gain_ci_low, first.gain_ci_high)]
            for f in p.flips:
                r = rows_of(cell, f).iloc[0]
                row += [_gain(r.flipped_gain_pct, r.flipped_gain_ci_low, r.flipped_gain_ci_high),
                        _delta(r.delta_pp, r.delta_ci_low, r.delta_ci_high)]  # fmt: skip
            rows.append(row)
        parts += [f"<h3>{esc(m)} · {esc(w)} · {esc(pol)}</h3>",
                  _table(header, rows, set(range(len(header))))]  # fmt: skip
    parts += [_img(f, "Gain vs n as run and with each flip (ablation).")
              for f in figures if f.suffix == ".png"]  # fmt: skip
    return parts


def _apps_section(exp: Experiment, apps: Any) -> list[str]:
    """The per-application results: the text tables and the figures."""
    from numasim import app_report

    return [
        "<h2>Applications</h2>",
        f"<pre>{html.escape(app_report.text(exp, apps))}</pre>",
        *[_img(f, caption) for f, caption in apps.captions.items() if f.suffix == ".png"],
    ]


def html_page(
    exp: Experiment,
    summary: pd.DataFrame,
    gains: pd.DataFrame,
    confidence: float,
    figures: list[Path],
    ablation: Ablation,
    ablation_figures: list[Path],
    apps: Any = None,
    profiles: list | None = None,
    shows: list[str] | None = None,
    metrics_text: str = "",
) -> str:
    """The reproduction page (self-contained: figures are base64 PNG, nothing is fetched);
    ``apps`` (``app_report.AppResults``) adds the per-application results of app workloads,
    ``profiles`` (``profile_table.ProfileColumn``, run) the published result beside each
    profile, ``shows`` (findings.text) what an experiment without published numbers shows,
    ``metrics_text`` (report.metrics_text) the tables of its further metrics."""
    from numasim import __version__, profile_table

    esc = html.escape
    ref_gains = apps.average if apps is not None else None
    title = f"{exp.name}: {report.experiment_title(exp)}"
    parts = [
        *run_report.page_head(f"numasim reproduction · {exp.name}", title, _STYLE),
        f'<p class="sub">numasim {esc(__version__)} · {esc(assume.describe(exp.assumptions))}</p>',
        "<h2>Reading</h2>",
        "<ul class='reading'>"
        + "".join(f"<li>{esc(t)}</li>" for t in reading(exp, gains, confidence, ref_gains))
        + "</ul>",
        f"<pre>{esc(chr(10).join(shows))}</pre>" if shows else "",
        *_setup(exp, confidence),
        *_published(exp, gains, confidence, ref_gains),
        "<h2>numasim's results</h2>",
        f"<pre>{esc(report.table_text(exp, summary, gains, confidence, None, ref_gains))}</pre>",
        *[_img(f, FIGURE_CAPTION) for f in figures if f.suffix == ".png"],
        f"<pre>{esc(metrics_text)}</pre>" if metrics_text else "",
        *(_apps_section(exp, apps) if apps is not None else []),
        *profile_table.html_section(exp, profiles or []),
        *_ablation_section(exp, ablation, ablation_figures),
        "</body></html>",
    ]
    return "\n".join(p for p in parts if p) + "\n"
