//! `origin-aware`: Mehta & Kanungo's origin-aware load balancing (IJETT 73(2), 2025), built on
//! [`Linux26`] over `multilevel` domains. Goal: keep each process on or near its origin node.
//!
//! ```text
//!   per CPU: cycle counter — even periodic cycles RI-LB, odd cycles SI-LB
//!   RI-LB  = linux26 load_balance, busiest runqueue's tasks taken in origin order
//!   SI-LB  = pushes / exchanges of this CPU's off-node tasks toward their origins
//!   load(T) in SI-LB = nr_running(T), updated as the cycle moves tasks
//! ```
//!
//! 1. A *cycle* is one periodic balancing event of a CPU (the engine asks level 0 and every
//!    level that may be due, lowest first). Cycles are counted per CPU from 0: even cycles run
//!    RI-LB on every due level, odd cycles run SI-LB once, and the levels due in that cycle
//!    have their interval used up (linux26's back-off state is otherwise untouched).
//! 2. RI-LB is linux26's `load_balance` (busiest group, busiest queue, imbalance, cache-hot
//!    rule, failures, active balancing) with one change: among the busiest CPU's tasks, those
//!    whose origin CPU is this CPU go first, then those whose origin node is this node, then the
//!    rest by increasing distance from their origin node to this node; ties keep the kernel's
//!    tail-first order. Newly-idle, idle and active balancing use the same order.
//! 3. SI-LB on CPU P of node N (skipped while the system load — runnable tasks per CPU — is
//!    below `min_load`): take the queued (not running) processes of P — with `si=all` its
//!    running process too, first — whose origin node N' ≠ N
//!    — unless N' is at N's nearest remote level and `nearest` is `leave` (the default) —
//!    farthest origin first (ties: lower origin CPU, then queue order). For each process K with
//!    origin CPU P':
//!    1. if load(P) > load(P'), push K to P';
//!    2. else the first other CPU T of N' (in id order) with load(P) > load(T) gets K;
//!    3. else, with variant 1, the first queued process on P', then on the other CPUs of N', whose
//!       origin CPU is P — or failing any, whose origin node is N — is exchanged with K: each
//!       goes home;
//!    4. else, with variant 2, the nodes X ≠ N' with distance(N', X) < distance(N', N), by
//!       increasing distance (ties: node id): K goes to the first CPU T there with
//!       load(P) > load(T);
//!    5. else K stays.
//! 4. Costs (as every balancer's, `EngineConfig`): every runqueue whose load or tasks SI-LB reads is one runqueue examined,
//!    every process looked at one task examined, and each push or exchange takes both runqueue
//!    locks (two lock charges). A push is a `push` migration, each half of an exchange an
//!    `exchange` one; RI-LB moves are `pull` (busy) or `idle` as in linux26.
//!
//! 5. With `si-lb=off` every cycle is RI-LB: linux26 with RI-LB's order and nothing else (the
//!    origin-aware selection on its own; a Python policy over linux26 that ranks the same way
//!    gives its results bit for bit: examples/policies/origin_select.py).
//!
//! Decisions where the paper is open are listed in docs/policies/origin-aware.md.

use crate::error::InputError;
use crate::interface::{AffinityMove, PolicyContext, View};
use crate::interface::{Attempt, BalanceKind, Costs, MigrationKind, Move, Pid, Policy, Quiet};
use crate::machine::CpuId;
use crate::policy::linux26::Linux26;

/// The policy's options (`origin-aware:v1=on,v2=on,min-load=0,nearest=leave,si=queued`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Options {
    /// SI-LB step 3: exchange with a process whose origin is this CPU or node.
    pub variant1: bool,
    /// SI-LB step 4: push to a node nearer the origin node than this one.
    pub variant2: bool,
    /// SI-LB is skipped while runnable tasks per CPU are below this.
    pub min_load: f64,
    /// Leave processes whose origin is at the nearest remote level where they are.
    pub leave_nearest: bool,
    /// SI-LB looks at the running process too, not only the queued ones (`si=all`).
    pub si_running: bool,
    /// Odd cycles run SI-LB (`si-lb=on`); off, every cycle is RI-LB: linux26 taking the
    /// busiest runqueue's tasks in origin order, and nothing else.
    pub si_lb: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            variant1: true,
            variant2: true,
            min_load: 0.0,
            leave_nearest: true,
            si_running: false,
            si_lb: true,
        }
    }
}

