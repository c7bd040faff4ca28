"""Where a Python policy's time goes, per call, on `numasim bench --policies`' scenario.

    .venv/bin/python tools/policy_costs.py [--repeat 5]

Runs the scenario of data/bench/policies.toml (mehta-m1, 500 processes) under the base alone,
under policies made to measure one part each — a callback that reads nothing, one that reads
both column sets — and under the two bench policies; prints the fastest of `--repeat` runs of
each, the calls made, and the microseconds a call above the base. Subtracting one row from the
next gives the cost of a part: the crossing into Python (empty), building the view (columns),
the policy's own code (the example). Measured in one process, in the CPU time of its thread
(the engine and the callbacks run on it), so other processes' turns are not counted; their
use of the caches still is.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from numasim import _core
from numasim.bench import _machine, policy_bench
from numasim.policy import parse

ROOT = Path(__file__).resolve().parent.parent

PROBES = """
from numasim.policy import Policy


class Empty(Policy):
    def balance(self, view):
        return None


class Columns(Policy):
    def balance(self, view):
        view.tasks.pid, view.tasks.load, view.cpus.nr_running


class EmptyCpu(Policy):
    balance_cpu_when = "idle"

    def balance_cpu(self, view, cpu, level, kind):
        return None


class EmptyCpuOverloaded(EmptyCpu):
    balance_cpu_when = "idle+overloaded"
"""


def calls(m, d, w, spec) -> int:
    """How many callbacks a run under ``spec`` makes (counted in a run of its own)."""
    adapter = spec.adapter()
    n = 0
    for hook in ("balance", "balance_cpu", "place"):
        inner = getattr(adapter, hook)

        def counted(*a, inner=inner):
            nonlocal n
            n += 1
            return inner(*a)

        setattr(adapter, hook, counted)
    _core.simulate_summary(m._core, d, w, spec.base, "", adapter)
    return n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    pb = policy_bench()
    m = _machine(pb["machine"])
    w = _core.Workload.generate(m._core, pb["workload"], pb["seed"])
    d = _core.Domains.build(m._core, pb["domains"])
    examples = ROOT / "python" / "numasim" / "data" / "examples" / "policies"
    if not examples.is_dir():
        examples = ROOT / "examples" / "policies"
    with tempfile.TemporaryDirectory() as tmp:
        probes = Path(tmp) / "probes.py"
        probes.write_text(PROBES)
        rows = [("linux26 alone", None),
                ("node-push alone (nodebal.py's rule in Rust: its run)", "node-push"),
                ("machine-wide, empty callback", f"py:{probes}:Empty"),
                ("machine-wide, reads tasks.pid, tasks.load, cpus.nr_running",
                 f"py:{probes}:Columns"),
                ("machine-wide, nodebal.py", f"py:{examples / 'nodebal.py'}:NodeBalancer"),
                ("per-CPU gated idle, empty callback", f"py:{probes}:EmptyCpu"),
                ("per-CPU gated idle+overloaded, empty callback",
                 f"py:{probes}:EmptyCpuOverloaded"),
                ("per-CPU, random_steal.py",
                 f"py:{examples / 'random_steal.py'}:RandomSteal")]  # fmt: skip
        base = None
        for title, text in rows:
            spec = parse(text, "policy_costs") if text and text.startswith("py:") else None
            best = float("inf")
            for _ in range(args.repeat):
                adapter = spec.adapter() if spec else None
                t = time.thread_time()
                _core.simulate_summary(m._core, d, w, spec.base if spec else text or "linux26",
                                       "", adapter)  # fmt: skip
                best = min(best, time.thread_time() - t)
            base = best if base is None else base
            n = calls(m, d, w, spec) if spec else 0
            per = f"{(best - base) / n * 1e6:7.1f} µs a call ({n} calls)" if n else ""
            print(f"{title:<62} {best * 1e3:7.1f} ms {best / base:6.1f}×  {per}")


if __name__ == "__main__":
    main()
