"""What a Python policy reads at a callback: columns (NumPy arrays the core fills) and a few
questions answered by the core. A view is valid only while its callback runs; reading it later
raises ``RuntimeError``."""

from __future__ import annotations

from typing import Any

import numpy as np

#: Each column set as the core lays it out in its one buffer (``column_bytes`` in the
#: bindings): the 8-byte columns in turn, then the one-byte ones, each a row per CPU or task.
_CPU_LAYOUT = (("node", np.int64), ("nr_running", np.int64), ("current", np.int64),
               ("load", np.int64), ("load_1", np.int64), ("load_2", np.int64),
               ("speed", np.float64), ("idle", np.bool_))  # fmt: skip
_TASK_LAYOUT = (("pid", np.int64), ("cpu", np.int64), ("node", np.int64), ("tgid", np.int64),
                ("cpu_ns", np.int64), ("origin_cpu", np.int64), ("origin_node", np.int64),
                ("load", np.float64), ("running", np.bool_))  # fmt: skip


class Columns:
    """Named NumPy arrays of equal length (read-only), views of one buffer the core filled;
    a column's array is made the first time it is read (``CpuColumns``, ``TaskColumns``)."""

    _names: tuple[str, ...] = ()
    _row_bytes = 1

    def __init__(self, buf: bytes) -> None:
        self._buf = buf
        self._rows = len(buf) // self._row_bytes

    def __len__(self) -> int:
        return self._rows

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(self._names)}; {self._rows} rows)"


class _Column:
    """A column of type ``t`` that starts ``before`` bytes a row into the buffer: made on its
    first read, then kept in the instance (which a later read finds first)."""

    def __init__(self, name: str, t: type, before: int) -> None:
        self.name, self.t, self.before = name, t, before

    def __get__(self, obj: Columns | None, owner: type) -> Any:
        if obj is None:
            return self
        rows = obj._rows
        a = np.frombuffer(obj._buf, dtype=self.t, count=rows, offset=self.before * rows)
        obj.__dict__[self.name] = a
        return a


def _columns_class(name: str, layout: tuple[tuple[str, type], ...]) -> type[Columns]:
    attrs: dict[str, Any] = {"_names": tuple(n for n, _ in layout), "__doc__": Columns.__doc__}
    at = 0
    for column, t in layout:
        attrs[column] = _Column(column, t, at)
        at += np.dtype(t).itemsize
    attrs["_row_bytes"] = at
    return type(name, (Columns,), attrs)


CpuColumns = _columns_class("CpuColumns", _CPU_LAYOUT)
TaskColumns = _columns_class("TaskColumns", _TASK_LAYOUT)


class Rows:
    """Some rows of a column set, in a given order: each column is the set's column at those
    rows (a NumPy array, made on first read)."""

    def __init__(self, columns: Columns, rows: np.ndarray) -> None:
        self._columns = columns
        self.rows = rows

    def __getattr__(self, name: str) -> np.ndarray:
        if name not in self._columns._names:
            raise AttributeError(f"no column '{name}' (columns: {', '.join(self._columns._names)})")
        a = getattr(self._columns, name)[self.rows]
        self.__dict__[name] = a
        return a

    def __len__(self) -> int:
        return len(self.rows)

    def __repr__(self) -> str:
        return f"Rows({', '.join(self._columns._names)}; {len(self.rows)} rows)"


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
        self._cpus = self._columns(self._cpus, "cpu_columns", CpuColumns)
        return self._cpus

    @property
    def tasks(self) -> Columns:
        self._tasks = self._columns(self._tasks, "task_columns", TaskColumns)
        return self._tasks

    def _columns(self, kept: Columns | None, fetch: str, kind: type[Columns]) -> Columns:
        """``kept``, or the column set the core fills (``fetch``: the raw view's method, one
        buffer); either way the view must still be alive (raises once dead)."""
        if kept is not None:
            self._raw.now  # noqa: B018 (raises once dead)
            return kept
        return kind(getattr(self._raw, fetch)())  # raises once dead

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
