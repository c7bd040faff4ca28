//! `scx-rusty`: sched_ext's scx_rusty (sched-ext/scx, `scheds/rust/scx_rusty`, commit
//! 7a58a3a), a BPF scheduler with per-domain dispatch queues and a user-space balancer,
//! modelled rule by rule from its source (docs/policies/scx-rusty.md).
//!
//! ```text
//!   domain d = node d (one LLC per node)     shared queue d: tasks by deadline (or FIFO)
//!   per task: dom, target_dom, dispatch_local, vtime, deadline, avg_runtime
//!   per CPU:  dom_rr_cur (steal cursor), distribute cursor
//!   every tune_interval (global_balance): tuner.rs → direct/kick greedy masks, slice
//!   every interval: load_balance.rs → target_dom of some tasks, applied at their next enqueue
//! ```
//!
//! 1. Placement (`rusty_select_cpu`): a pinned task stays; an idle domestic previous CPU,
//!    or an idle foreign one in the direct-greedy mask; an idle CPU of the task's domain;
//!    with every CPU allowed, an idle direct-greedy CPU of the previous CPU's domain, then of
//!    its node; those all mark the task `dispatch_local`. Otherwise the previous CPU if
//!    domestic, else a domestic CPU (`bpf_cpumask_any_distribute`).
//! 2. Enqueue (`rusty_enqueue`): a pending transfer moves the task to its target domain
//!    (`task_set_domain`: vtime to the domain's min_vruntime) and kicks a CPU there; else a
//!    `dispatch_local` task goes to its CPU's local queue; else it waits in its domain's
//!    queue keyed by its deadline (`place_task_dl`, `clamp_task_vtime`) or FIFO (`fifo`), a
//!    domestic CPU kicked if it runs abroad (repatriation), an idle kick-greedy CPU kicked
//!    if it may run anywhere.
//! 3. Dispatch (`rusty_dispatch`): the CPU's domain queue; then, with `greedy_threshold`,
//!    the node's other domains; then, with `xnuma_greedy` = t > 0 on a multi-node machine,
//!    other nodes' domains with fewer than t tasks queued, each walk `nr_doms − 1` steps of
//!    the CPU's round-robin cursor.
//! 4. Vtime (`rusty_running`, `rusty_stopping`, `task_compute_dl`): a task's vtime grows
//!    by its run time (weight 100), its deadline is vtime + avg_runtime · 100 / 18 (latency
//!    priority 0: numasim has no waker); a domain's min_vruntime follows the vtime of the
//!    tasks that start running.
//!
//! Known limits: the engine calls the policy at enqueue and dispatch, not at each
//! running/stopping: a task's run time is read at its next enqueue (one `stopping` for the
//! time it ran since), and "starts running" is when the policy sends it to a local queue or
//! dispatches it.

pub mod load_balance;
pub mod tuner;

use crate::error::InputError;
use crate::interface::{
    Attempt, BalanceKind, Enqueue, EnqueueKind, PState, Pid, Policy, PolicyContext, View,
};
use crate::machine::CpuId;

use load_balance::{LbTask, DEFAULT_WEIGHT};
use tuner::{TunerParams, Tuning};

/// `SCX_SLICE_DFL`: the slice sched_ext gives a task that keeps its CPU with nothing else
/// to run (and rusty's first slice, main.rs).
pub const SCX_SLICE_DFL_NS: u64 = 20_000_000;
/// `MAX_DOM_ACTIVE_TPTRS`: the recently active tasks a domain's ring keeps for the balancer.
pub const MAX_DOM_ACTIVE_TPTRS: usize = 1024;
/// A nice-0 task's weight in sched_ext (`p->scx.weight`).
const TASK_WEIGHT: u64 = 100;
/// `sched_prio_to_weight[DL_MAX_LAT_PRIO − 0 − 1]` (DL_MAX_LAT_PRIO = 39): the latency
/// scale of latency priority 0 (`sched_prio_to_latency_weight`).
const LAT_SCALE_PRIO_0: u64 = 18;

/// What the enqueue does with a pending transfer (module doc; docs/policies/scx-rusty.md,
/// "The transfer at enqueue").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Xfer {
    /// To the target domain the balancer wrote (the source's comment, and its code before
    /// January 2025).
    Target,
    /// `task_set_domain(p, domc->id)` as the code reads at 7a58a3a: the target is reset to
    /// the current domain (no move; vtime reset, kick).
    Current,
}

