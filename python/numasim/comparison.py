"""Multi-policy comparisons along an x axis: the report of an experiment whose workloads are
points on an axis (``x_label``, an ``x`` per workload; the home-cluster reproductions), instead
of the baseline-versus-policy table.

```
runs (one row per run; an app workload's rows carry experiment.APP_RUN_METRICS)
  ├─ stats.summarize(metric)      per machine, x and policy: mean ± t half-width  ─┐
  ├─ stats.summarize(locality)    the same of the remote-access share             ─┴ comparison.*
  └─ claims.evaluate_all          per claim: its verdict; every paired comparison    claims.*,
                                                                                     claim_comparisons.*
text: the metric (rows = x, columns = policies) · the remote share · the claims with verdicts
figures/NAME-MACHINE.{png,svg}: the metric vs x (left), the remote share vs x (right)
```

The locality measure is the applications' remote-access share (``app_remote_share``: the share
of a run's memory accesses that went to another node's memory) for app workloads, else the
run's mean remote-access factor. Every value is a mean over the replications with the half-width
of its t interval at the experiment's confidence; every policy runs the same workload instance
in a replication at each x, so the claims compare policies pair by pair (claims.py).
"""

from __future__ import annotations

import html
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from numasim import claims, report, stats
from numasim.assumptions import describe
from numasim.experiment import METRIC_LABELS, Experiment
from numasim.names import file_stem

#: The locality measure beside the metric: (column, label, scale to print).
_SHARE = ("app_remote_share", "remote-access share (%)", 100.0)
_FACTOR = ("mean_remote_factor", "mean remote-access factor", 1.0)
#: The widest spread of the dodged points at one x, as a share of the x axis's span.
_DODGE_TOTAL = 0.06
FIGURE_CAPTION = ("numasim: each policy's mean (left) and its locality (right) against the x "
                  "axis, with intervals.")  # fmt: skip


def locality(runs: pd.DataFrame) -> tuple[str, str, float]:
    """The remote-access share for app workloads, else the mean remote-access factor."""
    if _SHARE[0] in runs and runs[_SHARE[0]].notna().all():
        return _SHARE
    return _FACTOR


@dataclass
class Comparison:
    """Everything the comparison report shows."""

    #: Per machine, x and policy: the metric's and the locality's mean and half-width.
    table: pd.DataFrame
    claims: list[claims.ClaimResult]
    confidence: float
    locality: tuple[str, str, float]
    #: The figures written (``figure_tasks``).
    figures: list[Path] = field(default_factory=list)


def compute(exp: Experiment, runs: pd.DataFrame, confidence: float) -> Comparison:
    """The table and the claims' verdicts of ``runs`` (``Outcome.runs``)."""
    loc = locality(runs)
    m = stats.summarize(runs, confidence, exp.metric)
    s = stats.summarize(runs, confidence, loc[0])
    xs = {w.name: w.x for w in exp.workloads}
    keys = ["machine", "workload", "n", "policy"]
    loc_cols = {"mean": "locality_mean", "half_width": "locality_half_width"}
    table = m.merge(s[[*keys, *loc_cols]].rename(columns=loc_cols), on=keys)
    table.insert(2, "x", table.workload.map(xs))
    table.insert(table.columns.get_loc("locality_mean"), "locality", loc[0])
    return Comparison(table, claims.evaluate_all(exp, runs, confidence), confidence, loc)


def _order(exp: Experiment) -> list[Any]:
    """The workloads along the axis."""
    return sorted(exp.workloads, key=lambda w: w.x)


def _grid(exp: Experiment, c: Comparison, machine: str, mean: str, half: str,
          scale: float, digits: int, notes: set[str]) -> list[str]:  # fmt: skip
    """Rows = x values, columns = the variants: ``mean ± half`` (``notes`` collects why a
    value is a dash)."""
    t = c.table[c.table.machine == machine]
    rows = [[exp.x_label, *(v.label for v in exp.variants)]]
    for w in _order(exp):
        d = t[t.workload == w.name].set_index("policy")
        row = [f"{w.x:g}"]
        for v in exp.variants:
            if v.label not in d.index:
                notes.add("runs")
                row.append(report.DASH)
                continue
            r = d.loc[v.label]
            row.append(report._pm(r[mean] * scale, r[half] * scale, digits, notes))
        rows.append(row)
    return report._aligned(rows, "  ")


