"""Real-kernel runs: boot a Debian Linux kernel under QEMU with a numasim machine's NUMA table,
run a small workload, record what the scheduler did (docs/kernel-runs.md).

``load_run(path)`` reads one boot's record (``numasim-kernel-run/1``) and ``load_runs(dir)``
every boot of a ``numasim kernel-run --out DIR``; both validate and raise InputError in one line.
They are imported when first used, so that the command line does not import pydantic for
commands that never read a kernel run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from numasim.kernel.schema import KernelRun, load_run, load_runs

__all__ = ["KernelRun", "load_run", "load_runs"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from numasim.kernel import schema

        return getattr(schema, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
