"""Experiments: files, statistics, resume after a kill, Dask = local, bad files."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pandas as pd
import pytest
from numasim import experiment as ex
from numasim import stats

TINY = """
name = "tiny"
title = "two-level vs flat and node-only on a 4-cell Superdome"
machines = ["hp-superdome-4"]
baseline = "linux26@two-level"
policies = ["linux26@flat", "linux26@node-only"]
replications = {reps}
confidence = 0.95
seed = 7

[[workload]]
name = "make"
spec = "kind=cpu,exec=10-100,arrival=uniform:300"

[sweep]
n = [60, 120]
"""


def tiny(tmp_path, reps=6, text=TINY):
    path = tmp_path / "tiny.toml"
    path.write_text(text.format(reps=reps))
    return path


def test_list_experiments_names_the_reproductions(run):
    r = run("list", "experiments")
    assert r.code == 0
    for name in ["multilevel-altix", "multilevel-superdome", "domains-superdome-4",
                 "modern-baseline", "sched-ext-numa"]:  # fmt: skip
        assert f"\n{name} " in "\n" + r.out


def test_reproduce_json_shape_table_and_files(run, tmp_path):
    out = tmp_path / "out"
    r = run("reproduce", tiny(tmp_path), "--out", out, "--jobs", "1", "--json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    assert list(data) == ["experiment", "metric", "rows"]
    assert data["experiment"] == "tiny"
    assert data["metric"] == "mean_tat_ms"
    assert len(data["rows"]) == 4  # 2 n × 2 policies
    row = data["rows"][0]
    assert list(row) == ["machine", "workload", "n", "baseline", "policy", "unit",
                         "baseline_mean", "policy_mean", "gain_pct", "gain_ci_low", "gain_ci_high",
                         "confidence", "replications"]  # fmt: skip
    assert row["unit"] == "ms" and row["confidence"] == 0.95
    assert row["gain_ci_low"] < row["gain_pct"] < row["gain_ci_high"]
    assert row["replications"] == 6
    for name in ["runs", "summary", "gains"]:
        csv = pd.read_csv(out / f"{name}.csv")
        pq = pd.read_parquet(out / f"{name}.parquet")
        assert len(csv) == len(pq) > 0
    assert len(pd.read_csv(out / "runs.csv")) == 2 * 6 * 3
    for ext in ["png", "svg"]:
        assert (out / "figures" / f"tiny-hp-superdome-4-make.{ext}").stat().st_size > 1000
    table = run("reproduce", tiny(tmp_path), "--out", out)
    assert table.code == 0
    assert "linux26@two-level TAT" in table.out and "gain %" in table.out
    assert "figures: " in table.out


def test_extra_variants_run_by_default_and_no_extra_skips_them(run, tmp_path):
    text = TINY.replace('policies = ["linux26@flat", "linux26@node-only"]',
                        'policies = ["linux26@flat"]\nextra = ["linux@linux"]')  # fmt: skip
    path = tiny(tmp_path, reps=2, text=text)
    both = {"linux26@flat", "linux@linux"}
    plain = run("reproduce", path, "--out", tmp_path / "a", "--jobs", "1", "--json")
    assert plain.code == 0, plain.err
    assert {r["policy"] for r in json.loads(plain.out)["rows"]} == both
    extra = run("reproduce", path, "--out", tmp_path / "b", "--jobs", "1", "--json", "--extra")
    assert extra.code == 0, extra.err
    assert {r["policy"] for r in json.loads(extra.out)["rows"]} == both
    skip = run("reproduce", path, "--out", tmp_path / "a", "--jobs", "1", "--json", "--no-extra")
    assert skip.code == 0, skip.err
    assert {r["policy"] for r in json.loads(skip.out)["rows"]} == {"linux26@flat"}
    # A file without extra variants: --extra would do nothing, so it is refused.
    none = run("reproduce", tiny(tmp_path, reps=2), "--out", tmp_path / "c", "--extra")
    assert none.code == 2 and none.err.count("\n") == 1 and "has no extra variants" in none.err
    ok = run("reproduce", tiny(tmp_path, reps=2), "--out", tmp_path / "d", "--json")
    assert ok.code == 0, ok.err


def test_every_shipped_reproduction_offers_today_s_linux_as_extra_variants():
    for exp in ex.list_experiments():
        if exp.name in ("modern-baseline", "sched-ext-numa"):
            # No paper: today's Linux is among what they compare, NUMA balancing off and on.
            labels = [v.label for v in exp.variants]
            assert "linux@linux" in labels and "linux:numa_balancing=off@linux" in labels
            assert exp.extra == [], exp.name
            continue
        if exp.baseline.label == "linux@linux":
            # Today's Linux is its baseline (thread-aware-parsec): the extras are the 2.6.18
            # forms, the other file's baseline and policy.
            assert [v.label for v in exp.extra] == [
                "linux26@two-level",
                "thread-aware@two-level",
            ], exp.name
            continue
        assert [v.label for v in exp.extra] == ["linux:numa_balancing=off@linux", "linux@linux"], \
            exp.name  # fmt: skip


def test_common_random_numbers_every_policy_sees_the_same_workload(tmp_path):
    exp = ex.load(tiny(tmp_path))
    rows = ex.execute(exp, tmp_path / "o", jobs=1).rows
    seeds = {}
    for r in rows:
        seeds.setdefault((r["n"], r["replication"]), set()).add(r["seed"])
    assert all(len(s) == 1 for s in seeds.values())
    assert len({next(iter(s)) for s in seeds.values()}) == len(seeds)


def test_interval_widths_shrink_as_replications_grow(tmp_path):
    out = tmp_path / "o"
    exp = ex.load(tiny(tmp_path, reps=4))
    small = stats.summarize(pd.DataFrame(ex.execute(exp, out, jobs=2).rows), 0.95)
    exp.replications = 24  # resumes: replications 0-3 are reused
    grown = ex.execute(exp, out, jobs=2)
    assert (grown.computed, grown.reused) == (2 * 20 * 3, 2 * 4 * 3)
    big = stats.summarize(pd.DataFrame(grown.rows), 0.95)
    assert (big["replications"] == 24).all()
    assert (big["half_width"].to_numpy() < small["half_width"].to_numpy()).all()
    exp.replications = 4  # the stored 24 are kept, the first 4 returned
    again = pd.DataFrame(ex.execute(exp, out, jobs=2).rows)
    assert sorted(again["replication"].unique()) == [0, 1, 2, 3]


def test_paired_gain_interval_is_narrower_than_unpaired(tmp_path):
    exp = ex.load(tiny(tmp_path, reps=12))
    runs = pd.DataFrame(ex.execute(exp, tmp_path / "o", jobs=2).rows)
    g = stats.gains(runs, exp, 0.95)
    for row in g.itertuples():
        cell = runs[runs.n == row.n]
        b = cell[cell.policy == exp.baseline.label].sort_values("replication")["mean_tat_ms"]
        p = cell[cell.policy == row.policy].sort_values("replication")["mean_tat_ms"]
        paired = row.gain_ci_high - row.gain_pct
        assert paired < stats.unpaired_gain_half_width(b, p, 0.95), (row.n, row.policy)


def _runs(out):
    return pd.read_csv(out / "runs.csv")


def stored_runs(out) -> int:
    """Runs in the store of ``out`` (0 before it exists); read-only, so it never blocks."""
    path = out / "results.sqlite"
    if not path.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            return db.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    except sqlite3.OperationalError:  # created but not yet initialised
        return 0


def test_kill_9_mid_sweep_then_resume_equals_an_uninterrupted_sweep(run, tmp_path):
    cpu_spec = 'spec = "kind=cpu,exec=10-100,arrival=uniform:300"'
    io_spec = 'spec = "kind=io,exec=100-300,wait=50,burst=5,arrival=uniform:300"'
    text = TINY.replace(cpu_spec, io_spec)
    path = tiny(tmp_path, reps=16, text=text)
    killed = tmp_path / "killed"
    proc = subprocess.Popen(
        [sys.executable, "-m", "numasim", "reproduce", str(path), "--out", str(killed),
         "--jobs", "2"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if stored_runs(killed) >= 2 * 3 * 2:  # at least two batches of 2 replications
            break
        time.sleep(0.01)
    assert proc.poll() is None, "the sweep must still be running when it is killed"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert stored_runs(killed) < 2 * 16 * 3, "killed part-way through the sweep"
    assert run("reproduce", path, "--out", killed, "--jobs", "2").code == 0
    full = tmp_path / "full"
    assert run("reproduce", path, "--out", full, "--jobs", "1").code == 0
    pd.testing.assert_frame_equal(_runs(killed), _runs(full))


def test_dask_local_cluster_gives_the_local_results(run, tmp_path, local_cluster):
    path = tiny(tmp_path, reps=4)
    local = tmp_path / "local"
    assert run("reproduce", path, "--out", local, "--jobs", "2").code == 0
    with local_cluster() as cluster:
        dask = tmp_path / "dask"
        r = run("reproduce", path, "--out", dask, "--cluster", cluster.scheduler_address)
        assert r.code == 0, r.err
    pd.testing.assert_frame_equal(_runs(dask), _runs(local))


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            ("seed = 7", "seed = 7\ncolour = 1"),
            "unknown key 'colour'; allowed: assumptions, baseline, claim, confidence, extra, "
            "machines, metric, metrics, name, notes, policies, profile, reference, replications, "
            "seed, source, sweep, title, workload, x_label, x_scale",
        ),
        (
            ('"linux26@flat"', '"cfs@flat"'),
            "unknown policy 'cfs'; choose one of linux26, linux, origin-aware, capability-aware, "
            "thread-aware, memory-aware, node-push, scx-rusty, scx-lavd, fr-dist, fh-dist, "
            "fp-dist, hb-dist, hs-dist, fr-con, fh-con, fp-con, hb-con, hs-con, equi, dyn, lim",
        ),
        (
            ('"linux26@flat"', '"origin-aware:v3=on@flat"'),
            "unknown origin-aware option 'v3'; choose from v1, v2, min-load, nearest, si, si-lb",
        ),
        (
            ('"linux26@flat"', '"linux26:v1=off@flat"'),
            "policy 'linux26' takes no options",
        ),
        (
            ("seed = 7", "seed = 7\nmetric = 'speed'"),
            "metric: must be one of mean_tat_ms, median_tat_ms, p95_tat_ms, makespan_ms, "
            "far_from_origin, far_from_origin_pct, mean_remote_factor, mean_app_tat_ms, "
            "app_remote_share, cross_node_migrations_per_s, remote_share",
        ),
        (
            ('"linux26@flat"', '"linux26@three-level"'),
            "unknown domain builder 'three-level'; choose one of flat, node-only, two-level, "
            "multilevel, linux",
        ),
        (("n = [60, 120]", "n = []"), "sweep.n: is empty"),
        (("n = [60, 120]", "n = [20, -5]"), "sweep.n.1: should be greater than 0 (got -5)"),
        (("n = [60, 120]", 'n = "20"'), "sweep.n: should be a valid list (got '20')"),
        (("n = [60, 120]", "n = [60, 120, 60]"), "sweep.n: 60 named more than once"),
        (("n = [60, 120]", "n = [60]\nsize = 3"), "unknown key 'sweep.size'; allowed: n"),
        (
            ("replications = 6", "replications = 0"),
            "replications: should be greater than or equal to 1 (got 0)",
        ),
        (
            ("replications = 6", "replications = -3"),
            "replications: should be greater than or equal to 1 (got -3)",
        ),
        (
            ("replications = 6", "replications = 2.5"),
            "replications: should be a valid integer (got 2.5)",
        ),
        (("seed = 7", "seed = -1"), "seed: should be greater than or equal to 0 (got -1)"),
        (
            ('name = "make"', 'name = "make"\ncolour = 2'),
            "unknown key 'workload.0.colour'; allowed: mix, n, name, spec, x",
        ),
        (('name = "make"', "name = 5"), "workload.0.name: should be a valid string (got 5)"),
        (
            ('name = "make"', 'name = "make"\nspec = "kind=io"\n[[workload]]\nname = "make"'),
            "workload: make named more than once",
        ),
        (
            ('machines = ["hp-superdome-4"]', 'machines = ["hp-superdome-4", "hp-superdome-4"]'),
            "machines: hp-superdome-4 named more than once",
        ),
        (("replications = 6", ""), "missing key 'replications'"),
        (
            ('machines = ["hp-superdome-4"]', 'machines = ["nowhere-9"]'),
            "machines: nowhere-9: unknown machine: not a preset (see `numasim list machines`), "
            "not a file, and not 'host'",
        ),
        (
            ("confidence = 0.95", "confidence = 1.5"),
            "confidence: should be less than 1 (got 1.5)",
        ),
    ],
)
def test_bad_experiment_files(run, tmp_path, change, expected):
    path = tiny(tmp_path)
    path.write_text(path.read_text().replace(*change))
    r = run("reproduce", path, "--out", tmp_path / "o")
    assert (r.code, r.out) == (2, "")
    assert r.err == f"numasim: error: {path}: {expected}\n"


def test_an_experiment_file_that_is_not_text_is_one_line(run, tmp_path):
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b'name = "x"\n\xd0\xff\n')
    r = run("reproduce", binary)
    assert (r.code, r.out) == (2, "")
    assert r.err == (
        f"numasim: error: {binary}: not a text file: byte 11 is not valid UTF-8 "
        "(an experiment file is TOML text)\n"
    )


def test_bad_toml_and_unknown_experiment(run, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("name = \n")
    r = run("reproduce", bad)
    assert r.code == 2 and r.err.startswith(f"numasim: error: {bad}: ") and r.err.count("\n") == 1
    r = run("reproduce", "no-such-experiment")
    assert r.code == 2
    assert r.err.startswith("numasim: error: no-such-experiment: unknown experiment; shipped ones:")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--replications", "0"], "--replications must be at least 1, got 0"),
        (["--confidence", "1.5"], "--confidence must be in [0.5, 1), got 1.5"),
    ],
)
def test_bad_reproduce_options(run, tmp_path, args, expected):
    r = run("reproduce", tiny(tmp_path), *args)
    assert (r.code, r.err) == (2, f"numasim: error: {expected}\n")


def test_compare(run, tmp_path):
    r = run("compare", "--machine", "hp-superdome-4", "--workload", "n=30,kind=cpu,exec=10-50",
            "--policies", "linux26@two-level,linux26@flat", "--replications", "5",
            "--out", tmp_path / "c", "--json")  # fmt: skip
    assert r.code == 0, r.err
    rows = json.loads(r.out)["rows"]
    assert [(x["n"], x["baseline"], x["policy"], x["replications"]) for x in rows] == [
        (30, "linux26@two-level", "linux26@flat", 5)
    ]
    bad = run("compare", "--machine", "hp-superdome-4", "--workload", "kind=cpu",
              "--policies", "linux26,linux26@flat")  # fmt: skip
    assert (bad.code, bad.err) == (
        2, "numasim: error: --workload must give the process count once, e.g. n=200,kind=cpu\n"
    )  # fmt: skip


FAR = """
name = "far"
title = "far from origin, with and without SI-LB's variants"
machines = ["mehta-m3"]
baseline = "linux26@multilevel"
policies = ["origin-aware:v1=off,v2=off", "origin-aware"]
metric = "far_from_origin"
replications = {reps}
seed = 3

