"""Perfetto/Chrome traces from Python: the rules on a real run, the hand-checked run (its golden
snapshot is in the core's tests), saved runs and `numasim trace`, windows, bad options."""

from __future__ import annotations

import json
import os

from numasim import Machine, Workload, simulate
from numasim.trace import chrome_trace, problems

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


def test_problems_reach_the_core_checker():
    # The rules themselves are tested in crates/numasim-core/tests/trace.rs; this checks that
    # the Python entry point reports what the core finds.
    bad = {"traceEvents": [
        {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "node 0"}},
        {"ph": "X", "name": "c", "pid": 0, "tid": 1, "ts": 0, "dur": 1},
    ]}  # fmt: skip
    assert problems(bad) == ["X event on unnamed thread 0/1"]


def test_a_python_run_traces_like_the_core_golden(tmp_path):
    # The hand-checked two-CPU run of crates/numasim-core/tests/trace.rs (its insta snapshot is
    # the golden trace), here with default balancing costs: each slice also holds the
    # balancing work done on its CPU (a few µs), and P1's slice on CPU 1 its cache refill.
    m_path = tmp_path / "two.toml"
    m_path.write_text(TWO_CPUS)
    w_path = tmp_path / "w.csv"
    rows = ["0,0,0,100000000,cpu,0.5,0,10000000,20000000,0",
            "1,1,0,300000000,cpu,0.5,0,10000000,20000000,1",
            "2,2,0,300000000,cpu,0.5,0,10000000,20000000,2"]  # fmt: skip
    w_path.write_text(HEADER + "\n".join(rows) + "\n")
    m = Machine.from_file(m_path)
    r = simulate(m, Workload.load(w_path), domains="flat", trace=True)
    trace = chrome_trace(m, r.raw_json)
    assert problems(trace) == []
    slices = sorted((e["tid"], e["name"], e["ts"], e["dur"]) for e in trace["traceEvents"]
                    if e["ph"] == "X")  # fmt: skip
    assert slices == [
        (0, "pid 1", 0.0, 100000.0),
        (0, "pid 2", 100000.0, 300002.0),
        (1, "pid 0", 0.0, 100002.0),
        (1, "pid 1", 103000.0, 200115.2),
    ]
    flows = [(e["ph"], e["tid"], e["ts"]) for e in trace["traceEvents"] if e["ph"] in "sf"]
    assert flows == [("s", 0, 99999.999), ("f", 1, 103000.001)]


def test_a_saved_run_gives_the_trace_of_the_run(tmp_path, run):
    args = ["run", "--machine", "mehta-m3", "--workload", "n=40,exec=50", "--seed", "3",
            "--policy", "origin-aware", "--out", tmp_path / "o"]  # fmt: skip
    r = run(*args, "--trace", tmp_path / "direct.json", "--trace-window", "5:40")
    assert r.code == 0, r.err
    assert "o/run.json" in r.out and "o/events.json" in r.out
    r = run("trace", tmp_path / "o", "--trace-window", "5:40")
    assert (r.code, r.err) == (0, "")
    assert r.out == f"wrote {tmp_path / 'o' / 'trace.json'}\n"
    assert (tmp_path / "o" / "trace.json").read_text() == (tmp_path / "direct.json").read_text()
    r = run("trace", tmp_path / "o", "-o", tmp_path / "all.json", "--report", tmp_path / "r.html")
    assert r.code == 0, r.err
    trace = json.loads((tmp_path / "all.json").read_text())
    assert problems(trace) == [] and trace["otherData"]["machine"] == "mehta-m3"
    assert "<svg" in (tmp_path / "r.html").read_text()


def test_trace_into_a_run_directory_in_use_is_refused(tmp_path, run):
    """Writing into the run's directory takes its lock, as `run --out` does; elsewhere it
    does not need it."""
    from numasim.store import lock

    d = tmp_path / "o"
    assert run("run", "--machine", "mehta-m3", "--workload", "n=4", "--out", d).code == 0
    with lock(d):
        r = run("trace", d)
        assert (r.code, r.err) == (2, f"numasim: error: {d} is in use by another numasim "
                                      f"(pid {os.getpid()})\n")  # fmt: skip
        assert not (d / "trace.json").exists()
        assert run("trace", d, "-o", tmp_path / "elsewhere.json").code == 0
    assert run("trace", d).code == 0 and (d / "trace.json").exists()


