"""From what the guest recorded to a kernel run's data: trace events, migration kinds, passes.

Three readers, each of a text the guest kernel wrote:

- ``parse_trace``: tracefs's ``trace`` file (``trace_clock`` global) into events, each
  ``sched_migrate_task`` with the kernel call stack its ``stacktrace`` trigger recorded;
- ``classify``: a migration's kind from the functions on that stack (and, for a migration done
  by the CPU stopper, from the events around it);
- ``parse_schedstat``: ``/proc/schedstat`` (versions 15 and 16) into per-CPU, per-domain
  counters, so that two readings give each balancing level's passes in the window;
- ``parse_interrupts`` and ``parse_proc_stat``: each CPU's local timer interrupts (the ticks it
  handled) from ``/proc/interrupts`` and its times from ``/proc/stat``.

``analyse`` puts them together into the per-boot record that docs/kernel-runs.md describes.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from numasim._core import InputError

# --- the trace -------------------------------------------------------------------------------

_LINE = re.compile(
    r"^\s*(?P<task>.*?)-(?P<pid>\d+)\s+(?:\(\s*(?P<tgid>\d+|-+)\)\s+)?\[(?P<cpu>\d+)\]\s+"
    r"(?:(?P<flags>[^\s:]+)\s+)?(?P<ts>\d+)\.(?P<frac>\d+):\s(?P<rest>.*)$"
)
#: A line of ``perf script`` (its default fields for tracepoints: comm, tid or pid/tid, CPU,
#: time, ``system:event:``, the event's text).
_PERF_LINE = re.compile(
    r"^\s*(?P<task>.*?)\s+(?:(?P<tgid>\d+)/)?(?P<pid>\d+)\s+\[(?P<cpu>\d+)\]\s+"
    r"(?P<ts>\d+)\.(?P<frac>\d+):\s+(?:\d+\s+)?\w+:(?P<rest>\w+:.*)$"
)
#: The text trace-cmd's sched plugin prints instead of the kernel's format:
#: ``bash:1234 [120] S ==> swapper/1:0 [120]`` and ``bash:1234 [120] success=1 CPU:001``.
_PLUGIN_SWITCH = re.compile(
    r"^(?P<pc>.*):(?P<pp>-?\d+) \[(?P<ppr>-?\d+)\] (?P<ps>\S+) ==> "
    r"(?P<nc>.*):(?P<np>-?\d+) \[(?P<npr>-?\d+)\]\s*$"
)
_PLUGIN_WAKEUP = re.compile(
    r"^(?P<c>.*):(?P<p>-?\d+) \[(?P<pr>-?\d+)\](?: success=\d+)? CPU:(?P<cpu>\d+)\s*$"
)
_FIELD = re.compile(r"(\w+)=(-?\w+)")
STACK_HEADER = "<stack trace>"


@dataclass
class Event:
    """One trace line: when (ns of the trace clock), where (CPU), who was running, what."""

    ts: int
    cpu: int
    pid: int
    task: str
    name: str
    body: str
    stack: list[str] | None = None
    #: Its line in the trace text (1 is the first).
    line: int = 0
    #: The running task's thread group, when the trace prints it (``record-tgid``, perf's
    #: ``pid/tid``).
    tgid: int | None = None
    #: Traced in interrupt context (the latency flags' hardirq/softirq/NMI column: ``h``,
    #: ``s``, ``H``, ``z``, ``Z``): the running task did not cause it. perf script does not
    #: print the flags: ``False`` there.
    irq: bool = False

    def int(self, key: str) -> int:
        """A numeric field of the event's body (``pid=12`` → 12)."""
        m = re.search(rf"(?:^|\s){key}=(-?\d+)", self.body)
        if m is None:
            raise ValueError(f"{self.name} at {self.ts} ns has no field {key}: {self.body}")
        return int(m[1])

    def text(self, key: str) -> str:
        """A text field of the event's body, up to the next field (``comm=kworker/0:1 pid=9``
        → ``kworker/0:1``; a comm may hold spaces)."""
        m = re.search(rf"(?:^|\s){key}=(.*?)(?=\s+\w+=|\s+==>|$)", self.body)
        if m is None:
            raise ValueError(f"{self.name} at {self.ts} ns has no field {key}: {self.body}")
        return m[1]


def _plugin_body(name: str, body: str) -> str:
    """trace-cmd's sched plugin text of a switch or wake-up in the kernel's own form
    (``prev_comm=… prev_pid=…``); any other body unchanged."""
    if name == "sched_switch" and (m := _PLUGIN_SWITCH.match(body)):
        return (
            f"prev_comm={m['pc']} prev_pid={m['pp']} prev_prio={m['ppr']} prev_state={m['ps']} "
            f"==> next_comm={m['nc']} next_pid={m['np']} next_prio={m['npr']}"
        )
    if name.startswith("sched_wakeup") and (m := _PLUGIN_WAKEUP.match(body)):
        return f"comm={m['c']} pid={m['p']} prio={m['pr']} target_cpu={m['cpu']}"
    return body


