"""The sched-ext-numa experiment: its file, per-workload process counts, the metrics derived
from a run's full result, the further-metric tables and what an experiment that publishes
nothing says it shows (computed from its numbers)."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from numasim import _core, findings, report, stats
from numasim import experiment as ex
from numasim._core import InputError
from numasim.machine import Machine

SCX_VARIANTS = ["scx-rusty", "scx-rusty:interval_ms=500", "scx-rusty:interval_ms=8000",
                "scx-rusty:xnuma_greedy=4,slice_us_overutil=5000", "scx-rusty:xfer=current",
                "scx-lavd", "scx-lavd:dist=slit"]  # fmt: skip


def test_the_shipped_file_loads_with_every_variant():
    exp = ex.load("sched-ext-numa")
    assert exp.machines == ["numa-4x8", "mehta-m1", "two-socket-2x16"]
    assert exp.baseline.label == "linux@linux"
    labels = [v.label for v in exp.policies]
    assert labels == ["linux:numa_balancing=off@linux", *SCX_VARIANTS]
    assert exp.profile == "kernel26"
    assert exp.metric == "mean_tat_ms"
    assert exp.metrics == ["makespan_ms", "cross_node_migrations_per_s", "remote_share"]
    assert exp.derived
    names = [w.name for w in exp.workloads]
    assert names == ["short", "mixed", "long", "parsec"]
    long = next(w for w in exp.workloads if w.name == "long")
    assert "exec=10000-20000" in long.spec  # every long process has at least 10 s of CPU time
    parsec = next(w for w in exp.workloads if w.name == "parsec")
    assert parsec.mix == "parsec-mix" and exp.ns_of(parsec) == [1]
    assert exp.ns_of(long) == [16, 32, 64]
    # Three machines × (three workloads × three n + the mix's one round).
    assert len(exp.cells()) == 3 * (3 * 3 + 1)
    # Every machine has 32 CPUs, so an n is the same load on each.
    assert {Machine.load(m).info["cpus"].__len__() for m in exp.machines} == {32}


def test_the_sched_ext_variants_are_registered_policies_with_known_options():
    for spec in SCX_VARIANTS:
        assert _core.check_policy("test", spec) == spec.split(":")[0]
    with pytest.raises(InputError, match="xnuma_greedy"):
        _core.check_policy("test", "scx-rusty:xnuma_greedy=many")


def test_the_two_socket_machine():
    m = Machine.load("two-socket-2x16")
    assert m.info["distances"] == [[10, 21], [21, 10]]
    assert [len(node["cpus"]) for node in m.info["nodes"]] == [16, 16]


TINY = """
name = "tiny"
machines = ["numa-4x8"]
baseline = "linux26@two-level"
policies = ["linux26@flat"]
replications = 2
seed = 3
{extra}

[[workload]]
name = "short"
spec = "kind=cpu,exec=50,arrival=almost"

[[workload]]
name = "apps"
spec = "app=swaptions:4+canneal:4,arrival=almost"
n = [1]