/// The policy's options, with their units
/// (`scx-rusty:interval_ms=2000,tune_interval_ms=100,...`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Options {
    /// Load balancer interval, ms (`--interval` 2.0 s).
    pub interval_ms: u64,
    /// Tuner interval, ms (`--tune-interval` 0.1 s).
    pub tune_interval_ms: u64,
    /// Slice when under-utilised, µs (`--slice-us-underutil` 20000).
    pub slice_us: u64,
    /// Slice when fully utilised, µs (`--slice-us-overutil` 1000).
    pub slice_us_overutil: u64,
    /// Stealing from the node's other domains when non-zero (`--greedy-threshold` 1).
    pub greedy_threshold: u32,
    /// Stealing across nodes (`--greedy-threshold-x-numa` 0).
    pub xnuma_greedy: u32,
    /// FIFO domain queues instead of deadlines (`--fifo-sched`).
    pub fifo: bool,
    /// Direct-greedy domains: utilisation below this, % (`--direct-greedy-under` 90).
    pub direct_greedy_under: f64,
    /// Kick-greedy domains: utilisation below this, % (`--kick-greedy-under` 100).
    pub kick_greedy_under: f64,
    /// Direct greedy pushes across nodes (`--direct-greedy-numa`, off).
    pub direct_greedy_numa: bool,
    /// Duty-cycle half-life, ms (`--load-half-life` 1.0 s).
    pub load_half_life_ms: u64,
    /// The load balancer runs (`--no-load-balance` off).
    pub balance_load: bool,
    /// What enqueue does with a transfer.
    pub xfer: Xfer,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            interval_ms: 2000,
            tune_interval_ms: 100,
            slice_us: 20_000,
            slice_us_overutil: 1000,
            greedy_threshold: 1,
            xnuma_greedy: 0,
            fifo: false,
            direct_greedy_under: 90.0,
            kick_greedy_under: 100.0,
            direct_greedy_numa: false,
            load_half_life_ms: 1000,
            balance_load: true,
            xfer: Xfer::Target,
        }
    }
}

const OPTION_NAMES: &str = "interval_ms, tune_interval_ms, slice_us, slice_us_overutil, \
                            greedy_threshold, xnuma_greedy, fifo, direct_greedy_under, \
                            kick_greedy_under, direct_greedy_numa, load_half_life_ms, \
                            balance_load, xfer";

impl Options {
    /// Parses `key=value` pairs; `origin` names the setting in errors.
    pub fn parse(origin: &str, pairs: &[(&str, &str)]) -> Result<Self, InputError> {
        let mut o = Self::default();
        for &(key, value) in pairs {
            let bad = |what: &str| super::option_error(origin, "scx-rusty", key, value, what);
            let ms = || {
                value
                    .parse::<u64>()
                    .ok()
                    .filter(|&v| v > 0)
                    .ok_or_else(|| bad("a whole number > 0"))
            };
            let count = || value.parse::<u32>().map_err(|_| bad("a whole number ≥ 0"));
            let flag = || {
                crate::policy::option_choice(
                    origin,
                    "scx-rusty",
                    key,
                    value,
                    &[("0", false), ("1", true)],
                )
            };
            let percent = || {
                value
                    .parse::<f64>()
                    .ok()
                    .filter(|p| (0.0..=100.0).contains(p))
                    .ok_or_else(|| bad("a percentage in [0, 100]"))
            };
            match key {
                "interval_ms" => o.interval_ms = ms()?,
                "tune_interval_ms" => o.tune_interval_ms = ms()?,
                "slice_us" => o.slice_us = ms()?,
                "slice_us_overutil" => o.slice_us_overutil = ms()?,
                "greedy_threshold" => o.greedy_threshold = count()?,
                "xnuma_greedy" => o.xnuma_greedy = count()?,
                "fifo" => o.fifo = flag()?,
                "direct_greedy_under" => o.direct_greedy_under = percent()?,
                "kick_greedy_under" => o.kick_greedy_under = percent()?,
                "direct_greedy_numa" => o.direct_greedy_numa = flag()?,
                "load_half_life_ms" => o.load_half_life_ms = ms()?,
                "balance_load" => o.balance_load = flag()?,
                "xfer" => {
                    o.xfer = crate::policy::option_choice(
                        origin,
                        "scx-rusty",
                        key,
                        value,
                        &[("target", Xfer::Target), ("current", Xfer::Current)],
                    )?
                }
                _ => return Err(super::no_option(origin, "scx-rusty", key, OPTION_NAMES)),
            }
        }
        Ok(o)
    }
}

