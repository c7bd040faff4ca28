//! The policy itself: the engine's calls mapped onto LAVD's operations (module doc of
//! `scx_lavd`, steps 1-4), with the state they keep.
//!
//! ```text
//!   ScxLavd ── doms[d]: CPUs, capacity, neighbours   roles[d]: stealer/stealee + budgets
//!           ── per CPU: busy at the last round, avg util (wall, invariant)
//!           ── per task: util_est noted at enqueue     rng: Pcg64 from the run's seed
//! ```

use rand::{RngCore, SeedableRng};
use rand_pcg::Pcg64;

use super::balance::{self, DomLoad, Role, Steal};
use super::cpdom::{self, Cpdom};
use super::Options;
use crate::interface::{
    Attempt, BalanceKind, Enqueue, EnqueueKind, Pid, Policy, PolicyContext, View,
};
use crate::machine::CpuId;

/// Mixed into the run's seed so that the policy's draws are its own stream.
const SEED_SALT: u64 = 0x4c41_5644; // "LAVD"

/// What the policy counted (reported by `extra_metrics`).
#[derive(Debug, Clone, Default)]
struct Stats {
    /// Steals by the probabilistic walk, per distance level.
    walk_steals: Vec<u64>,
    /// Forced steals, per distance level.
    force_steals: Vec<u64>,
    /// Walks started (a stealer domain's CPU dispatching).
    walks: u64,
    /// Walks whose nearest level gave nothing, from a domain with a farther level (each then
    /// draws whether to go on).
    walks_nearest_failed: u64,
    /// Walks that looked beyond the nearest level.
    walks_beyond_nearest: u64,
    /// Rounds with at least one stealee.
    rounds_with_roles: u64,
    rounds: u64,
}

/// scx_lavd's cross-domain balancing over FIFO domain queues.
pub struct ScxLavd {
    options: Options,
    doms: Vec<Cpdom>,
    /// Each CPU's domain.
    dom_of: Vec<usize>,
    /// Each CPU's capacity (×1024).
    cap: Vec<u64>,
    roles: Vec<Role>,
    rng: Pcg64,
    /// Each CPU's busy time at the last round, and when that round was.
    last_busy: Vec<u64>,
    last_round_ns: u64,
    /// Each CPU's average utilisation (×1024): wall-clock, capacity-invariant.
    util_wall: Vec<u64>,
    util_invr: Vec<u64>,
    /// Each task's `util_est` noted at its last enqueue.
    noted: Vec<u64>,
    stats: Stats,
}

impl ScxLavd {
    pub fn new(ctx: &PolicyContext<'_>, options: Options) -> Self {
        let m = ctx.machine;
        let doms = cpdom::build(m, options.dist);
        let mut dom_of = vec![0; m.cpus()];
        for d in &doms {
            for &c in &d.cpus {
                dom_of[c] = d.id;
            }
        }
        let levels = doms.iter().map(|d| d.neighbors.len()).max().unwrap_or(0);
        Self {
            options,
            dom_of,
            cap: (0..m.cpus()).map(|c| cpdom::capacity(m, c)).collect(),
            roles: vec![Role::default(); doms.len()],
            doms,
            rng: Pcg64::seed_from_u64(SEED_SALT),
            last_busy: vec![0; m.cpus()],
            last_round_ns: 0,
            util_wall: vec![0; m.cpus()],
            util_invr: vec![0; m.cpus()],
            noted: Vec::new(),
            stats: Stats {
                walk_steals: vec![0; levels],
                force_steals: vec![0; levels],
                ..Stats::default()
            },
        }
    }

    /// The compute domains (for tests and reports).
    pub fn domains(&self) -> &[Cpdom] {
        &self.doms
    }

    /// The roles of the last round.
    pub fn roles(&self) -> &[Role] {
        &self.roles
    }

    /// A task's `util_est`: its duty cycle ×1024 (`task_load_metric`).
    fn util_est(view: &View<'_>, pid: Pid) -> u64 {
        ((view.duty_cycle(pid) * balance::LAVD_SCALE as f64) as u64).min(balance::LAVD_SCALE)
    }

    /// Whether domain `d`'s queue has a task `cpu` may run (what `scx_bpf_dsq_move_to_local`
    /// takes).
    fn gives(view: &View<'_>, d: usize, cpu: CpuId) -> bool {
        view.shared_tasks(d).any(|p| view.may_run(p, cpu))
    }

