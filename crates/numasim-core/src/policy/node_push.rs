//! `node-push`: a node-level push balancer on a timer, in the shape of sched_ext's scx_rusty
//! (its user-space `load_balance.rs`), over `linux26` for everything else: every
//! `period-ms` the machine's nodes are compared and tasks pushed from loaded nodes to light
//! ones. The same rule as `examples/policies/nodebal.py`, which a test holds it to.
//!
//! ```text
//!   root (machine) ── node 0 ── tasks (load)      push nodes: load > target × (1 + t)
//!                  ├─ node 1 ── tasks             pull nodes: load < target × (1 − t)
//!                  └─ ...                          target = machine load per CPU × node CPUs
//! ```
//!
//! 1. Each node's load is the sum of its runnable and running tasks' loads (the view's task
//!    columns: `NICE_0_LOAD` each, or PELT's `load_avg` where kept), summed in task order; its
//!    target is the machine's load per CPU times the node's CPUs.
//! 2. Push nodes (load above target × (1 + `threshold`)) are taken most above target first,
//!    pull nodes (below target × (1 − `threshold`)) most below first; ties: lower node id.
//! 3. For each push node, for each pull node: with surplus s and deficit d still left, the
//!    amount to move is min(s, d) / 2; the queued task of the push node (not running, not
//!    moved yet) whose load is closest to it is taken (first in task order on ties), if its
//!    load is below 2 · min(s, d), so that the move shrinks both imbalances. It goes to the
//!    CPU of the pull node with the fewest tasks counting this pass's moves (lowest id on
//!    ties); both loads follow the move. One task per pair per pass.
//!
//! Statistics: none of its own (its moves are `push` migrations).
//!
//! Future improvements: scx_rusty balances domains inside a node too, and prefers tasks by
//! their load history (duty cycle); neither is modelled.

use crate::error::InputError;
use crate::interface::{
    AffinityMove, Attempt, BalanceKind, MigrationKind, Move, Pid, Policy, PolicyContext, Quiet,
    TaskColumns, View,
};
use crate::machine::CpuId;
use crate::policy::linux26::Linux26;

/// The policy's options (`node-push:threshold=0.17,period-ms=10`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Options {
    /// How far above (below) its target a node's load must be to push (pull): scx_rusty's
    /// `load_imbal_high_ratio` 0.17 (`--load-imbal-high-ratio`'s default in 2024's release).
    pub threshold: f64,
    /// The balancing period, ms.
    pub period_ms: u64,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            threshold: 0.17,
            period_ms: 10,
        }
    }
}

impl Options {
    /// Parses `key=value` pairs; `origin` names the setting in errors.
    pub fn parse(origin: &str, pairs: &[(&str, &str)]) -> Result<Self, InputError> {
        let mut o = Self::default();
        for &(key, value) in pairs {
            let bad = |what: &str| super::option_error(origin, "node-push", key, value, what);
            match key {
                "threshold" => {
                    o.threshold = value
                        .parse::<f64>()
                        .ok()
                        .filter(|t| (0.0..1.0).contains(t))
                        .ok_or_else(|| bad("a number in [0, 1)"))?;
                }
                "period-ms" => {
                    o.period_ms = value
                        .parse::<u64>()
                        .ok()
                        .filter(|&p| p > 0)
                        .ok_or_else(|| bad("a whole number of ms > 0"))?;
                }
                _ => {
                    return Err(super::no_option(
                        origin,
                        "node-push",
                        key,
                        "threshold, period-ms",
                    ))
                }
            }
        }
        Ok(o)
    }
}

/// The node push balancer over linux26.
pub struct NodePush {
    base: Linux26,
    options: Options,
    tasks: TaskColumns,
}

impl NodePush {
    pub fn new(ctx: &PolicyContext<'_>, options: Options) -> Self {
        Self {
            base: Linux26::new(ctx),
            options,
            tasks: TaskColumns::default(),
        }
    }
}

