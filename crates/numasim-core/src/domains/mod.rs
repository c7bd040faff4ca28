//! Scheduling-domain hierarchies: for every CPU, an ordered list of levels, each with
//! a span, groups (balanced against each other, with balance masks) and its balancing parameters.
//!
//! ```text
//!   cpu 0:  level 2  span {0..31}   groups [{0..7}] [{8..15}] ...     (node params)
//!           level 1  span {0..7}    groups [{0,1}] [{2,3}] ...        (node params)
//!           level 0  span {0,1}     groups [{0}] [{1}]                (in-node params)
//! ```
//!
//! Builders, one module each, selected by name through [`Builder`]:
//! `flat`, `node-only`, `two-level` (`era26`: 2.6.18 `build_sched_domains`),
//! `multilevel` (Corrêa, Zorzo & Scheer, SAC 2006) and `linux` (Linux 6.x `topology.c`).
//!
//! Every builder does the same three steps:
//! 1. build each CPU's chain of candidate domains (span + flags + parameters);
//! 2. build each domain's groups in the kernel's order (starting with the CPU's own group);
//! 3. remove the domains that do not contribute to scheduling, as `cpu_attach_domain` does
//!    (`sd_degenerate` / `sd_parent_degenerate`, in the era's own version);
//! 4. share what the CPUs' hierarchies have in common ([`Interner`]): equal CPU sets are one
//!    allocation and equal groups one id, as the kernel shares a `sched_group` between the CPUs
//!    of a domain — a 4 096-CPU machine has 1.2 million (group, CPU) pairs but a few thousand
//!    distinct groups.

pub mod era26;
pub mod linux;
pub mod multilevel;

use std::fmt;
use std::hash::Hash;
use std::str::FromStr;
use std::sync::Arc;

use serde::Serialize;

use crate::cpuset::CpuSet;
use crate::error::InputError;
use crate::machine::Machine;

/// Scheduling-domain flags (`SD_*` in `include/linux/sched/sd_flags.h`, and the 2.6.18 ones).
pub mod sd {
    pub const LOAD_BALANCE: u32 = 1 << 0;
    pub const BALANCE_NEWIDLE: u32 = 1 << 1;
    pub const BALANCE_EXEC: u32 = 1 << 2;
    pub const BALANCE_FORK: u32 = 1 << 3;
    pub const BALANCE_WAKE: u32 = 1 << 4;
    pub const WAKE_AFFINE: u32 = 1 << 5;
    /// 2.6 only: balance on wake-up (a weaker `WAKE_AFFINE`).
    pub const WAKE_BALANCE: u32 = 1 << 6;
    pub const SHARE_CPUCAPACITY: u32 = 1 << 7;
    pub const SHARE_PKG_RESOURCES: u32 = 1 << 8;
    pub const SERIALIZE: u32 = 1 << 9;
    pub const PREFER_SIBLING: u32 = 1 << 10;
    pub const OVERLAP: u32 = 1 << 11;
    pub const NUMA: u32 = 1 << 12;

    pub(crate) const NAMES: [(u32, &str); 13] = [
        (LOAD_BALANCE, "SD_LOAD_BALANCE"),
        (BALANCE_NEWIDLE, "SD_BALANCE_NEWIDLE"),
        (BALANCE_EXEC, "SD_BALANCE_EXEC"),
        (BALANCE_FORK, "SD_BALANCE_FORK"),
        (BALANCE_WAKE, "SD_BALANCE_WAKE"),
        (WAKE_AFFINE, "SD_WAKE_AFFINE"),
        (WAKE_BALANCE, "SD_WAKE_BALANCE"),
        (SHARE_CPUCAPACITY, "SD_SHARE_CPUCAPACITY"),
        (SHARE_PKG_RESOURCES, "SD_SHARE_PKG_RESOURCES"),
        (SERIALIZE, "SD_SERIALIZE"),
        (PREFER_SIBLING, "SD_PREFER_SIBLING"),
        (OVERLAP, "SD_OVERLAP"),
        (NUMA, "SD_NUMA"),
    ];

    /// The names of the flags set in `flags`.
    pub fn names(flags: u32) -> Vec<&'static str> {
        NAMES
            .iter()
            .filter(|(bit, _)| flags & bit != 0)
            .map(|(_, name)| *name)
            .collect()
    }
}

/// Balancing parameters of one level.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LevelParams {
    pub min_interval_ms: u64,
    pub max_interval_ms: u64,
    pub busy_factor: u32,
    pub imbalance_pct: u32,
    pub cache_nice_tries: u32,
    /// 2.6: the level's cache-hot time; modern: `sysctl_sched_migration_cost`.
    pub cache_hot_ns: u64,
    /// `SD_*` flags (see [`sd`]).
    pub flags: u32,
    /// 2.6 load-average indices (`busy_idx`, `idle_idx`, `newidle_idx`, `forkexec_idx`): which
    /// decayed `cpu_load[]` the balancer reads in each situation (0 = instantaneous).
    pub load_idx: LoadIdx,
}

