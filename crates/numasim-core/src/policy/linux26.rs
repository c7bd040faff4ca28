//! `linux26`: the Linux 2.6.18 O(1) scheduler's load balancer (`kernel/sched.c`), over any
//! domain builder.
//!
//! ```text
//!   per CPU, per level:  last_balance_ns, balance_interval_ms (min..max), nr_balance_failed
//!   per CPU:             cpu_load[0..3] decayed per tick (engine; read through the View)
//!   load = 128 × nr_running (every task nice 0: NICE_0_LOAD = SCHED_LOAD_SCALE)
//! ```
//!
//! Rules, each from the 2.6.18 function named:
//! 1. `rebalance_tick`: at each tick, a level is balanced when `balance_interval` (× `busy_factor`
//!    unless the CPU is idle) has passed since `last_balance`, which then advances by that interval.
//! 2. `load_balance`: `find_busiest_group` (group loads from `source_load`/`target_load` at the
//!    level's load index, `cpu_power` = 128 per CPU, only groups with more tasks than CPUs can be
//!    busiest; out if the busiest is not `imbalance_pct` above this group or this group is at or
//!    above the average; imbalance = min(busiest above average, this below average), with the
//!    smpnice small-imbalance rules), then `find_busiest_queue` (most loaded CPU of that group,
//!    skipping single-task CPUs heavier than the imbalance), then `move_tasks` of up to
//!    `nr_running − 1` tasks and up to the imbalance.
//! 3. `move_tasks` / `can_migrate_task`: tasks from the tail of the busiest runqueue; never the
//!    running one; a task that ran less than the level's cache-hot time ago is skipped until
//!    `nr_balance_failed > cache_nice_tries`; a task heavier than what is left to move is skipped
//!    unless this CPU would otherwise stay idle (the `this_best_prio` rule).
//! 4. Failure and back-off: no task moved → `nr_balance_failed++`; beyond `cache_nice_tries + 2`
//!    failures, active balancing (`active_load_balance`: the busiest CPU pushes one task to this
//!    one, cache-hot or not) and the counter drops to `cache_nice_tries + 1`. Balanced → interval
//!    doubles (up to max); unbalanced → interval resets to min (doubles when active balancing began).
//! 5. `idle_balance` / `load_balance_newidle`: a CPU about to idle balances the levels with
//!    `SD_BALANCE_NEWIDLE`, lowest first, until one pulls.
//! 6. `sched_balance_self` / `find_idlest_group` / `find_idlest_cpu`: fork placement from the
//!    parent's CPU: from the highest level with `SD_BALANCE_FORK`, the idlest group if it is 12 %
//!    below this one (`100 + (imbalance_pct − 100) / 2`), then its idlest CPU, then down.
//! 7. `try_to_wake_up`: an IO completion is handled on the CPU that issued the IO (the waker), so
//!    the task wakes where it slept (`cpu == this_cpu`); wake-affine never needs to move it.
//!    That is the `wake=previous` modelling assumption; under `wake=idlest` (the papers'
//!    description of Linux) a waking task is placed as a new one is, by rule 6 from where it slept.
//!
//! How it reads the loads (results as a CPU-by-CPU scan; crate::load): group sums come from
//! `View::group_load`, kept per group within a tick; a level none of whose CPUs has two tasks
//! has no busiest group (`View::overloaded`), so `find_busiest_group` returns without a scan.
//! Each group's averages lie on either side of its instantaneous load per CPU
//! (`View::group_bound`, from task counts, no tick): `find_busiest_group` calls a level balanced
//! when no other group's bound clears this one's load by `imbalance_pct`, and
//! `find_idlest_group` stays when every other group's bound is above the margin, both without
//! reading the other groups; the scans skip a group whose bound shows it cannot win (not the
//! busiest: no more tasks than CPUs or a bound no higher than the busiest so far; not the
//! idlest: a bound no lower than the least load so far), and read the level's average only
//! when it decides. Each is the answer of reading everything (debug builds check every call
//! against that).
//!
//! Choices where the model is coarser than the kernel (documented in docs/policies/linux26.md):
//! one priority array (no expired array, no interactivity bonus, no preemption on wake-up); a
//! task that never ran is cache-cold; the exec-time placement pass is not repeated after the fork
//! one (it sees the same state); migrations by a CPU balancing while idle are counted as `idle`,
//! by a busy one as `pull`.

use crate::assumptions::Wake;
use crate::domains::{sd, Group, Level};
use crate::interface::{AffinityMove, PolicyContext, TaskOrder, View};
use crate::interface::{Attempt, BalanceKind, Costs, MigrationKind, Move, Pid, Policy, Quiet};
use crate::load::NICE_0_LOAD;
use crate::machine::CpuId;

/// `SCHED_LOAD_SCALE`.
const SCALE: u64 = NICE_0_LOAD;
/// `MAX_PINNED_INTERVAL`: how far a balancing interval may double while every task of the
/// busiest runqueue is pinned away from this CPU (ms).
const MAX_PINNED_INTERVAL_MS: u64 = 512;
/// `prio` of a nice-0 task and of the idle task (`MAX_PRIO`).
const NICE_0_PRIO: u32 = 120;
const IDLE_PRIO: u32 = 140;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
// The kernel's own names (`enum idle_type` in 2.6.18).
#[allow(clippy::enum_variant_names)]
enum IdleType {
    NotIdle,
    SchedIdle,
    NewlyIdle,
}

#[derive(Debug, Clone)]
struct SdState {
    last_balance_ns: u64,
    balance_interval_ms: u64,
    nr_balance_failed: u32,
    /// The interval in ns while idle and while busy (`busy_factor` times longer), rounded up to
    /// whole ticks as `msecs_to_jiffies` does: computed when `balance_interval_ms` changes,
    /// not at every tick that asks whether balancing is due.
    interval_ns: [u64; 2],
    /// Whether the level balances at all (`SD_LOAD_BALANCE`, `Domains::load_balances`) and
    /// newly idle (`SD_BALANCE_NEWIDLE`): fixed, kept here so that a tick asking whether a
    /// level is due reads this CPU's own state only, not the level.
    balances: bool,
    newidle: bool,
    /// The level's CPUs (the runqueues a balancing that finds no busiest group examined) and
    /// its interval limits (`min_interval`, `max_interval` in ms, at least 1, and
    /// `busy_factor`): fixed, kept for the same reason (`Linux26::idle_pass`).
    weight: u32,
    min_interval_ms: u64,
    max_interval_ms: u64,
    busy_factor: u32,
}

