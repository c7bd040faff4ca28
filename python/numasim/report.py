"""Paper-shaped tables, result files and figures of an experiment."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from numasim.experiment import METRIC_LABELS, Experiment


def _pm(mean: float, half: float, digits: int = 1) -> str:
    if math.isnan(half):
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ± {half:.{digits}f}"


def table_text(
    exp: Experiment,
    summary: pd.DataFrame,
    gains: pd.DataFrame,
    confidence: float,
    runs: pd.DataFrame | None = None,
) -> str:
    """Rows = process counts; per workload the baseline's metric, each policy's and its gain %
    (for far-from-origin counts, a breakdown by the distance of the node where they ran most)."""
    label = METRIC_LABELS[exp.metric]
    short = "TAT" if exp.metric.endswith("tat_ms") else exp.metric
    timed = exp.metric.endswith("_ms")
    how = "paired gain" if timed else "paired reduction relative to the baseline"
    lines = [f"{exp.name}: {exp.title}", f"source: {exp.source}" if exp.source else "",
             f"{label} and {how} (%), ± half-width of the {confidence:.0%} interval"]  # fmt: skip
    digits = 1 if exp.metric.endswith(("_ms", "_pct")) or exp.metric.startswith("far") else 3
    for machine in exp.machines:
        for w in exp.workloads:
            lines += ["", f"{machine} · {w.name} ({w.spec})"]
            header = ["n", f"{exp.baseline.label} {short}"]
            for v in exp.policies:
                header += [f"{v.label} {short}", "gain %" if timed else "reduction %"]
            rows = [header]
            for n in exp.ns:
                s = summary[(summary.machine == machine) & (summary.workload == w.name)
                            & (summary.n == n)].set_index("policy")  # fmt: skip
                g = gains[(gains.machine == machine) & (gains.workload == w.name)
                          & (gains.n == n)].set_index("policy")  # fmt: skip
                if s.empty:
                    continue
                b = s.loc[exp.baseline.label]
                row = [str(n), _pm(b["mean"], b["half_width"], digits)]
                for v in exp.policies:
                    p = s.loc[v.label]
                    gg = g.loc[v.label]
                    half = gg["gain_ci_high"] - gg["gain_pct"]
                    row += [_pm(p["mean"], p["half_width"], digits), _pm(gg["gain_pct"], half, 2)]
                rows.append(row)
            lines += _aligned(rows)
            if runs is not None and exp.metric.startswith("far_from_origin"):
                lines += ["", "  far from origin by the distance of the node where they ran most "
                          "(mean processes per run)"]  # fmt: skip
                lines += _far_breakdown(exp, runs, machine, w.name)
    reps = int(summary["replications"].min()) if len(summary) else 0
    lines += ["", f"replications per cell: {reps}"]
    return "\n".join(line for line in lines if line is not None)


def _aligned(rows: list[list[str]], indent: str = "") -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [indent + "  ".join(c.rjust(wd) for c, wd in zip(r, widths, strict=True)) for r in rows]


def _far_breakdown(exp: Experiment, runs: pd.DataFrame, machine: str, workload: str) -> list[str]:
    cell = runs[(runs.machine == machine) & (runs.workload == workload)]
    cols = [c for c in cell.columns if c.startswith("far_at_") and cell[c].notna().any()]
    rows = [["n", "policy", *(c.removeprefix("far_at_") for c in cols)]]
    for n in exp.ns:
        for v in exp.variants:
            r = cell[(cell.n == n) & (cell.policy == v.label)]
            if not r.empty:
                rows.append([str(n), v.label, *(f"{r[c].mean():.1f}" for c in cols)])
    return _aligned(rows, "  ")


def json_rows(exp: Experiment, gains: pd.DataFrame) -> dict[str, Any]:
    """The `--json` shape of issue 4."""

    def num(x: float) -> float | None:
        return None if math.isnan(x) else float(x)

    rows = [{"machine": r.machine, "workload": r.workload, "n": int(r.n), "baseline": r.baseline,
             "policy": r.policy, "baseline_tat_ms": num(r.baseline_tat_ms),
             "policy_tat_ms": num(r.policy_tat_ms), "gain_pct": num(r.gain_pct),
             "gain_ci_low": num(r.gain_ci_low), "gain_ci_high": num(r.gain_ci_high),
             "replications": int(r.replications)} for r in gains.itertuples()]  # fmt: skip
    return {"experiment": exp.name, "metric": exp.metric, "rows": rows}


def write_tables(out: Path, runs: pd.DataFrame, summary: pd.DataFrame, gains: pd.DataFrame):
    """CSV and Parquet of every run, of the per-cell summary and of the gains."""
    paths = []
    for name, df in [("runs", runs), ("summary", summary), ("gains", gains)]:
        for ext in ("csv", "parquet"):
            p = out / f"{name}.{ext}"
            tmp = p.with_suffix(p.suffix + ".tmp")
            if ext == "csv":
                df.to_csv(tmp, index=False)
            else:
                df.to_parquet(tmp, index=False)
            tmp.replace(p)
            paths.append(p)
    return paths


def write_figures(out: Path, exp: Experiment, summary: pd.DataFrame, gains: pd.DataFrame):
    """Per machine and workload: TAT vs n (with intervals) and gain vs n (with intervals)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig_dir = out / "figures"
    fig_dir.mkdir(exist_ok=True)
    paths = []
    for machine in exp.machines:
        for w in exp.workloads:
            s = summary[(summary.machine == machine) & (summary.workload == w.name)]
            g = gains[(gains.machine == machine) & (gains.workload == w.name)]
            stem = f"{exp.name}-{machine}-{w.name}"
            fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4), constrained_layout=True)
            markers = "osD^v<>"
            for i, v in enumerate(exp.variants):
                d = s[s.policy == v.label].sort_values("n")
                ax1.errorbar(d.n, d["mean"], yerr=d["half_width"].fillna(0), marker=markers[i % 7],
                             color=f"C{i}", capsize=3, label=v.label)  # fmt: skip
            ax1.set(xlabel="processes (n)", ylabel=METRIC_LABELS[exp.metric],
                    title=f"{machine} · {w.name}")  # fmt: skip
            ax1.grid(alpha=0.3)
            ax1.legend()
            for i, v in enumerate(exp.policies):
                d = g[g.policy == v.label].sort_values("n")
                err = (d.gain_ci_high - d.gain_pct).fillna(0)
                # The same colour and marker as the policy's turnaround curve.
                ax2.errorbar(d.n, d.gain_pct, yerr=err, marker=markers[(i + 1) % 7],
                             color=f"C{i + 1}", capsize=3,
                             label=f"{v.label} vs {exp.baseline.label}")  # fmt: skip
            ax2.axhline(0, color="grey", lw=0.8)
            ax2.set(xlabel="processes (n)", ylabel="gain (%)", title="gain over the baseline")
            ax2.grid(alpha=0.3)
            ax2.legend()
            for ext in ("png", "svg"):
                p = fig_dir / f"{stem}.{ext}"
                fig.savefig(p, dpi=150)
                paths.append(p)
            plt.close(fig)
    return paths