def parse_trace(text: str, origin: str = "trace", strict: bool = False) -> list[Event]:
    """The events of a trace text, in its order; each stack trace is attached to the
    ``sched_migrate_task`` event that triggered it (the last one on the same CPU).

    Read: tracefs's ``trace`` file (with or without the ``record-tgid`` column),
    ``trace-cmd report`` (with or without latency flags; its sched plugin's text of switches
    and wake-ups is put back in the kernel's form) and ``perf script`` (``sched:`` prefixes
    dropped). ``strict``: a line of none of these forms, an event without its fields' text, a
    last line cut short and time going backwards are refused (``InputError`` naming the line);
    otherwise such lines are skipped."""
    events: list[Event] = []
    awaiting: dict[int, Event] = {}  # CPU → its last migrate event, until its stack is read
    stack: list[str] | None = None
    lines = text.splitlines()
    cut = bool(text) and not text.endswith("\n")
    for number, line in enumerate(lines, start=1):
        if line.startswith(" => "):
            if stack is not None:
                stack.append(_function(line[4:]))
            continue
        stack = None
        if not line.strip() or line.startswith("#"):
            continue
        m = _LINE.match(line) or _PERF_LINE.match(line)
        if m is None:
            if line.startswith("CPU:") or "LOST" in line:
                raise InputError(f"{origin}: line {number}: events were lost: {line.strip()}")
            if strict and not _header(line):
                what = "cut short" if cut and number == len(lines) else "not a trace event line"
                raise InputError(f"{origin}: line {number}: {what}: {_shown(line)}")
            continue
        ts = int(m["ts"]) * 1_000_000_000 + int(m["frac"].ljust(9, "0")[:9])
        if strict and events and ts < events[-1].ts:
            raise InputError(
                f"{origin}: line {number}: time goes backwards ({_seconds(ts)} s after "
                f"{_seconds(events[-1].ts)} s on line {events[-1].line})"
            )
        cpu, rest = int(m["cpu"]), m["rest"]
        if rest.strip() == STACK_HEADER:
            owner = awaiting.pop(cpu, None)
            if owner is not None:
                owner.stack = stack = []
            continue
        name, sep, body = rest.partition(":")
        if strict and not sep:
            raise InputError(f"{origin}: line {number}: no event name: {_shown(line)}")
        tgid = m["tgid"]
        event = Event(
            ts,
            cpu,
            int(m["pid"]),
            m["task"].strip(),
            name.strip(),
            _plugin_body(name.strip(), body.strip()),
            line=number,
            tgid=int(tgid) if tgid and tgid.isdigit() else None,
            irq=_in_interrupt(m.groupdict().get("flags")),
        )
        events.append(event)
        if name == "sched_migrate_task":
            awaiting[cpu] = event
    return events


def _in_interrupt(flags: str | None) -> bool:
    """Whether the latency flags (``dNh2.``: irqs-off, need-resched, hardirq/softirq,
    preempt depth, …) say the event was traced in interrupt context."""
    return flags is not None and len(flags) >= 4 and flags[2] in "hsHzZ"


def _header(line: str) -> bool:
    """A line trace-cmd report prints before its events (``cpus=8``, ``version = 6``)."""
    return bool(re.fullmatch(r"\s*(cpus=\d+|version\s*=\s*\S+|CPU \d+ is empty)\s*", line))


def _shown(line: str) -> str:
    return repr(line[:80] + ("…" if len(line) > 80 else ""))


def _seconds(ns: int) -> str:
    return f"{ns // 1_000_000_000}.{ns % 1_000_000_000:09d}"


def _function(text: str) -> str:
    """A stack entry's function: without ``+0x…/0x…`` offsets and compiler suffixes
    (``_nohz_idle_balance.isra.0`` → ``_nohz_idle_balance``)."""
    name = text.strip().split("+", 1)[0].split(" ", 1)[0]
    return name.split(".", 1)[0]


# --- migration kinds -------------------------------------------------------------------------

#: The kinds of a workload task's migration, in the order docs/kernel-runs.md describes them.
KINDS = (
    "periodic",
    "nohz_idle",
    "newidle",
    "active",
    "wakeup",
    "fork",
    "exec",
    "numa_move",
    "numa_swap",
    "affinity",
    "other",
)
#: Functions that name a kind when they are on a migration's stack, tried in this order (a
#: nohz balancing pass runs the periodic one for each idle CPU, so it is tried first). Kernel
#: 6.1 names and their 6.12 renames are both listed.
STACK_RULES: tuple[tuple[str, frozenset[str]], ...] = (
    ("numa_swap", frozenset({"migrate_swap_stop", "__migrate_swap_task", "migrate_swap"})),
    ("active", frozenset({"active_load_balance_cpu_stop"})),
    (
        "nohz_idle",
        frozenset(
            {
                "_nohz_idle_balance",
                "nohz_idle_balance",
                "nohz_newidle_balance",
                "nohz_run_idle_balance",
            }
        ),
    ),
    ("newidle", frozenset({"newidle_balance", "sched_balance_newidle"})),
    (
        "periodic",
        frozenset(
            {
                "rebalance_domains",
                "sched_balance_domains",
                "run_rebalance_domains",
                "sched_balance_softirq",
                "load_balance",
                "sched_balance_rq",
            }
        ),
    ),
    ("wakeup", frozenset({"try_to_wake_up"})),
    (
        "affinity",
        frozenset(
            {
                "affine_move_task",
                "__set_cpus_allowed_ptr",
                "__set_cpus_allowed_ptr_locked",
                "set_cpus_allowed_ptr",
                "__sched_setaffinity",
                "sched_setaffinity",
            }
        ),
    ),
    ("exec", frozenset({"sched_exec"})),
    ("numa_move", frozenset({"migrate_task_to", "task_numa_migrate"})),
)
#: The CPU stopper's migration: done for sched_exec, migrate_task_to (NUMA) and an affinity
#: change of a running task alike; which one is told by the events around it (``analyse``).
STOPPER = frozenset({"migration_cpu_stop"})
#: Kinds made by a load-balancing pass, whose idle type is recorded.
BALANCING = frozenset({"periodic", "nohz_idle", "newidle"})


