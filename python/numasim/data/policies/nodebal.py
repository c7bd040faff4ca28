"""A node-level push balancer on a timer, in the shape of sched_ext's scx_rusty.

scx_rusty (sched-ext/scx, scheds/rust/scx_rusty/src/load_balance.rs) balances load between
domains from user space on a timer: domains whose load is more than ``load_imbal_high_ratio``
(17 %) above the average push, those as far below pull, and each transfer moves up to half the
imbalance, choosing the task whose load is closest to the amount to move. Here the domains are
NUMA nodes and every other decision is linux26's. The registered policy ``node-push`` is the
same rule in Rust; a test holds the two to the same results.

    numasim run --machine mehta-m1 --workload n=300,kind=cpu,exec=200,arrival=random \
        --policy py:examples/policies/nodebal.py:NodeBalancer:threshold=0.17
"""

import numpy as np
from numasim.policy import Move, Policy


class NodeBalancer(Policy):
    base = "linux26"
    period_ms = 10
    options = {"threshold": 0.17}

    def setup(self, ctx):
        self.node_cpus = ctx.node_cpus  # each node's CPUs, in id order
        self.node_size = np.array([len(c) for c in ctx.node_cpus], dtype=float)
        self.cpus = ctx.cpus

    def balance(self, view):
        t = self.options["threshold"]
        tasks = view.tasks
        # 1. Each node's load (summed in task order) and its share of the machine's.
        loads = np.bincount(tasks.node, weights=tasks.load, minlength=len(self.node_cpus))
        target = sum(loads.tolist()) / self.cpus * self.node_size
        # 2. Push nodes most above target first, pull nodes most below first (ties: lower id).
        push = np.flatnonzero(loads > target * (1 + t))
        pull = np.flatnonzero(loads < target * (1 - t))
        if not (push.size and pull.size):
            return None
        push = push[np.argsort(target[push] - loads[push], kind="stable")]
        pull = pull[np.argsort(loads[pull] - target[pull], kind="stable")]
        # 3. One task per (push, pull) pair: the queued one closest to half the imbalance.
        nr, movable, moves = view.cpus.nr_running.copy(), ~tasks.running, []
        for p in push:
            for q in pull:
                surplus, deficit = loads[p] - target[p], target[q] - loads[q]
                if surplus <= 0 or deficit <= 0:
                    continue
                least = min(surplus, deficit)
                candidates = np.flatnonzero(movable & (tasks.node == p))
                if not candidates.size:
                    break
                i = candidates[np.argmin(np.abs(tasks.load[candidates] - least / 2))]
                if tasks.load[i] >= 2 * least:
                    continue  # the move would not shrink both imbalances
                cpus = self.node_cpus[q]
                to = cpus[np.argmin(nr[cpus])]  # fewest tasks (counting moves made), lowest id
                movable[i] = False
                nr[to] += 1
                loads[p] -= tasks.load[i]
                loads[q] += tasks.load[i]
                moves.append(Move(int(tasks.pid[i]), int(to)))
        return moves
