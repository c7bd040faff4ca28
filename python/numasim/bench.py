"""`numasim bench`: fixed whole-run scenarios (data/bench/scenarios.toml).

Each scenario runs in a fresh Python process, so its peak memory (``ru_maxrss``) is its own.
The reported wall time is the fastest of ``repeat`` runs of the engine phase (domain building and
workload generation are reported apart).
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

from numasim import _core
from numasim.machine import Machine


def _bench_dir() -> Path:
    return Path(__file__).parent / "data" / "bench"


def scenarios() -> list[dict[str, Any]]:
    """The scenarios, in file order."""
    return tomllib.loads((_bench_dir() / "scenarios.toml").read_text())["scenario"]


def workload_spec(sc: dict[str, Any]) -> str:
    """A scenario's workload: its ``workload`` spec, or the spec of its ``mix``."""
    if "mix" in sc:
        from numasim.apps import Mix

        return Mix.resolve(sc["mix"]).spec
    return sc["workload"]


def _machine(spec: str) -> Machine:
    path = _bench_dir() / spec
    return Machine.from_file(path) if path.is_file() else Machine.preset(spec)


def run_one(name: str) -> dict[str, Any]:
    """Runs one scenario in this process and returns its figures."""
    sc = next(s for s in scenarios() if s["name"] == name)
    m = _machine(sc["machine"])
    runs = [
        json.loads(
            _core.bench_run(m._core, workload_spec(sc), sc["seed"], sc["policy"], sc["domains"])
        )
        for _ in range(sc.get("repeat", 1))
    ]
    best = min(runs, key=lambda r: r["run_s"])
    best["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    best["repeat"] = len(runs)
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
        )
        out.append(json.loads(proc.stdout))
    return out


if __name__ == "__main__":
    print(json.dumps(run_one(sys.argv[1])))