def classify(stack: list[str] | None) -> str:
    """A migration's kind from its call stack alone: a kind of ``KINDS``, ``"stopper"`` (for
    ``analyse`` to resolve) or ``"other"`` (unknown stack, or none)."""
    if not stack:
        return "other"
    functions = set(stack)
    for kind, names in STACK_RULES:
        if functions & names:
            return kind
    if functions & STOPPER:
        return "stopper"
    return "other"


# --- /proc/schedstat -------------------------------------------------------------------------

#: The order of a domain line's eight load-balancing counters ...
LB_FIELDS = (
    "lb_count",
    "lb_balanced",
    "lb_failed",
    "lb_imbalance",
    "lb_gained",
    "lb_hot_gained",
    "lb_nobusyq",
    "lb_nobusyg",
)
#: ... repeated for each idle type, in the order of the kernel's enum cpu_idle_type: version 15
#: (Linux 6.1: CPU_IDLE, CPU_NOT_IDLE, CPU_NEWLY_IDLE) and version 16 (Linux 6.12:
#: __CPU_NOT_IDLE, CPU_IDLE, CPU_NEWLY_IDLE); then twelve more counters.
IDLE_ORDER = {15: ("idle", "busy", "newly_idle"), 16: ("busy", "idle", "newly_idle")}
IDLE_TYPES = ("idle", "busy", "newly_idle")
TAIL_FIELDS = (
    "alb_count",
    "alb_failed",
    "alb_pushed",
    "sbe_count",
    "sbe_balanced",
    "sbe_pushed",
    "sbf_count",
    "sbf_balanced",
    "sbf_pushed",
    "ttwu_wake_remote",
    "ttwu_move_affine",
    "ttwu_move_balance",
)
#: A CPU line's counters after its name (the second is always 0).
CPU_FIELDS = (
    "yld_count",
    "legacy",
    "sched_count",
    "sched_goidle",
    "ttwu_count",
    "ttwu_local",
    "rq_cpu_time_ns",
    "run_delay_ns",
    "pcount",
)


def cpumask_list(mask: str) -> list[int]:
    """The CPUs of a kernel ``%*pb`` mask (``00000000,00000103`` → [0, 1, 8])."""
    value = int(mask.replace(",", ""), 16)
    return [i for i in range(value.bit_length()) if value >> i & 1]


def cpulist_text(cpus: list[int]) -> str:
    """[0, 1, 2, 5] → ``0-2,5``."""
    parts: list[str] = []
    for c in sorted(cpus):
        if parts and "-" not in parts[-1].split(",")[-1] and int(parts[-1]) == c - 1:
            parts[-1] = f"{parts[-1]}-{c}"
        elif parts and "-" in parts[-1] and int(parts[-1].split("-")[1]) == c - 1:
            parts[-1] = f"{parts[-1].split('-')[0]}-{c}"
        else:
            parts.append(str(c))
    return ",".join(parts)


def parse_cpulist(text: str) -> list[int]:
    """``0-2,5`` → [0, 1, 2, 5]."""
    out: list[int] = []
    for part in text.strip().split(","):
        if "-" in part:
            a, b = part.split("-")
            out.extend(range(int(a), int(b) + 1))
        elif part:
            out.append(int(part))
    return out


@dataclass
class Schedstat:
    """One reading of /proc/schedstat."""

    version: int
    jiffies: int
    #: CPU → its run-queue counters (CPU_FIELDS).
    cpus: dict[int, dict[str, int]] = field(default_factory=dict)
    #: (CPU, domain index) → {"span": [...], "lb_count": {idle type: n}, ..., "alb_count": n}.
    domains: dict[tuple[int, int], dict[str, Any]] = field(default_factory=dict)


