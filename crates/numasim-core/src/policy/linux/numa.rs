//! Automatic NUMA balancing (`numa_balancing=on`, an option of `linux`): a component the `linux`
//! policy calls from each scheduler tick of a running task and from `can_migrate_task`. It
//! scans a task's memory, takes the hinting faults the marked pages cause as the task runs,
//! keeps per-task and per-group fault statistics, picks a preferred node, migrates pages on
//! faults through the two-stage filter and moves or swaps the task toward its preferred node.
//! Sources: Linux 6.x `kernel/sched/fair.c` and `mm/memory.c` (functions named at each step).
//!
//! ```text
//!   mm (thread group)  next_scan_ns, scan offset, scan_seq, last pass: marked fraction f
//!        │  task_numa_work: mark ≤ scan_size_mb of the footprint (f of every part, every node)
//!        ▼
//!   task p (thread t)  runs on node n ── faults on its marked pages, per page node k:
//!        private:  f · private_t[k]                 last access: p itself, or none yet
//!        shared:   f · shared[k] / T                last access: a thread of the group,
//!                                                   each with weight 1/T (its last fault node)
//!        │  should_numa_migrate_memory (k ≠ n): migrate → PageMove k → n
//!        ▼  task_numa_fault
//!   faults  membuf[k][priv], cpubuf[n][priv], locality[local]      (task; group: same deltas)
//!        │  task_numa_placement, once per new scan_seq: mem = mem/2 + membuf, cpu = cpu/2 + ...
//!        ▼  preferred node = argmax faults (group faults in a group); update_task_scan_period
//!   numa_migrate_preferred ─► task_numa_migrate ─► task_numa_find_cpu / task_numa_compare
//!                             ─► Move p to an idle CPU, or swap p with the task running there
//! ```
//!
//! 1. `init_numa_balancing`: a task is met at its first tick; its scan period starts at
//!    `scan_delay_ms`; the first thread of its group sets the group's first scan to
//!    `now + scan_delay_ms`; later threads start their stamp staggered and inherit the first
//!    thread's preferred node.
//! 2. `task_tick_numa`: when the task's CPU time passes `node_stamp + scan_period`, the stamp
//!    advances (the first time the period becomes `task_scan_start`), and if the group's
//!    `next_scan` has come the pass runs at once (`task_numa_work`): `next_scan = now + period`,
//!    the stamp moves 2 ticks on, up to `scan_size_mb` of the group's footprint from the scan
//!    offset is marked, and reaching the end of the footprint starts a new `scan_seq`. The pass
//!    costs `scan_cost_per_mb_ns` per MB marked, and the stamp moves 32× that on (the kernel's
//!    3 % cap on scanning time).
//! 3. Hinting faults: a thread takes the faults on the last pass's marks at once — the scanning
//!    thread right after its pass, the others at their next tick with CPU time since: every page
//!    it uses is touched within a tick (the working set is hot), each marked page faults once,
//!    and which thread of the group touches a shared page first is uniform — in expectation a
//!    thread takes `1/T` of the shared marks. Counts are expected values (f64), rounded to pages
//!    per (node, last accessor, locality); no randomness.
//! 4. `should_numa_migrate_memory` (`mm/memory.c do_numa_page` → `mpol_misplaced`), for a
//!    page on node k ≠ n, by who faulted on it last: early in the task's life (no preferred
//!    node, or `numa_scan_seq ≤ 4`) a first or own access migrates; an access last from another
//!    node does not (stage one); an own access migrates; with no group it migrates; else it
//!    migrates if the group's CPU faults on n exceed 3× those on k, or if
//!    `cpu(n)·mem(k)·3 > cpu(k)·mem(n)·4`. In expectation over the last accessor, the migrated
//!    amount is the sum of the fractions that pass.
//! 5. `task_numa_fault`: a first or own access is private, another thread's is shared (the
//!    thread joins its group's `numa_group`); a shared fault between two active nodes of a group
//!    spread over several counts as local; if the retry time has passed, `task_numa_placement`
//!    then `numa_migrate_preferred` run before the faults are added to the buffers.
//! 6. `task_numa_placement` (once per new `scan_seq`): halve and add the buffers (CPU faults
//!    weighted by the task's share of CPU time), the same deltas to the group, preferred node =
//!    the node with the most (group) faults, `numa_group_count_active_nodes`, then
//!    `update_task_scan_period`.
//! 7. `numa_migrate_preferred`: retry in `min(1 s, scan_period / 16)`; off the preferred node,
//!    `task_numa_migrate` looks for a CPU on it (then on other nodes that improve the task or its
//!    group, if none, or if the group is active on several nodes): `task_numa_find_cpu` moves to
//!    an idle CPU of a node with spare capacity when `adjust_numa_imbalance` forgives the
//!    imbalance, else `task_numa_compare` weighs each CPU's running task for a swap (`SMALLIMP`,
//!    hysteresis, `load_too_imbalanced`).
//! 8. A task found on another node than at its last tick had its period reset as the kernel's
//!    `update_scan_period` does on cross-node migrations.
//! 9. When the tick has work: a task with no faults, no preferred node and no pass of its group
//!    left to take is quiet until its CPU time passes `node_stamp + scan_period` (its mark,
//!    set after each tick run in full, cleared by whatever changes those); its tick below the
//!    mark only notes its CPU time and node. `next_tick_due_ns` gives the first instant a tick
//!    may have work (now, or for a quiet single-threaded task when its CPU time up to now
//!    would pass the mark), for a caller that ticks only then.
//!
//! Simplifications (docs/policies/linux-numa.md): every machine is `NUMA_DIRECT` (no
//! `score_nearby_nodes`, `preferred_group_nid` = the node found); node load is `1024 ×
//! nr_running` and a task's `h_load` 1024 (no PELT here: the caller's may replace it); page
//! migration never fails; a page move takes its share from every part of the group on the
//! source node (crate::memory); a group without sizes has a footprint of `unsized_footprint_mb`;
//! the tiering mode is not modelled; a finished thread's faults stay in its group.

use std::collections::BTreeMap;

use crate::interface::{Attempt, MigrationKind, Move, PageMove, Pid, PolicyContext, View};
use crate::machine::CpuId;

/// `NUMA_PERIOD_SLOTS` (`fair.c`, before `update_task_scan_period`).
pub const NUMA_PERIOD_SLOTS: u64 = 10;
/// `NUMA_PERIOD_THRESHOLD`: aim for 70 % local accesses.
pub const NUMA_PERIOD_THRESHOLD: u64 = 7;
/// `MAX_SCAN_WINDOW` (MB/s of PTEs scanned at most, `task_scan_min`).
pub const MAX_SCAN_WINDOW_MB: u64 = 2560;
/// `ACTIVE_NODE_FRACTION`: a node with more than 1/3 of the busiest node's CPU faults is active.
pub const ACTIVE_NODE_FRACTION: u64 = 3;
/// `SMALLIMP`: the least improvement (of 1998) a swap must bring (`task_numa_compare`).
pub const SMALLIMP: i64 = 30;
/// `NUMA_IMBALANCE_MIN` (`adjust_numa_imbalance`).
pub const NUMA_IMBALANCE_MIN: u64 = 2;
/// `LOAD_AVG_MAX` (`sched-pelt.h`): `numa_get_avg_runtime` before the first placement.
pub const LOAD_AVG_MAX: u64 = 47742;
/// The load of a nice-0 task at full PELT load (`NICE_0_LOAD` without the fixed-point shift).
pub const TASK_LOAD: i64 = 1024;
/// Capacity of a CPU at speed 1 (`SCHED_CAPACITY_SCALE`).
pub const CAPACITY_SCALE: f64 = 1024.0;
/// `numa_scan_seq` up to which a task is "early in its life" (`should_numa_migrate_memory`).
pub const EARLY_SCAN_SEQ: u64 = 4;
/// Pages per MB (4 KiB base pages, x86-64 `PAGE_SHIFT` 12).
pub const PAGES_PER_MB: f64 = crate::memory::PAGES_PER_MB;

const SHARED: usize = 0;
const PRIVATE: usize = 1;