    /// `pick_idle_cpu` without SMT, core types, sync wake-ups or core compaction (module doc,
    /// step 1); `aggressive`: LAVD's exec-time migration flag. Returns the CPU and whether it
    /// is idle.
    fn pick_cpu(&self, view: &View<'_>, pid: Pid, prev: CpuId, aggressive: bool) -> (CpuId, bool) {
        let prev = view.fallback_cpu(pid, prev);
        if view.idle(prev) {
            return (prev, true);
        }
        let idle_in = |d: usize| {
            self.doms[d]
                .cpus
                .iter()
                .copied()
                .find(|&c| view.idle(c) && view.may_run(pid, c))
        };
        let sticky = self.dom_of[prev];
        if let Some(c) = idle_in(sticky) {
            return (c, true);
        }
        if aggressive && self.doms.len() > 1 && self.roles[sticky].stealee {
            // migrate_to_neighbor: the nearest stealer neighbour with an idle CPU.
            for &n in self.doms[sticky].neighbors.iter().flatten() {
                if self.roles[n].stealer {
                    if let Some(c) = idle_in(n) {
                        return (c, true);
                    }
                }
            }
        }
        (prev, false)
    }

    /// The head task's `util_est` of domain `d`'s queue (`dsq_peek_task_load`).
    fn head_load(view: &View<'_>, d: usize) -> u64 {
        view.shared_tasks(d)
            .next()
            .map_or(0, |p| Self::util_est(view, p))
    }

    /// Debits both budgets for a steal from `from` by domain `to` (`decrement_*_budget`).
    fn debit(&mut self, view: &View<'_>, from: usize, to: usize) {
        let load = Self::head_load(view, from);
        self.roles[from].debit_stealee(load);
        self.roles[to].debit_stealer(load);
    }

    /// One round (module doc, step 3).
    fn round(&mut self, view: &View<'_>) {
        let dur = view.now.saturating_sub(self.last_round_ns);
        if dur > 0 {
            for cpu in 0..self.cap.len() {
                let busy_now = view.cpu_busy_ns(cpu);
                let busy = busy_now.saturating_sub(self.last_busy[cpu]).min(dur);
                self.last_busy[cpu] = busy_now;
                let cur_wall = (busy << balance::LAVD_SHIFT) / dur;
                let cur_invr = busy * self.cap[cpu] / dur;
                self.util_wall[cpu] = balance::calc_asym_avg(self.util_wall[cpu], cur_wall);
                self.util_invr[cpu] = balance::calc_asym_avg(self.util_invr[cpu], cur_invr);
            }
        }
        self.last_round_ns = view.now;
        let loads: Vec<DomLoad> = self
            .doms
            .iter()
            .map(|d| DomLoad {
                util_invr_sum: d.cpus.iter().map(|&c| self.util_invr[c]).sum(),
                util_wall_sum: d.cpus.iter().map(|&c| self.util_wall[c]).sum(),
                qload: view
                    .shared_tasks(d.id)
                    .map(|p| self.noted.get(p).copied().unwrap_or(0))
                    .sum(),
                nr_cpus: d.cpus.len() as u64,
                cap_sum: d.cap_sum,
            })
            .collect();
        self.roles = balance::plan(
            &loads,
            self.options.low_util_wall(),
            self.options.mig_delta_factor(),
        );
        self.stats.rounds += 1;
        if self.roles.iter().any(|r| r.stealee) {
            self.stats.rounds_with_roles += 1;
        }
    }
}