impl Options {
    /// Parses `key=value` pairs; `origin` names the setting in errors.
    pub fn parse(origin: &str, pairs: &[(&str, &str)]) -> Result<Self, InputError> {
        let mut o = Self::default();
        let on_off = |key: &str, v: &str| match v {
            "on" | "true" | "1" => Ok(true),
            "off" | "false" | "0" => Ok(false),
            _ => Err(InputError::new(
                origin,
                format!("origin-aware option '{key}' must be on or off, not '{v}'"),
            )),
        };
        for &(key, value) in pairs {
            match key {
                "v1" => o.variant1 = on_off(key, value)?,
                "v2" => o.variant2 = on_off(key, value)?,
                "min-load" => {
                    o.min_load = value
                        .parse::<f64>()
                        .ok()
                        .filter(|x| x.is_finite() && *x >= 0.0)
                        .ok_or_else(|| {
                            InputError::new(
                                origin,
                                format!(
                                    "origin-aware option 'min-load' must be a number ≥ 0, not '{value}'"
                                ),
                            )
                        })?;
                }
                "nearest" => {
                    let choices = [("leave", true), ("move", false)];
                    o.leave_nearest =
                        super::option_choice(origin, "origin-aware", key, value, &choices)?;
                }
                "si-lb" => o.si_lb = on_off(key, value)?,
                "si" => {
                    let choices = [("queued", false), ("all", true)];
                    o.si_running =
                        super::option_choice(origin, "origin-aware", key, value, &choices)?;
                }
                _ => {
                    return Err(InputError::new(
                        origin,
                        format!(
                            "unknown origin-aware option '{key}'; choose from v1, v2, min-load, nearest, si, si-lb"
                        ),
                    ))
                }
            }
        }
        Ok(o)
    }
}

/// The origin-aware balancer.
pub struct OriginAware {
    inner: Linux26,
    options: Options,
    /// Periodic cycles started, per CPU.
    cycle: Vec<u64>,
    /// Whether this CPU's current (odd) cycle has run its SI-LB.
    si_done: Vec<bool>,
    /// Memory access levels of the machine (sorted SLIT values).
    mals: Vec<u32>,
}

/// RI-LB's order: own CPU 0, own node (or never ran: it would start here) 1, else 2 + distance.
fn origin_rank(v: &View<'_>, this_cpu: CpuId, pid: Pid) -> u32 {
    let Some(origin) = v.proc(pid).origin_cpu else {
        return 1;
    };
    if origin == this_cpu {
        return 0;
    }
    let (m, here) = (v.machine, v.machine.cpu_node(this_cpu));
    let node = m.cpu_node(origin);
    if node == here {
        1
    } else {
        2 + m.distance(node, here)
    }
}

impl OriginAware {
    pub fn new(ctx: &PolicyContext<'_>, options: Options) -> Self {
        let cpus = ctx.machine.cpus();
        Self {
            inner: Linux26::new(ctx).with_task_rank(origin_rank),
            options,
            cycle: vec![0; cpus],
            si_done: vec![false; cpus],
            mals: ctx.machine.mals(),
        }
    }

