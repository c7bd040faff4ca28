"""Balancing policies written in Python: subclass :class:`Policy` in one file and name it as
``--policy py:path/to/file.py:ClassName[:key=value,...]`` wherever numasim takes a policy
(``run``, ``compare``, experiment files). docs/writing-a-policy.md is the tutorial.

The class names a registered ``base`` policy for every hook it does not override; numasim asks
only the methods the class overrides:

- ``balance(view)`` every ``period_ms`` of simulated time, machine-wide;
- ``balance_cpu(view, cpu, level, kind)`` for one CPU's balancing at one level of its
  hierarchy, asked only when ``balance_cpu_when`` holds (checked in the core);
- ``place(view, pid, cpu, why)`` where a new (``why == "fork"``) or waking (``"wake"``)
  process goes (``None``: the base decides);
- ``rank(view, cpu, tasks)`` the order in which the base's pulls take the busiest CPU's
  tasks (one integer per candidate, lower first), over a base that has that choice;
- ``setup(ctx)`` once a run, before the first callback, and ``metrics()`` at its end.

Every answer is checked; a wrong one stops the run with one line naming the hook, the
simulated time, the CPU and the offending item (``numasim.PolicyError``).
"""

from numasim.policy.base import Context, Move, Pages, Policy
from numasim.policy.spec import PolicySpec, is_python_spec, parse
from numasim.policy.view import Columns, Rows, View

__all__ = [
    "Columns",
    "Context",
    "Move",
    "Pages",
    "Policy",
    "PolicySpec",
    "Rows",
    "View",
    "is_python_spec",
    "parse",
]