/// Parameters (defaults: `fair.c` sysctls, `sd_init`, and the cost model of
/// docs/policies/linux-numa.md).
#[derive(Debug, Clone, PartialEq)]
pub struct NumaConfig {
    /// `sysctl_numa_balancing_scan_delay` (1000 ms).
    pub scan_delay_ms: u64,
    /// `sysctl_numa_balancing_scan_period_min` (1000 ms).
    pub scan_period_min_ms: u64,
    /// `sysctl_numa_balancing_scan_period_max` (60000 ms).
    pub scan_period_max_ms: u64,
    /// `sysctl_numa_balancing_scan_size` (256 MB).
    pub scan_size_mb: u64,
    /// Footprint of a thread group without sizes (single-threaded processes, `threads=T`
    /// groups): one scan window (256 MB), so every pass covers it and starts a new
    /// `scan_seq`, as for any task of at most 256 MB. An assumption: the workload gives none.
    pub unsized_footprint_mb: u64,
    /// `imbalance_pct` of the lowest NUMA domain (`sd_init`: 117); `task_numa_migrate` uses
    /// `100 + (pct − 100) / 2`.
    pub numa_imbalance_pct: u32,
    /// `imb_numa_nr` of the lowest NUMA domain; `None`: `max(1, cpus of the node >> 3)`, what
    /// `build_sched_domains` gives with one LLC per node.
    pub imb_numa_nr: Option<u64>,
    /// Marking PTEs `PROT_NONE` (`change_prot_numa`), per MB marked: 256 PTEs at 10 ns.
    pub scan_cost_per_mb_ns: u64,
    /// One hinting fault (a minor fault through `do_numa_page`), per page.
    pub fault_cost_ns: u64,
    /// Migrating one page (`migrate_misplaced_folio`: unmap, copy 4 KiB, remap, TLB flush).
    pub migrate_cost_per_page_ns: u64,
}

impl Default for NumaConfig {
    fn default() -> Self {
        Self {
            scan_delay_ms: 1000,
            scan_period_min_ms: 1000,
            scan_period_max_ms: 60000,
            scan_size_mb: 256,
            unsized_footprint_mb: 256,
            numa_imbalance_pct: 117,
            imb_numa_nr: None,
            scan_cost_per_mb_ns: 2_560,
            fault_cost_ns: 1_000,
            migrate_cost_per_page_ns: 2_000,
        }
    }
}

/// Counters over a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NumaStats {
    /// Scan passes (`task_numa_work` that marked pages) and MB marked.
    pub scan_passes: u64,
    pub scanned_mb: f64,
    /// NUMA hinting faults (pages), and those on a page already on the faulting CPU's node
    /// (vmstat `numa_hint_faults`, `numa_hint_faults_local`).
    pub faults: u64,
    pub faults_local: u64,
    /// Pages migrated on faults (`numa_pages_migrated`).
    pub pages_migrated: u64,
    /// Task moves and swaps by `task_numa_migrate` (`numa_task_migrated`, `numa_task_swapped`).
    pub task_moves: u64,
    pub task_swaps: u64,
    /// CPU time seen at ticks of tasks with a preferred node, and of those on it.
    pub cpu_ns_with_preferred: u64,
    pub cpu_ns_on_preferred: u64,
    /// Work charged for scanning, faults and page copies (ns).
    pub cost_ns: u64,
}

impl NumaStats {
    /// Share of hinting faults on local pages (0 without faults).
    pub fn local_share(&self) -> f64 {
        if self.faults == 0 {
            0.0
        } else {
            self.faults_local as f64 / self.faults as f64
        }
    }

    /// Share of the CPU time of tasks with a preferred node spent on it (0 if none).
    pub fn preferred_residency(&self) -> f64 {
        if self.cpu_ns_with_preferred == 0 {
            0.0
        } else {
            self.cpu_ns_on_preferred as f64 / self.cpu_ns_with_preferred as f64
        }
    }

    /// Named values for a run's results.
    pub fn metrics(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("numa_scan_passes", self.scan_passes as f64),
            ("numa_scanned_mb", self.scanned_mb),
            ("numa_hint_faults", self.faults as f64),
            ("numa_hint_faults_local_share", self.local_share()),
            ("numa_pages_migrated", self.pages_migrated as f64),
            ("numa_task_moves", self.task_moves as f64),
            ("numa_task_swaps", self.task_swaps as f64),
            ("numa_preferred_residency", self.preferred_residency()),
            ("numa_cost_ms", self.cost_ns as f64 / 1e6),
        ]
    }
}

/// Who faulted on a page last (`page_cpupid_xchg_last`), as the faulting task sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LastAccess {
    /// No fault yet (`cpupid_pid_unset`).
    Unset,
    /// The faulting task itself, then on `node`.
    Own { node: usize },
    /// Another task, then on `node`.
    Other { node: usize },
}

/// Fault statistics of a group (`struct numa_group`): decayed memory and CPU faults per node
/// and kind (`[shared, private]`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GroupFaults {
    pub mem: Vec<[u64; 2]>,
    pub cpu: Vec<[u64; 2]>,
    pub total: u64,
    pub nr_tasks: u64,
    pub active_nodes: u64,
    pub max_faults_cpu: u64,
}

impl GroupFaults {
    fn new(nodes: usize) -> Self {
        Self {
            mem: vec![[0; 2]; nodes],
            cpu: vec![[0; 2]; nodes],
            active_nodes: 1,
            ..Self::default()
        }
    }

    /// `group_faults`.
    pub fn faults(&self, nid: usize) -> u64 {
        self.mem[nid][0] + self.mem[nid][1]
    }

    /// `group_faults_cpu`.
    pub fn faults_cpu(&self, nid: usize) -> u64 {
        self.cpu[nid][0] + self.cpu[nid][1]
    }

    /// `numa_is_active_node`.
    pub fn is_active(&self, nid: usize) -> bool {
        self.faults_cpu(nid) * ACTIVE_NODE_FRACTION > self.max_faults_cpu
    }

    /// `numa_group_count_active_nodes`.
    fn count_active_nodes(&mut self) {
        let max = (0..self.cpu.len())
            .map(|n| self.faults_cpu(n))
            .max()
            .unwrap_or(0);
        self.max_faults_cpu = max;
        self.active_nodes = (0..self.cpu.len())
            .filter(|&n| self.faults_cpu(n) * ACTIVE_NODE_FRACTION > max)
            .count() as u64;
    }

    /// `group_faults_shared`, `group_faults_priv`.
    fn shared_private(&self) -> (u64, u64) {
        self.mem
            .iter()
            .fold((0, 0), |(s, p), f| (s + f[SHARED], p + f[PRIVATE]))
    }
}

/// The NUMA state of a task (`task_struct` fields under `CONFIG_NUMA_BALANCING`).
#[derive(Debug, Clone, PartialEq)]
pub struct TaskNuma {
    pub tgid: usize,
    pub scan_period_ms: u64,
    pub scan_period_max_ms: u64,
    /// CPU time (ns) after which the next scan is due, less the period.
    pub node_stamp_ns: u64,
    /// The group's `scan_seq` at the last placement.
    pub scan_seq: u64,
    pub preferred: Option<usize>,
    /// Whether it has fault statistics (`p->numa_faults` allocated at its first fault).
    pub has_faults: bool,
    pub mem: Vec<[u64; 2]>,
    pub cpu: Vec<[u64; 2]>,
    pub membuf: Vec<[u64; 2]>,
    pub cpubuf: Vec<[u64; 2]>,
    /// `total_numa_faults`.
    pub total_faults: u64,
    /// `numa_faults_locality`: remote, local, failed migrations.
    pub locality: [u64; 3],
    pub migrate_retry_ns: u64,
    /// Whether it joined its group's `numa_group` (at its first shared fault).
    pub in_group: bool,
    last_pass: u64,
    last_fault_node: Option<usize>,
    /// `(wall, cpu)` ns at the last placement (`last_task_numa_placement`,
    /// `last_sum_exec_runtime`).
    last_placement: Option<(u64, u64)>,
}