/// A task's context (`struct task_ctx`, what the model uses of it).
#[derive(Debug, Clone, Default)]
struct TaskCtx {
    /// Its domain has been picked (`rusty_init_task`).
    placed: bool,
    /// `domc->id`: the domain it belongs to now.
    dom: usize,
    /// `target_dom`: where the balancer wants it.
    target_dom: usize,
    dispatch_local: bool,
    /// `p->scx.dsq_vtime`.
    vtime: u64,
    deadline: u64,
    avg_runtime: u64,
    sum_runtime: u64,
    /// Its CPU time when last read (for the run time of its next `stopping`).
    seen_cpu_ns: u64,
    /// `dom_active_tasks_gen`.
    active_gen: u64,
    /// `dom_mask`: the domains its CPUs meet.
    dom_mask: u64,
    /// `all_cpus`: it may run on every CPU.
    all_cpus: bool,
}

/// What the policy counted (the source's statistics of the same names).
#[derive(Debug, Clone, Copy, Default)]
struct Stats {
    direct_dispatch: u64,
    dsq_dispatch: u64,
    greedy_local: u64,
    greedy_xnuma: u64,
    load_balance: u64,
    repatriate: u64,
    kick_greedy: u64,
    transfers: u64,
    lb_rounds: u64,
}

/// scx_rusty.
pub struct ScxRusty {
    o: Options,
    nr_nodes: usize,
    dom_node: Vec<usize>,
    dom_cpus: Vec<Vec<CpuId>>,
    cpu_dom: Vec<usize>,
    tasks: Vec<TaskCtx>,
    /// Per domain: `min_vruntime`, the active-task ring and its generation.
    min_vruntime: Vec<u64>,
    ring: Vec<std::collections::VecDeque<Pid>>,
    ring_gen: Vec<u64>,
    /// Per CPU: `pcpu_ctx.dom_rr_cur` and `distribute_cpu_mask_prev`.
    dom_rr_cur: Vec<u32>,
    distribute_prev: Vec<CpuId>,
    tuning: Tuning,
    /// The tuner's last reading: each CPU's busy time, and when.
    busy_prev: Vec<u64>,
    tuned_at_ns: u64,
    next_tune_ns: u64,
    next_lb_ns: u64,
    stats: Stats,
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// `calc_avg`: ¾ old + ¼ new, in integers.
fn calc_avg(old: u64, new: u64) -> u64 {
    (old - (old >> 2)) + (new >> 2)
}

/// `time_before(a, b)`.
fn time_before(a: u64, b: u64) -> bool {
    (a.wrapping_sub(b) as i64) < 0
}

impl ScxRusty {
    pub fn new(ctx: &PolicyContext<'_>, o: Options) -> Self {
        let m = ctx.machine;
        let nr_doms = m.nodes();
        let dom_cpus: Vec<Vec<CpuId>> = (0..nr_doms).map(|n| m.node_cpus(n).to_vec()).collect();
        let mut cpu_dom = vec![0; m.cpus()];
        for (d, cpus) in dom_cpus.iter().enumerate() {
            for &c in cpus {
                cpu_dom[c] = d;
            }
        }
        Self {
            o,
            nr_nodes: m.nodes(),
            dom_node: (0..nr_doms).collect(),
            dom_cpus,
            cpu_dom,
            tasks: Vec::new(),
            min_vruntime: vec![0; nr_doms],
            ring: vec![Default::default(); nr_doms],
            ring_gen: vec![0; nr_doms],
            dom_rr_cur: vec![0; m.cpus()],
            distribute_prev: vec![0; m.cpus()],
            tuning: Tuning::initial(m.cpus(), SCX_SLICE_DFL_NS),
            busy_prev: vec![0; m.cpus()],
            tuned_at_ns: 0,
            next_tune_ns: o.tune_interval_ms * 1_000_000,
            next_lb_ns: o.interval_ms * 1_000_000,
            stats: Stats::default(),
        }
    }

    fn nr_doms(&self) -> usize {
        self.dom_cpus.len()
    }

    /// Whether `cpu` is in `pid`'s cpumask (its domain's CPUs it may run on).
    fn domestic(&self, view: &View<'_>, pid: Pid, cpu: CpuId) -> bool {
        self.cpu_dom[cpu] == self.tasks[pid].dom && view.may_run(pid, cpu)
    }