[sweep]
n = [8, 40]
"""


def _tiny(tmp_path, extra="", text=TINY):
    path = tmp_path / "tiny.toml"
    path.write_text(text.format(extra=extra))
    return path


def test_a_workload_may_have_its_own_process_counts(tmp_path):
    exp = ex.load(_tiny(tmp_path))
    assert [(w.name, n) for _, w, n in exp.cells()] == [("short", 8), ("short", 40), ("apps", 1)]
    assert exp.all_ns == [1, 8, 40]
    assert not exp.derived
    outcome = ex.execute(exp, tmp_path / "o", jobs=1)
    cells = {(r["workload"], r["n"]) for r in outcome.rows}
    assert cells == {("short", 8), ("short", 40), ("apps", 1)}
    assert len(outcome.rows) == 3 * 2 * 2


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("n = [1]", None),
        ("n = [1, 1]", "workload.1.n: 1 named more than once"),
        ("n = [0]", "workload.1.n.0: should be greater than 0"),
        ("n = []", "workload.1.n"),
    ],
)
def test_a_workload_s_n_is_checked(tmp_path, change, message):
    path = _tiny(tmp_path, text=TINY.replace("n = [1]", change))
    if message is None:
        ex.load(path)
        return
    with pytest.raises(InputError) as e:
        ex.load(path)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_an_x_axis_takes_no_per_workload_n(tmp_path):
    text = (
        TINY.replace('name = "short"', 'name = "short"\nx = 1')
        .replace('name = "apps"', 'name = "apps"\nx = 2')
        .replace("n = [8, 40]", "n = [8]")
    )
    text = text.replace("seed = 3", 'seed = 3\nx_label = "k"')
    with pytest.raises(InputError, match=r"workload\.1\.n: an experiment with an x axis"):
        ex.load(_tiny(tmp_path, text=text))


def test_derived_metrics_of_a_hand_made_result():
    result = {
        "summary": {"makespan_ms": 500.0, "migrations_by_level": [4, 2, 1]},
        "processes": [{"cpu_ms": 100.0, "remote_share": 0.5},
                      {"cpu_ms": 300.0, "remote_share": 0.1}],
    }  # fmt: skip
    got = ex.derived_metrics(result)
    # 2 + 1 moves crossed a node (4 stayed inside one) in 0.5 s; (50 + 30) / 400.
    assert got == {"cross_node_migrations": 3, "cross_node_migrations_per_s": 6.0,
                   "remote_share": pytest.approx(0.2)}  # fmt: skip
    idle = {"summary": {"makespan_ms": 0.0, "migrations_by_level": [0]},
            "processes": [{"cpu_ms": 0.0, "remote_share": 0.0}]}  # fmt: skip
    assert ex.derived_metrics(idle) == {"cross_node_migrations": 0,
                                        "cross_node_migrations_per_s": 0.0,
                                        "remote_share": 0.0}  # fmt: skip


def test_derived_metrics_of_a_real_run_agree_with_its_processes():
    m = Machine.load("numa-4x8")
    w = _core.Workload.generate(m._core, "n=48,kind=cpu,exec=100-300,arrival=almost", 5,
                                "--workload", "")  # fmt: skip
    result = json.loads(_core.simulate(m._core, w, "linux26", "two-level"))
    got = ex.derived_metrics(result)
    procs = result["processes"]
    cross = sum(sum(p["migrations_by_level"][1:]) for p in procs)
    assert cross > 0  # 48 processes on 32 CPUs: the balancer moves some between nodes
    assert got["cross_node_migrations"] == cross
    assert got["cross_node_migrations_per_s"] == cross / (result["summary"]["makespan_ms"] / 1e3)
    # A process that ran on one node only, with its memory there, made no remote access.
    assert 0 < got["remote_share"] < 1
    local = [p for p in procs if p["migrations"] == 0]
    assert local and all(p["remote_share"] == 0 for p in local)


def test_derived_metrics_are_kept_only_where_asked_and_keyed_apart(tmp_path, run):
    plain = ex.load(_tiny(tmp_path))
    asked = ex.load(_tiny(tmp_path, 'metrics = ["makespan_ms", "remote_share"]'))
    assert asked.derived and not plain.derived
    machines = {"numa-4x8": Machine.load("numa-4x8")}
    assert not {r.key for r in ex.runs(plain, machines)} & {r.key for r in ex.runs(asked, machines)}
    rows = ex.execute(plain, tmp_path / "p", jobs=1).rows
    assert all("remote_share" not in r for r in rows)
    # The full result gives the same numbers as the summary a worker reads otherwise.
    full = ex.execute(asked, tmp_path / "f", jobs=1).rows
    assert [{k: r[k] for k in r if k not in ex.DERIVED_METRICS} for r in full] == rows
    out = tmp_path / "a"
    r = run("reproduce", _tiny(tmp_path, 'metrics = ["makespan_ms", "remote_share"]'), "--out",
            out, "--jobs", "1")  # fmt: skip
    assert r.code == 0, r.err
    runs = pd.read_csv(out / "runs.csv")
    assert (runs.remote_share.between(0, 1)).all() and (runs.cross_node_migrations >= 0).all()
    gains = pd.read_csv(out / "metrics_gains.csv")
    assert set(gains.metric) == {"makespan_ms", "remote_share"}
    assert "remote-access share and paired reduction relative to the baseline" in r.out
    assert "numa-4x8 · apps (app=swaptions:4+canneal:4,arrival=almost) · makespan" in r.out
    assert "What it shows (tiny publishes no numbers" in r.out


def _fake(exp, values):
    """Run rows of ``exp`` whose mean_tat_ms is ``values[(n, policy)]`` (one per replication)."""
    rows = []
    for (n, policy), tats in values.items():
        for r, tat in enumerate(tats):
            rows.append({"machine": "numa-4x8", "workload": "short", "n": n, "policy": policy,
                         "replication": r, "mean_tat_ms": tat})  # fmt: skip
    return pd.DataFrame(rows)


def test_what_it_shows_is_computed_from_the_numbers(tmp_path):
    exp = ex.load(_tiny(tmp_path))
    exp.workloads = exp.workloads[:1]
    base, pol = "linux26@two-level", "linux26@flat"
    runs = _fake(exp, {
        # n = 8: the policy 10 % lower in every replication (gains 10, 10, 10 %).
        (8, base): [100.0, 200.0, 50.0], (8, pol): [90.0, 180.0, 45.0],
        # n = 40: 5 % higher, then 5 % lower: the interval holds 0.
        (40, base): [100.0, 100.0, 100.0], (40, pol): [105.0, 95.0, 100.0],
    })  # fmt: skip
    summary = stats.summarize(runs, 0.95)
    gains = stats.gains(runs, exp, 0.95)
    lines = findings.text(exp, [("mean_tat_ms", summary, gains)], 0.95)
    assert lines[0].startswith("What it shows (tiny publishes no numbers")
    assert lines[1] == "mean turnaround (ms):"
    assert lines[2] == (
        "  linux26@flat vs linux26@two-level: lower in 1, higher in 0 of 2 cells where the "
        "95 % interval of the paired change excludes 0 (neither in 1); lower by up to 10.00 % "
        "(numa-4x8 · short · n = 8); changes from 0.00 to 10.00 % (positive = lower)."
    )
    # n = 8: the policy's mean is lower; n = 40: both means are 100, a tie counts for each.
    assert lines[3] == ("  lowest mean per cell (of 2; a tie counts for each): linux26@flat 2, "
                        "linux26@two-level 1.")  # fmt: skip
    # The other way round, the same numbers read "higher".
    flipped = runs.assign(policy=runs.policy.map({base: pol, pol: base}))
    g = stats.gains(flipped, exp, 0.95)
    line = findings.policy_line(pol, base, g[g.policy == pol], "95 %")
    assert "lower in 0, higher in 1 of 2 cells" in line
    assert "higher by up to 11.11 % (numa-4x8 · short · n = 8)" in line  # 10/90 of the lower


def test_further_metric_tables_show_each_variant_and_its_change(tmp_path):
    exp = ex.load(_tiny(tmp_path, 'metrics = ["makespan_ms"]'))
    exp.workloads = exp.workloads[:1]
    base, pol = "linux26@two-level", "linux26@flat"
    runs = _fake(exp, {(8, base): [1.0, 1.0], (8, pol): [1.0, 1.0],
                       (40, base): [1.0, 1.0], (40, pol): [1.0, 1.0]})  # fmt: skip
    runs["makespan_ms"] = [400.0, 600.0, 300.0, 450.0, 1000.0, 1000.0, 1100.0, 900.0]
    summary, gains = report.metrics_frames(exp, runs, 0.95)
    text = report.metrics_text(exp, summary, gains, 0.95)
    lines = text.splitlines()
    assert lines[0].startswith("makespan (ms) and paired gain")
    # n = 8: base 500 ± t·141.4/√2, policy 375 (gains 25 %, 25 %); n = 40: 1000 and 1000.
    row8 = next(line for line in lines if line.strip().startswith("8 "))
    assert "500.0 ± 1270.6" in row8 and "375.0 ± 953.0" in row8 and "25.00 ± 0.00" in row8
    row40 = next(line for line in lines if line.strip().startswith("40 "))
    assert "1000.0 ± 0.0" in row40 and "1000.0 ± 1270.6" in row40