def parse_schedstat(text: str, origin: str = "schedstat") -> Schedstat:
    """A /proc/schedstat text of version 15 or 16 (refused otherwise, in one line)."""
    lines = text.splitlines()
    m = re.fullmatch(r"version (\d+)", lines[0].strip()) if lines else None
    if m is None:
        raise InputError(f"{origin}: line 1: not a /proc/schedstat text (no version line)")
    version = int(m[1])
    if version not in IDLE_ORDER:
        known = ", ".join(map(str, IDLE_ORDER))
        raise InputError(
            f"{origin}: schedstat version {version} is not one numasim reads "
            f"(known: {known}); its field order must be checked first"
        )
    order = IDLE_ORDER[version]
    out = Schedstat(version, 0)
    cpu = -1
    for number, line in enumerate(lines[1:], start=2):
        words = line.split()
        if not words:
            continue
        try:
            if words[0] == "timestamp":
                out.jiffies = int(words[1])
            elif words[0].startswith("cpu"):
                cpu = int(words[0][3:])
                out.cpus[cpu] = dict(zip(CPU_FIELDS, map(int, words[1:]), strict=True))
            elif words[0].startswith("domain"):
                values = [int(v) for v in words[2:]]
                if len(values) != 8 * len(order) + len(TAIL_FIELDS):
                    raise ValueError(f"{len(values)} counters")
                d: dict[str, Any] = {"span": cpumask_list(words[1])}
                for f, name in enumerate(LB_FIELDS):
                    d[name] = {order[i]: values[8 * i + f] for i in range(len(order))}
                d.update(zip(TAIL_FIELDS, values[8 * len(order) :], strict=True))
                out.domains[(cpu, int(words[0][6:]))] = d
        except ValueError as e:
            raise InputError(
                f"{origin}: line {number}: not a version {version} schedstat line ({e})"
            ) from None
    return out


def schedstat_delta(
    start: Schedstat, end: Schedstat, origin: str = "schedstat"
) -> tuple[dict[int, dict[str, int]], dict[tuple[int, int], dict]]:
    """End minus start of every counter: per CPU, and per (CPU, domain)."""
    if start.version != end.version or start.domains.keys() != end.domains.keys():
        raise InputError(
            f"{origin}: the two readings differ in version or domains "
            "(the domains were rebuilt during the window)"
        )
    cpus = {
        c: {k: end.cpus[c][k] - v for k, v in start.cpus[c].items() if k != "legacy"}
        for c in start.cpus
    }
    domains = {}
    for key, d0 in start.domains.items():
        d1 = end.domains[key]
        delta: dict[str, Any] = {"span": d0["span"]}
        for name in LB_FIELDS:
            delta[name] = {t: d1[name][t] - d0[name][t] for t in IDLE_TYPES}
        for name in TAIL_FIELDS:
            delta[name] = d1[name] - d0[name]
        domains[key] = delta
    return cpus, domains


# --- /proc/interrupts and /proc/stat ------------------------------------------------------------


def parse_interrupts(text: str, origin: str = "interrupts") -> dict[int, int]:
    """Each CPU's local timer interrupts: the ``LOC:`` line of ``/proc/interrupts``, whose
    columns are the CPUs of its header line (``CPU0 CPU1 …``)."""
    lines = text.splitlines()
    header = lines[0].split() if lines else []
    if not header or not all(re.fullmatch(r"CPU\d+", h) for h in header):
        raise InputError(f"{origin}: line 1: not a /proc/interrupts text (no CPU header)")
    cpus = [int(h[3:]) for h in header]
    for number, line in enumerate(lines[1:], start=2):
        name, _, rest = line.partition(":")
        if name.strip() == "LOC":
            values = rest.split()[: len(cpus)]
            if len(values) != len(cpus) or not all(v.isdigit() for v in values):
                raise InputError(f"{origin}: line {number}: not one count per CPU: {line.strip()}")
            return dict(zip(cpus, map(int, values), strict=True))
    raise InputError(f"{origin}: no LOC line (local timer interrupts)")


#: A ``cpuN`` line of /proc/stat: times in USER_HZ units (1/100 s on x86) since boot. ``guest``
#: and ``guest_nice`` (time running a virtual machine, also counted in user and nice) are not
#: kept.
STAT_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def parse_proc_stat(text: str, origin: str = "stat") -> dict[int, dict[str, int]]:
    """Each CPU's times from its ``cpuN`` line of ``/proc/stat``."""
    out: dict[int, dict[str, int]] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        words = line.split()
        if not words or not re.fullmatch(r"cpu\d+", words[0]):
            continue
        values = words[1 : 1 + len(STAT_FIELDS)]
        if len(values) != len(STAT_FIELDS) or not all(v.isdigit() for v in values):
            raise InputError(f"{origin}: line {number}: not a /proc/stat CPU line: {line.strip()}")
        out[int(words[0][3:])] = dict(zip(STAT_FIELDS, map(int, values), strict=True))
    if not out:
        raise InputError(f"{origin}: no cpuN line: not a /proc/stat text")
    return out


def counts_delta(
    start: dict[int, Any], end: dict[int, Any], what: str, origin: str
) -> dict[int, Any]:
    """End minus start of per-CPU counts (ints, or dicts of ints), for the CPUs of both."""
    if start.keys() != end.keys():
        raise InputError(f"{origin}: the two readings of {what} have different CPUs")
    out: dict[int, Any] = {}
    for c, v in start.items():
        if isinstance(v, dict):
            out[c] = {k: end[c][k] - n for k, n in v.items()}
        else:
            out[c] = end[c] - v
    return out


