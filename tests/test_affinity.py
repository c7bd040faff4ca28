"""CPU affinity from the CLI and the Python API: the spec keys, the saved workload files, and the
migration kind `affinity` (listed only for a workload with affinities); bad affinity input is in
test_bad_input.py."""

from __future__ import annotations

import json

import numasim
import pandas as pd
import pytest
from numasim import Machine, Workload, simulate

M3 = Machine.preset("mehta-m3")  # 16 CPUs, 4 per node
PINNED = "n=4,kind=cpu,pin=cpus:0,release=100,spawn=cpu:0"


def kinds(summary: dict) -> dict[str, int]:
    return dict(summary["migrations_by_kind"])


def test_pinned_then_released_runs_on_cpu_0_then_spreads(run, tmp_path):
    r = run("run", "--machine", "mehta-m3", "--workload", PINNED)
    assert r.code == 0, r.err
    assert r.out.startswith("mehta-m3 · linux26 over two-level domains · 4 processes\n")
    out = tmp_path / "o"
    r = run("run", "--machine", "mehta-m3", "--workload", PINNED, "--json", "--out", out)
    assert r.code == 0, r.err
    summary = json.loads(r.out)
    # Only the balancers move them, and only once they may leave CPU 0: a release widens the
    # set, so nothing is moved for its sake.
    by_kind = kinds(summary)
    assert by_kind["affinity"] == 0
    assert summary["migrations"] > 0
    moves = pd.read_csv(out / "migrations.csv")
    assert len(moves) == summary["migrations"]
    assert (moves["time_ms"] >= 100).all()
    assert (moves["from_cpu"] == 0).all()
    assert set(moves["kind"]) <= {"idle", "pull", "push", "active"}
    # Before the release everything ran on CPU 0 (the trace of the same run).
    traced = simulate(M3, Workload.generate(M3, PINNED, 0), trace=True)
    early = traced.trace[traced.trace["start_ns"] < 100_000_000]
    assert len(early) > 0 and set(early["cpu"]) == {0}
    assert set(traced.trace[traced.trace["start_ns"] >= 100_000_000]["cpu"]) != {0}


def test_a_change_that_excludes_a_process_s_cpu_moves_it_as_an_affinity_migration(run, tmp_path):
    # P0 may run anywhere (linux26 places it on CPU 3), then only on CPU 5 from 50 ms: it is
    # moved there at that instant. P1, pinned to CPU 1, never moves.
    row = {"tgid": 0, "arrival_ns": 0, "demand_ns": 200_000_000, "kind": "cpu", "mem": 0.5,
           "burst_mean_ns": 10_000_000, "wait_mean_ns": 20_000_000, "seed": 1}  # fmt: skip
    w = {
        "processes": [
            {**row, "pid": 0, "spawn_cpu": 0,
             "affinity": [{"at_ns": 50_000_000, "cpus": "5"}]},
            {**row, "pid": 1, "tgid": 1, "spawn_cpu": 1,
             "affinity": [{"at_ns": 0, "cpus": "1"}]},
        ]
    }  # fmt: skip
    path = tmp_path / "w.json"
    path.write_text(json.dumps(w))
    out = tmp_path / "o"
    r = run("run", "--machine", "mehta-m3", "--workload", path, "--out", out)
    assert r.code == 0, r.err
    assert "affinity 1" in r.out.split("migrations")[1].splitlines()[0]
    moves = pd.read_csv(out / "migrations.csv")
    mine = moves[moves["kind"] == "affinity"]
    assert mine[["time_ms", "pid", "to_cpu"]].values.tolist() == [[50.0, 0, 5]]
    assert (moves["pid"] == 0).all()
    procs = pd.read_csv(out / "processes.csv")
    assert procs["migrations_affinity"].tolist() == [1, 0]


