//! `linux`: the Linux 6.x CFS/EEVDF load balancer (`kernel/sched/fair.c`, 6.13), over any domain
//! builder (made for `linux` domains), with PELT load tracking (`kernel/sched/pelt.c`).
//!
//! ```text
//!   per task   PELT load/runnable/util (engine, crate::load::Pelt; read through the View)
//!              recent_used_cpu (select_idle_sibling)
//!   per CPU    PELT sums of its attached tasks (engine) │ avg_idle, idle_stamp,
//!              max_idle_balance_cost, the current balancing pass (policy)
//!   per CPU, per level (sched_domain)
//!              last_balance, balance_interval (min..max), nr_balance_failed,
//!              max_newidle_lb_cost │ derived once: NUMA?, LLC?, imb_numa_nr, prefer_sibling
//!   capacity   1024 per CPU (SCHED_CAPACITY_SCALE); load weight 1024 per task (nice 0)
//! ```
//!
//! Rules, each from the 6.13 function named (old names in brackets):
//! 1. `sched_balance_domains` [`rebalance_domains`]: on each CPU's timer, every level whose
//!    `get_sd_balance_interval` (balance_interval × busy_factor − 1 jiffy when busy, clamped to
//!    `[1, max_load_balance_interval]`) has passed since `last_balance` is balanced; going up
//!    stops when `should_we_balance` says another CPU of the local group balances for it.
//!    Idle CPUs keep their own timer at the idle interval (the nohz proxy: what
//!    `nohz_idle_balance` does for them, done by each one).
//! 2. `sched_balance_rq` [`load_balance`]: `should_we_balance` (newly idle: the CPU is empty;
//!    else the first idle CPU of the local group's balance mask, or its first CPU), then
//!    `sched_balance_find_src_group` [`find_busiest_group`]: per group `update_sg_lb_stats`
//!    (PELT load, util, runnable, nr_running, idle CPUs) and `group_classify` (has_spare <
//!    fully_busy < … < overloaded), the busiest by `update_sd_pick_busiest`, the out-balanced
//!    tests, then `calculate_imbalance` (migration type load, util or task, with
//!    `sibling_imbalance` and `adjust_numa_imbalance` / `imb_numa_nr`).
//! 3. `sched_balance_find_src_rq` [`find_busiest_queue`]: by the migration type, the CPU with
//!    the most load (skipping one task heavier than the imbalance), util (two tasks or more) or
//!    tasks.
//! 4. `detach_tasks`: from the tail of `cfs_tasks` (least recently run first), at most
//!    `loop_max = min(nr_migrate 32, nr_running)` looked at; `can_migrate_task` (never the
//!    running task; `migrate_degrades_locality`, else `task_hot`: stopped running less than
//!    `sysctl_sched_migration_cost` 0.5 ms ago; hot tasks move once `nr_balance_failed >
//!    cache_nice_tries`); load and util checked with `shr_bound(x, nr_balance_failed) >
//!    imbalance`; an idle puller never empties the source; newly idle stops after one task.
//! 5. Failure, active balance, back-off (end of `sched_balance_rq`): nothing moved →
//!    `nr_balance_failed++` (not newly idle); `need_active_balance` (migrate_task and more than
//!    `cache_nice_tries + 2` failures) → `active_load_balance_cpu_stop` pushes one task, hot or
//!    not, and a success resets the failures; moved → failures reset; unbalanced → interval back
//!    to min; balanced → interval doubles up to max (not for newly idle).
//! 6. `sched_balance_newidle` [`newidle_balance`]: skipped unless some CPU has two tasks
//!    (`rd->overloaded`) and `avg_idle` ≥ the lowest level's `max_newidle_lb_cost`; levels with
//!    `SD_BALANCE_NEWIDLE` lowest first while `avg_idle ≥ cost so far + the level's max cost`,
//!    each cost measured (the engine's charge for the attempt, `update_newidle_cost`: a max
//!    decaying ×253/256 per second), until one pulls. `avg_idle`: 1/8 EWMA of idle durations
//!    (from `idle_stamp` at newly idle to the next wake-up there, `ttwu_do_activate`), capped at
//!    2 × `max_idle_balance_cost`.
//! 7. Fork placement, `select_task_rq_fair` → `sched_balance_find_dst_cpu` [`find_idlest_cpu`]:
//!    from the highest contiguous level with `SD_BALANCE_FORK`, `sched_balance_find_dst_group`
//!    (`update_sg_wakeup_stats`, `update_pick_idlest`; stay local when local is of a lower type;
//!    same type: the load rule with 17 % (`imbalance_pct`) at NUMA levels for busy groups, and
//!    for has_spare at NUMA levels the preferred node, then the `imb_numa_nr` allowance of
//!    `adjust_numa_imbalance` on the idle-CPU difference, then most idle CPUs), then
//!    `sched_balance_find_dst_group_cpu` (an idle CPU, the most recently idled; else the least
//!    loaded), then down.
//! 8. Wake-up, `select_task_rq_fair` fast path: the IO completes on the CPU that issued it, so
//!    the waker is the previous CPU (`wake=previous`) and `wake_affine` keeps it; then
//!    `select_idle_sibling`: the target if idle, else `recent_used_cpu` if idle and sharing the
//!    LLC (node), else the first idle CPU of the LLC from target + 1, else the target. Under
//!    `wake=idlest` a waking task is placed as a new one is (rule 7), from where it slept.
//! 9. Inside a CPU: fair time sharing approximated as round robin with EEVDF's slice,
//!    `sysctl_sched_base_slice` 0.75 ms × (1 + ilog2(min(CPUs, 8))) (`update_sysctl`).
//!
//! NUMA balancing (issue 17 §3) plugs in at [`Linux::migrate_degrades_locality`] and
//! [`Linux::preferred_node`]; without it they answer "no opinion" (−1) and "none", as the kernel
//! does for a task with no NUMA faults. Every simplification is listed in
//! docs/policies/linux.md.

use crate::assumptions::Wake;
use crate::domains::{sd, Builder, Level};
use crate::error::InputError;
use crate::interface::{Attempt, BalanceKind, MigrationKind, Move, Pid, Policy};
use crate::interface::{PolicyContext, View};
use crate::machine::CpuId;

