"""Experiments along an x axis and the paper's claims (docs/policies/home-cluster.md): the
claim evaluator on hand-made numbers, the schema's refusals, and the comparison report through
the CLI."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from numasim import claims, comparison
from numasim import experiment as ex

A, B, C = "linux26@two-level", "linux26@flat", "thread-aware@two-level"

#: A stand-in for the home-cluster experiments (its policies and app profile exist today).
TINY_X = """
name = "tiny-x"
title = "three balancers vs arrival rate"
machines = ["koita-64"]
baseline = "linux26@two-level"
policies = ["linux26@flat", "thread-aware@two-level"]
metric = "mean_app_tat_ms"
replications = {reps}
seed = 5
x_label = "arrival rate"

[[workload]]
name = "slow"
x = 20
spec = "app=swaptions:2,arrival=poisson:20"

[[workload]]
name = "fast"
x = 80
spec = "app=swaptions:2,arrival=poisson:80"

[sweep]
n = [4]

[[claim]]
source = "Fig. 1"
quote = "Flat is the fastest."
kind = "smallest"
policy = "linux26@flat"

[[claim]]
source = "Fig. 1"
quote = "The selection policy hardly matters."
kind = "close"
pairs = [["thread-aware@two-level", "linux26@two-level"]]
tolerance_pct = 5
x_max = 20
"""


def tiny_x(tmp_path, reps=3, text=TINY_X):
    path = tmp_path / "tiny-x.toml"
    path.write_text(text.format(reps=reps))
    return path


# --- the evaluator on hand-made numbers -----------------------------------------------------


@pytest.fixture(scope="module")
def exp(tmp_path_factory):
    return ex.load(tiny_x(tmp_path_factory.mktemp("x")))


def runs_of(values: dict[tuple[str, str], list[float]]) -> pd.DataFrame:
    """A runs table: ``(workload, policy) → the metric by replication``."""
    rows = [{"machine": "koita-64", "workload": w, "n": 4, "policy": p, "replication": r,
             "mean_app_tat_ms": v}
            for (w, p), vs in values.items() for r, v in enumerate(vs)]  # fmt: skip
    return pd.DataFrame(rows)


def claim(exp, **entry) -> claims.Claim:
    text = {"source": "t", "quote": "q", **entry}
    return claims.check("t.toml", 0, ex._ClaimEntry.model_validate(text), exp)


#: Baseline values that vary widely between replications (as workloads do) — a policy 2 %
#: below them in every replication is clearly lower only when the replications are paired.
BASE = [1000.0, 2500.0, 1800.0, 3100.0, 1400.0, 2200.0]


def verdict(exp, c, values):
    return claims.evaluate(c, runs_of(values), "koita-64", "mean_app_tat_ms", 0.95)


def test_less_holds_on_paired_replications_whose_unpaired_intervals_overlap(exp):
    lower = [b * 0.98 for b in BASE]
    c = claim(exp, kind="less", pairs=[[B, A]])
    r = verdict(exp, c, {(w, p): v for w in ("slow", "fast") for p, v in ((A, BASE), (B, lower))})
    assert r.verdict == claims.HOLDS
    assert list(r.comparisons.diff_pct.round(6)) == [-2.0, -2.0]
    # Unpaired, the two means' intervals overlap almost entirely.
    assert abs(np.mean(BASE) - np.mean(lower)) < 0.1 * np.std(BASE)


def test_less_does_not_hold_when_one_x_contradicts_it(exp):
    higher = [b * 1.05 for b in BASE]
    lower = [b * 0.95 for b in BASE]
    c = claim(exp, kind="less", pairs=[[B, A]])
    r = verdict(exp, c, {("slow", A): BASE, ("slow", B): lower,
                         ("fast", A): BASE, ("fast", B): higher})  # fmt: skip
    assert r.verdict == claims.FAILS
    assert r.counts() == {claims.HOLDS: 1, claims.FAILS: 1, claims.UNDECIDED: 0}
    assert r.weakest().workload == "fast"
    assert "1 of 2 comparisons contradict it" in claims.verdict_text(r, "rate")


def test_noise_around_zero_is_not_significant(exp):
    noisy = [b * f for b, f in zip(BASE, [0.97, 1.02, 1.01, 0.98, 1.03, 0.99], strict=True)]
    c = claim(exp, kind="less", pairs=[[B, A]])
    r = verdict(exp, c, {(w, p): v for w in ("slow", "fast") for p, v in ((A, BASE), (B, noisy))})
    assert r.verdict == claims.UNDECIDED
    # Identical schedules (a difference of exactly 0) decide nothing either.
    same = verdict(exp, c, {(w, p): BASE for w in ("slow", "fast") for p in (A, B)})
    assert same.verdict == claims.UNDECIDED


def test_close_and_apart_are_equivalence_tests_against_the_tolerance(exp):
    near = [b * f for b, f in zip(BASE, [1.01, 1.00, 1.02, 1.01, 1.00, 1.01], strict=True)]
    far = [b * 1.2 for b in BASE]
    edge = [b * f for b, f in zip(BASE, [1.01, 1.09, 1.02, 1.08, 1.00, 1.06], strict=True)]
    for kind, values, expected in [
        ("close", near, claims.HOLDS), ("close", far, claims.FAILS),
        ("close", edge, claims.UNDECIDED), ("apart", far, claims.HOLDS),
        ("apart", near, claims.FAILS), ("apart", edge, claims.UNDECIDED),
    ]:  # fmt: skip
        c = claim(exp, kind=kind, pairs=[[B, A]], tolerance_pct=5)
        r = verdict(exp, c, {(w, p): v for w in ("slow", "fast")
                             for p, v in ((A, BASE), (B, values))})  # fmt: skip
        assert r.verdict == expected, (kind, expected)


def test_smallest_is_less_against_every_other_policy(exp):
    c = claim(exp, kind="smallest", policy=B)
    assert c.pairs == ((B, A), (B, C))
    lower = [b * 0.9 for b in BASE]
    values = {(w, p): v for w in ("slow", "fast") for p, v in ((A, BASE), (B, lower), (C, BASE))}
    assert verdict(exp, c, values).verdict == claims.HOLDS
    values[("fast", C)] = [b * 0.8 for b in BASE]  # C beats B at one x
    assert verdict(exp, c, values).verdict == claims.FAILS


def test_the_comparisons_share_the_confidence_bonferroni(exp):
    # A difference whose 95 % interval excludes 0 but whose 97.5 % interval does not.
    d = np.array([-1.0, -0.2, -0.9, -0.3, -1.2, 0.1])
    mean, sd = d.mean(), d.std(ddof=1)
    from scipy import stats as sps

    t95, t975 = (sps.t.ppf(1 - a / 2, len(d) - 1) * sd / np.sqrt(len(d)) for a in (0.05, 0.025))
    assert mean + t95 < 0 < mean + t975
    policy = [b * (1 + x / 100) for b, x in zip(BASE, d, strict=True)]
    one = claim(exp, kind="less", pairs=[[B, A]], x_max=20)
    two = claim(exp, kind="less", pairs=[[B, A]])
    values = {(w, p): v for w in ("slow", "fast") for p, v in ((A, BASE), (B, policy))}
    assert verdict(exp, one, values).verdict == claims.HOLDS  # 1 comparison: at 95 %
    r = verdict(exp, two, values)  # 2 comparisons: each at 97.5 %
    assert r.test_confidence == pytest.approx(0.975)
    assert r.verdict == claims.UNDECIDED


def test_a_claim_can_compare_another_metric(exp):
    c = claim(exp, kind="less", pairs=[[B, A]], metric="app_remote_share")
    assert c.statement("load").endswith("(on the remote-access share of the applications)")
    runs = runs_of({(w, p): BASE for w in ("slow", "fast") for p in (A, B)})
    runs["app_remote_share"] = [0.3 if p == A else 0.1 for p in runs.policy]
    r = claims.evaluate(c, runs, "koita-64", c.metric, 0.95)
    assert r.verdict == claims.HOLDS  # lower on the share, equal on the time
    assert r.comparisons.diff_pct.iloc[0] == pytest.approx(-200 / 3)  # relative to b's mean
    # b never accesses remote memory: the difference is absolute, and a is clearly higher.
    runs["app_remote_share"] = [
        0.0 if p == A else 0.1 + 0.01 * r
        for p, r in zip(runs.policy, runs.replication, strict=True)
    ]
    r = claims.evaluate(c, runs, "koita-64", c.metric, 0.95)
    assert r.verdict == claims.FAILS
    assert r.comparisons.diff_pct.iloc[0] == pytest.approx(12.5)  # points: 0.125 × 100


def test_one_replication_decides_nothing(exp):
    c = claim(exp, kind="less", pairs=[[B, A]])
    r = verdict(exp, c, {(w, p): v for w in ("slow", "fast")
                         for p, v in ((A, [100.0]), (B, [50.0]))})  # fmt: skip
    assert r.verdict == claims.UNDECIDED


def test_the_statement_says_what_is_checked(exp):
    c = claim(exp, kind="less", policies=[B, C], versus=[A], x_min=50)
    assert c.statement("load") == (f"less: each of {B}, {C} below each of {A} at load ≥ 50")
    assert c.workloads == ("fast",)
    c = claim(exp, kind="close", among=[A, B, C], tolerance_pct=5, x_max=20)
    assert c.pairs == ((A, B), (A, C), (B, C))
    assert c.statement("load") == f"close: every pair of {A}, {B}, {C} within 5 % at load ≤ 20"


# --- refusals ------------------------------------------------------------------------------

CLAIM0 = 'kind = "smallest"\npolicy = "linux26@flat"'


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (("x = 20", 'x = "low"'), "workload.0.x: should be a valid number (got 'low')"),
        (("x = 20", "x = nan"), "workload.0.x: should be a finite number (got nan)"),
        (("x = 80\n", ""), "workload.1.x: missing; with x_label every workload has an x"),
        (("x = 80", "x = 20"), "workload: x = 20 given more than once"),
        (('x_label = "arrival rate"\n', ""),
         'workload.0.x: give x_label too (what the x values are, e.g. "load level")'),
        (("n = [4]", "n = [4, 8]"), "sweep.n: an experiment with an x axis runs one n, not 2"),
        (('x_label = "arrival rate"', 'x_label = "arrival rate"\nx_scale = "cubic"'),
         "x_scale: must be one of linear, log"),
        (('x_label = "arrival rate"', 'x_scale = "log"'),
         "x_scale: there is no x axis (give x_label and an x to every workload)"),
        (('kind = "smallest"', 'kind = "fastest"'),
         "claim.0.kind: must be one of less, smallest, close, apart"),
        (('policy = "linux26@flat"', 'policy = "linux26@flatter"'),
         "claim.0.policy.0: 'linux26@flatter' is not a policy of the experiment "
         "(linux26@two-level, linux26@flat, thread-aware@two-level)"),
        ((CLAIM0, 'kind = "less"\npolicies = ["linux26@flat"]\nversus = ["cfs"]'),
         "claim.0.versus.0: 'cfs' is not a policy of the experiment (linux26@two-level, "
         "linux26@flat, thread-aware@two-level)"),
        ((CLAIM0, 'kind = "less"\namong = ["linux26@flat", "linux26@two-level"]'),
         "claim.0: kind 'less' names its pairs by pairs or policies with versus (got among)"),
        ((CLAIM0, 'kind = "less"\npairs = [["linux26@flat", "linux26@flat"]]'),
         "claim.0.pairs: compares linux26@flat with itself"),
        ((CLAIM0, 'kind = "less"\npairs = [["linux26@flat"]]'),
         "claim.0.pairs.0: List should have at least 2 items after validation, not 1"),
        ((CLAIM0, 'kind = "less"\npolicies = ["linux26@flat"]'),
         "claim.0.versus: goes with policies (every policy of policies against every one of "
         "versus)"),
        ((CLAIM0, f"{CLAIM0}\ntolerance_pct = 5"),
         "claim.0.tolerance_pct: only close and apart have a tolerance"),
        ("tolerance_pct = 5\n",
         "claim.1: missing key 'tolerance_pct' (what 'close' counts as a small difference, in "
         "% of the second policy)"),
        (("tolerance_pct = 5", "tolerance_pct = -5"),
         "claim.1.tolerance_pct: should be greater than 0 (got -5)"),
        (("x_max = 20", "x_max = 10"),
         "claim.1.x_max: no workload's x is in the range (the x values: 20, 80)"),
        (("x_max = 20", "x_min = 90"),
         "claim.1.x_min: no workload's x is in the range (the x values: 20, 80)"),
        (("x_max = 20", "x_max = 20\nx_min = 30"), "claim.1: x_min 30 is above x_max 20"),
        (("x_max = 20", 'x_max = 20\ncolour = "red"'),
         "unknown key 'claim.1.colour'; allowed: among, kind, metric, pairs, policies, policy, "
         "quote, source, tolerance_pct, versus, x_max, x_min"),
        (('quote = "Flat is the fastest."\n', ""), "missing key 'claim.0.quote'"),
        (("seed = 5", 'seed = 5\nprofile = "kernel"'), "profile: must be one of kernel26, paper"),
        (("x_max = 20", 'x_max = 20\nmetric = "speed"'),
         "claim.1.metric: must be one of mean_tat_ms, median_tat_ms, p95_tat_ms, makespan_ms, "
         "far_from_origin, far_from_origin_pct, mean_remote_factor, mean_app_tat_ms, "
         "app_remote_share, cross_node_migrations_per_s, remote_share"),
        (('spec = "app=swaptions:2,arrival=poisson:80"', 'spec = "kind=cpu,exec=50"'),
         "metric: mean_app_tat_ms is a metric of applications; workload 'fast' has none (app= "
         "specs and mixes have them)"),
    ],
)  # fmt: skip
def test_bad_axes_and_claims_exit_2_with_one_line(run, tmp_path, change, expected):
    path = tiny_x(tmp_path)
    text = path.read_text()
    if isinstance(change, str):  # a line removed
        assert change in text
        text = text.replace(change, "", 1)
    else:
        assert change[0] in text
        text = text.replace(*change, 1)
    path.write_text(text)
    r = run("reproduce", path, "--out", tmp_path / "o")
    assert (r.code, r.out) == (2, "")
    assert r.err == f"numasim: error: {path}: {expected.rstrip()}\n"


def test_a_log_axis_needs_positive_x(run, tmp_path):
    text = TINY_X.replace("x = 20", "x = 0").replace(
        'x_label = "arrival rate"', 'x_label = "arrival rate"\nx_scale = "log"'
    )
    path = tiny_x(tmp_path, text=text)
    r = run("reproduce", path, "--out", tmp_path / "o")
    assert (r.code, r.err) == (2, f"numasim: error: {path}: workload.0.x: 0 has no place on a "
                                  'log axis (x_scale = "log")\n')  # fmt: skip


def test_claims_need_an_x_axis(run, tmp_path):
    text = TINY_X.replace('x_label = "arrival rate"\n', "").replace("x = 20\n", "", 1)
    path = tiny_x(tmp_path, text=text.replace("x = 80\n", ""))
    r = run("reproduce", path, "--out", tmp_path / "o")
    assert (r.code, r.err) == (2, f"numasim: error: {path}: claim.0: claims are checked along an "
                                  "x axis: give x_label and an x to every workload\n")  # fmt: skip


# --- the report, end to end ----------------------------------------------------------------


@pytest.fixture(scope="module")
def reported(tmp_path_factory):
    """``reproduce`` of the stand-in with --report (the ablation runs too), once."""
    from numasim.cli import main

    d = tmp_path_factory.mktemp("reported")
    path = tiny_x(d)
    out, page = d / "out", d / "page.html"
    assert main(["reproduce", str(path), "--out", str(out), "--jobs", "2",
                 "--report", str(page)]) == 0  # fmt: skip
    return path, out, page


def test_the_table_has_a_row_per_x_and_a_column_per_policy(reported, run):
    path, out, _ = reported
    r = run("reproduce", path, "--out", out)
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    head = lines.index("koita-64 · mean response time (ms)")
    assert lines[head + 1].split() == ["arrival", "rate", A, B, C]
    assert [line.split()[0] for line in lines[head + 2 : head + 4]] == ["20", "80"]
    assert all(line.count("±") == 3 for line in lines[head + 2 : head + 4])
    share = lines.index("koita-64 · remote-access share (%)")
    assert [line.split()[0] for line in lines[share + 2 : share + 4]] == ["20", "80"]
    assert '[1] Fig. 1: "Flat is the fastest."' in r.out
    assert f"check: smallest: {B} below every other policy at every arrival rate" in r.out
    assert "check: close:" in r.out and "within 5 % at arrival rate ≤ 20" in r.out
    # The baseline-vs-policy table and per-application tables are not printed.
    assert "gain %" not in r.out and "per application" not in r.out


def test_the_figures_files_and_json_agree_with_the_runs(reported, run):
    path, out, _ = reported
    runs = pd.read_csv(out / "runs.csv")
    apps = pd.read_csv(out / "apps.csv")
    # A run's response time is the mean of its applications' turnarounds.
    mean = apps.groupby(["workload", "policy", "replication"]).turnaround_ms.mean()
    got = runs.set_index(["workload", "policy", "replication"]).mean_app_tat_ms
    pd.testing.assert_series_equal(got.sort_index(), mean.sort_index(), check_names=False)
    table = pd.read_csv(out / "comparison.csv")
    assert len(table) == 2 * 3 and set(table.x) == {20, 80}
    verdicts = pd.read_csv(out / "claims.csv")
    assert list(verdicts.claim) == [1, 2]
    assert set(verdicts.verdict) <= {claims.HOLDS, claims.FAILS, claims.UNDECIDED}
    # The verdicts are the evaluator's on the stored runs.
    exp = ex.load(path)
    again = claims.evaluate_all(exp, runs, 0.95)
    assert [r.verdict for r in again] == list(verdicts.verdict)
    comps = pd.read_csv(out / "claim_comparisons.csv")
    assert len(comps) == 2 * 2 + 1  # smallest: 2 others × 2 x; close: 1 pair × 1 x
    for ext in ("png", "svg"):
        assert (out / "figures" / f"tiny-x-koita-64.{ext}").stat().st_size > 1000
    assert not list((out / "figures").glob("tiny-x-koita-64-*"))  # no per-workload figures
    data = json.loads(run("reproduce", path, "--out", out, "--json").out)
    assert data["x_label"] == "arrival rate"
    assert [c["verdict"] for c in data["claims"]] == list(verdicts.verdict)
    assert {(c["x"], c["policy"]) for c in data["comparison"]} == {
        (x, p) for x in (20, 80) for p in (A, B, C)}  # fmt: skip


def test_the_page_states_each_claim_with_its_verdict(reported):
    _, _, page = reported
    text = page.read_text()
    assert "<h2>The paper's claims</h2>" in text
    assert "Flat is the fastest." in text and "The selection policy hardly matters." in text
    assert text.count("data:image/png;base64,") == 1
    assert "<th>arrival rate</th>" in text  # the workloads' x in the setup
    assert "claims&#x27; verdicts" in text  # the ablation: verdicts under each flip
    assert "http" not in text.replace("http-equiv", "")


def test_one_replication_prints_dashes_with_their_footnote(run, tmp_path):
    r = run("reproduce", tiny_x(tmp_path, reps=1), "--out", tmp_path / "o", "--jobs", "1")
    assert r.code == 0, r.err
    assert "± —" in r.out and "fewer than 2 replications, no interval" in r.out
    assert "nan" not in r.out
    assert r.out.count(f"→ {claims.UNDECIDED}") == 2  # no interval decides nothing


# --- the shipped reproductions, small ------------------------------------------------------

HOME_CLUSTER = ["home-cluster-load", "home-cluster-threads", "home-cluster-dynamic"]


@pytest.mark.parametrize("name", HOME_CLUSTER)
def test_each_home_cluster_reproduction_runs_small(run, tmp_path, name):
    """The shipped file at 2 replications of 8 processes (tests/test_fingerprints.py runs it at
    its own n): every x is a row, every policy a column, every claim gets a verdict."""
    text = (ex.experiments_dir() / f"{name}.toml").read_text()
    assert "n = [200]" in text
    path = tmp_path / f"{name}.toml"
    path.write_text(text.replace("n = [200]", "n = [8]"))
    exp = ex.load(path)
    assert exp.has_x and exp.claims and exp.assumptions["memory"] == "first-run"
    r = run("reproduce", path, "--replications", "2", "--out", tmp_path / "o", "--jobs", "2")
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    head = lines.index("koita-64 · mean response time (ms)")
    labels = [v.label for v in exp.variants] + [v.label for v in exp.extra]  # extras by default
    assert lines[head + 1].split()[-len(labels) :] == labels
    rows = lines[head + 2 : head + 2 + len(exp.workloads)]
    assert [float(line.split()[0]) for line in rows] == sorted(w.x for w in exp.workloads)
    assert all(line.count("±") == len(labels) for line in rows)
    verdicts = pd.read_csv(tmp_path / "o" / "claims.csv")
    assert len(verdicts) == len(exp.claims)
    assert set(verdicts.verdict) <= {claims.HOLDS, claims.FAILS, claims.UNDECIDED}
    assert (tmp_path / "o" / "figures" / f"{name}-koita-64.png").is_file()
    # Two replications far apart (10 and 400 ms): intervals reaching below 0 stop there,
    # and the axes have plain ticks (no offset such as "+2e2").
    runs = pd.read_csv(tmp_path / "o" / "runs.csv")
    runs[exp.metric] = [10.0 if r % 2 else 400.0 for r in runs.replication]
    fig = comparison.figure(exp, comparison.compute(exp, runs, 0.95), "koita-64")
    fig.canvas.draw()
    ax1, ax2 = fig.axes[:2]
    lows = [seg[:, 1].min() for c in ax1.containers for seg in c.lines[2][0].get_segments()]
    assert min(lows) == 0
    for ax in (ax1, ax2):
        assert ax.yaxis.get_offset_text().get_text() == ""
    import matplotlib.pyplot as plt

    plt.close(fig)
    if exp.x_scale == "log":  # threads 1 … 16 double: drawn on a log axis
        fig = comparison.figure(exp, comparison.compute(exp, pd.read_csv(tmp_path / "o" /
                                                                         "runs.csv"), 0.95),
                                "koita-64")  # fmt: skip
        assert fig.axes[0].get_xscale() == "log"
        import matplotlib.pyplot as plt

        plt.close(fig)