/// 2.6 load-average indices of a level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct LoadIdx {
    pub busy: usize,
    pub idle: usize,
    pub newidle: usize,
    pub forkexec: usize,
}

/// The 2.6-era parameter sets (from 2.6.18 `SD_CPU_INIT` / `SD_NODE_INIT`).
#[derive(Debug, Clone, PartialEq)]
pub struct Era26Params {
    /// Levels inside a node (`SD_CPU_INIT`): 1/4 ms, busy_factor 64, 125 %, 1 try, 2.5 ms hot.
    pub in_node: LevelParams,
    /// Levels between nodes (`SD_NODE_INIT`): 8/32 ms, busy_factor 32, 125 %, 2 tries, 10 ms hot.
    pub node: LevelParams,
}

impl Default for Era26Params {
    fn default() -> Self {
        // The node values (8/32 ms, busy_factor 32, 125 %, 2 tries) are x86_64's
        // 2.6.18 SD_NODE_INIT (include/asm-x86_64/topology.h); the in-node ones the generic
        // SD_CPU_INIT (include/linux/topology.h). Flags follow the same headers: newly-idle
        // balancing only inside a node; wake-affine inside a node, wake-balance between nodes.
        Self {
            in_node: LevelParams {
                min_interval_ms: 1,
                max_interval_ms: 4,
                busy_factor: 64,
                imbalance_pct: 125,
                cache_nice_tries: 1,
                cache_hot_ns: 2_500_000,
                flags: sd::LOAD_BALANCE
                    | sd::BALANCE_NEWIDLE
                    | sd::BALANCE_EXEC
                    | sd::BALANCE_FORK
                    | sd::WAKE_AFFINE,
                load_idx: LoadIdx {
                    busy: 2,
                    idle: 1,
                    newidle: 2,
                    forkexec: 1,
                },
            },
            node: LevelParams {
                min_interval_ms: 8,
                max_interval_ms: 32,
                busy_factor: 32,
                imbalance_pct: 125,
                cache_nice_tries: 2,
                cache_hot_ns: 10_000_000,
                flags: sd::LOAD_BALANCE | sd::BALANCE_EXEC | sd::BALANCE_FORK | sd::WAKE_BALANCE,
                load_idx: LoadIdx {
                    busy: 3,
                    idle: 2,
                    newidle: 2,
                    forkexec: 1,
                },
            },
        }
    }
}

/// Modern-kernel parameters (Linux 6.x `sd_init`, `kernel/sched/topology.c`).
#[derive(Debug, Clone, PartialEq)]
pub struct ModernParams {
    pub busy_factor: u32,
    pub imbalance_pct: u32,
    /// `imbalance_pct` of SMT levels.
    pub smt_imbalance_pct: u32,
    /// `sysctl_sched_migration_cost` (0.5 ms).
    pub migration_cost_ns: u64,
    /// `node_reclaim_distance` (`RECLAIM_DISTANCE`, 30): NUMA levels beyond it lose
    /// fork/exec balancing and wake-affine.
    pub reclaim_distance: u32,
}

impl Default for ModernParams {
    fn default() -> Self {
        Self {
            busy_factor: 16,
            imbalance_pct: 117,
            smt_imbalance_pct: 110,
            migration_cost_ns: 500_000,
            reclaim_distance: 30,
        }
    }
}

/// Parameters for every builder; each value overridable in configuration.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BuildOptions {
    pub era26: Era26Params,
    pub modern: ModernParams,
}

/// A group of CPUs balanced as one unit against the other groups of its level.
#[derive(Debug, Clone, Eq)]
pub struct Group {
    pub span: Arc<CpuSet>,
    /// The CPUs allowed to balance on behalf of this group (`group_balance_mask`).
    pub balance_mask: Arc<CpuSet>,
    /// Its index among the distinct groups of its [`Domains`]: every CPU's copy of a group
    /// with the same span and balance mask has the same id ([`Domains::group_spans`]).
    pub id: u32,
    /// CPUs in its span (the kernel's `group_weight`).
    pub weight: usize,
    /// Whether it holds the CPU whose hierarchy it is in (the balancer's `local_group`).
    pub local: bool,
}

impl Group {
    /// A group of `span` balanced by `balance_mask` (its id is given when its hierarchy is
    /// shared, at the end of [`Builder::build`]).
    pub fn new(span: CpuSet, balance_mask: CpuSet) -> Self {
        Self {
            weight: span.len(),
            span: Arc::new(span),
            balance_mask: Arc::new(balance_mask),
            id: u32::MAX,
            local: false,
        }
    }
}

