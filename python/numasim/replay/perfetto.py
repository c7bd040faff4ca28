"""Perfetto traces: the scheduler's ftrace events read through the ``perfetto`` package's
TraceProcessor, as the same events the text formats give (numasim.kernel.parse.Event).

```text
  trace.perfetto-trace ──TraceProcessor(bin_path=--trace-processor, ingest_ftrace_in_raw)──►
      SQL: ftrace_event ⋈ thread ⋈ process (one row per event), args (its fields)
          ──events()──► [Event] ──numasim.replay.schedule──► threads, as for a text trace
```

- The package is an optional extra (``pip install 'numasim[perfetto]'``), imported only here and
  only when a Perfetto trace is read.
- It runs a ``trace_processor_shell`` binary; left to itself it downloads one at run time,
  which numasim never lets it do: the user gives the binary's path (``--trace-processor``),
  and without one the import stops with a line saying how to get one.
- Each event keeps the kernel's field names (``args.prev_pid`` → ``prev_pid=…``), so the
  state machine reads it as it reads a text line; ``prev_state``, an integer in the proto,
  becomes the kernel's letter (``R``, ``R+``, ``S``, ``D``, ``X``, ``Z``, …), and the common
  flags' hardirq, softirq and NMI bits mark an event traced in interrupt context.
- Stack traces are not read (Perfetto records none for tracepoints): a migration's kind comes
  from the events around it only.
"""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path
from typing import Any

from numasim._core import InputError
from numasim.kernel.parse import Event
from numasim.replay.schedule import EVENTS

#: How to get a trace_processor_shell (the line a user without one reads).
HOW_TO_GET = (
    "give --trace-processor PATH to a trace_processor_shell binary (build it from the "
    "Perfetto source with tools/ninja -C out/linux trace_processor_shell, or download it from "
    "the Perfetto releases on a machine that can reach them); numasim never downloads one"
)
#: The first bytes of a Perfetto trace: a TracePacket (field 1, length-delimited).
MAGIC = b"\x0a"
SUFFIXES = (".perfetto-trace", ".pftrace", ".perfetto", ".pb")
#: The events read: the state machine's, and the sched_setaffinity calls.
NAMES = (*sorted(EVENTS), "sched_process_exec", "sys_enter_sched_setaffinity")
#: The kernel's task-state letters, by bit of ``prev_state`` (TASK_REPORT order).
STATE_BITS = "SDTtXZPI"
#: The common flags of an event traced in interrupt context: TRACE_FLAG_HARDIRQ, _SOFTIRQ,
#: _NMI.
IRQ_FLAGS = 0x08 | 0x10 | 0x40

_QUOTED = ", ".join(f"'{n}'" for n in NAMES)
#: One row per event, in time order: when, what, on which CPU, in which thread.
EVENTS_SQL = f"""
SELECT f.ts AS ts, f.name AS name, c.cpu AS cpu, t.tid AS tid, t.name AS comm,
       p.pid AS tgid, f.arg_set_id AS arg_set_id, f.common_flags AS flags
FROM ftrace_event f
LEFT JOIN cpu c USING (ucpu)
LEFT JOIN thread t USING (utid)
LEFT JOIN process p USING (upid)
WHERE f.name IN ({_QUOTED})
ORDER BY f.ts, f.id
"""
#: The fields of those events.
ARGS_SQL = f"""
SELECT a.arg_set_id AS arg_set_id, a.key AS key, a.display_value AS value
FROM args a
WHERE a.arg_set_id IN (SELECT arg_set_id FROM ftrace_event WHERE name IN ({_QUOTED}))
ORDER BY a.arg_set_id, a.id
"""