    /// One SI-LB pass on `p` (step 3 of the module doc).
    pub fn si_lb(&self, v: &View<'_>, p: CpuId) -> Attempt {
        let m = v.machine;
        let n = m.cpu_node(p);
        let mut out = Attempt {
            rqs_examined: 1,
            ..Attempt::default()
        };
        let total: usize = (0..m.cpus()).map(|c| v.nr_running(c)).sum();
        if (total as f64) < self.options.min_load * m.cpus() as f64 {
            return out;
        }
        // Loads as the pass changes them.
        let mut delta = std::collections::BTreeMap::<CpuId, i64>::new();
        let load = |delta: &std::collections::BTreeMap<CpuId, i64>, c: CpuId| {
            v.nr_running(c) as i64 + delta.get(&c).copied().unwrap_or(0)
        };
        let mut candidates = Vec::new();
        // Algorithm 1 step 4 speaks of the processes that "presently exist in its runqueue":
        // with `si=all` the running one too (moved as by a migration thread), else the queued.
        let running = v.current(p).filter(|_| self.options.si_running);
        for (pos, pid) in running.into_iter().chain(v.queued(p)).enumerate() {
            out.tasks_examined += 1;
            let Some(origin) = v.proc(pid).origin_cpu else {
                continue;
            };
            let on = m.cpu_node(origin);
            let d = m.distance(n, on);
            if on == n || (self.options.leave_nearest && self.level(d) == 1) {
                continue;
            }
            candidates.push((std::cmp::Reverse(d), origin, pos, pid));
        }
        candidates.sort_unstable();
        let mut taken = Vec::new(); // partners already exchanged this pass
        for (_, origin, _, k) in candidates {
            let on = m.cpu_node(origin);
            let home = std::iter::once(origin)
                .chain(m.node_cpus(on).iter().copied().filter(|&c| c != origin));
            // Steps 1 and 2: the origin CPU, then the other CPUs of the origin node.
            let mut to = None;
            for t in home.clone() {
                out.rqs_examined += 1;
                // Never onto a CPU the process may not run on (its affinity).
                if load(&delta, p) > load(&delta, t) && v.may_run(k, t) {
                    to = Some(t);
                    break;
                }
            }
            if let Some(t) = to {
                push(&mut out, &mut delta, k, p, t, MigrationKind::Push);
                continue;
            }
            // Step 3 (variant 1): exchange with a process that belongs here.
            if self.options.variant1 {
                let partner = [true, false].into_iter().find_map(|own_cpu| {
                    home.clone().filter(|&t| v.may_run(k, t)).find_map(|t| {
                        out.rqs_examined += 1;
                        v.queued(t)
                            .find(|&q| {
                                out.tasks_examined += 1;
                                let o = v.proc(q).origin_cpu;
                                !taken.contains(&q)
                                    && v.may_run(q, p)
                                    && o.is_some_and(|o| {
                                        if own_cpu {
                                            o == p
                                        } else {
                                            m.cpu_node(o) == n
                                        }
                                    })
                            })
                            .map(|q| (q, t))
                    })
                });
                if let Some((q, t)) = partner {
                    taken.push(q);
                    out.locks += 2;
                    out.moves.push(Move {
                        pid: k,
                        from: p,
                        to: t,
                        kind: MigrationKind::Exchange,
                    });
                    out.moves.push(Move {
                        pid: q,
                        from: t,
                        to: p,
                        kind: MigrationKind::Exchange,
                    });
                    continue;
                }
            }
            // Step 4 (variant 2): a node nearer the origin node than this one.
            if self.options.variant2 {
                let limit = m.distance(on, n);
                let mut near: Vec<(u32, usize)> = (0..m.nodes())
                    .filter(|&x| x != on && m.distance(on, x) < limit)
                    .map(|x| (m.distance(on, x), x))
                    .collect();
                near.sort_unstable();
                let to = near.iter().find_map(|&(_, x)| {
                    m.node_cpus(x).iter().copied().find(|&t| {
                        out.rqs_examined += 1;
                        load(&delta, p) > load(&delta, t) && v.may_run(k, t)
                    })
                });
                if let Some(t) = to {
                    push(&mut out, &mut delta, k, p, t, MigrationKind::Push);
                }
            }
        }
        out
    }

    /// Memory access level of a distance (0 = local).
    fn level(&self, d: u32) -> usize {
        self.mals.binary_search(&d).unwrap_or(usize::MAX)
    }
}

fn push(
    out: &mut Attempt,
    delta: &mut std::collections::BTreeMap<CpuId, i64>,
    pid: Pid,
    from: CpuId,
    to: CpuId,
    kind: MigrationKind,
) {
    out.locks += 2;
    *delta.entry(from).or_default() -= 1;
    *delta.entry(to).or_default() += 1;
    out.moves.push(Move {
        pid,
        from,
        to,
        kind,
    });
}

