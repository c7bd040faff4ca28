//! `linux`: the Linux 6.x CFS/EEVDF load balancer (`kernel/sched/fair.c` of 6.12.95 as Debian
//! builds it: HZ = 250, nohz, `NI_RANDOM`), over any domain builder (made for `linux` domains),
//! with PELT load tracking (`kernel/sched/pelt.c`).
//!
//! ```text
//!   per task   PELT load/runnable/util (engine, crate::load::Pelt; read through the View)
//!              recent_used_cpu (select_idle_sibling)
//!   per CPU    PELT sums of its attached tasks (engine) │ avg_idle, idle_stamp,
//!              max_idle_balance_cost, rq->next_balance (jiffies), rq->active_balance,
//!              sched_rnd_state (NI_RANDOM), the current balancing pass (policy)
//!   per CPU, per level (sched_domain)
//!              last_balance, balance_interval (min..max), nr_balance_failed,
//!              max_newidle_lb_cost, newidle_call/success/ratio │ derived once: NUMA?, LLC?,
//!              imb_numa_nr
//!   per group  SD_PREFER_SIBLING (its child domain's flags) │ sgc->imbalance
//!   machine    rd->overloaded (sticky), sched_balance_running (SD_SERIALIZE), nohz (nohz.rs)
//!   capacity   capacity_of(cpu) = 1024 × speed / the fastest speed (arch_scale_cpu_capacity,
//!              SCHED_CAPACITY_SCALE for the fastest); load weight 1024 per task (nice 0)
//!              SD_ASYM_CPUCAPACITY on levels whose span holds more than one capacity
//! ```
//!
//! Rules, each from the 6.12 function named (old names in brackets):
//! 1. `sched_balance_domains` [`rebalance_domains`]: time in jiffies (`HZ` 250, Debian's
//!    `CONFIG_HZ`: 4 ms); at a tick where `jiffies >= rq->next_balance`
//!    (`sched_balance_trigger`), every level whose `get_sd_balance_interval`
//!    (`msecs_to_jiffies(balance_interval)`, busy `msecs_to_jiffies(balance_interval ×
//!    busy_factor) − 1`, clamped to `[1, max_load_balance_interval]`) has passed since
//!    `last_balance` is balanced; going up stops when `should_we_balance` says another CPU of
//!    the local group balances for it; `rq->next_balance` becomes the earliest next time of the
//!    levels visited. `SD_SERIALIZE` (every NUMA level): `sched_balance_running` is taken
//!    before the due check and held for the pass's charged work; a CPU that finds it held
//!    skips the level. nohz (`nohz.rs`): an idle CPU stops its tick after its first tick in the
//!    idle loop; busy CPUs' ticks kick the idle load balancer (`nohz_balancer_kick`,
//!    `kick_ilb`), which balances every due tickless idle CPU on its behalf
//!    (`_nohz_idle_balance`); `linux:nohz=off` keeps every CPU's tick.
//! 2. `sched_balance_rq` [`load_balance`]: `should_we_balance` (newly idle: the CPU is empty;
//!    else the first idle CPU of the local group's balance mask, or its first CPU), then
//!    `sched_balance_find_src_group` [`find_busiest_group`]: per group `update_sg_lb_stats`
//!    (PELT load, util, runnable, nr_running, idle CPUs) and `group_classify` (has_spare <
//!    fully_busy < misfit < imbalanced (`sgc->imbalance`: pinned tasks kept the level below
//!    unbalanced) < overloaded), the busiest by `update_sd_pick_busiest`, the out-balanced
//!    tests (`prefer_sibling`: the busiest group's, from its child domain's flags), then
//!    `calculate_imbalance` (migration type load, util or task, with `sibling_imbalance` and
//!    `adjust_numa_imbalance` / `imb_numa_nr`). A pass at a CPU's top level recomputes the
//!    sticky `rd->overloaded` (`update_sd_lb_stats`).
//! 3. `sched_balance_find_src_rq` [`find_busiest_queue`]: by the migration type, the CPU with
//!    the most load (skipping one task heavier than the imbalance), util (two tasks or more) or
//!    tasks.
//! 4. `detach_tasks`: from the tail of `cfs_tasks` (least recently run first), at most
//!    `loop_max = min(nr_migrate 32, nr_running)` looked at; `can_migrate_task` (its affinity
//!    first: tasks pinned away set `LBF_DST_PINNED`, `LBF_SOME_PINNED`, `LBF_ALL_PINNED`, on
//!    which `sched_balance_rq` retries toward `new_dst_cpu` or drops the busiest CPU and redoes:
//!    docs/policies/linux.md, "Affinity"; never the running task;
//!    `migrate_degrades_locality`, else `task_hot`: stopped running less than
//!    `sysctl_sched_migration_cost` 0.5 ms ago; hot tasks move once `nr_balance_failed >
//!    cache_nice_tries`); load and util checked with `shr_bound(x, nr_balance_failed) >
//!    imbalance`; an idle puller never empties the source; newly idle stops after one task.
//!    With `select=thread-aware|memory-aware`, a pull between nodes takes the selector's pick
//!    among the tasks that pass those tests instead of the first (`select.rs`).
//! 5. Failure, active balance, back-off (end of `sched_balance_rq`): nothing moved →
//!    `nr_balance_failed++` (not newly idle); `need_active_balance` (migrate_task and more than
//!    `cache_nice_tries + 2` failures; not when the busiest CPU's running task may not run
//!    here: `out_one_pinned`) → unless the busiest CPU's `rq->active_balance` is set, set it
//!    and kick its stopper, which runs [`STOPPER_LATENCY_NS`] after the pass's work
//!    (`stop_one_cpu_nowait`: the kicking CPU goes on to its higher levels):
//!    `active_load_balance_cpu_stop` pushes one task that may run on the target, hot or not
//!    (the running one when it is alone), and a success resets the failures; moved → failures
//!    reset; unbalanced → interval back to min; balanced → interval doubles up to max, or up to
//!    `MAX_PINNED_INTERVAL` when every task was pinned (not for newly idle).
//! 6. `sched_balance_newidle` [`newidle_balance`]: skipped unless `rd->overloaded` (sticky: set
//!    whenever a runqueue reaches two tasks, stoppers included, and recomputed only by rule 2's
//!    top-level passes) and `avg_idle` ≥ the lowest level's `max_newidle_lb_cost`; levels with
//!    `SD_BALANCE_NEWIDLE` lowest first while `avg_idle ≥ cost so far + the level's max cost`,
//!    each cost measured (the engine's charge for the attempt, `update_newidle_cost`: a max
//!    decaying ×253/256 once `HZ` jiffies have passed), until one pulls; with `NI_RANDOM` a
//!    level runs only when a 1024-sided dice (`sched_rng`, `prandom.rs`) shows at most
//!    `1 + newidle_ratio`, the ratio following the level's successes (`update_newidle_stats`);
//!    the levels it visits move `rq->next_balance` earlier (`update_next_balance`).
//!    `avg_idle`: 1/8 EWMA of idle durations (from `idle_stamp` at newly idle to the next
//!    wake-up there, `ttwu_do_activate`), capped at 2 × `max_idle_balance_cost`.
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
//!    `sysctl_sched_base_slice` 0.70 ms × (1 + ilog2(min(CPUs, 8))) (`update_sysctl`), seen to
//!    have run out at the next tick (`HRTICK` off: `update_curr` at `sched_tick`).
//! 10. Capacity (docs/policies/linux.md, "CPU capacity"): `capacity_of` from the speeds,
//!     `SD_ASYM_CPUCAPACITY` levels (`asym_cpu_capacity_classify`, clearing the child's
//!     `SD_PREFER_SIBLING` in `sd_init`), `update_misfit_status` (`fits_capacity`), group
//!     capacity sums and `group_misfit_task` (`update_sg_lb_stats`, `group_classify`), the
//!     asymmetric clauses of `update_sd_pick_busiest`, `force_balance` and `migrate_misfit`
//!     in `sched_balance_find_src_group`/`calculate_imbalance`, the capacity rules of
//!     `sched_balance_find_src_rq`, `detach_tasks`' misfit case, `need_active_balance`'s
//!     misfit clause, misfit groups in fork placement (`update_sg_wakeup_stats`), and
//!     wake-ups by `asym_fits_cpu` and `select_idle_capacity`. On a machine of one speed all
//!     of it is inert.
//!
//! Files: this one (state, options, the `Policy` glue), `balancer.rs` (rules 1–6), `nohz.rs`
//! (rule 1's idle load balancer), `prandom.rs` (the kernel's `prandom`, rule 6's dice),
//! `placement.rs` (rules 7–8), `select.rs` (rule 4's selection between nodes), `numa.rs` (where automatic NUMA balancing plugs in:
//! `migrate_degrades_locality` and the preferred node; without it they answer "no opinion" (−1)
//! and "none", as the kernel does for a task with no NUMA faults). Every simplification is listed
//! in docs/policies/linux.md.

