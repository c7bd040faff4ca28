"""A random-stealing toy: an idle CPU steals one queued task from a CPU chosen at random.

Work stealing with random victims is the scheduler of Cilk (Blumofe & Leiserson, "Scheduling
multithreaded computations by work stealing", JACM 46(5), 1999): an idle worker picks a
victim uniformly at random and takes work from it. Here a CPU about to go idle (and an idle
CPU at its periodic balancing) picks a random CPU among those with a queued task, at any
distance, and takes the task at the back of its queue. Placement is linux26's. It is asked
only when it can steal: on an idle CPU while some CPU has a queued task (the gate
``idle+overloaded``, checked in the core; gated on ``idle`` alone it gives the same results,
asked many more times for nothing).

    numasim run --machine mehta-m1 --workload n=300,kind=cpu,exec=200,arrival=random \
        --policy py:examples/policies/random_steal.py:RandomSteal
"""

import numpy as np
from numasim.policy import Move, Policy


class RandomSteal(Policy):
    base = "linux26"
    balance_cpu_when = "idle+overloaded"

    def setup(self, ctx):
        self.rng = ctx.rng  # seeded for the run: the same seed steals the same tasks
        self.steals = 0

    def balance_cpu(self, view, cpu, level, kind):
        if level != 0:
            return None  # one steal per balancing, at the lowest level's timer
        victims = np.flatnonzero(view.cpus.nr_running >= 2)
        victims = victims[victims != cpu]
        if not victims.size:
            return None
        victim = int(self.rng.choice(victims))
        self.steals += 1
        return [Move(view.queued(victim)[-1], cpu)]

    def metrics(self):
        return {"steals": self.steals}
