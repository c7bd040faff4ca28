"""Importing a scheduler trace into a workload: the three text formats, the per-thread state
machine on a hand-computed schedule, a real kernel's trace, and bad traces."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numasim import _core, replay
from numasim._core import InputError
from numasim.cli import main
from numasim.kernel.parse import parse_trace
from numasim.machine import Machine
from numasim.replay.schedule import schedule

DATA = Path(__file__).parent / "data"
TRACES = DATA / "traces"
FORMATS = ["tracefs-small.txt", "trace-cmd-small.txt", "perf-script-small.txt"]
HARNESS = DATA / "kernel/runs/ring-4x2-k6.12-t8-fork-nboff/boot-0.raw.tar.gz"
MS = 1_000_000


def _sched(text: str):
    return schedule(parse_trace(text, "t", strict=True), "t")


@pytest.mark.parametrize("name", FORMATS)
def test_hand_computed_schedule_in_each_format(name):
    """pid 100: forked on CPU 0 at 1.000 s, placed on CPU 1; runs 1.001-1.011 on CPU 1, sleeps
    until bash (50) wakes it at 1.021, waits 2 ms, runs 1.023-1.028 on CPU 0, is preempted
    (R+) for 2 ms and runs 1.030-1.0355 before it exits."""
    s = _sched((TRACES / name).read_text())
    t = s.threads[100]
    assert (t.fork_ts, t.fork_cpu, t.placed_cpu, t.parent) == (1_000 * MS, 0, 1, 50)
    assert t.runs == [
        (1_001 * MS, 1_011 * MS, 1),
        (1_023 * MS, 1_028 * MS, 0),
        (1_030 * MS, 1_035_500_000, 0),
    ]
    assert t.run_ns == 20_500_000
    assert t.sleeps == [(1_011 * MS, 1_021 * MS, 50)]
    assert t.waits == [
        (1_000_100_000, 1_001 * MS, False),
        (1_021 * MS, 1_023 * MS, True),
        (1_028 * MS, 1_030 * MS, False),
    ]
    assert t.migrations == [(1_000_100_000, 0, 1, "fork"), (1_022 * MS, 1, 0, "unknown")]
    assert t.exit_ts == 1_035 * MS and t.state == "dead"
    assert s.threads[30].per_cpu_kthread == 1
    assert 0 not in s.threads


def test_the_three_formats_give_the_same_workload():
    machine = Machine.from_file(TRACES / "numactl.txt")
    workloads = []
    for name in FORMATS:
        files = replay.read(TRACES / name)
        _, imported = replay.import_trace(files, machine, comm="^loop$")
        workloads.append(imported.workload)
    assert workloads[0] == workloads[1] == workloads[2]
    (p,) = workloads[0]["processes"]
    assert p["demand_ns"] == 20_500_000 and p["kind"] == "io"
    assert p["burst_mean_ns"] == 10 * MS  # the burst before the sleep; the last one is cut
    assert p["wait_mean_ns"] == 10 * MS
    assert (p["pid"], p["tgid"], p["arrival_ns"], p["spawn_cpu"]) == (0, 0, 0, 0)


def test_per_cpu_kernel_threads_are_dropped_unless_kept():
    machine = Machine.from_file(TRACES / "numactl.txt")
    files = replay.read(TRACES / "tracefs-small.txt")
    _, dropped = replay.import_trace(files, machine)
    assert [t.pid for t in dropped.threads] == [50, 100]
    assert [t.comm for t in dropped.dropped_kernel] == ["kworker/1:1"]
    _, kept = replay.import_trace(files, machine, keep_kernel=True)
    pinned = next(p for p, t in zip(kept.workload["processes"], kept.threads, strict=True)
                  if t.pid == 30)  # fmt: skip
    assert pinned["affinity"] == [{"at_ns": 0, "cpus": "1"}] and pinned["spawn_cpu"] == 1
    assert any("pinned to 1" in n for n in kept.notes)


def test_speed_scales_demand():
    """The same trace on a machine whose CPU 1 runs at half speed: the 10 ms on CPU 1 is 5 ms
    of work."""
    files = replay.read(TRACES / "tracefs-small.txt")
    sched, _ = replay.import_trace(files, Machine.from_file(TRACES / "numactl.txt"))
    imported = replay.to_workload(sched, [1.0, 0.5], "t", pids={100})
    assert imported.workload["processes"][0]["demand_ns"] == 15_500_000


def test_harness_trace_imports_with_the_run_record():
    """The real-kernel harness's trace of eight busy loops on ring-4x2 (Linux 6.12): each loop
    ran as long as the harness's own analysis of the same trace says (inside its window), and
    the machine beside the trace is the run's."""
    files = replay.read(HARNESS)
    machine = replay.machine_beside(files)
    assert machine is not None and machine.cpus == 8 and machine.nodes == 4
    _, imported = replay.import_trace(files, machine, pids=set(range(256, 264)))
    procs = imported.workload["processes"]
    assert [t.pid for t in imported.threads] == list(range(256, 264))
    assert all(p["kind"] == "cpu" for p in procs)  # busy loops never sleep
    assert all(p["spawn_cpu"] == 0 for p in procs)  # forked by a parent on CPU 0
    record = json.loads(gzip.decompress((HARNESS.parent / "boot-0.json.gz").read_bytes()))
    window = record["window"]
    for t in imported.threads:
        clipped = sum(
            max(0, min(b, window["end_ns"]) - max(a, window["start_ns"])) for a, b, _ in t.runs
        )
        task = next(x for x in record["tasks"] if x["pid"] == t.pid)
        assert clipped == task["run_ns"]
        placed = next(x for x in record["tasks"] if x["pid"] == t.pid)["first_cpu"]
        assert t.placed_cpu == placed
    _core.Workload.from_json(json.dumps(imported.workload), "t")  # a valid workload


