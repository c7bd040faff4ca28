//! Hand-built simulation states for testing policies (feature `testutils`): put processes on
//! CPUs with chosen origins, ask a policy for a decision, apply it, read the runqueues.

use super::{Event, RunResult, State};
use crate::config::EngineConfig;
use crate::domains::Domains;
use crate::error::Result;
use crate::interface::{Attempt, PState, Pid, Policy, View};
use crate::machine::{CpuId, Machine};
use crate::workload::Workload;

/// A frozen state at one instant.
pub struct Scene<'a>(State<'a>);

impl<'a> Scene<'a> {
    /// Every process of `workload` pending, every CPU idle, at time 0.
    pub fn new(
        machine: &'a Machine,
        domains: &'a Domains,
        workload: &'a Workload,
        config: &'a EngineConfig,
    ) -> Self {
        Self(State::new(machine, domains, workload, config))
    }

    /// Sets the clock (cache hotness and load averages read it).
    pub fn at(&mut self, now_ns: u64) -> &mut Self {
        self.0.set_now(now_ns);
        self
    }

    /// Keeps PELT signals from here on (as a run does for a policy that asks for them):
    /// processes put afterwards attach to their CPU as new tasks at the current instant.
    pub fn with_pelt(&mut self) -> &mut Self {
        self.0.pelt = true;
        self
    }

    /// Puts `pid` on `cpu` — running if the CPU runs nothing yet, else at the tail of its
    /// queue — as a process that first ran on `origin` (its pages on `origin`'s node) and last
    /// ran at `last_ran_ns`.
    pub fn put(&mut self, pid: Pid, cpu: CpuId, origin: CpuId, last_ran_ns: u64) -> &mut Self {
        let s = &mut self.0;
        let node = s.w.machine.cpu_node(origin);
        s.first_touch(pid, node);
        super::next_burst(s, pid);
        {
            let p = &mut s.w.procs[pid];
            p.origin_cpu = Some(origin);
            p.first_run_ns = Some(0);
            p.last_ran_ns = Some(last_ran_ns);
        }
        let idle = s.w.cpus[cpu].current.is_none();
        s.enqueue(pid, cpu);
        if idle {
            // It runs: off the queue, onto the CPU (without dispatch's first-run work).
            let c = &mut s.w.cpus[cpu];
            c.queue.pop_back();
            c.current = Some(pid);
            c.acct_ns = s.w.now;
            s.w.procs[pid].state = PState::Running;
            s.signals_update(pid);
        }
        self
    }

    /// What a policy sees.
    pub fn view(&self) -> View<'_> {
        self.0.view()
    }

    /// Checks and applies `attempt` as made by `cpu` (periodic, at `level`); returns the CPUs
    /// that received processes and how many decisions the engine refused.
    pub fn apply(&mut self, cpu: CpuId, level: usize, attempt: Attempt) -> (Vec<CpuId>, u64) {
        let before = self.0.stats.rejected;
        let got = self.0.apply(Some(cpu), level, 0, &attempt);
        (got, self.0.stats.rejected - before)
    }

    /// The running process then the queue, in order.
    pub fn runqueue(&self, cpu: CpuId) -> Vec<Pid> {
        let c = &self.0.w.cpus[cpu];
        c.current
            .into_iter()
            .chain(c.queue.iter().copied())
            .collect()
    }

    /// Runs the simulation on from this state with `policy` until every process has completed
    /// (processes never put arrive at their arrival time, or now if that has passed).
    pub fn finish(self, policy: &mut dyn Policy) -> Result<RunResult> {
        let mut s = self.0;
        s.vacated.clear();
        for cpu in 0..s.w.cpus.len() {
            if s.w.cpus[cpu].current.is_some() {
                s.schedule_milestone(cpu);
            } else {
                s.dispatch(policy, cpu); // CPUs that received processes in `apply`
            }
        }
        for pid in 0..s.w.procs.len() {
            if s.w.procs[pid].state == PState::Pending {
                let t = s.w.workload.processes[pid].arrival_ns.max(s.w.now);
                s.push(t, Event::Arrive(pid));
            }
        }
        super::drive(s, policy, None).map(|o| o.finished().expect("no watch stops the run"))
    }
}
