"""What a Python policy reads at a callback: columns (NumPy arrays the core fills) and a few
questions answered by the core. A view is valid only while its callback runs; reading it later
raises ``RuntimeError``."""

from __future__ import annotations

from typing import Any

import numpy as np

_CPU_COLUMNS = ("node", "nr_running", "current", "idle", "load", "load_1", "load_2", "speed")
_CPU_TYPES = (np.int64, np.int64, np.int64, np.bool_, np.int64, np.int64, np.int64, np.float64)
_TASK_COLUMNS = ("pid", "cpu", "node", "tgid", "running", "cpu_ns", "load", "origin_cpu",
                 "origin_node")  # fmt: skip
_TASK_TYPES = (np.int64,) * 4 + (np.bool_, np.int64, np.float64, np.int64, np.int64)


class Columns:
    """Named NumPy arrays of equal length (read-only)."""

    def __init__(self, names: tuple[str, ...], arrays: list[np.ndarray]) -> None:
        self._names = names
        for name, a in zip(names, arrays, strict=True):
            setattr(self, name, a)

    def __len__(self) -> int:
        return len(getattr(self, self._names[0]))

    def __repr__(self) -> str:
        return f"Columns({', '.join(self._names)}; {len(self)} rows)"


class View:
    """The run's state at one instant.

    ``cpus``: one row per CPU — ``node``, ``nr_running``, ``current`` (running pid, −1 idle),
    ``idle``, ``load`` (128 × nr_running), ``load_1``, ``load_2`` (decayed per tick), ``speed``.
    ``tasks``: one row per runnable or running task, CPU by CPU, the running one first then
    its queue front to back — ``pid``, ``cpu``, ``node``, ``tgid``, ``running``, ``cpu_ns``,
    ``load`` (PELT load when the base keeps PELT, else 128), ``origin_cpu``, ``origin_node``
    (−1 when none).
    """

    def __init__(self, raw: Any, distances: np.ndarray) -> None:
        self._raw = raw
        self._distances = distances
        self._cpus: Columns | None = None
        self._tasks: Columns | None = None

    @property
    def now_ns(self) -> int:
        """Simulated time, ns."""
        return self._raw.now

    @property
    def now_ms(self) -> float:
        return self._raw.now / 1e6

    @property
    def cpus(self) -> Columns:
        self._cpus = self._columns(self._cpus, "cpu_columns", _CPU_COLUMNS, _CPU_TYPES)
        return self._cpus

    @property
    def tasks(self) -> Columns:
        self._tasks = self._columns(self._tasks, "task_columns", _TASK_COLUMNS, _TASK_TYPES)
        return self._tasks

    def _columns(self, kept: Columns | None, fetch: str, names: Any, types: Any) -> Columns:
        """``kept``, or the columns the core fills (``fetch``: the raw view's method) as NumPy
        arrays over its buffers; either way the view must still be alive (raises once dead)."""
        if kept is not None:
            self._raw.now  # noqa: B018 (raises once dead)
            return kept
        raw = getattr(self._raw, fetch)()  # raises once dead
        return Columns(names, [np.frombuffer(b, dtype=t) for b, t in zip(raw, types, strict=True)])

    def queued(self, cpu: int) -> list[int]:
        """The queued (not running) pids of ``cpu``, front (next to run) first."""
        return self._raw.queued(cpu)

    def find_busiest(self, cpu: int, level: int) -> int | None:
        """The busiest CPU ``cpu`` sees at ``level``: in the other group with the most runnable
        tasks per CPU, its CPU with the most (two or more; lowest id on ties), else None."""
        return self._raw.find_busiest(cpu, level)

    def idlest_cpu(self, node: int) -> int | None:
        """The CPU of ``node`` with the fewest runnable tasks (lowest id on ties)."""
        return self._raw.idlest_cpu(node)

    def distance(self, a: int, b: int) -> int:
        """The SLIT distance from node ``a`` to node ``b`` (10 = local)."""
        self._raw.now  # noqa: B018 (raises once dead)
        return int(self._distances[a, b])

    def pages_by_node(self, tgid: int) -> np.ndarray:
        """Thread group ``tgid``'s pages on each node (shares of the group, or MB)."""
        return np.array(self._raw.pages_by_node(tgid))

    def tgid(self, pid: int) -> int:
        """The thread group of ``pid``."""
        return self._raw.tgid(pid)