#: The tick rates a Linux kernel can be built with (CONFIG_HZ on x86).
HZ_CHOICES = (100, 250, 300, 1000)
#: The tick's hrtimer function (``tick_nohz_handler`` from Linux 6.9, ``tick_sched_timer``
#: before): each of its expiries is one tick the CPU handled (``update_process_times``, and in
#: it the scheduler's tick and the balancing softirq's trigger).
TICK_FUNCTIONS = frozenset({"tick_nohz_handler", "tick_sched_timer"})
_HIST_LINE = re.compile(
    r"^\{\s*common_cpu:\s*(\d+),\s*function:\s*(?:\[[0-9a-f]+\]\s*)?(\S+)\s*\}"
    r"\s*hitcount:\s*(\d+)\s*$"
)


def parse_hrtimer_hist(text: str, origin: str = "hrtimers") -> dict[tuple[int, str], int]:
    """The histogram of ``timer/hrtimer_expire_entry`` (keys ``common_cpu,function.sym``):
    {(CPU, function): expiries}. A histogram that dropped entries is refused in one line."""
    out: dict[tuple[int, str], int] = {}
    for line in text.splitlines():
        m = _HIST_LINE.match(line.strip())
        if m:
            out[(int(m[1]), m[2])] = int(m[3])
        elif line.strip().startswith("Dropped:") and int(line.split(":")[1]) != 0:
            raise InputError(f"{origin}: the histogram dropped entries ({line.strip()})")
    if "hitcount" in text and not out:
        raise InputError(f"{origin}: not a histogram keyed by common_cpu and function.sym")
    return out


#: Per-CPU counters of /proc/timer_list's hrtimer base: interrupts, interrupts that had to run
#: expired timers again, and interrupts that gave up (a "hang": the next one is delayed by as
#: long as the handler ran, at most 100 ms).
TIMER_LIST_FIELDS = ("nr_events", "nr_retries", "nr_hangs")


def parse_timer_list(
    text: str, origin: str = "timer_list"
) -> tuple[int, dict[int, dict[str, int]]]:
    """/proc/timer_list: its ``now at N nsecs`` (CLOCK_MONOTONIC when it was read) and each
    CPU's ``TIMER_LIST_FIELDS``."""
    now = re.search(r"^now at (\d+) nsecs", text, re.M)
    if now is None:
        raise InputError(f"{origin}: not a /proc/timer_list text (no 'now at' line)")
    cpus: dict[int, dict[str, int]] = {}
    cpu = None
    for line in text.splitlines():
        m = re.match(r"^cpu: (\d+)$", line)
        if m:
            cpu = int(m[1])
            cpus[cpu] = {}
            continue
        if line.startswith("Tick Device"):
            cpu = None
        m = re.match(r"^\s+\.(\w+)\s*:\s*(\d+)", line)
        if m and cpu is not None and m[1] in TIMER_LIST_FIELDS:
            cpus[cpu][m[1]] = int(m[2])
    if not cpus or any(set(v) != set(TIMER_LIST_FIELDS) for v in cpus.values()):
        raise InputError(f"{origin}: a CPU lacks {', '.join(TIMER_LIST_FIELDS)}")
    return int(now[1]), cpus


#: busybox head's header before each file it prints (``head -n N F1 F2 …``).
_HEAD = re.compile(r"^==> (.+) <==$", re.M)


def split_head(text: str) -> dict[str, str]:
    """``head F1 F2 …``'s output → {file name without its directory: its text}."""
    parts = _HEAD.split(text)
    return {name.rsplit("/", 1)[-1]: body.strip("\n") + "\n"
            for name, body in zip(parts[1::2], parts[2::2], strict=True)}  # fmt: skip


# --- one boot's record -----------------------------------------------------------------------


@dataclass
class Recorded:
    """What the guest sent, as texts (the files of its archive)."""

    trace: str
    schedstat_start: str
    schedstat_end: str
    per_cpu_stats: str
    pids: list[int]
    domains: str
    origin: str = "guest"
    #: pid → /proc/PID/sched at the window's end.
    task_sched: dict[int, str] = field(default_factory=dict)
    vmstat_start: str = ""
    vmstat_end: str = ""
    #: Read with /proc/schedstat (absent in older runs): /proc/interrupts, /proc/stat, the
    #: hrtimer histogram ("" where the kernel has no hist triggers) and /proc/timer_list.
    interrupts_start: str = ""
    interrupts_end: str = ""
    stat_start: str = ""
    stat_end: str = ""
    hrtimers_start: str = ""
    hrtimers_end: str = ""
    timer_list_start: str = ""
    timer_list_end: str = ""


#: /proc/PID/sched lines kept for each task (→ its record's keys).
TASK_COUNTERS = {
    "se.nr_migrations": "kernel_nr_migrations",
    "numa_pages_migrated": "numa_pages_migrated",
    "numa_preferred_nid": "numa_preferred_nid",
    "total_numa_faults": "total_numa_faults",
}


