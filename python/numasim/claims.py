"""A paper's qualitative claims, checked against an experiment's results with paired
replications (``[[claim]]`` in an experiment file with an x axis; docs/experiments.md, "Claims").

```
[[claim]]  source, quote (the paper's sentence), kind, the compared pairs, x range, tolerance
    │ check: names, pairs and range against the experiment (one InputError line each)
    ▼
Claim: pairs (a, b) × the x values in its range = k comparisons
    │ evaluate, per machine: for each comparison the paired relative difference
    │ d_r, a's difference from b in % of its metric (default the experiment's), replication by
    │ replication (both ran the same workload instance), and its t interval at 1 − (1 − c) / k
    ▼
ClaimResult: one status per comparison, one verdict per claim
```

The vocabulary (``kind``), each comparison being a policy ``a`` against a policy ``b``:

- ``less``: a's metric is lower than b's. The comparison holds where d's interval lies below 0
  and contradicts the claim where it lies above 0.
- ``smallest``: ``policy`` is lower than every other policy of the experiment (``less`` against
  each of them).
- ``close``: a and b differ by less than ``tolerance_pct`` (% of b): holds where d's interval lies
  inside (−tol, +tol), contradicts where it lies wholly outside [−tol, +tol]. This is an
  equivalence test (two one-sided tests, at the same interval as the others: conservative).
- ``apart``: a and b differ by more than ``tolerance_pct``: the reverse of ``close``.

The pairs are ``pairs = [[a, b], ...]``; or ``policies`` × ``versus`` (every policy of the first
list against every one of the second); or ``among`` (every pair of the list; ``close`` and
``apart``, which are symmetric up to the base of the percentage). ``x_min`` and ``x_max``
(inclusive) restrict the claim to part of the x axis; ``metric`` compares another metric than
the experiment's (e.g. ``app_remote_share`` for a claim about remote accesses).

The difference ``d_r`` follows the gains of stats.py: for a time, relative to b in the same
replication, ``(a_r − b_r) / b_r × 100``; for a share, count or factor (which may be 0),
relative to b's mean, ``(a_r − b_r) / mean(b) × 100``; and when b is 0 in every replication
(a policy that never accesses remote memory), absolute, ``(a_r − b_r) × 100`` — for a share,
percentage points, and a tolerance is then read in points.

Verdict, over the claim's k comparisons, each interval at confidence 1 − (1 − c) / k for the
experiment's confidence c (Bonferroni: the chance that any of the k intervals misses is at most
1 − c, so the verdict is made at confidence c):

1. **holds**: every comparison holds;
2. **does not hold**: at least one comparison contradicts the claim;
3. **not significant**: neither — some comparison's interval is too wide, or straddles the line,
   to decide (with fewer than 2 replications every comparison is undecided).

Known limits: Bonferroni is conservative when the comparisons are correlated (they share
replications), so a true claim may come out "not significant" where a finer test would decide;
"small" is a tolerance the experiment file states before any run, never one fitted to the
results.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from numasim._core import InputError

if TYPE_CHECKING:
    import pandas as pd

    from numasim.experiment import Experiment

#: The claim kinds (the vocabulary above).
CLAIM_KINDS = ("less", "smallest", "close", "apart")
#: The verdicts, and the status of one comparison.
HOLDS, FAILS, UNDECIDED = "holds", "does not hold", "not significant"
#: Which ways of naming the pairs each kind takes.
_FORMS = {
    "less": ("pairs", "policies"),
    "smallest": ("policy",),
    "close": ("pairs", "policies", "among"),
    "apart": ("pairs", "policies", "among"),
}
_FORM_TEXT = {"pairs": "pairs", "policies": "policies with versus", "among": "among",
              "policy": "policy"}  # fmt: skip


@dataclass(frozen=True)
class Claim:
    """A claim of the paper in its checkable form (``check`` made it from a ``[[claim]]``)."""

    index: int
    source: str
    quote: str
    kind: str
    #: The compared pairs (a, b), by the experiment's variant labels.
    pairs: tuple[tuple[str, str], ...]
    #: The workloads (x values) it speaks of, by name, in the experiment's order.
    workloads: tuple[str, ...]
    xs: tuple[float, ...]
    tolerance_pct: float | None
    #: How the file named the pairs, for ``statement``: (form, its policies).
    form: tuple[str, tuple[Any, ...]]
    x_range: tuple[float | None, float | None]
    #: What it compares, when not the experiment's metric (``metric = ...``).
    metric: str | None = None

    def statement(self, x_label: str) -> str:
        """The checked form in words: ``less: each of hb-con, hs-con below each of fr-dist at
        load level ≥ 1``."""
        form, names = self.form
        tol = ""
        if self.tolerance_pct is not None:
            tol = (f" within {self.tolerance_pct:g} %" if self.kind == "close"
                   else f" more than {self.tolerance_pct:g} % apart")  # fmt: skip
        if form == "policy":
            what = f"{names[0]} below every other policy"
        elif form == "among":
            what = f"every pair of {', '.join(names)}{tol}"
        elif form == "policies":
            a, b = names
            rel = "below" if self.kind == "less" else "vs"
            what = f"each of {', '.join(a)} {rel} each of {', '.join(b)}{tol}"
        else:
            rel = " < " if self.kind == "less" else " ~ " if self.kind == "close" else " ≠ "
            what = ", ".join(f"{a}{rel}{b}" for a, b in self.pairs) + tol
        lo, hi = self.x_range
        if lo is None and hi is None:
            where = f"at every {x_label}"
        elif lo is not None and hi is not None:
            where = f"at {lo:g} ≤ {x_label} ≤ {hi:g}"
        else:
            where = f"at {x_label} ≥ {lo:g}" if lo is not None else f"at {x_label} ≤ {hi:g}"
        on = ""
        if self.metric:
            from numasim.experiment import METRIC_LABELS

            on = f" (on the {METRIC_LABELS[self.metric]})"
        return f"{self.kind}: {what} {where}{on}"

    @property
    def comparisons(self) -> int:
        return len(self.pairs) * len(self.workloads)


def check(origin: str, i: int, entry: Any, exp: Experiment) -> Claim:
    """The ``[[claim]]`` number ``i`` (schema-checked) made checkable against ``exp``; every
    problem is one InputError naming the file and the key (``claim.2.versus.1``)."""
    where = f"{origin}: claim.{i}"
    if not exp.has_x:
        raise InputError(f"{where}: claims are checked along an x axis: give x_label and an x "
                         "to every workload")  # fmt: skip
    labels = [v.label for v in exp.variants]

    def known(key: str, names: list[str]) -> tuple[str, ...]:
        for j, name in enumerate(names):
            if name not in labels:
                raise InputError(f"{where}.{key}.{j}: '{name}' is not a policy of the "
                                 f"experiment ({', '.join(labels)})")  # fmt: skip
        return tuple(names)

    given = [k for k in ("pairs", "policies", "among", "policy") if getattr(entry, k) is not None]
    forms = _FORMS[entry.kind]
    if len(given) != 1 or given[0] not in forms:
        ways = " or ".join(_FORM_TEXT[f] for f in forms)
        got = ", ".join(given) or "none"
        raise InputError(f"{where}: kind '{entry.kind}' names its pairs by {ways} (got {got})")
    form = given[0]
    if (entry.versus is not None) != (form == "policies"):
        raise InputError(f"{where}.versus: goes with policies (every policy of policies "
                         "against every one of versus)")  # fmt: skip
    if form == "pairs":
        pairs = [known(f"pairs.{j}", p) for j, p in enumerate(entry.pairs)]
        names: tuple[Any, ...] = ()
    elif form == "policies":
        a, b = known("policies", entry.policies), known("versus", entry.versus)
        pairs = [(x, y) for x in a for y in b]
        names = (a, b)
    elif form == "among":
        m = known("among", entry.among)
        if len(m) < 2:
            raise InputError(f"{where}.among: name at least two policies")
        pairs = [(m[j], m[k]) for j in range(len(m)) for k in range(j + 1, len(m))]
        names = m
    else:
        (p,) = known("policy", [entry.policy])
        pairs = [(p, other) for other in labels if other != p]
        names = (p,)
    if not pairs:
        raise InputError(f"{where}.{form}: names no pair")
    for j, (a, b) in enumerate(pairs):
        if a == b:
            raise InputError(f"{where}.{form}: compares {a} with itself")
        if (a, b) in pairs[:j]:
            raise InputError(f"{where}.{form}: compares {a} with {b} twice")
    wants_tol = entry.kind in ("close", "apart")
    if wants_tol and entry.tolerance_pct is None:
        raise InputError(f"{where}: missing key 'tolerance_pct' (what '{entry.kind}' counts "
                         "as a small difference, in % of the second policy)")  # fmt: skip
    if not wants_tol and entry.tolerance_pct is not None:
        raise InputError(f"{where}.tolerance_pct: only close and apart have a tolerance")
    lo, hi = entry.x_min, entry.x_max
    if lo is not None and hi is not None and lo > hi:
        raise InputError(f"{where}: x_min {lo:g} is above x_max {hi:g}")
    inside = [w for w in exp.workloads
              if (lo is None or w.x >= lo) and (hi is None or w.x <= hi)]  # fmt: skip
    if not inside:
        xs = sorted(w.x for w in exp.workloads)
        key = "x_min" if lo is not None and lo > xs[0] else "x_max"
        raise InputError(f"{where}.{key}: no workload's x is in the range (the x values: "
                         f"{', '.join(f'{x:g}' for x in xs)})")  # fmt: skip
    if entry.metric is not None:
        from numasim.experiment import check_metric

        check_metric(origin, f"claim.{i}.metric", entry.metric, exp.workloads)
    return Claim(i, entry.source, entry.quote, entry.kind, tuple(tuple(p) for p in pairs),
                 tuple(w.name for w in inside), tuple(w.x for w in inside), entry.tolerance_pct,
                 (form, names), (lo, hi), entry.metric)  # fmt: skip


# --- evaluation ---------------------------------------------------------------------------


def status(kind: str, lo: float, hi: float, tolerance_pct: float | None) -> tuple[str, float]:
    """One comparison's status from the interval [lo, hi] of d (%), and its margin: how far
    the interval is inside the region where it holds (negative: outside it)."""
    if math.isnan(lo) or math.isnan(hi):
        return UNDECIDED, math.nan
    if kind in ("less", "smallest"):
        margin = -hi
        state = HOLDS if hi < 0 else FAILS if lo > 0 else UNDECIDED
        return state, margin
    tol = tolerance_pct or 0.0
    inside = -tol < lo and hi < tol
    outside = lo > tol or hi < -tol
    if kind == "close":
        return (HOLDS if inside else FAILS if outside else UNDECIDED), tol - max(-lo, hi)
    return (HOLDS if outside else FAILS if inside else UNDECIDED), max(lo - tol, -tol - hi)


@dataclass
class ClaimResult:
    """A claim's verdict on one machine, and every comparison it made."""

    claim: Claim
    machine: str
    verdict: str
    #: The confidence of each comparison's interval (Bonferroni over the k comparisons).
    test_confidence: float
    #: One row per comparison (``COMPARISON_COLUMNS``).
    comparisons: pd.DataFrame

    def weakest(self) -> Any:
        """The comparison nearest to undoing the verdict: a contradicting one, else an
        undecided one, else the one that holds with the least margin."""
        order = {FAILS: 0, UNDECIDED: 1, HOLDS: 2}
        c = self.comparisons.assign(rank=self.comparisons.status.map(order))
        return c.sort_values(["rank", "margin"], na_position="first").iloc[0]

    def counts(self) -> dict[str, int]:
        return {s: int((self.comparisons.status == s).sum()) for s in (HOLDS, FAILS, UNDECIDED)}


