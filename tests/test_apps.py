"""Multithreaded applications on the Python side: `numasim list apps`, mix files, per-application
results of a run (`Result.apps`, `run`'s table and report) and of an experiment (rows only for
app workloads, per-application statistics paired by replication, the reproduction's table)."""

from __future__ import annotations

import json
import math

import numasim
import numpy as np
import pandas as pd
import pytest
from numasim import apps, stats
from numasim import experiment as ex
from numasim.sim import APP_COLUMNS

MIX = "numa-4x8"


def test_list_apps_has_every_profile_with_its_numbers(run):
    r = run("list", "apps")
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert lines[0].split() == ["app", "model", "phases/items", "work_ms", "footprint_mb",
                                "shared", "mem", "spread"]  # fmt: skip
    rows = {line.split()[0]: line for line in lines[1 : 1 + len(apps.registry())]}
    assert list(rows) == [a["name"] for a in apps.registry()]
    assert rows["dedup"].split()[1:5] == ["pipeline", "1-P-P-P-1", "200", "items"]
    assert rows["koita"].split()[1:4] == ["phases", "4", "phases"]
    assert rows["canneal"].split()[1:8] == ["fork-join", "22", "phases", "3665", "821.6", "0.6",
                                            "0.6"]  # fmt: skip
    assert "parsec-mix" in r.out  # the shipped mixes are named


def test_list_apps_sources_prints_each_field_with_its_source(run):
    r = run("list", "apps", "--sources", "canneal")
    assert r.code == 0, r.err
    profile = apps.profile("canneal")
    for field in ("model", "phases", "work_ms", "footprint_mb", "shared", "mem", "spread"):
        i = r.out.index(f"\n{field} = ")
        assert r.out[i:].split("\n")[2] == f"  source: {profile['sources'][field]}"
    assert "\nitems = " not in r.out  # a fork-join app has no items
    bad = run("list", "apps", "--sources", "cannel")
    assert bad.code == 2 and bad.out == ""
    assert bad.err.startswith("numasim: error: --sources: unknown application 'cannel'; ")
    assert bad.err.count("\n") == 1


def _mix(tmp_path, text: str, name: str = "m.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_mix_file_becomes_its_spec_and_runs_like_it(tmp_path):
    path = _mix(tmp_path, 'description = "x"\narrival = "almost"\nn = 2\n'
                '[[app]]\nname = "swaptions"\nthreads = 3\ncount = 2\n'
                '[[app]]\nname = "x264"\nthreads = 2\n')  # fmt: skip
    m = apps.Mix.load(path)
    assert m.spec == "app=swaptions:3+swaptions:3+x264:2,arrival=almost,n=2"
    machine = numasim.Machine.preset(MIX)
    by_mix = numasim.Workload.resolve(machine, str(path), seed=5)
    by_spec = numasim.Workload.generate(machine, m.spec, seed=5)
    assert by_mix._core.to_json() == by_spec._core.to_json()
    r = numasim.simulate(machine, by_mix)
    # Two rounds of three applications; a profile that runs more than once is numbered.
    assert r.apps["app"].tolist() == ["swaptions#1", "swaptions#2", "x264#1", "swaptions#3",
                                      "swaptions#4", "x264#2"]  # fmt: skip


def test_shipped_mixes_resolve_by_name():
    for name in apps.shipped_mixes():
        m = apps.Mix.resolve(name)
        assert m.spec.startswith("app=") and m.description
    assert "parsec-mix" in apps.shipped_mixes()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[[app]]\nname = "canneal"\nthreads = 0\n',
         "app.0.threads: should be greater than or equal to 1 (got 0)"),
        ('[[app]]\nname = "canneal"\nthreads = 4\n[[app]]\nname = "cannel"\nthreads = 4\n',
         "app.1.name: unknown application 'cannel'; choose one of blackscholes, bodytrack, "
         "canneal, dedup, ferret, fluidanimate, freqmine, koita, streamcluster, swaptions, vips, "
         "x264"),
        ('[[app]]\nname = "canneal"\nthreads = 4\ncolour = "red"\n',
         "unknown key 'app.0.colour'; allowed: name, threads, count"),
        ('arrival = "soon"\n[[app]]\nname = "canneal"\nthreads = 4\n',
         "key arrival: 'soon' is not one of same, almost, random, uniform:MS, periodic:MS, "
         "poisson:RATE"),
        ('[[app]]\nname = "canneal"\nthreads = "4"\n',
         "app.0.threads: should be a valid integer (got '4')"),
        ('description = "nothing"\n', "missing key 'app'"),
    ],
)  # fmt: skip
def test_a_bad_mix_exits_2_with_one_line_naming_file_and_key(run, tmp_path, text, expected):
    path = _mix(tmp_path, text)
    r = run("run", "--machine", MIX, "--workload", path)
    assert (r.code, r.out) == (2, "")
    assert r.err == f"numasim: error: {path}: {expected}\n"