def task_counters(text: str) -> dict[str, int | None]:
    """A task's kernel counters from its /proc/PID/sched (None where a line is missing)."""
    out: dict[str, int | None] = dict.fromkeys(TASK_COUNTERS.values())
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in TASK_COUNTERS:
            try:
                out[TASK_COUNTERS[key.strip()]] = int(value.strip())
            except ValueError:
                pass
    return out


def vmstat_delta(start: str, end: str) -> dict[str, int]:
    """End minus start of /proc/vmstat's NUMA and page-migration counters."""

    def read(text: str) -> dict[str, int]:
        pairs = (line.split() for line in text.splitlines())
        return {p[0]: int(p[1]) for p in pairs if len(p) == 2 and p[1].lstrip("-").isdigit()}

    a, b = read(start), read(end)
    return {k: b[k] - a.get(k, 0) for k in sorted(b) if k.startswith(("numa_", "pgmigrate"))}


def lost_events(stats: str) -> int:
    """Events the ring buffers lost: the sum of ``overrun`` and ``dropped events`` over CPUs."""
    lost = 0
    for line in stats.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("overrun", "dropped events"):
            lost += int(value)
    return lost


def domain_names(text: str) -> dict[tuple[int, int], str]:
    """``…/domains/cpuN/domainM NAME`` lines → {(N, M): NAME}."""
    out = {}
    for line in text.splitlines():
        m = re.search(r"cpu(\d+)/domain(\d+)\s+(\S+)", line)
        if m:
            out[(int(m[1]), int(m[2]))] = m[3]
    return out


def _marker(events: list[Event], text: str) -> Event | None:
    return next(
        (e for e in events if e.name == "tracing_mark_write" and e.body.strip() == text), None
    )