/// `SCHED_CAPACITY_SCALE`: a CPU's capacity (every CPU the same: no `SD_ASYM_CPUCAPACITY`).
pub const SCHED_CAPACITY_SCALE: u64 = 1024;
/// `sysctl_sched_nr_migrate` (`SCHED_NR_MIGRATE_BREAK`, `kernel/sched/core.c`): tasks looked at
/// per balancing pass.
pub const NR_MIGRATE: usize = 32;
/// `sysctl_sched_migration_cost` (`fair.c`): a task that ran this recently is cache-hot; also
/// the floor of `max_idle_balance_cost` and half of `avg_idle`'s start value.
pub const MIGRATION_COST_NS: u64 = 500_000;
/// `NUMA_IMBALANCE_MIN` (`adjust_numa_imbalance`): an imbalance of this many tasks or fewer is
/// allowed between nodes while the destination is lightly loaded.
pub const NUMA_IMBALANCE_MIN: i64 = 2;
/// `normalized_sysctl_sched_base_slice` (`fair.c`), before `update_sysctl`'s CPU-count factor.
pub const BASE_SLICE_NS: u64 = 750_000;
/// `update_newidle_cost`: `max_newidle_lb_cost` decays once per second (HZ jiffies) by 253/256.
pub const NEWIDLE_COST_DECAY_PERIOD_NS: u64 = 1_000_000_000;

/// `enum group_type` (`fair.c`), in increasing order of pulling priority. The types this model
/// never produces (no misfit, SMT or asymmetric packing, no affinity) are kept for the order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum GroupType {
    #[default]
    HasSpare,
    FullyBusy,
    MisfitTask,
    SmtBalance,
    AsymPacking,
    Imbalanced,
    Overloaded,
}

/// `enum migration_type`: what `calculate_imbalance`'s imbalance counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MigrationType {
    /// Load (PELT `load_avg`).
    Load,
    /// Utilisation (PELT `util_avg`).
    Util,
    /// Tasks.
    Task,
    /// A misfit task (asymmetric capacity; not produced here).
    Misfit,
}

/// `enum cpu_idle_type`: why `sched_balance_rq` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdleType {
    /// Periodic, the CPU busy.
    NotIdle,
    /// Periodic, the CPU idle.
    Idle,
    /// The CPU is about to go idle.
    NewlyIdle,
}

/// `struct sg_lb_stats`: one group's statistics (PELT values rounded to integers: the kernel's
/// are integers; rounding rather than truncating keeps float noise from flipping a whole unit).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SgStats {
    /// `load × 1024 / capacity`, computed only where the kernel computes it.
    pub avg_load: u64,
    pub group_load: u64,
    pub group_capacity: u64,
    pub group_util: u64,
    pub group_runnable: u64,
    /// Tasks (every task is a CFS task here: `sum_h_nr_running` is the same).
    pub sum_nr_running: u64,
    pub idle_cpus: u64,
    pub group_weight: u64,
    pub group_type: GroupType,
}

/// `group_is_overloaded`: more tasks than CPUs and util or runnable beyond capacity by
/// `imbalance_pct`.
pub fn group_is_overloaded(imbalance_pct: u64, s: &SgStats) -> bool {
    if s.sum_nr_running <= s.group_weight {
        return false;
    }
    s.group_capacity * 100 < s.group_util * imbalance_pct
        || s.group_capacity * imbalance_pct < s.group_runnable * 100
}

/// `group_has_capacity`: fewer tasks than CPUs, or runnable and util within capacity.
pub fn group_has_capacity(imbalance_pct: u64, s: &SgStats) -> bool {
    if s.sum_nr_running < s.group_weight {
        return true;
    }
    if s.group_capacity * imbalance_pct < s.group_runnable * 100 {
        return false;
    }
    s.group_capacity * 100 > s.group_util * imbalance_pct
}

/// `group_classify` for the types this model produces (no `sgc->imbalance` from affinity, no
/// asymmetric packing, SMT or misfit): overloaded, fully busy or has spare.
pub fn group_classify(imbalance_pct: u64, s: &SgStats) -> GroupType {
    if group_is_overloaded(imbalance_pct, s) {
        GroupType::Overloaded
    } else if !group_has_capacity(imbalance_pct, s) {
        GroupType::FullyBusy
    } else {
        GroupType::HasSpare
    }
}

/// `adjust_numa_imbalance`: while the destination would run at most `imb_numa_nr` tasks, an
/// imbalance of up to [`NUMA_IMBALANCE_MIN`] is allowed (becomes 0).
pub fn adjust_numa_imbalance(imbalance: i64, dst_running: i64, imb_numa_nr: i64) -> i64 {
    if dst_running > imb_numa_nr {
        return imbalance;
    }
    if imbalance <= NUMA_IMBALANCE_MIN {
        return 0;
    }
    imbalance
}

/// `sibling_imbalance`: the task difference that evens `nr_running` per core between the
/// busiest and the local group (cores = CPUs: no SMT); 0 unless the puller is idle.
pub fn sibling_imbalance(dst_idle: bool, busiest: &SgStats, local: &SgStats) -> i64 {
    if !dst_idle || busiest.sum_nr_running == 0 {
        return 0;
    }
    let (nb, nl) = (busiest.group_weight as i64, local.group_weight as i64);
    let (rb, rl) = (busiest.sum_nr_running as i64, local.sum_nr_running as i64);
    if nb == nl {
        return (rb - rl).max(0);
    }
    let mut imbalance = (nl * rb - nb * rl).max(0);
    imbalance = (2 * imbalance + nl + nb) / (nl + nb);
    if imbalance <= 1 && rl == 0 && rb > 1 {
        imbalance = 2;
    }
    imbalance
}

/// What `calculate_imbalance` needs of the domain and the puller.
#[derive(Debug, Clone, Copy)]
pub struct ImbalanceEnv {
    pub idle: IdleType,
    /// The level is inside one LLC (`SD_SHARE_LLC`).
    pub llc: bool,
    /// The level spans nodes (`SD_NUMA`).
    pub numa: bool,
    pub imb_numa_nr: i64,
    /// `sds->prefer_sibling`.
    pub prefer_sibling: bool,
}