# --- bad traces ---------------------------------------------------------------------------

GOOD = (TRACES / "tracefs-small.txt").read_text()
EVENT_LINES = [line for line in GOOD.splitlines() if not line.startswith("#")]


def _bad(lines: list[str]) -> str:
    with pytest.raises(InputError) as e:
        _sched("\n".join(lines) + "\n")
    return str(e.value)


def test_two_cpus_at_once_is_refused():
    twin = EVENT_LINES[2].replace("[001]", "[000]").replace("1.001000", "1.001500")
    message = _bad([*EVENT_LINES[:3], twin])
    assert (
        "line 4" in message and "pid 100 is switched in on CPU 0 while it runs on CPU 1" in message
    )


def test_time_going_backwards_is_refused():
    lines = [*EVENT_LINES[:3], EVENT_LINES[3].replace("1.011000", "1.000500")]
    assert "line 4: time goes backwards (1.000500000 s after 1.001000000 s on line 3)" in _bad(
        lines
    )


def test_a_cut_last_line_is_refused():
    text = "\n".join(EVENT_LINES[:3]) + "\n" + EVENT_LINES[3][:30]
    with pytest.raises(InputError, match="line 4: cut short"):
        parse_trace(text, "t", strict=True)


def test_an_event_without_its_fields_is_refused():
    lines = [*EVENT_LINES[:2], EVENT_LINES[2].split(" ==> ")[0]]
    assert "line 3: sched_switch without next_pid: not the kernel's format" in _bad(lines)


def test_an_unknown_line_and_lost_events_are_refused():
    assert "line 2: not a trace event line" in _bad([EVENT_LINES[0], "garbage here"])
    assert "events were lost" in _bad([EVENT_LINES[0], "CPU:1 [LOST 42 EVENTS]"])


def test_a_cpu_switching_out_another_thread_is_refused():
    wrong = EVENT_LINES[3].replace("prev_pid=100", "prev_pid=77")
    assert "CPU 1 switches out pid 77, but pid 100 was switched in there (line 3)" in _bad(
        [*EVENT_LINES[:3], wrong]
    )


# --- the command ----------------------------------------------------------------------------