impl TaskNuma {
    /// `task_faults`.
    pub fn faults(&self, nid: usize) -> u64 {
        self.mem[nid][0] + self.mem[nid][1]
    }
}

/// The NUMA state of a thread group's address space (`mm_struct` fields).
#[derive(Debug, Clone, Default, PartialEq)]
struct MmNuma {
    next_scan_ns: u64,
    scan_seq: u64,
    offset_pages: u64,
    /// Passes so far, and the fraction of the footprint the last one marked.
    pass: u64,
    marked: f64,
    /// The first thread met (CLONE_VM threads inherit its preferred node).
    first: Pid,
}

/// Load statistics of a node (`struct numa_stats`, `update_numa_stats`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeStats {
    pub load: i64,
    pub runnable: i64,
    pub util: i64,
    pub nr_running: u64,
    pub weight: u64,
    pub capacity: i64,
    pub idle_cpu: Option<CpuId>,
    pub node_type: NodeType,
}

/// `enum numa_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeType {
    HasSpare,
    FullyBusy,
    Overloaded,
}

/// `struct task_numa_env`: one `task_numa_migrate` search.
#[derive(Debug, Clone)]
struct Env {
    p: Pid,
    src_cpu: CpuId,
    src_nid: usize,
    dst_nid: usize,
    imb_numa_nr: u64,
    src_stats: NodeStats,
    dst_stats: NodeStats,
    best_task: Option<Pid>,
    best_imp: i64,
    best_cpu: Option<CpuId>,
    rqs: u32,
    tasks: u32,
}

/// What a task's tick reads first: its CPU time and node at its last tick, and until when its
/// tick has nothing else to do (step 9).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct TickMark {
    last_cpu_ns: u64,
    last_node: usize,
    /// `Some(s)`: the task has no faults, no preferred node and no pass it has not taken, so
    /// its tick only notes its CPU time and node while that CPU time is at most `s`
    /// (`node_stamp + scan_period`, when `task_tick_numa` first acts). `None`: not met yet, or
    /// its next tick runs in full.
    quiet_up_to_ns: Option<u64>,
}

/// Automatic NUMA balancing: per-task and per-group fault statistics, scan state, preferred
/// nodes and counters.
#[derive(Debug, Clone)]
pub struct NumaBalancing {
    cfg: NumaConfig,
    nodes: usize,
    /// CPUs of each node, in order.
    node_cpus: Vec<Vec<CpuId>>,
    tick_ns: u64,
    tasks: BTreeMap<Pid, TaskNuma>,
    /// By pid: what each task's tick reads first (step 9).
    marks: Vec<TickMark>,
    mms: BTreeMap<usize, MmNuma>,
    groups: BTreeMap<usize, GroupFaults>,
    stats: NumaStats,
}

/// `update_task_scan_period`: the next scan period (ms) from the faults since the last
/// placement — `locality` = remote, local, failed — and the `shared` / `private` faults; and
/// whether the "no local faults" branch ran (it also sets the group's next scan).
pub fn update_task_scan_period(
    period_ms: u64,
    locality: [u64; 3],
    shared: u64,
    private: u64,
    scan_min_ms: u64,
    scan_max_ms: u64,
    period_max_ms: u64,
) -> (u64, bool) {
    let (remote, local) = (locality[0], locality[1]);
    if local + shared == 0 || locality[2] > 0 {
        return ((period_ms << 1).min(period_max_ms), true);
    }
    let slot = period_ms.div_ceil(NUMA_PERIOD_SLOTS) as i64;
    let lr = (local * NUMA_PERIOD_SLOTS / (local + remote)) as i64;
    let ps = (private * NUMA_PERIOD_SLOTS / (private + shared)) as i64;
    let t = NUMA_PERIOD_THRESHOLD as i64;
    let diff = if ps >= t {
        (ps - t).max(1) * slot
    } else if lr >= t {
        (lr - t).max(1) * slot
    } else {
        -(t - lr.max(ps)) * slot
    };
    let p = (period_ms as i64 + diff).max(0) as u64;
    (p.clamp(scan_min_ms, scan_max_ms.max(scan_min_ms)), false)
}

/// `adjust_numa_imbalance`: an imbalance of at most `NUMA_IMBALANCE_MIN` is allowed while the
/// destination runs no more than `imb_numa_nr` tasks.
pub fn adjust_numa_imbalance(imbalance: u64, dst_running: u64, imb_numa_nr: u64) -> u64 {
    if dst_running > imb_numa_nr {
        return imbalance;
    }
    if imbalance <= NUMA_IMBALANCE_MIN {
        return 0;
    }
    imbalance
}

/// `should_numa_migrate_memory`'s decision for a page on `src` faulted from `dst` by a task
/// with `preferred` node and `scan_seq`, last accessed as `last`, in `group` (if it is in one).
pub fn should_migrate(
    preferred: Option<usize>,
    scan_seq: u64,
    last: LastAccess,
    group: Option<&GroupFaults>,
    src: usize,
    dst: usize,
) -> bool {
    let own_or_unset = matches!(last, LastAccess::Unset | LastAccess::Own { .. });
    if (preferred.is_none() || scan_seq <= EARLY_SCAN_SEQ) && own_or_unset {
        return true;
    }
    match last {
        LastAccess::Own { node } | LastAccess::Other { node } if node != dst => return false,
        LastAccess::Own { .. } => return true,
        _ => {}
    }
    let Some(ng) = group else {
        return true;
    };
    if ng.faults_cpu(dst) > ng.faults_cpu(src) * ACTIVE_NODE_FRACTION {
        return true;
    }
    ng.faults_cpu(dst) * ng.faults(src) * 3 > ng.faults_cpu(src) * ng.faults(dst) * 4
}

/// `load_too_imbalanced`: whether moving load leaves the capacity-scaled imbalance between
/// the two nodes larger than it was.
fn load_too_imbalanced(src_load: i64, dst_load: i64, env: &Env) -> bool {
    let (sc, dc) = (env.src_stats.capacity, env.dst_stats.capacity);
    let imb = (dst_load * sc - src_load * dc).abs();
    let old = (env.dst_stats.load * sc - env.src_stats.load * dc).abs();
    imb > old
}

impl NumaBalancing {
    /// Balancing state for the machine of `ctx`.
    pub fn new(ctx: &PolicyContext<'_>, cfg: NumaConfig) -> Self {
        let m = ctx.machine;
        let nodes = m.nodes();
        let node_cpus = (0..nodes).map(|n| m.node_cpus(n).to_vec()).collect();
        Self {
            cfg,
            nodes,
            node_cpus,
            tick_ns: ctx.config.tick_ns,
            tasks: BTreeMap::new(),
            marks: Vec::new(),
            mms: BTreeMap::new(),
            groups: BTreeMap::new(),
            stats: NumaStats::default(),
        }
    }

    /// The same with `TICK_NSEC` (the jiffy the "2 ticks" of `task_numa_work` and
    /// `init_numa_balancing` count) set to `tick_ns` instead of the engine's tick.
    pub fn with_tick_ns(mut self, tick_ns: u64) -> Self {
        self.tick_ns = tick_ns;
        self
    }

    /// The configuration.
    pub fn config(&self) -> &NumaConfig {
        &self.cfg
    }

    /// The counters so far.
    pub fn stats(&self) -> NumaStats {
        self.stats.clone()
    }

    /// The preferred node of `pid` (`numa_preferred_nid`), if it has one.
    pub fn preferred_node(&self, pid: Pid) -> Option<usize> {
        self.tasks.get(&pid).and_then(|t| t.preferred)
    }

    /// The NUMA state of `pid`, once met.
    pub fn task(&self, pid: Pid) -> Option<&TaskNuma> {
        self.tasks.get(&pid)
    }

    /// The fault statistics of group `tgid`'s `numa_group`, once one of its threads joined.
    pub fn group(&self, tgid: usize) -> Option<&GroupFaults> {
        self.groups.get(&tgid)
    }

    /// The group's `numa_scan_seq`.
    pub fn scan_seq(&self, tgid: usize) -> u64 {
        self.mms.get(&tgid).map_or(0, |m| m.scan_seq)
    }