/// `calculate_imbalance` (6.13) for a busiest group of type has_spare, fully busy or
/// overloaded: the migration type and the amount. `total_load` and `total_capacity` are the
/// domain's sums (`sds->total_*`). The local group's `avg_load` is computed here when the local
/// group is not overloaded, as the kernel does.
pub fn calculate_imbalance(
    env: &ImbalanceEnv,
    local: &mut SgStats,
    busiest: &SgStats,
    total_load: u64,
    total_capacity: u64,
) -> (MigrationType, i64) {
    let idle = env.idle != IdleType::NotIdle;
    if busiest.group_type == GroupType::Imbalanced {
        return (MigrationType::Task, 1);
    }
    if local.group_type == GroupType::HasSpare {
        if busiest.group_type > GroupType::FullyBusy && !env.llc {
            // Fill the local group's spare capacity from an overloaded busiest one.
            let imbalance = local.group_capacity.max(local.group_util) - local.group_util;
            if idle && imbalance == 0 {
                return (MigrationType::Task, 1);
            }
            return (MigrationType::Util, imbalance as i64);
        }
        let mut imbalance = if busiest.group_weight == 1 || env.prefer_sibling {
            sibling_imbalance(idle, busiest, local)
        } else {
            (local.idle_cpus as i64 - busiest.idle_cpus as i64).max(0)
        };
        if env.numa {
            imbalance =
                adjust_numa_imbalance(imbalance, local.sum_nr_running as i64 + 1, env.imb_numa_nr);
        }
        return (MigrationType::Task, imbalance >> 1);
    }
    let sd_avg = total_load * SCHED_CAPACITY_SCALE / total_capacity.max(1);
    if local.group_type < GroupType::Overloaded {
        local.avg_load = local.group_load * SCHED_CAPACITY_SCALE / local.group_capacity.max(1);
        if local.avg_load >= busiest.avg_load || local.avg_load >= sd_avg {
            return (MigrationType::Load, 0);
        }
    }
    // Both are (or will be) overloaded: bring both to the domain's average, no further.
    let imbalance = (busiest.avg_load.saturating_sub(sd_avg) * busiest.group_capacity)
        .min(sd_avg.saturating_sub(local.avg_load) * local.group_capacity)
        / SCHED_CAPACITY_SCALE;
    (MigrationType::Load, imbalance as i64)
}

/// `update_sd_pick_busiest` for the types produced here: whether `sg` replaces `busiest`.
pub fn pick_busiest(busiest: Option<&SgStats>, sg: &SgStats) -> bool {
    if sg.sum_nr_running == 0 {
        return false;
    }
    // init_sd_lb_stats' busiest_stat (has_spare, idle_cpus = UINT_MAX) loses to any group.
    let Some(b) = busiest else {
        return true;
    };
    if sg.group_type != b.group_type {
        return sg.group_type > b.group_type;
    }
    match sg.group_type {
        GroupType::Overloaded => sg.avg_load > b.avg_load,
        // Equal averages (0: avg_load is not computed for fully busy groups): the first stays.
        GroupType::FullyBusy => sg.avg_load > b.avg_load,
        GroupType::HasSpare => {
            sg.idle_cpus < b.idle_cpus
                || (sg.idle_cpus == b.idle_cpus && sg.sum_nr_running > b.sum_nr_running)
        }
        _ => false,
    }
}

/// Options of the `linux` policy (`linux:key=value,...`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// EEVDF base slice before the CPU-count factor, µs (`sysctl_sched_base_slice`, 750).
    pub base_slice_us: u64,
    /// Tasks looked at per pass (`sysctl_sched_nr_migrate`, 32).
    pub nr_migrate: usize,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            base_slice_us: BASE_SLICE_NS / 1000,
            nr_migrate: NR_MIGRATE,
        }
    }
}

impl Options {
    /// Parses `slice-us=N` (µs, ≥ 1) and `nr-migrate=N` (≥ 1).
    pub fn parse(origin: &str, pairs: &[(&str, &str)]) -> Result<Self, InputError> {
        let mut o = Self::default();
        for &(key, value) in pairs {
            let positive = || {
                value
                    .parse::<u64>()
                    .ok()
                    .filter(|&x| (1..=1_000_000).contains(&x))
                    .ok_or_else(|| {
                        InputError::new(
                            origin,
                            format!(
                                "linux option '{key}' must be an integer from 1 to 1000000, not '{value}'"
                            ),
                        )
                    })
            };
            match key {
                "slice-us" => o.base_slice_us = positive()?,
                "nr-migrate" => o.nr_migrate = positive()? as usize,
                _ => {
                    return Err(InputError::new(
                        origin,
                        format!("unknown linux option '{key}'; choose slice-us or nr-migrate"),
                    ))
                }
            }
        }
        Ok(o)
    }
}

/// Per CPU, per level: the `sched_domain` fields the balancer changes, and what it derives from
/// the domains once.
#[derive(Debug, Clone)]
struct SdState {
    last_balance_ns: u64,
    balance_interval_ms: u64,
    nr_balance_failed: u32,
    max_newidle_lb_cost_ns: u64,
    last_decay_max_lb_cost_ns: u64,
    /// `SD_NUMA`: the level spans more than the CPU's node.
    numa: bool,
    /// `SD_SHARE_LLC`: the level is inside the CPU's node (one LLC per node).
    llc: bool,
    imb_numa_nr: i64,
    /// The child level prefers siblings (`SD_PREFER_SIBLING` of the groups' child domain).
    prefer_sibling: bool,
    cache_hot_ns: u64,
}

/// Per CPU.
#[derive(Debug, Clone)]
struct CpuSt {
    avg_idle_ns: u64,
    idle_stamp_ns: Option<u64>,
    /// The last `idle_stamp` set (what `sched_balance_find_dst_group_cpu` compares).
    last_idle_stamp_ns: u64,
    max_idle_balance_cost_ns: u64,
    /// The periodic pass in progress: its instant, `continue_balancing`, whether busy, and
    /// the sum of the levels' newidle costs seen (for the rq-wide decay).
    periodic_at: Option<u64>,
    continue_balancing: bool,
    busy: bool,
    need_decay: bool,
    max_cost_ns: u64,
    /// The newly-idle pass in progress: its instant, cost so far, and whether it stopped.
    newidle_at: Option<u64>,
    newidle_cost_ns: u64,
    newidle_stopped: bool,
}

