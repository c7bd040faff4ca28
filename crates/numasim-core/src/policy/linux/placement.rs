//! `linux`'s placement (rules 7–8 of the module doc): fork/exec placement by
//! `sched_balance_find_dst_cpu` with `sched_balance_find_dst_group`'s NUMA imbalance rule, and
//! wake-up by `select_idle_sibling`.

use super::balancer::{adjust_numa_imbalance, classify, GroupType, SgStats};
use super::{fits_capacity, round_u64, Linux, SCHED_CAPACITY_SCALE};
use crate::interface::{Pid, View};
use crate::machine::CpuId;

impl Linux {
    /// `sched_balance_find_dst_group`: the idlest group of `level` for `pid`, or `None` to
    /// stay local.
    pub(super) fn find_dst_group(
        &self,
        v: &View<'_>,
        cpu: CpuId,
        li: usize,
        pid: Pid,
    ) -> Option<usize> {
        let level = &v.domains.cpus[cpu][li];
        let st = &self.sd[cpu][li];
        let pct = u64::from(level.params.imbalance_pct);
        let mut local = None;
        let mut idlest: Option<(usize, SgStats)> = None;
        let allowed = v.allowed(pid);
        for (gi, g) in level.groups.iter().enumerate() {
            // "Skip over this group if it has no CPUs allowed".
            if allowed.is_some_and(|m| g.span.is_disjoint(m)) {
                continue;
            }
            let s = self.wakeup_stats(v, g, pct, pid, st.asym);
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
                    // "accounting for the possibility the task is pinned to a subset of CPUs":
                    // at most its allowed CPUs of the local group (for a task allowed every
                    // CPU that is the local group's weight, never below imb_numa_nr here).
                    let imb_numa_nr = match allowed {
                        Some(m) => {
                            let local_g = level.groups.iter().find(|g| g.local);
                            let n = local_g
                                .map_or(0, |g| g.span.iter().filter(|&c| m.contains(c)).count());
                            st.imb_numa_nr.min(n as i64)
                        }
                        None => st.imb_numa_nr,
                    };
                    let imb = (loc.idle_cpus as i64 - idl.idle_cpus as i64).abs();
                    if adjust_numa_imbalance(imb, loc.sum_nr_running as i64 + 1, imb_numa_nr) == 0 {
                        return None;
                    }
                }
                if loc.idle_cpus >= idl.idle_cpus {
                    return None;
                }
            }
            // "Select group with the highest max capacity".
            GroupType::MisfitTask => {
                if loc.max_capacity >= idl.max_capacity {
                    return None;
                }
            }
            _ => return None,
        }
        Some(ii)
    }

    /// `update_sg_wakeup_stats`: a group's statistics without `pid`'s own contribution;
    /// at an `SD_ASYM_CPUCAPACITY` level (`asym`) a group whose largest capacity the task's
    /// util does not fit is misfit (`task_fits_cpu` on the group's largest CPU).
    pub(super) fn wakeup_stats(
        &self,
        v: &View<'_>,
        group: &crate::domains::Group,
        pct: u64,
        pid: Pid,
        asym: bool,
    ) -> SgStats {
        let span = &group.span;
        let mut s = SgStats {
            min_capacity: u64::MAX,
            ..SgStats::default()
        };
        let own = v.pelt_cpu(pid);
        let tp = v.task_pelt(pid);
        for c in span.iter() {
            let mut pelt = v.cpu_pelt(c);
            if own == Some(c) {
                pelt.load_avg = (pelt.load_avg - tp.load_avg).max(0.0);
                pelt.util_avg = (pelt.util_avg - tp.util_avg).max(0.0);
                pelt.runnable_avg = (pelt.runnable_avg - tp.runnable_avg).max(0.0);
            }
            let cap = self.cap[c];
            s.group_load += round_u64(pelt.load_avg);
            s.group_util += round_u64(pelt.util_avg).min(cap);
            s.group_runnable += round_u64(pelt.runnable_avg);
            let nr = v.nr_running(c) as u64;
            s.sum_nr_running += nr;
            if nr == 0 {
                s.idle_cpus += 1;
            }
            s.group_capacity += cap;
            s.min_capacity = s.min_capacity.min(cap);
            s.max_capacity = s.max_capacity.max(cap);
            s.group_weight += 1;
        }
        if asym && !fits_capacity(round_u64(tp.util_avg), s.max_capacity) {
            s.group_misfit_task_load = 1;
        }
        s.group_type = classify(pct, &s, self.sg_imbalanced(group));
        if matches!(s.group_type, GroupType::FullyBusy | GroupType::Overloaded) {
            s.avg_load = s.group_load * SCHED_CAPACITY_SCALE / s.group_capacity;
        }
        s
    }

    /// `sched_balance_find_dst_group_cpu`: an idle CPU (the most recently idled, the first on
    /// ties), else the least loaded (this CPU unless another is lighter), among the group's
    /// CPUs `pid` may run on ("Traverse only the allowed CPUs").
    pub(super) fn find_dst_group_cpu(
        &self,
        v: &View<'_>,
        span: &crate::cpuset::CpuSet,
        this: CpuId,
        pid: Pid,
    ) -> CpuId {
        if span.len() == 1 {
            return span.iter().next().expect("one CPU");
        }
        let mut shallowest: Option<(CpuId, u64)> = None;
        let (mut least, mut min_load) = (this, u64::MAX);
        for c in span.iter().filter(|&c| v.may_run(pid, c)) {
            if v.idle(c) {
                let stamp = self.cpu[c].last_idle_stamp_ns;
                if shallowest.is_none_or(|(_, s)| stamp > s) {
                    shallowest = Some((c, stamp));
                }
            } else if shallowest.is_none() {
                let load = round_u64(v.cpu_pelt(c).load_avg);
                if load < min_load {
                    min_load = load;
                    least = c;
                }
            }
        }
        shallowest.map_or(least, |(c, _)| c)
    }

    /// `sched_balance_find_dst_cpu` from the highest contiguous level of `cpu` with `flag`.
    pub(super) fn find_dst_cpu(&self, v: &View<'_>, cpu: CpuId, pid: Pid, flag: u32) -> CpuId {
        let top = v.domains.cpus[cpu]
            .iter()
            .take_while(|l| l.params.flags & flag != 0)
            .count();
        // "if (!cpumask_intersects(sched_domain_span(sd), p->cpus_ptr)) return prev_cpu;"
        if let (Some(mask), Some(li)) = (v.allowed(pid), top.checked_sub(1)) {
            if v.domains.cpus[cpu][li].span.is_disjoint(mask) {
                return cpu;
            }
        }
        v.domains
            .place_down(cpu, top.checked_sub(1), flag, |li, cpu| {
                let g = self.find_dst_group(v, cpu, li, pid)?;
                let span = &v.domains.cpus[cpu][li].groups[g].span;
                Some(self.find_dst_group_cpu(v, span, cpu, pid))
            })
    }

    /// `select_task_rq` around the policy's choice: a task allowed one CPU goes there
    /// (`cpumask_any`, without asking the class); a choice it may not run on is replaced by
    /// `select_fallback_rq(task_cpu(p), p)`.
    pub(super) fn select_task_rq(
        v: &View<'_>,
        pid: Pid,
        task_cpu: CpuId,
        choose: impl FnOnce() -> CpuId,
    ) -> CpuId {
        let Some(mask) = v.allowed(pid) else {
            return choose();
        };
        if mask.len() == 1 {
            return mask.first().expect("one CPU");
        }
        let cpu = choose();
        if mask.contains(cpu) {
            cpu
        } else {
            v.fallback_cpu(pid, task_cpu)
        }
    }

    /// `select_idle_sibling(p, prev, target)` with LLC = the target's node.
    pub(super) fn select_idle_sibling(
        &mut self,
        v: &View<'_>,
        pid: Pid,
        prev: CpuId,
        target: CpuId,
    ) -> CpuId {
        if self.recent_used_cpu.len() <= pid {
            self.recent_used_cpu.resize(pid + 1, None);
        }
        // asym_fits_cpu: on an asymmetric machine the CPU must fit the task's util
        // (task_util_est, synced to now); always true otherwise.
        let util = round_u64(v.task_pelt(pid).util_avg);
        let fits = |c: CpuId| !self.asym || fits_capacity(util, self.cap[c]);
        if v.idle(target) && fits(target) {
            self.recent_used_cpu[pid] = Some(prev);
            return target;
        }
        let node = v.machine.cpu_node(target);
        if prev != target && v.machine.cpu_node(prev) == node && v.idle(prev) && fits(prev) {
            self.recent_used_cpu[pid] = Some(prev);
            return prev;
        }
        let recent = self.recent_used_cpu[pid].replace(prev);
        if let Some(r) = recent {
            if r != prev
                && r != target
                && v.machine.cpu_node(r) == node
                && v.idle(r)
                && v.may_run(pid, r)
                && fits(r)
            {
                return r;
            }
        }
        // "For asymmetric CPU capacity systems, our domain of interest is sd_asym_cpucapacity
        // rather than sd_llc": select_idle_capacity, from target wrapping, the first idle CPU
        // the task fits, else the idle CPU of the highest capacity (the first on ties), else
        // the target.
        if let Some(span) = &self.sd_asym_cpucapacity[target] {
            let cpus: Vec<CpuId> = span.iter().collect();
            let at = cpus.iter().position(|&c| c == target).unwrap_or(0);
            let mut best: Option<(CpuId, u64)> = None;
            for k in 0..cpus.len() {
                let c = cpus[(at + k) % cpus.len()];
                // cpumask_and(cpus, sched_domain_span(sd), p->cpus_ptr)
                if !v.idle(c) || !v.may_run(pid, c) {
                    continue;
                }
                if fits_capacity(util, self.cap[c]) {
                    return c;
                }
                if best.is_none_or(|(_, cap)| self.cap[c] > cap) {
                    best = Some((c, self.cap[c]));
                }
            }
            return best.map_or(target, |(c, _)| c);
        }
        // select_idle_cpu: the LLC from target + 1, wrapping.
        let cpus = v.machine.node_cpus(node);
        let at = cpus.iter().position(|&c| c == target).unwrap_or(0);
        (1..cpus.len())
            .map(|k| cpus[(at + k) % cpus.len()])
            .find(|&c| v.idle(c) && v.may_run(pid, c))
            .unwrap_or(target)
    }

    /// `ttwu_do_activate`'s `avg_idle` update on the CPU a task wakes on.
    pub(super) fn woke_on(&mut self, now: u64, cpu: CpuId) {
        let c = &mut self.cpu[cpu];
        if let Some(stamp) = c.idle_stamp_ns.take() {
            let delta = now.saturating_sub(stamp) as i64;
            let avg = c.avg_idle_ns as i64;
            let max = 2 * c.max_idle_balance_cost_ns;
            c.avg_idle_ns = ((avg + (delta - avg) / 8).max(0) as u64).min(max);
        }
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
        // "Select group with the highest max capacity".
        GroupType::MisfitTask => idlest.max_capacity < sg.max_capacity,
        _ => false,
    }
}
