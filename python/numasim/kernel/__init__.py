"""Real-kernel runs: boot a Debian Linux kernel under QEMU with a numasim machine's NUMA table,
run a small workload, record what the scheduler did (docs/kernel-runs.md).

``load_run(path)`` reads one boot's record (``numasim-kernel-run/1``) and ``load_runs(dir)``
every boot of a ``numasim kernel-run --out DIR``; both validate and raise InputError in one line.
"""

from numasim.kernel.schema import KernelRun, load_run, load_runs

__all__ = ["KernelRun", "load_run", "load_runs"]