#: Columns of one comparison (``claim_comparisons.csv``).
COMPARISON_COLUMNS = ["machine", "claim", "kind", "x", "workload", "a", "b", "a_mean",
                      "b_mean", "diff_pct", "ci_low", "ci_high", "tolerance_pct", "status",
                      "margin", "replications", "test_confidence"]  # fmt: skip


def difference(a: Any, b: Any, metric: str) -> Any:
    """Per replication, a's difference from b in % (the ``gain`` rules of stats.py, negated):
    for times relative to b in the same replication; for other metrics (shares, counts, which
    may be 0) relative to b's mean; when b is 0 in every replication, absolute (× 100: the
    percentage points of a share)."""
    if metric.endswith("_ms") and (b > 0).all():
        return (a - b) / b * 100
    base = b.mean()
    return (a - b) / (base if base else 1.0) * 100


def evaluate(claim: Claim, runs: pd.DataFrame, machine: str, metric: str,
             confidence: float) -> ClaimResult:  # fmt: skip
    """``claim`` on ``machine``: per comparison, the paired relative differences of
    ``metric`` (one per replication both policies ran) and their t interval at the
    Bonferroni-adjusted confidence; then the verdict."""
    import pandas as pd

    from numasim import stats

    k = claim.comparisons
    test_conf = 1 - (1 - confidence) / k
    cell = runs[runs.machine == machine]
    rows = []
    for workload, x in zip(claim.workloads, claim.xs, strict=True):
        w = cell[cell.workload == workload]
        by = {p: g.set_index("replication")[metric] for p, g in w.groupby("policy", sort=False)}
        for a, b in claim.pairs:
            sa, sb = by.get(a, pd.Series(dtype=float)), by.get(b, pd.Series(dtype=float))
            common = sa.index.intersection(sb.index)
            va, vb = sa.loc[common].to_numpy(float), sb.loc[common].to_numpy(float)
            if len(common) == 0:
                mean = half = math.nan
            else:
                mean, _, half = stats.t_interval(difference(va, vb, metric), test_conf)
            lo, hi = mean - half, mean + half
            state, margin = status(claim.kind, lo, hi, claim.tolerance_pct)
            rows.append([machine, claim.index, claim.kind, x, workload, a, b,
                         va.mean() if len(va) else math.nan,
                         vb.mean() if len(vb) else math.nan, mean, lo, hi, claim.tolerance_pct,
                         state, margin, len(common), test_conf])  # fmt: skip
    comps = pd.DataFrame(rows, columns=COMPARISON_COLUMNS)
    states = set(comps.status)
    verdict = FAILS if FAILS in states else HOLDS if states == {HOLDS} else UNDECIDED
    return ClaimResult(claim, machine, verdict, test_conf, comps)