def test_import_trace_command_writes_a_workload_that_runs(tmp_path, capsys):
    out = tmp_path / "w.json"
    code = main(["import-trace", str(HARNESS), "--pids", "256-263", "-o", str(out)])
    assert code == 0
    assert "8 processes (0 io, 8 cpu)" in capsys.readouterr().out
    machine = str(DATA / "kernel/ring-4x2.toml")
    code = main(["run", "--machine", machine, "--policy", "linux", "--workload", str(out)])
    assert code == 0


def test_import_trace_command_bad_input_is_one_line(tmp_path, capsys):
    bad = tmp_path / "trace"
    bad.write_text(GOOD.replace("1.011000", "0.900000"))
    (tmp_path / "numactl.txt").write_text((TRACES / "numactl.txt").read_text())
    assert main(["import-trace", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"{bad}: line 10: time goes backwards" in err
    assert main(["import-trace", str(TRACES / "tracefs-small.txt"), "--machine", "mehta-m1",
                 "--pids", "999"]) == 2  # fmt: skip
    assert "no thread with pid 999" in capsys.readouterr().err


# --- rt-app ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec",
    [
        "n=30,kind=mixed,exec=200,arrival=periodic:5,burst=10,wait=20",
        "n=6,kind=io,exec=25,burst=10,wait=3,threads=3,pin=cpus:0-3,spawn=cpu:1",
        "n=4,kind=io,exec=4,burst=10,wait=5",  # demand under one burst: no sleep to write
    ],
)
def test_rtapp_round_trip_gives_the_same_workload(spec, tmp_path):
    from numasim.replay import rtapp
    from numasim.sim import Workload

    machine = Machine.preset("mehta-m1")
    original = json.loads(Workload.generate(machine, spec, seed=3)._core.to_json())
    written = json.dumps(rtapp.export(original))
    back = rtapp.load(json.loads(written), "rt-app")
    assert back == {"processes": original["processes"]}
    assert main(["export-rtapp", "--machine", "mehta-m1", "--workload", spec, "--seed", "3",
                 "-o", str(tmp_path / "r.json")]) == 0  # fmt: skip
    assert main(["import-trace", str(tmp_path / "r.json"), "-o", str(tmp_path / "w.json")]) == 0
    assert json.loads((tmp_path / "w.json").read_text())["processes"] == original["processes"]


def test_rtapp_task_of_the_tutorial_kind():
    """rt-app's single-phase form (events in the task): 3 instances of run 10 ms / sleep 5 ms,
    4 loops, 2 ms after the start, on CPUs 2 and 3; the last burst ends in a sleep."""
    from numasim.replay import rtapp

    data = {"tasks": {"t": {"instance": 3, "loop": 4, "delay": 2000, "run": 10000,
                            "sleep": 5000, "cpus": [2, 3]}}}  # fmt: skip
    procs = rtapp.load(data, "r")["processes"]
    assert len(procs) == 3
    p = procs[1]
    assert (p["pid"], p["tgid"], p["arrival_ns"], p["demand_ns"], p["kind"]) == (
        1, 1, 2 * MS, 40 * MS, "io")  # fmt: skip
    assert (p["burst_mean_ns"], p["wait_mean_ns"], p["spawn_cpu"]) == (10 * MS, 5 * MS, 2)
    assert p["affinity"] == [{"at_ns": 0, "cpus": "2-3"}]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"tasks": {"t": {"run": 10, "loop": -1}}}, "tasks.t.loop: -1: a task repeated forever"),
        ({"tasks": {"t": {"run": 10, "lock": "m"}}}, "tasks.t.phases.p.lock: an rt-app event"),
        ({"tasks": {"t": {"sleep": 10}}}, "tasks.t: no run event"),
        ({"tasks": {"t": {"run": 1.5}}}, "tasks.t.phases.p.run: 1.5 is not a whole number"),
        ({"global": {}}, "not an rt-app description"),
    ],
)
def test_bad_rtapp_is_one_line(data, message):
    from numasim.replay import rtapp

    with pytest.raises(InputError, match=message.replace(".", r"\.")):
        rtapp.load(data, "r")


# --- the replay beside the real schedule ------------------------------------------------------