/// The 6.x balancer.
pub struct Linux {
    sd: Vec<Vec<SdState>>,
    cpu: Vec<CpuSt>,
    /// `p->recent_used_cpu`, by pid (grown on demand).
    recent_used_cpu: Vec<Option<CpuId>>,
    tick_ns: u64,
    /// `max_load_balance_interval` in ns (HZ × CPUs / 10 jiffies).
    max_interval_ns: u64,
    slice_ns: u64,
    nr_migrate: usize,
    wake: Wake,
}

impl Linux {
    /// Per-level state for every CPU of the context's domains.
    pub fn new(ctx: &PolicyContext<'_>, o: Options) -> Self {
        let m = ctx.machine;
        let modern = ctx.domains.builder == Builder::Linux;
        let sd = ctx
            .domains
            .cpus
            .iter()
            .enumerate()
            .map(|(cpu, levels)| {
                let node = m.cpu_node(cpu);
                let node_cpus = m.node_cpus(node);
                let in_node = |l: &Level| l.span.iter().all(|c| m.cpu_node(c) == node);
                // build_sched_domains: imb = max(1, node span >> 3) for one LLC per node; the
                // NUMA levels scale it by their span over the first NUMA level's.
                let imb = ((node_cpus.len() >> 3) as i64).max(1);
                let imb_span = levels
                    .iter()
                    .find(|l| !in_node(l))
                    .map_or(1, |l| l.weight as i64);
                levels
                    .iter()
                    .enumerate()
                    .map(|(i, l)| {
                        let numa = !in_node(l);
                        SdState {
                            last_balance_ns: 0,
                            balance_interval_ms: l.params.min_interval_ms.max(1),
                            nr_balance_failed: 0,
                            max_newidle_lb_cost_ns: 0,
                            last_decay_max_lb_cost_ns: 0,
                            numa,
                            llc: !numa,
                            imb_numa_nr: if numa {
                                imb * (l.weight as i64 / imb_span).max(1)
                            } else {
                                imb
                            },
                            prefer_sibling: i > 0
                                && levels[i - 1].params.flags & sd::PREFER_SIBLING != 0,
                            cache_hot_ns: if modern {
                                l.params.cache_hot_ns
                            } else {
                                MIGRATION_COST_NS
                            },
                        }
                    })
                    .collect()
            })
            .collect();
        let cpus = m.cpus();
        let cpu = vec![
            CpuSt {
                avg_idle_ns: 2 * MIGRATION_COST_NS,
                idle_stamp_ns: None,
                last_idle_stamp_ns: 0,
                max_idle_balance_cost_ns: MIGRATION_COST_NS,
                periodic_at: None,
                continue_balancing: true,
                busy: false,
                need_decay: false,
                max_cost_ns: 0,
                newidle_at: None,
                newidle_cost_ns: 0,
                newidle_stopped: false,
            };
            cpus
        ];
        let tick_ns = ctx.config.tick_ns;
        let hz = (1_000_000_000 / tick_ns).max(1);
        let factor = 1 + u64::from((cpus.clamp(1, 8) as u32).ilog2());
        Self {
            sd,
            cpu,
            recent_used_cpu: Vec::new(),
            tick_ns,
            max_interval_ns: (hz * cpus as u64 / 10).max(1) * tick_ns,
            slice_ns: o.base_slice_us * 1000 * factor,
            nr_migrate: o.nr_migrate,
            wake: ctx.config.assumptions.wake,
        }
    }

    /// NUMA balancing's verdict on moving `pid` from `src` to `dst` at `level`
    /// (`migrate_degrades_locality`): 1 degrades, 0 improves, −1 no opinion (then `task_hot`
    /// decides). Without NUMA balancing (issue 17 §3) a task has no faults: −1.
    pub fn migrate_degrades_locality(
        &self,
        _v: &View<'_>,
        _pid: Pid,
        _src: CpuId,
        _dst: CpuId,
        _level: usize,
    ) -> i32 {
        -1
    }

    /// `p->numa_preferred_nid`: none without NUMA balancing.
    pub fn preferred_node(&self, _v: &View<'_>, _pid: Pid) -> Option<usize> {
        None
    }

    /// `get_sd_balance_interval`, in ns.
    fn interval_ns(&self, cpu: CpuId, li: usize, level: &Level, busy: bool) -> u64 {
        let mut ms = self.sd[cpu][li].balance_interval_ms;
        if busy {
            ms *= u64::from(level.params.busy_factor);
        }
        let mut jiffies = (ms * 1_000_000).div_ceil(self.tick_ns);
        if busy {
            jiffies = jiffies.saturating_sub(1);
        }
        (jiffies * self.tick_ns).clamp(self.tick_ns, self.max_interval_ns)
    }

    /// `update_newidle_cost`: a new maximum, or the decay once a second; whether it decayed.
    fn update_newidle_cost(&mut self, cpu: CpuId, li: usize, now: u64, cost: u64) -> bool {
        let st = &mut self.sd[cpu][li];
        if cost > st.max_newidle_lb_cost_ns {
            st.max_newidle_lb_cost_ns = cost;
            st.last_decay_max_lb_cost_ns = now;
        } else if now > st.last_decay_max_lb_cost_ns + NEWIDLE_COST_DECAY_PERIOD_NS {
            st.max_newidle_lb_cost_ns = st.max_newidle_lb_cost_ns * 253 / 256;
            st.last_decay_max_lb_cost_ns = now;
            return true;
        }
        false
    }

    /// What the engine will charge for `a` (SPEC §4): the measured cost of a newly-idle pass.
    fn cost_of(v: &View<'_>, a: &Attempt) -> u64 {
        let c = v.config;
        c.cost_per_rq_ns * u64::from(a.rqs_examined + a.locks)
            + c.cost_per_task_ns * u64::from(a.tasks_examined)
            + c.cost_per_evaluation_ns * u64::from(a.evaluations)
            + c.cost_per_migration_ns * a.moves.len() as u64
    }

