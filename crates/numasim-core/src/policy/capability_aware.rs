//! `capability-aware`: Mehta & Kanungo's load balancing for asymmetric multicore machines with
//! speed cores (speed > 1) and normal cores. The baseline is `linux26`, which counts
//! every core alike.
//!
//! ```text
//!   load(c)  = nr_running(c) / speed(c)          (a speed core's load counts half at speed 2)
//!   regime   = few   if runnable tasks ≤ speed cores (machine-wide), else many
//!   timers   = linux26's per-level intervals, busy_factor and back-off (rule 6)
//! ```
//!
//! 1. Placement (fork, exec and wake-up): in the scope of option `place` — `machine` (every
//!    core, the default), `domain` (the least loaded group of the top domain level of the
//!    parent's or previous CPU, by speed-adjusted load) or `node` (that CPU's node) — the CPU
//!    with the least load after placement, `(nr_running + 1) / speed`; ties go to the CPU with fewer tasks (an idle core before a
//!    shared faster one), then to a speed core, then to the parent's (or previous) CPU, then to
//!    the lowest id. A thread whose group already has a class (2.) is placed on
//!    that class only.
//! 2. Threads of one process stay on cores of one speed: the first placed thread of a
//!    multithreaded group fixes the group's class (speed cores win ties, so speed cores are
//!    used where they are least loaded); no balancing step moves its threads across classes.
//! 3. When a speed core is idle, normal cores do no balancing: the free speed cores do it.
//! 4. Regime *few* (tasks ≤ speed cores): normal cores never pull; a normal core pushes all its
//!    tasks (the running one too) to free speed cores, one each, nearest level first; a free
//!    speed core pulls all tasks of the busiest normal core in the level's span. Speed cores
//!    balance among themselves as in 5.
//! 5. Otherwise, at each level (linux26's domains and intervals): the busiest group by
//!    `Σ nr_running / Σ speed`, if it exceeds this group's by `imbalance_pct`; in it the CPU b
//!    with the highest load; k = ⌊(n_b·s_c − n_c·s_b) / (s_b + s_c)⌋ tasks move to this CPU c,
//!    which equalises the loads in proportion to speed (a speed core takes twice the tasks);
//!    if k = 0, one task moves when that lowers the larger of the two loads, or — to an idle
//!    CPU, from a CPU with two or more — when it does not raise it. Candidates are the
//!    queued tasks (tail first, as the kernel) — and b's running task when c is a free speed
//!    core and b a normal one. A speed core pulling from a normal core takes CPU-bound tasks
//!    first; a normal core pulling from a speed core takes IO-bound ones first.
//! 6. Newly-idle balancing runs on the levels with `SD_BALANCE_NEWIDLE`, as in linux26; a
//!    periodic attempt that moved nothing doubles the level's interval (up to its maximum), one
//!    that moved resets it (linux26's back-off).
//!    Costs: runqueues examined (the level's span, the busiest group), tasks examined, one
//!    extra lock per pulling attempt that moves something and per pushed task.
//!
//! Decisions where the paper is open are listed in docs/policies/capability-aware.md.

use std::collections::BTreeMap;

use crate::domains::sd;
use crate::error::InputError;
use crate::interface::{Attempt, BalanceKind, MigrationKind, Move, Pid, Policy};
use crate::interface::{PolicyContext, View};
use crate::machine::CpuId;
use crate::policy::linux26::Linux26;
use crate::workload::Kind;

/// Where placement (fork, exec, wake-up) looks for "a least loaded core" (option `place`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PlaceScope {
    /// Every core of the machine.
    #[default]
    Machine,
    /// The least loaded group of the top domain level of the parent's (or previous) CPU, by
    /// speed-adjusted load, then its least loaded core: the paper's §1.1 (ii) description of
    /// Linux's placement ("the least loaded processor of the least loaded scheduling group
    /// (node) in its current domain").
    Domain,
    /// The cores of the parent's (or previous) CPU's node.
    Node,
}

