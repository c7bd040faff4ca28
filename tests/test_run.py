"""`numasim run`, `numasim list policies` and the Python API of single runs."""

from __future__ import annotations

import json

import numasim
import pandas as pd
import pytest
from numasim import Machine, Workload, simulate

SPEC = "n=300,kind=cpu,exec=200,arrival=random"


def test_run_prints_a_summary(run):
    r = run("run", "--machine", "mehta-m1", "--workload", SPEC, "--domains", "multilevel")
    assert r.code == 0, r.err
    assert r.out.startswith("mehta-m1 · linux26 over multilevel domains · 300 processes\n")
    for word in ["turnaround", "makespan", "migrations", "balancing", "far from origin"]:
        assert word in r.out


def test_run_json_and_out_round_trip(run, tmp_path):
    out = tmp_path / "o"
    r = run("run", "--machine", "mehta-m3", "--workload", "n=40,kind=mixed,exec=50-400",
            "--json", "--out", out, "--seed", "3")  # fmt: skip
    assert r.code == 0, r.err
    summary = json.loads(r.out)
    assert summary["processes"] == 40
    assert json.loads((out / "summary.json").read_text()) == summary
    procs = pd.read_csv(out / "processes.csv")
    assert len(procs) == 40
    assert procs["pid"].tolist() == list(range(40))
    # The saved workload replays to the same run.
    again = run("run", "--machine", "mehta-m3", "--workload", out / "workload.csv", "--json")
    assert again.code == 0, again.err
    assert json.loads(again.out) == summary


def test_default_domains_come_from_the_policy(run):
    r = run("run", "--machine", "hp-superdome-4", "--workload", "n=20")
    assert "linux26 over two-level domains" in r.out


def test_the_linux_policy_runs_end_to_end(run):
    # The issue-17 command, and the same over the policy's default (linux) domains.
    spec = "n=50,kind=cpu,exec=200,arrival=random"
    r = run("run", "--machine", "mehta-m1", "--policy", "linux", "--domains", "linux",
            "--workload", spec, "--json")  # fmt: skip
    assert r.code == 0, r.err
    assert json.loads(r.out)["processes"] == 50
    r = run("run", "--machine", "mehta-m1", "--policy", "linux", "--workload", spec)
    assert r.out.startswith("mehta-m1 · linux over linux domains · 50 processes\n")
    listing = run("list", "policies").out
    assert listing.startswith("linux26  ")
    assert "default domains: two-level" in listing
    assert "\nlinux  " in listing and "default domains: linux" in listing


def test_api_returns_dataframes_and_is_deterministic():
    m = Machine.preset("mehta-m1")
    a = simulate(m, SPEC, policy="linux26", domains="multilevel", seed=1)
    b = simulate(m, Workload.generate(m, SPEC, seed=1), domains="multilevel")
    c = simulate(m, SPEC, domains="multilevel", seed=2)
    assert isinstance(a.processes, pd.DataFrame) and isinstance(a.summary, pd.DataFrame)
    assert len(a.processes) == 300 and len(a.summary) == 1
    pd.testing.assert_frame_equal(a.processes, b.processes)
    assert a.raw_summary == b.raw_summary
    assert a.raw_summary != c.raw_summary
    s = a.summary.iloc[0]
    assert s["processes"] == 300
    assert s["mean_tat_ms"] == pytest.approx(a.processes["turnaround_ms"].mean())
    # Every process did exactly its demand of work.
    assert (a.processes["work_ms"] - a.processes["demand_ms"]).abs().max() < 1e-6
    assert set(numasim.__all__) >= {"Machine", "Workload", "simulate"}


def test_trace_is_optional():
    m = Machine.preset("hp-superdome-4")
    r = simulate(m, "n=10,exec=20", trace=True)
    assert list(r.trace.columns) == ["cpu", "pid", "start_ns", "end_ns"]
    assert len(r.trace) >= 10
    assert simulate(m, "n=10,exec=20").trace.empty


def test_workload_save_and_load(tmp_path):
    m = Machine.preset("amc1")
    w = Workload.generate(m, "n=25,kind=io,threads=5,spawn=node:3", seed=9)
    for name in ["w.csv", "w.json"]:
        w.save(tmp_path / name)
        back = Workload.load(tmp_path / name)
        pd.testing.assert_frame_equal(back.to_dataframe(), w.to_dataframe())
    df = w.to_dataframe()
    assert df["tgid"].tolist()[:6] == [0, 0, 0, 0, 0, 5]
    assert set(df["spawn_cpu"]) <= {6, 7}