    /// Ends the group's scan of its address space (`reset_ptenuma_scan`): a new `scan_seq`.
    pub fn reset_scan(&mut self, tgid: usize) {
        self.unmark(tgid);
        if let Some(mm) = self.mms.get_mut(&tgid) {
            mm.scan_seq += 1;
            mm.offset_pages = 0;
        }
    }

    /// The group `numa_group` of `pid`, if it joined one.
    fn ng_of(&self, pid: Pid) -> Option<&GroupFaults> {
        let t = self.tasks.get(&pid)?;
        if t.in_group {
            self.groups.get(&t.tgid)
        } else {
            None
        }
    }

    /// Footprint of group `tgid` in pages (`get_mm_rss`): MB placed (sized) or the assumed
    /// footprint times the share placed.
    fn footprint_pages(&self, v: &View<'_>, tgid: usize) -> u64 {
        let placed: f64 = v.pages(tgid).iter().map(|(_, a)| a).sum();
        let mb = if v.thread_pages(tgid).is_some() {
            placed
        } else {
            placed * self.cfg.unsized_footprint_mb as f64
        };
        (mb * PAGES_PER_MB).round().max(0.0) as u64
    }

    /// `task_nr_scan_windows`.
    fn scan_windows(&self, footprint_pages: u64) -> u64 {
        let window = self.cfg.scan_size_mb * PAGES_PER_MB as u64;
        let rss = if footprint_pages == 0 {
            window
        } else {
            footprint_pages
        };
        rss.div_ceil(window.max(1)).max(1)
    }

    /// `task_scan_min`.
    pub fn task_scan_min(&self, footprint_pages: u64) -> u64 {
        let windows = if self.cfg.scan_size_mb < MAX_SCAN_WINDOW_MB {
            MAX_SCAN_WINDOW_MB / self.cfg.scan_size_mb.max(1)
        } else {
            1
        };
        let floor = 1000 / windows;
        (self.cfg.scan_period_min_ms / self.scan_windows(footprint_pages)).max(floor)
    }

    /// `period · refcount · (shared + 1) / (private + shared + 1)` for a task in a group.
    fn group_scaled(&self, pid: Pid, period: u64) -> Option<u64> {
        let ng = self.ng_of(pid)?;
        let (shared, private) = ng.shared_private();
        Some(period * ng.nr_tasks * (shared + 1) / (private + shared + 1))
    }

    /// `task_scan_start`.
    fn task_scan_start(&self, pid: Pid, footprint_pages: u64) -> u64 {
        let smin = self.task_scan_min(footprint_pages);
        smin.max(self.group_scaled(pid, smin).unwrap_or(smin))
    }

    /// `task_scan_max`.
    fn task_scan_max(&self, pid: Pid, footprint_pages: u64) -> u64 {
        let smin = self.task_scan_min(footprint_pages);
        let mut smax = self.cfg.scan_period_max_ms / self.scan_windows(footprint_pages);
        if let Some(p) = self.group_scaled(pid, smax) {
            smax = smax.max(p);
        }
        smin.max(smax)
    }

    /// `init_numa_balancing` for a task met for the first time.
    fn ensure(&mut self, v: &View<'_>, pid: Pid) {
        if self.tasks.contains_key(&pid) {
            return;
        }
        let info = v.proc(pid);
        let tgid = info.tgid;
        let nodes = self.nodes;
        let mut t = TaskNuma {
            tgid,
            scan_period_ms: self.cfg.scan_delay_ms,
            scan_period_max_ms: self.cfg.scan_period_max_ms,
            node_stamp_ns: 0,
            scan_seq: 0,
            preferred: None,
            has_faults: false,
            mem: vec![[0; 2]; nodes],
            cpu: vec![[0; 2]; nodes],
            membuf: vec![[0; 2]; nodes],
            cpubuf: vec![[0; 2]; nodes],
            total_faults: 0,
            locality: [0; 3],
            migrate_retry_ns: 0,
            in_group: false,
            last_pass: 0,
            last_fault_node: None,
            last_placement: None,
        };
        match self.mms.get(&tgid) {
            None => {
                self.mms.insert(
                    tgid,
                    MmNuma {
                        next_scan_ns: v.now + self.cfg.scan_delay_ms * 1_000_000,
                        first: pid,
                        ..MmNuma::default()
                    },
                );
            }
            Some(mm) => {
                // A CLONE_VM thread: its parent's preferred node, its first scan staggered.
                // The kernel takes min(task_scan_max in ms, period·users in ns): the ms value.
                let parent = self.tasks.get(&mm.first);
                t.preferred = parent.and_then(|p| p.preferred);
                t.scan_seq = mm.scan_seq;
                let users = v.group_threads(tgid) as u64;
                let parent_period = parent.map_or(t.scan_period_ms, |p| p.scan_period_ms);
                let fp = self.footprint_pages(v, tgid);
                let max_ms = self.task_scan_max(mm.first, fp);
                t.node_stamp_ns = max_ms.min(parent_period * users * 1_000_000) + 2 * self.tick_ns;
            }
        }
        self.tasks.insert(pid, t);
        if self.marks.len() <= pid {
            self.marks.resize(pid + 1, TickMark::default());
        }
        self.marks[pid] = TickMark {
            last_cpu_ns: info.cpu_ns,
            last_node: v.machine.cpu_node(info.cpu),
            quiet_up_to_ns: None,
        };
    }

    /// The scheduler tick of `cpu` for the task running there (`task_tick_numa`, and the
    /// hinting faults it took since the last call): may return page moves, a move or swap of
    /// tasks, and the work done (charged to `cpu`).
    pub fn task_tick(&mut self, v: &View<'_>, cpu: CpuId) -> Option<Attempt> {
        let pid = v.current(cpu)?;
        let node = v.machine.cpu_node(cpu);
        let cpu_ns = v.accounted_cpu_ns(pid);
        // Step 9: a quiet task's tick notes its CPU time and node, and nothing else is due.
        if let Some(m) = self.marks.get_mut(pid) {
            if m.quiet_up_to_ns.is_some_and(|s| cpu_ns <= s) {
                m.last_cpu_ns = cpu_ns;
                m.last_node = node;
                return None;
            }
        }
        self.ensure(v, pid);
        let mut out = Attempt::default();
        let tgid;
        {
            let m = &mut self.marks[pid];
            let dcpu = cpu_ns.saturating_sub(m.last_cpu_ns);
            m.last_cpu_ns = cpu_ns;
            let moved_from = std::mem::replace(&mut m.last_node, node);
            let t = self.tasks.get_mut(&pid).expect("ensured");
            tgid = t.tgid;
            if let Some(p) = t.preferred {
                self.stats.cpu_ns_with_preferred += dcpu;
                if p == node {
                    self.stats.cpu_ns_on_preferred += dcpu;
                }
            }
            if moved_from != node {
                self.update_scan_period(v, pid, moved_from, node);
            }
            if dcpu > 0 {
                self.take_faults(v, pid, cpu, &mut out);
            }
        }
        // task_tick_numa
        let t = self.tasks.get_mut(&pid).expect("ensured");
        let period_ns = t.scan_period_ms * 1_000_000;
        if cpu_ns > t.node_stamp_ns + period_ns {
            let first = t.node_stamp_ns == 0;
            t.node_stamp_ns += period_ns;
            if first {
                let fp = self.footprint_pages(v, tgid);
                let start = self.task_scan_start(pid, fp);
                self.tasks.get_mut(&pid).expect("ensured").scan_period_ms = start;
            }
            if v.now >= self.mms[&tgid].next_scan_ns {
                out.work_ns += self.task_numa_work(v, pid);
                // The scanning thread returns to its (hot) working set at once.
                self.take_faults(v, pid, cpu, &mut out);
            }
        }
        self.stats.cost_ns += out.work_ns;
        self.mark_quiet(pid);
        let acted = out.work_ns > 0 || !out.moves.is_empty() || !out.pages.is_empty();
        acted.then_some(out)
    }