def test_results_without_affinities_keep_their_shape():
    r = simulate(M3, "n=6,kind=cpu,exec=50", seed=2)
    assert "affinity" not in kinds(r.raw_summary)
    assert "migrations_affinity" not in r.processes.columns
    assert "migrations_wakeup" in r.processes.columns
    assert all(len(p["migrations_by_kind"]) == 7 for p in r.raw["processes"])
    pinned = simulate(M3, "n=6,kind=cpu,exec=50,pin=each", seed=2)
    assert kinds(pinned.raw_summary)["affinity"] == 0
    assert pinned.processes["migrations_affinity"].tolist() == [0] * 6


def test_a_workload_with_affinities_round_trips_through_csv(run, tmp_path):
    spec = "n=12,kind=mixed,exec=50-200,pin=each,release=80"
    out = tmp_path / "o"
    r = run("run", "--machine", "mehta-m3", "--workload", spec, "--seed", "4", "--json",
            "--out", out)  # fmt: skip
    assert r.code == 0, r.err
    saved = out / "workload.csv"
    header, first = saved.read_text().splitlines()[:2]
    assert header.endswith(",seed,affinity")
    assert first.endswith(',"0:0;80000000:0-15"')
    out2 = tmp_path / "again"
    again = run("run", "--machine", "mehta-m3", "--workload", saved, "--json", "--out", out2)
    assert again.code == 0, again.err
    assert json.loads(again.out) == json.loads(r.out)
    for name in ["processes.csv", "migrations.csv", "workload.csv"]:
        assert (out2 / name).read_text() == (out / name).read_text(), name


def test_an_application_workload_with_affinities_round_trips_through_json(run, tmp_path):
    spec = "app=koita:3,n=2,arrival=uniform:20,pin=cpus:0-5,release=60"
    out = tmp_path / "o"
    r = run("run", "--machine", "mehta-m3", "--workload", spec, "--policy", "hs-con",
            "--json", "--out", out)  # fmt: skip
    assert r.code == 0, r.err
    saved = json.loads((out / "workload.json").read_text())
    assert {json.dumps(p["affinity"]) for p in saved["processes"]} == {
        '[{"at_ns": 0, "cpus": "0-5"}, {"at_ns": 60000000, "cpus": "0-15"}]'
    }
    again = run("run", "--machine", "mehta-m3", "--workload", out / "workload.json",
                "--policy", "hs-con", "--json")  # fmt: skip
    assert again.code == 0, again.err
    assert json.loads(again.out) == json.loads(r.out)


def test_the_python_api_generates_and_saves_affinities(tmp_path):
    w = Workload.generate(M3, "n=4,pin=each", 0)
    df = w.to_dataframe()
    assert df["affinity"].tolist() == [[{"at_ns": 0, "cpus": str(i)}] for i in range(4)]
    assert df["spawn_cpu"].tolist() == [0, 1, 2, 3]
    for name in ["w.csv", "w.json"]:
        w.save(tmp_path / name)
        assert Workload.load(tmp_path / name).to_dataframe().equals(df)
    # Each process runs only on its own CPU, under every family of policy.
    for policy in ["linux26", "linux", "fr-dist"]:
        r = simulate(M3, w, policy=policy, trace=True)
        assert (r.trace["cpu"] == r.trace["pid"]).all(), policy
        assert r.processes["migrations"].tolist() == [0] * 4, policy
    # A spec writes `+` for a cpulist's commas; the workload holds the kernel's form.
    listed = Workload.generate(M3, "n=2,pin=cpus:0-1+8", 0).to_dataframe()
    assert listed["affinity"].tolist() == [[{"at_ns": 0, "cpus": "0-1,8"}]] * 2
    assert set(listed["spawn_cpu"]) <= {0, 1, 8}
    with pytest.raises(numasim.InputError) as e:
        Workload.generate(M3, "n=4,pin=cpus:16", 0)
    assert str(e.value) == "spec: key pin: CPU 16 does not exist (the machine has 16 CPUs)"