def analyse(rec: Recorded, node_of: list[int], slit: list[list[int]]) -> dict[str, Any]:
    """The trace and schedstat parts of a boot's record (``window``, ``tasks``,
    ``migrations``, ``passes``, …): docs/kernel-runs.md."""
    events = parse_trace(rec.trace, f"{rec.origin}: trace")
    workload = set(rec.pids)
    forks = {
        e.int("child_pid"): e
        for e in events
        if e.name == "sched_process_fork" and e.int("child_pid") in workload
    }
    if not forks:
        raise InputError(f"{rec.origin}: the trace holds no fork of the workload's tasks")
    end_marker = _marker(events, "numasim window-end")
    if end_marker is None:
        raise InputError(f"{rec.origin}: the trace has no window-end marker")
    t0 = min(e.ts for e in forks.values())
    t1 = end_marker.ts
    notes: list[str] = []

    first_cpu: dict[int, int] = {}
    curr: dict[int, int] = {}  # CPU → pid running there (0: idle)
    running_since: dict[int, int] = {}  # workload pid → when it was switched in
    run_ns: Counter[int] = Counter()
    cpu_loop_ns: Counter[int] = Counter()  # CPU → time a workload task ran on it
    cpu_idle_ns: Counter[int] = Counter()  # CPU → time its idle task ran
    last_switch: dict[int, int] = {}  # CPU → its last sched_switch
    exited: dict[int, int] = {}
    # CPU → (source CPU, idle type) of its last balancing pull since its last switch: the
    # kernel re-reads a CPU's idleness after each successful load_balance call.
    pulled: dict[int, tuple[int, str]] = {}
    numa_moves: dict[int, list[Event]] = defaultdict(list)
    stopper_waker: dict[int, int] = {}  # CPU → pid that last woke its stopper thread
    execs: dict[int, list[int]] = defaultdict(list)
    raw: list[dict[str, Any]] = []
    other_kinds: Counter[str] = Counter()
    unknown: dict[tuple[str, ...], dict[str, Any]] = {}
    numa_events: Counter[str] = Counter()
    traced: Counter[int] = Counter()  # every migration of a workload task, in the window or not

    def clip(a: int, b: int) -> int:
        return max(0, min(b, t1) - max(a, t0))

    for e in events:
        name = e.name
        if name == "sched_switch":
            prev, nxt = e.int("prev_pid"), e.int("next_pid")
            if prev in running_since:
                ran = clip(running_since.pop(prev), e.ts)
                run_ns[prev] += ran
                cpu_loop_ns[e.cpu] += ran
            if prev == 0:  # idle since the CPU's last switch (or since the trace began)
                cpu_idle_ns[e.cpu] += clip(last_switch.get(e.cpu, t0), e.ts)
            last_switch[e.cpu] = e.ts
            if nxt in workload:
                running_since[nxt] = e.ts
            curr[e.cpu] = nxt
            pulled.pop(e.cpu, None)
        elif name == "sched_wakeup_new":
            pid = e.int("pid")
            if pid in workload:
                first_cpu[pid] = e.int("target_cpu")
        elif name == "sched_wakeup":
            m = re.match(r"comm=migration/(\d+)\s", e.body)
            if m:
                stopper_waker[int(m[1])] = e.pid
        elif name == "sched_process_exec":
            execs[e.int("pid")].append(e.ts)
        elif name == "sched_process_exit":
            pid = e.int("pid")
            if pid in workload:
                exited[pid] = e.ts
        elif name == "sched_move_numa":
            numa_moves[e.int("pid")].append(e)
            if e.int("pid") in workload and t0 <= e.ts <= t1:
                numa_events["move"] += 1
        elif name in ("sched_swap_numa", "sched_stick_numa"):
            pids = {e.int("src_pid")}
            with_dst = re.search(r"dst_pid=(-?\d+)", e.body)
            if with_dst:
                pids.add(int(with_dst[1]))
            if pids & workload and t0 <= e.ts <= t1:
                numa_events["swap" if name == "sched_swap_numa" else "stick"] += 1
        elif name == "sched_migrate_task":
            pid, src, dst = e.int("pid"), e.int("orig_cpu"), e.int("dest_cpu")
            if pid in workload:
                traced[pid] += src != dst
            if src == dst:  # set_task_cpu to the same CPU: traced, but no migration
                continue
            kind = classify(e.stack)
            context = None
            if kind == "stopper":
                pending = numa_moves.get(pid, [])
                match = next((m for m in pending if m.int("dst_cpu") == dst), None)
                if match is not None:
                    pending.remove(match)
                    kind = "numa_move"
                else:
                    context = stopper_waker.get(src)
            idle = None
            if kind in ("periodic", "nohz_idle"):
                last = pulled.get(dst)
                if last is None:  # the pass's first pull: is the destination idle?
                    idle = "idle" if kind == "nohz_idle" or curr.get(dst) == 0 else "busy"
                elif last[0] == src:  # the same call (one busiest run queue): its idle type
                    idle = last[1]
                else:  # a later call of the pass, after a pull: the CPU is no longer idle
                    idle = "busy"
                pulled[dst] = (src, idle)
            elif kind == "newidle":
                idle = "newly_idle"
            in_window = t0 <= e.ts <= t1
            if kind == "other" and in_window:
                key = tuple(e.stack or ())
                entry = unknown.setdefault(
                    key,
                    {
                        "stack": list(key),
                        "count": 0,
                        "example": {
                            "t_ns": e.ts - t0,
                            "pid": pid,
                            "comm": e.body.split()[0][5:],
                            "from": src,
                            "to": dst,
                        },
                    },
                )
                entry["count"] += 1
            if pid in workload and in_window:
                raw.append(
                    {
                        "ts": e.ts,
                        "pid": pid,
                        "from": src,
                        "to": dst,
                        "kind": kind,
                        "idle": idle,
                        "waker": context,
                    }
                )
            elif in_window:
                other_kinds[kind] += 1

    for pid, since in running_since.items():
        run_ns[pid] += clip(since, t1)
        cpu_loop_ns[next(c for c, p in curr.items() if p == pid)] += clip(since, t1)

    migrations = []
    for r in raw:
        if r["kind"] == "stopper":
            later = [t for t in execs.get(r["pid"], []) if t >= r["ts"]]
            r["kind"] = "exec" if r["waker"] == r["pid"] and later else "affinity"
        migrations.append(
            {
                "t_ns": r["ts"] - t0,
                "pid": r["pid"],
                "from": r["from"],
                "to": r["to"],
                "distance": slit[node_of[r["from"]]][node_of[r["to"]]],
                "kind": r["kind"],
                "idle": r["idle"],
            }
        )
    for kind in list(other_kinds):
        if kind == "stopper":
            other_kinds["affinity_or_exec"] += other_kinds.pop("stopper")

    tasks = []
    for pid in rec.pids:
        fork = forks.get(pid)
        if fork is None:
            notes.append(f"task {pid}: no fork event in the trace; left out")
            continue
        fork_cpu = fork.cpu
        placed = first_cpu.get(pid, fork_cpu)
        if placed != fork_cpu:
            migrations.append(
                {
                    "t_ns": fork.ts - t0,
                    "pid": pid,
                    "from": fork_cpu,
                    "to": placed,
                    "distance": slit[node_of[fork_cpu]][node_of[placed]],
                    "kind": "fork",
                    "idle": None,
                }
            )
        moves = [m for m in migrations if m["pid"] == pid and m["kind"] != "fork"]
        end = exited.get(pid, t1)
        tasks.append(
            {
                "pid": pid,
                "fork_cpu": fork_cpu,
                "first_cpu": placed,
                "last_cpu": max(moves, key=lambda m: m["t_ns"])["to"] if moves else placed,
                "run_ns": run_ns[pid],
                "alive_ns": clip(fork.ts, end),
                "traced_migrations": traced[pid],
                **task_counters(rec.task_sched.get(pid, "")),
            }
        )
    migrations.sort(key=lambda m: (m["t_ns"], m["pid"]))
    for t in tasks:
        kernel = t["kernel_nr_migrations"]
        if kernel is not None and kernel != t["traced_migrations"]:
            notes.append(
                f"task {t['pid']}: the kernel counted {kernel} migrations, the trace "
                f"holds {t['traced_migrations']}"
            )

    release = _marker(events, "numasim release")
    released = _marker(events, "numasim released")
    window = {"start_ns": t0, "end_ns": t1, "guest_s": (t1 - t0) / 1e9}
    if release is not None and released is not None:
        window["release_ns"] = release.ts - t0
        window["released_ns"] = released.ts - t0

    start, end_reading = (
        parse_schedstat(t, f"{rec.origin}: schedstat.{w}")
        for t, w in ((rec.schedstat_start, "start"), (rec.schedstat_end, "end"))
    )
    cpu_delta, domain_delta = schedstat_delta(start, end_reading, f"{rec.origin}: schedstat")
    names = domain_names(rec.domains)
    passes = []
    for (cpu, level), d in sorted(domain_delta.items()):
        passes.append(
            {
                "cpu": cpu,
                "level": level,
                "name": names.get((cpu, level)),
                "span": cpulist_text(d.pop("span")),
                **d,
            }
        )
    runqueues = [{"cpu": c, **v} for c, v in sorted(cpu_delta.items())]
    if any(p["name"] is None for p in passes):
        notes.append("some domains' names could not be read from debugfs")
    ticks: dict[str, Any] = {}
    if rec.timer_list_start or rec.timer_list_end:
        # A CPU that never switched in the trace ran its idle task throughout.
        for c in cpu_delta:
            if c not in last_switch:
                cpu_idle_ns[c] = t1 - t0
            elif curr.get(c) == 0:
                cpu_idle_ns[c] += clip(last_switch[c], t1)
        ticks = _ticks(rec, start, end_reading, cpu_loop_ns, cpu_idle_ns)
        if any(c["ticks"] is None for c in ticks["per_cpu"]):
            notes.append("no hrtimer histogram (the kernel has no hist triggers): ticks unknown")
    return {
        "schedstat_version": start.version,
        "window": window,
        "tasks": tasks,
        "migrations": migrations,
        "other_migrations": sum(other_kinds.values()),
        "other_migrations_by_kind": dict(sorted(other_kinds.items())),
        "numa_events": {k: numa_events[k] for k in ("move", "swap", "stick")},
        "vmstat": vmstat_delta(rec.vmstat_start, rec.vmstat_end),
        "passes": passes,
        "runqueues": runqueues,
        "unknown_stacks": sorted(unknown.values(), key=lambda u: -u["count"]),
        "notes": notes,
        **ticks,
    }