[[workload]]
name = "cpu"
spec = "kind=cpu,exec=200,arrival=random"

[sweep]
n = [100]
"""


def test_far_from_origin_experiment_reports_counts_by_level(run, tmp_path):
    out = tmp_path / "far"
    r = run("reproduce", tiny(tmp_path, 5, FAR), "--out", out, "--jobs", "1")
    assert r.code == 0, r.err
    assert "processes far from their origin node and paired reduction" in r.out
    assert "reduction %" in r.out
    # The breakdown has one column per remote distance of mehta-m3 (20 and 30) and one row per
    # variant; its cells are the per-run means of the stored counts.
    runs = pd.read_csv(out / "runs.csv")
    assert {"far_at_20", "far_at_30", "migrations_push", "migrations_exchange"} <= set(runs)
    assert (runs.far_at_20 + runs.far_at_30 == runs.far_from_origin).all()
    base = runs[runs.policy == "linux26@multilevel"]
    assert (base.migrations_push == 0).all() and (base.migrations_exchange == 0).all()
    lines = r.out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.split()[-2:] == ["20", "30"])
    for label, line in zip(["linux26@multilevel", "origin-aware:v1=off,v2=off", "origin-aware"],
                           lines[head + 1 : head + 4], strict=True):  # fmt: skip
        cells = line.split()
        assert cells[:2] == ["100", label]
        mine = runs[runs.policy == label]
        assert cells[2:] == [f"{mine.far_at_20.mean():.1f}", f"{mine.far_at_30.mean():.1f}"]


def test_compare_takes_policy_options(run, tmp_path):
    r = run("compare", "--machine", "mehta-m3", "--workload", "n=40,kind=cpu,exec=50",
            "--policies", "linux26@multilevel,origin-aware:v1=off,v2=off,origin-aware@multilevel",
            "--replications", "3", "--jobs", "1", "--out", tmp_path / "c", "--json")  # fmt: skip
    assert r.code == 0, r.err
    policies = [row["policy"] for row in json.loads(r.out)["rows"]]
    assert policies == ["origin-aware:v1=off,v2=off", "origin-aware@multilevel"]


@pytest.mark.parametrize(
    "spec", ["n=60,kind=mixed,exec=50-400,arrival=random", "app=canneal:4+x264:3"]
)
def test_a_worker_reads_the_same_summary_as_a_full_run(spec):
    """Workers ask the core for the summary (and applications) only: it must be exactly the
    full result's, for plain and for application workloads."""
    from numasim import _core
    from numasim.machine import Machine

    m = Machine.preset("mehta-m3")._core
    w = _core.Workload.generate(m, spec, 11)
    d = _core.Domains.build(m, "multilevel")
    assert d.builder == "multilevel"
    for policy in ("linux26", "origin-aware"):
        full = json.loads(_core.simulate(m, w, policy, "multilevel", False, "memory=parent"))
        short = json.loads(_core.simulate_summary(m, d, w, policy, "memory=parent"))
        expected = {"summary": full["summary"]} | ({"apps": full["apps"]} if "apps" in full else {})
        assert short == expected
        assert ("apps" in short) == spec.startswith("app=")


def test_domains_serve_only_the_machine_they_were_built_for():
    from numasim import _core
    from numasim.machine import Machine

    m = Machine.preset("mehta-m3")._core
    other = Machine.preset("mehta-m3")._core  # the same file, another object
    d = _core.Domains.build(m, "flat")
    w = _core.Workload.generate(m, "n=5", 1)
    with pytest.raises(ValueError, match="built for another machine"):
        _core.simulate_summary(other, d, w, "linux26")
    with pytest.raises(_core.InputError, match="unknown"):
        _core.Domains.build(m, "flatter")