    fn dom_mask_of(&self, view: &View<'_>, pid: Pid) -> (u64, bool) {
        let mut mask = 0_u64;
        for (d, cpus) in self.dom_cpus.iter().enumerate() {
            if cpus.iter().any(|&c| view.may_run(pid, c)) {
                mask |= 1 << d;
            }
        }
        (mask, view.allowed(pid).is_none())
    }

    /// `task_pick_domain` + `task_set_domain` (`rusty_init_task`, `rusty_set_cpumask`):
    /// the first domain the task may run in after the calling CPU's round-robin cursor.
    fn pick_and_set_domain(&mut self, view: &View<'_>, pid: Pid, caller: CpuId) {
        let (mask, all) = self.dom_mask_of(view, pid);
        let n = self.nr_doms();
        let mut dom = 0;
        if n > 1 {
            let start = self.dom_rr_cur[caller];
            self.dom_rr_cur[caller] = start.wrapping_add(1);
            dom = (1..=n)
                .map(|k| (start as usize + k) % n)
                .find(|&d| mask & (1 << d) != 0)
                .unwrap_or(0);
        }
        let t = &mut self.tasks[pid];
        t.dom_mask = mask;
        t.all_cpus = all;
        t.placed = true;
        t.dom = dom;
        t.target_dom = dom;
        t.vtime = self.min_vruntime[dom];
        t.deadline = t.vtime + t.avg_runtime * 100 / TASK_WEIGHT;
    }

    /// `rusty_set_cpumask` for a change of `pid`'s allowed CPUs the policy was not told of (it
    /// ran or slept through it): seen at its next wake-up or enqueue, when the domains it may
    /// run in changed.
    fn refresh_cpumask(&mut self, view: &View<'_>, pid: Pid, caller: CpuId) {
        if !view.any_affinity() {
            return;
        }
        let (mask, all) = self.dom_mask_of(view, pid);
        let t = &self.tasks[pid];
        if mask != t.dom_mask || all != t.all_cpus {
            self.pick_and_set_domain(view, pid, caller);
        }
    }

    /// `task_compute_dl` at latency priority 0.
    fn compute_dl(avg_runtime: u64) -> u64 {
        avg_runtime * 100 / LAT_SCALE_PRIO_0
    }

    fn slice_ns(&self) -> u64 {
        self.tuning.slice_ns
    }

    /// `rusty_select_cpu`.
    fn select_cpu(&mut self, view: &View<'_>, pid: Pid, prev_cpu: CpuId) -> CpuId {
        let n = view.machine.cpus();
        let caller = prev_cpu;
        if let Some(allowed) = view.allowed(pid) {
            if allowed.len() == 1 {
                self.stats.direct_dispatch += 1;
                self.tasks[pid].dispatch_local = true;
                return allowed.first().expect("one CPU");
            }
        }
        let prev_domestic = self.domestic(view, pid, prev_cpu);
        let direct = |s: &mut Self, cpu: CpuId| {
            s.tasks[pid].dispatch_local = true;
            s.stats.direct_dispatch += 1;
            cpu
        };
        if prev_domestic {
            if view.idle(prev_cpu) {
                return direct(self, prev_cpu);
            }
        } else if self.tuning.direct_greedy[prev_cpu]
            && view.idle(prev_cpu)
            && view.may_run(pid, prev_cpu)
        {
            return direct(self, prev_cpu);
        }
        // A domestic idle CPU (core, then CPU: the same without SMT).
        let dom = self.tasks[pid].dom;
        if let Some(c) = distribute(&mut self.distribute_prev[caller], n, |c| {
            self_domestic(&self.cpu_dom, dom, c) && view.may_run(pid, c) && view.idle(c)
        }) {
            return direct(self, c);
        }
        // Direct greedy: idle CPUs of under-utilised domains, the previous CPU's domain
        // first, then its node (or the machine with direct_greedy_numa).
        if self.tasks[pid].all_cpus && self.tuning.direct_greedy.iter().any(|&g| g) {
            let prev_dom = self.cpu_dom[prev_cpu];
            let prev_node = self.dom_node[prev_dom];
            let numa = self.o.direct_greedy_numa;
            let in_dom = |s: &Self, c: CpuId| s.cpu_dom[c] == prev_dom && s.tuning.direct_greedy[c];
            let in_tmp = |s: &Self, c: CpuId| {
                s.tuning.direct_greedy[c] && (numa || s.dom_node[s.cpu_dom[c]] == prev_node)
            };
            let snapshot: Vec<bool> = (0..n).map(|c| in_dom(self, c) && view.idle(c)).collect();
            if let Some(c) = distribute(&mut self.distribute_prev[caller], n, |c| snapshot[c]) {
                return direct(self, c);
            }
            let snapshot: Vec<bool> = (0..n).map(|c| in_tmp(self, c) && view.idle(c)).collect();
            if let Some(c) = distribute(&mut self.distribute_prev[caller], n, |c| snapshot[c]) {
                return direct(self, c);
            }
        }
        if prev_domestic {
            prev_cpu
        } else {
            distribute(&mut self.distribute_prev[caller], n, |c| {
                self_domestic(&self.cpu_dom, dom, c) && view.may_run(pid, c)
            })
            .unwrap_or(prev_cpu)
        }
    }

