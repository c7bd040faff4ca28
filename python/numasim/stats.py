"""Statistics of replicated runs: t-based confidence intervals and paired gains.

- Per cell and variant: mean, standard deviation (n − 1), and the half-width
  ``t_{(1+c)/2, r−1} · sd / √r`` of a two-sided interval at confidence c.
- Gain of a policy over the baseline, per replication r (same workload instance for both):
  ``g_r = (B_r − P_r) / B_r × 100``; the reported gain is the mean of g_r, its interval the t
  interval of the g_r — a paired interval, narrower than an unpaired one whenever B_r and P_r
  move together, which common random numbers make them do.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

# The t quantile itself (what scipy.stats.t.ppf returns, bit for bit), without importing
# scipy.stats, which costs a second of every experiment's report.
from scipy.special import stdtrit

from numasim.experiment import Experiment

#: The unit of each metric an experiment can report, as written in ``summary``, ``gains`` and
#: ``--json`` rows (``"1"`` for a dimensionless factor).
METRIC_UNITS = {
    "mean_tat_ms": "ms",
    "median_tat_ms": "ms",
    "p95_tat_ms": "ms",
    "makespan_ms": "ms",
    "far_from_origin": "processes",
    "far_from_origin_pct": "%",
    "mean_remote_factor": "1",
    "app_remote_share": "1",
    "cross_node_migrations_per_s": "1/s",
    "remote_share": "1",
}


def unit(metric: str) -> str:
    """The unit of ``metric`` (``ms`` for any ``*_ms`` column)."""
    return METRIC_UNITS.get(metric, "ms" if metric.endswith("_ms") else "")


def t_interval(values: Sequence[float], confidence: float) -> tuple[float, float, float]:
    """(mean, sd, half-width); sd and half-width are NaN below two values."""
    x = np.asarray(values, dtype=float)
    mean = float(x.mean())
    if len(x) < 2:
        return mean, math.nan, math.nan
    sd = float(x.std(ddof=1))
    half = float(stdtrit(len(x) - 1, (1 + confidence) / 2) * sd / math.sqrt(len(x)))
    return mean, sd, half


def summarize(runs: pd.DataFrame, confidence: float, metric: str = "mean_tat_ms"):
    """Mean, sd and interval of ``metric`` per (machine, workload, n, policy)."""
    out = []
    for (machine, workload, n, policy), g in runs.groupby(
        ["machine", "workload", "n", "policy"], sort=False
    ):
        mean, sd, half = t_interval(g[metric].to_list(), confidence)
        out.append({"machine": machine, "workload": workload, "n": n, "policy": policy,
                    "metric": metric, "unit": unit(metric), "replications": len(g),
                    "mean": mean, "sd": sd, "ci_low": mean - half, "ci_high": mean + half,
                    "half_width": half, "confidence": confidence})  # fmt: skip
    return pd.DataFrame(out)


#: The columns naming a cell, and a cell's application.
_CELL = ("machine", "workload", "n")
_APP = (*_CELL, "app")


def _paired(runs: pd.DataFrame, exp: Experiment, metric: str, by: Sequence[str] = _CELL):
    """Per group of ``by`` (a cell; a cell and an application) and compared policy:
    ``((*group, policy), B, P)``, the baseline's and the policy's ``metric`` on the replications
    both ran, indexed by replication (``n`` as an int)."""
    base = exp.baseline.label
    for group, g in runs.groupby(list(by), sort=False):
        key = tuple(int(k) if name == "n" else k for name, k in zip(by, group, strict=True))
        b = g[g["policy"] == base].set_index("replication")[metric]
        for v in exp.policies:
            p = g[g["policy"] == v.label].set_index("replication")[metric]
            common = b.index.intersection(p.index)
            yield (*key, v.label), b.loc[common], p.loc[common]


def replication_gains(runs: pd.DataFrame, exp: Experiment, metric: str = "mean_tat_ms"):
    """For a time metric, ``(machine, workload, n, policy) → g_r`` by replication, the paired
    per-replication gains whose mean and t interval ``gains`` reports."""
    return {key: (b - p) / b * 100 for key, b, p in _paired(runs, exp, metric)}


def gains(runs: pd.DataFrame, exp: Experiment, confidence: float, metric: str = "mean_tat_ms"):
    """Paired gain of every policy over the baseline, per cell: ``metric`` and its ``unit``, the
    two means (``baseline_mean``, ``policy_mean``, in that unit) and ``gain_pct`` with its interval
    (positive = the policy's metric is lower, i.e. better)."""
    out = []
    for (machine, workload, n, policy), b, p in _paired(runs, exp, metric):
        bb, pp = b.to_numpy(), p.to_numpy()
        if metric.endswith("_ms"):
            # Times: the mean of the per-replication gains (each paired on one workload).
            gain, _, half = t_interval((bb - pp) / bb * 100, confidence)
        else:
            # Counts and factors may be 0 in a replication: the paired mean difference,
            # relative to the baseline mean.
            diff, _, half = t_interval(bb - pp, confidence)
            scale = 100 / bb.mean() if bb.mean() else math.nan
            gain, half = diff * scale, half * scale
        out.append({"machine": machine, "workload": workload, "n": n,
                    "baseline": exp.baseline.label, "policy": policy, "metric": metric,
                    "unit": unit(metric), "baseline_mean": float(bb.mean()),
                    "policy_mean": float(pp.mean()), "gain_pct": gain,
                    "gain_ci_low": gain - half, "gain_ci_high": gain + half,
                    "replications": len(bb), "confidence": confidence})  # fmt: skip
    return pd.DataFrame(out)


def unpaired_gain_half_width(baseline: Sequence[float], policy: Sequence[float], confidence: float):
    """Half-width (in % of the baseline mean) of the gain treated as two independent samples
    (Welch), for comparison with the paired interval."""
    b, p = np.asarray(baseline, float), np.asarray(policy, float)
    vb, vp = b.var(ddof=1) / len(b), p.var(ddof=1) / len(p)
    dof = (vb + vp) ** 2 / (vb**2 / (len(b) - 1) + vp**2 / (len(p) - 1))
    return float(stdtrit(dof, (1 + confidence) / 2) * math.sqrt(vb + vp) / b.mean() * 100)


# --- applications (app= workloads and mixes) ----------------------------------------------
#
# Per application a, replication r, the baseline's completion time B_ar and a policy's P_ar
# (turnaround of the application's last thread) on the same workload instance:
#   gain g_ar = (B_ar − P_ar) / B_ar × 100: the mean over r with the t interval over r (paired);
#   speed-up B_ar / P_ar: the geometric mean over r, its interval the t interval of
#   ln(B_ar / P_ar) taken back with exp (ratios average on a log scale: 2× and 0.5× cancel).
# The average over the applications is, per replication, the mean of g_ar (and of the log
# ratios) over a, then the same over r.


def app_summary(apps: pd.DataFrame, confidence: float) -> pd.DataFrame:
    """Per cell, policy and application: completion time (``tat_*``, ms), remote share
    (``remote_share_*``, 0–1) and sync wait (``sync_wait_ms_mean``) over the replications."""
    out = []
    for (machine, workload, n, policy, app), g in apps.groupby(
        [*_CELL, "policy", "app"], sort=False
    ):
        tat, tat_sd, tat_half = t_interval(g["turnaround_ms"].to_list(), confidence)
        rs, _, rs_half = t_interval(g["remote_share"].to_list(), confidence)
        out.append({"machine": machine, "workload": workload, "n": n, "policy": policy,
                    "app": app, "threads": int(g["threads"].iloc[0]), "replications": len(g),
                    "tat_mean": tat, "tat_sd": tat_sd, "tat_half_width": tat_half,
                    "remote_share_mean": rs, "remote_share_half_width": rs_half,
                    "sync_wait_ms_mean": float(g["sync_wait_ms"].mean()),
                    "confidence": confidence})  # fmt: skip
    return pd.DataFrame(out)


def app_gains(apps: pd.DataFrame, exp: Experiment, confidence: float) -> pd.DataFrame:
    """Per cell, policy and application: the paired speed-up and gain of its completion time."""
    out = []
    for (machine, workload, n, app, policy), b, p in _paired(apps, exp, "turnaround_ms", _APP):
        bb, pp = b.to_numpy(), p.to_numpy()
        g, _, g_half = t_interval((bb - pp) / bb * 100, confidence)
        out.append({"machine": machine, "workload": workload, "n": n, "app": app,
                    "baseline": exp.baseline.label, "policy": policy,
                    "baseline_tat_ms": float(bb.mean()), "policy_tat_ms": float(pp.mean()),
                    **_speedup(np.log(bb / pp), confidence),
                    "gain_pct": g, "gain_ci_low": g - g_half, "gain_ci_high": g + g_half,
                    "replications": len(bb), "confidence": confidence})  # fmt: skip
    return pd.DataFrame(out)


def _speedup(log_ratios: Sequence[float], confidence: float) -> dict[str, float]:
    """The geometric mean of ratios given as logs, and its interval (exp of the t interval of
    the logs; NaN below two values)."""
    m, _, half = t_interval(log_ratios, confidence)
    return {"speedup": math.exp(m), "speedup_ci_low": math.exp(m - half),
            "speedup_ci_high": math.exp(m + half)}  # fmt: skip


def app_average(apps: pd.DataFrame, exp: Experiment, confidence: float) -> pd.DataFrame:
    """Per cell and policy: the gain and speed-up averaged over the applications, per
    replication, then the mean and t interval over the replications (``gain_pct``,
    ``gain_ci_low``, ``gain_ci_high`` as in ``gains``, so a published average compares)."""
    per: dict[tuple, list[tuple[pd.Series, pd.Series]]] = {}
    for (machine, workload, n, _, policy), b, p in _paired(apps, exp, "turnaround_ms", _APP):
        per.setdefault((machine, workload, n, policy), []).append((b, p))
    out = []
    for (machine, workload, n, policy), pairs in per.items():
        # Replications where every application ran under both (an interrupted sweep may lack
        # some): the average of a replication is over all its applications.
        gains_r = pd.concat([(b - p) / b * 100 for b, p in pairs], axis=1).dropna().mean(axis=1)
        logs_r = pd.concat([np.log(b / p) for b, p in pairs], axis=1).dropna().mean(axis=1)
        g, _, g_half = t_interval(gains_r.to_list(), confidence)
        out.append({"machine": machine, "workload": workload, "n": n,
                    "baseline": exp.baseline.label, "policy": policy, "apps": len(pairs),
                    "gain_pct": g, "gain_ci_low": g - g_half, "gain_ci_high": g + g_half,
                    **_speedup(logs_r.to_list(), confidence), "replications": len(gains_r),
                    "confidence": confidence})  # fmt: skip
    return pd.DataFrame(out)


def evaluations(runs: pd.DataFrame, confidence: float) -> pd.DataFrame:
    """Per cell and policy: candidate evaluations per balancing pass (evaluations / passes of
    each run, then the mean and t interval over the replications), with the mean evaluations and
    passes per run, and under ``linux:select=…`` the means of its counts of pulls between nodes
    (``_select_means``). Only runs of app workloads carry the counts."""
    if "balance_evaluations" not in runs:
        return pd.DataFrame()
    out = []
    runs = runs[runs["balance_passes"].notna()]
    for (machine, workload, n, policy), g in runs.groupby([*_CELL, "policy"], sort=False):
        per_pass = (g["balance_evaluations"] / g["balance_passes"]).fillna(0.0)
        mean, _, half = t_interval(per_pass.to_list(), confidence)
        out.append({"machine": machine, "workload": workload, "n": n, "policy": policy,
                    "evaluations_per_pass": mean, "half_width": half,
                    "evaluations": float(g["balance_evaluations"].mean()),
                    "passes": float(g["balance_passes"].mean()), "replications": len(g),
                    "confidence": confidence, **_select_means(g)})  # fmt: skip
    return pd.DataFrame(out)


def _select_means(g: pd.DataFrame) -> dict[str, float]:
    """The mean per run of each selection count of ``linux:select=…`` (pulls between nodes,
    picks, picks with a choice between thread groups, picks that differ from the kernel's,
    their evaluations), for runs that have them; none for other policies."""
    from numasim.experiment import SELECT_METRICS

    return {k: float(g[k].mean()) for k in SELECT_METRICS if k in g and g[k].notna().any()}