impl Policy for ScxLavd {
    fn name(&self) -> &'static str {
        "scx-lavd"
    }

    fn start(&mut self, view: &View<'_>) {
        self.rng = Pcg64::seed_from_u64(view.run_seed() ^ SEED_SALT);
        self.noted = vec![0; view.proc_count()];
        self.last_round_ns = view.now;
        self.last_busy = (0..self.cap.len()).map(|c| view.cpu_busy_ns(c)).collect();
    }

    fn place_new(&mut self, view: &View<'_>, pid: Pid, spawn_cpu: CpuId) -> Option<CpuId> {
        Some(self.pick_cpu(view, pid, spawn_cpu, true).0)
    }

    fn place_wakeup(&mut self, view: &View<'_>, pid: Pid, prev_cpu: CpuId) -> Option<CpuId> {
        Some(self.pick_cpu(view, pid, prev_cpu, false).0)
    }

    fn shared_queues(&self) -> usize {
        self.doms.len()
    }

    fn enqueue(&mut self, view: &View<'_>, pid: Pid, cpu: CpuId, why: EnqueueKind) -> Enqueue {
        if let Some(n) = self.noted.get_mut(pid) {
            *n = Self::util_est(view, pid);
        }
        let (chosen, idle) = match why {
            EnqueueKind::SliceEnd => self.pick_cpu(view, pid, cpu, false),
            _ => (cpu, view.idle(cpu)),
        };
        let queue = self.dom_of[chosen];
        if chosen == cpu && idle && view.shared_len(queue) == 0 {
            return Enqueue::Local { slice_ns: None };
        }
        Enqueue::Shared {
            queue,
            key: 0,
            slice_ns: None,
            kick: (idle && chosen != cpu).then_some(chosen),
        }
    }

    fn dispatch(&mut self, view: &View<'_>, cpu: CpuId, order: &mut Vec<usize>) {
        let own = self.dom_of[cpu];
        let many = self.doms.len() > 1;
        if many && self.roles[own].stealer {
            self.stats.walks += 1;
            let mut deepest = 0;
            let rng = &mut self.rng;
            let mut draw = || rng.next_u32();
            let got = balance::try_steal(
                &self.doms[own].neighbors,
                &self.roles,
                balance::MIG_PROB_FT,
                |d| Self::gives(view, d, cpu),
                &mut draw,
                &mut deepest,
            );
            if self.doms[own].neighbors.len() > 1 && got.is_none_or(|s| s.level > 0) {
                self.stats.walks_nearest_failed += 1;
            }
            if deepest > 0 {
                self.stats.walks_beyond_nearest += 1;
            }
            if let Some(Steal { dom, level }) = got {
                self.debit(view, dom, own);
                self.stats.walk_steals[level] += 1;
                order.push(dom);
                return;
            }
        }
        if Self::gives(view, own, cpu) {
            order.push(own);
            return;
        }
        if many && self.options.mig_delta_pct == 0 {
            if let Some(Steal { dom, level }) =
                balance::force_steal(&self.doms[own].neighbors, |d| Self::gives(view, d, cpu))
            {
                self.debit(view, dom, own);
                self.stats.force_steals[level] += 1;
                order.push(dom);
            }
        }
    }

    fn timeslice_ns(&self) -> Option<u64> {
        Some(self.options.slice_us * 1000)
    }

    fn duty_cycle_half_life_ns(&self) -> Option<u64> {
        Some(balance::RAVG_HALFLIFE_NS)
    }

    fn global_period_ns(&self) -> Option<u64> {
        (self.doms.len() > 1).then_some(balance::SYS_STAT_INTERVAL_NS)
    }

    fn global_balance(&mut self, view: &View<'_>) -> Option<Attempt> {
        self.round(view);
        // The round reads every CPU's statistics (a BPF timer in the kernel: counted, not
        // charged to a CPU).
        Some(Attempt {
            rqs_examined: self.cap.len() as u32,
            ..Attempt::default()
        })
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

    fn extra_metrics(&self) -> Vec<(String, f64)> {
        let mut out = vec![
            ("lavd_rounds".to_owned(), self.stats.rounds as f64),
            (
                "lavd_rounds_with_stealees".to_owned(),
                self.stats.rounds_with_roles as f64,
            ),
            ("lavd_walks".to_owned(), self.stats.walks as f64),
            (
                "lavd_walks_nearest_failed".to_owned(),
                self.stats.walks_nearest_failed as f64,
            ),
            (
                "lavd_walks_beyond_nearest".to_owned(),
                self.stats.walks_beyond_nearest as f64,
            ),
        ];
        for (level, &n) in self.stats.walk_steals.iter().enumerate() {
            out.push((format!("lavd_walk_steals_level{level}"), n as f64));
        }
        for (level, &n) in self.stats.force_steals.iter().enumerate() {
            out.push((format!("lavd_force_steals_level{level}"), n as f64));
        }
        out
    }
}