/// Groups are equal when their CPUs are: the id only names them within one [`Domains`], and
/// `local` is relative to a CPU.
impl PartialEq for Group {
    fn eq(&self, other: &Self) -> bool {
        self.span == other.span && self.balance_mask == other.balance_mask
    }
}

/// Where a level's groups lie on a ring of [`Domains::rings`]: the level lists the ring's group
/// ids from position `start` on, wrapping round (the kernel's circular list of `sched_group`s,
/// entered at the CPU's own group).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingAt {
    pub ring: u32,
    pub start: u32,
}

/// Levels of at least this many groups get a ring ([`Level::ring`]), whose bounds the engine
/// keeps in a tree: below it, reading every group's bound costs less than keeping the tree.
pub const RING_MIN_GROUPS: usize = 32;

/// One level of one CPU's hierarchy.
#[derive(Debug, Clone)]
pub struct Level {
    pub name: String,
    pub span: Arc<CpuSet>,
    /// Groups in the kernel's order, starting with the one that holds the CPU. The CPUs whose
    /// levels list the same groups with the same local one share one list (as the kernel's
    /// CPUs share their `sched_group`s): a scan of a big level reads memory other CPUs read.
    pub groups: Arc<[Group]>,
    pub params: LevelParams,
    /// The CPUs of its groups: its span, or more where overlapping NUMA groups reach beyond
    /// it (a balancer that sees none of these CPUs overloaded has nothing to look at).
    pub reach: Arc<CpuSet>,
    /// CPUs in its span (the kernel's `span_weight`).
    pub weight: usize,
    /// Its place on a ring, when it has [`RING_MIN_GROUPS`] groups or more, its own first and
    /// no other its own, listed as a rotation of a ring ([`Builder::build`]): the engine then
    /// answers questions about its groups' bounds from a tree, without reading every group
    /// (`View::others_max_bound` and the like).
    pub ring: Option<RingAt>,
}

/// Levels are equal when their names, CPUs, groups (in order) and parameters are: the ring
/// only names one within its [`Domains`], as a group's id does.
impl PartialEq for Level {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
            && self.span == other.span
            && self.groups == other.groups
            && self.params == other.params
            && self.reach == other.reach
            && self.weight == other.weight
    }
}

impl Level {
    /// A level of `span` with `groups`.
    pub fn new(name: String, span: CpuSet, groups: Vec<Group>, params: LevelParams) -> Self {
        let mut reach = span.clone();
        for g in &groups {
            reach.union_with(&g.span);
        }
        Self {
            name,
            weight: span.len(),
            span: Arc::new(span),
            groups: groups.into(),
            params,
            reach: Arc::new(reach),
            ring: None,
        }
    }
}

/// Shares equal CPU sets and groups between hierarchies (build step 4).
///
/// Lookups only: ids are given in the order groups are first met (CPU by CPU, level by level),
/// so the hash maps' order never reaches a result.
///
/// `FxHash`: a CPU set is up to a few hundred words, and SipHash over a million of them was a
/// tenth of a 4 096-CPU run.
#[derive(Default)]
pub(crate) struct Interner {
    sets: rustc_hash::FxHashSet<Arc<CpuSet>>,
    /// (span, balance mask) allocations → group id.
    groups: rustc_hash::FxHashMap<(usize, usize), u32>,
    /// Span of each group id.
    spans: Vec<Arc<CpuSet>>,
    /// Group lists by their (id, local) sequence.
    lists: rustc_hash::FxHashMap<Vec<(u32, bool)>, Arc<[Group]>>,
    /// Levels a builder hands to several CPUs as one allocation (multilevel's levels above the
    /// CPU level, the same for every CPU of a node), by the address of their group list: what
    /// sharing made of them, reused without hashing their sets again when the next CPU has the
    /// same local group.
    levels: rustc_hash::FxHashMap<usize, SharedLevel>,
}

/// A level as a builder gave it (kept, so that its address is not reused while it is a key),
/// the local flags it was shared with, and its shared sets and groups.
struct SharedLevel {
    given: (Arc<CpuSet>, Arc<CpuSet>, Arc<[Group]>),
    local: Vec<bool>,
    shared: (Arc<CpuSet>, Arc<CpuSet>, Arc<[Group]>),
}

impl Interner {
    fn set(&mut self, s: &Arc<CpuSet>) -> Arc<CpuSet> {
        if let Some(shared) = self.sets.get(&**s) {
            return shared.clone();
        }
        self.sets.insert(s.clone());
        s.clone()
    }