    /// `update_sg_lb_stats` for `group` (the balancing CPU's view of its CPUs).
    fn sg_stats(v: &View<'_>, span: &crate::cpuset::CpuSet, imbalance_pct: u64) -> SgStats {
        let mut s = SgStats::default();
        for c in span.iter() {
            let pelt = v.cpu_pelt(c);
            s.group_load += pelt.load_avg.round() as u64;
            s.group_util += (pelt.util_avg.round() as u64).min(SCHED_CAPACITY_SCALE);
            s.group_runnable += pelt.runnable_avg.round() as u64;
            let nr = v.nr_running(c) as u64;
            s.sum_nr_running += nr;
            if nr == 0 {
                s.idle_cpus += 1;
            }
            s.group_capacity += SCHED_CAPACITY_SCALE;
            s.group_weight += 1;
        }
        s.group_type = group_classify(imbalance_pct, &s);
        if s.group_type == GroupType::Overloaded {
            s.avg_load = s.group_load * SCHED_CAPACITY_SCALE / s.group_capacity;
        }
        s
    }

    /// `sched_balance_find_src_group`: the busiest group's index, the migration type and the
    /// imbalance, or `None` when balanced. Adds the runqueues it read to `a`.
    fn find_src_group(
        &self,
        v: &View<'_>,
        cpu: CpuId,
        li: usize,
        idle: IdleType,
        a: &mut Attempt,
    ) -> Option<(usize, MigrationType, i64)> {
        let level = &v.domains.cpus[cpu][li];
        let st = &self.sd[cpu][li];
        let pct = u64::from(level.params.imbalance_pct);
        let (mut local, mut busiest) = (SgStats::default(), None::<(usize, SgStats)>);
        let (mut total_load, mut total_capacity) = (0, 0);
        for (gi, g) in level.groups.iter().enumerate() {
            let s = Self::sg_stats(v, &g.span, pct);
            a.rqs_examined += g.weight as u32;
            total_load += s.group_load;
            total_capacity += s.group_capacity;
            if g.local {
                local = s;
            } else if pick_busiest(busiest.as_ref().map(|b| &b.1), &s) {
                busiest = Some((gi, s));
            }
        }
        let (bi, b) = busiest?;
        if local.group_type > b.group_type {
            return None;
        }
        if local.group_type == GroupType::Overloaded {
            let sd_avg = total_load * SCHED_CAPACITY_SCALE / total_capacity.max(1);
            if local.avg_load >= b.avg_load
                || local.avg_load >= sd_avg
                || 100 * b.avg_load <= pct * local.avg_load
            {
                return None;
            }
        }
        let is_idle = idle != IdleType::NotIdle;
        let forced = st.prefer_sibling
            && local.group_type == GroupType::HasSpare
            && sibling_imbalance(is_idle, &b, &local) > 1;
        if !forced && b.group_type != GroupType::Overloaded {
            if !is_idle {
                return None;
            }
            if b.group_weight > 1 && local.idle_cpus <= b.idle_cpus + 1 {
                return None;
            }
            if b.sum_nr_running == 1 {
                return None;
            }
        }
        let env = ImbalanceEnv {
            idle,
            llc: st.llc,
            numa: st.numa,
            imb_numa_nr: st.imb_numa_nr,
            prefer_sibling: st.prefer_sibling,
        };
        let (mt, imbalance) = calculate_imbalance(&env, &mut local, &b, total_load, total_capacity);
        (imbalance > 0).then_some((bi, mt, imbalance))
    }

    /// `sched_balance_find_src_rq`.
    fn find_src_rq(
        v: &View<'_>,
        level: &Level,
        group: usize,
        mt: MigrationType,
        imbalance: i64,
    ) -> Option<CpuId> {
        let mut busiest = None;
        let (mut busiest_load, mut busiest_util, mut busiest_nr) = (0u64, 0u64, 0usize);
        for c in level.groups[group].span.iter() {
            let nr = v.nr_running(c);
            if nr == 0 {
                continue;
            }
            match mt {
                MigrationType::Load => {
                    let load = v.cpu_pelt(c).load_avg.round() as u64;
                    // One task heavier than the imbalance stays (capacities are never reduced).
                    if nr == 1 && load as i64 > imbalance {
                        continue;
                    }
                    if load > busiest_load {
                        busiest_load = load;
                        busiest = Some(c);
                    }
                }
                MigrationType::Util => {
                    let util = v.cpu_pelt(c).util_avg.round() as u64;
                    if nr > 1 && busiest_util < util {
                        busiest_util = util;
                        busiest = Some(c);
                    }
                }
                MigrationType::Task | MigrationType::Misfit => {
                    if busiest_nr < nr {
                        busiest_nr = nr;
                        busiest = Some(c);
                    }
                }
            }
        }
        busiest
    }

    /// `task_hot`: stopped running less than the migration cost ago (never-run tasks are cold:
    /// `exec_start` 0).
    fn task_hot(&self, v: &View<'_>, pid: Pid, cpu: CpuId, li: usize) -> bool {
        let hot_ns = self.sd[cpu][li].cache_hot_ns;
        v.proc(pid)
            .last_ran_ns
            .is_some_and(|t| v.now.saturating_sub(t) < hot_ns)
    }

    /// `can_migrate_task` for a queued (not running) task.
    fn can_migrate(&self, v: &View<'_>, pid: Pid, src: CpuId, dst: CpuId, li: usize) -> bool {
        let degrades = self.migrate_degrades_locality(v, pid, src, dst, li);
        let hot = if degrades == -1 {
            i32::from(self.task_hot(v, pid, dst, li))
        } else {
            degrades
        };
        let st = &self.sd[dst][li];
        let p = &v.domains.cpus[dst][li].params;
        hot <= 0 || st.nr_balance_failed > p.cache_nice_tries
    }

