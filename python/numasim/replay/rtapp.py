"""rt-app JSON: a workload written for rt-app to run, and an rt-app description read as one.

rt-app (github.com/scheduler-tools/rt-app, doc/tutorial.txt) runs threads described by
``tasks``: each with an initial ``delay`` (µs), optional ``cpus`` and a sequence of events
(``run``, ``sleep`` in µs) in ``phases``, each phase repeated ``loop`` times. A numasim process
maps to one task (docs/workloads.md, "rt-app"):

- arrival → ``delay``; affinity at creation → ``cpus``;
- cpu-bound: one phase ``{"loop": 1, "run": demand}``;
- IO-bound: ``{"loop": k, "run": burst_mean, "sleep": wait_mean}`` with k = ⌊demand /
  burst_mean⌋, then ``{"loop": 1, "run": rest}`` when the demand is not a multiple. rt-app's
  runs and sleeps are fixed where numasim's are exponential with those means: the file gives
  rt-app the workload's means, not numasim's draws.

Reading, a task becomes a process whose demand is the sum of its runs (``run`` and
``runtime`` alike) over phases and loops, IO-bound when it sleeps: its mean burst is the mean
run between two sleeps (the burst after the last sleep is cut to the demand left, as numasim's
last burst is, so it does not count), its mean wait the mean sleep (``timer`` counts as a
sleep of its period). What rt-app cannot say (memory intensity, spawn CPU, the burst-draw seed,
thread groups) goes in a ``numasim`` object beside ``tasks``, which rt-app does not read; without
it, mem is 0, the spawn CPU the first allowed CPU (else 0), each task its own group and the seed
drawn from the reader's. It also keeps the kind and means of an IO-bound process whose demand
is under one burst (written as one run, no sleep) and the unused means of a cpu-bound one, so
that export then import gives the same workload. Times are whole µs: a workload whose times
are not is refused.
"""

from __future__ import annotations

import json
from typing import Any

from numasim._core import InputError
from numasim.kernel.parse import cpulist_text, parse_cpulist
from numasim.replay.build import _seed

US = 1000
#: rt-app events read as CPU work or as sleeps; any other event of a task is refused.
RUN_EVENTS = ("run", "runtime")
SLEEP_EVENTS = ("sleep",)
#: Task and phase keys that are no event.
PROPERTIES = {
    "instance", "delay", "phases", "loop", "cpus", "policy", "priority", "dl-runtime",
    "dl-period", "dl-deadline", "util_min", "util_max", "membind_nodes", "taskgroup",
    "nice",
}  # fmt: skip