/// One pass of the rule (module doc, steps 1-3) over `tasks`: the moves, in order.
pub fn node_push_pass(view: &View<'_>, tasks: &TaskColumns, threshold: f64) -> Vec<Move> {
    let m = view.machine;
    let nodes = m.nodes();
    let mut loads = vec![0.0_f64; nodes];
    for (i, &node) in tasks.node.iter().enumerate() {
        loads[node as usize] += tasks.load[i];
    }
    let total: f64 = loads.iter().sum();
    let per_cpu = total / m.cpus() as f64;
    let target: Vec<f64> = (0..nodes)
        .map(|n| per_cpu * m.node_cpus(n).len() as f64)
        .collect();
    let mut push: Vec<usize> = (0..nodes)
        .filter(|&n| loads[n] > target[n] * (1.0 + threshold))
        .collect();
    push.sort_by(|&a, &b| {
        (loads[b] - target[b])
            .total_cmp(&(loads[a] - target[a]))
            .then(a.cmp(&b))
    });
    let mut pull: Vec<usize> = (0..nodes)
        .filter(|&n| loads[n] < target[n] * (1.0 - threshold))
        .collect();
    pull.sort_by(|&a, &b| {
        (loads[a] - target[a])
            .total_cmp(&(loads[b] - target[b]))
            .then(a.cmp(&b))
    });
    let mut moved = vec![false; tasks.pid.len()];
    let mut added = vec![0_usize; m.cpus()];
    let mut moves = Vec::new();
    for &p in &push {
        for &q in &pull {
            let surplus = loads[p] - target[p];
            let deficit = target[q] - loads[q];
            if surplus <= 0.0 || deficit <= 0.0 {
                continue;
            }
            let least = surplus.min(deficit);
            let amount = least / 2.0;
            let best = (0..tasks.pid.len())
                .filter(|&i| tasks.node[i] as usize == p && !tasks.running[i] && !moved[i])
                .min_by(|&a, &b| {
                    (tasks.load[a] - amount)
                        .abs()
                        .total_cmp(&(tasks.load[b] - amount).abs())
                        .then(a.cmp(&b))
                });
            let Some(i) = best else {
                break;
            };
            if tasks.load[i] >= 2.0 * least {
                continue;
            }
            let pid = tasks.pid[i] as Pid;
            let Some(to) = m
                .node_cpus(q)
                .iter()
                .copied()
                .filter(|&c| view.may_run(pid, c))
                .min_by_key(|&c| (view.nr_running(c) + added[c], c))
            else {
                continue;
            };
            moved[i] = true;
            added[to] += 1;
            loads[p] -= tasks.load[i];
            loads[q] += tasks.load[i];
            moves.push(Move {
                pid,
                from: tasks.cpu[i] as CpuId,
                to,
                kind: MigrationKind::Push,
            });
        }
    }
    moves
}

impl Policy for NodePush {
    fn name(&self) -> &'static str {
        "node-push"
    }

    fn place_new(&mut self, view: &View<'_>, pid: Pid, spawn_cpu: CpuId) -> Option<CpuId> {
        self.base.place_new(view, pid, spawn_cpu)
    }

    fn place_wakeup(&mut self, view: &View<'_>, pid: Pid, prev_cpu: CpuId) -> Option<CpuId> {
        self.base.place_wakeup(view, pid, prev_cpu)
    }

    fn next_periodic_ns(&self, view: &View<'_>, cpu: CpuId) -> Option<u64> {
        self.base.next_periodic_ns(view, cpu)
    }

    fn due_levels(&self, view: &View<'_>, cpu: CpuId) -> u64 {
        self.base.due_levels(view, cpu)
    }

    fn quiet_periodic(&mut self, view: &View<'_>, cpu: CpuId, quiet: &mut Quiet) -> bool {
        self.base.quiet_periodic(view, cpu, quiet)
    }

    fn balance(
        &mut self,
        view: &View<'_>,
        cpu: CpuId,
        level: usize,
        kind: BalanceKind,
    ) -> Option<Attempt> {
        self.base.balance(view, cpu, level, kind)
    }

    fn active_balance(
        &mut self,
        view: &View<'_>,
        busiest: CpuId,
        target: CpuId,
    ) -> Option<Attempt> {
        self.base.active_balance(view, busiest, target)
    }

    fn affinity_cpu(&mut self, view: &View<'_>, pid: Pid) -> AffinityMove {
        self.base.affinity_cpu(view, pid)
    }

    fn global_period_ns(&self) -> Option<u64> {
        Some(self.options.period_ms * 1_000_000)
    }

    fn global_balance(&mut self, view: &View<'_>) -> Option<Attempt> {
        view.fill_task_columns(&mut self.tasks);
        let moves = node_push_pass(view, &self.tasks, self.options.threshold);
        (!moves.is_empty()).then(|| Attempt {
            moves,
            ..Attempt::default()
        })
    }
}