def claims_text(exp: Experiment, results: list[claims.ClaimResult], confidence: float) -> list[str]:
    """Each claim: where, the paper's sentence, the checked form, the verdict per machine."""
    if not results:
        return []
    conf = report.confidence_text(confidence)
    lines = [f'claims of the paper, checked with paired replications at {conf} '
             '(docs/experiments.md, "Claims"):']  # fmt: skip
    for cl in exp.claims:
        lines += ["", f'  [{cl.index + 1}] {cl.source}: "{cl.quote}"']
        lines += textwrap.wrap(f"check: {cl.statement(exp.x_label)}", 96,
                               initial_indent="      ", subsequent_indent="        ")  # fmt: skip
        for r in results:
            if r.claim is cl:
                head = f"{r.machine}: " if len(exp.machines) > 1 else ""
                lines += textwrap.wrap(head + claims.verdict_text(r, exp.x_label), 96,
                                       initial_indent="      → ",
                                       subsequent_indent="        ")  # fmt: skip
    return lines


def text(exp: Experiment, c: Comparison) -> str:
    """The metric and the locality per x and policy, then the claims."""
    conf = report.confidence_text(c.confidence)
    label = METRIC_LABELS[exp.metric]
    reps = report._replications_text(c.table.replications) if len(c.table) else "0"
    lines = [f"{exp.name}: {report.experiment_title(exp)}"]
    if exp.source:
        lines.append(f"source: {exp.source}")
    lines.append(describe(exp.assumptions))
    lines += textwrap.wrap(f"{label}, and {c.locality[1]}, per {exp.x_label} and policy: mean "
                           f"over the replications ± half-width of the {conf} t-interval; "
                           f"{reps} replications per cell, n = {exp.ns[0]}, paired (every "
                           "policy runs the same workloads)", 100)  # fmt: skip
    unit = stats.unit(exp.metric)
    digits = 1 if unit in ("ms", "%") else 3
    notes: set[str] = set()
    for machine in exp.machines:
        lines += ["", f"{machine} · {label}"]
        lines += _grid(exp, c, machine, "mean", "half_width", 1.0, digits, notes)
        lines += ["", f"{machine} · {c.locality[1]}"]
        ldigits = 1 if c.locality[2] == 100 else 3
        lines += _grid(exp, c, machine, "locality_mean", "locality_half_width", c.locality[2],
                       ldigits, notes)  # fmt: skip
    lines += [f"  {report._FOOTNOTES[k]}" for k in report._FOOTNOTES if k in notes]
    spec = "; ".join(f"{w.x:g}: {w.spec}" for w in _order(exp))
    lines += ["", *textwrap.wrap(f"workloads ({exp.x_label}: spec): {spec}", 100)]
    claim_lines = claims_text(exp, c.claims, c.confidence)
    if claim_lines:
        lines += ["", *claim_lines]
    return "\n".join(lines)


# --- files --------------------------------------------------------------------------------


def claim_rows(exp: Experiment, results: list[claims.ClaimResult]) -> pd.DataFrame:
    """One row per claim and machine: where, the quote, the checked form and the verdict."""
    rows = []
    for r in results:
        n = r.counts()
        rows.append({"machine": r.machine, "claim": r.claim.index + 1, "source": r.claim.source,
                     "quote": r.claim.quote, "check": r.claim.statement(exp.x_label),
                     "verdict": r.verdict, "comparisons": len(r.comparisons),
                     "holding": n[claims.HOLDS], "contradicting": n[claims.FAILS],
                     "undecided": n[claims.UNDECIDED], "test_confidence": r.test_confidence,
                     "weakest": claims.comparison_text(r.weakest(), exp.x_label)})  # fmt: skip
    return pd.DataFrame(rows)


def write_tables(out: Path, exp: Experiment, c: Comparison) -> list[Path]:
    """``comparison``, ``claims`` and ``claim_comparisons`` as CSV and Parquet."""
    tables = [("comparison", c.table)]
    if c.claims:
        comps = pd.concat([r.comparisons for r in c.claims], ignore_index=True)
        comps["claim"] += 1  # numbered from 1, as printed
        tables += [("claims", claim_rows(exp, c.claims)), ("claim_comparisons", comps)]
    return report.write_frames(out, tables)


