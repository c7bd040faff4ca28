"""Idle pull, nearest first: the policy built step by step in docs/writing-a-policy.md.

An idle CPU pulls one queued task from the busiest CPU it sees at the lowest level of its
hierarchy that has one (its node before the machine): the newly-idle balancing of Linux's
scheduling domains (kernel/sched.c, `idle_balance`) reduced to its rule, without loads or
imbalance thresholds. Placement and every other decision are linux26's.
"""

from numasim.policy import Move, Policy


class IdlePull(Policy):
    base = "linux26"
    balance_cpu_when = "idle+overloaded"  # asked only when there is something to pull
    options = {"take": "last"}  # which queued task: "last" (coldest) or "first"

    def setup(self, ctx):
        self.pulled = 0

    def balance_cpu(self, view, cpu, level, kind):
        busiest = view.find_busiest(cpu, level)
        if busiest is None:
            return None  # nothing here: the engine asks the next level
        queued = view.queued(busiest)
        pid = queued[-1] if self.options["take"] == "last" else queued[0]
        self.pulled += 1
        return [Move(pid, cpu)]

    def metrics(self):
        return {"pulled": self.pulled}
