"""Published vs numasim under each profile: which model the published result supports.

A reproduction run with ``--profiles`` (``--report`` implies it) also runs the experiment under
``paper`` (the papers' sentences), ``kernel26`` (the Linux 2.6.18 kernel) and, where one exists,
the fitted profile (the one ``--assume fitted:NAME`` named, else ``fitted:EXPERIMENT``; inferred
by ``numasim fit``, never a default), into the same store with the same seeds, and sets the
published result beside each. What is published decides the table:

```
[reference] rows        per (machine, workload, n): published baseline, policy, gain │ each
                        beside each column's means and gain                          │ column's
[reference] average     per machine: the published average gain beside each column's │ reading:
                        mean gain over the sweep (applications: their average)       │ SIGN,
[[claim]] (an x axis)   per claim and machine: each column's verdict                 │ TREND,
                                                                                       MAGNITUDE
```

The reading, per column, from the numbers (reproduction.py's rules for one setting):

1. rows: per machine and workload, SIGN (at how many n the signs agree), TREND (Spearman's ρ
   of gain vs n, both rise or both fall), MAGNITUDE (mean |numasim − published| in pp, how many
   published gains lie inside numasim's interval).
2. average: per machine, SIGN of numasim's mean gain against the published average and the
   difference in pp, and in how many cells the published average lies inside the interval.
3. claims: how many of the paper's claims hold under the column, fail, or are not significant.

The table is one long frame (``table``): one row per published item and column, which the
text, ``--json`` and the HTML page all print.
"""

from __future__ import annotations

import copy
import html
import math
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from numasim import report, reproduction, stats
from numasim.experiment import Experiment, execute

#: What a profile table compares: the published rows, the published average, or the claims.
ROWS, AVERAGE, CLAIMS = "rows", "average", "claims"


@dataclass
class ProfileColumn:
    """One setting of the table and what it gave."""

    label: str
    exp: Experiment
    #: numasim's gains per cell (``stats.gains``).
    gains: pd.DataFrame | None = None
    #: What a published average is compared with: the gains, or for applications their
    #: per-application average (``stats.app_average``).
    average_gains: pd.DataFrame | None = None
    #: The claims' verdicts (an x-axis experiment).
    claims: list | None = None


def kind(exp: Experiment) -> str | None:
    """``ROWS``, ``AVERAGE``, ``CLAIMS``, or None when nothing is published to compare with."""
    if exp.has_x:
        return CLAIMS if exp.claims else None
    ref = exp.reference
    if ref is None:
        return None
    if ref.rows:
        return ROWS
    return AVERAGE if ref.average_gain_pct is not None else None


def profile_columns(exp: Experiment) -> list[ProfileColumn]:
    """The settings of the table: ``paper``, ``kernel26``, and the fitted profile if a file of
    it exists; [] when nothing is published."""
    from numasim.fit import profile as fitted

    if kind(exp) is None:
        return []
    cols = []
    for name in ("paper", "kernel26"):  # the papers' sentences first, then the kernel
        e = copy.copy(exp)
        e.assume, e.fitted = name, None
        cols.append(ProfileColumn(name, e))
    names = (n.removeprefix(fitted.PREFIX) for n in (exp.fitted, exp.name) if n)
    for name in dict.fromkeys(names):
        if (fitted.user_dir() / f"{name}.json").is_file():
            e = fitted.apply(copy.copy(exp), f"{fitted.PREFIX}{name}")
            cols.append(ProfileColumn(f"{fitted.PREFIX}{name}", e))
            break
    return cols


def run_profiles(cols: list[ProfileColumn], out: Path, confidence: float, jobs=None,
                 cluster=None, on_progress=None) -> tuple[int, int]:  # fmt: skip
    """Runs every column into ``out``; ``(computed, reused)``."""
    from numasim import app_report, claims

    computed = reused = 0
    for c in cols:
        o = execute(c.exp, out, jobs=jobs, cluster=cluster,
                    on_progress=on_progress(c.label) if on_progress else None)  # fmt: skip
        c.gains = stats.gains(o.runs, c.exp, confidence, c.exp.metric)
        if c.exp.has_x:
            c.claims = claims.evaluate_all(c.exp, o.runs, confidence)
        else:
            apps = app_report.compute(c.exp, o.runs, o.apps, confidence)
            c.average_gains = apps.average if apps is not None else c.gains
        computed, reused = computed + o.computed, reused + o.reused
    return computed, reused


# --- the table ----------------------------------------------------------------------------

ROW_COLUMNS = ["machine", "workload", "n", "profile", "published_baseline", "published_policy",
               "published_gain_pct", "baseline_mean", "policy_mean", "gain_pct", "gain_ci_low",
               "gain_ci_high", "diff_pp", "inside"]  # fmt: skip
AVERAGE_COLUMNS = ["machine", "profile", "published_gain_pct", "gain_pct", "gain_min",
                   "gain_max", "diff_pp", "cells", "inside_cells"]  # fmt: skip
CLAIM_COLUMNS = ["machine", "claim", "source", "profile", "verdict", "holds", "fails",
                 "undecided", "comparisons"]  # fmt: skip


