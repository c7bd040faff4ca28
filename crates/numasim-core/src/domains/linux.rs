//! `linux`: the scheduling domains a Linux 6.x kernel builds for a NUMA machine
//! (`kernel/sched/topology.c`: `sched_init_numa`, `sd_init`, `build_sched_domains`,
//! `build_sched_groups`, `build_overlap_sched_groups`, `build_balance_mask`,
//! `find_descended_sibling`, `cpu_attach_domain`).
//!
//! ```text
//!   topology levels (tl)           span for a CPU on node n
//!   MC                             cpus(n)                       (LLC = node, as under QEMU)
//!   NODE     numa_level 0          nodes at distance ≤ 10 = n
//!   NUMA j   numa_level j ≥ 1      nodes at distance ≤ d_j       (SD_OVERLAP, SD_NUMA)
//!   d_0 < d_1 < … : the distinct distances between nodes that have CPUs
//! ```
//!
//! 1. `sched_init_numa`: collect the distinct distances among CPU-bearing nodes; level j's mask
//!    of node n = CPUs of the nodes k with `distance(n, k) ≤ d_j`.
//! 2. `build_sched_domains`: for each CPU, walk the levels upwards (`sd_init`: min_interval =
//!    span weight ms, max = 2×, busy_factor 16, imbalance_pct 117; NUMA levels beyond
//!    `node_reclaim_distance` lose fork/exec balancing and wake-affine); a span that does not
//!    contain its child's is widened to it; stop after the first level spanning every CPU.
//! 3. Groups: `build_sched_groups` (one group per child span, balance mask = span) below NUMA,
//!    `build_overlap_sched_groups` on NUMA levels (a group = the child span of the sibling
//!    domain, descending with `find_descended_sibling` when that child spills out of the span;
//!    balance mask = the CPUs whose own child domain equals the group span). Both walk the span
//!    from the CPU upwards, wrapping (`for_each_cpu_wrap`).
//! 4. `cpu_attach_domain`: remove degenerate levels (6.x `sd_degenerate` /
//!    `sd_parent_degenerate`); group spans stay as built.
//!
//! Limits: one hardware thread per core and one LLC per node (SMT, CLS and DIE levels would all
//! be degenerate on such machines and are not modelled); SD_ASYM_CPUCAPACITY for machines with
//! fast cores is not set (it changes flags, not spans or groups).

use std::cell::RefCell;

use rustc_hash::FxHashMap;

use crate::cpuset::CpuSet;
use crate::machine::Machine;

use super::{sd, Era, Group, Interner, Level, LevelParams, ModernParams};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tl {
    Mc,
    /// NUMA level by index into the distinct distances (0 = NODE).
    Numa(usize),
}

struct Topology<'a> {
    machine: &'a Machine,
    params: &'a ModernParams,
    levels: Vec<Tl>,
    distances: Vec<u32>,
    /// `doms[cpu][t]`: the span of CPU's domain at topology level t, if it was built.
    spans: Vec<Vec<CpuSet>>,
    /// `build_balance_mask` by (level, group span): every CPU of a NUMA level builds the same
    /// groups, and each mask reads the domains of every CPU of its group (a 4 096-CPU machine's
    /// top groups hold 1 024 CPUs).
    masks: RefCell<FxHashMap<(usize, CpuSet), CpuSet>>,
}