def test_replay_of_a_harness_trace_under_linux_beside_the_real_schedule(capsys):
    """One command: the eight loops of a real Linux 6.12 run replayed under linux on the same
    machine. The real side agrees with the harness's own record of the boot (migrations by
    kind; run time per task); the simulated side ran every task to its traced demand."""
    assert main(["replay", str(HARNESS), "--pids", "256-263", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (
        out["policy"] == "linux"
        and out["tasks"] == 8
        and out["traced_pids"] == list(range(256, 264))
    )
    runs = json.loads((HARNESS.parent / "runs.json").read_text())
    assert out["migrations_by_kind"]["real"] == runs["summaries"][0]["by_kind"]
    record = json.loads(gzip.decompress((HARNESS.parent / "boot-0.json.gz").read_bytes()))
    run_ms = sorted(t["run_ms"] for t in out["real"])
    assert run_ms[0] >= min(t["run_ns"] for t in record["tasks"]) / MS
    for real, sim in zip(out["real"], out["sim"], strict=True):
        assert sim["run_ms"] >= real["run_ms"]  # the demand is the traced time, plus overheads
        assert sum(real["cpu_ms_by_node"]) == pytest.approx(real["run_ms"])
    paired = out["paired"]["run_ms"]
    assert paired["diff_mean"] == pytest.approx(paired["sim_mean"] - paired["real_mean"])
    w = out["wait_distribution"]
    assert 0 <= w["ks_statistic"] <= 1 and w["wasserstein_ms"] >= 0


def test_replay_on_another_machine_keeps_the_real_side(capsys):
    assert main(["replay", str(HARNESS), "--pids", "256-263", "--json"]) == 0
    same = json.loads(capsys.readouterr().out)
    assert main(["replay", str(HARNESS), "--pids", "256-263", "--json",
                 "--machine", "mehta-m1", "--policy", "linux26"]) == 0  # fmt: skip
    other = json.loads(capsys.readouterr().out)
    assert other["real"] == same["real"] and other["machine"] == "mehta-m1"
    assert len(other["cpu_ms_by_node"]["sim"]) == Machine.preset("mehta-m1").nodes


def test_thread_groups_from_the_tgid_column_and_perf_pid_tid():
    """tracefs with record-tgid prints ``TASK-PID (TGID) [CPU]``, perf script -F …pid,tid…
    ``COMM PID/TID [CPU]``: two threads of group 100 become one thread group."""
    tracefs = "\n".join([
        "       a-100   (  100) [000] d..2.  1.000000: sched_switch: prev_comm=a prev_pid=100 "
        "prev_prio=120 prev_state=S ==> next_comm=b next_pid=101 next_prio=120",
        "       b-101   (  100) [000] d..2.  1.001000: sched_switch: prev_comm=b prev_pid=101 "
        "prev_prio=120 prev_state=S ==> next_comm=c next_pid=7 next_prio=120",
        "       c-7     (    7) [000] d..2.  1.002000: sched_switch: prev_comm=c prev_pid=7 "
        "prev_prio=120 prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120",
    ]) + "\n"  # fmt: skip
    perf = "\n".join([
        "  a   100/100 [000] 1.000000: sched:sched_switch: prev_comm=a prev_pid=100 "
        "prev_prio=120 prev_state=S ==> next_comm=b next_pid=101 next_prio=120",
        "  b   100/101 [000] 1.001000: sched:sched_switch: prev_comm=b prev_pid=101 "
        "prev_prio=120 prev_state=S ==> next_comm=c next_pid=7 next_prio=120",
        "  c     7/7   [000] 1.002000: sched:sched_switch: prev_comm=c prev_pid=7 "
        "prev_prio=120 prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120",
    ]) + "\n"  # fmt: skip
    for text in (tracefs, perf):
        imported = replay.to_workload(_sched(text), [1.0], "t")
        # all alive when the trace began: in pid order at its start
        assert [t.pid for t in imported.threads] == [7, 100, 101]
        assert [(p["pid"], p["tgid"]) for p in imported.workload["processes"]] == [
            (0, 0), (1, 1), (2, 1)]  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([*EVENT_LINES, "", "# c", "x", "CPU 0 is empty"]), max_size=12),
       st.text(max_size=40))  # fmt: skip
