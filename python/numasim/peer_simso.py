"""The SimSo side of ``numasim bench --peer simso``: runs exported jobs in SimSo 0.8.5.

Standalone on purpose: it imports only the standard library and SimSo, so a fresh interpreter
running it (``python peer_simso.py JOBS.json``, as numasim.peer does) pays SimSo's start-up and
nothing of numasim's. Reads ``{"cpus", "scheduler", "relative_deadline_ns", "jobs": [{"pid",
"arrival_ns", "demand_ns"}]}``; prints ``{"sim_s", "completed", "makespan_ms", "mean_tat_ms"}``.

1. One SimSo *sporadic* task per job, with a single activation date (its arrival) and WCET = its
   demand under the ``wcet`` execution-time model, so each task releases exactly one job that
   needs exactly its demand; ``abort_on_miss`` off and one relative deadline for all.
2. SimSo is configured with one cycle per time unit and every time in nanoseconds: it converts
   times with ``int(value × cycles_per_ms)``, which would truncate a float millisecond, so the
   jobs keep numasim's integer nanoseconds exactly (SimSo's "ms" fields hold ns here).
3. The simulation call timed is ``Model(configuration)`` plus ``run_model()``; SimSo 0.8.5's
   global EDF prints a line per scheduling decision, sent to /dev/null meanwhile.
4. The horizon is the last arrival plus the sum of all demands: any work-conserving schedule of
   these jobs has ended by then (SimSo simulates until the horizon, idle or not, but an idle
   SimSo costs nothing but its progress timer's 20 ticks).
5. Given the command's pid (its second argument), it ends when the command does, even after a
   ``kill -9`` of the command (Linux's parent-death signal; numasim.lifeline does the same for
   numasim's own helpers, but importing numasim here would add to the time measured).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
import warnings


def configuration(jobs: list[dict], cpus: int, scheduler: str, relative_deadline_ns: int):
    """SimSo's Configuration of ``jobs`` on ``cpus`` identical processors under ``scheduler``."""
    with warnings.catch_warnings():
        # SimSo 0.8.5 imports the `imp` module, deprecated since Python 3.4 (gone in 3.12).
        warnings.simplefilter("ignore", DeprecationWarning)
        from simso.configuration import Configuration

    cfg = Configuration()
    cfg.cycles_per_ms = 1  # one cycle per unit; every time below is in ns
    cfg.etm = "wcet"
    for j in jobs:
        cfg.add_task(name=f"P{j['pid']}", identifier=j["pid"], task_type="Sporadic",
                     abort_on_miss=False, period=relative_deadline_ns, activation_date=0,
                     list_activation_dates=[j["arrival_ns"]], wcet=j["demand_ns"],
                     deadline=relative_deadline_ns)  # fmt: skip
    for c in range(cpus):
        cfg.add_processor(name=f"CPU{c}", identifier=c)
    cfg.scheduler_info.clas = scheduler
    cfg.duration = max(j["arrival_ns"] for j in jobs) + sum(j["demand_ns"] for j in jobs) + 1
    cfg.check_all()
    return cfg


def simulate(jobs: list[dict], cpus: int, scheduler: str, relative_deadline_ns: int):
    """``(model, seconds)``: SimSo's model after its run, and the simulation call's time."""
    cfg = configuration(jobs, cpus, scheduler, relative_deadline_ns)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from simso.core import Model

    with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):
        t0 = time.perf_counter()
        model = Model(cfg)
        model.run_model()
        return model, time.perf_counter() - t0


def run(jobs: list[dict], cpus: int, scheduler: str, relative_deadline_ns: int) -> dict:
    """Runs the jobs in SimSo; the simulation call's time and what the jobs experienced."""
    model, sim_s = simulate(jobs, cpus, scheduler, relative_deadline_ns)
    done = [j for t in model.task_list for j in t.jobs if j.end_date is not None]
    tat = [j.end_date - j.activation_date for j in done]
    return {
        "sim_s": sim_s,
        "completed": len(done),
        "makespan_ms": max(j.end_date for j in done) / 1e6 if done else 0.0,
        "mean_tat_ms": sum(tat) / len(tat) / 1e6 if tat else 0.0,
    }


def die_with_parent(pid: int) -> None:
    """Asks Linux for SIGKILL when the parent exits; gone already, exits at once."""
    if sys.platform != "linux":
        return
    import ctypes
    import signal

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    if os.getppid() != pid:
        os._exit(1)


def main(path: str) -> None:
    with open(path) as f:
        spec = json.load(f)
    out = run(spec["jobs"], spec["cpus"], spec["scheduler"], spec["relative_deadline_ns"])
    print(json.dumps(out))


if __name__ == "__main__":
    if len(sys.argv) > 2:
        die_with_parent(int(sys.argv[2]))
    main(sys.argv[1])