impl SdState {
    fn new(l: &Level, balances: bool, tick_ns: u64) -> Self {
        let p = &l.params;
        let mut st = Self {
            last_balance_ns: 0,
            balance_interval_ms: 0,
            nr_balance_failed: 0,
            interval_ns: [0; 2],
            balances,
            newidle: p.flags & sd::BALANCE_NEWIDLE != 0,
            weight: l.weight as u32,
            min_interval_ms: p.min_interval_ms.max(1),
            max_interval_ms: p.max_interval_ms,
            busy_factor: p.busy_factor,
        };
        st.reset_interval(tick_ns);
        st
    }

    fn set_interval(&mut self, ms: u64, tick_ns: u64) {
        self.balance_interval_ms = ms;
        // msecs_to_jiffies, at least one tick.
        let ns = |ms: u64| (ms * 1_000_000).div_ceil(tick_ns).max(1) * tick_ns;
        self.interval_ns = [ns(ms), ns(ms * u64::from(self.busy_factor))];
    }

    /// Balanced (or active balancing began): the interval doubles, up to the level's maximum.
    fn back_off(&mut self, tick_ns: u64) {
        if self.balance_interval_ms < self.max_interval_ms {
            self.set_interval(self.balance_interval_ms * 2, tick_ns);
        }
    }

    /// `out_one_pinned`'s back-off when every task was pinned (`all_pinned`): the interval
    /// doubles while below `MAX_PINNED_INTERVAL`, or below the level's maximum.
    fn back_off_pinned(&mut self, tick_ns: u64) {
        if self.balance_interval_ms < MAX_PINNED_INTERVAL_MS
            || self.balance_interval_ms < self.max_interval_ms
        {
            self.set_interval(self.balance_interval_ms * 2, tick_ns);
        }
    }

    /// `out_balanced`: no busiest group, or nothing to take from it.
    fn out_balanced(&mut self, idle: IdleType, tick_ns: u64) {
        self.nr_balance_failed = 0;
        if idle != IdleType::NewlyIdle {
            self.back_off(tick_ns);
        }
    }

    /// Tasks moved (or an ordinary failure): the interval returns to the level's minimum.
    fn reset_interval(&mut self, tick_ns: u64) {
        self.set_interval(self.min_interval_ms, tick_ns);
    }

    /// The balancing interval in ns, idle or busy.
    fn interval(&self, idle: bool) -> u64 {
        self.interval_ns[usize::from(!idle)]
    }

    /// The shorter of the two intervals (the idle one, with every shipped builder's
    /// `busy_factor`): the one by which a level may come due whichever state the CPU is in.
    fn shortest_interval(&self) -> u64 {
        self.interval(true).min(self.interval(false))
    }

    /// Whether the level is due now on a CPU idle or not (`Linux26::take_due`); if so, the
    /// interval is used up.
    fn take_due(&mut self, now: u64, idle: bool) -> bool {
        let interval = self.interval(idle);
        if !self.due(now, interval) {
            return false;
        }
        self.last_balance_ns += interval;
        true
    }

    /// Whether the level balances and `interval` has passed since its last balancing.
    fn due(&self, now: u64, interval: u64) -> bool {
        self.balances && now >= self.last_balance_ns + interval
    }
}

