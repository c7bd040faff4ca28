"""Origin-aware selection in Python, on linux26: processes are sent back toward their origin.

Mehta & Kanungo's origin-aware load balancing (IJETT 73(2), 2025; the registered policy
``origin-aware``) keeps each process on or near the node it was created on. Its
sender-initiated part (SI-LB) pushes a CPU's off-node queued processes home when the origin
CPU is less loaded. This class makes that rule a machine-wide pass every ``period_ms``: each
queued process away from its origin node, farthest origin first (ties: lower origin CPU, then
queue order), goes to its origin CPU if that has fewer tasks than its own CPU, else to the
first CPU of its origin node (in id order) that has fewer. Loads are task counts, updated as
the pass moves tasks. The rest — placement and linux26's pulls — is linux26's.

    numasim compare --machine mehta-m1 --workload n=300,kind=cpu,exec=200,arrival=random \
        --policies linux26,py:examples/policies/origin_home.py:OriginHome
"""

from numasim.policy import Move, Policy


class OriginHome(Policy):
    base = "linux26"
    period_ms = 10

    def setup(self, ctx):
        self.cpu_node = ctx.cpu_node.tolist()
        self.node_cpus = [list(map(int, c)) for c in ctx.node_cpus]
        self.distances = ctx.distances.tolist()

    def balance(self, view):
        tasks = view.tasks
        nr = view.cpus.nr_running.tolist()
        away = [
            (-self.distances[node][onode], ocpu, i)
            for i, (node, onode, ocpu, running) in enumerate(
                zip(tasks.node.tolist(), tasks.origin_node.tolist(),
                    tasks.origin_cpu.tolist(), tasks.running.tolist())
            )
            if not running and onode >= 0 and onode != node
        ]
        moves = []
        for _, ocpu, i in sorted(away):
            pid, cpu = int(tasks.pid[i]), int(tasks.cpu[i])
            home = [ocpu] + [c for c in self.node_cpus[self.cpu_node[ocpu]] if c != ocpu]
            to = next((c for c in home if nr[cpu] > nr[c]), None)
            if to is not None:
                nr[cpu] -= 1
                nr[to] += 1
                moves.append(Move(pid, to))
        return moves
