"""Perfetto traces: the SQL rows a TraceProcessor returns, turned into the events the text
formats give. No trace_processor_shell can be had on this machine (no package index it reaches
ships one, and numasim never downloads one), so a fake TraceProcessor returns the rows the two
queries would: those of the ping-pong trace, field by field as Perfetto stores them (ints,
``args.`` keys, prev_state as the kernel's bits, the common flags)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from numasim import replay
from numasim.cli import main
from numasim.kernel.parse import parse_trace
from numasim.replay import perfetto
from numasim.replay.schedule import schedule

TRACES = Path(__file__).parent / "data" / "traces"
PING_PONG = TRACES / "ping-pong.txt"
#: prev_state letters and the kernel's bits (TASK_REPORT; 0x100 preempted).
BITS = {"R": 0, "R+": 0x100, "S": 1, "D": 2, "X": 16, "Z": 32, "I": 0x80}


class FakeTraceProcessor:
    """Answers EVENTS_SQL and ARGS_SQL with recorded rows."""

    def __init__(self, events, args):
        self.rows = {perfetto.EVENTS_SQL: events, perfetto.ARGS_SQL: args}
        self.closed = False

    def query(self, sql):
        return iter(self.rows[sql])

    def close(self):
        self.closed = True


def _recorded(text: str) -> FakeTraceProcessor:
    """The rows Perfetto holds for the events of a text trace."""
    events, args = [], []
    for i, e in enumerate(parse_trace(text, "t", strict=True)):
        flags = 0x08 if e.irq else 0x01
        events.append(
            SimpleNamespace(
                ts=e.ts,
                name=e.name,
                cpu=e.cpu,
                tid=e.pid,
                comm=e.task,
                tgid=e.tgid,
                arg_set_id=i,
                flags=flags,
            )
        )
        for key, value in re.findall(r"(\w+)=(\S+)", e.body):
            if key == "prev_state":
                value = BITS[value]
            elif value.lstrip("-").isdigit():
                value = int(value)
            args.append(SimpleNamespace(arg_set_id=i, key=f"args.{key}", value=value))
    return FakeTraceProcessor(events, args)


def test_rows_give_the_schedule_the_text_gives():
    text = PING_PONG.read_text()
    from_text = schedule(parse_trace(text, "t", strict=True), "t")
    from_rows = schedule(perfetto.events(_recorded(text), "t"), "t")
    for pid in (200, 300):
        a, b = from_text.threads[pid], from_rows.threads[pid]
        assert (a.runs, a.sleeps, a.waits, a.migrations) == (b.runs, b.sleeps, b.waits,
                                                              b.migrations)  # fmt: skip
    assert from_rows.threads[200].sleeps == [(1_002_000_000, 1_005_000_000, 300)]


def test_an_event_in_interrupt_context_has_no_waker():
    fake = _recorded(PING_PONG.read_text())
    waking = next(r for r in fake.rows[perfetto.EVENTS_SQL]
                  if r.name == "sched_waking" and r.ts == 1_005_000_000)  # fmt: skip
    waking.flags = 0x08 | 0x01  # hardirq, irqs off
    s = schedule(perfetto.events(fake, "t"), "t")
    assert s.threads[200].sleeps == [(1_002_000_000, 1_005_000_000, None)]


@pytest.mark.parametrize(
    ("bits", "letter"),
    [(0, "R"), (0x100, "R+"), (1, "S"), (2, "D"), (16, "X"), (32, "Z"), (0x80, "I"), (0x101, "S")],
)
def test_prev_state_bits_are_the_kernel_s_letters(bits, letter):
    assert perfetto.state_letter(bits) == letter


def test_a_setaffinity_call_is_read_with_its_pid():
    row = SimpleNamespace(ts=1, name="sys_enter_sched_setaffinity", cpu=0, tid=7, comm="t",
                          tgid=7, arg_set_id=0, flags=0)  # fmt: skip
    arg = SimpleNamespace(arg_set_id=0, key="args.pid", value=400)
    (e,) = perfetto.events(FakeTraceProcessor([row], [arg]), "t")
    assert e.body == "pid: 0x190"


def test_no_scheduler_rows_is_one_line():
    with pytest.raises(replay.InputError, match="no scheduler events"):
        perfetto.events(FakeTraceProcessor([], []), "t")


def test_a_query_the_trace_processor_refuses_is_one_line():
    class Old(FakeTraceProcessor):
        def query(self, sql):
            raise RuntimeError("Error in query: no such column: ucpu\n  at line 4")

    with pytest.raises(
        replay.InputError, match=r"refused numasim's query: .*no such column: ucpu$"
    ):
        perfetto.events(Old([], []), "t")


def test_import_trace_reads_a_perfetto_trace_through_the_given_binary(
    tmp_path, capsys, monkeypatch
):
    trace = tmp_path / "pp.perfetto-trace"
    trace.write_bytes(b"\x0a\x00")
    (tmp_path / "numactl.txt").write_text((TRACES / "numactl.txt").read_text())
    fake = _recorded(PING_PONG.read_text())
    seen = {}

    def open_trace(path, binary):
        seen["binary"] = binary
        return fake

    monkeypatch.setattr(perfetto, "open_trace", open_trace)
    out = tmp_path / "w.json"
    code = main(["import-trace", str(trace), "--trace-processor", "/opt/tp", "--comm",
                 "^p[io]ng$", "-o", str(out)])  # fmt: skip
    assert code == 0 and seen["binary"] == "/opt/tp" and fake.closed
    text_out = tmp_path / "t.json"
    assert main(["import-trace", str(PING_PONG), "--comm", "^p[io]ng$", "-o", str(text_out)]) == 0
    assert json.loads(out.read_text()) == json.loads(text_out.read_text())


def test_without_a_trace_processor_it_says_how_to_get_one(tmp_path, capsys):
    trace = tmp_path / "pp.pftrace"
    trace.write_bytes(b"\x0a\x05\xff\xfe\x00\x01\x02")
    assert main(["import-trace", str(trace)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--trace-processor PATH" in err
    assert "never downloads" in err
    # the same bytes under another name: told by their first byte
    other = tmp_path / "trace.bin"
    other.write_bytes(trace.read_bytes())
    assert main(["replay", str(other)]) == 2
    assert "a Perfetto trace" in capsys.readouterr().err
    assert main(["import-trace", str(trace), "--trace-processor", str(tmp_path)]) == 2
    assert "not an executable file" in capsys.readouterr().err