    /// `detach_tasks`: the moves of one pass from `src` to `dst`.
    #[allow(clippy::too_many_arguments)]
    fn detach_tasks(
        &self,
        v: &View<'_>,
        dst: CpuId,
        src: CpuId,
        li: usize,
        idle: IdleType,
        mt: MigrationType,
        mut imbalance: i64,
        a: &mut Attempt,
    ) -> usize {
        let failed = self.sd[dst][li].nr_balance_failed;
        let loop_max = self.nr_migrate.min(v.nr_running(src));
        let kind = if idle == IdleType::NotIdle {
            MigrationKind::Pull
        } else {
            MigrationKind::Idle
        };
        let mut src_nr = v.nr_running(src);
        let mut detached = 0;
        // The tail of cfs_tasks is the least recently run: the front of the run queue, then
        // the rest in order, the running task (the list's head) last.
        let tasks = v
            .queued(src)
            .map(Some)
            .chain([v.current(src).map(|_| None)].into_iter().flatten());
        for (looked, task) in tasks.enumerate() {
            if idle != IdleType::NotIdle && src_nr <= 1 {
                break;
            }
            if looked + 1 > loop_max {
                break;
            }
            a.tasks_examined += 1;
            let Some(pid) = task else {
                continue; // the running task never moves (task_on_cpu)
            };
            if !self.can_migrate(v, pid, src, dst, li) {
                continue;
            }
            let shr = |x: u64| if failed >= 64 { 0 } else { x >> failed };
            match mt {
                MigrationType::Load => {
                    let load = (v.task_pelt(pid).load_avg.round() as u64).max(1);
                    if shr(load) as i64 > imbalance {
                        continue;
                    }
                    imbalance -= load as i64;
                }
                MigrationType::Util => {
                    let util = v.task_pelt(pid).util_avg.round() as u64;
                    if shr(util) as i64 > imbalance {
                        continue;
                    }
                    imbalance -= util as i64;
                }
                MigrationType::Task | MigrationType::Misfit => imbalance -= 1,
            }
            a.moves.push(Move {
                pid,
                from: src,
                to: dst,
                kind,
            });
            detached += 1;
            src_nr -= 1;
            // Preemptible kernels (CONFIG_PREEMPTION) stop newly-idle balancing at one task.
            if idle == IdleType::NewlyIdle || imbalance <= 0 {
                break;
            }
        }
        detached
    }

    /// `should_we_balance` for a periodic pass: this CPU is the first idle CPU of the local
    /// group's balance mask, or its first CPU when none is idle.
    fn should_we_balance(v: &View<'_>, cpu: CpuId, level: &Level) -> bool {
        let mask = &level.groups[0].balance_mask;
        match mask.iter().find(|&c| v.idle(c)) {
            Some(c) => c == cpu,
            None => mask.iter().next() == Some(cpu),
        }
    }

    /// `sched_balance_rq`: one attempt of `cpu` at level `li`; whether it moved tasks.
    fn balance_rq(&mut self, v: &View<'_>, cpu: CpuId, li: usize, idle: IdleType) -> Attempt {
        let level = &v.domains.cpus[cpu][li];
        let p = &level.params;
        let mut a = Attempt::default();
        let swb = if idle == IdleType::NewlyIdle {
            v.idle(cpu)
        } else {
            Self::should_we_balance(v, cpu, level)
        };
        let found = if swb {
            self.find_src_group(v, cpu, li, idle, &mut a)
                .and_then(|(g, mt, imb)| {
                    a.rqs_examined += level.groups[g].weight as u32;
                    Self::find_src_rq(v, level, g, mt, imb).map(|b| (b, mt, imb))
                })
        } else {
            self.cpu[cpu].continue_balancing = false;
            None
        };
        let Some((busiest, mt, imbalance)) = found else {
            // out_balanced
            let st = &mut self.sd[cpu][li];
            st.nr_balance_failed = 0;
            if idle != IdleType::NewlyIdle && st.balance_interval_ms < p.max_interval_ms {
                st.balance_interval_ms *= 2;
            }
            return a;
        };
        let mut moved = 0;
        if v.nr_running(busiest) > 1 {
            a.locks = 1;
            moved = self.detach_tasks(v, cpu, busiest, li, idle, mt, imbalance, &mut a);
        }
        let st = &mut self.sd[cpu][li];
        if moved == 0 {
            if idle != IdleType::NewlyIdle {
                st.nr_balance_failed += 1;
            }
            // need_active_balance: only the migrate_task case arises (equal capacities).
            if mt == MigrationType::Task && st.nr_balance_failed > p.cache_nice_tries + 2 {
                a.active_from = Some(busiest);
            }
        } else {
            st.nr_balance_failed = 0;
        }
        // Unbalanced: the interval back to its minimum (also when active balancing starts:
        // need_active_balance still holds then).
        st.balance_interval_ms = p.min_interval_ms.max(1);
        a
    }

    /// `sched_balance_find_dst_group`: the idlest group of `level` for `pid`, or `None` to
    /// stay local.
    fn find_dst_group(&self, v: &View<'_>, cpu: CpuId, li: usize, pid: Pid) -> Option<usize> {
        let level = &v.domains.cpus[cpu][li];
        let st = &self.sd[cpu][li];
        let pct = u64::from(level.params.imbalance_pct);
        let mut local = None;
        let mut idlest: Option<(usize, SgStats)> = None;
        for (gi, g) in level.groups.iter().enumerate() {
            let s = Self::wakeup_stats(v, &g.span, pct, pid);
            if g.local {
                local = Some(s);
            } else if idlest.as_ref().is_none_or(|(_, i)| pick_idlest(i, &s)) {
                idlest = Some((gi, s));
            }
        }
        let (ii, idl) = idlest?;
        let Some(loc) = local else {
            return Some(ii);
        };
        if loc.group_type != idl.group_type {
            return (loc.group_type > idl.group_type).then_some(ii);
        }
        match loc.group_type {
            GroupType::Overloaded | GroupType::FullyBusy => {
                let imb = SCHED_CAPACITY_SCALE * (pct - 100) / 100;
                if st.numa && idl.avg_load + imb >= loc.avg_load {
                    return None;
                }
                if idl.avg_load >= loc.avg_load + imb || 100 * loc.avg_load <= pct * idl.avg_load {
                    return None;
                }
            }
            GroupType::HasSpare => {
                if st.numa {
                    let preferred = self.preferred_node(v, pid);
                    if preferred == Some(v.machine.cpu_node(cpu)) {
                        return None;
                    }
                    let first = level.groups[ii]
                        .span
                        .iter()
                        .next()
                        .expect("non-empty group");
                    if preferred.is_some() && preferred == Some(v.machine.cpu_node(first)) {
                        return Some(ii);
                    }
                    let imb = (loc.idle_cpus as i64 - idl.idle_cpus as i64).abs();
                    if adjust_numa_imbalance(imb, loc.sum_nr_running as i64 + 1, st.imb_numa_nr)
                        == 0
                    {
                        return None;
                    }
                }
                if loc.idle_cpus >= idl.idle_cpus {
                    return None;
                }
            }
            _ => return None,
        }
        Some(ii)
    }