impl Policy for OriginAware {
    fn name(&self) -> &'static str {
        "origin-aware"
    }

    fn place_new(&mut self, view: &View<'_>, pid: Pid, spawn_cpu: CpuId) -> Option<CpuId> {
        self.inner.place_new(view, pid, spawn_cpu)
    }

    fn place_wakeup(&mut self, view: &View<'_>, pid: Pid, prev_cpu: CpuId) -> Option<CpuId> {
        self.inner.place_wakeup(view, pid, prev_cpu)
    }

    fn affinity_cpu(&mut self, view: &View<'_>, pid: Pid) -> AffinityMove {
        self.inner.affinity_cpu(view, pid)
    }

    fn next_periodic_ns(&self, view: &View<'_>, cpu: CpuId) -> Option<u64> {
        self.inner.next_periodic_ns(view, cpu)
    }

    /// Level 0, which opens each cycle, and the levels linux26's timers may find due in it
    /// (whichever way the cycle's moves change `cpu`'s state): at any other level both RI-LB
    /// and SI-LB answer `None` without a change.
    fn due_levels(&self, view: &View<'_>, cpu: CpuId) -> u64 {
        if !self.options.si_lb {
            return self.inner.due_levels(view, cpu);
        }
        1 | self.inner.levels_due_either_way(view, cpu)
    }

    fn balance(
        &mut self,
        view: &View<'_>,
        cpu: CpuId,
        level: usize,
        kind: BalanceKind,
    ) -> Option<Attempt> {
        if kind == BalanceKind::NewIdle || !self.options.si_lb {
            return self.inner.balance(view, cpu, level, kind);
        }
        if level == 0 {
            // The engine asks level 0 first at every periodic balancing (`due_levels`): it
            // opens a new cycle.
            self.cycle[cpu] += 1;
            self.si_done[cpu] = false;
        }
        let index = self.cycle[cpu] - 1; // cycles are numbered from 0
        if index.is_multiple_of(2) {
            return self.inner.balance(view, cpu, level, kind);
        }
        if !self.inner.take_due(view, cpu, level) || self.si_done[cpu] {
            return None;
        }
        self.si_done[cpu] = true;
        Some(self.si_lb(view, cpu))
    }

    /// An idle CPU (no queued process for SI-LB to send home) where RI-LB, in its cycles,
    /// would find no busiest group at any due level (`Linux26::reach_none_overloaded`).
    fn quiet_periodic(&mut self, view: &View<'_>, cpu: CpuId, quiet: &mut Quiet) -> bool {
        if !self.options.si_lb {
            return self.inner.quiet_periodic(view, cpu, quiet);
        }
        if !view.idle(cpu) {
            return false;
        }
        // The index of the cycle this opens. RI-LB's levels are the due ones and level 0, which
        // opens the cycle whether due or not.
        let ri_lb = self.cycle[cpu].is_multiple_of(2);
        if ri_lb && !self.inner.due_reach_none_overloaded(view, cpu, 1) {
            return false;
        }
        self.cycle[cpu] += 1;
        // The due levels in one pass (linux26's idle_pass): RI-LB balances each, finding no
        // busiest group; SI-LB takes each, and its first reads this runqueue and finds no
        // queued process.
        let mut si_done = false;
        let attempts = &mut quiet.attempts;
        quiet.next_ns = self.inner.idle_pass(view.now, cpu, ri_lb, |level, weight| {
            if ri_lb {
                let costs = Costs {
                    rqs_examined: weight,
                    ..Costs::default()
                };
                attempts.push((level, costs));
            } else if !si_done {
                si_done = true;
                let costs = Costs {
                    rqs_examined: 1,
                    ..Costs::default()
                };
                attempts.push((level, costs));
            }
        });
        self.si_done[cpu] = si_done;
        debug_assert!(
            ri_lb || !si_done || self.si_lb(view, cpu) == Attempt::from(quiet.attempts[0].1)
        );
        debug_assert_eq!(quiet.next_ns, self.inner.next_periodic_ns(view, cpu));
        true
    }

    fn active_balance(
        &mut self,
        view: &View<'_>,
        busiest: CpuId,
        target: CpuId,
    ) -> Option<Attempt> {
        self.inner.active_balance(view, busiest, target)
    }
}