mod balancer;
mod nohz;
pub mod numa;
mod placement;
pub mod prandom;
pub mod select;

pub use select::{Select, SelectStats};

pub use nohz::IPI_LATENCY_NS;

pub use balancer::{
    adjust_numa_imbalance, calculate_imbalance, group_classify, group_has_capacity,
    group_is_overloaded, pick_busiest, sibling_imbalance, update_sd_pick_busiest, AsymPick,
    GroupType, IdleType, ImbalanceEnv, MigrationType, SgStats,
};

use crate::assumptions::Wake;
use crate::domains::{sd, Builder, Level, LevelParams};
use crate::error::InputError;
use crate::interface::{Attempt, BalanceKind, MigrationKind, Move, Pid, Policy};
use crate::interface::{PolicyContext, View};
use crate::machine::CpuId;

/// `SCHED_CAPACITY_SCALE`: the capacity of the machine's fastest CPUs (every CPU's on a
/// machine of one speed).
pub const SCHED_CAPACITY_SCALE: u64 = 1024;

/// `fits_capacity`: `util` fits a CPU of capacity `cap` with 20 % headroom
/// (`util * 1280 < cap * 1024`).
pub fn fits_capacity(util: u64, cap: u64) -> bool {
    util * 1280 < cap * 1024
}

/// A PELT value as the kernel's integer: `x.round() as u64` (nearest, halves away from zero;
/// negative and NaN give 0, beyond `u64::MAX` saturates), without a call into libm's `round`
/// (the balancer rounds every CPU's three averages at each group it reads). `x - t` is exact:
/// `t` is `x`'s integer part, within a factor of two of it or 0.
pub fn round_u64(x: f64) -> u64 {
    let t = x as u64;
    if x - t as f64 >= 0.5 {
        t.saturating_add(1)
    } else {
        t
    }
}

/// `capacity_greater`: `cap1` is more than about 5 % above `cap2` (`cap1 * 1024 > cap2 * 1078`).
pub fn capacity_greater(cap1: u64, cap2: u64) -> bool {
    cap1 * 1024 > cap2 * 1078
}