    /// `rusty_stopping` for the time `pid` ran since it was last read, then, for a wake-up,
    /// `rusty_runnable`'s reset of its run-time sum.
    fn account_run(&mut self, view: &View<'_>, pid: Pid, waking: bool) {
        let now_cpu = view.cpu_time_ns(pid);
        let fifo = self.o.fifo;
        let t = &mut self.tasks[pid];
        let delta = now_cpu.saturating_sub(t.seen_cpu_ns);
        t.seen_cpu_ns = now_cpu;
        if fifo {
            return;
        }
        if delta > 0 {
            t.sum_runtime += delta;
            t.avg_runtime = calc_avg(t.avg_runtime, t.sum_runtime);
            t.vtime = t.vtime.wrapping_add(delta * 100 / TASK_WEIGHT);
            t.deadline = t.vtime.wrapping_add(Self::compute_dl(t.avg_runtime));
        }
        if waking {
            t.sum_runtime = 0;
        }
    }

    /// `rusty_running`: `pid` starts running (recorded in its domain's active ring; the
    /// domain's min_vruntime follows its vtime).
    fn running(&mut self, pid: Pid) {
        let d = self.tasks[pid].dom;
        if self.tasks[pid].active_gen != self.ring_gen[d] {
            let ring = &mut self.ring[d];
            ring.push_back(pid);
            if ring.len() > MAX_DOM_ACTIVE_TPTRS {
                ring.pop_front();
            }
            self.tasks[pid].active_gen = self.ring_gen[d];
        }
        if !self.o.fifo && time_before(self.min_vruntime[d], self.tasks[pid].vtime) {
            self.min_vruntime[d] = self.tasks[pid].vtime;
        }
    }

    /// The shared queue `q` has a task `cpu` may run: the one it would take.
    fn first_runnable(view: &View<'_>, q: usize, cpu: CpuId) -> Option<Pid> {
        view.shared_tasks(q).find(|&p| view.may_run(p, cpu))
    }

    /// The tuner's step (`Tuner::step`).
    fn tune(&mut self, view: &View<'_>) {
        let n = view.machine.cpus();
        let interval = view.now.saturating_sub(self.tuned_at_ns);
        let util: Vec<f64> = (0..n)
            .map(|c| {
                let busy = view.cpu_busy_ns(c);
                let u = tuner::utilisation(busy.saturating_sub(self.busy_prev[c]), interval);
                self.busy_prev[c] = busy;
                u
            })
            .collect();
        self.tuned_at_ns = view.now;
        let params = TunerParams {
            direct_greedy_under: self.o.direct_greedy_under / 100.0,
            kick_greedy_under: self.o.kick_greedy_under / 100.0,
            underutil_slice_ns: self.o.slice_us * 1000,
            overutil_slice_ns: self.o.slice_us_overutil * 1000,
        };
        self.tuning = tuner::step(&util, &self.dom_cpus, &params);
    }

