"""A trace's real schedule as numasim's run events: hand-computed events of a small trace, the
same fields as a simulated run's, the Perfetto export, run report, migration tables and saved
runs reading it unchanged; delays per wake-up and migrations by domain level on both sides."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from numasim import replay
from numasim.cli import main
from numasim.kernel.parse import KINDS
from numasim.machine import Machine
from numasim.replay import compare, events
from numasim.run_report import html_report
from numasim.saved import RunRecord
from numasim.sim import Result, Workload, simulate
from numasim.trace import chrome_trace, migration_table, problems, process_traces

DATA = Path(__file__).parent / "data"
TRACES = DATA / "traces"
FORMATS = ["tracefs-small.txt", "trace-cmd-small.txt", "perf-script-small.txt"]
HARNESS = DATA / "kernel/runs/ring-4x2-k6.12-t8-fork-nboff/boot-0.raw.tar.gz"
#: Threads that sleep and wake: the whole of a run whose loops wait to be released.
RELEASED = DATA / "kernel/runs/ring-4x2-k6.12-t8-released-nboff/boot-0.raw.tar.gz"
MS = 1_000_000


def _small(name: str = "tracefs-small.txt"):
    machine = Machine.from_file(TRACES / "numactl.txt")
    _, imported = replay.import_trace(replay.read(TRACES / name), machine, pids={100})
    return imported, machine


@pytest.mark.parametrize("name", FORMATS)
def test_hand_computed_events_of_a_small_trace(name):
    """pid 100 (numasim pid 0, time 0 at its fork, 1.000 s): placed on CPU 1 at 0.1 ms, runs
    1-11 ms there, sleeps until woken at 21 ms, moves to CPU 0 at 22 ms, runs 23-28 ms, is
    preempted, runs 30-35.5 ms and exits at 35 ms. Machine: CPU 0 on node 0, CPU 1 on node 1,
    distance 20."""
    imported, machine = _small(name)
    raw = events.real_run(imported, machine)
    assert raw["trace"] == [
        {"cpu": 1, "pid": 0, "start_ns": 1 * MS, "end_ns": 11 * MS},
        {"cpu": 0, "pid": 0, "start_ns": 23 * MS, "end_ns": 28 * MS},
        {"cpu": 0, "pid": 0, "start_ns": 30 * MS, "end_ns": 35_500_000},
    ]
    te = raw["trace_events"]
    assert te["migrations"] == [[100_000, 0, 0, 1, "fork"], [22 * MS, 0, 1, 0, "unknown"]]
    assert te["wakeups"] == [[21 * MS, 0]]
    assert te["balances"] == te["runqueue"] == te["segments"] == []
    p = raw["processes"][0]
    assert p["arrival_ms"] == 0 and p["first_run_ms"] == 1 and p["response_ms"] == 1
    assert p["completion_ms"] == 35 and p["turnaround_ms"] == 35
    assert p["waiting_ms"] == pytest.approx(0.9 + 2 + 2)  # after the fork, the wake-up, the R+
    assert p["cpu_ms"] == 20.5 and p["io_wait_ms"] == 10 and p["work_ms"] == 20.5
    # first ran on CPU 1 (node 1), most on node 0 (10.5 ms against 10): far, at distance 20
    assert (p["origin_cpu"], p["origin_node"], p["most_node"], p["most_level"]) == (1, 1, 0, 1)
    assert p["cpu_ms_by_node"] == [[1, 10.0], [0, 10.5]]
    assert p["migrations"] == 2 and p["migrations_by_level"] == [0, 2]
    kinds = [k for k, _ in raw["summary"]["migrations_by_kind"]]
    assert kinds == [*KINDS, "unknown"]
    assert dict(zip(kinds, p["migrations_by_kind"], strict=True)) == {
        **dict.fromkeys(kinds, 0), "fork": 1, "unknown": 1}  # fmt: skip
    s = raw["summary"]
    assert s["makespan_ms"] == 35 and s["mean_tat_ms"] == 35 and s["p95_tat_ms"] == 35
    assert s["utilisation_per_cpu"] == pytest.approx([10.5 / 35, 10 / 35])
    assert s["migrations"] == 2 and s["migrations_by_level"] == [0, 2]
    assert s["far_from_origin"] == 1 and s["far_by_level"] == [0, 1] and s["mals"] == [10, 20]
    assert compare.wake_delays(raw) == [[2.0]]
    trace = chrome_trace(machine, json.dumps(raw))
    assert problems(trace) == []
    # one arrow, CPU 1's slice (ends 11 ms) to CPU 0's next (starts 23 ms), 1 ns inside each
    assert [(e["ph"], e["tid"], e["ts"]) for e in trace["traceEvents"] if e["ph"] in "sf"] == [
        ("s", 1, 10_999.999), ("f", 0, 23_000.001)]  # fmt: skip


def test_the_real_events_have_the_fields_of_a_simulated_run():
    """Every field a traced numasim run's result has (but what the engine leaves out when
    empty), so whatever reads one reads the other."""
    imported, machine = _small()
    real = events.real_run(imported, machine)
    sim = simulate(machine, "n=3,kind=io", "linux", trace=True).raw
    assert set(real) == set(sim) - {"apps"}
    assert set(real["processes"][0]) == set(sim["processes"][0])
    assert set(real["summary"]) == set(sim["summary"]) - {"policy_metrics"}
    assert set(real["summary"]["balance"]) == set(sim["summary"]["balance"]) - {"evaluations"}
    assert set(real["trace_events"]) == set(sim["trace_events"])
    assert set(real["trace"][0]) == set(sim["trace"][0])


def test_perfetto_export_run_report_and_migration_tables_read_the_real_schedule():
    """The eight loops of a real Linux 6.12 run: the core's Perfetto export accepts the events
    (it checks them against the machine) and keeps its rules, with one slice per running
    interval and an arrow per migration between two running intervals; the run report, the
    migration table and the per-process traces read them as a simulated run's."""
    files = replay.read(HARNESS)
    machine = replay.machine_beside(files)
    _, imported = replay.import_trace(files, machine, pids=set(range(256, 264)))
    raw = events.real_run(imported, machine)
    text = json.dumps(raw)
    trace = chrome_trace(machine, text)
    assert problems(trace) == []
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(slices) == len(raw["trace"]) == sum(len(t.runs) for t in imported.threads)
    moves = raw["trace_events"]["migrations"]
    assert sorted(k for *_, k in moves) == ["fork"] * 8 + ["newidle"]
    # no arrow: fork placements have no source slice, and pid 263, placed on CPU 1, was
    # pulled back to CPU 0 before it ever ran on CPU 1
    assert not [e for e in trace["traceEvents"] if e["ph"] == "s"]
    table = migration_table(machine, raw)
    assert [(r["pid"], r["kind"]) for r in table if r["kind"] != "fork"] == [
        (next(i for i, t in enumerate(imported.threads) if len(t.migrations) == 2), "newidle")
    ]
    assert process_traces(machine, raw, 5).startswith("pid ")
    record = RunRecord(machine, events.REAL_POLICY, events.REAL_DOMAINS, "trace", 0, text, {})
    page = html_report(record)
    assert "the traced kernel over its own domains · 8 processes" in page
    assert "no modelling assumption" in page and page.count("<figure>") == 3
    assert "newidle 1, fork 8" in page
    procs = Result(raw, text).processes  # columns named by the summary's kinds
    assert procs["migrations_fork"].sum() == 8 and procs["migrations_newidle"].sum() == 1