def json_rows(exp: Experiment, c: Comparison) -> dict[str, Any]:
    """The comparison part of ``--json``: the table's rows and the claims (null: missing)."""
    return {"x_label": exp.x_label, "comparison": report.records(c.table),
            "claims": report.records(claim_rows(exp, c.claims))}  # fmt: skip


# --- figures ------------------------------------------------------------------------------


def figure(exp: Experiment, c: Comparison, machine: str):
    """The metric (left) and the locality (right) against x: one line per policy, error bars
    the t interval (points of the policies at one x drawn slightly apart)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = c.table[c.table.machine == machine]
    xs = sorted(w.x for w in exp.workloads)
    # Offsets and margins are taken where the axis is drawn: on a log axis, in log2 x.
    log = exp.x_scale == "log"
    to, back = (np.log2, np.exp2) if log else (lambda v: v, lambda v: v)
    span = (to(xs[-1]) - to(xs[0])) or 1.0
    k = len(exp.variants)
    fig = plt.figure(figsize=(12, 5.6 + report.CAPTION_IN), layout="constrained")
    panels, foot = fig.subfigures(2, 1, height_ratios=[5.6, report.CAPTION_IN])
    ax1, ax2 = panels.subplots(1, 2)
    _, loc_label, scale = c.locality
    # Points of the policies at one x drawn apart, all of them within ±3 % of the axis's span
    # (inside its 5 % margin), however many policies there are.
    step = min(report._DODGE, _DODGE_TOTAL / max(1, k - 1)) * span
    for i, v in enumerate(exp.variants):
        d = t[t.policy == v.label].sort_values("x")
        x = back(to(d.x) + step * (i - (k - 1) / 2))
        style = {**report._style(i), "ls": report._LINES[(i // 10) % len(report._LINES)]}
        ax1.errorbar(x, d["mean"], yerr=report._metric_err(d), label=v.label, **style)
        loc = pd.DataFrame({"mean": d.locality_mean * scale,
                            "half_width": d.locality_half_width * scale})  # fmt: skip
        lo_err, hi_err = report._metric_err(loc)
        if c.locality == _SHARE:  # a share: no bar beyond 100 %
            hi_err = np.minimum(hi_err, (100.0 - loc["mean"]).clip(lower=0))
        ax2.errorbar(x, loc["mean"], yerr=[lo_err, hi_err], **style)
    pad = 0.05 * span
    for ax in (ax1, ax2):
        if log:
            ax.set_xscale("log", base=2)
            ax.minorticks_off()
        ax.set_xticks(xs, [f"{x:g}" for x in xs])
        ax.set_xlim(back(to(xs[0]) - pad), back(to(xs[-1]) + pad))
        ax.set_xlabel(exp.x_label)
        ax.grid(alpha=0.3)
    report._readable(ax1, "y", 0.0, report.MIN_METRIC_SPAN)
    report._readable(ax2, "y", 0.0, report.MIN_METRIC_SPAN)
    label = METRIC_LABELS[exp.metric]
    ax1.set_ylabel(label)
    ax1.set_title(f"{label} — lower is better", fontsize=10)
    ax2.set_ylabel(loc_label)
    ax2.set_title(f"{loc_label} — lower is nearer the memory", fontsize=10)
    panels.legend(*ax1.get_legend_handles_labels(), loc="outside lower center",
                  ncol=min(k, 5), frameon=False)  # fmt: skip
    panels.suptitle(textwrap.fill(f"{machine} · {report.experiment_title(exp)} · n = "
                                  f"{exp.ns[0]}", 110))  # fmt: skip
    reps = int(t.replications.min()) if len(t) else 0
    stop = " and 100 %" if c.locality == _SHARE else ""
    wide = f"with 2 replications the intervals are wide; bars stop at 0{stop}\n"
    wide = wide if reps == 2 else ""
    cap = (f"error bars: {report.confidence_text(c.confidence)} t-interval of each mean, {reps} "
           "replications; every policy runs the same workloads at each x, so the claims compare "
           "pairs replication by replication\n" + wide
           + describe(exp.assumptions)) if reps >= 2 else (
        "no error bars: fewer than 2 replications\n" + describe(exp.assumptions))  # fmt: skip
    foot.text(0.5, 0.5, cap, ha="center", va="center", fontsize=8, color="#444")
    return fig


def figure_tasks(out: Path, exp: Experiment, c: Comparison) -> list[report.FigureTask]:
    """Per machine, a task that writes ``figures/NAME-MACHINE.{png,svg}``, byte-reproducible
    (report.save_figure); ``report.FigureDrawing`` runs them, and their files go in
    ``c.figures``."""
    fig_dir = out / "figures"
    fig_dir.mkdir(exist_ok=True)

    def task(machine: str) -> report.FigureTask:
        stem = fig_dir / file_stem(exp.name, Path(machine).stem)
        return lambda: report.save_figure(figure(exp, c, machine), stem)

    return [task(machine) for machine in exp.machines]


# --- ablation and page --------------------------------------------------------------------


def ablation_text(exp: Experiment, a: Any, confidence: float) -> str:
    """Each claim's verdict as run and with each assumption flipped (``reproduction.ablate``'s
    runs), then the mean effect of each flip on the policies' gains vs the baseline."""
    from numasim import reproduction

    lines = [f"{exp.name}: ablation, one assumption at a time from the {a.plan.current} values "
             f"to the {a.plan.other} values: the claims' verdicts",
             describe(exp.assumptions)]  # fmt: skip
    if a.plan.kept:
        kept = ", ".join(f"{n}={v}" for n, v in a.plan.kept)
        lines.append(f"not flipped (already the {a.plan.other} value): {kept}")
    if not a.plan.flips:
        nothing = f"nothing to flip: every assumption already has its {a.plan.other} value"
        return "\n".join([*lines, nothing])
    lines += ["", *report._aligned(ablation_verdicts(exp, a, confidence), "  ")]
    return "\n".join([*lines, "", *reproduction.effects_text(exp, a)])