    /// One load-balancing round (`lb_step`): the tasks it examined.
    fn lb_step(&mut self, view: &View<'_>) -> u32 {
        self.stats.lb_rounds += 1;
        let nr_doms = self.nr_doms();
        // A domain's duty cycle: its bucket's running average, which holds its members'
        // (transferred with them: dom_dcycle_xfer_task) and the history of those that ended.
        let mut dcycles = vec![0.0_f64; nr_doms];
        for (pid, t) in self.tasks.iter().enumerate() {
            if t.placed {
                dcycles[t.dom] += view.duty_cycle(pid);
            }
        }
        let apply_weight = self.tuning.fully_utilized;
        let ledger = load_balance::ledger(
            &dcycles,
            view.machine.cpus(),
            load_balance::bucket_weight(TASK_WEIGHT),
            apply_weight,
        );
        let weight = if apply_weight {
            (TASK_WEIGHT as f64).min(ledger.infeas_threshold)
        } else {
            DEFAULT_WEIGHT
        };
        if !self.o.balance_load {
            return 0;
        }
        let dom_node = self.dom_node.clone();
        let tasks = &self.tasks;
        let rings = &mut self.ring;
        let gens = &mut self.ring_gen;
        let outcome = load_balance::load_balance(self.nr_nodes, &dom_node, &ledger, &mut |d| {
            // populate_tasks_by_load: the ring read and emptied, its generation bumped.
            let ring = std::mem::take(&mut rings[d]);
            gens[d] += 1;
            ring.into_iter()
                .filter(|&pid| {
                    tasks[pid].target_dom == d && !matches!(view.proc(pid).state, PState::Done)
                })
                .map(|pid| LbTask {
                    pid,
                    load: view.duty_cycle(pid) * weight,
                    dom_mask: tasks[pid].dom_mask,
                    preferred_dom_mask: 0,
                })
                .collect()
        });
        for x in &outcome.transfers {
            self.tasks[x.pid].target_dom = x.to_dom;
            self.stats.transfers += 1;
        }
        outcome.tasks_read + outcome.tasks_scanned
    }
}

/// `cpumask_any_and_distribute` on a calling CPU whose last answer is `prev`: the first CPU
/// after it (wrapping) that `pick` accepts; `prev` moves only on success.
fn distribute(prev: &mut CpuId, nr_cpus: usize, pick: impl Fn(CpuId) -> bool) -> Option<CpuId> {
    let found = (1..=nr_cpus)
        .map(|k| (*prev + k) % nr_cpus)
        .find(|&c| pick(c));
    if let Some(c) = found {
        *prev = c;
    }
    found
}

fn self_domestic(cpu_dom: &[usize], dom: usize, cpu: CpuId) -> bool {
    cpu_dom[cpu] == dom
}

impl Policy for ScxRusty {
    fn name(&self) -> &'static str {
        "scx-rusty"
    }

    fn start(&mut self, view: &View<'_>) {
        self.tasks = vec![
            TaskCtx {
                active_gen: u64::MAX,
                ..TaskCtx::default()
            };
            view.proc_count()
        ];
        self.next_tune_ns = view.now + self.o.tune_interval_ms * 1_000_000;
        self.next_lb_ns = view.now + self.o.interval_ms * 1_000_000;
        self.tuned_at_ns = view.now;
    }

    fn place_new(&mut self, view: &View<'_>, pid: Pid, spawn_cpu: CpuId) -> Option<CpuId> {
        // rusty_init_task runs on the parent's CPU; select_cpu's prev_cpu is that CPU too.
        self.pick_and_set_domain(view, pid, spawn_cpu);
        self.tasks[pid].seen_cpu_ns = view.cpu_time_ns(pid);
        Some(self.select_cpu(view, pid, spawn_cpu))
    }

    fn place_wakeup(&mut self, view: &View<'_>, pid: Pid, prev_cpu: CpuId) -> Option<CpuId> {
        self.refresh_cpumask(view, pid, prev_cpu);
        Some(self.select_cpu(view, pid, prev_cpu))
    }

    fn next_periodic_ns(&self, _view: &View<'_>, _cpu: CpuId) -> Option<u64> {
        None
    }

    fn balance(
        &mut self,
        _view: &View<'_>,
        _cpu: CpuId,
        _level: usize,
        _kind: BalanceKind,
    ) -> Option<Attempt> {
        None
    }

    fn timeslice_ns(&self) -> Option<u64> {
        Some(SCX_SLICE_DFL_NS)
    }

    fn duty_cycle_half_life_ns(&self) -> Option<u64> {
        Some(self.o.load_half_life_ms * 1_000_000)
    }

    fn shared_queues(&self) -> usize {
        self.nr_doms()
    }