def _ticks(
    rec: Recorded,
    start: Schedstat,
    end: Schedstat,
    loop_ns: Counter[int],
    idle_ns: Counter[int],
) -> dict[str, Any]:
    """The record's ``counters`` (the guest time between the two readings of the counters, its
    jiffies and the kernel's HZ) and ``per_cpu`` (each CPU's ticks, timer interrupts, hrtimer
    retries and hangs, /proc/stat times, and the loops' and the idle task's time on it)."""
    origin = rec.origin
    now0, tl0 = parse_timer_list(rec.timer_list_start, f"{origin}: timer_list.start")
    now1, tl1 = parse_timer_list(rec.timer_list_end, f"{origin}: timer_list.end")
    guest_s = (now1 - now0) / 1e9
    if guest_s <= 0:
        raise InputError(f"{origin}: timer_list's two readings are not in time order")
    jiffies = end.jiffies - start.jiffies
    hz = min(HZ_CHOICES, key=lambda h: abs(h - jiffies / guest_s))
    pairs = {
        "/proc/interrupts": (parse_interrupts, "interrupts"),
        "/proc/stat": (parse_proc_stat, "stat"),
    }
    deltas = {
        what: counts_delta(
            read(getattr(rec, f"{name}_start"), f"{origin}: {name}.start"),
            read(getattr(rec, f"{name}_end"), f"{origin}: {name}.end"),
            what,
            origin,
        )
        for what, (read, name) in pairs.items()
    }
    loc, times = deltas["/proc/interrupts"], deltas["/proc/stat"]
    hrtimer = counts_delta(tl0, tl1, "/proc/timer_list", origin)
    if not loc.keys() == times.keys() == hrtimer.keys():
        raise InputError(f"{origin}: the counters' readings name different CPUs")
    ticks: dict[int, int] | None = None
    if rec.hrtimers_start and rec.hrtimers_end:
        h0 = parse_hrtimer_hist(rec.hrtimers_start, f"{origin}: hrtimers.start")
        h1 = parse_hrtimer_hist(rec.hrtimers_end, f"{origin}: hrtimers.end")
        ticks = {
            c: sum(n - h0.get((cpu, f), 0) for (cpu, f), n in h1.items()
                   if cpu == c and f in TICK_FUNCTIONS)
            for c in loc
        }  # fmt: skip
    return {
        "counters": {"guest_s": guest_s, "jiffies": jiffies, "hz": hz},
        "per_cpu": [
            {
                "cpu": c,
                "ticks": ticks[c] if ticks is not None else None,
                "timer_interrupts": loc[c],
                "hrtimer_retries": hrtimer[c]["nr_retries"],
                "hrtimer_hangs": hrtimer[c]["nr_hangs"],
                "loop_ns": loop_ns[c],
                "idle_ns": idle_ns[c],
                "stat": times[c],
            }
            for c in sorted(loc)
        ],
    }