    /// CPU `cpu`'s hierarchy with its sets and groups shared with the hierarchies seen before.
    pub(crate) fn chain(&mut self, cpu: usize, mut chain: Vec<Level>) -> Vec<Level> {
        for l in &mut chain {
            let key = Arc::as_ptr(&l.groups) as *const Group as usize;
            if let Some(seen) = self.levels.get(&key) {
                let (span, reach, groups) = &seen.given;
                if Arc::ptr_eq(span, &l.span)
                    && Arc::ptr_eq(reach, &l.reach)
                    && Arc::ptr_eq(groups, &l.groups)
                    && l.groups
                        .iter()
                        .zip(&seen.local)
                        .all(|(g, &local)| g.span.contains(cpu) == local)
                {
                    let (span, reach, groups) = seen.shared.clone();
                    (l.span, l.reach, l.groups) = (span, reach, groups);
                    continue;
                }
            }
            let given = (l.span.clone(), l.reach.clone(), l.groups.clone());
            l.span = self.set(&l.span);
            l.reach = self.set(&l.reach);
            let mut groups = l.groups.to_vec();
            for g in &mut groups {
                g.span = self.set(&g.span);
                g.balance_mask = self.set(&g.balance_mask);
                g.local = g.span.contains(cpu);
                let key = (
                    Arc::as_ptr(&g.span) as usize,
                    Arc::as_ptr(&g.balance_mask) as usize,
                );
                let next = self.spans.len() as u32;
                g.id = *self.groups.entry(key).or_insert(next);
                if g.id == next {
                    self.spans.push(g.span.clone());
                }
            }
            let key: Vec<(u32, bool)> = groups.iter().map(|g| (g.id, g.local)).collect();
            l.groups = self
                .lists
                .entry(key)
                .or_insert_with(|| groups.into())
                .clone();
            // Held by the builder too (count > 1: `given` and the builder's own): other CPUs will
            // be given the same level. A level made for this CPU alone is not kept.
            if Arc::strong_count(&given.2) > 1 {
                let local = l.groups.iter().map(|g| g.local).collect();
                let key = Arc::as_ptr(&given.2) as *const Group as usize;
                let shared = (l.span.clone(), l.reach.clone(), l.groups.clone());
                self.levels.insert(
                    key,
                    SharedLevel {
                        given,
                        local,
                        shared,
                    },
                );
            }
        }
        chain
    }
}

/// The domain builders, by configuration name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Builder {
    Flat,
    NodeOnly,
    TwoLevel,
    Multilevel,
    Linux,
}

impl Builder {
    /// Every builder, in presentation order.
    pub const ALL: [Builder; 5] = [
        Self::Flat,
        Self::NodeOnly,
        Self::TwoLevel,
        Self::Multilevel,
        Self::Linux,
    ];

    /// Configuration name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Flat => "flat",
            Self::NodeOnly => "node-only",
            Self::TwoLevel => "two-level",
            Self::Multilevel => "multilevel",
            Self::Linux => "linux",
        }
    }

    /// One-line description.
    pub fn description(self) -> &'static str {
        match self {
            Self::Flat => "one level over all CPUs, one group per CPU (\"1 level SMP\")",
            Self::NodeOnly => "one level over all CPUs, one group per node (\"1 level NUMA\")",
            Self::TwoLevel => {
                "2005-era Linux: node level, then own node + 15 nearest, all nodes above 16"
            }
            Self::Multilevel => {
                "one level per memory access level (distinct distance) of each node"
            }
            Self::Linux => "Linux 6.x: MC, then one overlapping NUMA level per distinct distance",
        }
    }

    /// Where it comes from.
    pub fn reference(self) -> &'static str {
        match self {
            Self::Flat | Self::NodeOnly => {
                "Corrêa, Zorzo & Scheer, SAC 2006 (comparison configurations)"
            }
            Self::TwoLevel => "Linux 2.6.18 kernel/sched.c build_sched_domains, sched_domain_node_span",
            Self::Multilevel => "Corrêa, Zorzo & Scheer, Operating system multilevel load balancing, SAC 2006",
            Self::Linux => "Linux 6.1 kernel/sched/topology.c sched_init_numa, build_sched_domains, build_overlap_sched_groups",
        }
    }

    /// Builds the hierarchy of every CPU of `machine`.
    pub fn build(self, machine: &Machine, options: &BuildOptions) -> Domains {
        let mut shared = Interner::default();
        let mut cpus = match self {
            Self::Flat => era26::flat(machine, &options.era26, &mut shared),
            Self::NodeOnly => era26::node_only(machine, &options.era26, &mut shared),
            Self::TwoLevel => era26::two_level(machine, &options.era26, &mut shared),
            Self::Multilevel => multilevel::build(machine, &options.era26, &mut shared),
            Self::Linux => linux::build(machine, &options.modern, &mut shared),
        };
        let rings = find_rings(&mut cpus);
        let mut member_of = vec![Vec::new(); machine.cpus()];
        for (id, span) in shared.spans.iter().enumerate() {
            for c in span.iter() {
                member_of[c].push(id as u32);
            }
        }
        Domains {
            builder: self,
            cpus,
            group_spans: shared.spans,
            member_of,
            rings,
        }
    }
}