def test_a_misspelt_mix_name_lists_the_shipped_ones(run):
    r = run("run", "--machine", MIX, "--workload", "parsec-mixx")
    assert r.code == 2
    assert r.err.startswith("numasim: error: --workload: 'parsec-mixx' is not a spec")
    assert "parsec-mix" in r.err and r.err.count("\n") == 1


def test_result_apps_has_one_row_per_application_and_is_empty_otherwise():
    m = numasim.Machine.preset(MIX)
    r = numasim.simulate(m, "app=canneal:4+dedup:2,arrival=almost", seed=3)
    a = r.apps
    assert list(a.columns) == APP_COLUMNS
    assert a["name"].tolist() == ["canneal", "dedup"]
    assert a["threads"].tolist() == [4, 1 + 3 * 2 + 1]  # dedup: two serial stages, three of T
    procs = r.processes.set_index("pid")
    for row in a.itertuples():
        threads = procs[procs.tgid == row.tgid]
        assert len(threads) == row.threads
        assert row.completion_ms == pytest.approx(threads.completion_ms.max())
        assert row.turnaround_ms == pytest.approx(row.completion_ms - threads.arrival_ms.min())
        assert sum(row.threads_by_node) == row.threads
        assert 0 <= row.remote_share <= 1
    plain = numasim.simulate(m, "n=10,kind=cpu", seed=3).apps
    assert plain.empty and list(plain.columns) == APP_COLUMNS


def test_run_prints_saves_and_reports_the_applications(run, tmp_path):
    out, page = tmp_path / "run", tmp_path / "run.html"
    r = run("run", "--machine", MIX, "--workload", "parsec-mix-small", "--seed", "2",
            "--out", out, "--report", page)  # fmt: skip
    assert r.code == 0, r.err
    table = r.out[r.out.index("applications:") :].splitlines()
    header = next(i for i, line in enumerate(table) if line.split()[:2] == ["app", "threads"])
    names = [line.split()[0] for line in table[header + 1 : header + 5]]
    assert names == ["canneal", "fluidanimate", "streamcluster", "swaptions"]
    assert (out / "workload.json").is_file() and not (out / "workload.csv").exists()
    saved = pd.read_csv(out / "apps.csv")
    assert saved["app"].tolist() == names
    html = page.read_text()
    assert "<h2>Applications</h2>" in html and html.count("<svg") == 4  # + apps figure
    plain = run("run", "--machine", MIX, "--workload", "n=10", "--report", tmp_path / "p.html")
    assert plain.code == 0 and "applications" not in plain.out
    assert "Applications" not in (tmp_path / "p.html").read_text()


APPS_EXP = """
name = "tiny-apps"
title = "two-level vs flat on a mix"
source = "a test"
machines = ["numa-4x8"]
baseline = "linux26@two-level"
policies = ["linux26@flat"]
replications = 2
seed = 3

[reference]
source = "a paper (abstract)"
average_gain_pct = 10.7

[[workload]]
name = "mix"
mix = "{mix}"

[[workload]]
name = "plain"
spec = "kind=cpu,exec=50"

[sweep]
n = [1]
"""


@pytest.fixture(scope="module")
def app_exp(tmp_path_factory):
    d = tmp_path_factory.mktemp("apps")
    mix = d / "mix.toml"
    mix.write_text('[[app]]\nname = "canneal"\nthreads = 4\n'
                   '[[app]]\nname = "swaptions"\nthreads = 4\n')  # fmt: skip
    path = d / "tiny-apps.toml"
    path.write_text(APPS_EXP.format(mix=mix))
    return path


