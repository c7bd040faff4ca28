"""Perfetto/Chrome traces: format rules, a golden hand-checked trace, windows, bad options."""

from __future__ import annotations

import json
import os
from pathlib import Path

from numasim import Machine, Workload, simulate
from numasim.trace import chrome_trace, problems

GOLDEN = Path(__file__).parent / "golden" / "trace-two-cpus.json"
TWO_CPUS = 'name = "two"\ncpus_per_node = 2\ndistances = [[10]]\n'
HEADER = "pid,tgid,arrival_ns,demand_ns,kind,mem,spawn_cpu,burst_mean_ns,wait_mean_ns,seed\n"


def test_a_mehta_m1_trace_follows_the_rules(tmp_path, run):
    out = tmp_path / "t.json"
    r = run("run", "--machine", "mehta-m1", "--workload", "n=300,kind=cpu,exec=200,arrival=random",
            "--domains", "multilevel", "--trace", out)  # fmt: skip
    assert r.code == 0, r.err
    trace = json.loads(out.read_text())
    assert problems(trace) == []
    ev = trace["traceEvents"]
    names = {e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    assert names == {f"cpu {c} (speed 1)" for c in range(32)}
    assert {e["args"]["name"] for e in ev if e["name"] == "process_name"} == {
        f"node {n}" for n in range(16)
    }
    kinds = {e["ph"] for e in ev}
    assert kinds == {"M", "X", "s", "f", "i", "C"}
    # Every slice sits on its CPU's node track.
    for e in ev:
        if e["ph"] == "X":
            assert e["pid"] == e["tid"] // 2


def test_problems_are_found():
    bad = {"traceEvents": [
        {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "node 0"}},
        {"ph": "M", "name": "thread_name", "pid": 0, "tid": 0, "args": {"name": "cpu 0"}},
        {"ph": "X", "name": "a", "pid": 0, "tid": 0, "ts": 0, "dur": 10},
        {"ph": "X", "name": "b", "pid": 0, "tid": 0, "ts": 5, "dur": 10},
        {"ph": "X", "name": "c", "pid": 0, "tid": 1, "ts": 0, "dur": 1},
        {"ph": "s", "name": "m", "id": 1, "pid": 0, "tid": 0, "ts": 3},
    ]}  # fmt: skip
    found = problems(bad)
    assert any("overlapping" in p for p in found)
    assert any("unnamed thread 0/1" in p for p in found)
    assert any("flow 1 lacks an end" in p for p in found)


def _two_cpu_trace(tmp_path):
    m_path = tmp_path / "two.toml"
    m_path.write_text(TWO_CPUS)
    w_path = tmp_path / "w.csv"
    rows = ["0,0,0,100000000,cpu,0.5,0,10000000,20000000,0",
            "1,1,0,300000000,cpu,0.5,0,10000000,20000000,1",
            "2,2,0,300000000,cpu,0.5,0,10000000,20000000,2"]  # fmt: skip
    w_path.write_text(HEADER + "\n".join(rows) + "\n")
    m = Machine.from_file(m_path)
    r = simulate(m, Workload.load(w_path), domains="flat", trace=True)
    return chrome_trace(m, r.raw)


def test_golden_trace_of_the_hand_checked_two_cpu_run(tmp_path):
    # tests/engine.rs checks this schedule by hand: P0 on CPU 1 (0-100 ms), P1 and P2 on CPU 0;
    # CPU 1 pulls P1 at 103 ms (an arrow from P1's slice on CPU 0 to its slice on CPU 1).
    trace = _two_cpu_trace(tmp_path)
    assert problems(trace) == []
    slices = sorted((e["tid"], e["name"], e["ts"], e["dur"]) for e in trace["traceEvents"]
                    if e["ph"] == "X")  # fmt: skip
    # Default costs are on here (tests/engine.rs zeroes them): each slice also holds the
    # balancing work done on its CPU (a few µs), and P1's slice on CPU 1 its 0.1 ms cache refill.
    assert slices == [
        (0, "pid 1", 0.0, 100000.0),
        (0, "pid 2", 100000.0, 300002.0),
        (1, "pid 0", 0.0, 100002.0),
        (1, "pid 1", 103000.0, 200115.2),
    ]
    flows = [e for e in trace["traceEvents"] if e["ph"] in "sf"]
    assert [(e["ph"], e["tid"], e["ts"]) for e in flows] == [
        ("s", 0, 99999.999),
        ("f", 1, 103000.0),
    ]
    if os.environ.get("NUMASIM_UPDATE_GOLDEN"):
        GOLDEN.write_text(json.dumps(trace, indent=1) + "\n")
    assert trace == json.loads(GOLDEN.read_text())


def test_trace_window_keeps_a_part(tmp_path, run):
    out = tmp_path / "w.json"
    r = run("run", "--machine", "mehta-m3", "--workload", "n=40,exec=50", "--trace", out,
            "--trace-window", "10:30")  # fmt: skip
    assert r.code == 0, r.err
    trace = json.loads(out.read_text())
    assert problems(trace) == []
    for e in trace["traceEvents"]:
        if e["ph"] == "X":
            assert 10_000 <= e["ts"] and e["ts"] + e["dur"] <= 30_000 + 1e-6
        elif e["ph"] in "iC":
            assert 10_000 <= e["ts"] <= 30_000


def test_bad_trace_window(run, tmp_path):
    for text, msg in [("30:10", "need 0 <= START < END, got '30:10'"),
                      ("a:b", "'a:b' is not START:END in ms")]:  # fmt: skip
        r = run("run", "--machine", "mehta-m3", "--workload", "n=4", "--trace",
                tmp_path / "x.json", "--trace-window", text)  # fmt: skip
        assert (r.code, r.err) == (2, f"numasim: error: --trace-window: {msg}\n")


def test_migration_table_and_process_traces(run, tmp_path):
    out = tmp_path / "o"
    r = run("run", "--machine", "mehta-m1", "--workload", "n=300,kind=cpu,exec=200,arrival=random",
            "--domains", "multilevel", "--traces", "5", "--out", out)  # fmt: skip
    assert r.code == 0, r.err
    import pandas as pd

    moves = pd.read_csv(out / "migrations.csv")
    procs = pd.read_csv(out / "processes.csv")
    # Every migration counted per process is in the table, and the other way round.
    counted = procs.set_index("pid")["migrations"]
    assert moves.groupby("pid").size().reindex(counted.index, fill_value=0).equals(counted)
    m = Machine.preset("mehta-m1")
    for row in moves.itertuples():
        assert m.distances[row.from_node][row.to_node] == m.mals[row.level]
        assert row.from_node == row.from_cpu // 2 and row.to_node == row.to_cpu // 2
    lines = [x for x in r.out.splitlines() if x.startswith("pid ")]
    assert len(lines) == 5
    moved = sorted(moves[moves.kind != "placement"].pid.unique())[:5]
    assert [int(x.split()[1]) for x in lines] == moved
    for x in lines:
        assert " moves " in x and " ran most on node " in x and " ended: " in x