/// Gives every level of [`RING_MIN_GROUPS`] groups or more that lists its own group first, and
/// no other of its own, a ring: the cyclic order of its group ids, shared by every level that
/// lists the same ids in the same cyclic order (each CPU enters the kernel's circular list of
/// groups at its own). Returns the rings, each from its smallest id. A list with an id twice
/// gets none.
fn find_rings(cpus: &mut [Vec<Level>]) -> Vec<Vec<u32>> {
    let mut rings: Vec<Vec<u32>> = Vec::new();
    let mut by_ids: rustc_hash::FxHashMap<Vec<u32>, u32> = Default::default();
    // By the address of a shared group list (all alive through the pass): its ring, once.
    let mut by_list: rustc_hash::FxHashMap<usize, Option<RingAt>> = Default::default();
    for l in cpus.iter_mut().flatten() {
        if l.groups.len() < RING_MIN_GROUPS
            || !l.groups[0].local
            || l.groups[1..].iter().any(|g| g.local)
        {
            continue;
        }
        let key = Arc::as_ptr(&l.groups) as *const Group as usize;
        l.ring = *by_list.entry(key).or_insert_with(|| {
            let ids: Vec<u32> = l.groups.iter().map(|g| g.id).collect();
            let mut sorted = ids.clone();
            sorted.sort_unstable();
            sorted.dedup();
            if sorted.len() != ids.len() {
                return None;
            }
            let first = ids.iter().position(|&id| id == sorted[0]).expect("present");
            let cyclic: Vec<u32> = ids[first..].iter().chain(&ids[..first]).copied().collect();
            let next = rings.len() as u32;
            let ring = *by_ids.entry(cyclic.clone()).or_insert(next);
            if ring == next {
                rings.push(cyclic);
            }
            Some(RingAt {
                ring,
                start: ((ids.len() - first) % ids.len()) as u32,
            })
        });
    }
    rings
}

impl fmt::Display for Builder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Builder {
    type Err = InputError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|b| b.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Self::ALL.iter().map(|b| b.name()).collect();
                InputError::new(
                    "--domains",
                    format!(
                        "unknown domain builder '{s}'; choose one of {}",
                        names.join(", ")
                    ),
                )
            })
    }
}

/// Every CPU's hierarchy, from the lowest level up.
#[derive(Debug, Clone, PartialEq)]
pub struct Domains {
    pub builder: Builder,
    /// `cpus[c]` = the levels of CPU c, lowest first.
    pub cpus: Vec<Vec<Level>>,
    /// The span of each distinct group, by [`Group::id`].
    pub group_spans: Vec<Arc<CpuSet>>,
    /// `member_of[c]` = the ids of the distinct groups whose span holds CPU c, ascending.
    pub member_of: Vec<Vec<u32>>,
    /// The rings of group ids the levels with a [`Level::ring`] are rotations of.
    pub rings: Vec<Vec<u32>>,
}

impl Domains {
    /// The walk down `cpu`'s levels that places a new task (2.6.18 `sched_balance_self`, 6.x
    /// `sched_balance_find_dst_cpu`: the same loop): from level `start`, a level with `flag`
    /// may `pick(level index, cpu)` a new CPU (the idlest CPU of its idlest group); a new CPU
    /// goes on from its highest level with `flag` below the picked level's weight, anything
    /// else one level down. Returns the CPU the walk ends on.
    pub fn place_down(
        &self,
        mut cpu: usize,
        start: Option<usize>,
        flag: u32,
        mut pick: impl FnMut(usize, usize) -> Option<usize>,
    ) -> usize {
        let mut sd = start;
        while let Some(li) = sd {
            let level = &self.cpus[cpu][li];
            let child = li.checked_sub(1);
            if level.params.flags & flag == 0 {
                sd = child;
                continue;
            }
            let new_cpu = match pick(li, cpu) {
                Some(c) if c != cpu => c,
                _ => {
                    sd = child;
                    continue;
                }
            };
            let weight = level.weight;
            cpu = new_cpu;
            sd = None;
            for (l2, tmp) in self.cpus[cpu].iter().enumerate() {
                if weight <= tmp.weight {
                    break;
                }
                if tmp.params.flags & flag != 0 {
                    sd = Some(l2);
                }
            }
        }
        cpu
    }