impl PlaceScope {
    /// Parses the `place` option; `origin` names the setting in errors.
    pub fn parse(origin: &str, pairs: &[(&str, &str)]) -> Result<Self, InputError> {
        let mut scope = Self::default();
        for &(key, value) in pairs {
            if key != "place" {
                return Err(InputError::new(
                    origin,
                    format!("unknown capability-aware option '{key}'; the option is place"),
                ));
            }
            let choices = [
                ("machine", Self::Machine),
                ("domain", Self::Domain),
                ("node", Self::Node),
            ];
            scope = super::option_choice(origin, "capability-aware", key, value, &choices)?;
        }
        Ok(scope)
    }
}

/// The capability-aware balancer.
pub struct CapabilityAware {
    scope: PlaceScope,
    timers: Linux26,
    fast: Vec<bool>,
    speed_cores: usize,
    /// Core class (fast?) of each multithreaded group, fixed by its first placed thread.
    group_fast: BTreeMap<usize, bool>,
}

fn load(v: &View<'_>, c: CpuId, extra: i64) -> f64 {
    (v.nr_running(c) as i64 + extra) as f64 / v.machine.speed(c)
}

impl CapabilityAware {
    pub fn new(ctx: &PolicyContext<'_>, scope: PlaceScope) -> Self {
        let fast: Vec<bool> = (0..ctx.machine.cpus())
            .map(|c| ctx.machine.speed(c) > 1.0)
            .collect();
        Self {
            scope,
            timers: Linux26::new(ctx),
            speed_cores: fast.iter().filter(|&&f| f).count(),
            fast,
            group_fast: BTreeMap::new(),
        }
    }

    /// The class a thread of `pid`'s group must stay in, if any.
    fn class_of(&self, v: &View<'_>, pid: Pid) -> Option<bool> {
        let tgid = v.proc(pid).tgid;
        self.group_fast.get(&tgid).copied()
    }

    /// Whether `pid` may move from `from` to `to` (rule 2), and may run there (its affinity).
    fn may_cross(&self, v: &View<'_>, pid: Pid, to: CpuId) -> bool {
        self.class_of(v, pid).is_none_or(|f| f == self.fast[to]) && v.may_run(pid, to)
    }

    /// Rule 1.
    fn place(&mut self, v: &View<'_>, pid: Pid, near: CpuId) -> CpuId {
        let class = self.class_of(v, pid);
        // Its class's CPUs (rule 2) that its affinity allows.
        let allowed = |c: CpuId| class.is_none_or(|f| f == self.fast[c]) && v.may_run(pid, c);
        let scope: Vec<CpuId> = match self.scope {
            PlaceScope::Machine => (0..v.machine.cpus()).collect(),
            PlaceScope::Node => v.machine.node_cpus(v.machine.cpu_node(near)).to_vec(),
            PlaceScope::Domain => match v.domains.cpus[near].last() {
                None => vec![near],
                Some(top) => {
                    let group_load = |g: &crate::Group| {
                        let cpus = || g.span.iter().filter(|&c| allowed(c));
                        let speed: f64 = cpus().map(|c| v.machine.speed(c)).sum();
                        let tasks: usize = cpus().map(|c| v.nr_running(c)).sum();
                        if speed > 0.0 {
                            tasks as f64 / speed
                        } else {
                            f64::INFINITY
                        }
                    };
                    // Ties: the group holding `near`, then the first.
                    let g = top
                        .groups
                        .iter()
                        .min_by(|a, b| {
                            group_load(a)
                                .total_cmp(&group_load(b))
                                .then(b.span.contains(near).cmp(&a.span.contains(near)))
                        })
                        .expect("a level has groups");
                    g.span.iter().collect()
                }
            },
        };
        let pick = |cpus: &mut dyn Iterator<Item = CpuId>| {
            cpus.filter(|&c| allowed(c)).min_by(|&a, &b| {
                load(v, a, 1)
                    .total_cmp(&load(v, b, 1))
                    .then(v.nr_running(a).cmp(&v.nr_running(b)))
                    .then(self.fast[b].cmp(&self.fast[a]))
                    .then((b == near).cmp(&(a == near)))
                    .then(a.cmp(&b))
            })
        };
        // A scope with no CPU its affinity allows: the machine's (then, with no CPU of its
        // class either, the kernel's fallback from `near`).
        let best = pick(&mut scope.into_iter())
            .or_else(|| {
                v.allowed(pid)
                    .and_then(|_| pick(&mut (0..v.machine.cpus())))
            })
            .unwrap_or_else(|| v.fallback_cpu(pid, near));
        let tgid = v.proc(pid).tgid;
        if class.is_none() && v.group_threads(tgid) > 1 {
            self.group_fast.insert(tgid, self.fast[best]);
        }
        best
    }