def test_app_values_are_stored_only_for_app_workloads(app_exp, tmp_path):
    exp = ex.load(app_exp)
    outcome = ex.execute(exp, tmp_path / "o", jobs=1)
    for row in outcome.rows:
        app = row["workload"] == "mix"
        assert ("apps" in row) == app
        assert ("balance_evaluations" in row) == ("balance_passes" in row) == app
    a = outcome.apps
    assert list(a.columns) == ex.APP_ROW_COLUMNS
    assert sorted(set(a.app)) == ["canneal", "swaptions"]
    assert len(a) == 2 * 2 * 2  # replications × variants × applications
    assert "apps" not in outcome.runs.columns


def test_app_statistics_pair_replications(app_exp, tmp_path):
    exp = ex.load(app_exp)
    a = ex.execute(exp, tmp_path / "o", jobs=1).apps
    g = stats.app_gains(a, exp, 0.95)
    avg = stats.app_average(a, exp, 0.95).iloc[0]
    per_rep = []
    for app in ("canneal", "swaptions"):
        b = a[(a.app == app) & (a.policy == "linux26@two-level")].set_index("replication")
        p = a[(a.app == app) & (a.policy == "linux26@flat")].set_index("replication")
        gain_r = (b.turnaround_ms - p.turnaround_ms) / b.turnaround_ms * 100
        row = g[g.app == app].iloc[0]
        assert row.gain_pct == pytest.approx(gain_r.mean())
        ratio = b.turnaround_ms / p.turnaround_ms
        assert row.speedup == pytest.approx(math.exp(np.log(ratio).mean()))
        per_rep.append(gain_r)
    # The average over applications: per replication first, then over replications.
    by_rep = pd.concat(per_rep, axis=1).mean(axis=1)
    _, _, half = stats.t_interval(by_rep.to_list(), 0.95)
    assert avg.gain_pct == pytest.approx(by_rep.mean())
    assert avg.gain_ci_high - avg.gain_pct == pytest.approx(half)


def test_reproduction_of_an_app_experiment_has_per_app_rows_and_speedups(run, app_exp, tmp_path):
    out = tmp_path / "o"
    r = run("reproduce", app_exp, "--out", out)
    assert r.code == 0, r.err
    part = r.out[r.out.index("tiny-apps: per application") :]
    speed = part[part.index("speed-up (×") :].splitlines()
    assert speed[1].split() == ["app", "linux26@flat", "speed-up", "gain", "%"]
    assert [line.split()[0] for line in speed[2:5]] == ["canneal", "swaptions", "average"]
    assert "paper (a paper (abstract)): average improvement 10.7 %" in part
    assert "remote-access share" in part and "evaluations per balancing pass" in part
    # The published average is set beside the per-application average, not the thread TAT.
    assert "averaged over the applications" in r.out[: r.out.index("tiny-apps: per application")]
    for name in ("apps", "app_summary", "app_gains"):
        assert (out / f"{name}.csv").is_file() and (out / f"{name}.parquet").is_file()
    for kind in ("completion", "gain"):
        assert (out / "figures" / f"tiny-apps-apps-{kind}-numa-4x8-mix.png").is_file()
    assert not (out / "figures" / "tiny-apps-apps-gain-numa-4x8-plain.png").exists()
    data = json.loads(run("reproduce", app_exp, "--out", out, "--json").out)
    assert {r["app"] for r in data["app_gains"]} == {"canneal", "swaptions"}
    assert data["evaluations"][0]["evaluations_per_pass"] == 0  # linux26 evaluates none


def test_an_experiment_workload_is_a_spec_or_a_mix(run, tmp_path):
    text = APPS_EXP.format(mix="parsec-mix").replace('mix = "parsec-mix"', 'mix = "parsec-mix"\n'
                                                     'spec = "n=1"')  # fmt: skip
    path = tmp_path / "both.toml"
    path.write_text(text)
    r = run("reproduce", path, "--out", tmp_path / "o")
    assert r.code == 2
    assert r.err == (f"numasim: error: {path}: workload.0: give either spec (a generator spec) "
                     "or mix (a mix's name or file), not both\n")  # fmt: skip