    fn enqueue(&mut self, view: &View<'_>, pid: Pid, cpu: CpuId, why: EnqueueKind) -> Enqueue {
        let n = view.machine.cpus();
        if !matches!(why, EnqueueKind::New) {
            // A re-enqueue after an affinity change passes through quiescent and runnable.
            let waking = matches!(why, EnqueueKind::Wakeup | EnqueueKind::Affinity);
            self.account_run(view, pid, waking);
        }
        if matches!(why, EnqueueKind::Affinity) {
            // rusty_set_cpumask, before the enqueue that follows it.
            self.pick_and_set_domain(view, pid, cpu);
        } else {
            self.refresh_cpumask(view, pid, cpu);
        }
        let slice = self.slice_ns();
        let mut kick = None;
        let dom_now = self.tasks[pid].dom;
        let target = self.tasks[pid].target_dom;
        let mut transferred = false;
        if dom_now != target {
            let new_dom = match self.o.xfer {
                Xfer::Target => target,
                Xfer::Current => dom_now,
            };
            // task_set_domain: only into a domain the task may still run in.
            if self.dom_cpus[new_dom].iter().any(|&c| view.may_run(pid, c)) {
                let t = &mut self.tasks[pid];
                t.dom = new_dom;
                t.target_dom = new_dom;
                t.vtime = self.min_vruntime[new_dom];
                t.deadline = t.vtime + t.avg_runtime * 100 / TASK_WEIGHT;
                t.dispatch_local = false;
                self.stats.load_balance += 1;
                let dom = new_dom;
                kick = distribute(&mut self.distribute_prev[cpu], n, |c| {
                    self_domestic(&self.cpu_dom, dom, c) && view.may_run(pid, c)
                });
                transferred = true;
            } else {
                self.tasks[pid].target_dom = dom_now;
            }
        }
        if !transferred {
            if self.tasks[pid].dispatch_local {
                self.tasks[pid].dispatch_local = false;
                self.running(pid);
                return Enqueue::Local {
                    slice_ns: Some(slice),
                };
            }
            if !self.domestic(view, pid, cpu) {
                let dom = self.tasks[pid].dom;
                kick = distribute(&mut self.distribute_prev[cpu], n, |c| {
                    self_domestic(&self.cpu_dom, dom, c) && view.may_run(pid, c)
                });
                self.stats.repatriate += 1;
            }
        }
        let dom = self.tasks[pid].dom;
        let key = if self.o.fifo {
            0
        } else {
            // place_task_dl → clamp_task_vtime: at most one slice of vtime budget.
            let min_v = self.min_vruntime[dom].wrapping_sub(slice);
            let t = &mut self.tasks[pid];
            if time_before(t.vtime, min_v) {
                t.vtime = min_v;
                t.deadline = t.vtime.wrapping_add(Self::compute_dl(t.avg_runtime));
            }
            t.deadline
        };
        let mut greedy_kick = None;
        if self.tasks[pid].all_cpus {
            let greedy: Vec<bool> = (0..n)
                .map(|c| self.tuning.kick_greedy[c] && view.idle(c))
                .collect();
            greedy_kick = distribute(&mut self.distribute_prev[cpu], n, |c| greedy[c]);
            if greedy_kick.is_some() {
                self.stats.kick_greedy += 1;
            }
        }
        // One kick reaches the engine: the first idle of the domestic one (transfer or
        // repatriation: it dispatches from the task's domain first), after an affinity change
        // the CPU the task is enqueued on (the kernel wakes that runqueue; the engine, for
        // other enqueues, does it itself), and the greedy one.
        let requeued = matches!(why, EnqueueKind::Affinity).then_some(cpu);
        let kick = [kick, requeued, greedy_kick]
            .into_iter()
            .flatten()
            .find(|&c| view.idle(c));
        Enqueue::Shared {
            queue: dom,
            key,
            slice_ns: Some(slice),
            kick,
        }
    }