impl Topology<'_> {
    fn mask(&self, tl: Tl, cpu: usize) -> CpuSet {
        let m = self.machine;
        let node = m.cpu_node(cpu);
        let mut set = CpuSet::empty(m.cpus());
        let limit = match tl {
            Tl::Mc => m.distance(node, node),
            Tl::Numa(j) => self.distances[j],
        };
        for k in m.cpu_nodes() {
            if m.distance(node, k) <= limit && (tl != Tl::Mc || k == node) {
                for &c in m.node_cpus(k) {
                    set.insert(c);
                }
            }
        }
        set
    }

    /// The span of `cpu`'s domain at level `t`, if built.
    fn span(&self, cpu: usize, t: usize) -> Option<&CpuSet> {
        self.spans[cpu].get(t)
    }

    fn params(&self, t: usize, span: &CpuSet) -> (String, LevelParams) {
        let p = self.params;
        let weight = span.len() as u64;
        let mut flags = sd::BALANCE_NEWIDLE
            | sd::BALANCE_EXEC
            | sd::BALANCE_FORK
            | sd::WAKE_AFFINE
            | sd::PREFER_SIBLING;
        let mut cache_nice_tries = 1;
        let name = match self.levels[t] {
            Tl::Mc => {
                flags |= sd::SHARE_PKG_RESOURCES;
                "MC"
            }
            Tl::Numa(0) => "NODE",
            Tl::Numa(j) => {
                cache_nice_tries = 2;
                flags |= sd::NUMA | sd::SERIALIZE | sd::OVERLAP;
                flags &= !sd::PREFER_SIBLING;
                if self.distances[j] > p.reclaim_distance {
                    flags &= !(sd::BALANCE_EXEC | sd::BALANCE_FORK | sd::WAKE_AFFINE);
                }
                "NUMA"
            }
        };
        (
            name.to_string(),
            LevelParams {
                min_interval_ms: weight,
                max_interval_ms: 2 * weight,
                busy_factor: p.busy_factor,
                imbalance_pct: p.imbalance_pct,
                cache_nice_tries,
                cache_hot_ns: p.migration_cost_ns,
                flags,
                // 6.x has no cpu_load[] averages (removed in 5.x): every index reads the
                // instantaneous load.
                load_idx: super::LoadIdx::default(),
            },
        )
    }

    /// `build_sched_groups`: below the NUMA levels, one group per child span.
    fn groups(&self, cpu: usize, t: usize) -> Vec<Group> {
        let span = &self.spans[cpu][t];
        let mut covered = CpuSet::empty(self.machine.cpus());
        let mut groups = Vec::new();
        for i in span.iter_wrap(cpu) {
            if covered.contains(i) {
                continue;
            }
            // get_group(): the child's span of CPU i, or i alone at the lowest level.
            let g = match (t > 0).then(|| self.span(i, t - 1)).flatten() {
                Some(child) if self.span(i, t).is_some() => child.clone(),
                _ => CpuSet::from_ids(self.machine.cpus(), [i]),
            };
            covered.union_with(&g);
            groups.push(Group::new(g.clone(), g));
        }
        groups
    }

    /// `find_descended_sibling`.
    fn descend(&self, sd_span: &CpuSet, i: usize, mut t: usize) -> usize {
        while t > 0 && !self.spans[i][t - 1].is_subset(sd_span) {
            t -= 1;
        }
        while t > 0 && self.spans[i][t - 1] == self.spans[i][t] {
            t -= 1;
        }
        t
    }

    /// `build_balance_mask`: CPUs j of the group whose level-t domain has a child equal to it.
    fn balance_mask(&self, t: usize, sg_span: &CpuSet) -> CpuSet {
        let key = (t, sg_span.clone());
        if let Some(mask) = self.masks.borrow().get(&key) {
            return mask.clone();
        }
        let mask = self.build_balance_mask(t, sg_span);
        self.masks.borrow_mut().insert(key, mask.clone());
        mask
    }

    fn build_balance_mask(&self, t: usize, sg_span: &CpuSet) -> CpuSet {
        let mut mask = CpuSet::empty(self.machine.cpus());
        for j in sg_span.iter() {
            if t == 0 || self.span(j, t).is_none() {
                continue;
            }
            if &self.spans[j][t - 1] == sg_span {
                mask.insert(j);
            }
        }
        mask
    }

    /// `build_overlap_sched_groups`.
    fn overlap_groups(&self, cpu: usize, t: usize) -> Vec<Group> {
        let span = &self.spans[cpu][t];
        let mut covered = CpuSet::empty(self.machine.cpus());
        let mut groups = Vec::new();
        for i in span.iter_wrap(cpu) {
            if covered.contains(i) {
                continue;
            }
            // The sibling domain of CPU i at this level may not exist when CPU i's hierarchy
            // already covered every CPU lower down.
            if self.span(i, t).is_none() {
                continue;
            }
            let mut st = t;
            if st > 0 && !self.spans[i][st - 1].is_subset(span) {
                st = self.descend(span, i, st);
            }
            // build_group_from_child_sched_domain()
            let sg_span = if st > 0 {
                self.spans[i][st - 1].clone()
            } else {
                self.spans[i][st].clone()
            };
            covered.union_with(&sg_span);
            let balance_mask = self.balance_mask(st, &sg_span);
            groups.push(Group::new(sg_span, balance_mask));
        }
        groups
    }
}

/// Builds every CPU's Linux 6.x hierarchy.
pub(crate) fn build(
    machine: &Machine,
    params: &ModernParams,
    shared: &mut Interner,
) -> Vec<Vec<Level>> {
    let mut distances: Vec<u32> = machine
        .cpu_nodes()
        .flat_map(|a| machine.cpu_nodes().map(move |b| machine.distance(a, b)))
        .collect();
    distances.sort_unstable();
    distances.dedup();
    let mut levels = vec![Tl::Mc];
    levels.extend((0..distances.len()).map(Tl::Numa));
    let mut topo = Topology {
        machine,
        params,
        levels,
        distances,
        spans: Vec::new(),
        masks: RefCell::default(),
    };
    let everything = CpuSet::from_ids(machine.cpus(), 0..machine.cpus());
    topo.spans = (0..machine.cpus())
        .map(|cpu| {
            let mut chain: Vec<CpuSet> = Vec::new();
            for &tl in &topo.levels {
                let mut span = topo.mask(tl, cpu);
                if let Some(child) = chain.last() {
                    if !child.is_subset(&span) {
                        // "BUG: arch topology borken": ensure the domain has its child's CPUs.
                        span.union_with(child);
                    }
                }
                let done = span == everything;
                chain.push(span);
                if done {
                    break;
                }
            }
            chain
        })
        .collect();
    (0..machine.cpus())
        .map(|cpu| {
            let chain = (0..topo.spans[cpu].len())
                .map(|t| {
                    let (name, p) = topo.params(t, &topo.spans[cpu][t]);
                    let groups = if p.flags & sd::OVERLAP != 0 {
                        topo.overlap_groups(cpu, t)
                    } else {
                        topo.groups(cpu, t)
                    };
                    Level::new(name, topo.spans[cpu][t].clone(), groups, p)
                })
                .collect();
            shared.chain(cpu, Era::Modern.attach(chain))
        })
        .collect()
}