def ablation_verdicts(exp: Experiment, a: Any, confidence: float) -> list[list[str]]:
    """Rows: per claim (and machine), its verdict as run and under each flip."""
    settings = [("as run", a.base_runs)] + [(f.label, a.runs[f.label]) for f in a.plan.flips]
    verdicts = {label: claims.evaluate_all(exp, runs, confidence) for label, runs in settings}
    rows = [["claim", *(label for label, _ in settings)]]
    for j, r in enumerate(verdicts["as run"]):
        name = f"[{r.claim.index + 1}] {r.claim.source}" + (
            f" {r.machine}" if len(exp.machines) > 1 else "")  # fmt: skip
        rows.append([name, *(verdicts[label][j].verdict for label, _ in settings)])
    return rows


def html_page(exp: Experiment, c: Comparison, confidence: float, ablation: Any,
              profiles: list | None = None) -> str:  # fmt: skip
    """The reproduction page of an x-axis experiment (self-contained, as reproduction's): the
    claims with their verdicts, the setup, the tables and figures, the claims' verdicts under
    each profile (``profile_table``), the ablation."""
    from numasim import __version__, profile_table, reproduction

    esc = html.escape
    title = f"{exp.name}: {report.experiment_title(exp)}"
    rows = [[r.claim.index + 1, r.claim.source, r.claim.quote, r.claim.statement(exp.x_label)]
            + ([r.machine] if len(exp.machines) > 1 else [])
            + [claims.verdict_text(r, exp.x_label)] for r in c.claims]  # fmt: skip
    header = ["#", "where", "the paper", "checked as"] + (
        ["machine"] if len(exp.machines) > 1 else []) + ["verdict"]  # fmt: skip
    wide = {2, len(header) - 1}
    parts = [
        *reproduction.run_report.page_head(
            f"numasim reproduction · {exp.name}", title, reproduction._STYLE
        ),
        f'<p class="sub">numasim {esc(__version__)} · {esc(describe(exp.assumptions))}</p>',
        "<h2>The paper's claims</h2>",
        f"<p>Each claim checked with paired replications at "
        f'{report.confidence_text(confidence)} (docs/experiments.md, "Claims").</p>'
        if c.claims
        else "<p>The experiment file states no claims.</p>",
        reproduction._table(header, rows, wide=wide) if c.claims else "",
        *reproduction._setup(exp, confidence),
        "<h2>numasim's results</h2>",
        f"<pre>{esc(text(exp, c))}</pre>",
        *[reproduction._img(f, FIGURE_CAPTION) for f in c.figures if f.suffix == ".png"],
        *profile_table.html_section(exp, profiles or []),
        "<h2>Ablation: do the verdicts depend on a modelling assumption?</h2>",
        f"<pre>{esc(ablation_text(exp, ablation, confidence))}</pre>",
        "</body></html>",
    ]
    return "\n".join(p for p in parts if p) + "\n"