    fn dispatch(&mut self, view: &View<'_>, cpu: CpuId, order: &mut Vec<usize>) {
        let curr = self.cpu_dom[cpu];
        if let Some(pid) = Self::first_runnable(view, curr, cpu) {
            self.stats.dsq_dispatch += 1;
            self.running(pid);
            order.push(curr);
            return;
        }
        if self.o.greedy_threshold == 0 {
            return;
        }
        let n = self.nr_doms() as u32;
        let my_node = self.dom_node[curr];
        for _ in 0..n.saturating_sub(1) {
            let dom = (self.dom_rr_cur[cpu] % n) as usize;
            self.dom_rr_cur[cpu] = self.dom_rr_cur[cpu].wrapping_add(1);
            if dom == curr || self.dom_node[dom] != my_node {
                continue;
            }
            if let Some(pid) = Self::first_runnable(view, dom, cpu) {
                self.stats.greedy_local += 1;
                self.running(pid);
                order.push(dom);
                return;
            }
        }
        let x = self.o.xnuma_greedy as usize;
        if x == 0 || self.nr_nodes == 1 {
            return;
        }
        for _ in 0..n.saturating_sub(1) {
            let dom = (self.dom_rr_cur[cpu] % n) as usize;
            self.dom_rr_cur[cpu] = self.dom_rr_cur[cpu].wrapping_add(1);
            // The source skips domains with at least `x` queued (as it reads at 7a58a3a).
            if self.dom_node[dom] == my_node || dom == curr || view.shared_len(dom) >= x {
                continue;
            }
            if let Some(pid) = Self::first_runnable(view, dom, cpu) {
                self.stats.greedy_xnuma += 1;
                self.running(pid);
                order.push(dom);
                return;
            }
        }
    }

    fn global_charge_cpu(&self, view: &View<'_>) -> Option<CpuId> {
        // rusty's user-space thread is a task rusty itself places: on an idle CPU when
        // there is one (rusty_select_cpu), the lowest here; else CPU 0, where it started.
        Some(
            (0..view.machine.cpus())
                .find(|&c| view.idle(c))
                .unwrap_or(0),
        )
    }

    fn global_period_ns(&self) -> Option<u64> {
        Some(gcd(self.o.tune_interval_ms, self.o.interval_ms) * 1_000_000)
    }

    fn global_balance(&mut self, view: &View<'_>) -> Option<Attempt> {
        let mut a = Attempt::default();
        // main.rs's loop: the tuner first, then the balancer, each when due.
        if view.now >= self.next_tune_ns {
            self.tune(view);
            a.rqs_examined += view.machine.cpus() as u32;
            self.next_tune_ns += self.o.tune_interval_ms * 1_000_000;
            if self.next_tune_ns < view.now {
                self.next_tune_ns = view.now + self.o.tune_interval_ms * 1_000_000;
            }
        }
        if view.now >= self.next_lb_ns {
            a.tasks_examined += self.lb_step(view);
            a.rqs_examined += self.nr_doms() as u32;
            self.next_lb_ns += self.o.interval_ms * 1_000_000;
            if self.next_lb_ns < view.now {
                self.next_lb_ns = view.now + self.o.interval_ms * 1_000_000;
            }
        }
        Some(a)
    }

    fn extra_metrics(&self) -> Vec<(String, f64)> {
        let s = self.stats;
        [
            ("rusty_direct_dispatch", s.direct_dispatch),
            ("rusty_dsq_dispatch", s.dsq_dispatch),
            ("rusty_greedy_local", s.greedy_local),
            ("rusty_greedy_xnuma", s.greedy_xnuma),
            ("rusty_load_balance", s.load_balance),
            ("rusty_repatriate", s.repatriate),
            ("rusty_kick_greedy", s.kick_greedy),
            ("rusty_lb_transfers", s.transfers),
            ("rusty_lb_rounds", s.lb_rounds),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v as f64))
        .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_default_to_the_sources_and_name_their_units() {
        assert_eq!(Options::parse("o", &[]).unwrap(), Options::default());
        let o = Options::parse(
            "o",
            &[
                ("interval_ms", "500"),
                ("xnuma_greedy", "2"),
                ("fifo", "1"),
                ("xfer", "current"),
            ],
        )
        .unwrap();
        assert_eq!(
            (o.interval_ms, o.xnuma_greedy, o.fifo, o.xfer),
            (500, 2, true, Xfer::Current)
        );
        let err = Options::parse("--policy", &[("interval_ms", "0")]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "--policy: scx-rusty option 'interval_ms' must be a whole number > 0, not '0'"
        );
        assert!(Options::parse("o", &[("slice", "1")]).is_err());
    }

    #[test]
    fn the_deadline_of_latency_priority_0_scales_the_average_run_by_100_over_18() {
        // sched_prio_to_weight[39 − 0 − 1] = 18: 9 ms of average run → 50 ms.
        assert_eq!(ScxRusty::compute_dl(9_000_000), 50_000_000);
        // calc_avg: ¾ old + ¼ new in integers.
        assert_eq!(calc_avg(100, 20), 80);
        assert!(time_before(5, 6) && !time_before(6, 5));
        assert!(!time_before(0, 0_u64.wrapping_sub(20_000_000)));
    }
}
