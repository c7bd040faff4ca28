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

from numasim.policy import Move, Policy


class NodeBalancer(Policy):
    base = "linux26"
    period_ms = 10
    options = {"threshold": 0.17}

    def setup(self, ctx):
        self.node_cpus = [list(map(int, cpus)) for cpus in ctx.node_cpus]
        self.cpus = ctx.cpus

    def balance(self, view):
        t = self.options["threshold"]
        tasks = view.tasks
        node, load, running = tasks.node.tolist(), tasks.load.tolist(), tasks.running.tolist()
        pids, nr = tasks.pid.tolist(), view.cpus.nr_running.tolist()
        nodes = len(self.node_cpus)
        # 1. Each node's load (in task order) and its share of the machine's.
        loads = [0.0] * nodes
        for n, x in zip(node, load):
            loads[n] += x
        per_cpu = sum(loads) / self.cpus
        target = [per_cpu * len(c) for c in self.node_cpus]
        # 2. Push nodes most above target first, pull nodes most below first.
        push = [n for n in range(nodes) if loads[n] > target[n] * (1 + t)]
        push.sort(key=lambda n: (-(loads[n] - target[n]), n))
        pull = [n for n in range(nodes) if loads[n] < target[n] * (1 - t)]
        pull.sort(key=lambda n: (loads[n] - target[n], n))
        # 3. One task per (push, pull) pair: the queued one closest to half the imbalance.
        moved, added, moves = set(), [0] * self.cpus, []
        for p in push:
            for q in pull:
                surplus, deficit = loads[p] - target[p], target[q] - loads[q]
                if surplus <= 0 or deficit <= 0:
                    continue
                least = min(surplus, deficit)
                amount = least / 2
                candidates = [i for i in range(len(pids))
                              if node[i] == p and not running[i] and i not in moved]
                if not candidates:
                    break
                i = min(candidates, key=lambda i: (abs(load[i] - amount), i))
                if load[i] >= 2 * least:
                    continue  # the move would not shrink both imbalances
                to = min(self.node_cpus[q], key=lambda c: (nr[c] + added[c], c))
                moved.add(i)
                added[to] += 1
                loads[p] -= load[i]
                loads[q] += load[i]
                moves.append(Move(pids[i], to))
        return moves