    /// Whether `level` (one of these domains' levels) is load-balanced periodically.
    ///
    /// The 2005-era builders say so with 2.6's `SD_LOAD_BALANCE`, which they set on every level.
    /// Linux 6.x balances every sched domain: the flag was removed in v5.10 ("sched/topology:
    /// Remove SD_LOAD_BALANCE", every domain had it set by `sd_init` since it was not a
    /// tunable any more), so `linux` levels carry no such bit and are always balanced. The
    /// 6.x flags the `linux` builder sets keep their 2.6 meaning for a 2.6-era balancer
    /// (`SD_BALANCE_NEWIDLE`, `SD_BALANCE_FORK`, `SD_BALANCE_EXEC`, `SD_WAKE_AFFINE`); see
    /// docs/domains.md.
    pub fn load_balances(&self, level: &Level) -> bool {
        match self.builder {
            Builder::Linux => true,
            Builder::Flat | Builder::NodeOnly | Builder::TwoLevel | Builder::Multilevel => {
                level.params.flags & sd::LOAD_BALANCE != 0
            }
        }
    }

    /// The JSON of `numasim topology --json`'s `"domains"`: `{"builder": NAME, "cpus": {"0": [{"level": 0, "name": ...,
    /// "span": [...], "groups": [{"span": [...], "balance_mask": [...]}], "imbalance_pct": ..,
    /// "min_interval_ms": .., "max_interval_ms": .., "busy_factor": ..}, ...], ...}}`.
    pub fn to_json(&self) -> serde_json::Value {
        let cpus: serde_json::Map<String, serde_json::Value> = self
            .cpus
            .iter()
            .enumerate()
            .map(|(cpu, levels)| {
                let levels: Vec<_> = levels
                    .iter()
                    .enumerate()
                    .map(|(i, l)| {
                        serde_json::json!({
                            "level": i,
                            "name": l.name,
                            "span": l.span.to_vec(),
                            "groups": l.groups.iter().map(|g| serde_json::json!({
                                "span": g.span.to_vec(),
                                "balance_mask": g.balance_mask.to_vec(),
                            })).collect::<Vec<_>>(),
                            "imbalance_pct": l.params.imbalance_pct,
                            "min_interval_ms": l.params.min_interval_ms,
                            "max_interval_ms": l.params.max_interval_ms,
                            "busy_factor": l.params.busy_factor,
                        })
                    })
                    .collect();
                (cpu.to_string(), serde_json::Value::Array(levels))
            })
            .collect();
        serde_json::json!({ "builder": self.builder.name(), "cpus": cpus })
    }

    /// [`Domains::to_json`] as text, written straight from the hierarchy: no `serde_json::Value`
    /// tree (a number in it takes 32 bytes; on a 2 000-CPU machine the tree took gigabytes).
    pub fn to_json_string(&self) -> String {
        serde_json::to_string(&JsonDomains(self)).expect("serialisable")
    }

    /// The CPUs that share one hierarchy (the same levels: names, spans and sets of groups,
    /// whatever order the groups are listed in), in order of their lowest CPU; each list is
    /// sorted, so its first CPU is the one to show.
    ///
    /// 1. Each CPU's hierarchy gets a hash of its levels: name, span, and the sum of its
    ///    groups' hashes (a sum, so group order does not matter).
    /// 2. A CPU joins the first class with the same hash whose representative it equals
    ///    exactly ([`same_levels`]); otherwise it opens a class. A hash collision can only cost
    ///    a comparison, never merge two different hierarchies.
    ///
    /// Time linear in the size of the hierarchies (plus sorting the groups of the levels that
    /// are compared); memory one hash per CPU.
    pub fn distinct_hierarchies(&self) -> Vec<Vec<usize>> {
        use std::collections::BTreeMap;

        let mut classes: Vec<Vec<usize>> = Vec::new();
        let mut by_hash: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
        for (cpu, levels) in self.cpus.iter().enumerate() {
            let key = hash_of(|h| {
                for l in levels {
                    l.name.hash(h);
                    l.span.hash(h);
                    let sum = l
                        .groups
                        .iter()
                        .map(group_hash)
                        .fold(0u64, u64::wrapping_add);
                    sum.hash(h);
                }
            });
            let candidates = by_hash.entry(key).or_default();
            match candidates
                .iter()
                .find(|&&c| same_levels(&self.cpus[classes[c][0]], levels))
            {
                Some(&c) => classes[c].push(cpu),
                None => {
                    candidates.push(classes.len());
                    classes.push(vec![cpu]);
                }
            }
        }
        classes
    }