    /// Sets `pid`'s mark after a tick run in full (step 9): quiet up to its next scan by CPU
    /// time when it has no faults, no preferred node and no pass of its group left to take.
    fn mark_quiet(&mut self, pid: Pid) {
        let t = &self.tasks[&pid];
        let mm = &self.mms[&t.tgid];
        let quiet = !t.has_faults && t.preferred.is_none() && mm.pass <= t.last_pass;
        self.marks[pid].quiet_up_to_ns =
            quiet.then(|| t.node_stamp_ns + t.scan_period_ms * 1_000_000);
    }

    /// Runs `pid`'s next tick in full (its state changed outside its tick).
    fn unmark(&mut self, pid: Pid) {
        if let Some(m) = self.marks.get_mut(pid) {
            m.quiet_up_to_ns = None;
        }
    }

    /// The earliest time (ns) at which the tick of `cpu` may do more than note the running
    /// task's CPU time and node (step 9): now when the task is not quiet (or not met yet), or
    /// is a thread of a group with others (another's pass gives it faults to take at its next
    /// tick, and nothing tells its CPU then), else the instant its CPU time up to now, running
    /// on, passes its mark (a tick before it finds the task's accounted CPU time at most its
    /// CPU time up to now, so still quiet). `None` when nothing runs there.
    pub fn next_tick_due_ns(&self, v: &View<'_>, cpu: CpuId) -> Option<u64> {
        let pid = v.current(cpu)?;
        let mark = self.marks.get(pid).and_then(|m| m.quiet_up_to_ns);
        match mark {
            Some(s) if v.group_threads(self.tasks[&pid].tgid) <= 1 => {
                Some(v.now + s.saturating_sub(v.cpu_time_ns(pid)) + 1)
            }
            _ => Some(v.now),
        }
    }

    /// A scan pass by `pid` now, if its group's next scan is due (`task_numa_work`, without
    /// the tick's CPU-time trigger); returns its cost (ns).
    pub fn scan_pass(&mut self, v: &View<'_>, pid: Pid) -> u64 {
        self.ensure(v, pid);
        self.unmark(pid);
        let cost = self.task_numa_work(v, pid);
        self.stats.cost_ns += cost;
        cost
    }

    /// The hinting faults `pid` takes now, on its CPU, on the last pass's marks if it has not
    /// taken them yet (step 3), with the page moves and the move or swap they cause and
    /// their cost.
    pub fn hinting_faults(&mut self, v: &View<'_>, pid: Pid) -> Option<Attempt> {
        self.ensure(v, pid);
        self.unmark(pid);
        let mut out = Attempt::default();
        self.take_faults(v, pid, v.proc(pid).cpu, &mut out);
        self.stats.cost_ns += out.work_ns;
        let acted = out.work_ns > 0 || !out.moves.is_empty() || !out.pages.is_empty();
        acted.then_some(out)
    }

    /// `update_scan_period` for a task found on `dst` after running on `src`.
    fn update_scan_period(&mut self, v: &View<'_>, pid: Pid, src: usize, dst: usize) {
        let t = &self.tasks[&pid];
        if !t.has_faults {
            return;
        }
        if t.scan_seq > 0
            && (Some(dst) == t.preferred || (t.preferred.is_some() && Some(src) != t.preferred))
        {
            return;
        }
        let fp = self.footprint_pages(v, t.tgid);
        let start = self.task_scan_start(pid, fp);
        self.tasks.get_mut(&pid).expect("met").scan_period_ms = start;
    }

    /// `task_numa_work`: one scan pass over the group's address space by `pid`; returns its
    /// cost (ns).
    fn task_numa_work(&mut self, v: &View<'_>, pid: Pid) -> u64 {
        let tgid = self.tasks[&pid].tgid;
        let footprint = self.footprint_pages(v, tgid);
        let window_pages = self.cfg.scan_size_mb * PAGES_PER_MB as u64;
        let period_ms = self.tasks[&pid].scan_period_ms;
        let mm = self.mms.get_mut(&tgid).expect("met");
        if v.now < mm.next_scan_ns {
            return 0;
        }
        mm.next_scan_ns = v.now + period_ms * 1_000_000;
        let tick = self.tick_ns;
        self.tasks.get_mut(&pid).expect("met").node_stamp_ns += 2 * tick;
        let mm = self.mms.get_mut(&tgid).expect("met");
        if footprint == 0 {
            return 0;
        }
        let start = mm.offset_pages.min(footprint);
        let marked = window_pages.min(footprint - start);
        mm.offset_pages = start + marked;
        mm.pass += 1;
        // Every thread of the group has this pass's faults to take at its next tick.
        for other in tgid..tgid + v.group_threads(tgid).max(1) {
            if let Some(m) = self.marks.get_mut(other) {
                m.quiet_up_to_ns = None;
            }
        }
        let mm = self.mms.get_mut(&tgid).expect("met");
        mm.marked = marked as f64 / footprint as f64;
        if mm.offset_pages >= footprint {
            mm.scan_seq += 1;
            mm.offset_pages = 0;
        }
        let mb = marked as f64 / PAGES_PER_MB;
        let cost = (mb * self.cfg.scan_cost_per_mb_ns as f64).round() as u64;
        self.tasks.get_mut(&pid).expect("met").node_stamp_ns += 32 * cost;
        self.stats.scan_passes += 1;
        self.stats.scanned_mb += mb;
        cost
    }

    /// The hinting faults `pid`, running on `cpu`, takes on the last pass's marks (step 3),
    /// with the page migrations they cause and what `task_numa_fault` decides.
    fn take_faults(&mut self, v: &View<'_>, pid: Pid, cpu: CpuId, out: &mut Attempt) {
        let (tgid, last_pass, own_last) = {
            let t = &self.tasks[&pid];
            (t.tgid, t.last_pass, t.last_fault_node)
        };
        let mm = &self.mms[&tgid];
        if mm.pass == 0 || mm.pass <= last_pass {
            return;
        }
        let f = mm.marked;
        self.tasks.get_mut(&pid).expect("met").last_pass = mm.pass;
        let n = v.machine.cpu_node(cpu);
        let threads = v.group_threads(tgid).max(1);
        let t_index = pid - tgid;

        // Marked pages this thread uses, per node: private, and its 1/T of the shared ones
        // (the memory module's split: crate::memory::marked_pages).
        let crate::memory::MarkedPages {
            private,
            shared,
            total_mb,
        } = crate::memory::marked_pages(
            v.thread_pages(pid).map(|p| (p.private, p.shared)),
            v.pages(tgid),
            threads,
            self.cfg.unsized_footprint_mb as f64,
            f,
            PAGES_PER_MB,
        );
        // Who faulted last on a shared page: each thread of the group with weight 1/T.
        let mut last_shared: Vec<(LastAccess, f64)> = Vec::new();
        if threads > 1 {
            let w = 1.0 / threads as f64;
            for j in 0..threads {
                let other = tgid + j;
                let node = if j == t_index {
                    own_last
                } else {
                    self.tasks.get(&other).and_then(|o| o.last_fault_node)
                };
                let last = match node {
                    None => LastAccess::Unset,
                    Some(node) if j == t_index => LastAccess::Own { node },
                    Some(node) => LastAccess::Other { node },
                };
                match last_shared.iter_mut().find(|(l, _)| *l == last) {
                    Some((_, x)) => *x += w,
                    None => last_shared.push((last, w)),
                }
            }
        }
        let own = match own_last {
            None => LastAccess::Unset,
            Some(node) => LastAccess::Own { node },
        };
        // Faults as (page node k, last accessor, expected pages).
        let mut faults: Vec<(usize, LastAccess, f64)> = Vec::new();
        for &(k, pages) in &private {
            faults.push((k, own, pages));
        }
        for &(k, pages) in &shared {
            for &(last, w) in &last_shared {
                faults.push((k, last, pages * w));
            }
        }
        let total: f64 = faults.iter().map(|x| x.2).sum();
        if total.round() < 1.0 {
            return;
        }
        // Decide migrations with the statistics as they stand at the first fault.
        let (preferred, seq) = {
            let t = &self.tasks[&pid];
            (t.preferred, t.scan_seq)
        };
        let ng = self.ng_of(pid).cloned();
        // (mem node after the fault, last, local, pages); migrated pages per source node.
        let mut buckets: Vec<(usize, LastAccess, bool, f64)> = Vec::new();
        let mut migrated: Vec<(usize, f64)> = Vec::new();
        for &(k, last, pages) in &faults {
            if pages <= 0.0 {
                continue;
            }
            let local = k == n;
            let mig = !local && should_migrate(preferred, seq, last, ng.as_ref(), k, n);
            let mem_node = if mig { n } else { k };
            if mig {
                match migrated.iter_mut().find(|(s, _)| *s == k) {
                    Some((_, x)) => *x += pages,
                    None => migrated.push((k, pages)),
                }
            }
            match buckets
                .iter_mut()
                .find(|b| b.0 == mem_node && b.1 == last && b.2 == local)
            {
                Some(b) => b.3 += pages,
                None => buckets.push((mem_node, last, local, pages)),
            }
        }
        let mut fault_pages = 0u64;
        for (mem_node, last, local, pages) in buckets {
            let pages = pages.round() as u64;
            if pages == 0 {
                continue;
            }
            fault_pages += pages;
            if let Some(a) = self.task_numa_fault(v, pid, last, mem_node, pages, local) {
                out.moves.extend(a.moves);
                out.rqs_examined += a.rqs_examined;
                out.tasks_examined += a.tasks_examined;
            }
        }
        let mut moved_pages = 0u64;
        for (k, pages) in migrated {
            let whole = pages.round() as u64;
            if whole == 0 || total_mb <= 0.0 {
                continue;
            }
            moved_pages += whole;
            out.pages.push(PageMove {
                tgid,
                from_node: k,
                to_node: n,
                share: (whole as f64 / PAGES_PER_MB / total_mb).min(1.0),
            });
        }
        self.tasks.get_mut(&pid).expect("met").last_fault_node = Some(n);
        self.stats.pages_migrated += moved_pages;
        out.work_ns +=
            fault_pages * self.cfg.fault_cost_ns + moved_pages * self.cfg.migrate_cost_per_page_ns;
    }