    /// `update_sg_wakeup_stats`: a group's statistics without `pid`'s own contribution.
    fn wakeup_stats(v: &View<'_>, span: &crate::cpuset::CpuSet, pct: u64, pid: Pid) -> SgStats {
        let mut s = SgStats::default();
        let own = v.pelt_cpu(pid);
        let tp = v.task_pelt(pid);
        for c in span.iter() {
            let mut pelt = v.cpu_pelt(c);
            if own == Some(c) {
                pelt.load_avg = (pelt.load_avg - tp.load_avg).max(0.0);
                pelt.util_avg = (pelt.util_avg - tp.util_avg).max(0.0);
                pelt.runnable_avg = (pelt.runnable_avg - tp.runnable_avg).max(0.0);
            }
            s.group_load += pelt.load_avg.round() as u64;
            s.group_util += (pelt.util_avg.round() as u64).min(SCHED_CAPACITY_SCALE);
            s.group_runnable += pelt.runnable_avg.round() as u64;
            let nr = v.nr_running(c) as u64;
            s.sum_nr_running += nr;
            if nr == 0 {
                s.idle_cpus += 1;
            }
            s.group_capacity += SCHED_CAPACITY_SCALE;
            s.group_weight += 1;
        }
        s.group_type = group_classify(pct, &s);
        if matches!(s.group_type, GroupType::FullyBusy | GroupType::Overloaded) {
            s.avg_load = s.group_load * SCHED_CAPACITY_SCALE / s.group_capacity;
        }
        s
    }

    /// `sched_balance_find_dst_group_cpu`: an idle CPU (the most recently idled, the first on
    /// ties), else the least loaded (this CPU unless another is lighter).
    fn find_dst_group_cpu(&self, v: &View<'_>, span: &crate::cpuset::CpuSet, this: CpuId) -> CpuId {
        if span.len() == 1 {
            return span.iter().next().expect("one CPU");
        }
        let mut shallowest: Option<(CpuId, u64)> = None;
        let (mut least, mut min_load) = (this, u64::MAX);
        for c in span.iter() {
            if v.idle(c) {
                let stamp = self.cpu[c].last_idle_stamp_ns;
                if shallowest.is_none_or(|(_, s)| stamp > s) {
                    shallowest = Some((c, stamp));
                }
            } else if shallowest.is_none() {
                let load = v.cpu_pelt(c).load_avg.round() as u64;
                if load < min_load {
                    min_load = load;
                    least = c;
                }
            }
        }
        shallowest.map_or(least, |(c, _)| c)
    }

    /// `sched_balance_find_dst_cpu` from the highest contiguous level of `cpu` with `flag`.
    fn find_dst_cpu(&self, v: &View<'_>, mut cpu: CpuId, pid: Pid, flag: u32) -> CpuId {
        let levels = |c: CpuId| &v.domains.cpus[c];
        let top = levels(cpu)
            .iter()
            .take_while(|l| l.params.flags & flag != 0)
            .count();
        let mut sd = top.checked_sub(1);
        let mut new_cpu = cpu;
        while let Some(li) = sd {
            let level = &levels(cpu)[li];
            let child = li.checked_sub(1);
            if level.params.flags & flag == 0 {
                sd = child;
                continue;
            }
            let Some(g) = self.find_dst_group(v, cpu, li, pid) else {
                sd = child;
                continue;
            };
            new_cpu = self.find_dst_group_cpu(v, &level.groups[g].span, cpu);
            if new_cpu == cpu {
                sd = child;
                continue;
            }
            cpu = new_cpu;
            let weight = level.weight;
            sd = None;
            for (l2, tmp) in levels(cpu).iter().enumerate() {
                if weight <= tmp.weight {
                    break;
                }
                if tmp.params.flags & flag != 0 {
                    sd = Some(l2);
                }
            }
        }
        new_cpu
    }

    /// `select_idle_sibling(p, prev, target)` with LLC = the target's node.
    fn select_idle_sibling(&mut self, v: &View<'_>, pid: Pid, prev: CpuId, target: CpuId) -> CpuId {
        if self.recent_used_cpu.len() <= pid {
            self.recent_used_cpu.resize(pid + 1, None);
        }
        if v.idle(target) {
            self.recent_used_cpu[pid] = Some(prev);
            return target;
        }
        let node = v.machine.cpu_node(target);
        if prev != target && v.machine.cpu_node(prev) == node && v.idle(prev) {
            self.recent_used_cpu[pid] = Some(prev);
            return prev;
        }
        let recent = self.recent_used_cpu[pid].replace(prev);
        if let Some(r) = recent {
            if r != prev && r != target && v.machine.cpu_node(r) == node && v.idle(r) {
                return r;
            }
        }
        // select_idle_cpu: the LLC from target + 1, wrapping.
        let cpus = v.machine.node_cpus(node);
        let at = cpus.iter().position(|&c| c == target).unwrap_or(0);
        (1..cpus.len())
            .map(|k| cpus[(at + k) % cpus.len()])
            .find(|&c| v.idle(c))
            .unwrap_or(target)
    }

    /// `ttwu_do_activate`'s `avg_idle` update on the CPU a task wakes on.
    fn woke_on(&mut self, now: u64, cpu: CpuId) {
        let c = &mut self.cpu[cpu];
        if let Some(stamp) = c.idle_stamp_ns.take() {
            let delta = now.saturating_sub(stamp) as i64;
            let avg = c.avg_idle_ns as i64;
            let max = 2 * c.max_idle_balance_cost_ns;
            c.avg_idle_ns = ((avg + (delta - avg) / 8).max(0) as u64).min(max);
        }
    }