def test_any_text_is_read_or_refused_in_one_line(lines, tail):
    """Whatever the lines (shuffled real ones, junk), the reader and the state machine give a
    schedule or an InputError naming a line, never another exception."""
    text = "\n".join([*lines, tail])
    try:
        events = parse_trace(text, "t", strict=True)
        if events:
            schedule(events, "t")
    except InputError as e:
        assert "\n" not in str(e) and str(e).startswith("t: ")


def test_the_replay_page_loads_in_headless_chromium(tmp_path, capsys):
    """numasim replay --report: both schedules and the differences on one self-contained page
    that a real browser loads without errors, drawing its two figures."""
    from test_run_report import _body_status, _dump_dom

    page = tmp_path / "replay.html"
    args = ["replay", str(HARNESS), "--pids", "256-263", "--report", str(page)]
    assert main(args) == 0
    text = page.read_text()
    for section in ["Differences", "Runs", "Schedules", "Waiting", "Migrations", "Tasks"]:
        assert f"<h2>{section}</h2>" in text
    assert text.count("<figure><svg") == 3 and '<td>fork</td><td class="num">8</td>' in text
    assert '<td>1 NUMA</td><td class="num">4</td><td class="num">4</td>' in text
    status = _body_status(_dump_dom(page, tmp_path))
    assert status == {"loaded": "yes", "figures": "3", "figures-drawn": "3", "errors": "0",
                      "error-list": ""}  # fmt: skip


def test_same_time_switches_on_two_cpus_are_taken_in_causal_order():
    """A real Linux 6.12 trace printed pid 415's switch-in on CPU 1 before its switch-out on
    CPU 9, both at 29.147855 s: with one timestamp the print order of two CPUs says nothing,
    and the switch-out is applied first. Apart by a microsecond, it is refused."""
    lines = [
        "  a-1 [001] d..2. 1.000000: sched_switch: prev_comm=a prev_pid=1 prev_prio=120 "
        "prev_state=S ==> next_comm=sh next_pid=415 next_prio=120",
        "  c-3 [001] d..2. 1.000500: sched_switch: prev_comm=sh prev_pid=415 prev_prio=120 "
        "prev_state=R ==> next_comm=c next_pid=3 next_prio=120",
        "  b-2 [009] d..2. 1.000500: sched_switch: prev_comm=b prev_pid=2 prev_prio=120 "
        "prev_state=S ==> next_comm=sh next_pid=415 next_prio=120",
        "  c-3 [001] d..2. 1.002000: sched_switch: prev_comm=c prev_pid=3 prev_prio=120 "
        "prev_state=S ==> next_comm=sh next_pid=415 next_prio=120",
        "  sh-415 [009] d..2. 1.002000: sched_switch: prev_comm=sh prev_pid=415 prev_prio=120 "
        "prev_state=R ==> next_comm=d next_pid=4 next_prio=120",
    ]
    s = _sched("\n".join(lines) + "\n")
    assert s.threads[415].runs == [
        (1_000 * MS, 1_000_500_000, 1),
        (1_000_500_000, 1_002 * MS, 9),
        (1_002 * MS, 1_002 * MS, 1),
    ]
    lines[4] = lines[4].replace("1.002000", "1.002001")
    assert "line 4: pid 415 is switched in on CPU 1 while it runs on CPU 9" in _bad(lines)


def test_every_kept_harness_trace_imports():
    """All 64 real-kernel traces kept in the tests (Linux 6.1 and 6.12, 4 to 16 nodes, NUMA
    balancing on and off) import, each with its machine from the capture beside it."""
    runs = sorted((DATA / "kernel/runs").glob("*/boot-*.raw.tar.gz"))
    assert len(runs) == 64
    for path in runs:
        files = replay.read(path)
        machine = replay.machine_beside(files)
        _, imported = replay.import_trace(files, machine)
        assert imported.workload["processes"], path
