"""A real schedule from a trace's events: what each thread did, when and where.

A per-thread state machine over the scheduler's tracepoints (docs/workloads.md, "Replaying a
real trace"):

```text
   fork ──► new ──wakeup_new──► runnable ──switch in──► running ──switch out, R──► runnable
                                    ▲                      │
                                    └──── wakeup ◄── sleeping (S, D, I, …: switch out)
                                                           │
                                            exit: dead ◄───┘ (switch out, X or Z)
```

Running time is summed between switch-in and switch-out; a thread is runnable from a wake-up
(or a preemption, or its creation) until it is switched in, and sleeping from a voluntary
switch-out until its wake-up, whose waker (the thread running where the wake-up was traced) is
kept. A thread the trace does not see forked existed when it began: it arrives at the
trace's start. The idle task (pid 0) is no thread.

Strict: a thread switched in on a CPU while it runs on another, a CPU switching out a thread
other than the one it switched in, and a scheduler event without the fields of its kernel
format are refused, naming the line (``InputError``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from numasim._core import InputError
from numasim.kernel.parse import Event, classify

#: The events the state machine reads; every other event of the trace is passed over.
EVENTS = frozenset(
    {
        "sched_switch",
        "sched_wakeup",
        "sched_wakeup_new",
        "sched_waking",
        "sched_process_fork",
        "sched_process_exit",
        "sched_process_exec",
        "sched_migrate_task",
        "sched_move_numa",
        "sched_swap_numa",
    }
)
#: The fields each of them must carry (the kernel's format of the event).
FIELDS = {
    "sched_switch": ("prev_pid", "prev_state", "next_pid"),
    "sched_wakeup": ("pid",),
    "sched_wakeup_new": ("pid",),
    "sched_process_fork": ("pid", "child_pid"),
    "sched_process_exit": ("pid",),
    "sched_migrate_task": ("pid", "orig_cpu", "dest_cpu"),
    "sched_move_numa": ("pid",),
    "sched_swap_numa": ("src_pid",),
}
#: A per-CPU kernel thread's name: ``kworker/3:1``, ``kworker/0:1H-events_highpri``,
#: ``ksoftirqd/3``, ``migration/3``, ``cpuhp/3``, ``rcuc/3``, ``idle_inject/3``, … (the
#: unbound workers, ``kworker/u16:2``, are not per-CPU).
PER_CPU_KTHREAD = re.compile(r"^[a-z_]+/(?P<cpu>\d+)(?::\d+H?)?(?:-\S+)?$")


@dataclass
class Thread:
    """What the trace shows of one thread (all times in ns of the trace clock)."""

    pid: int
    comm: str
    first_ts: int
    tgid: int | None = None
    parent: int | None = None
    #: Its fork (``None``: it existed when the trace began) and the parent's CPU then.
    fork_ts: int | None = None
    fork_cpu: int | None = None
    #: The CPU ``sched_wakeup_new`` placed it on.
    placed_cpu: int | None = None
    exit_ts: int | None = None
    #: (start, end, CPU) of each time it ran.
    runs: list[tuple[int, int, int]] = field(default_factory=list)
    #: Each time it waited runnable: (start, end, after a wake-up).
    waits: list[tuple[int, int, bool]] = field(default_factory=list)
    #: Each sleep: (start, end, waker pid; ``None`` when not traced, or when woken from an
    #: interrupt or the idle task). The waker is the task sched_waking was traced in (else
    #: sched_wakeup's), unless the latency flags show interrupt context.
    sleeps: list[tuple[int, int, int | None]] = field(default_factory=list)
    #: Each migration: (time, from CPU, to CPU, kind): a kind of numasim.kernel.parse.KINDS
    #: read from the event's stack trace, "fork" (placed by sched_wakeup_new off its parent's
    #: CPU), "unknown" (no stack traced, or no sched_migrate_task: read from where it ran) or
    #: "stopper" (the CPU stopper's, whose cause the trace does not show). A stopper's
    #: migration is resolved from the events around it (``_Stoppers``): a NUMA move or swap
    #: traced for it just before (an unknown one too), an affinity change (its stopper woken by
    #: another task, or a sched_setaffinity call naming it), an exec (it execs before it next
    #: sleeps).
    migrations: list[tuple[int, int, int, str]] = field(default_factory=list)
    numa_moves: int = 0
    numa_swaps: int = 0
    state: str = "unknown"
    since: int = 0
    cpu: int | None = None
    woken: bool = False
    line: int = 0

    @property
    def run_ns(self) -> int:
        return sum(b - a for a, b, _ in self.runs)

    @property
    def per_cpu_kthread(self) -> int | None:
        """The CPU of a per-CPU kernel thread (by its name), or ``None``."""
        m = PER_CPU_KTHREAD.match(self.comm)
        return int(m["cpu"]) if m else None


@dataclass
class Schedule:
    """The threads of a trace and its time span."""

    threads: dict[int, Thread]
    start_ns: int
    end_ns: int
    cpus: int
    #: Whether the trace holds sched_migrate_task events (else migrations are read from where
    #: a thread runs).
    traced_migrations: bool


def schedule(events: list[Event], origin: str) -> Schedule:
    """The schedule the events describe (they are in time order, as parse_trace checks)."""
    sched = [e for e in events if e.name in EVENTS]
    if not sched:
        raise InputError(f"{origin}: no scheduler events (sched_switch, sched_wakeup, …)")
    for e in sched:
        for key in FIELDS.get(e.name, ()):
            if not re.search(rf"(?:^|\s){key}=", e.body):
                raise InputError(
                    f"{origin}: line {e.line}: {e.name} without {key}: not the kernel's "
                    f"format of the event: {e.body[:80]!r}"
                )
    start, end = events[0].ts, events[-1].ts
    threads: dict[int, Thread] = {}
    curr: dict[int, tuple[int, int]] = {}  # CPU → (pid switched in, its line)
    migrate_events = any(e.name == "sched_migrate_task" for e in sched)
    top_cpu = max(e.cpu for e in events)

    def thread(pid: int, e: Event, comm: str | None = None) -> Thread:
        t = threads.get(pid)
        if t is None:
            t = threads[pid] = Thread(pid, comm or "", start, line=e.line, since=start)
        elif comm:
            t.comm = comm
        if t.tgid is None and e.pid == pid and e.tgid is not None:
            t.tgid = e.tgid
        return t

    def switch_out(p: Thread, e: Event) -> None:
        if p.state == "running" and p.cpu != e.cpu:
            raise InputError(
                f"{origin}: line {e.line}: pid {p.pid} is switched out on CPU {e.cpu} "
                f"but runs on CPU {p.cpu}"
            )
        began = p.since if p.state == "running" else start
        p.runs.append((began, e.ts, e.cpu))
        p.cpu = e.cpu
        state = e.text("prev_state")
        if state.startswith("R"):
            p.state, p.since, p.woken = "runnable", e.ts, False
        elif state[:1] in ("X", "Z"):
            p.state, p.since = "dead", e.ts
        else:
            p.state, p.since = "sleeping", e.ts

    stoppers = _Stoppers()
    for e in events:  # sched_setaffinity calls: the syscall tracepoints, not scheduler events
        if e.name.startswith(("sys_enter_sched_setaffinity", "sys_sched_setaffinity(")):
            stoppers.setaffinity(e)
    early: set[int] = set()  # switches whose switch-out was applied before their line
    waking: dict[int, int | None] = {}  # pid → its waker at its last sched_waking
    for i, e in enumerate(sched):
        name, ts = e.name, e.ts
        if name == "sched_process_fork":
            child = e.int("child_pid")
            c = thread(child, e, e.text("child_comm") if "child_comm=" in e.body else None)
            c.fork_ts, c.fork_cpu, c.parent = ts, e.cpu, e.int("pid")
            c.first_ts, c.state, c.since = ts, "new", ts
        elif name == "sched_wakeup_new":
            t = thread(e.int("pid"), e, e.text("comm"))
            t.placed_cpu = _target(e)
            if t.fork_cpu is not None and t.placed_cpu not in (None, t.fork_cpu):
                # wake_up_new_task places it without a sched_migrate_task event (6.x)
                t.migrations.append((ts, t.fork_cpu, t.placed_cpu, "fork"))
            if t.state in ("new", "unknown"):
                t.state, t.since, t.woken = "runnable", ts, False
        elif name in ("sched_wakeup", "sched_waking"):
            if name == "sched_waking":  # the wake-up's start, in the waker's context
                waking[e.int("pid")] = None if e.irq or not e.pid else e.pid
                continue  # sched_wakeup marks it runnable
            t = thread(e.int("pid"), e, e.text("comm"))
            waker = None if e.irq or not e.pid else e.pid
            # a queued wake-up is printed on the sleeper's CPU, in whatever runs there:
            # sched_waking named the waker
            waker = waking.pop(t.pid, waker)
            stoppers.woken(t, waker)
            if t.state == "sleeping":
                t.sleeps.append((t.since, ts, waker))
            if t.state in ("sleeping", "unknown"):
                t.state, t.since, t.woken = "runnable", ts, True
        elif name == "sched_switch":
            prev, nxt = e.int("prev_pid"), e.int("next_pid")
            last = curr.get(e.cpu)
            if last is not None and last[0] != prev:
                raise InputError(
                    f"{origin}: line {e.line}: CPU {e.cpu} switches out pid {prev}, but pid "
                    f"{last[0]} was switched in there (line {last[1]})"
                )
            if prev and i not in early:
                switch_out(thread(prev, e, e.text("prev_comm")), e)
            if nxt:
                waking.pop(nxt, None)  # a wake-up that found it runnable: none pending
                n = thread(nxt, e, e.text("next_comm"))
                if n.state == "running" and not _switched_out_at_once(
                    sched, i, n, switch_out, early
                ):
                    raise InputError(
                        f"{origin}: line {e.line}: pid {nxt} is switched in on CPU {e.cpu} "
                        f"while it runs on CPU {n.cpu} (since line {n.line})"
                    )
                if n.state in ("runnable", "new"):
                    n.waits.append((n.since, ts, n.woken))
                elif n.state == "sleeping":  # its wake-up is not in the trace
                    n.sleeps.append((n.since, ts, None))
                if not migrate_events and n.cpu is not None and n.cpu != e.cpu:
                    n.migrations.append((ts, n.cpu, e.cpu, "unknown"))
                n.state, n.since, n.cpu, n.line = "running", ts, e.cpu, e.line
            curr[e.cpu] = (nxt, e.line)
        elif name == "sched_process_exit":
            t = thread(e.int("pid"), e, e.text("comm"))
            t.exit_ts = ts
        elif name == "sched_process_exec":
            stoppers.execs.setdefault(e.int("pid"), []).append(ts)
        elif name == "sched_migrate_task":
            src, dst = e.int("orig_cpu"), e.int("dest_cpu")
            top_cpu = max(top_cpu, src, dst)
            if src != dst:
                t = thread(e.int("pid"), e, e.text("comm"))
                kind = classify(e.stack) if e.stack is not None else "unknown"
                kind = stoppers.kind(t, ts, src, dst, kind)
                t.migrations.append((ts, src, dst, kind))
        elif name == "sched_move_numa":
            thread(e.int("pid"), e).numa_moves += 1
            stoppers.numa(e.int("pid"), _field(e, "dst_cpu"), "numa_move")
        elif name == "sched_swap_numa":
            thread(e.int("src_pid"), e).numa_swaps += 1
            # each task goes to the other's CPU
            stoppers.numa(e.int("src_pid"), _field(e, "dst_cpu"), "numa_swap")
            if (other := _field(e, "dst_pid")) is not None:
                stoppers.numa(other, _field(e, "src_cpu"), "numa_swap")
    for t in threads.values():
        if t.state == "running":
            t.runs.append((t.since, end, t.cpu if t.cpu is not None else 0))
    stoppers.resolve_execs(threads)
    return Schedule(threads, start, end, top_cpu + 1, migrate_events)


class _Stoppers:
    """What tells a CPU-stopper migration's cause (the kernel's migration_cpu_stop moves a
    running task for sched_exec, an affinity change and NUMA balancing's migrate_task_to alike;
    migrate_swap_stop, a swap, is told by its own stack):

    - a ``sched_move_numa`` (or ``sched_swap_numa``) of the task to that CPU traced before it,
      not yet matched: ``numa_move`` (``numa_swap``); the only rule for a migration without a
      stack (``unknown``), whose tracepoint is traced just before the move;
    - its stopper thread (``migration/N`` of the source CPU) woken by another task, or a
      ``sched_setaffinity`` call naming the task since its last migration: ``affinity``
      (exec and NUMA balancing run in the task's own context);
    - the task execs (``sched_process_exec``) after it and before it next sleeps: ``exec``;
    - else it stays ``stopper``.
    """

    def __init__(self) -> None:
        self.pending: dict[int, list[tuple[int | None, str]]] = {}  # pid → (dst CPU, kind)
        self.stopper_waker: dict[int, int | None] = {}  # CPU → who last woke its stopper
        self.affinity: set[int] = set()  # pids named by a sched_setaffinity call
        self.execs: dict[int, list[int]] = {}
        self.maybe_exec: list[tuple[Thread, int]] = []  # (thread, index of its migration)

    def setaffinity(self, e: Event) -> None:
        m = re.search(r"pid:\s*(?:0x)?([0-9a-fA-F]+)", f"{e.name}:{e.body}")
        if m is not None:
            pid = int(m[1], 16)
            self.affinity.add(pid or e.pid)  # 0: the caller

    def woken(self, t: Thread, waker: int | None) -> None:
        if t.comm.startswith("migration/") and (cpu := t.per_cpu_kthread) is not None:
            self.stopper_waker[cpu] = waker

    def numa(self, pid: int, dst: int | None, kind: str) -> None:
        self.pending.setdefault(pid, []).append((dst, kind))

    def kind(self, t: Thread, ts: int, src: int, dst: int, kind: str) -> str:
        named = t.pid in self.affinity  # a call leads to one migration at most
        self.affinity.discard(t.pid)
        if kind not in ("stopper", "unknown"):
            return kind
        pending = self.pending.get(t.pid, [])
        match = next((p for p in pending if p[0] == dst), None)
        if match is not None:
            pending.remove(match)
            return match[1]
        if kind == "unknown":
            return kind
        waker = self.stopper_waker.pop(src, None)
        if named or (waker is not None and waker != t.pid):
            return "affinity"
        self.maybe_exec.append((t, len(t.migrations)))
        return kind

    def resolve_execs(self, threads: dict[int, Thread]) -> None:
        for t, i in self.maybe_exec:
            ts, src, dst, _ = t.migrations[i]
            sleeps = [a for a, _, _ in t.sleeps if a >= ts]
            until = min(sleeps) if sleeps else None
            if any(x >= ts and (until is None or x <= until) for x in self.execs.get(t.pid, [])):
                t.migrations[i] = (ts, src, dst, "exec")


def _field(e: Event, key: str) -> int | None:
    try:
        return e.int(key)
    except ValueError:
        return None


def _switched_out_at_once(
    sched: list[Event], i: int, n: Thread, switch_out, early: set[int]
) -> bool:
    """Whether ``n``, switched in by ``sched[i]`` while it runs on another CPU, is switched out
    there at the same time later in the trace: events of different CPUs with one timestamp are
    printed in no causal order (the clock's resolution is a microsecond). That switch-out is
    then applied first (and marked in ``early``)."""
    for j in range(i + 1, len(sched)):
        e = sched[j]
        if e.ts != sched[i].ts:
            return False
        if e.name == "sched_switch" and e.cpu == n.cpu and e.int("prev_pid") == n.pid:
            switch_out(n, e)
            early.add(j)
            return True
    return False


def _target(e: Event) -> int | None:
    try:
        return e.int("target_cpu")
    except ValueError:
        return None