def test_bench_has_a_multithreaded_scenario():
    from numasim.bench import scenarios, workload_spec

    mt = [s for s in scenarios() if workload_spec(s).startswith("app=")]
    assert mt, "no bench scenario runs applications"
    assert numasim.Machine.preset(mt[0]["machine"]).cpus == 32


def test_each_app_figure_has_the_caption_of_its_kind(app_exp, tmp_path):
    from numasim import app_report, report

    exp = ex.load(app_exp)
    outcome = ex.execute(exp, tmp_path / "o", jobs=1)
    a = app_report.compute(exp, outcome.runs, outcome.apps, exp.confidence)
    tasks = app_report.figure_tasks(tmp_path / "o", exp, a)
    with report.FigureDrawing(tasks, 2) as drawing:  # in processes, as the CLI draws them
        files = drawing.result()
    app_report.record(a, files)
    assert len(a.figures) == 2 * len(tasks)  # a PNG and an SVG each
    for p, caption in a.captions.items():
        assert p.is_file()
        kind = "completion" if "-apps-completion-" in p.name else "gain"
        assert caption == app_report.FIGURE_CAPTIONS[kind], p.name


def test_app_figures_bars_stop_at_0_and_ticks_have_no_offset(app_exp, tmp_path):
    """Two replications far apart (10 and 4 000 ms): the completion bars stop at 0."""
    import matplotlib.pyplot as plt
    from numasim import app_report

    exp = ex.load(app_exp)
    outcome = ex.execute(exp, tmp_path / "o", jobs=1)
    apps = outcome.apps.copy()
    apps["tat_ms"] = [10.0 if r % 2 else 4000.0 for r in apps.replication]
    a = app_report.compute(exp, outcome.runs, apps, exp.confidence)
    machine, w, n = next(app_report._cells(exp, a))
    fig = app_report.completion_figure(exp, a, machine, w, n)
    fig.canvas.draw()
    axes = [ax for ax in fig.axes if ax.get_visible() and ax.containers]
    lows = [seg[:, 0].min() for ax in axes for c in ax.containers
            for seg in c.lines[2][0].get_segments()]  # fmt: skip
    assert min(lows) == 0
    assert all(ax.xaxis.get_offset_text().get_text() == "" for ax in axes)
    plt.close(fig)


def test_linux_selection_counts_its_pulls_between_nodes_only_for_select_variants(run, tmp_path):
    """``linux:select=…`` rows carry the selection's counts (no other row does), thread-aware
    changes a pick only where there was a choice between thread groups, and the report prints
    them."""
    mix = tmp_path / "mix.toml"
    mix.write_text("".join(f'[[app]]\nname = "{a}"\nthreads = 8\n'
                           for a in ("canneal", "swaptions", "streamcluster", "fluidanimate",
                                     "blackscholes")))  # fmt: skip
    text = (APPS_EXP.format(mix=mix)
            .replace('baseline = "linux26@two-level"', 'baseline = "linux@linux"')
            .replace('policies = ["linux26@flat"]',
                     'policies = ["linux:select=thread-aware@linux"]'))  # fmt: skip
    path = tmp_path / "select.toml"
    path.write_text(text)
    exp = ex.load(path)
    rows = [r for r in ex.execute(exp, tmp_path / "o", jobs=1).rows if r["workload"] == "mix"]
    for row in rows:
        selects = row["policy"].startswith("linux:select")
        assert all((k in row) == selects for k in ex.SELECT_METRICS), row["policy"]
        if selects:
            assert 0 <= row["select_picks_changed"] <= row["select_picks_with_choice"]
            assert row["select_picks_with_choice"] <= row["select_picks"]
            assert row["select_picks"] > 0, "five 8-thread applications on 32 cores"
            assert row["select_evaluations"] <= row["balance_evaluations"]
    r = run("reproduce", path, "--out", tmp_path / "o")
    assert r.code == 0, r.err
    part = r.out[r.out.index("selection between nodes") :].splitlines()
    assert part[1].split()[:2] == ["policy", "pulls/run"]
    assert part[2].split()[0] == "linux:select=thread-aware@linux"