    /// `task_numa_fault`: `pid`, on its CPU's node, faulted on `pages` pages now on
    /// `mem_node`, last accessed as `last`; `local`: the page was on the CPU's node
    /// (`TNF_FAULT_LOCAL`). Runs placement and `numa_migrate_preferred` first when the retry
    /// time has passed, and returns the move or swap that decided.
    pub fn task_numa_fault(
        &mut self,
        v: &View<'_>,
        pid: Pid,
        last: LastAccess,
        mem_node: usize,
        pages: u64,
        local: bool,
    ) -> Option<Attempt> {
        self.ensure(v, pid);
        self.unmark(pid);
        let cpu_node = v.machine.cpu_node(v.proc(pid).cpu);
        self.tasks.get_mut(&pid).expect("met").has_faults = true;
        // First accesses are private; another task's make the task join its group.
        let private = !matches!(last, LastAccess::Other { .. });
        if !private && !self.tasks[&pid].in_group {
            self.join_group(pid);
        }
        // vmstat's `numa_hint_faults_local`: the page was on this node when it faulted.
        let page_local = local;
        let mut local = local;
        if let Some(ng) = self.ng_of(pid) {
            if !private
                && !local
                && ng.active_nodes > 1
                && ng.is_active(cpu_node)
                && ng.is_active(mem_node)
            {
                local = true;
            }
        }
        let mut decided = None;
        if v.now > self.tasks[&pid].migrate_retry_ns {
            self.task_numa_placement(v, pid);
            decided = self.numa_migrate_preferred(v, pid);
        }
        let priv_ = usize::from(private);
        let t = self.tasks.get_mut(&pid).expect("met");
        t.membuf[mem_node][priv_] += pages;
        t.cpubuf[cpu_node][priv_] += pages;
        t.locality[usize::from(local)] += pages;
        self.stats.faults += pages;
        if page_local {
            self.stats.faults_local += pages;
        }
        decided
    }

    /// `task_numa_group` for threads of one process: `pid` joins its group's `numa_group`
    /// (created by the first to join), bringing its statistics.
    fn join_group(&mut self, pid: Pid) {
        let nodes = self.nodes;
        let t = self.tasks.get_mut(&pid).expect("met");
        t.in_group = true;
        let ng = self
            .groups
            .entry(t.tgid)
            .or_insert_with(|| GroupFaults::new(nodes));
        for n in 0..nodes {
            for k in 0..2 {
                ng.mem[n][k] += t.mem[n][k];
                ng.cpu[n][k] += t.cpu[n][k];
            }
        }
        ng.total += t.total_faults;
        ng.nr_tasks += 1;
    }

    /// `task_numa_placement`: once per new `scan_seq` of its group, decays and folds the
    /// buffered faults, sets the preferred node and updates the scan period.
    pub fn task_numa_placement(&mut self, v: &View<'_>, pid: Pid) {
        self.unmark(pid);
        let tgid = self.tasks[&pid].tgid;
        let seq = self.mms.get(&tgid).map_or(0, |m| m.scan_seq);
        if self.tasks[&pid].scan_seq == seq {
            return;
        }
        let fp = self.footprint_pages(v, tgid);
        let period_max = self.task_scan_max(pid, fp);
        let now = v.now;
        let cpu_ns = v.proc(pid).cpu_ns;
        let nodes = self.nodes;
        let in_group = self.tasks[&pid].in_group;
        let t = self.tasks.get_mut(&pid).expect("met");
        t.scan_seq = seq;
        t.scan_period_max_ms = period_max;
        let total_faults = t.locality[0] + t.locality[1];
        // numa_get_avg_runtime
        let (runtime, period) = match t.last_placement {
            Some((wall, cpu)) => (cpu_ns.saturating_sub(cpu), now.saturating_sub(wall)),
            None => (LOAD_AVG_MAX, LOAD_AVG_MAX),
        };
        t.last_placement = Some((now, cpu_ns));
        let mut ng = if in_group {
            self.groups.get_mut(&tgid)
        } else {
            None
        };
        let mut fault_types = [0u64; 2];
        let mut max_faults = 0u64;
        let mut max_nid = None;
        for nid in 0..nodes {
            let (mut faults, mut group_faults) = (0u64, 0u64);
            for (k, types) in fault_types.iter_mut().enumerate() {
                let diff = t.membuf[nid][k] as i64 - (t.mem[nid][k] / 2) as i64;
                *types += t.membuf[nid][k];
                t.membuf[nid][k] = 0;
                let f_weight = ((u128::from(runtime) << 16) / (u128::from(period) + 1)) as u64;
                let f_weight = f_weight * t.cpubuf[nid][k] / (total_faults + 1);
                let f_diff = f_weight as i64 - (t.cpu[nid][k] / 2) as i64;
                t.cpubuf[nid][k] = 0;
                t.mem[nid][k] = (t.mem[nid][k] as i64 + diff) as u64;
                t.cpu[nid][k] = (t.cpu[nid][k] as i64 + f_diff) as u64;
                faults += t.mem[nid][k];
                t.total_faults = (t.total_faults as i64 + diff) as u64;
                if let Some(g) = ng.as_deref_mut() {
                    g.mem[nid][k] = (g.mem[nid][k] as i64 + diff).max(0) as u64;
                    g.cpu[nid][k] = (g.cpu[nid][k] as i64 + f_diff).max(0) as u64;
                    g.total = (g.total as i64 + diff).max(0) as u64;
                    group_faults += g.mem[nid][k];
                }
            }
            let score = if ng.is_some() { group_faults } else { faults };
            if score > max_faults {
                max_faults = score;
                max_nid = Some(nid);
            }
        }
        if let Some(g) = ng {
            g.count_active_nodes();
        }
        if max_faults > 0 {
            t.preferred = max_nid;
        }
        let (scan_min, scan_max) = (self.task_scan_min(fp), period_max);
        let t = self.tasks.get_mut(&pid).expect("met");
        let (p, no_local) = update_task_scan_period(
            t.scan_period_ms,
            t.locality,
            fault_types[SHARED],
            fault_types[PRIVATE],
            scan_min,
            scan_max,
            t.scan_period_max_ms,
        );
        t.scan_period_ms = p;
        if no_local {
            self.mms.get_mut(&tgid).expect("met").next_scan_ns = now + p * 1_000_000;
        } else {
            t.locality = [0; 3];
        }
    }

