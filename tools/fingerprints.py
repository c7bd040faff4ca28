"""Results fingerprints: every number numasim's shipped experiments and benchmarks produce,
reduced to stable digests.

    python tools/fingerprints.py            # compare with tests/data/fingerprints.json
    python tools/fingerprints.py --update   # rewrite it (say why in docs/CHANGES.md)

1. Every shipped experiment runs at 2 replications (jobs = 2, a fresh store). Each run's row
   (machine, workload, n, policy, replication and every metric) is kept with floats rounded to
   10 significant digits: the engine's times are integer nanoseconds and its sums run in a
   fixed order, so rounding only guards against a different summation order producing the
   last bit differently.
2. The rows of one cell (experiment, machine, workload, n) are hashed together (SHA-256 of
   canonical JSON, 16 hex digits): a moved number names its cell.
3. Every `numasim bench` scenario runs once: its event count, mean turnaround and makespan.

A refactor or an optimisation must leave the file untouched; a change that moves results
updates it in the same commit and says in docs/CHANGES.md which numbers moved and why.
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

FILE = Path(__file__).resolve().parent.parent / "tests" / "data" / "fingerprints.json"
REPLICATIONS = 2
DIGITS = 10


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return float(f"{value:.{DIGITS}g}")
    # Rows of app workloads hold a list of per-application values (rows of other workloads
    # hold none, so their digests are as before).
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    return value


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def experiments() -> dict[str, dict[str, str]]:
    """Per shipped experiment, per cell ``machine/workload/n``: the digest of its runs."""
    from numasim import experiment as ex

    out: dict[str, dict[str, str]] = {}
    for exp in ex.list_experiments():
        exp.replications = REPLICATIONS
        with tempfile.TemporaryDirectory() as tmp:
            rows = ex.execute(exp, Path(tmp), jobs=2).rows
        cells: dict[str, list[dict[str, Any]]] = {}
        for row in rows:
            cell = f"{row['machine']}/{row['workload']}/{row['n']}"
            cells.setdefault(cell, []).append({k: _rounded(v) for k, v in row.items()})
        out[exp.name] = {cell: _digest(runs) for cell, runs in cells.items()}
    return out


def benchmarks() -> dict[str, dict[str, Any]]:
    """Per `numasim bench` scenario: events, mean turnaround and makespan of one run."""
    from numasim import _core
    from numasim.bench import _machine, scenarios, workload_spec

    out = {}
    for sc in scenarios():
        m = _machine(sc["machine"])
        r = json.loads(
            _core.bench_run(m._core, workload_spec(sc), sc["seed"], sc["policy"], sc["domains"])
        )
        out[sc["name"]] = {k: _rounded(r[k]) for k in ("events", "mean_tat_ms", "makespan_ms")}
    return out


def compute() -> dict[str, Any]:
    return {"replications": REPLICATIONS, "experiments": experiments(), "bench": benchmarks()}


def differences(expected: dict[str, Any], actual: dict[str, Any]) -> list[str]:
    """One line per cell or scenario whose numbers moved (or that appeared or vanished)."""
    lines = []
    for part in ("experiments", "bench"):
        old, new = expected.get(part, {}), actual.get(part, {})
        for name in sorted(set(old) | set(new)):
            a, b = old.get(name), new.get(name)
            if a == b:
                continue
            if a is None or b is None:
                lines.append(f"{part} {name}: {'added' if a is None else 'removed'}")
            elif part == "bench":
                lines.append(f"bench {name}: {a} -> {b}")
            else:
                for cell in sorted(set(a) | set(b)):
                    if a.get(cell) != b.get(cell):
                        lines.append(f"experiment {name} {cell}: {a.get(cell)} -> {b.get(cell)}")
    return lines


def main(argv: list[str]) -> int:
    actual = compute()
    if "--update" in argv:
        FILE.parent.mkdir(parents=True, exist_ok=True)
        FILE.write_text(json.dumps(actual, indent=1, sort_keys=True) + "\n")
        print(f"wrote {FILE}")
        return 0
    moved = differences(json.loads(FILE.read_text()), actual)
    print("\n".join(moved) or "no number moved")
    return 1 if moved else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
