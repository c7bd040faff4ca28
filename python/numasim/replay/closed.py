"""Closed-loop replay (``perf sched replay``'s model): a sleep becomes a wait for its waker.

Open-loop replay turns every sleep into a timed block: the replayed thread wakes when the real
one did, however late its waker runs in the simulation. Closed loop keeps the dependency
instead: a sleep ended by a wake-up from another replayed thread is a wait at a sync point
that the waker signals when it has done the work it had done when it woke the sleeper in the
trace. A slower machine then stretches both sides of a ping-pong, as it would the real pair.

Each replayed thread group becomes a structured application (the application model's
segments, numasim.apps), its threads' plans read from the trace:

```text
  thread:  run ─ run ─┤sleep├─ run ─ wake X ─ run ─┤sleep├─ …
  plan:    [work]      [wait p | sleep ns, work, signal q]   [wait …, work …]
           p: the point X signals at the work it had done when it woke this thread
```

- **points**: one per sleep whose waker is replayed, numbered by the wake-up's time; shared
  across thread groups (``App.shared_points``), since a process is often woken by another
  process (a pipe, a socket);
- **timed blocks**: a sleep whose waker is not replayed stays a timed block of its traced
  length (``Segment.sleep_ns``): woken from an interrupt or by the idle task (no waker), by a
  thread left out (a per-CPU kernel thread, one not selected or that never ran), or with no
  wake-up event in the trace; each reason is counted;
- **positions**: a cut in a thread's work falls where its running time (each interval scaled by
  its CPU's speed, as the demand is) had reached at the event, rounded to a ns; a wake-up and a
  sleep with no work between them share a cut; where a segment would hold no work it holds
  1 ns (the application model refuses empty segments), so a thread's demand can exceed its
  traced CPU time by a few ns;
- a sleep at the end of a thread's last work (nothing runs after it) is left out.

Causality keeps the plans free of deadlock: a signal sits after every wait of its waker that
ended before the wake-up in the trace, so the waits a signal depends on all ended earlier.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from numasim.replay.schedule import Thread

#: Why a sleep stayed a timed block.
NO_WAKER = "no waker traced (an interrupt, the idle task, or no wake-up event)"
NOT_REPLAYED = "woken by a thread that is not replayed"


@dataclass
class Closed:
    """The plans of a closed-loop import and what became of its sleeps."""

    #: Per thread (numasim pid order), its segments as the workload's JSON writes them.
    plans: list[list[dict[str, Any]]]
    points: int
    #: Sleeps that became waits for their waker.
    waits: int = 0
    #: Sleeps that stayed timed blocks, by reason.
    timed: Counter[str] = field(default_factory=Counter)


def plans(threads: list[Thread], speeds: list[float]) -> Closed:
    """The segment plans of ``threads`` (numasim pid ``i`` is ``threads[i]``)."""
    index = {t.pid: i for i, t in enumerate(threads)}
    # Each sleep's fate (a wait at a point, or a timed block), and the signals each waker
    # owes: (time, point).
    fate: dict[tuple[int, int], tuple[str, int]] = {}
    out = Closed([], 0)
    pending: list[tuple[int, int, int, int]] = []  # (wake-up time, waker, sleeper, sleep)
    for i, t in enumerate(threads):
        for k, (start, end, waker) in enumerate(t.sleeps):
            if waker is None:
                fate[i, k] = ("sleep", max(1, end - start))
                out.timed[NO_WAKER] += 1
            elif waker not in index or waker == t.pid:
                fate[i, k] = ("sleep", max(1, end - start))
                out.timed[NOT_REPLAYED] += 1
            else:
                pending.append((end, index[waker], i, k))
    pending.sort()
    signals: list[list[tuple[int, int]]] = [[] for _ in threads]
    for point, (end, w, i, k) in enumerate(pending):
        fate[i, k] = ("wait", point)
        signals[w].append((end, point))
        out.waits += 1
    out.points = len(pending)
    out.plans = [_plan(t, i, speeds, signals[i], fate) for i, t in enumerate(threads)]
    return out


def _plan(
    t: Thread,
    i: int,
    speeds: list[float],
    signals: list[tuple[int, int]],
    fate: dict[tuple[int, int], tuple[str, int]],
) -> list[dict[str, Any]]:
    # Events in time order; at one instant a wake-up comes before the waker's own sleep (it
    # woke the other thread, then blocked).
    items = [(ts, 0, point) for ts, point in signals]
    items += [(start, 1, k) for k, (start, _, _) in enumerate(t.sleeps)]
    items.sort()
    runs = t.runs
    r, done = 0, 0.0  # runs fully before the cursor, and their work

    def work_at(ts: int) -> int:
        nonlocal r, done
        while r < len(runs) and runs[r][1] <= ts:
            a, b, c = runs[r]
            done += (b - a) * speeds[c]
            r += 1
        partial = 0.0
        if r < len(runs) and runs[r][0] < ts:
            a, _, c = runs[r]
            partial = (ts - a) * speeds[c]
        return round(done + partial)

    segments: list[dict[str, Any]] = []
    before: dict[str, Any] = {}  # what the next segment waits or sleeps for
    cut = 0
    for ts, order, what in items:
        pos = work_at(ts)
        if order == 0:  # a wake-up: signal `what` here
            if pos <= cut and segments and not before and "signal" not in segments[-1]:
                segments[-1]["signal"] = what  # at the last cut: no work in between
                continue
            work = max(1, pos - cut)
            segments.append({**before, "work_ns": work, "signal": what})
        else:  # a sleep begins: the next segment waits or sleeps
            kind, value = fate[i, what]
            block = (
                {"wait": {"point": value, "count": 1}} if kind == "wait" else {"sleep_ns": value}
            )
            if pos <= cut and segments and not before:
                before = block  # no work since the last cut
                continue
            work = max(1, pos - cut)
            segments.append({**before, "work_ns": work})
            before = block
        cut += work
        before = {} if order == 0 else before
    total = work_at(runs[-1][1] + 1) if runs else 0
    if total > cut or not segments:
        segments.append({**before, "work_ns": max(1, total - cut)})
    return segments
