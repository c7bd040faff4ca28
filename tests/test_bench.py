"""`numasim bench --scaling` and `--peer simso` (docs/PERFORMANCE.md): the sweep's table, the
exporter of the peer benchmark, and SimSo running the exported jobs (skipped where SimSo is
absent); the scenarios listed by `bench --help`."""

from __future__ import annotations

import importlib.util
import json
import warnings

import pytest
from numasim import bench, peer
from numasim.machine import Machine

HAS_SIMSO = importlib.util.find_spec("simso") is not None


def test_scaling_sweep_prints_each_point_and_the_ratio(run):
    r = run("bench", "--scaling", "--only", "128,256")
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert lines[0].startswith("linux26 over multilevel domains, 10 processes per CPU")
    assert lines[0].endswith("each point in a fresh process, the fastest of 3 runs")
    assert lines[1].split() == ["CPUs", "processes", "run", "s", "µs/process", "events", "peak",
                                "MB"]  # fmt: skip
    assert [line.split()[:2] for line in lines[2:4]] == [["128", "1280"], ["256", "2560"]]
    assert lines[4].startswith("largest / smallest per-process cost: ")
    points = json.loads(run("bench", "--scaling", "--only", "128", "--json").out)
    assert points[0]["processes"] == 1280 and points[0]["events"] > 0
    assert points[0]["repeat"] == 3


def test_the_scaling_sweep_is_equal_load_and_not_a_default_scenario():
    sw = bench.scaling()
    cpus = bench.scaling_cpus()
    assert sorted(cpus.values()) == [128, 256, 512, 1024, 2048, 4096]
    assert sw["processes_per_cpu"] == 10
    assert {s["machine"] for s in bench.scenarios()}.isdisjoint(sw["machines"][:3])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--scaling", "--peer", "simso"],
            "--scaling, --peer and --policies are separate benchmarks; choose one",
        ),
        (
            ["--scaling", "--only", "100"],
            "--only with --scaling takes CPU counts of the sweep: 128, 256, 512, 1024, 2048, 4096",
        ),
        (["--peer", "simso", "--only", "x"], "unknown peer scenario x; known: 32x500, 64x5000"),
        (["--peer", "other"], "Invalid value for '--peer': 'other' is not 'simso'."),
    ],
)
def test_bench_refusals(run, args, message):
    r = run("bench", *args)
    assert r.code == 2
    assert r.err == f"numasim: error: {message}\n"


def test_peer_without_simso_names_the_extra(run, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "simso" else real(name, *a))  # fmt: skip
    r = run("bench", "--peer", "simso")
    assert r.code == 2
    assert r.err == (
        "numasim: error: --peer simso: SimSo is not installed; pip install 'numasim[peer]' "
        "(simso==0.8.5)\n"
    )


@pytest.mark.parametrize("sc", peer.scenarios(), ids=lambda sc: sc["name"])
def test_exported_jobs_are_the_workloads_arrivals_and_demands(sc):
    m = Machine.from_file(peer.machine_path(sc))
    assert m.nodes == 1 and m.cpus in (32, 64)
    w = peer.workload(sc, m)
    procs = json.loads(w.to_json())["processes"]
    jobs = peer.export_jobs(w)
    assert len(jobs) == len(procs) == int(sc["workload"].split(",")[0].removeprefix("n="))
    assert jobs == [{"pid": p["pid"], "arrival_ns": p["arrival_ns"],
                     "demand_ns": p["demand_ns"]} for p in procs]  # fmt: skip
    # Not a trivial workload: arrivals and demands spread as the spec says.
    assert len({j["demand_ns"] for j in jobs}) > len(jobs) // 2
    assert all(50_000_000 <= j["demand_ns"] <= 400_000_000 for j in jobs)


def test_only_single_threaded_cpu_bound_processes_export():
    from numasim import _core

    m = Machine.from_file(peer.machine_path(peer.scenarios()[0]))
    w = _core.Workload.generate(m._core, "n=4,kind=io", 1)
    with pytest.raises(_core.InputError, match="only single-threaded CPU-bound"):
        peer.export_jobs(w)


@pytest.mark.skipif(not HAS_SIMSO, reason="SimSo is not installed (pip install 'numasim[peer]')")
def test_simso_runs_the_exported_jobs_exactly():
    from numasim import peer_simso

    sc = peer.scenarios()[0]
    jobs = peer.export_jobs(peer.workload(sc))[:40]
    s = peer.settings()["simso"]
    deadline = s["relative_deadline_ms"] * 1_000_000
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        model, _ = peer_simso.simulate(jobs, 4, s["scheduler"], deadline)
    ran = {t.identifier: t.jobs for t in model.task_list}
    for j in jobs:
        (job,) = ran[j["pid"]]  # one job per task
        assert job.activation_date == j["arrival_ns"]
        assert job.computation_time_cycles == j["demand_ns"]
        assert job.end_date >= j["arrival_ns"] + j["demand_ns"]


@pytest.mark.skipif(not HAS_SIMSO, reason="SimSo is not installed (pip install 'numasim[peer]')")
def test_peer_bench_prints_both_times_and_ratios(run):
    r = run("bench", "--peer", "simso", "--only", "32x500")
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert lines[0] == ("numasim (linux26 over flat domains) vs SimSo 0.8.5 "
                        "(simso.schedulers.EDF), the same jobs on both sides")  # fmt: skip
    assert "in-process (simulation call): numasim " in lines[2]
    assert "whole process (fresh interpreter, imports included): numasim " in lines[3]
    assert lines[4].startswith("    jobs completed: SimSo 500 of 500; mean turnaround numasim ")


def test_bench_help_lists_every_scenario_with_its_title(run):
    r = run("bench", "--help")
    assert r.code == 0, r.err
    assert "Scenarios (--only NAME,...)" in r.out
    packed = "".join(r.out.split())  # click wraps long titles, at spaces or hyphens
    for sc in bench.scenarios():
        assert sc["name"] + "".join(sc["title"].split()) in packed