    fn few_tasks(&self, v: &View<'_>) -> bool {
        let tasks: usize = (0..v.machine.cpus()).map(|c| v.nr_running(c)).sum();
        self.speed_cores > 0 && tasks <= self.speed_cores
    }

    /// The tasks of `b` in the order a puller on `c` takes them (rule 5), running one last.
    fn candidates(&self, v: &View<'_>, c: CpuId, b: CpuId, with_running: bool) -> Vec<Pid> {
        let mut out: Vec<Pid> = v.queued(b).rev().collect();
        let prefer = match (self.fast[c], self.fast[b]) {
            (true, false) => Some(Kind::Cpu),
            (false, true) => Some(Kind::Io),
            _ => None,
        };
        if let Some(kind) = prefer {
            out.sort_by_key(|&p| v.proc(p).kind != kind); // stable
        }
        if with_running {
            out.extend(v.current(b));
        }
        out
    }

    /// Rule 4 for a normal core: push every task to a free speed core of the level's span.
    fn push_all(&self, v: &View<'_>, c: CpuId, level: usize, out: &mut Attempt) {
        let span = &v.domains.cpus[c][level].span;
        let mut free: Vec<CpuId> = span
            .iter()
            .filter(|&t| self.fast[t] && v.nr_running(t) == 0)
            .collect();
        free.reverse(); // pop() hands out the lowest id first
        out.rqs_examined += span.len() as u32;
        let tasks: Vec<Pid> = v.queued(c).rev().chain(v.current(c)).collect();
        for pid in tasks {
            out.tasks_examined += 1;
            if !self.may_cross(v, pid, free.last().copied().unwrap_or(c)) {
                continue;
            }
            let Some(t) = free.pop() else { break };
            out.locks += 1;
            out.moves.push(Move {
                pid,
                from: c,
                to: t,
                kind: MigrationKind::Push,
            });
        }
    }

    /// Rule 4 for a free speed core: pull everything from the busiest normal core of the span.
    fn pull_all(&self, v: &View<'_>, c: CpuId, level: usize, out: &mut Attempt) {
        let span = &v.domains.cpus[c][level].span;
        out.rqs_examined += span.len() as u32;
        let busiest = span
            .iter()
            .filter(|&t| !self.fast[t] && v.nr_running(t) > 0)
            .max_by_key(|&t| (v.nr_running(t), std::cmp::Reverse(t)));
        let Some(b) = busiest else { return };
        out.locks += 1;
        for pid in self.candidates(v, c, b, true) {
            out.tasks_examined += 1;
            if self.may_cross(v, pid, c) {
                out.moves.push(Move {
                    pid,
                    from: b,
                    to: c,
                    kind: MigrationKind::Idle,
                });
            }
        }
    }

