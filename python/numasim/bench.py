"""`numasim bench`: fixed whole-run scenarios (data/bench/scenarios.toml).

Each scenario runs in a fresh Python process, so its peak memory (``ru_maxrss``) is its own.
The reported wall time is the fastest of ``repeat`` runs of the engine phase (domain building and
workload generation are reported apart).

Those processes end with the command, even a killed one (numasim.lifeline); Ctrl-C stops the
run in progress within milliseconds.

``--scaling`` (data/bench/scaling.toml) sweeps the cost per process from 128 to 4 096 CPUs at
equal load, a fresh process per point; ``--peer simso`` is numasim.peer.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tomllib
from typing import Any

from numasim import _core
from numasim.lifeline import child_env, die_with_command
from numasim.machine import Machine, data_dir


def scenarios() -> list[dict[str, Any]]:
    """The scenarios, in file order."""
    return tomllib.loads((data_dir("bench") / "scenarios.toml").read_text())["scenario"]


def workload_spec(sc: dict[str, Any]) -> str:
    """A scenario's workload: its ``workload`` spec, or the spec of its ``mix``."""
    if "mix" in sc:
        from numasim.apps import Mix

        return Mix.resolve(sc["mix"]).spec
    return sc["workload"]


def _machine(spec: str) -> Machine:
    path = data_dir("bench") / spec
    return Machine.from_file(path) if path.is_file() else Machine.preset(spec)