def looks_like_perfetto(path: str | Path) -> bool:
    """Whether ``path`` is a Perfetto trace (by its suffix, or its first byte in a file that
    is not text)."""
    path = Path(path)
    if path.suffix.lower() in SUFFIXES:
        return True
    if not path.is_file():
        return False
    with path.open("rb") as f:
        head = f.read(512)
    if not head.startswith(MAGIC):
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def open_trace(path: str | Path, trace_processor: str | None) -> Any:
    """A TraceProcessor over ``path`` run by the ``trace_processor`` binary (never a download)."""
    if trace_processor is None:
        raise InputError(f"{path}: a Perfetto trace: {HOW_TO_GET}")
    binary = Path(trace_processor)
    if not binary.is_file() or not os.access(binary, os.X_OK):
        raise InputError(f"--trace-processor: {binary}: not an executable file")
    if not Path(path).is_file():
        raise InputError(f"{path}: no such trace file")
    try:
        from perfetto.trace_processor import TraceProcessor, TraceProcessorConfig
    except ImportError:
        raise InputError(
            f"{path}: reading a Perfetto trace needs the perfetto package: "
            "pip install 'numasim[perfetto]'"
        ) from None
    config = TraceProcessorConfig(bin_path=str(binary), ingest_ftrace_in_raw=True)
    try:
        return TraceProcessor(trace=str(path), config=config)
    except Exception as e:  # the package raises its own exception types, or OSError
        raise InputError(f"{path}: trace_processor_shell could not load it: {e}") from None


def events(tp: Any, origin: str) -> list[Event]:
    """The scheduler events of the trace ``tp`` holds (a TraceProcessor, or any object whose
    ``query(sql)`` yields rows with the columns of EVENTS_SQL and ARGS_SQL)."""
    fields: dict[int, list[str]] = defaultdict(list)
    for row in _rows(tp, ARGS_SQL, origin):
        key = str(row.key).removeprefix("args.")
        fields[row.arg_set_id].append((key, row.value))  # type: ignore[arg-type]
    out = []
    for number, row in enumerate(_rows(tp, EVENTS_SQL, origin), start=1):
        if row.cpu is None or row.ts is None:
            raise InputError(f"{origin}: event {number} ({row.name}) has no CPU or time")
        body = " ".join(f"{k}={_value(row.name, k, v)}" for k, v in fields.get(row.arg_set_id, []))
        name = row.name
        if name == "sys_enter_sched_setaffinity":  # as perf prints it: pid: 0x…
            body = body.replace("pid=", "pid: ", 1)
        out.append(
            Event(
                int(row.ts),
                int(row.cpu),
                int(row.tid or 0),
                str(row.comm or ""),
                name,
                body,
                line=number,
                tgid=int(row.tgid) if row.tgid is not None else None,
                irq=bool(int(row.flags or 0) & IRQ_FLAGS),
            )
        )
    if not out:
        raise InputError(
            f"{origin}: no scheduler events (record the sched/sched_switch, sched_wakeup, ... "
            "ftrace events in the trace config)"
        )
    return out


def _rows(tp: Any, sql: str, origin: str) -> list[Any]:
    """The rows of ``sql``; the trace processor's refusal (a table or column its version does
    not have) as one line."""
    try:
        return list(tp.query(sql))
    except Exception as e:  # the package's TraceProcessorException, or a broken connection
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise InputError(
            f"{origin}: the trace processor refused numasim's query: {first}"
        ) from None


def _value(name: str, key: str, value: Any) -> str:
    if name == "sched_switch" and key == "prev_state":
        return state_letter(int(value))
    if name == "sys_enter_sched_setaffinity" and key == "pid":
        return f"0x{int(value):x}"
    return "" if value is None else str(value)


def state_letter(state: int) -> str:
    """The kernel's letter of a ``prev_state`` value: ``R`` (running, preempted: ``R+``),
    else the letter of its lowest reported bit."""
    low = state & 0xFF
    if low == 0:
        return "R+" if state else "R"
    bit = (low & -low).bit_length() - 1
    return STATE_BITS[bit]


def read(path: str | Path, trace_processor: str | None, beside: dict[str, str]) -> Any:
    """The TraceFiles of a Perfetto trace: its events, read once, and the files beside it."""
    from numasim.replay import TraceFiles

    tp = open_trace(path, trace_processor)
    try:
        found = events(tp, str(path))
    finally:
        tp.close()
    return TraceFiles(str(path), "", beside, events=found)
