"""The object the core calls (``numasim._core``'s external policy): it turns the core's raw
view into a ``View``, asks the policy, and turns the answer into plain tuples the core checks.
Nothing here decides: the checks and the gating are the core's."""

from __future__ import annotations

from typing import Any

import numpy as np

from numasim.policy.base import Context, Policy, overridden
from numasim.policy.view import Rows, View


def _answer(result: Any) -> list[Any]:
    """The answer as a list (None is no decision); its items are checked by the core."""
    if result is None:
        return []
    if isinstance(result, (str, bytes, dict)):
        return [result]  # refused by the core, naming it
    try:
        return list(result)
    except TypeError:
        return [result]


def candidates(tasks: Any, busiest: int, pids: list[int]) -> Rows:
    """The rows of ``tasks`` of ``pids`` (tasks of CPU ``busiest``), in the order given."""
    on = np.flatnonzero(tasks.cpu == busiest)
    row = dict(zip(tasks.pid[on].tolist(), on.tolist(), strict=True))
    return Rows(tasks, np.array([row[p] for p in pids], dtype=np.intp))


class Adapter:
    """One run's policy instance, as the core sees it."""

    def __init__(self, policy: Policy, options: dict[str, Any], label: str) -> None:
        self.policy = policy
        policy.options = options  # the instance's options: the class's defaults, as given
        self.options = options
        self.label = label
        self._ctx: Context | None = None

    def hooks(self) -> tuple[int | None, str | None, bool, bool, bool]:
        """``(period_ns, gate, place, metrics, rank)`` of what the class overrides."""
        cls = type(self.policy)
        period = round(cls.period_ms * 1e6) if overridden(cls, "balance") else None
        gate = cls.balance_cpu_when if overridden(cls, "balance_cpu") else None
        hooks = overridden(cls, "place"), overridden(cls, "metrics"), overridden(cls, "rank")
        return period, gate, *hooks

    def setup(self, raw: Any) -> None:
        self._ctx = Context(raw, self.options)
        self.policy.setup(self._ctx)

    def _view(self, raw: Any) -> View:
        ctx = self._ctx
        assert ctx is not None, "the core calls setup first"
        ctx._raw = raw  # ctx.levels reads the callback's state
        return View(raw, ctx.distances)

    def balance(self, raw: Any) -> list[Any]:
        return _answer(self.policy.balance(self._view(raw)))

    def balance_cpu(self, raw: Any, cpu: int, level: int, kind: str) -> list[Any]:
        return _answer(self.policy.balance_cpu(self._view(raw), cpu, level, kind))

    def place(self, raw: Any, pid: int, cpu: int, why: str) -> Any:
        return self.policy.place(self._view(raw), pid, cpu, why)

    def rank(self, raw: Any, cpu: int, busiest: int, pids: list[int]) -> Any:
        view = self._view(raw)
        ranks = self.policy.rank(view, cpu, candidates(view.tasks, busiest, pids))
        return ranks.tolist() if isinstance(ranks, np.ndarray) else ranks  # checked by the core

    def metrics(self) -> list[tuple[str, float]]:
        m = self.policy.metrics()
        if not isinstance(m, dict):
            raise TypeError(f"metrics() must return a dict, not {type(m).__name__}")
        return [(str(k), float(v)) for k, v in m.items()]