def _fastest(m: Machine, spec: str, sc: dict[str, Any]) -> dict[str, Any]:
    """The fastest of ``sc``'s ``repeat`` runs (default 1) of ``spec`` on ``m`` with its seed,
    policy and domains, with ``repeat`` and this process's peak memory."""
    runs = [
        json.loads(_core.bench_run(m._core, spec, sc["seed"], sc["policy"], sc["domains"]))
        for _ in range(sc.get("repeat", 1))
    ]
    best = min(runs, key=lambda r: r["run_s"])
    best["repeat"] = len(runs)
    best["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return best


def run_one(name: str) -> dict[str, Any]:
    """Runs one scenario in this process and returns its figures."""
    sc = next(s for s in scenarios() if s["name"] == name)
    m = _machine(sc["machine"])
    best = _fastest(m, workload_spec(sc), sc)
    best["name"] = name
    best["title"] = sc["title"]
    return best


def run_all(names: list[str] | None = None) -> list[dict[str, Any]]:
    """Every (or the named) scenario, each in a fresh process."""
    out = []
    for sc in scenarios():
        if names and sc["name"] not in names:
            continue
        proc = subprocess.run(
            [sys.executable, "-m", "numasim.bench", sc["name"]],
            capture_output=True,
            text=True,
            check=True,
            env=child_env(),
        )
        out.append(json.loads(proc.stdout))
    return out


# --- Python policies against their base (--policies) ----------------------------------------


def policy_bench() -> dict[str, Any]:
    """data/bench/policies.toml."""
    return tomllib.loads((data_dir("bench") / "policies.toml").read_text())


def run_policies() -> list[dict[str, Any]]:
    """Each policy of data/bench/policies.toml, the fastest of ``repeat`` runs in this process,
    with its ratio to the first (the base alone). Times are this thread's CPU time (the engine
    and the callbacks run on it): on a shared machine, wall time would count other processes'
    turns, which a 20 ms run under a load of 10 nearly always takes."""
    import time

    from numasim.policy import parse

    pb = policy_bench()
    examples = data_dir("policies")  # the example policies ship with the package
    m = _machine(pb["machine"])
    w = _core.Workload.generate(m._core, pb["workload"], pb["seed"])
    d = _core.Domains.build(m._core, pb["domains"])
    out = []
    for p in pb["policy"]:
        text = p["policy"]
        spec = parse(text.replace("py:", f"py:{examples}/", 1), "policies.toml") if (
            text.startswith("py:")) else None  # fmt: skip
        best = float("inf")
        for _ in range(pb.get("repeat", 1)):
            adapter = spec.adapter() if spec else None
            t = time.thread_time()
            _core.simulate_summary(m._core, d, w, spec.base if spec else text, "", adapter)
            best = min(best, time.thread_time() - t)
        ratio = best / out[0]["run_s"] if out else 1.0
        out.append({"name": p["name"], "title": p["title"], "policy": text, "run_s": best,
                    "ratio": ratio, "limit": p.get("limit")})  # fmt: skip
    return out


def policies_text(results: list[dict[str, Any]]) -> str:
    pb = policy_bench()
    lines = [f"{pb['machine']}, {pb['workload']}, seed {pb['seed']}, {pb['domains']} domains; "
             f"the fastest of {pb.get('repeat', 1)} runs each, CPU time"]  # fmt: skip
    for r in results:
        aim = f" (aim: at most {r['limit']}×)" if r["limit"] else ""
        lines.append(f"  {r['name']:<13} {r['run_s'] * 1e3:8.1f} ms  {r['ratio']:6.1f}× the base"
                     f"{aim}  {r['title']}")  # fmt: skip
    return "\n".join(lines)


# --- the scaling sweep (--scaling) ---------------------------------------------------------


def scaling() -> dict[str, Any]:
    """data/bench/scaling.toml: machines, processes per CPU, workload template, seed, policy,
    domains."""
    return tomllib.loads((data_dir("bench") / "scaling.toml").read_text())


def scaling_point(machine: str) -> dict[str, Any]:
    """One point of the sweep in this process: n = processes_per_cpu × the machine's CPUs, the
    fastest of ``repeat`` runs."""
    sw = scaling()
    m = _machine(machine)
    n = sw["processes_per_cpu"] * m.cpus
    r = _fastest(m, f"n={n},{sw['workload']}", sw)
    r["us_per_process"] = r["run_s"] / r["processes"] * 1e6
    r["machine"] = machine
    return r


def scaling_cpus() -> dict[str, int]:
    """CPUs of each machine of the sweep, by machine file."""
    return {name: _machine(name).cpus for name in scaling()["machines"]}


def run_scaling(cpus: list[int] | None = None) -> list[dict[str, Any]]:
    """Every point (or those with the given CPU counts), each in a fresh process."""
    out = []
    for name, c in scaling_cpus().items():
        if cpus and c not in cpus:
            continue
        proc = subprocess.run([sys.executable, "-m", "numasim.bench", "--scaling-point", name],
                              capture_output=True, text=True, check=True,
                              env=child_env())  # fmt: skip
        out.append(json.loads(proc.stdout))
    return out


def scaling_text(points: list[dict[str, Any]]) -> str:
    """The sweep as a table, then the ratio of the largest to the smallest per-process cost."""
    sw = scaling()
    lines = [f"{sw['policy']} over {sw['domains']} domains, {sw['processes_per_cpu']} processes "
             f"per CPU ({sw['workload']}), seed {sw['seed']}; each point in a fresh process, "
             f"the fastest of {sw.get('repeat', 1)} runs",
             f"{'CPUs':>6} {'processes':>10} {'run s':>9} {'µs/process':>11} {'events':>11} "
             f"{'peak MB':>8}"]  # fmt: skip
    for p in points:
        lines.append(f"{p['cpus']:>6} {p['processes']:>10} {p['run_s']:>9.3f} "
                     f"{p['us_per_process']:>11.1f} {p['events']:>11} "
                     f"{p['peak_rss_mb']:>8.0f}")  # fmt: skip
    costs = [p["us_per_process"] for p in points]
    hi, lo = points[costs.index(max(costs))], points[costs.index(min(costs))]
    lines.append(f"largest / smallest per-process cost: {max(costs) / min(costs):.2f}× "
                 f"({hi['cpus']} vs {lo['cpus']} CPUs)")  # fmt: skip
    return "\n".join(lines)


if __name__ == "__main__":
    die_with_command()
    if sys.argv[1] == "--scaling-point":
        print(json.dumps(scaling_point(sys.argv[2])))
    else:
        print(json.dumps(run_one(sys.argv[1])))