/// `arch_scale_cpu_capacity` as `topology_normalize_cpu_scale` sets it: each CPU's speed
/// scaled so that the fastest is [`SCHED_CAPACITY_SCALE`] (integer, rounded down).
pub fn cpu_capacities(m: &crate::machine::Machine) -> Vec<u64> {
    let max = (0..m.cpus()).map(|c| m.speed(c)).fold(0.0_f64, f64::max);
    (0..m.cpus())
        .map(|c| {
            if m.speed(c) >= max {
                SCHED_CAPACITY_SCALE
            } else {
                ((SCHED_CAPACITY_SCALE as f64 * m.speed(c) / max) as u64).max(1)
            }
        })
        .collect()
}
/// `sysctl_sched_nr_migrate` (`SCHED_NR_MIGRATE_BREAK`, `kernel/sched/core.c`): tasks looked at
/// per balancing pass.
pub const NR_MIGRATE: usize = 32;
/// `sysctl_sched_migration_cost` (`fair.c`): a task that ran this recently is cache-hot; also
/// the floor of `max_idle_balance_cost` and half of `avg_idle`'s start value.
pub const MIGRATION_COST_NS: u64 = 500_000;
/// `NUMA_IMBALANCE_MIN` (`adjust_numa_imbalance`): an imbalance of this many tasks or fewer is
/// allowed between nodes while the destination is lightly loaded.
pub const NUMA_IMBALANCE_MIN: i64 = 2;
/// `normalized_sysctl_sched_base_slice` (`fair.c`), before `update_sysctl`'s CPU-count factor:
/// 0.70 ms in Debian's 6.12 from 6.12.32 on ("sched: Reduce the default slice to avoid tasks
/// getting an extra tick"; 0.75 ms before).
pub const BASE_SLICE_NS: u64 = 700_000;
/// How long after `sched_balance_rq` kicks it the busiest CPU's stopper runs
/// `active_load_balance_cpu_stop` (ns): `stop_one_cpu_nowait` queues the work and wakes the
/// stopper thread on the busiest CPU (`cpu_stop_queue_work` → `wake_up_q` → a remote
/// `try_to_wake_up`: an IPI), which preempts the running task at once (the stop class,
/// `CONFIG_PREEMPTION`). Not a kernel constant: an inference from the mechanism — an IPI between
/// cores takes about 1–2 µs on current x86, the wake-up and switch to the stopper a few µs — of
/// the same standing as the engine's balancing costs (5 µs a migration).
pub const STOPPER_LATENCY_NS: u64 = 5_000;
/// `CONFIG_HZ`: Debian's kernels are built with `CONFIG_HZ_250` (`kernel/Kconfig.hz`'s default
/// choice, and Debian's amd64 config), a jiffy of 4 ms.
pub const HZ: u64 = 250;
/// The values `kernel/Kconfig.hz` offers for `CONFIG_HZ`.
pub const HZ_CHOICES: [u64; 4] = [100, 250, 300, 1000];

/// `TICK_NSEC` (`include/vdso/jiffies.h`): a jiffy in ns, `(NSEC_PER_SEC + HZ / 2) / HZ`.
pub fn tick_nsec(hz: u64) -> u64 {
    (1_000_000_000 + hz / 2) / hz
}

/// `msecs_to_jiffies` (`include/linux/jiffies.h`): milliseconds rounded up to whole jiffies.
pub fn msecs_to_jiffies(ms: u64, hz: u64) -> u64 {
    (ms * hz).div_ceil(1000)
}

/// Options of the `linux` policy (`linux:key=value,...`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// EEVDF base slice before the CPU-count factor, µs (`sysctl_sched_base_slice`, 700).
    pub base_slice_us: u64,
    /// Tasks looked at per pass (`sysctl_sched_nr_migrate`, 32).
    pub nr_migrate: usize,
    /// `CONFIG_HZ`: the scheduler tick's frequency (250: a jiffy of 4 ms).
    pub hz: u64,
    /// The `NI_RANDOM` scheduler feature (`kernel/sched/features.h`, 6.12.69 on; on by
    /// default): newly-idle balancing runs at each level with the probability of its recent
    /// successes.
    pub ni_random: bool,
    /// Idle CPUs stop their tick and are balanced by the idle load balancer
    /// (`CONFIG_NO_HZ_COMMON`); `false` is the kernel booted with `nohz=off`: every idle CPU
    /// keeps its tick and balances itself.
    pub nohz: bool,
    /// Automatic NUMA balancing (`kernel.numa_balancing`); `None`: the kernel's default, on
    /// when the machine has more than one node (`check_numabalancing_enable`, mm/mempolicy.c,
    /// with `CONFIG_NUMA_BALANCING_DEFAULT_ENABLED`, as distribution kernels build it).
    pub numa_balancing: Option<bool>,
    /// Which task a pull between nodes takes in `detach_tasks` (`select.rs`): the kernel's
    /// order (default), or the thread-aware or memory-aware selection.
    pub select: Select,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            base_slice_us: BASE_SLICE_NS / 1000,
            nr_migrate: NR_MIGRATE,
            hz: HZ,
            ni_random: true,
            nohz: true,
            numa_balancing: None,
            select: Select::Kernel,
        }
    }
}

