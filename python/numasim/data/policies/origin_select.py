"""Origin-aware selection in Python, on linux26: a pull takes the tasks that belong here first.

Mehta & Kanungo's origin-aware load balancing (IJETT 73(2), 2025; the registered policy
``origin-aware``) keeps each process on or near the node it was created on. Its
receiver-initiated part (RI-LB) is linux26's balancer with one change, the order in which a
pull takes the busiest CPU's tasks: those created on the pulling CPU first, then those
created on its node (or never run), then the rest by increasing distance from their origin
node; ties keep the kernel's order (the back of the queue first). This class is that order
and nothing else, given through ``rank``; everything else is linux26's. It gives the results
of ``origin-aware:si-lb=off`` (RI-LB alone, without the sender-initiated pass) bit for bit.

    numasim compare --machine mehta-m1 --workload n=300,kind=cpu,exec=200,arrival=random \
        --policies linux26,py:examples/policies/origin_select.py:OriginSelect
"""

import numpy as np
from numasim.policy import Policy


class OriginSelect(Policy):
    base = "linux26"

    def setup(self, ctx):
        self.cpu_node = ctx.cpu_node
        self.distances = ctx.distances

    def rank(self, view, cpu, tasks):
        here = self.cpu_node[cpu]
        home = (tasks.origin_node == here) | (tasks.origin_cpu < 0)  # never ran: starts here
        far = 2 + self.distances[tasks.origin_node, here]
        return np.where(tasks.origin_cpu == cpu, 0, np.where(home, 1, far))