    /// What `numasim topology` shows, as JSON text: `{"builder": NAME, "hierarchies": [{"cpus":
    /// "0-1", "levels": [{"level", "name", "span": "0-3", "span_cpus": 4, "groups": [{"span",
    /// "balance_mask"}], "imbalance_pct", "min_interval_ms", "max_interval_ms", "busy_factor",
    /// "flags", "cache_nice_tries", "cache_hot_ns"}], "nodes": "0"}]}`: one entry per distinct
    /// hierarchy
    /// ([`Domains::distinct_hierarchies`]) shown by its first CPU, CPU sets in the kernel's
    /// cpulist form. Its size is that of the text it becomes, not of every CPU's hierarchy.
    pub fn shown_json_string(&self, machine: &Machine) -> String {
        let hierarchies: Vec<_> = self
            .distinct_hierarchies()
            .into_iter()
            .map(|cpus| JsonHierarchy {
                first: cpus[0],
                cpus: CpuSet::from_ids(self.cpus.len(), cpus.iter().copied()).to_cpulist(),
                nodes: CpuSet::from_ids(machine.nodes(), cpus.iter().map(|&c| machine.cpu_node(c)))
                    .to_cpulist(),
                levels: self.cpus[cpus[0]]
                    .iter()
                    .enumerate()
                    .map(shown_level)
                    .collect(),
            })
            .collect();
        serde_json::to_string(&JsonShown {
            builder: self.builder.name(),
            hierarchies,
        })
        .expect("serialisable")
    }
}

fn hash_of(value: impl FnOnce(&mut std::hash::DefaultHasher)) -> u64 {
    use std::hash::Hasher;
    let mut h = std::hash::DefaultHasher::new();
    value(&mut h);
    h.finish()
}

fn group_hash(g: &Group) -> u64 {
    hash_of(|h| {
        g.span.hash(h);
        g.balance_mask.hash(h);
    })
}

/// Whether two CPUs' hierarchies are equal level by level, each level's groups as a set.
fn same_levels(a: &[Level], b: &[Level]) -> bool {
    let sorted = |l: &Level| {
        let mut order: Vec<(u64, usize)> = l
            .groups
            .iter()
            .enumerate()
            .map(|(i, g)| (group_hash(g), i))
            .collect();
        order.sort_unstable();
        order
    };
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x.name == y.name
                && x.span == y.span
                && x.groups.len() == y.groups.len()
                && (x.groups == y.groups
                    || sorted(x)
                        .iter()
                        .zip(&sorted(y))
                        .all(|(&(_, i), &(_, j))| x.groups[i] == y.groups[j]))
        })
}

#[derive(Serialize)]
struct JsonShown {
    builder: &'static str,
    hierarchies: Vec<JsonHierarchy>,
}

#[derive(Serialize)]
struct JsonHierarchy {
    cpus: String,
    first: usize,
    /// The nodes of `cpus` (a node-id set, written like a cpulist).
    nodes: String,
    levels: Vec<JsonShownLevel>,
}

#[derive(Serialize)]
struct JsonShownLevel {
    level: usize,
    name: String,
    span: String,
    span_cpus: usize,
    groups: Vec<[String; 2]>,
    imbalance_pct: u32,
    min_interval_ms: u64,
    max_interval_ms: u64,
    busy_factor: u32,
    flags: Vec<&'static str>,
    cache_nice_tries: u32,
    cache_hot_ns: u64,
}

fn shown_level((i, l): (usize, &Level)) -> JsonShownLevel {
    JsonShownLevel {
        level: i,
        name: l.name.clone(),
        span: l.span.to_cpulist(),
        span_cpus: l.span.len(),
        groups: l
            .groups
            .iter()
            .map(|g| [g.span.to_cpulist(), g.balance_mask.to_cpulist()])
            .collect(),
        imbalance_pct: l.params.imbalance_pct,
        min_interval_ms: l.params.min_interval_ms,
        max_interval_ms: l.params.max_interval_ms,
        busy_factor: l.params.busy_factor,
        flags: sd::names(l.params.flags),
        cache_nice_tries: l.params.cache_nice_tries,
        cache_hot_ns: l.params.cache_hot_ns,
    }
}

fn json_level(i: usize, l: &Level) -> JsonLevel<'_> {
    JsonLevel {
        level: i,
        name: &l.name,
        span: &l.span,
        groups: l
            .groups
            .iter()
            .map(|g| JsonGroup {
                span: &g.span,
                balance_mask: &g.balance_mask,
            })
            .collect(),
        imbalance_pct: l.params.imbalance_pct,
        min_interval_ms: l.params.min_interval_ms,
        max_interval_ms: l.params.max_interval_ms,
        busy_factor: l.params.busy_factor,
    }
}

/// The `topology --json` shape, serialised without an intermediate `Value`.
struct JsonDomains<'a>(&'a Domains);

#[derive(Serialize)]
struct JsonLevel<'a> {
    level: usize,
    name: &'a str,
    span: &'a CpuSet,
    groups: Vec<JsonGroup<'a>>,
    imbalance_pct: u32,
    min_interval_ms: u64,
    max_interval_ms: u64,
    busy_factor: u32,
}

#[derive(Serialize)]
struct JsonGroup<'a> {
    span: &'a CpuSet,
    balance_mask: &'a CpuSet,
}

struct JsonCpu<'a>(&'a [Level]);

