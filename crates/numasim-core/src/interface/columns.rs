//! The view as columns: per-CPU and per-task arrays a policy written outside Rust (or a
//! user-space balancer in the style of sched_ext's scx_rusty) reads in one pass, and the
//! questions it asks back, in the spirit of sched_ext's kfuncs.
//!
//! ```text
//!   CpuColumns  (one entry per CPU, CPU order)
//!     node │ nr_running │ current (pid, −1 idle) │ idle │ load │ load_1 │ load_2 │ speed
//!   TaskColumns (one entry per runnable or running task: CPU order, the running one first,
//!                then its queue front to back)
//!     pid │ cpu │ node │ tgid │ running │ cpu_ns │ load │ origin_cpu (−1) │ origin_node (−1)
//!   helpers: find_busiest(cpu, level) │ idlest_cpu(node) │ distance(a, b) │ pages_by_node(tgid)
//! ```
//!
//! 1. A caller keeps one [`CpuColumns`] and one [`TaskColumns`] and refills them at each
//!    callback ([`View::fill_cpu_columns`], [`View::fill_task_columns`]): no allocation once
//!    they have grown to the machine's and the workload's size.
//! 2. Loads are the engine's: `load` is the instantaneous `NICE_0_LOAD` × nr_running,
//!    `load_1`, `load_2` the per-tick decayed `cpu_load[0]`, `cpu_load[1]` (2.6's indices 1
//!    and 2). A task's `load` is its PELT `load_avg` when the policy keeps PELT
//!    ([`Policy::tracks_pelt`](super::Policy::tracks_pelt)), else its weight, `NICE_0_LOAD`
//!    (every process is nice 0).
//! 3. The helpers answer from the same state: deterministic, lowest id on ties.
//!
//! Known limits: only runnable and running tasks are listed (sleeping, held and finished ones
//! cannot be moved); loads are integers of the 2.6 scale (`NICE_0_LOAD` = 128).

use crate::load::NICE_0_LOAD;
use crate::machine::CpuId;
use crate::state::PState;

use super::View;

/// Per-CPU columns, in CPU order (see the module doc).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CpuColumns {
    pub node: Vec<i64>,
    pub nr_running: Vec<i64>,
    /// The running pid, −1 when nothing runs.
    pub current: Vec<i64>,
    pub idle: Vec<bool>,
    pub load: Vec<i64>,
    pub load_1: Vec<i64>,
    pub load_2: Vec<i64>,
    pub speed: Vec<f64>,
}

/// Per-task columns of the runnable and running tasks (see the module doc for the order).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TaskColumns {
    pub pid: Vec<i64>,
    pub cpu: Vec<i64>,
    pub node: Vec<i64>,
    pub tgid: Vec<i64>,
    pub running: Vec<bool>,
    /// CPU time so far, in ns.
    pub cpu_ns: Vec<i64>,
    pub load: Vec<f64>,
    /// The CPU it was created on, −1 when it has none yet.
    pub origin_cpu: Vec<i64>,
    /// That CPU's node, −1 when it has none.
    pub origin_node: Vec<i64>,
}

impl TaskColumns {
    fn clear(&mut self) {
        self.pid.clear();
        self.cpu.clear();
        self.node.clear();
        self.tgid.clear();
        self.running.clear();
        self.cpu_ns.clear();
        self.load.clear();
        self.origin_cpu.clear();
        self.origin_node.clear();
    }
}

fn signed(x: usize) -> i64 {
    i64::try_from(x).expect("fits in i64")
}

impl View<'_> {
    /// Refills `out` with the CPUs' columns now.
    pub fn fill_cpu_columns(&self, out: &mut CpuColumns) {
        let n = self.machine.cpus();
        out.node.clear();
        out.nr_running.clear();
        out.current.clear();
        out.idle.clear();
        out.load.clear();
        out.load_1.clear();
        out.load_2.clear();
        out.speed.clear();
        for cpu in 0..n {
            out.node.push(signed(self.machine.cpu_node(cpu)));
            out.nr_running.push(signed(self.nr_running(cpu)));
            out.current.push(self.current(cpu).map_or(-1, signed));
            out.idle.push(self.idle(cpu));
            out.load.push(self.raw_load(cpu) as i64);
            out.load_1.push(self.cpu_load(cpu, 1) as i64);
            out.load_2.push(self.cpu_load(cpu, 2) as i64);
            out.speed.push(self.machine.speed(cpu));
        }
    }

    /// Refills `out` with the runnable and running tasks now.
    pub fn fill_task_columns(&self, out: &mut TaskColumns) {
        out.clear();
        for cpu in 0..self.machine.cpus() {
            let node = signed(self.machine.cpu_node(cpu));
            let tasks = self.current(cpu).into_iter().chain(self.queued(cpu));
            for pid in tasks {
                let p = &self.procs[pid];
                out.pid.push(signed(pid));
                out.cpu.push(signed(cpu));
                out.node.push(node);
                out.tgid.push(i64::from(self.workload.processes[pid].tgid));
                out.running.push(p.state == PState::Running);
                out.cpu_ns
                    .push(p.run_ns_by_node.iter().map(|(_, ns)| *ns as i64).sum());
                out.load.push(if self.pelt {
                    self.task_pelt(pid).load_avg
                } else {
                    NICE_0_LOAD as f64
                });
                out.origin_cpu.push(p.origin_cpu.map_or(-1, signed));
                out.origin_node.push(
                    p.origin_cpu
                        .map_or(-1, |c| signed(self.machine.cpu_node(c))),
                );
            }
        }
    }

    /// The busiest CPU `cpu` sees at `level` of its hierarchy: in the non-local group with the
    /// most runnable tasks per CPU, the CPU with the most (lowest id on ties), if it has two or
    /// more; `None` when no group at that level has one (or the level does not exist).
    pub fn find_busiest(&self, cpu: CpuId, level: usize) -> Option<CpuId> {
        let level = self.domains.cpus.get(cpu)?.get(level)?;
        let mut best: Option<(u64, usize, &crate::domains::Group)> = None;
        for g in level.groups.iter().filter(|g| !g.local) {
            let nr = self.group_nr_running(g);
            // Compare nr / weight as cross products: exact, no floats.
            let better = best.is_none_or(|(bn, bw, _)| nr * bw as u64 > bn * g.weight as u64);
            if better {
                best = Some((nr, g.weight, g));
            }
        }
        let (_, _, group) = best?;
        group
            .span
            .iter()
            .filter(|&c| self.nr_running(c) >= 2)
            .max_by_key(|&c| (self.nr_running(c), std::cmp::Reverse(c)))
    }

    /// The CPU of `node` with the fewest runnable tasks (lowest id on ties); `None` when the
    /// node does not exist.
    pub fn idlest_cpu(&self, node: usize) -> Option<CpuId> {
        if node >= self.machine.nodes() {
            return None;
        }
        self.machine
            .node_cpus(node)
            .iter()
            .copied()
            .min_by_key(|&c| (self.nr_running(c), c))
    }

    /// The share of group `tgid`'s pages on each node (MB for an application with a footprint;
    /// zero where it has none): one entry per node.
    pub fn pages_by_node(&self, tgid: usize) -> Vec<f64> {
        let mut out = vec![0.0; self.machine.nodes()];
        if let Some(g) = self.groups.get(tgid) {
            for &(node, amount) in g.memory.pages() {
                out[node] += amount;
            }
        }
        out
    }
}