def test_bad_saved_runs(tmp_path, run):
    r = run("trace", tmp_path / "nope")
    assert (r.code, r.err) == (2, f"numasim: error: {tmp_path / 'nope'}: not a directory "
                                  "(numasim run --out DIR saves a run there)\n")  # fmt: skip
    d = tmp_path / "o"
    assert run("run", "--machine", "mehta-m3", "--workload", "n=4", "--out", d).code == 0
    run_json = json.loads((d / "run.json").read_text())
    # Without its digest (as a run saved before digests), so that each check below is reached;
    # the digest itself is tested in test_hostile_input.py.
    del run_json["digest"]
    (d / "run.json").write_text(json.dumps(run_json))
    events = (d / "events.json").read_text()
    bad_table = {**run_json["machine"], "distances": [[10, 5], [5, 10]]}
    off_machine = json.loads(events)
    off_machine["trace"][0]["cpu"] = 999
    cpus = len(run_json["machine"]["cpus"])
    cases = [
        ("run.json", "{", "run.json: line 1: not valid JSON: Expecting property name enclosed"),
        ("run.json", json.dumps({**run_json, "format": 7}), "run.json: field format: 7 is not 1"),
        ("run.json", json.dumps({**run_json, "machine": bad_table}),
         "run.json (field distances): row 0, column 1: 5 is below 10"),
        ("events.json", events[:100], "events.json: EOF while parsing"),
        ("events.json", "{}", "events.json: missing field `processes`"),
        ("events.json", json.dumps(off_machine),
         f"events.json: field trace, entry 0: CPU 999, but the machine has {cpus} CPUs\n"),
    ]  # fmt: skip
    for name, text, message in cases:
        good = (d / name).read_text()
        (d / name).write_text(text)
        r = run("trace", d)
        assert r.code == 2 and r.err.startswith(f"numasim: error: {d}/{message}"), r.err
        assert r.err.count("\n") == 1
        (d / name).write_text(good)
    # The report also needs the summary, which a trace does not read.
    no_summary = json.loads(events)
    del no_summary["summary"]
    (d / "events.json").write_text(json.dumps(no_summary))
    r = run("trace", d, "--report", tmp_path / "r.html")
    assert (r.code, r.err) == (2, f"numasim: error: {d}/events.json: field summary: missing\n")
    assert (d / "trace.json").is_file(), "the trace made before the error is kept"
    broken = json.loads(events)
    del broken["summary"]["balance"]
    (d / "events.json").write_text(json.dumps(broken))
    r = run("trace", d, "--report", tmp_path / "r.html")
    assert (r.code, r.err) == (2, f"numasim: error: {d}/events.json: not a result numasim "
                                  "wrote: KeyError 'balance'\n")  # fmt: skip
    (d / "events.json").unlink()
    r = run("trace", d)
    assert r.code == 2 and "events.json: cannot read the saved run" in r.err


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
    # What "ended" means is printed with the traces, and each value follows it.
    legend = r.out.splitlines()[-2]  # before the "wrote ..." line
    assert legend == (
        "ended: the node of the last move, seen from the origin node (home: the origin node "
        "itself, nearest neighbour: a node at distance 20, the smallest between two nodes; "
        "otherwise the distance)"
    )
    for x in lines:
        origin = int(x.split("origin node ")[1].split()[0])
        last_move = x.split(" moves ")[1].split("  ")[0].split()[-1]  # "FROM→TO@Tms"
        last = int(last_move.split("→")[1].split("@")[0]) // 2  # mehta-m1: 2 CPUs a node
        ended = x.split(" ended: ")[1]
        d = m.distances[origin][last]
        assert ended == ("home" if last == origin else "nearest neighbour (distance 20)"
                         if d == 20 else f"distance {d}")  # fmt: skip