impl Serialize for JsonCpu<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().enumerate().map(|(i, l)| json_level(i, l)))
    }
}

struct JsonCpus<'a>(&'a [Vec<Level>]);

impl Serialize for JsonCpus<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(
            self.0
                .iter()
                .enumerate()
                .map(|(cpu, levels)| (cpu.to_string(), JsonCpu(levels))),
        )
    }
}

impl Serialize for JsonDomains<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(2))?;
        map.serialize_entry("builder", self.0.builder.name())?;
        map.serialize_entry("cpus", &JsonCpus(&self.0.cpus))?;
        map.end()
    }
}

/// Which kernel's rules decide that a domain is degenerate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Era {
    /// 2.6.18 `sd_degenerate` / `sd_parent_degenerate` / `cpu_attach_domain`.
    Linux26,
    /// 6.x versions of the same functions.
    Modern,
}

impl Era {
    /// Flags that need at least two groups to mean anything.
    fn needs_groups(self) -> u32 {
        match self {
            Era::Linux26 => {
                sd::LOAD_BALANCE
                    | sd::BALANCE_NEWIDLE
                    | sd::BALANCE_FORK
                    | sd::BALANCE_EXEC
                    | sd::SHARE_CPUCAPACITY
                    | sd::SHARE_PKG_RESOURCES
            }
            // SD_DEGENERATE_GROUPS_MASK: every flag with SDF_NEEDS_GROUPS.
            Era::Modern => {
                sd::BALANCE_NEWIDLE
                    | sd::BALANCE_EXEC
                    | sd::BALANCE_FORK
                    | sd::BALANCE_WAKE
                    | sd::SHARE_CPUCAPACITY
                    | sd::SHARE_PKG_RESOURCES
                    | sd::SERIALIZE
                    | sd::PREFER_SIBLING
                    | sd::OVERLAP
                    | sd::NUMA
            }
        }
    }

    /// Flags that keep a domain without using its groups.
    fn no_groups(self) -> u32 {
        match self {
            Era::Linux26 => sd::WAKE_AFFINE | sd::WAKE_BALANCE,
            Era::Modern => sd::WAKE_AFFINE,
        }
    }

    fn degenerate(self, l: &Level) -> bool {
        if l.span.len() == 1 {
            return true;
        }
        if l.params.flags & self.needs_groups() != 0 && l.groups.len() > 1 {
            return false;
        }
        l.params.flags & self.no_groups() == 0
    }

    fn parent_degenerate(self, child: &Level, parent: &Level) -> bool {
        if self.degenerate(parent) {
            return true;
        }
        if child.span != parent.span {
            return false;
        }
        let cflags = child.params.flags;
        let mut pflags = parent.params.flags;
        if self == Era::Linux26 && cflags & sd::WAKE_AFFINE != 0 {
            // "WAKE_BALANCE is a subset of WAKE_AFFINE"
            pflags &= !sd::WAKE_BALANCE;
        }
        if parent.groups.len() == 1 {
            pflags &= !self.needs_groups();
        }
        !cflags & pflags == 0
    }

    /// `cpu_attach_domain`: drops the levels that do not contribute to scheduling.
    pub(crate) fn attach(self, mut chain: Vec<Level>) -> Vec<Level> {
        let mut i = 0;
        while i + 1 < chain.len() {
            if self.parent_degenerate(&chain[i], &chain[i + 1]) {
                let parent = chain.remove(i + 1);
                match self {
                    Era::Modern => {
                        if parent.params.flags & sd::PREFER_SIBLING != 0 {
                            chain[i].params.flags |= sd::PREFER_SIBLING;
                        }
                    }
                    // 2.6.18 moves on to the new parent without re-checking this pair.
                    Era::Linux26 => i += 1,
                }
            } else {
                i += 1;
            }
        }
        if chain.first().is_some_and(|l| self.degenerate(l)) {
            chain.remove(0);
        }
        chain
    }
}

/// Groups of `sets`, each its own balance mask, in the order given.
pub(crate) fn plain_groups(sets: impl IntoIterator<Item = CpuSet>) -> Vec<Group> {
    sets.into_iter()
        .map(|span| Group::new(span.clone(), span))
        .collect()
}

/// Nodes with CPUs, starting at `node` and wrapping (2.6.18's `(node + j) % MAX_NUMNODES` walk).
pub(crate) fn nodes_wrapping_from(machine: &Machine, node: usize) -> Vec<usize> {
    let n = machine.nodes();
    (0..n)
        .map(|j| (node + j) % n)
        .filter(|&k| !machine.node_cpus(k).is_empty())
        .collect()
}

/// The CPU set of `node`.
pub(crate) fn node_set(machine: &Machine, node: usize) -> CpuSet {
    CpuSet::from_ids(machine.cpus(), machine.node_cpus(node).iter().copied())
}
