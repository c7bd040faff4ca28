"""Closed-loop replay: a sleep woken by a replayed thread becomes a wait for that thread.

The ping-pong trace (tests/data/traces/ping-pong.txt), two processes on two CPUs, in ms from
1.000 s: ping (200) runs 0-2 on CPU 0, wakes pong and sleeps; pong (300) runs 0-1 on CPU 1,
sleeps until ping wakes it at 2, runs 2-5, wakes ping (a queued wake-up: sched_wakeup is
printed on CPU 0 in the idle task, sched_waking in pong) and sleeps; ping runs 5-7, wakes pong
and exits; pong runs 7-10 and exits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from numasim import _core, replay
from numasim.cli import main
from numasim.kernel.parse import parse_trace
from numasim.machine import Machine
from numasim.replay.closed import NO_WAKER, NOT_REPLAYED
from numasim.replay.schedule import schedule
from numasim.sim import Workload, simulate

TRACES = Path(__file__).parent / "data" / "traces"
PING_PONG = TRACES / "ping-pong.txt"
MS = 1_000_000
PAIR = "^p[io]ng$"


def _machine() -> Machine:
    return Machine.from_file(TRACES / "numactl.txt")


def _imported(text: str | None = None, speeds=(1.0, 1.0), closed=True, **kw):
    text = PING_PONG.read_text() if text is None else text
    sched = schedule(parse_trace(text, "t", strict=True), "t")
    return replay.to_workload(sched, list(speeds), "t", comm=PAIR, closed_loop=closed, **kw)


def _run(imported, policy="linux26"):
    w = Workload(_core.Workload.from_json(json.dumps(imported.workload), "t"))
    return simulate(_machine(), w, policy, seed=0).raw["processes"]


def test_the_waker_is_the_task_sched_waking_ran_in():
    s = schedule(parse_trace(PING_PONG.read_text(), "t", strict=True), "t")
    assert s.threads[200].sleeps == [(1_002 * MS, 1_005 * MS, 300)]  # not the idle task
    assert s.threads[300].sleeps == [(1_001 * MS, 1_002 * MS, 200), (1_005 * MS, 1_007 * MS, 200)]


def test_ping_pong_plans_are_the_trace_s_dependencies():
    """Points by wake-up time: 0 (ping wakes pong at 2), 1 (pong wakes ping at 5), 2 (ping
    wakes pong at 7). Each process its own group: one application each, sharing points."""
    imported = _imported()
    w = imported.workload
    assert [t.pid for t in imported.threads] == [200, 300]
    assert [(p["kind"], p["demand_ns"], p["tgid"]) for p in w["processes"]] == [
        ("cpu", 4 * MS, 0),
        ("cpu", 7 * MS, 1),
    ]
    ping, pong = (a["plans"][0] for a in w["apps"])
    assert ping == [
        {"work_ns": 2 * MS, "signal": 0},
        {"wait": {"point": 1, "count": 1}, "work_ns": 2 * MS, "signal": 2},
    ]
    assert pong == [
        {"work_ns": 1 * MS},
        {"wait": {"point": 0, "count": 1}, "work_ns": 3 * MS, "signal": 1},
        {"wait": {"point": 2, "count": 1}, "work_ns": 3 * MS},
    ]
    assert all(a["shared_points"] and a["points"] == 3 for a in w["apps"])
    assert imported.closed.waits == 3 and not imported.closed.timed


def test_closed_loop_on_a_slower_machine_stretches_both_open_loop_does_not():
    """Traced on CPUs twice as fast as the replay's (speeds 2.0): every burst takes twice as
    long. Closed loop (hand-computed): ping 0-4, pong 0-2 then waits; pong 4-10; ping 10-14;
    pong 14-20: turnarounds 14 and 20 ms, twice the real 7 and 10, and each waits twice as
    long (6 ms, against 3 on the traced machine). Open loop: the sleeps are timed blocks
    drawn from the same generator whatever the machine, so each thread's turnaround grows by
    its own extra CPU time only, and its waits do not move."""
    same, slower = _run(_imported()), _run(_imported(speeds=(2.0, 2.0)))
    assert [p["turnaround_ms"] for p in same] == [7.0, 10.0]
    assert [p["sync_wait_ms"] for p in same] == [3.0, 3.0]
    assert [p["turnaround_ms"] for p in slower] == [14.0, 20.0]
    assert [p["sync_wait_ms"] for p in slower] == [6.0, 6.0]
    open_same = _run(_imported(closed=False))
    open_slower = _run(_imported(speeds=(2.0, 2.0), closed=False))
    for a, b in zip(open_same, open_slower, strict=True):
        assert a["io_wait_ms"] == b["io_wait_ms"] > 0
        assert b["turnaround_ms"] - a["turnaround_ms"] == pytest.approx(a["cpu_ms"], abs=1e-3)
        assert b["turnaround_ms"] < 2 * a["turnaround_ms"]


def test_a_waker_not_replayed_or_an_interrupt_leaves_a_timed_block():
    # Only ping replayed: pong's wake-up of ping stays a 3 ms sleep.
    alone = _imported(pids={200}).workload
    assert alone["apps"][0]["plans"][0] == [
        {"work_ns": 2 * MS},
        {"sleep_ns": 3 * MS, "work_ns": 2 * MS},
    ]
    assert _run(_imported(pids={200}))[0]["turnaround_ms"] == 7.0
    assert _imported(pids={200}).closed.timed == {NOT_REPLAYED: 1}
    # pong's wake-up of ping traced in interrupt context (hardirq flag): no waker.
    text = PING_PONG.read_text().replace(
        "d..2.     1.005000: sched_waking", "d.h2.     1.005000: sched_waking"
    )
    imported = _imported(text)
    assert imported.closed.timed == {NO_WAKER: 1} and imported.closed.waits == 2
    ping, pong = (a["plans"][0] for a in imported.workload["apps"])
    assert ping[1] == {"sleep_ns": 3 * MS, "work_ns": 2 * MS, "signal": 1}
    assert pong[1] == {"wait": {"point": 0, "count": 1}, "work_ns": 3 * MS}


def test_threads_of_groups_are_made_consecutive():
    """Closed loop needs an application's threads at consecutive pids: a group's threads are
    kept together, groups in the order of their first thread's arrival. Here pong is a thread
    of bash's process (the tgid column), ping a process of its own: by arrival alone the pids
    would be bash, ping, pong."""
    text = "\n".join(
        line.replace("bash-50 ", "bash-50 (   50) ")
        .replace("ping-200 ", "ping-200 (  200) ")
        .replace("pong-300 ", "pong-300 (   50) ")
        .replace("<idle>-0 ", "<idle>-0 (-----) ")
        for line in PING_PONG.read_text().splitlines()
    )
    sched = schedule(parse_trace(text, "t", strict=True), "t")
    imported = replay.to_workload(sched, [1.0, 1.0], "t", closed_loop=True)
    assert [t.pid for t in imported.threads] == [50, 300, 200]
    assert [p["tgid"] for p in imported.workload["processes"]] == [0, 0, 2]
    assert [(a["tgid"], len(a["plans"])) for a in imported.workload["apps"]] == [(0, 2), (2, 1)]
    done = _run(imported)
    assert done[1]["turnaround_ms"] >= 10.0 and done[2]["turnaround_ms"] >= 7.0


def test_import_trace_and_replay_commands_take_closed_loop(tmp_path, capsys):
    out = tmp_path / "w.json"
    code = main(["import-trace", str(PING_PONG), "--comm", PAIR, "--closed-loop",
                 "-o", str(out)])  # fmt: skip
    assert code == 0
    text = capsys.readouterr().out
    assert "closed loop: 3 sleeps wait for their waker, 0 stay timed blocks" in text
    assert len(json.loads(out.read_text())["apps"]) == 2
    code = main(["import-trace", str(PING_PONG), "--pids", "200", "--closed-loop", "--json"])
    summary = json.loads(capsys.readouterr().out)
    assert summary["closed_loop"] == {"waits": 0, "timed": {NOT_REPLAYED: 1}}
    code = main(["replay", str(PING_PONG), "--comm", PAIR, "--policy", "linux26",
                 "--closed-loop"])  # fmt: skip
    text = capsys.readouterr().out
    assert code == 0 and "closed loop: 3 sleeps" in text
    assert "turnaround_ms  real       8.50  sim       8.50  diff      +0.00" in text
    code = main(["replay", str(PING_PONG), "--comm", PAIR, "--policy", "linux26",
                 "--closed-loop", "--json"])  # fmt: skip
    assert code == 0
    assert json.loads(capsys.readouterr().out)["closed_loop"] == {"waits": 3, "timed": {}}
    code = main(["replay", str(PING_PONG), "--comm", PAIR, "--policy", "linux26", "--json"])
    assert code == 0 and "closed_loop" not in json.loads(capsys.readouterr().out)


def test_a_real_kernel_trace_replays_closed_loop_to_the_end():
    """Every thread of a real Linux 6.1 trace (kernel workers left out), closed loop: the
    workload passes the core's checks and every thread completes (no wait is left unsignalled
    and the plans wait in no cycle). Most of its sleeps were ended by interrupts."""
    path = Path(__file__).parent / "data/kernel/runs/ring-4x2-k6.1-t16-released-nboff"
    files = replay.read(path / "boot-0.raw.tar.gz")
    machine = replay.machine_beside(files)
    _, imported = replay.import_trace(files, machine, closed_loop=True)
    assert imported.closed.waits > 0 and sum(imported.closed.timed.values()) > 0
    w = Workload(_core.Workload.from_json(json.dumps(imported.workload), "t"))
    done = simulate(machine, w, "linux26", seed=0).raw["processes"]
    assert all(p["turnaround_ms"] is not None for p in done)
    assert len(done) == len(imported.threads)