def test_import_trace_events_saves_a_run_that_numasim_trace_reads(tmp_path, capsys):
    out = tmp_path / "real"
    assert main(["import-trace", str(HARNESS), "--pids", "256-263", "--events", str(out)]) == 0
    assert "the real schedule saved as run events" in capsys.readouterr().out
    record = RunRecord.load(out)
    assert record.assumptions == {} and record.policy == events.REAL_POLICY
    assert record.workload == "trace boot-0.raw.tar.gz --pids 256-263"
    assert (out / "migrations.csv").read_text().count(",fork,") == 8
    page = tmp_path / "real.html"
    assert main(["trace", str(out), "--report", str(page)]) == 0
    trace = json.loads((out / "trace.json").read_text())
    assert problems(trace) == []
    assert "no modelling assumption" in page.read_text()
    from test_run_report import _body_status, _dump_dom

    status = _body_status(_dump_dom(page, tmp_path))
    assert status == {"loaded": "yes", "figures": "3", "figures-drawn": "3", "errors": "0",
                      "error-list": ""}  # fmt: skip


def test_an_rtapp_description_has_no_events(tmp_path, capsys):
    rtapp = tmp_path / "r.json"
    rtapp.write_text('{"tasks": {"t": {"run": 1000}}}')
    assert main(["import-trace", str(rtapp), "--events", str(tmp_path / "e")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "an rt-app description has no schedule" in err


def test_a_saved_run_without_assumptions_ran_under_kernel26(tmp_path):
    """{} names a real schedule; no field at all, a run saved before assumptions were named."""
    imported, machine = _small()
    workload = Workload.resolve(machine, "n=1,kind=cpu", 0)
    events.save(imported, machine, workload, "trace", 0, tmp_path)
    run = json.loads((tmp_path / "run.json").read_text())
    del run["assumptions"], run["digest"]
    (tmp_path / "run.json").write_text(json.dumps(run))
    assert RunRecord.load(tmp_path).assumptions["memory"] == "first-run"


# --- wake-up delays and domain levels ---------------------------------------------------------


def test_wake_delays_from_run_events():
    """A wake-up's delay runs to the start of the process's first interval from then on; a
    wake-up no interval follows has none."""
    raw = {
        "processes": [{}, {}],
        "trace": [
            {"cpu": 0, "pid": 0, "start_ns": 0, "end_ns": 1 * MS},
            {"cpu": 0, "pid": 1, "start_ns": 1 * MS, "end_ns": 4 * MS},
            {"cpu": 1, "pid": 0, "start_ns": 4 * MS, "end_ns": 5 * MS},
            {"cpu": 0, "pid": 0, "start_ns": 9 * MS, "end_ns": 9 * MS},
        ],
        "trace_events": {"wakeups": [[2 * MS, 0], [9 * MS, 0], [6 * MS, 1]]},
    }
    assert compare.wake_delays(raw) == [[2.0, 0.0], []]


def test_a_simulated_wake_up_delay_is_its_wait_for_the_cpu():
    """Four IO-bound processes on two CPUs: the engine's wake-ups and slices give delays that
    sum, with the process's other waits (after its arrival), to its waiting time."""
    machine = Machine.from_file(TRACES / "numactl.txt")
    r = simulate(machine, "n=4,kind=io", "linux26", trace=True).raw
    delays = compare.wake_delays(r)
    assert sum(map(len, delays)) == len(r["trace_events"]["wakeups"]) > 0
    for p, d in zip(r["processes"], delays, strict=True):
        assert all(x >= 0 for x in d)
        assert sum(d) <= p["waiting_ms"] + 1e-6


def test_migrations_by_domain_level_on_a_ring():
    """ring-4x2: CPUs 0-1 on node 0; nodes 1 and 3 at distance 20, node 2 at 30. From CPU 0,
    its node's CPUs are at the MC level, distance-20 nodes at the first NUMA level, node 2 at
    the second."""
    machine = replay.machine_beside(replay.read(HARNESS))
    level = compare.domain_levels(machine)
    assert [level(0, c) for c in range(1, 8)] == [
        "0 MC", "1 NUMA", "1 NUMA", "2 NUMA", "2 NUMA", "1 NUMA", "1 NUMA"]  # fmt: skip
    assert level(5, 4) == "0 MC" and level(4, 0) == "2 NUMA"


def test_replay_compares_delays_per_wake_up_and_domain_levels(tmp_path, capsys):
    """The whole of a real run whose threads sleep and wake, replayed: delays per wake-up per
    task (paired over the tasks woken on both sides) and as distributions; migrations by
    domain level total as those by distance do; both schedules saved as run events."""
    d = tmp_path / "events"
    assert main(["replay", str(RELEASED), "--policy", "linux:numa_balancing=off", "--json",
                 "--events", str(d)]) == 0  # fmt: skip
    out = json.loads(capsys.readouterr().out)
    woken = [(r, s) for r, s in zip(out["real"], out["sim"], strict=True)
             if r["wake_delay_ms"] is not None and s["wake_delay_ms"] is not None]  # fmt: skip
    paired = out["paired"]["wake_delay_ms"]
    assert paired["tasks"] == len(woken) > 1
    assert paired["diff_mean"] == pytest.approx(
        sum(s["wake_delay_ms"] - r["wake_delay_ms"] for r, s in woken) / len(woken)
    )
    w = out["wake_delay_distribution"]
    assert w["wakeups_real"] == sum(len(r["wake_delays_ms"]) for r in out["real"]) > 0
    assert 0 < w["ks_statistic"] <= 1 and w["wasserstein_ms"] > 0
    for side in ("real", "sim"):
        assert sum(out["migrations_by_domain_level"][side].values()) == sum(
            out["migrations_by_distance"][side].values()
        )
    # the saved real schedule's wake-ups give the real side's delays again
    real = RunRecord.load(d / "real")
    delays = compare.wake_delays(real.result)
    assert [x for row in delays for x in row] == pytest.approx(
        [x for r in out["real"] for x in r["wake_delays_ms"]]
    )
    assert RunRecord.load(d / "simulated").policy == "linux:numa_balancing=off"


def test_the_comparison_pairs_only_tasks_woken_on_both_sides():
    base = {
        "run_ms": 1.0,
        "wait_ms": 0.0,
        "turnaround_ms": 1.0,
        "migrations": 0,
        "by_kind": {},
        "by_distance": {},
        "by_domain_level": {},
        "cpu_ms_by_node": [1.0],
    }
    real = [
        {**base, "wake_delay_ms": 1.0, "wake_delays_ms": [1.0]},
        {**base, "wake_delay_ms": None, "wake_delays_ms": []},
        {**base, "wake_delay_ms": 3.0, "wake_delays_ms": [2.0, 4.0]},
    ]
    sim = [{**base, "wake_delay_ms": 2.0, "wake_delays_ms": [2.0]},
           {**base, "wake_delay_ms": 5.0, "wake_delays_ms": [5.0]},
           {**base, "wake_delay_ms": 3.0, "wake_delays_ms": [3.0]}]  # fmt: skip
    out = compare.compare(real, sim)
    p = out["paired"]["wake_delay_ms"]
    assert (p["tasks"], p["real_mean"], p["sim_mean"], p["diff_mean"]) == (2, 2.0, 2.5, 0.5)
    w = out["wake_delay_distribution"]
    assert (w["wakeups_real"], w["wakeups_sim"]) == (3, 3)
    assert w["wasserstein_ms"] == pytest.approx(1.0)  # {1, 2, 4} against {2, 3, 5}
    none = compare.compare([{**base, "wake_delay_ms": None, "wake_delays_ms": []}],
                           [{**base, "wake_delay_ms": 1.0, "wake_delays_ms": [1.0]}])  # fmt: skip
    assert none["paired"]["wake_delay_ms"]["tasks"] == 0
    assert none["wake_delay_distribution"]["ks_statistic"] is None
    assert "a side without wake-ups" in compare.wake_text(none["wake_delay_distribution"])


def test_events_into_a_file_is_one_line_before_the_replay(tmp_path, capsys):
    f = tmp_path / "f"
    f.write_text("")
    assert main(["replay", str(HARNESS), "--pids", "256-263", "--events", str(f)]) == 2
    assert capsys.readouterr().err.strip() == f"numasim: error: {f}: is a file, not a directory"
