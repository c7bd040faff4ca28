"""numasim: simulate process scheduling and load balancing on NUMA multiprocessors.

Python orchestrates, Rust computes: machines and scheduling domains are built by the compiled
core (``numasim._core``); this package finds inputs, presents results and runs the CLI.
"""

from numasim._core import InputError, PolicyError
from numasim.machine import Machine, builders, presets
from numasim.sim import Result, Workload, policies, simulate

__all__ = [
    "InputError",
    "Machine",
    "PolicyError",
    "Result",
    "Workload",
    "builders",
    "policies",
    "presets",
    "simulate",
]
__version__ = "0.1.0"
