"""Statistics of replicated runs: t-based confidence intervals and paired gains (SPEC §7, §8).

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
from scipy import stats as sps

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
    half = float(sps.t.ppf((1 + confidence) / 2, len(x) - 1) * sd / math.sqrt(len(x)))
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


def _paired(runs: pd.DataFrame, exp: Experiment, metric: str):
    """Per cell and compared policy: ``((machine, workload, n, policy), B, P)``, the baseline's
    and the policy's ``metric`` on the replications both ran, indexed by replication."""
    base = exp.baseline.label
    for (machine, workload, n), g in runs.groupby(["machine", "workload", "n"], sort=False):
        b = g[g["policy"] == base].set_index("replication")[metric]
        for v in exp.policies:
            p = g[g["policy"] == v.label].set_index("replication")[metric]
            common = b.index.intersection(p.index)
            yield (machine, workload, int(n), v.label), b.loc[common], p.loc[common]


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
    return float(sps.t.ppf((1 + confidence) / 2, dof) * math.sqrt(vb + vp) / b.mean() * 100)
