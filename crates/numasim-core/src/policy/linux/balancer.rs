//! `linux`'s balancer (rules 1–6 of the module doc): group statistics and classification,
//! `calculate_imbalance`, the source group and runqueue, `detach_tasks`, `sched_balance_rq`, the
//! periodic and newly-idle passes.

use super::select::Select;
use super::{capacity_greater, fits_capacity, round_u64, SCHED_CAPACITY_SCALE};
use super::{Linux, MIGRATION_COST_NS, NUMA_IMBALANCE_MIN};
use crate::cpuset::CpuSet;
use crate::domains::{sd, Level};
use crate::interface::{Attempt, MigrationKind, Move, Pid, View};
use crate::machine::CpuId;

/// `enum group_type` (`fair.c`), in increasing order of pulling priority. The types this model
/// never produces (no SMT or asymmetric packing) are kept for the order; `Imbalanced` comes
/// from affinity (`sgc->imbalance`, set when pinned tasks kept a child level unbalanced).
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

/// `MAX_PINNED_INTERVAL` (ms): how far the balancing interval may double while every task of
/// the busiest runqueue is pinned away.
pub const MAX_PINNED_INTERVAL_MS: u64 = 512;

/// The part of `struct lb_env` one `sched_balance_rq` changes as it goes.
struct LbEnv {
    /// The balancing CPU (`env->sd` is its domain at level `li`).
    sd_cpu: CpuId,
    li: usize,
    src: CpuId,
    /// `env->dst_cpu`: the balancing CPU, or `new_dst_cpu` after `LBF_DST_PINNED`.
    dst: CpuId,
    idle: IdleType,
    mt: MigrationType,
    imbalance: i64,
    /// `LBF_ALL_PINNED`, `LBF_SOME_PINNED`, `LBF_DST_PINNED` and `new_dst_cpu`.
    all_pinned: bool,
    some_pinned: bool,
    dst_pinned: bool,
    new_dst: CpuId,
    /// CPUs dropped from `env->cpus`.
    excluded: Vec<CpuId>,
    /// Tasks detached so far (gone from the source's list).
    detached: Vec<Pid>,
    /// The source's `nr_running` as tasks leave it, `loop_max`, and `env->loop`.
    src_nr: usize,
    loop_max: usize,
    looked: usize,
    /// Tasks moved by every pass.
    moved: usize,
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
    /// A misfit task (`SD_ASYM_CPUCAPACITY` levels).
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
    /// The largest `rq->misfit_task_load` of the group's busy CPUs (non-local groups of
    /// `SD_ASYM_CPUCAPACITY` levels only); fork placement: 1 when the task does not fit the
    /// group's largest capacity.
    pub group_misfit_task_load: u64,
    /// `sgc->min_capacity` / `sgc->max_capacity`: the smallest and largest `capacity_of` of
    /// the group's CPUs.
    pub min_capacity: u64,
    pub max_capacity: u64,
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

/// `group_classify` for the types this model produces (no asymmetric packing or SMT):
/// overloaded, imbalanced (`sg_imbalanced`: the group's `sgc->imbalance`, given as
/// `imbalanced`), misfit task, fully busy or has spare.
pub fn group_classify(imbalance_pct: u64, s: &SgStats) -> GroupType {
    classify(imbalance_pct, s, false)
}

/// [`group_classify`] of a group whose `sgc->imbalance` is `imbalanced`.
pub fn classify(imbalance_pct: u64, s: &SgStats, imbalanced: bool) -> GroupType {
    if group_is_overloaded(imbalance_pct, s) {
        GroupType::Overloaded
    } else if imbalanced {
        GroupType::Imbalanced
    } else if s.group_misfit_task_load > 0 {
        GroupType::MisfitTask
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
    // Misfit groups arise only at SD_ASYM_CPUCAPACITY levels here (no reduced capacity):
    // "Set imbalance to allow misfit tasks to be balanced" (1 since v6.0; the misfit task's
    // load before).
    if busiest.group_type == GroupType::MisfitTask {
        return (MigrationType::Misfit, 1);
    }
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

/// What `update_sd_pick_busiest` reads beyond the two groups at an `SD_ASYM_CPUCAPACITY`
/// level.
#[derive(Debug, Clone, Copy)]
pub struct AsymPick {
    /// `capacity_of(env->dst_cpu)`.
    pub dst_capacity: u64,
    /// `sds->local_stat.group_type`.
    pub local_type: GroupType,
}

/// `update_sd_pick_busiest` at a level without `SD_ASYM_CPUCAPACITY`.
pub fn pick_busiest(busiest: Option<&SgStats>, sg: &SgStats) -> bool {
    update_sd_pick_busiest(None, busiest, sg)
}

/// `update_sd_pick_busiest` for the types produced here: whether `sg` replaces `busiest`;
/// `asym` is `Some` at `SD_ASYM_CPUCAPACITY` levels.
pub fn update_sd_pick_busiest(
    asym: Option<AsymPick>,
    busiest: Option<&SgStats>,
    sg: &SgStats,
) -> bool {
    if sg.sum_nr_running == 0 {
        return false;
    }
    // "Don't try to pull misfit tasks we can't help": only a CPU of clearly more capacity
    // than the group's largest, with a local group that has spare capacity.
    if let Some(a) = asym {
        if sg.group_type == GroupType::MisfitTask
            && (!capacity_greater(a.dst_capacity, sg.max_capacity)
                || a.local_type != GroupType::HasSpare)
        {
            return false;
        }
    }
    // init_sd_lb_stats' busiest_stat (has_spare, idle_cpus = UINT_MAX) loses to any group
    // in the type comparison or the switch; a has_spare group still meets the final
    // asymmetric-capacity test.
    let virt = SgStats {
        idle_cpus: u64::MAX,
        ..SgStats::default()
    };
    let b = busiest.unwrap_or(&virt);
    if sg.group_type != b.group_type {
        return sg.group_type > b.group_type;
    }
    let pick = match sg.group_type {
        GroupType::Overloaded => sg.avg_load > b.avg_load,
        // "If we have more than one misfit sg go with the biggest misfit" (strictly: the first
        // of equals stays).
        GroupType::MisfitTask => sg.group_misfit_task_load > b.group_misfit_task_load,
        // avg_load is not computed for fully busy groups (0), so they tie: since v6.5 ("sched/
        // fair: Keep a fully_busy SMT sched group as busiest") a tie returns false only when
        // the busiest so far is an SMT group (`SD_SHARE_CPUCAPACITY`, never here), and the
        // switch's `break` reaches `return true`: the later group wins. (The code's comment,
        // "we select the 1st one", predates that change.)
        GroupType::FullyBusy => sg.avg_load >= b.avg_load,
        GroupType::HasSpare => {
            sg.idle_cpus < b.idle_cpus
                || (sg.idle_cpus == b.idle_cpus && sg.sum_nr_running > b.sum_nr_running)
        }
        _ => false,
    };
    // "Candidate sg has no more than one task per CPU and has higher per-CPU capacity":
    // not pulled to a CPU of less capacity.
    pick && !asym.is_some_and(|a| {
        sg.group_type <= GroupType::FullyBusy && capacity_greater(sg.min_capacity, a.dst_capacity)
    })
}

impl Linux {
    /// `get_sd_balance_interval` of `cpu`'s level `li`, idle or busy, in jiffies (kept by
    /// `SdState::set_interval`).
    pub fn balance_interval(&self, cpu: CpuId, li: usize, busy: bool) -> u64 {
        self.sd[cpu][li].interval[usize::from(busy)]
    }

    /// `sched_rng()` on `cpu`: its `sched_rnd_state`, seeded from the run's workload digest
    /// on first use (`prandom.rs`).
    pub(super) fn sched_rng(&mut self, v: &View<'_>, cpu: CpuId) -> u32 {
        if self.rng.is_empty() {
            self.rng = (0..v.machine.cpus())
                .map(|c| super::prandom::Prandom::for_cpu(v.run_seed(), c))
                .collect();
        }
        self.rng[cpu].next_u32()
    }

    /// `update_newidle_stats`: a newly-idle pass (or a dice throw that skipped one) at level
    /// `li`; every 1024 calls the success count becomes `newidle_ratio` and both halve.
    pub(super) fn update_newidle_stats(&mut self, cpu: CpuId, li: usize, success: u32) {
        let st = &mut self.sd[cpu][li];
        st.newidle_call += 1;
        st.newidle_success += success;
        if st.newidle_call >= 1024 {
            st.newidle_ratio = st.newidle_success;
            st.newidle_call /= 2;
            st.newidle_success /= 2;
        }
    }

    /// `update_newidle_cost` at jiffy `now`: a new maximum, or the decay once `HZ` jiffies
    /// have passed since the last (`time_after(now, last_decay_max_lb_cost + HZ)`); whether
    /// it decayed.
    pub(super) fn update_newidle_cost(
        &mut self,
        cpu: CpuId,
        li: usize,
        now: u64,
        cost: u64,
    ) -> bool {
        let hz = self.hz;
        let st = &mut self.sd[cpu][li];
        if cost > st.max_newidle_lb_cost_ns {
            st.max_newidle_lb_cost_ns = cost;
            st.last_decay_max_lb_cost = now;
        } else if now > st.last_decay_max_lb_cost + hz {
            st.max_newidle_lb_cost_ns = st.max_newidle_lb_cost_ns * 253 / 256;
            st.last_decay_max_lb_cost = now;
            return true;
        }
        false
    }

    /// What the engine will charge for `a` (the balancing-cost rates of `EngineConfig`): the measured cost of a newly-idle pass,
    /// and how long a periodic pass holds `sched_balance_running` (`SD_SERIALIZE`).
    pub(super) fn cost_of(v: &View<'_>, a: &Attempt) -> u64 {
        v.config.balancing_ns(
            a.rqs_examined + a.locks,
            a.tasks_examined,
            a.evaluations,
            a.moves.len() as u64,
        )
    }

    /// `update_sg_lb_stats` for `group` (the balancing CPU's view of its CPUs); `misfit`:
    /// a non-local group at an `SD_ASYM_CPUCAPACITY` level (its CPUs' misfit loads count);
    /// `excluded`: CPUs no longer in `env->cpus` (a busiest runqueue all of whose tasks were
    /// pinned, a destination pinned away), whose tasks and loads are not read (the group's
    /// capacity and weight are its `sgc`'s, all its CPUs).
    pub(super) fn sg_stats(
        &self,
        v: &View<'_>,
        group: &crate::domains::Group,
        imbalance_pct: u64,
        misfit: bool,
        excluded: &[CpuId],
    ) -> SgStats {
        let span = &group.span;
        let mut s = SgStats {
            min_capacity: u64::MAX,
            ..SgStats::default()
        };
        for c in span.iter() {
            let cap = self.cap[c];
            if !excluded.is_empty() && excluded.contains(&c) {
                s.group_capacity += cap;
                s.min_capacity = s.min_capacity.min(cap);
                s.max_capacity = s.max_capacity.max(cap);
                s.group_weight += 1;
                continue;
            }
            let pelt = v.cpu_pelt(c);
            s.group_load += round_u64(pelt.load_avg);
            // cpu_util_cfs: at most the CPU's original capacity.
            s.group_util += round_u64(pelt.util_avg).min(cap);
            s.group_runnable += round_u64(pelt.runnable_avg);
            let nr = v.nr_running(c) as u64;
            s.sum_nr_running += nr;
            // sgc->capacity, min_capacity, max_capacity (update_group_capacity).
            s.group_capacity += cap;
            s.min_capacity = s.min_capacity.min(cap);
            s.max_capacity = s.max_capacity.max(cap);
            s.group_weight += 1;
            if nr == 0 {
                s.idle_cpus += 1;
                continue; // "Idle cpu can't have misfit task"
            }
            if misfit {
                s.group_misfit_task_load =
                    s.group_misfit_task_load.max(self.misfit_task_load(v, c));
            }
        }
        s.group_type = classify(imbalance_pct, &s, self.sg_imbalanced(group));
        if s.group_type == GroupType::Overloaded {
            s.avg_load = s.group_load * SCHED_CAPACITY_SCALE / s.group_capacity;
        }
        s
    }

    /// `sg_imbalanced(group)`: its `sgc->imbalance`.
    pub(super) fn sg_imbalanced(&self, group: &crate::domains::Group) -> bool {
        self.sgc_imbalance
            .get(group.id as usize)
            .copied()
            .unwrap_or(false)
    }

    /// `sched_balance_find_src_group`: the busiest group's index, the migration type and the
    /// imbalance, or `None` when balanced, the CPUs of `excluded` (no longer in `env->cpus`)
    /// not read. Adds the runqueues it read to `a`; at `cpu`'s top level it recomputes
    /// `rd->overloaded` (`update_sd_lb_stats`).
    pub(super) fn find_src_group(
        &mut self,
        v: &View<'_>,
        cpu: CpuId,
        li: usize,
        idle: IdleType,
        a: &mut Attempt,
        excluded: &[CpuId],
    ) -> Option<(usize, MigrationType, i64)> {
        let level = &v.domains.cpus[cpu][li];
        let st = &self.sd[cpu][li];
        let pct = u64::from(level.params.imbalance_pct);
        let (mut local, mut busiest) = (SgStats::default(), None::<(usize, SgStats)>);
        let (mut total_load, mut total_capacity) = (0, 0);
        let asym = st.asym.then(|| AsymPick {
            dst_capacity: self.cap[cpu],
            local_type: GroupType::HasSpare,
        });
        // The local group is the first (the kernel's too), so its type is known for the
        // others' update_sd_pick_busiest.
        let mut misfit = false;
        for (gi, g) in level.groups.iter().enumerate() {
            let s = self.sg_stats(v, g, pct, st.asym && !g.local, excluded);
            misfit |= s.group_misfit_task_load > 0;
            a.rqs_examined += g.weight as u32;
            total_load += s.group_load;
            total_capacity += s.group_capacity;
            if g.local {
                local = s;
            } else if update_sd_pick_busiest(
                asym.map(|x| AsymPick {
                    local_type: local.group_type,
                    ..x
                }),
                busiest.as_ref().map(|b| &b.1),
                &s,
            ) {
                busiest = Some((gi, s));
            }
        }
        if li + 1 == v.domains.cpus[cpu].len() {
            // update_sd_lb_stats at the root domain: rd->overloaded is whether some CPU of it
            // (in env->cpus) has two tasks, or (SD_ASYM_CPUCAPACITY) a misfit outside the local
            // group. The CPUs with two tasks are the engine's overloaded set.
            let two = v
                .overloaded()
                .iter()
                .any(|c| level.span.contains(c) && !excluded.contains(&c));
            self.rd_overloaded = two || misfit;
            self.rd_overload_events = v.overload_events();
        }
        let (bi, b) = busiest?;
        // "Indicate that the child domain of the busiest group prefers tasks go to a child's
        // sibling domains first. NB the flags of a sched group are those of the child domain."
        let prefer_sibling = self.group_prefer_sibling[level.groups[bi].id as usize];
        let st = &self.sd[cpu][li];
        let env = ImbalanceEnv {
            idle,
            llc: st.llc,
            numa: st.numa,
            imb_numa_nr: st.imb_numa_nr,
            prefer_sibling,
        };
        // "Misfit tasks should be dealt with regardless of the avg load" (force_balance).
        // "If the busiest group is imbalanced the below checks don't work because they assume
        // all things are equal, which typically isn't true due to cpus_ptr constraints": both
        // go to force_balance.
        if matches!(b.group_type, GroupType::MisfitTask | GroupType::Imbalanced) {
            let (mt, imbalance) =
                calculate_imbalance(&env, &mut local, &b, total_load, total_capacity);
            return (imbalance > 0 || b.group_type == GroupType::MisfitTask)
                .then_some((bi, mt, imbalance));
        }
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
        let forced = prefer_sibling
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
        let (mt, imbalance) = calculate_imbalance(&env, &mut local, &b, total_load, total_capacity);
        (imbalance > 0).then_some((bi, mt, imbalance))
    }

    /// `sched_balance_find_src_rq` for `dst` balancing at level `li`, over the group's CPUs
    /// not in `excluded` (`for_each_cpu_and(i, sched_group_span(group), env->cpus)`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn find_src_rq(
        &self,
        v: &View<'_>,
        dst: CpuId,
        li: usize,
        level: &Level,
        group: usize,
        mt: MigrationType,
        imbalance: i64,
        excluded: &[CpuId],
    ) -> Option<CpuId> {
        let asym = self.sd[dst][li].asym;
        let mut busiest = None;
        let (mut busiest_load, mut busiest_util, mut busiest_nr) = (0u64, 0u64, 0usize);
        let mut busiest_capacity = 1u64;
        // for_each_cpu_and(i, sched_group_span(group), env->cpus)
        for c in level.groups[group]
            .span
            .iter()
            .filter(|c| excluded.is_empty() || !excluded.contains(c))
        {
            let nr = v.nr_running(c);
            if nr == 0 {
                continue;
            }
            let capacity = self.cap[c];
            // "don't pick a CPU that could eventually lead to active_balancing high->low
            // capacity".
            if asym && nr == 1 && !capacity_greater(self.cap[dst], capacity) {
                continue;
            }
            match mt {
                MigrationType::Load => {
                    let load = round_u64(v.cpu_pelt(c).load_avg);
                    // One task heavier than the imbalance stays (no RT/IRQ pressure, so
                    // check_cpu_capacity never holds).
                    if nr == 1 && load as i64 > imbalance {
                        continue;
                    }
                    // The most load per capacity: load_i * capacity_j > load_j * capacity_i.
                    if load * busiest_capacity > busiest_load * capacity {
                        busiest_load = load;
                        busiest_capacity = capacity;
                        busiest = Some(c);
                    }
                }
                MigrationType::Misfit => {
                    // "we simply seek the 'biggest' misfit task".
                    let misfit = self.misfit_task_load(v, c);
                    if misfit > busiest_load {
                        busiest_load = misfit;
                        busiest = Some(c);
                    }
                }
                MigrationType::Util => {
                    let util = round_u64(v.cpu_pelt(c).util_avg);
                    if nr > 1 && busiest_util < util {
                        busiest_util = util;
                        busiest = Some(c);
                    }
                }
                MigrationType::Task => {
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
    pub(super) fn task_hot(&self, v: &View<'_>, pid: Pid, cpu: CpuId, li: usize) -> bool {
        let hot_ns = self.sd[cpu][li].cache_hot_ns;
        v.proc(pid)
            .last_ran_ns
            .is_some_and(|t| v.now.saturating_sub(t) < hot_ns)
    }

    /// `can_migrate_task` for a queued (not running) task allowed on `dst`, past the
    /// affinity and running tests ([`Linux::detach_tasks`]); `sd_cpu` is the balancing CPU,
    /// whose domain (`env->sd`) holds the failure count.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn can_migrate(
        &self,
        v: &View<'_>,
        pid: Pid,
        src: CpuId,
        dst: CpuId,
        sd_cpu: CpuId,
        li: usize,
        idle: IdleType,
    ) -> bool {
        let degrades = self.migrate_degrades_locality(v, pid, src, dst, li, idle);
        let hot = if degrades == -1 {
            i32::from(self.task_hot(v, pid, sd_cpu, li))
        } else {
            degrades
        };
        let st = &self.sd[sd_cpu][li];
        let p = &v.domains.cpus[sd_cpu][li].params;
        hot <= 0 || st.nr_balance_failed > p.cache_nice_tries
    }

    /// `can_migrate_task`'s affinity test of `pid` for `env.dst`: not allowed there sets
    /// `LBF_SOME_PINNED` and (not newly idle, none yet) `LBF_DST_PINNED` with `new_dst_cpu`, the
    /// first CPU of the local group's balance mask still in `env->cpus` that `pid` may run on;
    /// allowed clears `LBF_ALL_PINNED`. Whether `pid` may run on `env.dst`.
    fn affine_ok(&self, v: &View<'_>, pid: Pid, env: &mut LbEnv, grpmask: &CpuSet) -> bool {
        if v.may_run(pid, env.dst) {
            env.all_pinned = false;
            return true;
        }
        env.some_pinned = true;
        if env.idle == IdleType::NewlyIdle || env.dst_pinned {
            return false;
        }
        if let Some(c) = grpmask
            .iter()
            .find(|&c| !env.excluded.contains(&c) && v.may_run(pid, c))
        {
            env.dst_pinned = true;
            env.new_dst = c;
        }
        false
    }

    /// `detach_tasks`' test of the migration type for `pid`: the imbalance left once it is
    /// detached, or `None` when the kernel skips it (`goto next`): a load or util beyond the
    /// imbalance (`shr_bound` by `nr_balance_failed`), or a task that fits the source CPU when
    /// a misfit is sought.
    fn imbalance_after(&self, v: &View<'_>, env: &LbEnv, pid: Pid, failed: u32) -> Option<i64> {
        let shr = |x: u64| if failed >= 64 { 0 } else { x >> failed };
        match env.mt {
            MigrationType::Load => {
                let load = round_u64(v.task_pelt(pid).load_avg).max(1);
                (shr(load) as i64 <= env.imbalance).then(|| env.imbalance - load as i64)
            }
            MigrationType::Util => {
                let util = round_u64(v.task_pelt(pid).util_avg);
                (shr(util) as i64 <= env.imbalance).then(|| env.imbalance - util as i64)
            }
            MigrationType::Task => Some(env.imbalance - 1),
            // "This is not a misfit task".
            MigrationType::Misfit => {
                let util = round_u64(v.task_pelt(pid).util_avg);
                (!fits_capacity(util, self.cap[env.src])).then_some(0)
            }
        }
    }

    /// `detach_tasks`: the moves of one pass from `env.src` to `env.dst` (tasks already
    /// detached by an earlier pass of this balancing are gone from the list). A pull between
    /// nodes under a selection policy (`select=`) goes to [`Linux::select_tasks`].
    fn detach_tasks(&mut self, v: &View<'_>, env: &mut LbEnv, a: &mut Attempt) -> usize {
        if self.select != Select::Kernel
            && v.machine.cpu_node(env.src) != v.machine.cpu_node(env.dst)
        {
            return self.select_tasks(v, env, a);
        }
        let (sd_cpu, li, src, idle) = (env.sd_cpu, env.li, env.src, env.idle);
        let failed = self.sd[sd_cpu][li].nr_balance_failed;
        let grpmask = &v.domains.cpus[sd_cpu][li].groups[0].balance_mask;
        let kind = pull_kind(idle);
        let mut detached = 0;
        let earlier = std::mem::take(&mut env.detached);
        for task in cfs_tail_walk(v, src, &earlier) {
            if idle != IdleType::NotIdle && env.src_nr <= 1 {
                break;
            }
            env.looked += 1;
            if env.looked > env.loop_max {
                break;
            }
            a.tasks_examined += 1;
            let Some(pid) = task else {
                // The running task never moves (task_on_cpu), after the affinity test.
                let cur = v.current(src).expect("running");
                self.affine_ok(v, cur, env, grpmask);
                continue;
            };
            if !self.affine_ok(v, pid, env, grpmask)
                || !self.can_migrate(v, pid, src, env.dst, sd_cpu, li, idle)
            {
                continue;
            }
            let Some(left) = self.imbalance_after(v, env, pid, failed) else {
                continue;
            };
            env.imbalance = left;
            a.moves.push(Move {
                pid,
                from: src,
                to: env.dst,
                kind,
            });
            env.detached.push(pid);
            detached += 1;
            env.src_nr -= 1;
            // Preemptible kernels (CONFIG_PREEMPTION) stop newly-idle balancing at one task.
            if idle == IdleType::NewlyIdle || env.imbalance <= 0 {
                break;
            }
        }
        env.detached.extend(earlier);
        detached
    }

    /// `detach_tasks` of a pull between nodes under a selection policy (the module doc of
    /// `select.rs`): the same walk from the tail of `cfs_tasks` (at most `loop_max` looked at,
    /// each through `can_migrate_task` — affinity, `migrate_degrades_locality`, `task_hot`),
    /// but every task is looked at before any moves; then, while the kernel would go on
    /// detaching (imbalance left, an idle puller never empties the source, newly idle stops
    /// at one), the next task is the selector's pick among those the migration type's test
    /// lets through, the kernel's order breaking its ties.
    fn select_tasks(&mut self, v: &View<'_>, env: &mut LbEnv, a: &mut Attempt) -> usize {
        let (sd_cpu, li, src, idle) = (env.sd_cpu, env.li, env.src, env.idle);
        let failed = self.sd[sd_cpu][li].nr_balance_failed;
        let grpmask = &v.domains.cpus[sd_cpu][li].groups[0].balance_mask;
        let kind = pull_kind(idle);
        let earlier = std::mem::take(&mut env.detached);
        let mut movable: Vec<Pid> = Vec::new();
        if idle == IdleType::NotIdle || env.src_nr > 1 {
            for task in cfs_tail_walk(v, src, &earlier) {
                env.looked += 1;
                if env.looked > env.loop_max {
                    break;
                }
                a.tasks_examined += 1;
                let Some(pid) = task else {
                    let cur = v.current(src).expect("running");
                    self.affine_ok(v, cur, env, grpmask);
                    continue;
                };
                if self.affine_ok(v, pid, env, grpmask)
                    && self.can_migrate(v, pid, src, env.dst, sd_cpu, li, idle)
                {
                    movable.push(pid);
                }
            }
        }
        self.select_stats.passes += 1;
        let mut moved: Vec<Pid> = Vec::new();
        while idle == IdleType::NotIdle || env.src_nr > 1 {
            let eligible: Vec<Pid> = movable
                .iter()
                .copied()
                .filter(|&pid| self.imbalance_after(v, env, pid, failed).is_some())
                .collect();
            if eligible.is_empty() {
                break;
            }
            let before = a.evaluations;
            let at = self
                .select
                .pick(v, src, env.dst, &eligible, &moved, &mut a.evaluations);
            let pid = eligible[at];
            self.select_stats
                .count(v, &eligible, at, a.evaluations - before);
            env.imbalance = self.imbalance_after(v, env, pid, failed).expect("eligible");
            movable.retain(|&p| p != pid);
            a.moves.push(Move {
                pid,
                from: src,
                to: env.dst,
                kind,
            });
            env.detached.push(pid);
            moved.push(pid);
            env.src_nr -= 1;
            if idle == IdleType::NewlyIdle || env.imbalance <= 0 {
                break;
            }
        }
        env.detached.extend(earlier);
        moved.len()
    }

    /// `should_we_balance` for a periodic pass: this CPU is the first idle CPU of the local
    /// group's balance mask, or its first CPU when none is idle.
    pub(super) fn should_we_balance(v: &View<'_>, cpu: CpuId, level: &Level) -> bool {
        let mask = &level.groups[0].balance_mask;
        match mask.iter().find(|&c| v.idle(c)) {
            Some(c) => c == cpu,
            None => mask.iter().next() == Some(cpu),
        }
    }

    /// `sched_balance_rq`: one attempt of `cpu` at level `li`; whether it moved tasks. With
    /// affinity (docs/policies/linux.md, "Affinity"): a pass that met tasks pinned away from
    /// `cpu` retries toward `new_dst_cpu` (`LBF_DST_PINNED`, `more_balance`), one whose every
    /// task was pinned drops the busiest CPU and starts over (`LBF_ALL_PINNED`, `redo`) while
    /// CPUs outside the local group remain, and pinned tasks left unbalanced mark the parent
    /// level's local group imbalanced (`sgc->imbalance`).
    pub(super) fn balance_rq(
        &mut self,
        v: &View<'_>,
        cpu: CpuId,
        li: usize,
        idle: IdleType,
    ) -> Attempt {
        let level = &v.domains.cpus[cpu][li];
        let p = &level.params;
        let mut a = Attempt::default();
        // sd_parent->groups: the parent level's group holding this CPU (its sgc).
        let parent_group = v.domains.cpus[cpu]
            .get(li + 1)
            .and_then(|l| l.groups.iter().find(|g| g.local))
            .map(|g| g.id as usize);
        // What persists across `redo`: env->cpus (as the CPUs dropped from it) and the flags.
        let mut excluded: Vec<CpuId> = Vec::new();
        let mut all_pinned = false;
        let mut some_pinned = false;
        let (busiest, mt, env) = loop {
            let swb = if idle == IdleType::NewlyIdle {
                v.idle(cpu)
            } else {
                Self::should_we_balance(v, cpu, level)
            };
            let found = if swb {
                self.find_src_group(v, cpu, li, idle, &mut a, &excluded)
                    .and_then(|(g, mt, imb)| {
                        a.rqs_examined += level.groups[g].weight as u32;
                        self.find_src_rq(v, cpu, li, level, g, mt, imb, &excluded)
                            .map(|b| (b, mt, imb))
                    })
            } else {
                // Another CPU of the local group balances for it: stop going up (periodic
                // only; newly idle, the CPU has work again and the engine stops asking).
                if idle != IdleType::NewlyIdle {
                    self.cpu[cpu].continue_balancing = false;
                }
                None
            };
            let Some((busiest, mt, imbalance)) = found else {
                // out_balanced: "Clear the imbalance flag only if other tasks got a chance to
                // move and fix the imbalance."
                if let (Some(g), false) = (parent_group, all_pinned) {
                    if let Some(flag) = self.sgc_imbalance.get_mut(g) {
                        *flag = false;
                    }
                }
                self.out_pinned(v, cpu, li, idle, all_pinned, true, false);
                return a;
            };
            let mut env = LbEnv {
                sd_cpu: cpu,
                li,
                src: busiest,
                dst: cpu,
                idle,
                mt,
                imbalance,
                all_pinned: true,
                some_pinned,
                dst_pinned: false,
                new_dst: cpu,
                excluded,
                detached: Vec::new(),
                src_nr: v.nr_running(busiest),
                loop_max: self.nr_migrate.min(v.nr_running(busiest)),
                looked: 0,
                moved: 0,
            };
            if v.nr_running(busiest) <= 1 {
                break (busiest, mt, env);
            }
            a.locks = 1;
            loop {
                env.moved += self.detach_tasks(v, &mut env, &mut a);
                // Revisit the tasks pinned away from us toward new_dst_cpu of our group.
                if env.dst_pinned && env.imbalance > 0 {
                    env.excluded.push(env.dst);
                    env.dst = env.new_dst;
                    env.dst_pinned = false;
                    env.looked = 0;
                    continue;
                }
                break;
            }
            // "We failed to reach balance because of affinity."
            if let Some(g) = parent_group {
                if env.some_pinned && env.imbalance > 0 {
                    if let Some(flag) = self.sgc_imbalance.get_mut(g) {
                        *flag = true;
                    }
                }
            }
            if !env.all_pinned {
                break (busiest, mt, env);
            }
            // "All tasks on this runqueue were pinned by CPU affinity": drop it, and redo if
            // CPUs outside the receiving group remain to pull from.
            env.excluded.push(busiest);
            let grpmask = &level.groups[0].balance_mask;
            let outside = level
                .span
                .iter()
                .any(|c| !env.excluded.contains(&c) && !grpmask.contains(c));
            if outside {
                (excluded, all_pinned, some_pinned) = (env.excluded, true, env.some_pinned);
                continue;
            }
            // out_all_pinned: the parent's imbalance flag is left for it to act on.
            self.out_pinned(v, cpu, li, idle, true, true, mt == MigrationType::Misfit);
            return a;
        };
        let (hz, max) = (self.hz, self.max_interval);
        let st = &mut self.sd[cpu][li];
        if env.moved == 0 {
            // Misfit failures do not count (v6.10: "don't pollute nr_balance_failed").
            if idle != IdleType::NewlyIdle && mt != MigrationType::Misfit {
                st.nr_balance_failed += 1;
            }
            // need_active_balance: imbalanced_active_balance (migrate_task after
            // cache_nice_tries + 2 failures) or migrate_misfit; no RT/IRQ pressure, so the
            // check_cpu_capacity clause never holds.
            if (mt == MigrationType::Task && st.nr_balance_failed > p.cache_nice_tries + 2)
                || mt == MigrationType::Misfit
            {
                // "Don't kick the active_load_balance_cpu_stop, if the curr task on busiest
                // CPU can't be moved to this_cpu": out_one_pinned (the failures kept).
                if v.current(busiest).is_some_and(|cur| !v.may_run(cur, cpu)) {
                    let misfit = mt == MigrationType::Misfit;
                    let pinned = env.all_pinned;
                    self.out_pinned(v, cpu, li, idle, pinned, false, misfit);
                    return a;
                }
                // "->active_balance synchronizes accesses to ->active_balance_work. Once set,
                // it's cleared only after active load balance is finished": one stopper per
                // busiest CPU at a time (stop_one_cpu_nowait); a pass that finds it set kicks
                // nothing, its failure counted all the same.
                if !self.active_balance[busiest] {
                    self.active_balance[busiest] = true;
                    a.active_from = Some(busiest);
                }
            }
        } else {
            st.nr_balance_failed = 0;
        }
        // Unbalanced: the interval back to its minimum (also when active balancing starts:
        // need_active_balance still holds then).
        st.set_interval(p.min_interval_ms.max(1), p, hz, max);
        a
    }

    /// The end of `sched_balance_rq` after `out_balanced` or `out_all_pinned` (`reset`: the
    /// failures reset) or `out_one_pinned` (kept): unless newly idle or for a misfit, the
    /// interval doubles while below the level's maximum, or below `MAX_PINNED_INTERVAL` when
    /// every task was pinned (`all_pinned`).
    #[allow(clippy::too_many_arguments)]
    fn out_pinned(
        &mut self,
        v: &View<'_>,
        cpu: CpuId,
        li: usize,
        idle: IdleType,
        all_pinned: bool,
        reset: bool,
        misfit: bool,
    ) {
        let p = &v.domains.cpus[cpu][li].params;
        let (hz, max) = (self.hz, self.max_interval);
        let st = &mut self.sd[cpu][li];
        if reset {
            st.nr_balance_failed = 0;
        }
        if idle == IdleType::NewlyIdle || misfit {
            return;
        }
        let ms = st.balance_interval_ms;
        if (all_pinned && ms < MAX_PINNED_INTERVAL_MS) || ms < p.max_interval_ms {
            st.set_interval(ms * 2, p, hz, max);
        }
    }

    /// Periodic balancing at one level (rule 1): one turn of `sched_balance_domains`' loop
    /// over the CPU's domains, lowest first (the engine asks about every level in order at
    /// each periodic event where the softirq runs, else only about the top one:
    /// `due_levels`). The softirq runs only at a tick where `jiffies >= rq->next_balance`
    /// (`sched_balance_trigger`); the loop's end (the top level, or the level where it breaks)
    /// sets `rq->next_balance` and the rq-wide newidle cost.
    pub(super) fn periodic(&mut self, v: &View<'_>, cpu: CpuId, li: usize) -> Option<Attempt> {
        let levels = v.domains.cpus[cpu].len();
        let now = self.jiffies(v.now);
        if self.cpu[cpu].periodic_at != Some(v.now) {
            let hz = self.hz;
            let c = &mut self.cpu[cpu];
            c.periodic_at = Some(v.now);
            // The CPU's own tick raises the softirq when due (sched_balance_trigger); the ILB
            // calls sched_balance_domains for it only when due (_nohz_idle_balance).
            let ilb = c.visit.take();
            c.own_tick = ilb.is_none();
            c.exec = ilb.unwrap_or(cpu);
            c.cursor_ns = v.now;
            c.softirq = ilb.is_some() || now >= c.next_balance;
            c.ended = false;
            c.continue_balancing = true;
            c.busy = !v.idle(cpu);
            c.need_decay = false;
            c.max_cost_ns = 0;
            c.pass_next = now + 60 * hz;
            c.update_next = false;
        }
        if !self.cpu[cpu].softirq || self.cpu[cpu].ended {
            if li + 1 == levels && self.cpu[cpu].own_tick {
                // The tick is over: an idle CPU may stop it now.
                self.end_of_tick(cpu, !v.idle(cpu));
            }
            return None;
        }
        let a = if v.domains.load_balances(&v.domains.cpus[cpu][li]) {
            self.balance_domain(v, cpu, li, now)
        } else {
            None
        };
        if li + 1 == levels || self.cpu[cpu].ended {
            self.end_balance_domains(cpu);
        }
        if li + 1 == levels && self.cpu[cpu].own_tick {
            // The tick is over: an idle CPU may stop it now.
            let busy = !v.idle(cpu) || a.iter().flat_map(|a| &a.moves).any(|m| m.to == cpu);
            self.end_of_tick(cpu, busy);
        }
        a
    }

    /// The body of `sched_balance_domains`' loop for level `li` at jiffy `now`.
    fn balance_domain(&mut self, v: &View<'_>, cpu: CpuId, li: usize, now: u64) -> Option<Attempt> {
        // "Decay the newidle max times here because this is a regular visit to all the
        // domains."
        let decayed = self.update_newidle_cost(cpu, li, now, 0);
        let max_cost = self.sd[cpu][li].max_newidle_lb_cost_ns;
        let c = &mut self.cpu[cpu];
        c.need_decay = decayed;
        c.max_cost_ns += max_cost;
        if !c.continue_balancing {
            // "if (need_decay) continue; break;"
            if !decayed {
                c.ended = true;
            }
            return None;
        }
        let busy = c.busy;
        let (exec, at) = (c.exec, c.cursor_ns);
        let interval = self.balance_interval(cpu, li, busy);
        // SD_SERIALIZE (every NUMA level: sd_init): sched_balance_running is taken before the
        // due check; a CPU that finds it held by another skips the level ("goto out": no pass,
        // no lb_count, last_balance and the interval unchanged). Passes are instantaneous
        // here, so a pass holds it for its charged work, from the pass's place on its CPU's
        // virtual clock; a level that is not due holds it for no time.
        let serialize = self.sd[cpu][li].numa;
        if (serialize && at < self.serialize_until_ns && self.serialize_holder != exec)
            || now < self.sd[cpu][li].last_balance + interval
        {
            // out: this level's next time counts as it was.
            self.level_next(cpu, li, interval);
            return None;
        }
        let idle = if busy {
            IdleType::NotIdle
        } else {
            IdleType::Idle
        };
        let a = self.balance_rq(v, cpu, li, idle);
        let end = at + Self::cost_of(v, &a);
        self.cpu[cpu].cursor_ns = end;
        if serialize {
            self.serialize_until_ns = end;
            self.serialize_holder = exec;
        }
        // "idle = idle_cpu(cpu)" after a pull (LBF_DST_PINNED may have pulled elsewhere).
        let busy = busy || a.moves.iter().any(|m| m.to == cpu);
        self.cpu[cpu].busy = busy;
        self.sd[cpu][li].last_balance = now;
        let interval = self.balance_interval(cpu, li, busy);
        self.level_next(cpu, li, interval);
        Some(a)
    }

    /// `sched_balance_domains`' `out` for level `li`: the earliest time it is due again.
    fn level_next(&mut self, cpu: CpuId, li: usize, interval: u64) {
        let next = self.sd[cpu][li].last_balance + interval;
        let c = &mut self.cpu[cpu];
        if next < c.pass_next {
            c.pass_next = next;
            c.update_next = true;
        }
    }

    /// After `sched_balance_domains`' loop: the rq-wide newidle cost decays with the last
    /// level's (kept at `sysctl_sched_migration_cost` at least), and `rq->next_balance` is the
    /// earliest time a visited level is due again.
    fn end_balance_domains(&mut self, cpu: CpuId) {
        let c = &mut self.cpu[cpu];
        c.ended = true;
        if c.need_decay {
            c.max_idle_balance_cost_ns = MIGRATION_COST_NS.max(c.max_cost_ns);
        }
        if c.update_next {
            c.next_balance = c.pass_next;
        }
    }

    /// `update_next_balance` of `sched_balance_newidle` for level `li` at jiffy `now`: the
    /// level's next idle balancing, if earlier, becomes `rq->next_balance` ("Move the next
    /// balance forward").
    fn newidle_next_balance(&mut self, cpu: CpuId, li: usize) {
        let next = self.sd[cpu][li].last_balance + self.balance_interval(cpu, li, false);
        let c = &mut self.cpu[cpu];
        c.next_balance = c.next_balance.min(next);
    }

    /// Newly-idle balancing at one level (rule 6).
    pub(super) fn newidle(&mut self, v: &View<'_>, cpu: CpuId, li: usize) -> Option<Attempt> {
        if self.cpu[cpu].newidle_at != Some(v.now) {
            let lowest_cost = self.sd[cpu].first().map_or(0, |s| s.max_newidle_lb_cost_ns);
            // get_rd_overloaded: the sticky root-domain flag.
            let overloaded = self.rd_overloaded(v);
            let now = self.jiffies(v.now);
            let hz = self.hz;
            // Going idle: its tick runs on until the first tick in the idle loop.
            self.nohz.idle_ticked[cpu] = false;
            let c = &mut self.cpu[cpu];
            c.newidle_at = Some(v.now);
            c.newidle_cost_ns = 0;
            c.idle_stamp_ns = Some(v.now);
            c.last_idle_stamp_ns = v.now;
            c.newidle_stopped = !overloaded || c.avg_idle_ns < lowest_cost;
            // "next_balance = jiffies + HZ", moved into rq->next_balance at `out` if earlier.
            c.next_balance = c.next_balance.min(now + hz);
            if c.newidle_stopped && !self.sd[cpu].is_empty() {
                // Gated out: only the lowest domain's next balancing counts.
                self.newidle_next_balance(cpu, 0);
            }
        }
        if self.cpu[cpu].newidle_stopped {
            return None;
        }
        self.newidle_next_balance(cpu, li);
        let st = &self.sd[cpu][li];
        if self.cpu[cpu].avg_idle_ns < self.cpu[cpu].newidle_cost_ns + st.max_newidle_lb_cost_ns {
            self.cpu[cpu].newidle_stopped = true;
            return None;
        }
        let level = &v.domains.cpus[cpu][li];
        if level.params.flags & sd::BALANCE_NEWIDLE == 0 || !v.domains.load_balances(level) {
            return None;
        }
        // NI_RANDOM (6.12.69 on): "Throw a 1k sided dice; and only run newidle_balance
        // according to the success rate."
        let mut weight = 1;
        if self.ni_random {
            let d1k = self.sched_rng(v, cpu) % 1024;
            weight = 1 + self.sd[cpu][li].newidle_ratio;
            if d1k > weight {
                self.update_newidle_stats(cpu, li, 0);
                return None;
            }
            weight = (1024 + weight / 2) / weight;
        }
        let a = self.balance_rq(v, cpu, li, IdleType::NewlyIdle);
        let cost = Self::cost_of(v, &a);
        let now = self.jiffies(v.now);
        // update_newidle_cost(sd, domain_cost, weight * !!pulled_task): the statistics count
        // every pass (its measured cost is never 0 in the kernel).
        self.update_newidle_stats(cpu, li, weight * u32::from(!a.moves.is_empty()));
        self.update_newidle_cost(cpu, li, now, cost);
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

/// The kind of a `detach_tasks` move: a busy CPU's pull, or an idle (or newly idle) one's.
fn pull_kind(idle: IdleType) -> MigrationKind {
    if idle == IdleType::NotIdle {
        MigrationKind::Pull
    } else {
        MigrationKind::Idle
    }
}

/// `detach_tasks`'s walk from the tail of `cfs_tasks`, the least recently run first: the front
/// of `src`'s run queue, then the rest in order, leaving out the tasks an earlier pass of this
/// balancing detached (`earlier`), and the running task (the list's head, `None`) last.
fn cfs_tail_walk<'a>(
    v: &'a View<'_>,
    src: CpuId,
    earlier: &'a [Pid],
) -> impl Iterator<Item = Option<Pid>> + 'a {
    v.queued(src)
        .filter(move |&pid| earlier.is_empty() || !earlier.contains(&pid))
        .map(Some)
        .chain([v.current(src).map(|_| None)].into_iter().flatten())
}