    /// `task_weight`: 1000 × the task's share of its faults on `nid`.
    pub fn task_weight(&self, pid: Pid, nid: usize) -> i64 {
        match self.tasks.get(&pid) {
            Some(t) if t.has_faults && t.total_faults > 0 => {
                (1000 * t.faults(nid) / t.total_faults) as i64
            }
            _ => 0,
        }
    }

    /// `group_weight`: 1000 × the group's share of its faults on `nid` (0 outside a group).
    pub fn group_weight(&self, pid: Pid, nid: usize) -> i64 {
        match self.ng_of(pid) {
            Some(g) if g.total > 0 => (1000 * g.faults(nid) / g.total) as i64,
            _ => 0,
        }
    }

    /// `numa_migrate_preferred`: sets the retry time and, off the preferred node, tries
    /// `task_numa_migrate`.
    pub fn numa_migrate_preferred(&mut self, v: &View<'_>, pid: Pid) -> Option<Attempt> {
        self.unmark(pid);
        let t = self.tasks.get_mut(&pid)?;
        let preferred = t.preferred?;
        if !t.has_faults {
            return None;
        }
        let interval_ms = 1000.min(t.scan_period_ms / 16);
        t.migrate_retry_ns = v.now + interval_ms * 1_000_000;
        if v.machine.cpu_node(v.proc(pid).cpu) == preferred {
            return None;
        }
        self.task_numa_migrate(v, pid)
    }

    /// `update_numa_stats` for node `nid` (`find_idle`: note its first idle CPU that task `p`
    /// may run on: "!cpumask_test_cpu(cpu, env->p->cpus_ptr)" skips the others).
    pub fn node_stats(&self, v: &View<'_>, nid: usize, imbalance_pct: u32, p: Pid) -> NodeStats {
        let mut s = NodeStats {
            load: 0,
            runnable: 0,
            util: 0,
            nr_running: 0,
            weight: 0,
            capacity: 0,
            idle_cpu: None,
            node_type: NodeType::HasSpare,
        };
        for &c in &self.node_cpus[nid] {
            let nr = v.nr_running(c) as u64;
            let cap = (CAPACITY_SCALE * v.machine.speed(c)).round() as i64;
            s.load += TASK_LOAD * nr as i64;
            s.runnable += TASK_LOAD * nr as i64;
            s.util += if nr > 0 { cap } else { 0 };
            s.nr_running += nr;
            s.weight += 1;
            s.capacity += cap;
            if s.idle_cpu.is_none() && v.idle(c) && v.may_run(p, c) {
                s.idle_cpu = Some(c);
            }
        }
        let pct = i64::from(imbalance_pct);
        // numa_classify
        s.node_type = if s.nr_running > s.weight
            && (s.capacity * 100 < s.util * pct || s.capacity * pct < s.runnable * 100)
        {
            NodeType::Overloaded
        } else if s.nr_running < s.weight
            || (s.capacity * 100 > s.util * pct && s.capacity * pct > s.runnable * 100)
        {
            NodeType::HasSpare
        } else {
            NodeType::FullyBusy
        };
        s
    }

    /// `imb_numa_nr` of the lowest NUMA domain seen from `nid`.
    fn imb_numa_nr(&self, nid: usize) -> u64 {
        self.cfg
            .imb_numa_nr
            .unwrap_or_else(|| ((self.node_cpus[nid].len() as u64) >> 3).max(1))
    }

    /// `task_numa_migrate`: a CPU for `pid` on its preferred node (or another that improves
    /// it), as a move to an idle CPU or a swap with the task running there.
    pub fn task_numa_migrate(&mut self, v: &View<'_>, pid: Pid) -> Option<Attempt> {
        self.unmark(pid);
        let src_cpu = v.proc(pid).cpu;
        let src_nid = v.machine.cpu_node(src_cpu);
        let with_cpus = (0..self.nodes)
            .filter(|&n| !self.node_cpus[n].is_empty())
            .count();
        if with_cpus < 2 {
            // No SD_NUMA domain: the task stays where it is.
            self.tasks.get_mut(&pid)?.preferred = Some(src_nid);
            return None;
        }
        let preferred = self.tasks[&pid].preferred?;
        let imbalance_pct = 100 + self.cfg.numa_imbalance_pct.saturating_sub(100) / 2;
        let src_stats = self.node_stats(v, src_nid, imbalance_pct, pid);
        let mut env = Env {
            p: pid,
            src_cpu,
            src_nid,
            dst_nid: preferred,
            imb_numa_nr: self.imb_numa_nr(src_nid),
            src_stats,
            dst_stats: src_stats,
            best_task: None,
            best_imp: 0,
            best_cpu: None,
            rqs: self.node_cpus[src_nid].len() as u32,
            tasks: 0,
        };
        let taskweight = self.task_weight(pid, src_nid);
        let groupweight = self.group_weight(pid, src_nid);
        let taskimp = self.task_weight(pid, preferred) - taskweight;
        let groupimp = self.group_weight(pid, preferred) - groupweight;
        if !self.node_cpus[preferred].is_empty() {
            env.dst_stats = self.node_stats(v, preferred, imbalance_pct, pid);
            env.rqs += self.node_cpus[preferred].len() as u32;
            self.task_numa_find_cpu(v, &mut env, taskimp, groupimp);
        }
        let spread = self.ng_of(pid).is_some_and(|g| g.active_nodes > 1);
        if env.best_cpu.is_none() || spread {
            for nid in 0..self.nodes {
                if nid == src_nid || nid == preferred || self.node_cpus[nid].is_empty() {
                    continue;
                }
                let taskimp = self.task_weight(pid, nid) - taskweight;
                let groupimp = self.group_weight(pid, nid) - groupweight;
                if taskimp < 0 && groupimp < 0 {
                    continue;
                }
                env.dst_nid = nid;
                env.dst_stats = self.node_stats(v, nid, imbalance_pct, pid);
                env.rqs += self.node_cpus[nid].len() as u32;
                self.task_numa_find_cpu(v, &mut env, taskimp, groupimp);
            }
        }
        if self.ng_of(pid).is_some() {
            let nid = env.best_cpu.map_or(src_nid, |c| v.machine.cpu_node(c));
            self.tasks.get_mut(&pid).expect("met").preferred = Some(nid);
        }
        let mut out = Attempt {
            rqs_examined: env.rqs,
            tasks_examined: env.tasks,
            ..Attempt::default()
        };
        let best = env.best_cpu?;
        match env.best_task {
            None => {
                out.moves.push(Move {
                    pid,
                    from: src_cpu,
                    to: best,
                    kind: MigrationKind::Active,
                });
                self.stats.task_moves += 1;
            }
            Some(cur) => {
                out.moves.push(Move {
                    pid,
                    from: src_cpu,
                    to: best,
                    kind: MigrationKind::Exchange,
                });
                out.moves.push(Move {
                    pid: cur,
                    from: best,
                    to: src_cpu,
                    kind: MigrationKind::Exchange,
                });
                self.stats.task_swaps += 1;
            }
        }
        Some(out)
    }