def export(workload: dict[str, Any], origin: str = "workload") -> dict[str, Any]:
    """The rt-app JSON of a workload (its JSON form, as ``Workload.to_json`` writes it)."""
    if workload.get("apps"):
        raise InputError(
            f"{origin}: an application workload (app=) has barriers and queues rt-app JSON "
            "cannot carry here; export its processes without them"
        )
    tasks: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for p in workload["processes"]:
        name = f"p{p['pid']}"
        where = f"{origin}: process {p['pid']}"
        for key in ("arrival_ns", "demand_ns", "burst_mean_ns", "wait_mean_ns"):
            if p[key] % US:
                raise InputError(
                    f"{where}: {key} {p[key]} is not a whole number of µs, rt-app's unit"
                )
        task: dict[str, Any] = {"instance": 1}
        if p["arrival_ns"]:
            task["delay"] = p["arrival_ns"] // US
        affinity = p.get("affinity") or []
        if affinity:
            if len(affinity) > 1 or affinity[0]["at_ns"] > p["arrival_ns"]:
                raise InputError(
                    f"{where}: its CPUs change after its arrival, which rt-app's phases (not "
                    "times) cannot say"
                )
            task["cpus"] = _cpus(affinity[0]["cpus"])
        demand, burst = p["demand_ns"] // US, p["burst_mean_ns"] // US
        if p["kind"] == "io" and burst and demand >= burst:
            phases = {
                "p0": {"loop": demand // burst, "run": burst, "sleep": p["wait_mean_ns"] // US}
            }
            if demand % burst:
                phases["p1"] = {"loop": 1, "run": demand % burst}
        else:
            phases = {"p0": {"loop": 1, "run": demand}}
        task["loop"] = 1
        task["phases"] = phases
        tasks[name] = task
        extra[name] = {k: p[k] for k in ("tgid", "mem", "spawn_cpu", "seed", "kind",
                                          "burst_mean_ns", "wait_mean_ns")}  # fmt: skip
    return {
        "global": {"duration": -1, "default_policy": "SCHED_OTHER", "calibration": "CPU0"},
        "tasks": tasks,
        "numasim": extra,
    }


def _cpus(cpulist: str) -> list[int]:
    return parse_cpulist(cpulist)


def load(data: Any, origin: str, seed: int = 0) -> dict[str, Any]:
    """The workload JSON (``{"processes": [...]}``) of an rt-app description."""
    if not isinstance(data, dict) or not isinstance(data.get("tasks"), dict) or not data["tasks"]:
        raise InputError(f"{origin}: not an rt-app description (no tasks object)")
    extra = data.get("numasim") or {}
    rows = []
    for name, task in data["tasks"].items():
        where = f"{origin}: tasks.{name}"
        if not isinstance(task, dict):
            raise InputError(f"{where}: a task must be an object")
        instances = _int(task.get("instance", 1), f"{where}.instance")
        delay = _int(task.get("delay", 0), f"{where}.delay")
        loops = _int(task.get("loop", 1), f"{where}.loop")
        if loops < 1:
            raise InputError(
                f"{where}.loop: {loops}: a task repeated forever has no demand to replay; give "
                "a number of loops"
            )
        phases = task.get("phases")
        if phases is None:
            phases = {
                "p": {k: v for k, v in task.items() if k not in ("instance", "delay", "loop")}
            }
        elif not isinstance(phases, dict):
            raise InputError(f"{where}.phases: must be an object")
        seq: list[tuple[str, int]] = []
        for pname, phase in phases.items():
            pwhere = f"{where}.phases.{pname}"
            if not isinstance(phase, dict):
                raise InputError(f"{pwhere}: a phase must be an object")
            one = []
            for key, value in phase.items():
                event = key.rstrip("0123456789")  # workgen's numbered repeats: run0, run1
                if key in PROPERTIES or event in PROPERTIES:
                    continue
                if event in RUN_EVENTS:
                    one.append(("run", _int(value, f"{pwhere}.{key}") * US))
                elif event in SLEEP_EVENTS:
                    one.append(("sleep", _int(value, f"{pwhere}.{key}") * US))
                elif event == "timer" and isinstance(value, dict) and "period" in value:
                    one.append(("sleep", _int(value["period"], f"{pwhere}.{key}.period") * US))
                else:
                    raise InputError(
                        f"{pwhere}.{key}: an rt-app event numasim cannot replay (it reads run, "
                        "runtime, sleep and timer)"
                    )
            ploops = _int(phase.get("loop", 1), f"{pwhere}.loop")
            if ploops < 1:
                raise InputError(f"{pwhere}.loop: {ploops}: a phase must run at least once")
            seq.extend(one * ploops)
        seq *= loops
        demand = sum(v for k, v in seq if k == "run")
        if demand == 0:
            raise InputError(f"{where}: no run event: nothing for the CPU")
        sleeps = [v for k, v in seq if k == "sleep"]
        bursts, current = [], 0
        for k, v in seq:
            if k == "run":
                current += v
            elif current:
                bursts.append(current)
                current = 0
        cpus = task.get("cpus")
        if cpus is not None and (not isinstance(cpus, list) or not cpus):
            raise InputError(f"{where}.cpus: {json.dumps(cpus)} is not a list of CPUs")
        for _ in range(instances):
            rows.append((delay * US, name, demand, sleeps, bursts, cpus))
    processes = []
    for i, (arrival, name, demand, sleeps, bursts, cpus) in enumerate(rows):
        known = extra.get(name, {}) if isinstance(extra, dict) else {}
        io = bool(sleeps) and bool(bursts)
        p: dict[str, Any] = {
            "pid": i,
            "tgid": known.get("tgid", i),
            "arrival_ns": arrival,
            "demand_ns": demand,
            "kind": "io" if io else "cpu",
            "mem": known.get("mem", 0.0),
            "spawn_cpu": known.get("spawn_cpu", cpus[0] if cpus else 0),
            "burst_mean_ns": round(sum(bursts) / len(bursts)) if io else 0,
            "wait_mean_ns": round(sum(sleeps) / len(sleeps)) if io else 0,
            "seed": known.get("seed", _seed(seed, i)),
        }
        if not io:  # no sleep: the means numasim keeps (unused by a cpu-bound process)
            p["burst_mean_ns"] = known.get("burst_mean_ns", 0)
            p["wait_mean_ns"] = known.get("wait_mean_ns", 0)
            if known.get("kind") == "io":  # demand under one burst: no sleep was written
                p["kind"] = "io"
        if cpus is not None:
            ids = [_int(c, f"{origin}: tasks.{name}.cpus") for c in cpus]
            p["affinity"] = [{"at_ns": 0, "cpus": cpulist_text(ids)}]
        processes.append(p)
    return {"processes": processes}


def _int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"{where}: {json.dumps(value)} is not a whole number")
    return value