    /// Periodic balancing at one level (rule 1).
    fn periodic(&mut self, v: &View<'_>, cpu: CpuId, li: usize) -> Option<Attempt> {
        let levels = v.domains.cpus[cpu].len();
        if self.cpu[cpu].periodic_at != Some(v.now) {
            let c = &mut self.cpu[cpu];
            c.periodic_at = Some(v.now);
            c.continue_balancing = true;
            c.busy = !v.idle(cpu);
            c.need_decay = false;
            c.max_cost_ns = 0;
        }
        let decayed = self.update_newidle_cost(cpu, li, v.now, 0);
        let max_cost = self.sd[cpu][li].max_newidle_lb_cost_ns;
        let c = &mut self.cpu[cpu];
        c.need_decay |= decayed;
        c.max_cost_ns += max_cost;
        if li + 1 == levels && c.need_decay {
            c.max_idle_balance_cost_ns = MIGRATION_COST_NS.max(c.max_cost_ns);
        }
        let level = &v.domains.cpus[cpu][li];
        if !self.cpu[cpu].continue_balancing || !v.domains.load_balances(level) {
            return None;
        }
        let busy = self.cpu[cpu].busy;
        let interval = self.interval_ns(cpu, li, level, busy);
        if v.now < self.sd[cpu][li].last_balance_ns + interval {
            return None;
        }
        let idle = if busy {
            IdleType::NotIdle
        } else {
            IdleType::Idle
        };
        let a = self.balance_rq(v, cpu, li, idle);
        if !a.moves.is_empty() {
            self.cpu[cpu].busy = true;
        }
        self.sd[cpu][li].last_balance_ns = v.now;
        Some(a)
    }

    /// Newly-idle balancing at one level (rule 6).
    fn newidle(&mut self, v: &View<'_>, cpu: CpuId, li: usize) -> Option<Attempt> {
        if self.cpu[cpu].newidle_at != Some(v.now) {
            let lowest_cost = self.sd[cpu].first().map_or(0, |s| s.max_newidle_lb_cost_ns);
            let c = &mut self.cpu[cpu];
            c.newidle_at = Some(v.now);
            c.newidle_cost_ns = 0;
            c.idle_stamp_ns = Some(v.now);
            c.last_idle_stamp_ns = v.now;
            c.newidle_stopped = v.overloaded().is_empty() || c.avg_idle_ns < lowest_cost;
        }
        if self.cpu[cpu].newidle_stopped {
            return None;
        }
        let st = &self.sd[cpu][li];
        if self.cpu[cpu].avg_idle_ns < self.cpu[cpu].newidle_cost_ns + st.max_newidle_lb_cost_ns {
            self.cpu[cpu].newidle_stopped = true;
            return None;
        }
        let level = &v.domains.cpus[cpu][li];
        if level.params.flags & sd::BALANCE_NEWIDLE == 0 || !v.domains.load_balances(level) {
            return None;
        }
        let a = self.balance_rq(v, cpu, li, IdleType::NewlyIdle);
        let cost = Self::cost_of(v, &a);
        self.update_newidle_cost(cpu, li, v.now, cost);
        let c = &mut self.cpu[cpu];
        c.newidle_cost_ns += cost;
        c.max_idle_balance_cost_ns = c.max_idle_balance_cost_ns.max(c.newidle_cost_ns);
        if !a.moves.is_empty() {
            c.idle_stamp_ns = None;
            c.newidle_stopped = true;
        }
        Some(a)
    }
}

/// `update_pick_idlest`: whether `sg` is idler than the current idlest `idlest`.
fn pick_idlest(idlest: &SgStats, sg: &SgStats) -> bool {
    if sg.group_type != idlest.group_type {
        return sg.group_type < idlest.group_type;
    }
    match sg.group_type {
        GroupType::Overloaded | GroupType::FullyBusy => idlest.avg_load > sg.avg_load,
        GroupType::HasSpare => {
            idlest.idle_cpus < sg.idle_cpus
                || (idlest.idle_cpus == sg.idle_cpus && idlest.group_util > sg.group_util)
        }
        _ => false,
    }
}

impl Policy for Linux {
    fn name(&self) -> &'static str {
        "linux"
    }

    fn timeslice_ns(&self) -> Option<u64> {
        Some(self.slice_ns)
    }

    fn tracks_pelt(&self) -> bool {
        true
    }

    fn place_new(&mut self, view: &View<'_>, pid: Pid, spawn_cpu: CpuId) -> Option<CpuId> {
        Some(self.find_dst_cpu(view, spawn_cpu, pid, sd::BALANCE_FORK))
    }

    fn place_wakeup(&mut self, view: &View<'_>, pid: Pid, prev_cpu: CpuId) -> Option<CpuId> {
        let cpu = match self.wake {
            // The waker is the CPU the IO was issued from: wake_affine keeps prev_cpu.
            Wake::Previous => self.select_idle_sibling(view, pid, prev_cpu, prev_cpu),
            Wake::Idlest => self.find_dst_cpu(view, prev_cpu, pid, sd::BALANCE_FORK),
        };
        self.woke_on(view.now, cpu);
        Some(cpu)
    }

    fn next_periodic_ns(&self, view: &View<'_>, cpu: CpuId) -> Option<u64> {
        let busy = !view.idle(cpu);
        view.domains.cpus[cpu]
            .iter()
            .enumerate()
            .filter(|(_, l)| view.domains.load_balances(l))
            .map(|(li, l)| self.sd[cpu][li].last_balance_ns + self.interval_ns(cpu, li, l, busy))
            .min()
    }

    fn balance(
        &mut self,
        view: &View<'_>,
        cpu: CpuId,
        level: usize,
        kind: BalanceKind,
    ) -> Option<Attempt> {
        match kind {
            BalanceKind::Periodic => self.periodic(view, cpu, level),
            BalanceKind::NewIdle => self.newidle(view, cpu, level),
        }
    }

    fn active_balance(
        &mut self,
        view: &View<'_>,
        busiest: CpuId,
        target: CpuId,
    ) -> Option<Attempt> {
        if view.nr_running(busiest) <= 1 {
            return None;
        }
        let li = view.domains.cpus[target]
            .iter()
            .position(|l| l.span.contains(busiest))?;
        // detach_one_task with LBF_ACTIVE_LB: the first task from the tail, hot or not.
        let pid = view.queued(busiest).next()?;
        self.sd[target][li].nr_balance_failed = 0;
        Some(Attempt {
            locks: 1,
            tasks_examined: 1,
            moves: vec![Move {
                pid,
                from: busiest,
                to: target,
                kind: MigrationKind::Active,
            }],
            ..Attempt::default()
        })
    }
}