HEADER = "pid,tgid,arrival_ns,demand_ns,kind,mem,spawn_cpu,burst_mean_ns,wait_mean_ns,seed"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--workload", "n=0"], "--workload: key n: n=0: a workload needs at least one process"),
        (["--workload", "n=5,exec=0"], "--workload: key exec: 0 ms must be positive"),
        (
            ["--workload", "n=5,exec=-20"],
            "--workload: key exec: -20 ms must be a non-negative time",
        ),
        (
            ["--workload", "n=5,arrival=periodic:-1"],
            "--workload: key arrival: -1 ms must be a non-negative time",
        ),
        (["--workload", "exec=20"], "--workload: no process count: give n=N"),
        (
            ["--workload", "n=5,color=red"],
            "--workload: unknown key 'color'; keys are n, kind, io_share, exec, arrival, burst, "
            "wait, mem, mem_cpu, mem_io, spawn, threads, fork, app, load, pin, release",
        ),
        (
            ["--workload", "n=5,spawn=node:99"],
            "--workload: key spawn: node 99 does not exist or has no CPU",
        ),
        (
            ["--workload", "n=5", "--policy", "cfs"],
            "--policy: unknown policy 'cfs'; choose one of linux26, linux, origin-aware, "
            "capability-aware, thread-aware, memory-aware, node-push, scx-rusty, scx-lavd, "
            "fr-dist, fh-dist, fp-dist, hb-dist, hs-dist, fr-con, fh-con, fp-con, hb-con, hs-con, "
            "equi, dyn, lim",
        ),
        (
            ["--workload", "n=5", "--policy", "linux:colour=red"],
            "--policy: unknown linux option 'colour'; choose slice-us, nr-migrate, hz, nohz, "
            "ni_random, numa_balancing or select",
        ),
        (
            ["--workload", "n=5", "--policy", "linux:slice-us=0"],
            "--policy: linux option 'slice-us' must be an integer from 1 to 1000000, not '0'",
        ),
        (
            ["--workload", "n=5", "--domains", "three-level"],
            "--domains: unknown domain builder 'three-level'; choose one of flat, node-only, "
            "two-level, multilevel, linux",
        ),
    ],
)
def test_bad_run_options(run, args, expected):
    r = run("run", "--machine", "mehta-m3", *args)
    assert (r.code, r.out, r.err) == (2, "", f"numasim: error: {expected}\n")


def test_unknown_preset(run):
    r = run("run", "--machine", "mehta-m9", "--workload", "n=5")
    assert r.code == 2
    assert r.err.startswith("numasim: error: mehta-m9: unknown machine")


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("empty.csv", HEADER + "\n", ": the workload is empty"),
        (
            "bad-header.csv",
            "pid,arrival\n0,0\n",
            f": line 1: the header must be exactly: {HEADER} (and optionally ,affinity last)",
        ),
        (
            "not-a-number.csv",
            HEADER + "\n0,0,zero,1000,cpu,0.5,0,1,1,0\n",
            ": line 2, column arrival_ns: 'zero' is not a whole number of nanoseconds",
        ),
        (
            "zero-demand.csv",
            HEADER + "\n0,0,0,0,cpu,0.5,0,1,1,0\n",
            ": process 0 (pid 0): demand must be positive",
        ),
        (
            "negative-arrival.csv",
            HEADER + "\n0,0,-5,1000,cpu,0.5,0,1,1,0\n",
            ": line 2, column arrival_ns: '-5' is not a whole number of nanoseconds",
        ),
        (
            "bad-kind.csv",
            HEADER + "\n0,0,0,1000,gpu,0.5,0,1,1,0\n",
            ": line 2, column kind: 'gpu' is not one of cpu, io",
        ),
        (
            "spawn-out-of-range.csv",
            HEADER + "\n0,0,0,1000,cpu,0.5,99,1,1,0\n",
            ": process 0 (pid 0): spawn cpu 99 does not exist (the machine has 16 CPUs)",
        ),
        (
            "mem-out-of-range.csv",
            HEADER + "\n0,0,0,1000,cpu,1.5,0,1,1,0\n",
            ": process 0 (pid 0): memory intensity 1.5 is not in [0, 1]",
        ),
        (
            "pid-order.csv",
            HEADER + "\n1,1,0,1000,cpu,0.5,0,1,1,0\n",
            ": process 0 (pid 1): pid 1 out of order: pids must be 0, 1, 2, … in order",
        ),
        ("bad.json", '{"processes": [}', ": line 1, column 16, key processes[0]: expected value"),
        ("workload.txt", "whatever", ": a workload file must end in .csv or .json"),
    ],
)
def test_bad_workload_files(run, tmp_path, name, content, expected):
    path = tmp_path / name
    path.write_text(content)
    r = run("run", "--machine", "mehta-m3", "--workload", path)
    assert (r.code, r.out) == (2, "")
    assert r.err == f"numasim: error: {path}{expected}\n"


def test_bench_reports_each_scenario_without_judging_speed(run):
    r = run("bench", "--only", "a", "--json")
    assert r.code == 0, r.err
    (a,) = json.loads(r.out)
    assert a["name"] == "a" and a["processes"] == 500 and a["cpus"] == 32
    assert a["events"] > 0 and a["peak_rss_mb"] > 0
    bad = run("bench", "--only", "z")
    known = "a, a-linux, a-linux-numa-off, b, c, d, e"
    assert (bad.code, bad.err) == (2, f"numasim: error: unknown scenario z; known: {known}\n")


def test_a_small_run_imports_no_dataframe_library():
    """`numasim run` prints its text summary from the engine's dicts: pandas (and pyarrow,
    matplotlib, scipy, pydantic) cost more to import than a small run takes."""
    import subprocess
    import sys

    code = (
        "import sys; from numasim.cli import main; "
        "rc = main(['run', '--machine', 'mehta-m1', '--workload', 'n=10,kind=cpu,exec=200']); "
        "heavy = ('pandas', 'numpy', 'pyarrow', 'matplotlib', 'scipy', 'pydantic', 'yaml'); "
        "print(rc, sorted(m for m in heavy if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines()[-1] == "0 []"
    assert "10 processes" in out.stdout


def test_result_frames_are_made_when_read():
    m = Machine.preset("mehta-m3")
    r = simulate(m, "n=12,kind=mixed", seed=2)
    assert "processes" not in vars(r)  # not built yet
    assert len(r.processes) == 12 and "migrations_pull" in r.processes.columns
    assert r.processes is r.processes  # built once
    assert r.summary.loc[0, "processes"] == 12 == r.raw_summary["processes"]
    assert r.events == r.raw["events"] > 0