def table(exp: Experiment, cols: list[ProfileColumn]) -> pd.DataFrame:
    """One row per published item and column (``*_COLUMNS`` of the experiment's kind)."""
    k = kind(exp)
    frames = []
    if k == ROWS:
        for c in cols:
            v = reproduction.versus(c.exp, c.gains)
            v.insert(3, "profile", c.label)
            frames.append(v[ROW_COLUMNS])
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=ROW_COLUMNS)
    if k == AVERAGE:
        ref = exp.reference
        pub = float(ref.average_gain_pct)
        rows = []
        for c in cols:
            g = c.average_gains[c.average_gains.policy == ref.policy]
            for machine, d in g.groupby("machine", sort=False):
                mean = float(d.gain_pct.mean())
                inside = int(((d.gain_ci_low <= pub) & (pub <= d.gain_ci_high)).sum())
                rows.append([machine, c.label, pub, mean, float(d.gain_pct.min()),
                             float(d.gain_pct.max()), mean - pub, len(d), inside])  # fmt: skip
        return pd.DataFrame(rows, columns=AVERAGE_COLUMNS)
    if k == CLAIMS:
        rows = []
        for c in cols:
            for r in c.claims:
                n = r.counts()
                rows.append([r.machine, r.claim.index + 1, r.claim.source, c.label, r.verdict,
                             *n.values(), len(r.comparisons)])  # fmt: skip
        return pd.DataFrame(rows, columns=CLAIM_COLUMNS)
    return pd.DataFrame()


# --- the reading --------------------------------------------------------------------------


def _agreement(d: pd.DataFrame) -> str:
    """SIGN, TREND and MAGNITUDE of one column's gains (rows of one machine and workload with
    both a published and a numasim gain, by n) against the published ones."""
    sign_of, trend = reproduction._sign, reproduction.trend
    m = len(d)
    same = [
        int(r.n) for r in d.itertuples() if sign_of(r.published_gain_pct) == sign_of(r.gain_pct)
    ]
    other = [int(n) for n in d.n if int(n) not in same]
    sign = ("SIGN agrees" if not other else "SIGN disagrees" if not same
            else f"SIGN agrees at {len(same)} of {m} n only (n = {reproduction._ns(other)} "
                 "differ)")  # fmt: skip
    pt, _ = trend(list(d.n), list(d.published_gain_pct))
    nt, _ = trend(list(d.n), list(d.gain_pct))
    if "too few n" in (pt, nt):
        tr = "TREND not assessed"
    elif pt == nt:
        tr = f"TREND agrees ({pt})" if pt != "no clear trend" else "TREND: neither clear"
    else:
        tr = f"TREND disagrees (published {pt}, numasim {nt})"
    inside = int(d.inside.sum())
    verdict = "agrees" if inside == m else "disagrees" if inside == 0 else "partly agrees"
    mag = (f"MAGNITUDE {verdict} (mean |diff| {report.fmt(d.diff_pp.abs().mean(), 2)} pp, "
           f"{inside} of {m} inside)")  # fmt: skip
    return ", ".join([sign, tr, mag])


def reading(exp: Experiment, cols: list[ProfileColumn]) -> list[str]:
    """One sentence per machine and workload (rows), machine (average) or the claims: each
    column's agreement with the published result (module doc)."""
    k, t = kind(exp), table(exp, cols)
    labels = [c.label for c in cols]
    out = []
    if k == ROWS:
        for (machine, workload), block in t.groupby(["machine", "workload"], sort=False):
            said = []
            for label in labels:
                d = block[(block.profile == label) & block.published_gain_pct.notna()
                          & block.gain_pct.notna()].sort_values("n")  # fmt: skip
                said.append(f"under {label}: " + (_agreement(d) if len(d) else
                                                  "no cell to compare"))  # fmt: skip
            out.append(f"{machine} · {workload}: " + "; ".join(said) + ".")
    elif k == AVERAGE:
        for machine, block in t.groupby("machine", sort=False):
            said = []
            for r in block.itertuples():
                agree = reproduction._sign(r.gain_pct) == reproduction._sign(r.published_gain_pct)
                said.append(f"under {r.profile}: SIGN {'agrees' if agree else 'disagrees'}, "
                            f"MAGNITUDE {report.fmt(r.gain_pct, 2)} % against "
                            f"{report.fmt(r.published_gain_pct, 2)} % "
                            f"({reproduction._delta(r.diff_pp, math.nan, math.nan)} pp; the "
                            f"published average inside numasim's interval in {r.inside_cells} "
                            f"of {r.cells} cells)")  # fmt: skip
            out.append(f"{machine}: " + "; ".join(said) + ". No trend is published.")
    elif k == CLAIMS:
        total = t.groupby("profile", sort=False).size()
        said = []
        for label in labels:
            d = t[t.profile == label]
            counts = d.verdict.value_counts()
            from numasim.claims import FAILS, HOLDS, UNDECIDED

            said.append(f"under {label}: {int(counts.get(HOLDS, 0))} of {int(total[label])} "
                        f"claims hold, {int(counts.get(FAILS, 0))} do not, "
                        f"{int(counts.get(UNDECIDED, 0))} not significant")  # fmt: skip
        out.append("The paper's claims (its figures carry no table): " + "; ".join(said) + ".")
    return out