def evaluate_all(exp: Experiment, runs: pd.DataFrame, confidence: float) -> list[ClaimResult]:
    """Every claim of ``exp`` on every machine, on the experiment's metric."""
    return [evaluate(c, runs, m, c.metric or exp.metric, confidence)
            for m in exp.machines for c in exp.claims]  # fmt: skip


def _signed(x: float) -> str:
    from numasim.report import fmt

    text = fmt(x, 1)
    return text if text.startswith(("-", "—")) or float(text) == 0 else f"+{text}"


def comparison_text(row: Any, x_label: str) -> str:
    """``hs-con vs hb-con at load level 1.25: −3.1 % [−4.0, −2.2]``."""
    return (f"{row.a} vs {row.b} at {x_label} {row.x:g}: {_signed(row.diff_pct)} % "
            f"[{_signed(row.ci_low)}, {_signed(row.ci_high)}]")  # fmt: skip


def verdict_text(r: ClaimResult, x_label: str) -> str:
    """The verdict with its count of comparisons and the weakest one."""
    n = r.counts()
    k = len(r.comparisons)
    w = comparison_text(r.weakest(), x_label)
    conf = f"each at {r.test_confidence * 100:.4g} %"
    if r.verdict == HOLDS:
        return f"{HOLDS}: all {k} comparisons ({conf}); the narrowest: {w}"
    if r.verdict == FAILS:
        return f"{FAILS}: {n[FAILS]} of {k} comparisons contradict it ({conf}), e.g. {w}"
    return (f"{UNDECIDED}: {n[UNDECIDED]} of {k} comparisons undecided, none contradicts it "
            f"({conf}), e.g. {w}")  # fmt: skip
