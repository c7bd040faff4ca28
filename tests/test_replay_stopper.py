"""CPU-stopper migrations resolved from the events around them (handwritten traces).

The stopper (``migration/N``) moves a running task for sched_exec, an affinity change and
NUMA balancing alike; its stack (``migration_cpu_stop``) does not say which. In every trace
below, ``work`` (pid 400) runs on CPU 0 from 1.000 s, its CPU's stopper moves it to CPU 1 at
1.001 s, and it runs there until it sleeps at 1.004 s; only the events around the move
differ."""

from __future__ import annotations

import pytest
from numasim.kernel.parse import parse_trace
from numasim.replay.schedule import schedule

SW = "sched_switch: prev_comm={pc} prev_pid={pp} prev_prio=120 prev_state={st} ==> " \
     "next_comm={nc} next_pid={np} next_prio=120"  # fmt: skip
STACK = """     migration/0-20      [000] d..3.     1.001000: <stack trace>
 => set_task_cpu
 => move_queued_task
 => migration_cpu_stop
 => cpu_stopper_thread"""


def _line(task: str, cpu: int, ts: str, body: str, flags: str = "d..2.") -> str:
    return f"{task:>20} [{cpu:03d}] {flags} {ts:>12}: {body}"


def _trace(before: list[str], after: list[str], waker: str = "work-400", stack: bool = True):
    lines = [
        _line("<idle>-0", 0, "1.000000",
              SW.format(pc="swapper/0", pp=0, st="R", nc="work", np=400)),
        *before,
        _line(waker, 0 if waker == "work-400" else 1, "1.001000",
              "sched_wakeup: comm=migration/0 pid=20 prio=0 target_cpu=000", "dN.4."),
        _line("work-400", 0, "1.001000",
              SW.format(pc="work", pp=400, st="R+", nc="migration/0", np=20)),
        _line("migration/0-20", 0, "1.001000",
              "sched_migrate_task: comm=work pid=400 prio=120 orig_cpu=0 dest_cpu=1", "d..3."),
        *([STACK] if stack else []),
        _line("migration/0-20", 0, "1.002000",
              SW.format(pc="migration/0", pp=20, st="S", nc="swapper/0", np=0)),
        _line("<idle>-0", 1, "1.002000",
              SW.format(pc="swapper/1", pp=0, st="R", nc="work", np=400)),
        *after,
        _line("work-400", 1, "1.004000",
              SW.format(pc="work", pp=400, st="S", nc="swapper/1", np=0)),
    ]  # fmt: skip
    s = schedule(parse_trace("\n".join(lines) + "\n", "t", strict=True), "t")
    return [m[3] for m in s.threads[400].migrations]


EXEC = _line("work-400", 1, "1.003000",
             "sched_process_exec: filename=/bin/true pid=400 old_pid=400", ".....")  # fmt: skip
MOVE = _line("work-400", 0, "1.000500", "sched_move_numa: pid=400 tgid=400 ngid=0 src_cpu=0 "
             "src_nid=0 dst_cpu=1 dst_nid=1")  # fmt: skip
SWAP = _line("work-400", 0, "1.000500", "sched_swap_numa: src_pid=400 src_tgid=400 "
             "src_ngid=0 src_cpu=0 src_nid=0 dst_pid=401 dst_tgid=401 dst_ngid=0 dst_cpu=1 "
             "dst_nid=1")  # fmt: skip


def test_an_exec_before_the_task_next_sleeps_makes_it_exec():
    assert _trace([], [EXEC]) == ["exec"]


def test_nothing_around_it_keeps_it_a_stopper_migration():
    assert _trace([], []) == ["stopper"]


def test_a_stopper_woken_by_another_task_is_an_affinity_change():
    """taskset (pid 500) on CPU 1 changes work's CPUs: it queues the stop work."""
    assert _trace([], [EXEC], waker="taskset-500") == ["affinity"]


@pytest.mark.parametrize(
    "call",
    [
        "sys_sched_setaffinity(pid: 0, len: 8, user_mask_ptr: 7ffd1c)",  # tracefs: hex, 0 = self
        "sys_enter_sched_setaffinity: pid: 0x00000190, len: 0x00000008",  # perf: pid 400
    ],
)
def test_a_sched_setaffinity_call_naming_it_is_an_affinity_change(call):
    assert _trace([_line("work-400", 0, "1.000500", call, ".....")], []) == ["affinity"]


def test_a_numa_move_or_swap_traced_before_it_names_it_with_or_without_a_stack():
    assert _trace([MOVE], []) == ["numa_move"]
    assert _trace([MOVE], [], stack=False) == ["numa_move"]
    assert _trace([SWAP], []) == ["numa_swap"]
    # a NUMA move to another CPU is not this migration
    assert _trace([MOVE.replace("dst_cpu=1", "dst_cpu=5")], [EXEC]) == ["exec"]
    # without a stack and without a NUMA event it stays unknown
    assert _trace([], [EXEC], stack=False) == ["unknown"]