# --- text, JSON, HTML ---------------------------------------------------------------------


def _grids(
    exp: Experiment, cols: list[ProfileColumn]
) -> list[tuple[str, list[str], list[list[str]]]]:
    """``(title, header, rows)`` of each printed table: the long frame laid out wide, one
    column group per profile."""
    k, t = kind(exp), table(exp, cols)
    labels = [c.label for c in cols]
    out = []
    if k == ROWS:
        ref = exp.reference
        absolute = any(b is not None or p is not None for b, p, _ in ref.rows.values())
        for (machine, workload), block in t.groupby(["machine", "workload"], sort=False):
            header = ["n", "published gain %"] + [f"{x} gain %" for x in labels]
            if absolute:
                header[2:2] = ["published baseline", "published policy"]
                for x in labels:
                    header += [f"{x} baseline", f"{x} policy"]
            rows = []
            by = block.set_index(["profile", "n"])
            for r in block[block.profile == labels[0]].itertuples():
                cells = [by.loc[(x, r.n)] for x in labels]
                row = [str(r.n), report.fmt(r.published_gain_pct, 2)]
                row += [report.fmt(c.gain_pct, 2) for c in cells]
                if absolute:
                    row[2:2] = [reproduction._num(r.published_baseline),
                                reproduction._num(r.published_policy)]  # fmt: skip
                    for c in cells:
                        row += [report.fmt(c.baseline_mean), report.fmt(c.policy_mean)]
                rows.append(row)
            out.append((f"{machine} · {workload}", header, rows))
    elif k == AVERAGE:
        header = ["machine", "published average gain %"] + [f"{x} (%)" for x in labels]
        rows = []
        for machine, block in t.groupby("machine", sort=False):
            by = block.set_index("profile")
            rows.append([machine, report.fmt(block.published_gain_pct.iloc[0], 2)]
                        + [report.fmt(by.loc[x].gain_pct, 2) for x in labels])  # fmt: skip
        out.append((f"numasim's {report.average_basis(cols[0].average_gains)}", header, rows))
    elif k == CLAIMS:
        many = len(exp.machines) > 1
        header = ["claim", "where"] + (["machine"] if many else []) + labels
        rows = []
        for (machine, claim), block in t.groupby(["machine", "claim"], sort=False):
            by = block.set_index("profile")
            rows.append([f"[{claim}]", block.source.iloc[0]] + ([machine] if many else [])
                        + [by.loc[x].verdict for x in labels])  # fmt: skip
        out.append(("verdict of each claim", header, rows))
    return out


def intro(cols: list[ProfileColumn]) -> str:
    names = ", ".join(c.label for c in cols)
    return (f"published vs numasim under each profile ({names}): the same experiment, seeds "
            "and store; paper = the papers' sentences, kernel26 = the Linux 2.6.18 kernel"
            + ("; fitted = inferred by numasim fit, not a default"
               if any(c.label.startswith("fitted:") for c in cols) else ""))  # fmt: skip


def text(exp: Experiment, cols: list[ProfileColumn]) -> str:
    """The tables and the reading for the terminal."""
    if not cols:
        return ""
    lines = [intro(cols)]
    for title, header, rows in _grids(exp, cols):
        lines += ["", title, *report._aligned([header, *rows], "  ")]
    lines += ["", "reading:"]
    for r in reading(exp, cols):
        lines += textwrap.wrap(r, 100, initial_indent="  ", subsequent_indent="    ")
    return "\n".join(lines)


def json_rows(exp: Experiment, cols: list[ProfileColumn]) -> dict[str, Any]:
    """``{"profiles": {"kind", "columns", "rows", "reading"}}`` for ``--json``."""
    return {"profiles": {"kind": kind(exp), "columns": [c.label for c in cols],
                         "rows": report.records(table(exp, cols)),
                         "reading": reading(exp, cols)}}  # fmt: skip


def html_section(exp: Experiment, cols: list[ProfileColumn]) -> list[str]:
    """The page's section: each table, then the reading."""
    esc = html.escape
    if not cols:
        return []
    unit = stats.unit(exp.metric)
    parts = [
        "<h2>Published vs numasim under each profile</h2>",
        "<p>The same experiment, seeds and store under the paper profile (the papers' "
        "sentences), the kernel26 profile (the Linux 2.6.18 kernel) and, where one exists, the "
        "fitted profile (inferred by <code>numasim fit</code>; not a default). Gains are "
        f"numasim's means; absolute values in {esc(unit)} where the paper gives them.</p>",
    ]
    for title, header, rows in _grids(exp, cols):
        parts.append(f"<h3>{esc(title)}</h3>")
        parts.append(reproduction._table(header, rows, set(range(1, len(header)))))
    parts.append("<h3>Reading</h3>")
    parts.append("<p>" + " ".join(esc(t) for t in reading(exp, cols)) + "</p>")
    return parts
