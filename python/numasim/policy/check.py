"""``numasim check-policy FILE``: is a Python policy deterministic? Each class of the file runs
one scenario twice, each time in a fresh interpreter with another string-hash seed
(``PYTHONHASHSEED``), and the two results must be the same bit for bit. What this catches:
iterating a ``set`` or ``dict`` of strings built in another order, ``time.time()``, Python's
module-level ``random``, state kept in module globals or class attributes between runs.

``python -m numasim.policy.check SPEC MACHINE WORKLOAD SEED`` is one such run: it prints the
sha256 of the run's whole result (every process, slice and migration).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from numasim._core import InputError
from numasim.policy.base import Policy
from numasim.policy.spec import MAX_SOURCE

#: The two hash seeds.
HASH_SEEDS = ("1", "2")


def classes_in(path: Path) -> list[str]:
    """The names of the ``Policy`` subclasses defined in the file at ``path``."""
    try:
        source = path.read_bytes()[:MAX_SOURCE].decode()
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: cannot read the policy file: {e}") from None
    try:
        code = compile(source, str(path), "exec")
    except SyntaxError as e:
        raise InputError(f"{path}: line {e.lineno}: {e.msg}") from None
    namespace: dict = {"__name__": f"numasim_policy_{path.stem}"}
    try:
        exec(code, namespace)
    except Exception as e:
        raise InputError(f"{path}: raised {type(e).__name__} when loaded: {e}") from None
    return [
        k
        for k, v in namespace.items()
        if isinstance(v, type)
        and issubclass(v, Policy)
        and v is not Policy
        and v.__module__ == namespace["__name__"]
    ]


@dataclass
class Verdict:
    spec: str
    digests: tuple[str, ...]

    @property
    def same(self) -> bool:
        return len(set(self.digests)) == 1


def check(spec: str, machine: str, workload: str, seed: int) -> Verdict:
    """Runs ``spec`` once per hash seed, each in a fresh interpreter; their digests."""
    digests = []
    for hash_seed in HASH_SEEDS:
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        args = [sys.executable, "-m", "numasim.policy.check", spec, machine, workload, str(seed)]
        done = subprocess.run(args, env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
            raise InputError(f"{spec}: the run failed: {last}")
        digests.append(done.stdout.strip())
    return Verdict(spec, tuple(digests))


def _one(spec: str, machine: str, workload: str, seed: str) -> None:
    from numasim.machine import Machine
    from numasim.sim import simulate

    m = Machine.load(machine)
    r = simulate(m, workload, policy=spec, seed=int(seed), trace=True)
    print(hashlib.sha256(r.raw_json.encode()).hexdigest())


if __name__ == "__main__":
    _one(*sys.argv[1:5])