/// Orders a busiest runqueue's candidates for `move_tasks`: lower ranks are taken first (ties
/// keep the kernel's tail-first order). Arguments: the view, the pulling CPU, the candidate.
pub type TaskRank = fn(&View<'_>, CpuId, Pid) -> u32;

/// Chooses which movable task an inter-node pull takes next (thread-aware, memory-aware): the
/// selection policies of Chiang et al., built on linux26's `move_tasks`.
pub trait Selector: Send {
    /// The index in `movable` (the busiest runqueue's movable tasks in the kernel's tail-first
    /// order, never empty) of the task `to` takes next from `from`; `moved` are the tasks this
    /// pass has already taken, in order. Adds the candidates it evaluated to `evaluations`.
    fn pick(
        &mut self,
        view: &View<'_>,
        from: CpuId,
        to: CpuId,
        movable: &[Pid],
        moved: &[Pid],
        evaluations: &mut u32,
    ) -> usize;
}

/// The 2.6.18 balancer.
pub struct Linux26 {
    name: &'static str,
    sd: Vec<Vec<SdState>>,
    tick_ns: u64,
    rank: Option<TaskRank>,
    /// An order from outside the policy for the busiest runqueue's tasks (`set_task_order`).
    order: Option<Box<dyn TaskOrder>>,
    /// Selection between nodes (`None`: the kernel's order everywhere).
    selector: Option<Box<dyn Selector>>,
    /// Where a waking process goes (the `wake` modelling assumption).
    wake: Wake,
}

impl Linux26 {
    /// Per-level state for every CPU of the context's domains.
    pub fn new(ctx: &PolicyContext<'_>) -> Self {
        let sd = ctx
            .domains
            .cpus
            .iter()
            .map(|levels| {
                levels
                    .iter()
                    .map(|l| SdState::new(l, ctx.domains.load_balances(l), ctx.config.tick_ns))
                    .collect()
            })
            .collect();
        Self {
            name: "linux26",
            sd,
            tick_ns: ctx.config.tick_ns,
            wake: ctx.config.assumptions.wake,
            rank: None,
            order: None,
            selector: None,
        }
    }

    /// The same balancer, called `name`, whose pulls between nodes take the tasks `selector`
    /// picks instead of the tail-first ones; how many tasks move, which are movable (cache-hot
    /// rule) and everything inside a node are unchanged.
    pub fn with_selector(mut self, name: &'static str, selector: Box<dyn Selector>) -> Self {
        self.name = name;
        self.selector = Some(selector);
        self
    }

    /// The same balancer taking the busiest runqueue's tasks in `rank` order instead of the
    /// kernel's tail-first order (every other rule unchanged). For policies built on linux26.
    pub fn with_task_rank(mut self, rank: TaskRank) -> Self {
        self.rank = Some(rank);
        self
    }

    /// The interval rule of `load_balance` for a policy that balances in linux26's cycles:
    /// balanced (nothing to move) doubles the level's interval up to its maximum, anything
    /// moved resets it to the minimum.
    pub fn record_outcome(&mut self, cpu: CpuId, level: usize, moved: bool) {
        let st = &mut self.sd[cpu][level];
        if moved {
            st.reset_interval(self.tick_ns);
        } else {
            st.back_off(self.tick_ns);
        }
    }

    /// The levels `take_due` may take now or later in this periodic balancing, whether `cpu`
    /// is idle or busy by then (its shortest interval): for a policy whose attempts may also
    /// move tasks away from `cpu` (`Policy::due_levels`).
    pub fn levels_due_either_way(&self, view: &View<'_>, cpu: CpuId) -> u64 {
        self.levels_due_by(view, cpu, SdState::shortest_interval)
    }

    fn levels_due_by(
        &self,
        view: &View<'_>,
        cpu: CpuId,
        interval: impl Fn(&SdState) -> u64,
    ) -> u64 {
        self.sd[cpu]
            .iter()
            .enumerate()
            .filter(|(_, st)| st.due(view.now, interval(st)))
            .fold(0, |due, (level, _)| due | 1 << level)
    }

    /// Whether periodic balancing of `level` is due on `cpu` now (`rebalance_tick`); if so, the
    /// interval is used up (`last_balance` advances), nothing else changes. linux26's own
    /// periodic balancing uses it, and so can policies that balance in linux26's cycles.
    pub fn take_due(&mut self, view: &View<'_>, cpu: CpuId, level: usize) -> bool {
        self.sd[cpu][level].take_due(view.now, view.idle(cpu))
    }

    /// When periodic balancing of `cpu`, idle or not, is next due at some level.
    fn next_ns(&self, cpu: CpuId, idle: bool) -> Option<u64> {
        self.sd[cpu]
            .iter()
            .filter(|st| st.balances)
            .map(|st| st.last_balance_ns + st.interval(idle))
            .min()
    }

    /// Whether none of the `levels` (bit `l`: level `l`) of `cpu` reaches a CPU with two
    /// runnable tasks: balancing them finds no busiest group (`find_busiest_group`'s first
    /// test), so an idle CPU's periodic balancing of them decides nothing (`idle_pass`).
    pub fn reach_none_overloaded(&self, view: &View<'_>, cpu: CpuId, levels: u64) -> bool {
        if view.none_overloaded() {
            return true;
        }
        // Highest first: the widest reach, the likeliest to hold one.
        let of_cpu = &view.domains.cpus[cpu];
        (0..of_cpu.len())
            .rev()
            .filter(|&l| levels >> l & 1 == 1)
            .all(|l| view.overloaded().is_disjoint(&of_cpu[l].reach))
    }

    /// Whether the levels due on `cpu` now either way (`levels_due_either_way`), and the
    /// levels `also`, reach no CPU with two runnable tasks (`reach_none_overloaded`): the test
    /// an idle CPU's periodic balancing passes when it decides nothing. The due levels are
    /// found only when some CPU is overloaded, the one case where the test can fail.
    #[inline]
    pub fn due_reach_none_overloaded(&self, view: &View<'_>, cpu: CpuId, also: u64) -> bool {
        view.none_overloaded()
            || self.reach_none_overloaded(view, cpu, also | self.levels_due_either_way(view, cpu))
    }

    /// The periodic balancing of an idle CPU that decides nothing, in one pass over its own
    /// per-level state: every level due now (its idle interval has passed) is taken, as
    /// `take_due` takes it, and with `balance` also balanced as `balance(.., Periodic)` balances
    /// a level that reaches no CPU with two runnable tasks (`reach_none_overloaded`): finding
    /// no busiest group, it backs off, having examined the level's runqueues.
    /// `taken(level, weight)` hears of each, lowest first, with the level's CPUs. Returns what
    /// `next_periodic_ns` answers after it for the idle CPU. The same as taking (or balancing)
    /// each level of `levels_due_either_way` that is due and then asking `next_periodic_ns` (a
    /// level due by its idle interval is due by its shortest one), without those passes and
    /// without reading the domains.
    pub fn idle_pass(
        &mut self,
        now: u64,
        cpu: CpuId,
        balance: bool,
        mut taken: impl FnMut(usize, u32),
    ) -> Option<u64> {
        let tick_ns = self.tick_ns;
        let mut next: Option<u64> = None;
        for (level, st) in self.sd[cpu].iter_mut().enumerate() {
            if !st.balances {
                continue;
            }
            if st.take_due(now, true) {
                if balance {
                    st.out_balanced(IdleType::SchedIdle, tick_ns);
                }
                taken(level, st.weight);
            }
            let t = st.last_balance_ns + st.interval(true);
            next = Some(next.map_or(t, |n| n.min(t)));
        }
        next
    }
}

/// The own group of a level on a ring: its first, and no other is its own (`Level::ring`), so
/// it is found without walking the list (a ring level has hundreds of groups).
fn ring_local(level: &Level) -> &Group {
    let g = &level.groups[0];
    debug_assert!(g.local && !level.groups[1..].iter().any(|g| g.local));
    g
}

fn power(span_len: usize) -> u64 {
    SCALE * span_len as u64
}

/// `find_busiest_group` for the CPU whose level this is (its own group is the one marked
/// `local`): the busiest group's index and the load to move, or `None` if balanced.
fn find_busiest_group(v: &View<'_>, level: &Level, idx: usize) -> Option<(usize, u64)> {
    // Only a group with more tasks than CPUs can be the busiest, so a level none of whose CPUs
    // has two tasks is balanced: the answer of the full scan, without it.
    if v.none_overloaded() || v.overloaded().is_disjoint(&level.reach) {
        return None;
    }
    // The busiest group's max_load is its avg_source, at most its bound (View::group_bound).
    // When no other group's bound exceeds this group's load by imbalance_pct, the scan ends in
    // "balanced" (`100 * max_load <= imbalance_pct * this_load`, or an earlier test): so say
    // it without reading every group's loads.
    // this_load, the local group's avg_target, is at least its own bound: try that first,
    // which reads no load at all, then the load itself.
    if let Some(local) = level.groups.iter().find(|g| g.local) {
        let pct = u64::from(level.params.imbalance_pct);
        let max_bound = v.others_max_bound(level);
        let balanced = 100 * max_bound <= pct * v.group_bound(local)
            || 100 * max_bound <= pct * v.group_load(local, idx).avg_target;
        if balanced {
            debug_assert_eq!(
                scan_busiest_group(v, level, idx, true),
                None,
                "the bound is exact"
            );
            return None;
        }
    }
    let found = scan_busiest_group(v, level, idx, false);
    debug_assert_eq!(
        found,
        scan_busiest_group(v, level, idx, true),
        "skips are exact"
    );
    found
}

/// What `find_busiest_group`'s scan has found: the busiest group so far and this CPU's own.
struct BusiestScan {
    max_load: u64,
    busiest: Option<usize>,
    busiest_pwr: u64,
    busiest_nr: u64,
    busiest_lpt: u64,
    this_load: u64,
    this_pwr: u64,
    this_nr: u64,
    this_lpt: u64,
}

impl BusiestScan {
    /// Nothing found yet (a power of one CPU each, as the kernel's scan starts).
    fn new() -> Self {
        Self {
            max_load: 0,
            busiest: None,
            busiest_pwr: SCALE,
            busiest_nr: 0,
            busiest_lpt: 0,
            this_load: 0,
            this_pwr: SCALE,
            this_nr: 0,
            this_lpt: 0,
        }
    }

    /// Sums of target_load over this CPU's group, and their average (× SCALE / power); where
    /// several groups hold the CPU (overlapping groups), the last in the level's order counts.
    #[inline]
    fn this(&mut self, v: &View<'_>, g: &Group, idx: usize) {
        let sums = v.group_load(g, idx);
        self.this_load = sums.avg_target;
        self.this_pwr = power(g.weight);
        self.this_nr = sums.nr_running;
        self.this_lpt = sums.raw;
    }

    /// Sums of source_load over another group `gi`, `g`, and their average: the busiest so far
    /// when above the busiest load found and over capacity.
    #[inline]
    fn other(&mut self, v: &View<'_>, gi: usize, g: &Group, idx: usize) {
        let sums = v.group_load(g, idx);
        if sums.avg_source > self.max_load && sums.nr_running > g.weight as u64 {
            self.max_load = sums.avg_source;
            self.busiest = Some(gi);
            self.busiest_pwr = power(g.weight);
            self.busiest_nr = sums.nr_running;
            self.busiest_lpt = sums.raw;
        }
    }
}

/// `find_busiest_group`'s scan of the level's groups. A group that cannot be the busiest — no
/// more tasks than CPUs, or a bound (View::group_bound) no higher than the busiest load found
/// so far — is not read (`View::next_busiest_candidate` names the next one that can, in the
/// level's order), and the level's average, which every group's loads make, is read only when
/// the busiest group found leaves it to decide. `read_all` reads every group first, as the
/// kernel does (debug builds check that both give the same answer).
fn scan_busiest_group(
    v: &View<'_>,
    level: &Level,
    idx: usize,
    read_all: bool,
) -> Option<(usize, u64)> {
    let mut scan = BusiestScan::new();
    match level.ring.filter(|_| !read_all) {
        // The level's own group first, then the ones its ring names as candidates, in order.
        Some(_) => {
            scan.this(v, ring_local(level), idx);
            let mut from = 0;
            while let Some(gi) = v.next_busiest_candidate(level, from, scan.max_load) {
                scan.other(v, gi, &level.groups[gi], idx);
                from = gi + 1;
            }
        }
        None => {
            for (gi, g) in level.groups.iter().enumerate() {
                if g.local {
                    scan.this(v, g, idx);
                    continue;
                }
                if !read_all
                    && (v.group_nr_running(g) <= g.weight as u64
                        || v.group_bound(g) <= scan.max_load)
                {
                    continue; // its avg_source is at most its bound: it cannot be the busiest
                }
                scan.other(v, gi, g, idx);
            }
        }
    }
    let BusiestScan {
        max_load,
        busiest,
        busiest_pwr,
        busiest_nr,
        mut busiest_lpt,
        this_load,
        this_pwr,
        this_nr,
        mut this_lpt,
    } = scan;
    let busiest = busiest?;
    if this_load >= max_load || busiest_nr == 0 {
        return None;
    }
    if 100 * max_load <= u64::from(level.params.imbalance_pct) * this_load {
        return None;
    }
    // The level's average: target_load summed over this group, source_load over the others.
    let (total_load, total_pwr) = level.groups.iter().fold((0, 0), |(load, pwr), g| {
        let sums = v.group_load(g, idx);
        let sum = if g.local { sums.target } else { sums.source };
        (load + sum, pwr + power(g.weight))
    });
    let avg_load = SCALE * total_load / total_pwr;
    if this_load >= avg_load {
        return None;
    }
    busiest_lpt /= busiest_nr;
    if max_load <= busiest_lpt {
        return None;
    }
    // With smpnice, max_load can be below the average: then straight to small_imbalance.
    if max_load >= avg_load {
        let max_pull = (max_load - avg_load).min(max_load - busiest_lpt);
        let imbalance = (max_pull * busiest_pwr).min((avg_load - this_load) * this_pwr) / SCALE;
        if imbalance >= busiest_lpt {
            return Some((busiest, imbalance));
        }
    }
    // small_imbalance:
    let mut imbn = 2;
    match this_lpt.checked_div(this_nr) {
        Some(per_task) => {
            this_lpt = per_task;
            if busiest_lpt > this_lpt {
                imbn = 1;
            }
        }
        None => this_lpt = SCALE,
    }
    if max_load - this_load >= busiest_lpt * imbn {
        return Some((busiest, busiest_lpt));
    }
    // Not enough imbalance to move a task; move one anyway if that uses more CPU power.
    let mut pwr_now = busiest_pwr * busiest_lpt.min(max_load) + this_pwr * this_lpt.min(this_load);
    pwr_now /= SCALE;
    let mut pwr_move = 0;
    let tmp = busiest_lpt * SCALE / busiest_pwr;
    if max_load > tmp {
        pwr_move += busiest_pwr * busiest_lpt.min(max_load - tmp);
    }
    let tmp = if max_load * busiest_pwr < busiest_lpt * SCALE {
        max_load * busiest_pwr / this_pwr
    } else {
        busiest_lpt * SCALE / this_pwr
    };
    pwr_move += this_pwr * this_lpt.min(this_load + tmp);
    pwr_move /= SCALE;
    if pwr_move <= pwr_now {
        return None;
    }
    Some((busiest, busiest_lpt))
}

/// `find_busiest_queue`.
fn find_busiest_queue(v: &View<'_>, level: &Level, group: usize, imbalance: u64) -> Option<CpuId> {
    let mut max = 0;
    let mut busiest = None;
    for i in level.groups[group].span.iter() {
        let load = v.raw_load(i);
        if v.nr_running(i) == 1 && load > imbalance {
            continue;
        }
        if load > max {
            max = load;
            busiest = Some(i);
        }
    }
    busiest
}

struct MoveArgs {
    max_nr_move: usize,
    max_load_move: u64,
    idle: IdleType,
    /// Cache-hot tasks may move (`nr_balance_failed > cache_nice_tries`).
    aggressive: bool,
    cache_hot_ns: u64,
    kind: MigrationKind,
    rank: Option<TaskRank>,
}

impl MoveArgs {
    /// `this_rq->curr->prio`: the idle task when idle at a tick, the outgoing task when newly
    /// idle (every task is nice 0).
    fn start_prio(&self, v: &View<'_>, this_cpu: CpuId) -> u32 {
        if self.idle == IdleType::SchedIdle && v.current(this_cpu).is_none() {
            IDLE_PRIO
        } else {
            NICE_0_PRIO
        }
    }

    /// `task_hot` as `can_migrate_task` applies it: ran within the level's cache-hot time,
    /// unless the pass is aggressive.
    fn cache_hot(&self, v: &View<'_>, pid: Pid) -> bool {
        !self.aggressive
            && v.proc(pid)
                .last_ran_ns
                .is_some_and(|t| v.now.saturating_sub(t) < self.cache_hot_ns)
    }
}

/// `move_tasks`' `skip_for_load` for a nice-0 task with `rem` load left to move: it is heavier
/// than what is left, unless nothing of this priority has been pulled yet (`this_best_prio`
/// above it) — the busiest queue's best priority is always "seen", every task being nice 0.
fn skip_for_load(rem: i64, this_best_prio: u32) -> bool {
    let best_prio_seen = true;
    let heavier = NICE_0_LOAD as i64 > rem;
    if heavier && NICE_0_PRIO < this_best_prio {
        return !best_prio_seen;
    }
    heavier
}

/// `move_tasks`: tasks from the tail of `busiest`'s runqueue to `this_cpu` — or, between
/// nodes with a selector, the tasks the selector picks ([`select_tasks`]). Returns how many
/// moved and `all_pinned`: no task looked at may run on `this_cpu` (`can_migrate_task`'s
/// `cpu_isset(this_cpu, p->cpus_allowed)`, tested after `skip_for_load`, before the running
/// and cache-hot tests).
fn move_tasks(
    v: &View<'_>,
    this_cpu: CpuId,
    busiest: CpuId,
    a: &MoveArgs,
    selector: Option<&mut (dyn Selector + 'static)>,
    order: Option<&mut (dyn TaskOrder + 'static)>,
    out: &mut Attempt,
) -> (usize, bool) {
    if a.max_nr_move == 0 || a.max_load_move == 0 {
        return (0, false); // `pinned` is set only past this test
    }
    if let Some(sel) = selector {
        if v.machine.cpu_node(this_cpu) != v.machine.cpu_node(busiest) {
            return select_tasks(v, this_cpu, busiest, a, sel, out);
        }
    }
    let mut rem = a.max_load_move as i64;
    let mut this_best_prio = a.start_prio(v, this_cpu);
    let mut pulled = 0;
    let mut pinned = true;
    let mut candidates: Vec<Pid> = v.queued(busiest).rev().collect();
    if let Some(rank) = a.rank {
        candidates.sort_by_cached_key(|&pid| rank(v, this_cpu, pid)); // stable
    } else if let Some(order) = order {
        outside_order(order, v, this_cpu, busiest, &mut candidates);
    }
    for pid in candidates {
        out.tasks_examined += 1;
        if skip_for_load(rem, this_best_prio) || !v.may_run(pid, this_cpu) {
            continue;
        }
        pinned = false;
        if a.cache_hot(v, pid) {
            continue;
        }
        out.moves.push(Move {
            pid,
            from: busiest,
            to: this_cpu,
            kind: a.kind,
        });
        pulled += 1;
        rem -= NICE_0_LOAD as i64;
        this_best_prio = this_best_prio.min(NICE_0_PRIO);
        if pulled >= a.max_nr_move || rem <= 0 {
            break;
        }
    }
    if pulled < a.max_nr_move && rem > 0 {
        if let Some(cur) = v.current(busiest) {
            out.tasks_examined += 1; // the running task is on the list too, and never moves
            pinned &= skip_for_load(rem, this_best_prio) || !v.may_run(cur, this_cpu);
        }
    }
    (pulled, pinned)
}

/// `candidates` in the ranks an outside order gives them (stable: ties keep the kernel's
/// order), asked only when there is a choice (two or more); unchanged when the order fails.
fn outside_order(
    order: &mut dyn TaskOrder,
    v: &View<'_>,
    this_cpu: CpuId,
    busiest: CpuId,
    candidates: &mut Vec<Pid>,
) {
    if candidates.len() < 2 {
        return;
    }
    let mut ranks = Vec::with_capacity(candidates.len());
    if !order.rank(v, this_cpu, busiest, candidates, &mut ranks) || ranks.len() != candidates.len()
    {
        return;
    }
    let mut by_rank: Vec<usize> = (0..candidates.len()).collect();
    by_rank.sort_by_key(|&i| ranks[i]); // stable
    *candidates = by_rank.into_iter().map(|i| candidates[i]).collect();
}

/// `move_tasks` with a selector: the same limits (`max_nr_move`, `max_load_move` with the
/// `this_best_prio` rule) and the same movable set (not running; cache-hot skipped unless
/// aggressive), but each next task is the selector's pick among those still movable. Every
/// queued task is examined once (the selector needs them all).
fn select_tasks(
    v: &View<'_>,
    this_cpu: CpuId,
    busiest: CpuId,
    a: &MoveArgs,
    sel: &mut dyn Selector,
    out: &mut Attempt,
) -> (usize, bool) {
    let mut rem = a.max_load_move as i64;
    let mut this_best_prio = a.start_prio(v, this_cpu);
    let mut movable: Vec<Pid> = Vec::new();
    let mut pinned = true;
    for pid in v.queued(busiest).rev() {
        out.tasks_examined += 1;
        if !v.may_run(pid, this_cpu) {
            continue;
        }
        pinned = false;
        if !a.cache_hot(v, pid) {
            movable.push(pid);
        }
    }
    let mut moved: Vec<Pid> = Vec::new();
    while !movable.is_empty() {
        // Every task is nice 0: once one task skips for load, every one would.
        if skip_for_load(rem, this_best_prio) {
            break;
        }
        let at = sel.pick(v, busiest, this_cpu, &movable, &moved, &mut out.evaluations);
        let pid = movable.remove(at);
        out.moves.push(Move {
            pid,
            from: busiest,
            to: this_cpu,
            kind: a.kind,
        });
        moved.push(pid);
        rem -= NICE_0_LOAD as i64;
        this_best_prio = this_best_prio.min(NICE_0_PRIO);
        if moved.len() >= a.max_nr_move || rem <= 0 {
            break;
        }
    }
    if moved.len() < a.max_nr_move && rem > 0 {
        if let Some(cur) = v.current(busiest) {
            out.tasks_examined += 1;
            pinned &= !v.may_run(cur, this_cpu);
        }
    }
    (moved.len(), pinned)
}

impl Linux26 {
    fn load_balance(&mut self, v: &View<'_>, cpu: CpuId, li: usize, idle: IdleType) -> Attempt {
        let level = &v.domains.cpus[cpu][li];
        let p = &level.params;
        let idx = match idle {
            IdleType::NotIdle => p.load_idx.busy,
            IdleType::SchedIdle => p.load_idx.idle,
            IdleType::NewlyIdle => p.load_idx.newidle,
        };
        let mut attempt = Attempt {
            rqs_examined: level.weight as u32,
            ..Attempt::default()
        };
        let st = &mut self.sd[cpu][li];
        let found = find_busiest_group(v, level, idx).and_then(|(g, imbalance)| {
            attempt.rqs_examined += level.groups[g].weight as u32;
            find_busiest_queue(v, level, g, imbalance).map(|b| (b, imbalance))
        });
        let Some((busiest, imbalance)) = found else {
            st.out_balanced(idle, self.tick_ns);
            return attempt;
        };
        let mut moved = 0;
        if v.nr_running(busiest) > 1 {
            attempt.locks = 1;
            let all_pinned;
            let args = MoveArgs {
                max_nr_move: v.nr_running(busiest) - 1,
                max_load_move: imbalance,
                idle,
                aggressive: st.nr_balance_failed > p.cache_nice_tries,
                cache_hot_ns: p.cache_hot_ns,
                kind: if idle == IdleType::NotIdle {
                    MigrationKind::Pull
                } else {
                    MigrationKind::Idle
                },
                rank: self.rank,
            };
            (moved, all_pinned) = move_tasks(
                v,
                cpu,
                busiest,
                &args,
                self.selector.as_deref_mut(),
                self.order.as_deref_mut(),
                &mut attempt,
            );
            // "All tasks on this runqueue were pinned by CPU affinity": out_balanced, then the
            // pinned back-off (`load_balance_newidle` passes no all_pinned).
            if all_pinned && idle != IdleType::NewlyIdle {
                st.nr_balance_failed = 0;
                st.back_off_pinned(self.tick_ns);
                return attempt;
            }
        }
        if idle == IdleType::NewlyIdle {
            if moved > 0 {
                st.nr_balance_failed = 0;
            }
            return attempt;
        }
        let mut active = false;
        if moved == 0 {
            st.nr_balance_failed += 1;
            if st.nr_balance_failed > p.cache_nice_tries + 2 {
                // "don't kick the migration_thread, if the curr task on busiest cpu can't be
                // moved to this_cpu": out_one_pinned (all_pinned), the failures kept.
                if v.current(busiest).is_some_and(|cur| !v.may_run(cur, cpu)) {
                    st.back_off_pinned(self.tick_ns);
                    return attempt;
                }
                attempt.active_from = Some(busiest);
                active = true;
                st.nr_balance_failed = p.cache_nice_tries + 1;
            }
        } else {
            st.nr_balance_failed = 0;
        }
        if active {
            st.back_off(self.tick_ns);
        } else {
            st.reset_interval(self.tick_ns);
        }
        attempt
    }

    /// `sched_balance_self(cpu, SD_BALANCE_FORK)` for `pid`: with an affinity, the groups with
    /// no allowed CPU are skipped (`find_idlest_group`'s `cpus_intersects`) and only allowed
    /// CPUs are candidates (`find_idlest_cpu`'s `cpus_and`), from the CPU `task_cpu` gives.
    fn balance_self(&self, v: &View<'_>, cpu: CpuId, flag: u32, pid: Pid) -> CpuId {
        if let Some(mask) = v.allowed(pid) {
            return balance_self_allowed(v, task_cpu(v, pid, cpu), flag, mask);
        }
        let start = v.domains.cpus[cpu]
            .iter()
            .rposition(|l| l.params.flags & flag != 0);
        v.domains.place_down(cpu, start, flag, |li, cpu| {
            let level = &v.domains.cpus[cpu][li];
            let group = find_idlest_group(v, level)?;
            Some(find_idlest_cpu(v, level, group, cpu, |_| true))
        })
    }
}

/// [`Linux26::balance_self`] from `cpu` for a process allowed only `mask` (kept apart, so that
/// the placement of a process without an affinity is compiled as it was before affinities).
#[inline(never)]
fn balance_self_allowed(
    v: &View<'_>,
    cpu: CpuId,
    flag: u32,
    mask: &crate::cpuset::CpuSet,
) -> CpuId {
    let start = v.domains.cpus[cpu]
        .iter()
        .rposition(|l| l.params.flags & flag != 0);
    v.domains.place_down(cpu, start, flag, |li, cpu| {
        let level = &v.domains.cpus[cpu][li];
        let group = find_idlest_group_allowed(v, level, mask)?;
        Some(find_idlest_cpu(v, level, group, cpu, |i| mask.contains(i)))
    })
}

/// The CPU 2.6.18 keeps for `pid` when it last ran on `cpu`: `cpu` if `pid` may run there, else
/// `any_online_cpu(new_mask)`, its lowest allowed CPU — where `set_cpus_allowed` put it
/// (`migrate_task` sets a sleeping task's CPU; the migration thread moves a queued or
/// running one there).
fn task_cpu(v: &View<'_>, pid: Pid, cpu: CpuId) -> CpuId {
    match v.allowed(pid) {
        Some(mask) if !mask.contains(cpu) => mask.first().expect("an affinity allows a CPU"),
        _ => cpu,
    }
}

/// `find_idlest_group` for a process with an affinity: the kernel's scan of every group,
/// skipping those with no allowed CPU (the local one too: then its load counts as 0).
fn find_idlest_group_allowed(
    v: &View<'_>,
    level: &Level,
    mask: &crate::cpuset::CpuSet,
) -> Option<usize> {
    let idx = level.params.load_idx.forkexec;
    let imbalance = 100 + (u64::from(level.params.imbalance_pct) - 100) / 2;
    let (mut min_load, mut this_load) = (u64::MAX, 0);
    let mut idlest = None;
    for (gi, g) in level.groups.iter().enumerate() {
        if g.span.is_disjoint(mask) {
            continue; // "Skip over this group if it has no CPUs allowed"
        }
        let sums = v.group_load(g, idx);
        if g.local {
            this_load = sums.avg_source;
        } else if sums.avg_target < min_load {
            min_load = sums.avg_target;
            idlest = Some(gi);
        }
    }
    let idlest = idlest?;
    if 100 * this_load < imbalance * min_load {
        return None;
    }
    Some(idlest)
}

/// `find_idlest_group`: a group 12 % (half of imbalance_pct's margin) less loaded than this one.
fn find_idlest_group(v: &View<'_>, level: &Level) -> Option<usize> {
    let idx = level.params.load_idx.forkexec;
    let imbalance = 100 + (u64::from(level.params.imbalance_pct) - 100) / 2;
    // The idlest group's min_load is its avg_target, at least its bound (View::group_bound).
    // When every other group's bound is too high for the margin, the scan ends in "stay here"
    // (`100 * this_load < imbalance * min_load`): so say it without reading their loads.
    if let Some(local) = level.groups.iter().find(|g| g.local) {
        let this_load = v.group_load(local, idx).avg_source;
        let stay = v
            .others_min_bound(level)
            .is_none_or(|bound| 100 * this_load < imbalance * bound);
        if stay {
            debug_assert_eq!(
                scan_idlest_group(v, level, idx, imbalance, true),
                None,
                "exact"
            );
            return None;
        }
    }
    let found = scan_idlest_group(v, level, idx, imbalance, false);
    debug_assert_eq!(
        found,
        scan_idlest_group(v, level, idx, imbalance, true),
        "exact"
    );
    found
}

/// `find_idlest_group`'s scan of the level's groups. A group whose bound (View::group_bound)
/// is no lower than the least load found so far cannot be the idlest and is not read
/// (`View::next_idlest_candidate` names the next one that can, in the level's order);
/// `read_all` reads every group, as the kernel does (debug builds check both agree).
fn scan_idlest_group(
    v: &View<'_>,
    level: &Level,
    idx: usize,
    imbalance: u64,
    read_all: bool,
) -> Option<usize> {
    let (mut min_load, mut this_load) = (u64::MAX, 0);
    let mut idlest = None;
    match level.ring.filter(|_| !read_all) {
        // The level's own group first (its only group that holds this CPU), then the
        // ones its ring names: a bound below the least load so far (another's avg_target is
        // at least its bound, so no other can be the idlest).
        Some(_) => {
            this_load = v.group_load(ring_local(level), idx).avg_source;
            let mut from = 0;
            while let Some(gi) = v.next_idlest_candidate(level, from, min_load) {
                let avg = v.group_load(&level.groups[gi], idx).avg_target;
                if avg < min_load {
                    min_load = avg;
                    idlest = Some(gi);
                }
                from = gi + 1;
            }
        }
        None => {
            for (gi, g) in level.groups.iter().enumerate() {
                let local = g.local;
                if !local && !read_all && v.group_bound(g) >= min_load {
                    continue; // its avg_target is at least its bound: it cannot be the idlest
                }
                let sums = v.group_load(g, idx);
                if local {
                    this_load = sums.avg_source;
                } else if sums.avg_target < min_load {
                    min_load = sums.avg_target;
                    idlest = Some(gi);
                }
            }
        }
    }
    let idlest = idlest?;
    if 100 * this_load < imbalance * min_load {
        return None;
    }
    Some(idlest)
}

/// `find_idlest_cpu`: the least loaded CPU of the group among those `allowed` admits (every
/// one, or for a process with an affinity its allowed CPUs: "Traverse only the allowed CPUs",
/// `cpus_and`), this CPU on ties.
fn find_idlest_cpu(
    v: &View<'_>,
    level: &Level,
    group: usize,
    this_cpu: CpuId,
    allowed: impl Fn(CpuId) -> bool,
) -> CpuId {
    let mut min = u64::MAX;
    let mut idlest = this_cpu;
    for i in level.groups[group].span.iter().filter(|&i| allowed(i)) {
        let load = v.raw_load(i);
        if load < min || (load == min && i == this_cpu) {
            min = load;
            idlest = i;
        }
    }
    idlest
}

impl Policy for Linux26 {
    fn name(&self) -> &'static str {
        self.name
    }

    /// The busiest runqueue's tasks that `move_tasks` walks (tail first) are ranked by `order`
    /// first — in busy, idle, newly-idle and active balancing alike — unless the balancer
    /// already has an order of its own (a policy built on it) or a selector between nodes.
    fn set_task_order(&mut self, order: Box<dyn TaskOrder>) -> bool {
        if self.rank.is_some() || self.selector.is_some() {
            return false;
        }
        self.order = Some(order);
        true
    }

    fn place_new(&mut self, view: &View<'_>, pid: Pid, spawn_cpu: CpuId) -> Option<CpuId> {
        Some(self.balance_self(view, spawn_cpu, sd::BALANCE_FORK, pid))
    }

    fn place_wakeup(&mut self, view: &View<'_>, pid: Pid, prev_cpu: CpuId) -> Option<CpuId> {
        Some(match self.wake {
            // try_to_wake_up on the CPU it slept on (`task_cpu`, which set_cpus_allowed moved
            // to an allowed CPU if its affinity changed meanwhile).
            Wake::Previous => task_cpu(view, pid, prev_cpu),
            // The papers' reading (`wake=idlest`): placed as a new process, from where it slept.
            Wake::Idlest => self.balance_self(view, prev_cpu, sd::BALANCE_FORK, pid),
        })
    }

    /// `set_cpus_allowed`: a task whose CPU its new mask excludes goes to
    /// `any_online_cpu(new_mask)`, the lowest allowed CPU.
    fn affinity_cpu(&mut self, view: &View<'_>, pid: Pid) -> AffinityMove {
        let first = view.allowed(pid).and_then(crate::cpuset::CpuSet::first);
        first.map_or(AffinityMove::Distribute, AffinityMove::To)
    }

    fn next_periodic_ns(&self, view: &View<'_>, cpu: CpuId) -> Option<u64> {
        self.next_ns(cpu, view.idle(cpu))
    }

    /// The levels `take_due` may balance during this periodic balancing: its test, without
    /// taking them. The attempts at the levels below only pull tasks to `cpu`, so an idle CPU
    /// may be busy when a level is reached: its shortest interval then.
    fn due_levels(&self, view: &View<'_>, cpu: CpuId) -> u64 {
        if view.idle(cpu) {
            self.levels_due_either_way(view, cpu)
        } else {
            self.levels_due_by(view, cpu, |st| st.interval(false))
        }
    }

    /// An idle CPU none of whose due levels reaches a CPU with two runnable tasks: at each, the
    /// busiest-group search ends at once, balanced, as `balance` would find.
    fn quiet_periodic(&mut self, view: &View<'_>, cpu: CpuId, quiet: &mut Quiet) -> bool {
        if !view.idle(cpu) {
            return false;
        }
        if !self.due_reach_none_overloaded(view, cpu, 0) {
            return false;
        }
        let attempts = &mut quiet.attempts;
        let next = self.idle_pass(view.now, cpu, true, |level, weight| {
            let costs = Costs {
                rqs_examined: weight,
                ..Costs::default()
            };
            attempts.push((level, costs));
        });
        debug_assert_eq!(next, self.next_ns(cpu, true));
        quiet.next_ns = next;
        true
    }

    fn balance(
        &mut self,
        view: &View<'_>,
        cpu: CpuId,
        level: usize,
        kind: BalanceKind,
    ) -> Option<Attempt> {
        let st = &self.sd[cpu][level];
        if !st.balances {
            return None;
        }
        match kind {
            BalanceKind::NewIdle => {
                if !st.newidle {
                    return None;
                }
                Some(self.load_balance(view, cpu, level, IdleType::NewlyIdle))
            }
            BalanceKind::Periodic => {
                if !self.take_due(view, cpu, level) {
                    return None;
                }
                let idle = if view.idle(cpu) {
                    IdleType::SchedIdle
                } else {
                    IdleType::NotIdle
                };
                Some(self.load_balance(view, cpu, level, idle))
            }
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
        // The lowest level of the target that spans the busiest CPU.
        let li = view.domains.cpus[target]
            .iter()
            .position(|l| view.domains.load_balances(l) && l.span.contains(busiest))?;
        let p = &view.domains.cpus[target][li].params;
        let mut attempt = Attempt {
            locks: 1,
            ..Attempt::default()
        };
        let args = MoveArgs {
            max_nr_move: 1,
            max_load_move: u64::MAX / 4,
            idle: IdleType::SchedIdle,
            aggressive: true,
            cache_hot_ns: p.cache_hot_ns,
            kind: MigrationKind::Active,
            rank: self.rank,
        };
        // `move_tasks` with no all_pinned: a task that may not run on the target is skipped.
        move_tasks(
            view,
            target,
            busiest,
            &args,
            self.selector.as_deref_mut(),
            self.order.as_deref_mut(),
            &mut attempt,
        );
        Some(attempt)
    }
}