impl Options {
    /// Parses `slice-us=N` (µs, ≥ 1), `nr-migrate=N` (≥ 1), `hz=N` (100, 250, 300 or 1000:
    /// `CONFIG_HZ`'s choices), `nohz=on|off` (the boot parameter's name), `ni_random=on|off`
    /// (the scheduler feature's name), `numa_balancing=on|off` (the sysctl's name) and
    /// `select=kernel|thread-aware|memory-aware` (`select.rs`).
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
            let on_off = || {
                super::option_choice(origin, "linux", key, value, &[("on", true), ("off", false)])
            };
            match key {
                "slice-us" => o.base_slice_us = positive()?,
                "nr-migrate" => o.nr_migrate = positive()? as usize,
                "hz" => {
                    o.hz = value
                        .parse::<u64>()
                        .ok()
                        .filter(|x| HZ_CHOICES.contains(x))
                        .ok_or_else(|| {
                            InputError::new(
                                origin,
                                format!(
                                    "linux option 'hz' must be one of 100, 250, 300 or 1000 \
                                     (CONFIG_HZ's choices), not '{value}'"
                                ),
                            )
                        })?;
                }
                "numa_balancing" => o.numa_balancing = Some(on_off()?),
                "nohz" => o.nohz = on_off()?,
                "ni_random" => o.ni_random = on_off()?,
                "select" => o.select = Select::parse(origin, value)?,
                _ => {
                    return Err(InputError::new(
                        origin,
                        format!(
                            "unknown linux option '{key}'; choose slice-us, nr-migrate, hz, nohz, \
                             ni_random, numa_balancing or select"
                        ),
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
pub(super) struct SdState {
    /// `sd->last_balance`, in jiffies.
    last_balance: u64,
    balance_interval_ms: u64,
    /// `get_sd_balance_interval` of `balance_interval_ms`, idle and busy, in jiffies: computed
    /// when the interval changes, not at every tick that asks whether the level is due.
    interval: [u64; 2],
    nr_balance_failed: u32,
    max_newidle_lb_cost_ns: u64,
    /// `sd->last_decay_max_lb_cost`, in jiffies.
    last_decay_max_lb_cost: u64,
    /// `NI_RANDOM`'s `newidle_call`, `newidle_success` and `newidle_ratio` (`sd_init`: 512,
    /// 256, 512: a pass runs with probability `(newidle_ratio + 2) / 1024`).
    newidle_call: u32,
    newidle_success: u32,
    newidle_ratio: u32,
    /// `SD_NUMA`: the level spans more than the CPU's node.
    numa: bool,
    /// `SD_SHARE_LLC`: the level is inside the CPU's node (one LLC per node).
    llc: bool,
    imb_numa_nr: i64,
    /// `SD_ASYM_CPUCAPACITY`: the level's span holds CPUs of more than one capacity
    /// (`asym_cpu_capacity_classify`).
    asym: bool,
    cache_hot_ns: u64,
}

impl SdState {
    /// The level's balancing interval is now `ms` (`sd->balance_interval`); `max` is
    /// `max_load_balance_interval` (jiffies).
    pub(super) fn set_interval(&mut self, ms: u64, p: &LevelParams, hz: u64, max: u64) {
        self.balance_interval_ms = ms;
        // get_sd_balance_interval: busy × busy_factor, msecs_to_jiffies (rounded up), busy one
        // jiffy less ("interval -= 1"), clamped to [1, max_load_balance_interval].
        let jiffies = |busy: bool| {
            let ms = if busy {
                ms * u64::from(p.busy_factor)
            } else {
                ms
            };
            let mut j = msecs_to_jiffies(ms, hz);
            if busy {
                j = j.saturating_sub(1);
            }
            j.clamp(1, max)
        };
        self.interval = [jiffies(false), jiffies(true)];
    }
}

/// Per CPU.
#[derive(Debug, Clone)]
pub(super) struct CpuSt {
    avg_idle_ns: u64,
    idle_stamp_ns: Option<u64>,
    /// The last `idle_stamp` set (what `sched_balance_find_dst_group_cpu` compares).
    last_idle_stamp_ns: u64,
    max_idle_balance_cost_ns: u64,
    /// `rq->next_balance`, in jiffies: when the CPU's tick next raises the balancing softirq
    /// (`sched_balance_trigger`); set by `sched_balance_domains` and moved earlier by
    /// `sched_balance_newidle`.
    next_balance: u64,
    /// The periodic pass in progress (`sched_balance_domains`): its instant, whether the
    /// softirq runs at all, whether its loop has ended, `continue_balancing`, whether busy,
    /// `need_decay` (the last level's), the sum of the levels' newidle costs seen (for the
    /// rq-wide decay) and the `next_balance` it computes (`update_next_balance`: whether any
    /// level set it).
    periodic_at: Option<u64>,
    softirq: bool,
    ended: bool,
    continue_balancing: bool,
    busy: bool,
    need_decay: bool,
    max_cost_ns: u64,
    pass_next: u64,
    update_next: bool,
    /// The newly-idle pass in progress: its instant, cost so far, and whether it stopped.
    newidle_at: Option<u64>,
    newidle_cost_ns: u64,
    newidle_stopped: bool,
    /// The idle load balancer that is about to balance this CPU on its behalf
    /// (`_nohz_idle_balance`), and whether the pass in progress is the CPU's own tick's.
    visit: Option<CpuId>,
    own_tick: bool,
    /// The CPU doing the pass in progress (this one, or the ILB for it), and the pass's
    /// virtual clock: its start plus the charged work of its levels so far (ns).
    exec: CpuId,
    cursor_ns: u64,
}

/// The 6.x balancer.
pub struct Linux {
    sd: Vec<Vec<SdState>>,
    cpu: Vec<CpuSt>,
    /// `p->recent_used_cpu`, by pid (grown on demand).
    recent_used_cpu: Vec<Option<CpuId>>,
    /// `HZ` and `TICK_NSEC` (the jiffy, ns).
    hz: u64,
    jiffy_ns: u64,
    /// `max_load_balance_interval` (`update_max_interval`: HZ × CPUs / 10), in jiffies.
    max_interval: u64,
    slice_ns: u64,
    nr_migrate: usize,
    wake: Wake,
    /// Automatic NUMA balancing, when on (`numa.rs`).
    numa: Option<numa::NumaBalancing>,
    /// `capacity_of` per CPU (no RT/IRQ pressure: `arch_scale_cpu_capacity`).
    cap: Vec<u64>,
    /// `sched_asym_cpucap_active`: CPUs of more than one capacity.
    asym: bool,
    /// `sd_asym_cpucapacity` per CPU: the span of its lowest level that sees every capacity of
    /// the machine (`SD_ASYM_CPUCAPACITY_FULL`), on an asymmetric machine.
    sd_asym_cpucapacity: Vec<Option<std::sync::Arc<crate::cpuset::CpuSet>>>,
    /// `sgc->imbalance` per group (by `Group::id`): pinned tasks kept a balancing of the
    /// level below from reaching balance (set and cleared by `sched_balance_rq`).
    sgc_imbalance: Vec<bool>,
    /// `SD_PREFER_SIBLING` in each group's flags (by `Group::id`): its child domain's.
    group_prefer_sibling: Vec<bool>,
    /// `rq->active_balance` per CPU: a stopper kicked by `sched_balance_rq` has not run yet
    /// (`push_cpu` is the engine's `target`).
    active_balance: Vec<bool>,
    /// nohz idle balancing (`nohz.rs`).
    nohz: nohz::Nohz,
    /// `sched_balance_running` (`SD_SERIALIZE`): the passes at NUMA levels hold it over their
    /// charged work; until when, and by which CPU.
    serialize_until_ns: u64,
    serialize_holder: CpuId,
    /// `sched_rnd_state` per CPU (`NI_RANDOM`, when on), seeded on first use.
    ni_random: bool,
    rng: Vec<prandom::Prandom>,
    /// `rd->overloaded` as the last root-level pass (`update_sd_lb_stats` at a domain with no
    /// parent) or a stopper's enqueue set it, and the engine's count of runqueues going from
    /// fewer than two tasks to two or more (`View::overload_events`) at that pass: any
    /// later one set the flag too (`add_nr_running`).
    rd_overloaded: bool,
    rd_overload_events: u64,
    /// Which task a pull between nodes takes, and what the selection did (`select.rs`).
    select: Select,
    select_stats: SelectStats,
}
impl Linux {
    /// Per-level state for every CPU of the context's domains.
    pub fn new(ctx: &PolicyContext<'_>, o: Options) -> Self {
        let m = ctx.machine;
        let modern = ctx.domains.builder == Builder::Linux;
        let cap = cpu_capacities(m);
        let asym_span = |l: &Level| {
            let mut it = l.span.iter().map(|c| cap[c]);
            let first = it.next();
            it.any(|c| Some(c) != first)
        };
        let hz = o.hz;
        // max_load_balance_interval = HZ * num_online_cpus() / 10.
        let max_interval = (hz * m.cpus() as u64 / 10).max(1);
        let sd: Vec<Vec<SdState>> = ctx
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
                    .map(|l| {
                        let numa = !in_node(l);
                        let asym = asym_span(l);
                        let mut st = SdState {
                            last_balance: 0,
                            balance_interval_ms: 0,
                            interval: [0; 2],
                            nr_balance_failed: 0,
                            max_newidle_lb_cost_ns: 0,
                            last_decay_max_lb_cost: 0,
                            newidle_call: 512,
                            newidle_success: 256,
                            newidle_ratio: 512,
                            numa,
                            llc: !numa,
                            imb_numa_nr: if numa {
                                imb * (l.weight as i64 / imb_span).max(1)
                            } else {
                                imb
                            },
                            asym,
                            cache_hot_ns: if modern {
                                l.params.cache_hot_ns
                            } else {
                                MIGRATION_COST_NS
                            },
                        };
                        let ms = l.params.min_interval_ms.max(1);
                        st.set_interval(ms, &l.params, hz, max_interval);
                        st
                    })
                    .collect()
            })
            .collect();
        // sd_llc: each CPU's highest level sharing the LLC (SD_SHARE_LLC: one LLC per node here).
        let sd_llc = ctx
            .domains
            .cpus
            .iter()
            .zip(&sd)
            .map(|(levels, st)| {
                let shared = levels.iter().zip(st).rev().find(|(_, st)| st.llc);
                shared.map(|(l, _)| l.span.clone())
            })
            .collect();
        let cpus = m.cpus();
        let cpu = vec![
            CpuSt {
                avg_idle_ns: 2 * MIGRATION_COST_NS,
                idle_stamp_ns: None,
                last_idle_stamp_ns: 0,
                max_idle_balance_cost_ns: MIGRATION_COST_NS,
                // sched_init: rq->next_balance = jiffies (the run starts at jiffy 0).
                next_balance: 0,
                periodic_at: None,
                softirq: false,
                ended: false,
                continue_balancing: true,
                busy: false,
                need_decay: false,
                max_cost_ns: 0,
                pass_next: 0,
                update_next: false,
                newidle_at: None,
                newidle_cost_ns: 0,
                newidle_stopped: false,
                visit: None,
                own_tick: false,
                exec: 0,
                cursor_ns: 0,
            };
            cpus
        ];
        let factor = 1 + u64::from((cpus.clamp(1, 8) as u32).ilog2());
        Self {
            sd,
            cpu,
            recent_used_cpu: Vec::new(),
            hz,
            jiffy_ns: tick_nsec(hz),
            max_interval,
            slice_ns: o.base_slice_us * 1000 * factor,
            nr_migrate: o.nr_migrate,
            wake: ctx.config.assumptions.wake,
            numa: o.numa_balancing.unwrap_or(m.nodes() > 1).then(|| {
                numa::NumaBalancing::new(ctx, numa::NumaConfig::default())
                    .with_tick_ns(tick_nsec(hz))
            }),
            asym: cap.iter().any(|&c| c != SCHED_CAPACITY_SCALE),
            sd_asym_cpucapacity: {
                let all: std::collections::BTreeSet<u64> = cap.iter().copied().collect();
                ctx.domains
                    .cpus
                    .iter()
                    .map(|levels| {
                        (all.len() > 1)
                            .then(|| {
                                levels.iter().find(|l| {
                                    l.span
                                        .iter()
                                        .map(|c| cap[c])
                                        .collect::<std::collections::BTreeSet<_>>()
                                        == all
                                })
                            })
                            .flatten()
                            .map(|l| l.span.clone())
                    })
                    .collect()
            },
            group_prefer_sibling: group_prefer_sibling(ctx.domains, &asym_span),
            cap,
            sgc_imbalance: vec![false; ctx.domains.group_spans.len()],
            active_balance: vec![false; cpus],
            nohz: nohz::Nohz::new(cpus, o.nohz, sd_llc),
            rd_overloaded: false,
            rd_overload_events: 0,
            serialize_until_ns: 0,
            serialize_holder: 0,
            ni_random: o.ni_random,
            rng: Vec::new(),
            select: o.select,
            select_stats: SelectStats::default(),
        }
    }
}

/// `SD_PREFER_SIBLING` in each group's flags, by `Group::id`: a group holds the flags of the
/// domain it was built from (`build_group_from_child_sched_domain`, `get_group`:
/// `sg->flags = child->flags`): the level, of a CPU of its balance mask, whose span is the
/// group's span — `SD_PREFER_SIBLING` unless it is a NUMA level or (`sd_init`) its parent is
/// `SD_ASYM_CPUCAPACITY` (`asym`). A group of one CPU has no such level (the CPU's own SMT or
/// cluster domain, degenerate, was destroyed: `cpu_attach_domain` clears the flags of its
/// parent's groups): no flag.
fn group_prefer_sibling(
    domains: &crate::domains::Domains,
    asym: &dyn Fn(&Level) -> bool,
) -> Vec<bool> {
    let mut out = vec![false; domains.group_spans.len()];
    for levels in &domains.cpus {
        for l in levels.iter() {
            for g in l.groups.iter() {
                let Some(j) = g.balance_mask.iter().next() else {
                    continue;
                };
                let own = &domains.cpus[j];
                if let Some(k) = own.iter().rposition(|x| *x.span == *g.span) {
                    let parent_asym = own.get(k + 1).is_some_and(asym);
                    out[g.id as usize] =
                        own[k].params.flags & sd::PREFER_SIBLING != 0 && !parent_asym;
                }
            }
        }
    }
    out
}

impl Linux {
    /// Whether group `gi` of `cpu`'s level `li` has `SD_PREFER_SIBLING` (for tests).
    pub fn group_prefers_sibling(&self, v: &View<'_>, cpu: CpuId, li: usize, gi: usize) -> bool {
        self.group_prefer_sibling[v.domains.cpus[cpu][li].groups[gi].id as usize]
    }

    /// `capacity_of(cpu)`.
    pub fn capacity_of(&self, cpu: CpuId) -> u64 {
        self.cap[cpu]
    }

    /// Whether level `li` of `cpu` has `SD_ASYM_CPUCAPACITY`.
    pub fn asym_level(&self, cpu: CpuId, li: usize) -> bool {
        self.sd[cpu][li].asym
    }

    /// `rq->misfit_task_load` of `cpu` (`update_misfit_status`, read when asked rather than
    /// at the tick): on an asymmetric machine, the running task's load (at least 1) when its
    /// util does not fit the CPU (`task_fits_cpu`) and the CPU is not of the highest capacity
    /// (`p->max_allowed_capacity`); else 0.
    pub fn misfit_task_load(&self, v: &View<'_>, cpu: CpuId) -> u64 {
        if !self.asym || self.cap[cpu] == SCHED_CAPACITY_SCALE {
            return 0;
        }
        let Some(pid) = v.current(cpu) else {
            return 0;
        };
        // "if (!p || p->nr_cpus_allowed == 1)": a task pinned to one CPU is never misfit; nor
        // is one on a CPU of the largest capacity it may run on (`p->max_allowed_capacity`).
        if let Some(mask) = v.allowed(pid) {
            let max_allowed = mask.iter().map(|c| self.cap[c]).max().unwrap_or(0);
            if mask.len() == 1 || self.cap[cpu] >= max_allowed {
                return 0;
            }
        }
        let p = v.task_pelt(pid);
        if fits_capacity(round_u64(p.util_avg), self.cap[cpu]) {
            return 0;
        }
        round_u64(p.load_avg).max(1)
    }

    /// `get_rd_overloaded`: the root domain's sticky "some runqueue has two tasks" flag. Set
    /// whenever a runqueue goes from fewer than two tasks to two or more (`add_nr_running`,
    /// every class: the stoppers of active balancing and NUMA moves count), recomputed — set
    /// or cleared — only by a pass at a CPU's top level (`update_sd_lb_stats`); never cleared
    /// by a runqueue shrinking.
    pub fn rd_overloaded(&self, v: &View<'_>) -> bool {
        self.rd_overloaded || v.overload_events() > self.rd_overload_events
    }

    /// A stopper is enqueued on `cpu` (`cpu_stop_queue_work` → a wake-up: `add_nr_running`):
    /// a CPU running one task then has two, which sets `rd->overloaded`.
    pub(super) fn stopper_enqueued(&mut self, v: &View<'_>, cpu: CpuId) {
        if v.nr_running(cpu) == 1 {
            self.rd_overloaded = true;
        }
    }

    /// `rq->avg_idle` of `cpu`, ns (what gates its newly-idle balancing; for tests and traces).
    pub fn avg_idle_ns(&self, cpu: CpuId) -> u64 {
        self.cpu[cpu].avg_idle_ns
    }

    /// `jiffies` at `now_ns` (the run starts at jiffy 0, on a tick).
    pub(super) fn jiffies(&self, now_ns: u64) -> u64 {
        now_ns / self.jiffy_ns
    }

    /// The jiffy (`TICK_NSEC`), ns.
    pub fn jiffy_ns(&self) -> u64 {
        self.jiffy_ns
    }

    /// Whether `cpu` has stopped its tick and is in `nohz.idle_cpus_mask` (for tests).
    pub fn nohz_tick_stopped(&self, cpu: CpuId) -> bool {
        self.nohz.tick_stopped[cpu]
    }

    /// `nohz.next_balance`, in jiffies (for tests).
    pub fn nohz_next_balance(&self) -> u64 {
        self.nohz.next_balance
    }

    /// `NI_RANDOM`'s `newidle_ratio` of `cpu`'s level `li` (for tests).
    pub fn newidle_ratio(&self, cpu: CpuId, li: usize) -> u32 {
        self.sd[cpu][li].newidle_ratio
    }

    /// `rq->next_balance` of `cpu`, in jiffies (for tests and traces).
    pub fn next_balance(&self, cpu: CpuId) -> u64 {
        self.cpu[cpu].next_balance
    }

    /// Whether automatic NUMA balancing is on.
    pub fn numa_balancing(&self) -> bool {
        self.numa.is_some()
    }

    /// NUMA balancing's verdict on moving `pid` from `src` to `dst` at level `li`
    /// (`migrate_degrades_locality`): 1 degrades, 0 improves, −1 no opinion (then `task_hot`
    /// decides). −1 without NUMA balancing, below NUMA levels (`SD_NUMA`) and for a task
    /// without faults, as in the kernel.
    pub(super) fn migrate_degrades_locality(
        &self,
        v: &View<'_>,
        pid: Pid,
        src: CpuId,
        dst: CpuId,
        li: usize,
        idle: IdleType,
    ) -> i32 {
        match &self.numa {
            Some(numa) if self.sd[dst][li].numa => {
                numa.degrades_locality(v, pid, src, dst, idle == IdleType::Idle)
            }
            _ => -1,
        }
    }

    /// `p->numa_preferred_nid`: none without NUMA balancing or before the task's faults
    /// name one.
    pub(super) fn preferred_node(&self, _v: &View<'_>, pid: Pid) -> Option<usize> {
        self.numa.as_ref().and_then(|n| n.preferred_node(pid))
    }
}

impl Policy for Linux {
    fn name(&self) -> &'static str {
        "linux"
    }

    fn timeslice_ns(&self) -> Option<u64> {
        Some(self.slice_ns)
    }

    /// `HRTICK` is off (`kernel/sched/features.h`): `update_curr` notices that a task's
    /// deadline has passed at the tick (`sched_tick` → `task_tick_fair`), so a task sharing its
    /// CPU runs until the first tick after its slice.
    fn slice_tick_ns(&self) -> Option<u64> {
        Some(self.jiffy_ns)
    }

    fn tracks_pelt(&self) -> bool {
        true
    }

    fn place_new(&mut self, view: &View<'_>, pid: Pid, spawn_cpu: CpuId) -> Option<CpuId> {
        Some(Self::select_task_rq(view, pid, spawn_cpu, || {
            self.find_dst_cpu(view, spawn_cpu, pid, sd::BALANCE_FORK)
        }))
    }

    fn place_wakeup(&mut self, view: &View<'_>, pid: Pid, prev_cpu: CpuId) -> Option<CpuId> {
        let cpu = Self::select_task_rq(view, pid, prev_cpu, || match self.wake {
            // The waker is the CPU the IO was issued from: wake_affine keeps prev_cpu (with
            // an affinity that excludes it, want_affine is false and the fast path takes
            // prev_cpu all the same).
            Wake::Previous => self.select_idle_sibling(view, pid, prev_cpu, prev_cpu),
            Wake::Idlest => self.find_dst_cpu(view, prev_cpu, pid, sd::BALANCE_FORK),
        });
        self.woke_on(view.now, cpu);
        Some(cpu)
    }

    fn next_periodic_ns(&self, view: &View<'_>, cpu: CpuId) -> Option<u64> {
        let next_tick = self.jiffies(view.now) + 1;
        let balances = view.domains.cpus[cpu]
            .iter()
            .any(|l| view.domains.load_balances(l));
        let busy = !view.idle(cpu);
        if self.nohz.enabled && balances {
            // A CPU running a task ticks every jiffy (its tick may kick the ILB); an idle one
            // until its first tick in the idle loop, then not at all (the ILB balances it).
            return (busy || !self.nohz.idle_ticked[cpu]).then_some(next_tick * self.jiffy_ns);
        }
        // Every CPU ticks (nohz=off): the first tick at which jiffies >= rq->next_balance
        // raises the balancing softirq (sched_balance_trigger; none on a CPU without balancing
        // domains: on_null_domain).
        let balance = balances.then(|| self.cpu[cpu].next_balance.max(next_tick));
        // With NUMA balancing a CPU running a task ticks every jiffy (`task_tick_numa` in
        // `sched_tick`), but a tick before its work is due only notes the task's CPU time and
        // node: with nohz=off the timer waits for the first tick at which it may do more
        // (numa.rs, step 9; asked again when another task runs: timer_follows_running). A CPU
        // without balancing domains under nohz keeps every busy tick.
        let tick = match &self.numa {
            Some(n) if !self.nohz.enabled => n
                .next_tick_due_ns(view, cpu)
                .map(|t| t.div_ceil(self.jiffy_ns).max(next_tick)),
            Some(_) => busy.then_some(next_tick),
            None => None,
        };
        balance
            .into_iter()
            .chain(tick)
            .min()
            .map(|j| j * self.jiffy_ns)
    }

    /// With NUMA balancing and every CPU's tick kept (`nohz=off`), the timer of a CPU running
    /// a task is its NUMA tick's, which depends on the task.
    fn timer_follows_running(&self) -> bool {
        self.numa.is_some() && !self.nohz.enabled
    }

    fn kick(&mut self, view: &View<'_>, cpu: CpuId) -> Option<(CpuId, u64)> {
        self.nohz_kick(view, cpu)
    }

    /// Every level when the balancing softirq runs (`periodic`: the ILB's visit, or the
    /// CPU's own tick with `jiffies >= rq->next_balance`); otherwise only the top one, where
    /// the tick ends (`end_of_tick`). A tick that raises no softirq balances no level and
    /// changes nothing at the levels below the top but the pass's start, which `periodic`
    /// makes at the first level it is asked about, whichever that is.
    fn due_levels(&self, view: &View<'_>, cpu: CpuId) -> u64 {
        let levels = view.domains.cpus[cpu].len();
        if levels == 0 || levels > 64 {
            return u64::MAX;
        }
        let c = &self.cpu[cpu];
        let softirq = if c.periodic_at == Some(view.now) {
            c.softirq && !c.ended
        } else {
            c.visit.is_some() || self.jiffies(view.now) >= c.next_balance
        };
        if softirq {
            u64::MAX
        } else {
            1 << (levels - 1)
        }
    }

    fn next_kicked(&mut self, view: &View<'_>, cpu: CpuId) -> Option<CpuId> {
        self.nohz_next(view, cpu)
    }

    fn tick(&mut self, view: &View<'_>, cpu: CpuId) -> Option<Attempt> {
        let a = self.numa.as_mut()?.task_tick(view, cpu)?;
        // A NUMA move (migrate_task_to → stop_one_cpu on the task's CPU) or swap
        // (migrate_swap → stop_two_cpus on both) runs the stopper on each source CPU.
        for m in &a.moves {
            self.stopper_enqueued(view, m.from);
        }
        Some(a)
    }

    fn extra_metrics(&self) -> Vec<(String, f64)> {
        let mut m = self
            .numa
            .as_ref()
            .map_or_else(Vec::new, |n| n.stats().metrics());
        if self.select != Select::Kernel {
            m.extend(self.select_stats.metrics());
        }
        m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
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

    /// The stopper runs [`STOPPER_LATENCY_NS`] after the pass that kicked it.
    fn active_balance_latency_ns(&self) -> Option<u64> {
        Some(STOPPER_LATENCY_NS)
    }

    fn active_balance(
        &mut self,
        view: &View<'_>,
        busiest: CpuId,
        target: CpuId,
    ) -> Option<Attempt> {
        // active_load_balance_cpu_stop, on the busiest CPU, its flag cleared at the end
        // whatever happens ("busiest_rq->active_balance = 0" at out_unlock).
        if !std::mem::take(&mut self.active_balance[busiest]) {
            return None;
        }
        // "Is there any task to move?": busiest_rq->nr_running <= 1 counts the stopper itself,
        // so nothing happens when no CFS task is left there. Its enqueue beside one task made
        // two (rd->overloaded).
        if view.nr_running(busiest) == 0 {
            return None;
        }
        self.stopper_enqueued(view, busiest);
        // "Search for an sd spanning us and the target CPU": alb_count, alb_pushed and
        // alb_failed are counted there, and a success resets its nr_balance_failed.
        let li = view.domains.cpus[target]
            .iter()
            .position(|l| l.span.contains(busiest))?;
        // The stopper is on the CPU, so its CFS tasks are all queued (`task_on_cpu` is false
        // for each); detach_one_task (LBF_ACTIVE_LB: hot or not) takes the first from the tail
        // of cfs_tasks — the least recently run queued task, or the one the stopper preempted
        // — that may run on the target (can_migrate_task's affinity test comes first). It
        // rechecks nothing else: not whether the target is still idle, nor the imbalance.
        let pid = view
            .queued(busiest)
            .chain(view.current(busiest))
            .find(|&p| view.may_run(p, target));
        let mut a = Attempt {
            locks: 1,
            tasks_examined: view.nr_running(busiest) as u32,
            counted_at: Some(li),
            ..Attempt::default()
        };
        if let Some(pid) = pid {
            self.sd[target][li].nr_balance_failed = 0;
            a.tasks_examined = 1 + view.queued(busiest).take_while(|&p| p != pid).count() as u32;
            a.moves.push(Move {
                pid,
                from: busiest,
                to: target,
                kind: MigrationKind::Active,
            });
        }
        Some(a)
    }
}

#[cfg(test)]
mod tests {
    use super::round_u64;

    /// `round_u64` is `x.round() as u64` for every input: halves, the values just below them,
    /// the ends of the exact-integer range, negatives, infinities, NaN, and a million bit
    /// patterns of PELT-sized and arbitrary values.
    #[test]
    fn round_u64_is_round_then_cast() {
        let mut xs = vec![
            0.0,
            -0.0,
            0.5,
            1.5,
            2.5,
            0.49999999999999994,
            -0.5,
            -0.49999999999999994,
            -3.7,
            1023.5,
            4503599627370495.5,
            4503599627370496.0,
            9007199254740993.0,
            1.8446744073709552e19,
            1e300,
            f64::MAX,
            f64::MIN_POSITIVE,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
        ];
        for k in 0..4096u32 {
            let half = f64::from(k) + 0.5;
            xs.extend([half, half.next_down(), half.next_up()]);
        }
        // splitmix64: arbitrary bit patterns, and values in [0, 2048) as PELT sums are.
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        for _ in 0..1_000_000 {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            xs.push(f64::from_bits(z));
            xs.push((z >> 11) as f64 / (1u64 << 53) as f64 * 2048.0);
        }
        for x in xs {
            assert_eq!(round_u64(x), x.round() as u64, "{x:e}");
        }
    }
}
