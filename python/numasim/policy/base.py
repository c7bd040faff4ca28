"""The base class of a policy written in Python, what it is given once a run (``Context``) and
what it answers (``Move``, ``Pages``)."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from numasim.policy.view import Rows, View


class Move(NamedTuple):
    """Move process ``pid`` (queued or running) to ``cpu``."""

    pid: int
    cpu: int


class Pages(NamedTuple):
    """Move ``share`` (0..1 of the whole group's pages) of thread group ``tgid``'s pages from
    ``from_node`` to ``to_node``."""

    tgid: int
    from_node: int
    to_node: int
    share: float


class Context:
    """What a policy is given once a run, in ``setup``: the machine's shape, the options it was
    named with (their defaults filled in), and a random generator seeded for the run.

    ``rng`` is a ``random.Random`` seeded from the run's workload: the same run draws the same
    numbers in every process and on every machine. Use it (never ``random``'s module functions,
    ``time.time()`` or the order of a ``set`` of strings) so that a seed gives one result.
    """

    def __init__(self, raw: Any, options: dict[str, Any]) -> None:
        from numasim.policy.view import CpuColumns

        self.options = options
        self.seed: int = raw.run_seed
        self.rng = random.Random(self.seed)
        #: The node of each CPU.
        self.cpu_node = CpuColumns(raw.cpu_columns()).node
        self.cpus = len(self.cpu_node)
        #: SLIT distances between nodes (10 = local).
        self.distances = np.array(raw.distances(), dtype=np.int64)
        self.nodes = len(self.distances)
        #: The CPUs of each node.
        self.node_cpus = [np.flatnonzero(self.cpu_node == n) for n in range(self.nodes)]
        self._raw = raw

    def levels(self, cpu: int) -> list[tuple[str, list[int], list[list[int]]]]:
        """``cpu``'s scheduling-domain hierarchy, lowest level first: ``(name, span, group
        spans)``. Asked in ``setup`` (or a callback), when the run's state can be read."""
        return self._raw.levels(cpu)


class Policy:
    """A balancing policy written in Python (see the package doc). Subclass it, set ``base``
    and override the methods you need; ``options`` lists the options the class takes with
    their defaults (a value given on the command line is converted to the default's type)."""

    #: The registered policy for every hook not overridden (``numasim list policies``).
    base: ClassVar[str] = "linux26"
    #: How often ``balance`` runs, in milliseconds of simulated time.
    period_ms: ClassVar[float] = 10.0
    #: When ``balance_cpu`` is asked: ``always``, ``idle`` (the CPU runs nothing),
    #: ``overloaded`` (some CPU has two or more runnable tasks) or ``idle+overloaded``.
    balance_cpu_when: ClassVar[str] = "idle+overloaded"
    #: Options and their defaults.
    options: ClassVar[dict[str, Any]] = {}

    def setup(self, ctx: Context) -> None:
        """Called once a run, before any other method."""

    def balance(self, view: View) -> Iterable[Move | Pages] | None:
        """Machine-wide balancing, every ``period_ms``."""
        return None

    def balance_cpu(
        self, view: View, cpu: int, level: int, kind: str
    ) -> Iterable[Move | Pages] | None:
        """Balancing of ``cpu`` at ``level`` of its hierarchy; ``kind`` is ``periodic`` (its
        timer: ``min_interval_ms`` of the level when idle, ``busy_factor`` times that when
        busy) or ``newidle`` (it is about to go idle)."""
        return None

    def place(self, view: View, pid: int, cpu: int, why: str) -> int | None:
        """Where ``pid`` goes: a CPU, or None for the base's choice. ``cpu`` is its parent's
        CPU (``why == "fork"``) or the CPU it slept on (``"wake"``)."""
        return None

    def rank(self, view: View, cpu: int, tasks: Rows) -> Sequence[int] | np.ndarray:
        """The order in which the base's balancer, pulling to ``cpu``, takes the tasks it
        could take from the busiest CPU: one integer per row of ``tasks`` (those candidates,
        in the base's own order: the back of the queue first), lower first, ties in the
        base's order. Asked when there is a choice (two or more candidates), in the base's
        busy, idle, newly-idle and active balancing alike; a base without that choice
        refuses the class (linux26 has it)."""
        return np.zeros(len(tasks), dtype=np.int64)

    def metrics(self) -> dict[str, float]:
        """What the policy counted, by name, reported in the run's ``policy_metrics``."""
        return {}


#: The methods whose overriding numasim detects.
HOOKS = ("balance", "balance_cpu", "place", "rank", "metrics")


def overridden(cls: type[Policy], name: str) -> bool:
    """Whether ``cls`` overrides ``Policy``'s method ``name``."""
    return getattr(cls, name) is not getattr(Policy, name)
