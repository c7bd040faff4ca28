"""Progress of long commands on stderr: a live bar on a terminal, a line every few seconds
anywhere else (a log, CI), so a long command is never silent.

```
  experiment runs ── on_progress(done, total) ──┐
                                                ├──► rich bar (terminal) | a line every EVERY_S
  one run (core) ── on_progress(now_ns, done, n, last_arrival_ns) ──┘
```

1. ``bar(unit)`` gives what ``numasim reproduce`` and ``compare`` update per finished batch:
   ``rich.progress.Progress`` on a terminal, else ``Lines``, which has the two methods the
   commands use (``add_task``, ``update``) and prints ``NAME: 120 of 840 runs, 12 s elapsed,
   about 1 min left`` at most every ``EVERY_S`` seconds (``NUMASIM_PROGRESS_S``).
2. ``RunProgress`` is the callback of one simulation (the core calls it every 20 ms of wall
   time): the simulated time reached and the processes completed, with an estimate of the time
   left once a share of them has completed. It shows nothing for the first ``QUIET_S``
   seconds, so short runs print nothing.

Known limits: a run whose processes all complete near its end (one application's threads)
has no estimate before then; its line shows the simulated time reached.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

#: Seconds between two progress lines when stderr is not a terminal; the environment variable
#: ``NUMASIM_PROGRESS_S`` sets another interval.
EVERY_S = 5.0


def _every_s() -> float:
    try:
        return max(0.05, float(os.environ.get("NUMASIM_PROGRESS_S", EVERY_S)))
    except ValueError:
        return EVERY_S


#: A single run shows its progress only after this many seconds.
QUIET_S = 1.0
#: The share of a run's processes completed before its time left is estimated from them.
ESTIMATE_FROM = 0.01


def _duration(s: float) -> str:
    """``42 s``, ``3 min 5 s``, ``2 h 10 min``."""
    s = round(s)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60} min"


def _count(n: int) -> str:
    return f"{n:,}".replace(",", " ")


def _terminal() -> bool:
    return sys.stderr.isatty()


def bar(unit: str = "runs") -> Any:
    """A progress display of counted work (step 1): a rich bar with the time left on a
    terminal's stderr, ``Lines`` elsewhere."""
    if not _terminal():
        return Lines(unit)
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} " + unit),
        TimeRemainingColumn(),
        console=Console(stderr=True),
    )


class Lines:
    """``add_task`` and ``update`` as rich's, printing a line per task at most every
    ``EVERY_S`` seconds while work is left (step 1)."""

    def __init__(self, unit: str) -> None:
        self.unit = unit
        self.tasks: list[dict[str, Any]] = []

    def __enter__(self) -> Lines:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def add_task(self, description: str, total: int | None = None) -> int:
        now = time.monotonic()
        self.tasks.append({"description": description, "total": total, "start": now,
                           "first": None, "last": now})  # fmt: skip
        return len(self.tasks) - 1

    def update(self, task: int, completed: int, total: int | None = None) -> None:
        t = self.tasks[task]
        now = time.monotonic()
        if total is not None:
            t["total"] = total
        if t["first"] is None:  # the runs found in the store are done at once: not a rate
            t["first"] = (now, completed)
            return
        if now - t["last"] < _every_s() or t["total"] is None or completed >= t["total"]:
            return
        t["last"] = now
        line = (f"{t['description']}: {_count(completed)} of {_count(t['total'])} {self.unit}, "
                f"{_duration(now - t['start'])} elapsed")  # fmt: skip
        t0, done0 = t["first"]
        if completed > done0:
            left = (now - t0) / (completed - done0) * (t["total"] - completed)
            line += f", about {_duration(left)} left"
        print(line, file=sys.stderr, flush=True)


class RunProgress:
    """The progress of one simulation (step 2), as ``with RunProgress(label) as p:`` around a
    ``simulate(..., on_progress=p)``; the terminal's line is cleared at the end."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.start = time.monotonic()
        self.last = self.start
        self.live: Any = None
        self.task: Any = None

    def __enter__(self) -> RunProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.stop()

    def text(self, now_ns: int, done: int, processes: int, last_arrival_ns: int) -> str:
        """``simulated 1 234 ms, 12 of 100 000 processes done``, and the time left once a
        share of them is done."""
        elapsed = time.monotonic() - self.start
        line = (f"{self.label}: simulated {_count(round(now_ns / 1e6))} ms, "
                f"{_count(done)} of {_count(processes)} processes done, "
                f"{_duration(elapsed)} elapsed")  # fmt: skip
        if done >= ESTIMATE_FROM * processes and done > 0:
            line += f", about {_duration(elapsed * (processes - done) / done)} left"
        elif now_ns < last_arrival_ns:
            line += f", arrivals until {_count(round(last_arrival_ns / 1e6))} ms"
        return line

    def __call__(self, now_ns: int, done: int, processes: int, last_arrival_ns: int) -> None:
        now = time.monotonic()
        if now - self.start < min(QUIET_S, _every_s()):
            return
        if _terminal():
            if self.live is None:
                from rich.console import Console
                from rich.status import Status

                self.live = Status("", console=Console(stderr=True))
                self.live.start()
            if now - self.last >= 0.2:
                self.last = now
                self.live.update(self.text(now_ns, done, processes, last_arrival_ns))
            return
        if now - self.last >= _every_s():
            self.last = now
            print(self.text(now_ns, done, processes, last_arrival_ns), file=sys.stderr, flush=True)