    /// Rule 5 at one level.
    fn pull_weighted(&self, v: &View<'_>, c: CpuId, level: usize, out: &mut Attempt) {
        let lv = &v.domains.cpus[c][level];
        out.rqs_examined += lv.weight as u32;
        let group_load = |g: &crate::domains::Group| {
            let n: usize = g.span.iter().map(|t| v.nr_running(t)).sum();
            let s: f64 = g.span.iter().map(|t| v.machine.speed(t)).sum();
            n as f64 / s
        };
        let mut this = 0.0;
        let mut busiest: Option<(usize, f64)> = None;
        for (gi, g) in lv.groups.iter().enumerate() {
            let l = group_load(g);
            if g.span.contains(c) {
                this = l;
            } else if busiest.is_none_or(|(_, m)| l > m) {
                busiest = Some((gi, l));
            }
        }
        let Some((gi, max)) = busiest else { return };
        if max <= 0.0 || 100.0 * max <= f64::from(lv.params.imbalance_pct) * this {
            return;
        }
        let group = &lv.groups[gi];
        out.rqs_examined += group.weight as u32;
        let Some(b) = group
            .span
            .iter()
            .filter(|&t| v.nr_running(t) > 0)
            .max_by(|&x, &y| load(v, x, 0).total_cmp(&load(v, y, 0)).then(y.cmp(&x)))
        else {
            return;
        };
        let (nb, sb) = (v.nr_running(b) as f64, v.machine.speed(b));
        let (nc, sc) = (v.nr_running(c) as f64, v.machine.speed(c));
        let mut k = ((nb * sc - nc * sb) / (sb + sc)).floor().max(0.0) as usize;
        let after = ((nb - 1.0) / sb).max((nc + 1.0) / sc);
        // One task moves if that lowers the larger load — or, to an idle CPU, if it does not
        // raise it (work conservation: an idle core takes a task that shares a faster one).
        if k == 0 && (after < nb / sb || (nc == 0.0 && nb > 1.0 && after <= nb / sb)) {
            k = 1;
        }
        if k == 0 {
            return;
        }
        let idle = v.idle(c);
        let with_running = idle && self.fast[c] && !self.fast[b];
        let kind = if idle {
            MigrationKind::Idle
        } else {
            MigrationKind::Pull
        };
        for pid in self.candidates(v, c, b, with_running) {
            if out.moves.len() >= k {
                break;
            }
            out.tasks_examined += 1;
            if self.may_cross(v, pid, c) {
                out.moves.push(Move {
                    pid,
                    from: b,
                    to: c,
                    kind,
                });
            }
        }
        if !out.moves.is_empty() {
            out.locks += 1;
        }
    }
}

impl Policy for CapabilityAware {
    fn name(&self) -> &'static str {
        "capability-aware"
    }

    fn place_new(&mut self, view: &View<'_>, pid: Pid, spawn_cpu: CpuId) -> Option<CpuId> {
        Some(self.place(view, pid, spawn_cpu))
    }

    fn place_wakeup(&mut self, view: &View<'_>, pid: Pid, prev_cpu: CpuId) -> Option<CpuId> {
        Some(self.place(view, pid, prev_cpu))
    }

    fn next_periodic_ns(&self, view: &View<'_>, cpu: CpuId) -> Option<u64> {
        self.timers.next_periodic_ns(view, cpu)
    }

    fn balance(
        &mut self,
        view: &View<'_>,
        cpu: CpuId,
        level: usize,
        kind: BalanceKind,
    ) -> Option<Attempt> {
        let attempt = self.decide(view, cpu, level, kind)?;
        if kind == BalanceKind::Periodic {
            let moved = !attempt.moves.is_empty();
            self.timers.record_outcome(cpu, level, moved);
        }
        Some(attempt)
    }
}

impl CapabilityAware {
    /// Rules 3 to 6 for one attempt.
    fn decide(
        &mut self,
        view: &View<'_>,
        cpu: CpuId,
        level: usize,
        kind: BalanceKind,
    ) -> Option<Attempt> {
        let flags = view.domains.cpus[cpu][level].params.flags;
        match kind {
            BalanceKind::NewIdle if flags & sd::BALANCE_NEWIDLE == 0 => return None,
            BalanceKind::NewIdle => {}
            BalanceKind::Periodic => {
                if !self.timers.take_due(view, cpu, level) {
                    return None;
                }
            }
        }
        let few = self.few_tasks(view);
        let mut out = Attempt::default();
        if !self.fast[cpu] {
            let speed_core_free = (0..view.machine.cpus()).any(|c| self.fast[c] && view.idle(c));
            if few {
                // Rule 4: a normal core only pushes, to free speed cores.
                if !speed_core_free || view.idle(cpu) {
                    return None;
                }
                self.push_all(view, cpu, level, &mut out);
                return Some(out);
            }
            if speed_core_free {
                return None; // rule 3
            }
        } else if few && view.idle(cpu) {
            self.pull_all(view, cpu, level, &mut out);
            if !out.moves.is_empty() {
                return Some(out);
            }
        }
        self.pull_weighted(view, cpu, level, &mut out);
        Some(out)
    }
}