    /// `task_numa_find_cpu` on `env.dst_nid`.
    fn task_numa_find_cpu(&self, v: &View<'_>, env: &mut Env, taskimp: i64, groupimp: i64) {
        let maymove;
        if env.dst_stats.node_type == NodeType::HasSpare {
            let src_running = env.src_stats.nr_running as i64 - 1;
            let dst_running = env.dst_stats.nr_running + 1;
            let imbalance = (dst_running as i64 - src_running).max(0) as u64;
            let imbalance = adjust_numa_imbalance(imbalance, dst_running, env.imb_numa_nr);
            maymove = imbalance == 0;
            if maymove {
                if let Some(idle) = env.dst_stats.idle_cpu {
                    env.best_cpu = Some(idle);
                    env.best_task = None;
                    env.best_imp = 0;
                    return;
                }
            }
        } else {
            let dst_load = env.dst_stats.load + TASK_LOAD;
            let src_load = env.src_stats.load - TASK_LOAD;
            maymove = !load_too_imbalanced(src_load, dst_load, env);
        }
        let cpus = self.node_cpus[env.dst_nid].clone();
        for cpu in cpus {
            // "Skip this CPU if the source task cannot migrate".
            if !v.may_run(env.p, cpu) {
                continue;
            }
            if self.task_numa_compare(v, env, cpu, taskimp, groupimp, maymove) {
                break;
            }
        }
    }

    /// `task_numa_compare` of `dst_cpu`: a move there (if idle and allowed) or a swap with its
    /// running task; returns whether to stop searching.
    fn task_numa_compare(
        &self,
        v: &View<'_>,
        env: &mut Env,
        dst_cpu: CpuId,
        taskimp: i64,
        groupimp: i64,
        maymove: bool,
    ) -> bool {
        let p = env.p;
        let p_ng = self.ng_of(p).map(|_| self.tasks[&p].tgid);
        let mut imp = if p_ng.is_some() { groupimp } else { taskimp };
        let moveimp = imp;
        let mut cur = v.current(dst_cpu);
        if cur == Some(p) {
            return true;
        }
        let preferred_of = |x: Pid| self.tasks.get(&x).and_then(|t| t.preferred);
        let mut assign = false;
        // "Skip this swap candidate if cannot move to the source cpu."
        if cur.is_some_and(|c| !v.may_run(c, env.src_cpu)) {
            return false;
        }
        if let Some(c) = cur {
            env.tasks += 1;
            if let Some(b) = env.best_task {
                if preferred_of(b) == Some(env.src_nid) && preferred_of(c) != Some(env.src_nid) {
                    return false;
                }
            }
            let cur_ng = self.ng_of(c).map(|_| self.tasks[&c].tgid);
            if cur_ng == p_ng {
                if env.dst_stats.node_type == NodeType::HasSpare {
                    return false;
                }
                imp = taskimp + self.task_weight(c, env.src_nid) - self.task_weight(c, env.dst_nid);
                if cur_ng.is_some() {
                    imp -= imp / 16;
                }
            } else if cur_ng.is_some() && p_ng.is_some() {
                imp += self.group_weight(c, env.src_nid) - self.group_weight(c, env.dst_nid);
            } else {
                imp += self.task_weight(c, env.src_nid) - self.task_weight(c, env.dst_nid);
            }
            if preferred_of(c) == Some(env.dst_nid) {
                imp -= imp / 16;
            }
            if preferred_of(c) == Some(env.src_nid) {
                imp += imp / 8;
            }
            if maymove && moveimp > imp && moveimp > env.best_imp {
                imp = moveimp;
                cur = None;
                assign = true;
            } else if env
                .best_task
                .is_some_and(|b| preferred_of(b) != Some(env.src_nid))
                && preferred_of(c) == Some(env.src_nid)
            {
                assign = true;
            } else {
                if imp < SMALLIMP || imp <= env.best_imp + SMALLIMP / 2 {
                    return false;
                }
                // task_h_load(p) − task_h_load(cur) = 0: every task weighs TASK_LOAD here.
                assign = true;
            }
        } else if maymove && moveimp >= env.best_imp {
            assign = true;
        }
        if !assign {
            return false;
        }
        let mut target = dst_cpu;
        if cur.is_none() {
            target = env.dst_stats.idle_cpu.unwrap_or(dst_cpu);
            if !v.idle(target) {
                if let Some(b) = env.best_cpu.filter(|&b| v.idle(b)) {
                    target = b;
                }
            }
        }
        env.best_cpu = Some(target);
        env.best_task = cur;
        env.best_imp = imp;
        if maymove && cur.is_none() && v.idle(target) {
            return true;
        }
        !maymove && cur.is_some_and(|c| preferred_of(c) == Some(env.src_nid))
    }

    /// `(nr_numa_running, nr_preferred_running)` of `cpu`'s runqueue: its tasks with a
    /// preferred node, and those on it (`account_numa_enqueue`; the balancer's `fbq_type`).
    pub fn rq_numa_counts(&self, v: &View<'_>, cpu: CpuId) -> (u32, u32) {
        let node = v.machine.cpu_node(cpu);
        std::iter::once(v.current(cpu))
            .flatten()
            .chain(v.queued(cpu))
            .filter_map(|q| self.preferred_node(q))
            .fold((0, 0), |(n, p), pref| (n + 1, p + u32::from(pref == node)))
    }

    /// `migrate_degrades_locality` for moving `pid` from `src_cpu` to `dst_cpu` (the caller
    /// asks only at NUMA levels): −1 no opinion, 0 improves (to the preferred node), 1
    /// degrades. `dst_idle`: the balancing CPU is idle (`CPU_IDLE`).
    pub fn degrades_locality(
        &self,
        v: &View<'_>,
        pid: Pid,
        src_cpu: CpuId,
        dst_cpu: CpuId,
        dst_idle: bool,
    ) -> i32 {
        let Some(t) = self.tasks.get(&pid).filter(|t| t.has_faults) else {
            return -1;
        };
        let (src, dst) = (v.machine.cpu_node(src_cpu), v.machine.cpu_node(dst_cpu));
        if src == dst {
            return -1;
        }
        if t.preferred == Some(src) {
            let (_, preferred_running) = self.rq_numa_counts(v, src_cpu);
            return if v.nr_running(src_cpu) > preferred_running as usize {
                1
            } else {
                -1
            };
        }
        if t.preferred == Some(dst) {
            return 0;
        }
        if dst_idle {
            return -1;
        }
        let (sw, dw) = if t.in_group {
            (self.group_weight(pid, src), self.group_weight(pid, dst))
        } else {
            (self.task_weight(pid, src), self.task_weight(pid, dst))
        };
        i32::from(dw < sw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adjust_numa_imbalance_forgives_small_imbalances_of_lightly_loaded_nodes() {
        // dst_running ≤ imb_numa_nr: imbalances up to NUMA_IMBALANCE_MIN (2) are dropped.
        assert_eq!(adjust_numa_imbalance(2, 1, 1), 0);
        assert_eq!(adjust_numa_imbalance(3, 1, 1), 3);
        assert_eq!(adjust_numa_imbalance(1, 4, 4), 0);
        // A busier destination keeps its imbalance.
        assert_eq!(adjust_numa_imbalance(1, 2, 1), 1);
        assert_eq!(adjust_numa_imbalance(0, 2, 1), 0);
    }

    #[test]
    fn scan_period_bounds_follow_the_footprint() {
        let m = crate::testutils::machine(&crate::testutils::two_level_table(2, 20), 1);
        let d = crate::Builder::TwoLevel.build(&m, &crate::domains::BuildOptions::default());
        let config = crate::config::EngineConfig::default();
        let ctx = PolicyContext {
            machine: &m,
            domains: &d,
            config: &config,
        };
        let nb = NumaBalancing::new(&ctx, NumaConfig::default());
        let mb = |x: u64| x * 256;
        // Up to one window: min 1000 ms (floor 1000 / (2560 / 256) = 100 ms), max 60000 ms.
        assert_eq!(nb.task_scan_min(0), 1000);
        assert_eq!(nb.task_scan_min(mb(256)), 1000);
        assert_eq!(nb.task_scan_max(0, mb(256)), 60_000);
        // 1000 MB: 4 windows → 250 ms and 15000 ms; 64 GB: 256 windows → the 100 ms floor.
        assert_eq!(nb.task_scan_min(mb(1000)), 250);
        assert_eq!(nb.task_scan_max(0, mb(1000)), 15_000);
        assert_eq!(nb.task_scan_min(mb(65_536)), 100);
        assert_eq!(nb.task_scan_max(0, mb(65_536)), 234);
    }
}
