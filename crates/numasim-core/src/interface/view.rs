//! What a policy can see: a read-only view of the run at one instant.

use crate::config::EngineConfig;
use crate::cpuset::CpuSet;
use crate::domains::{Domains, Group, Level};
use crate::load::{GroupLoad, GroupLoads, PeltAvg, NICE_0_LOAD};
use crate::machine::{CpuId, Machine};
use crate::ring;
use crate::state::{CpuState, GroupState, PState, ProcState};
use crate::workload::{Kind, Workload};

use super::Pid;

/// What a policy can see: a read-only view of the simulation state at `now` (its fields and
/// methods are the [`World`]'s, through `Deref`). One pointer: the engine makes one at every
/// call to a policy, and a copy of a dozen fields cost about 3 % of a run.
#[derive(Clone, Copy)]
pub struct View<'a> {
    w: &'a World<'a>,
}

impl<'a> View<'a> {
    pub(crate) fn new(w: &'a World<'a>) -> Self {
        Self { w }
    }
}

impl<'a> std::ops::Deref for View<'a> {
    type Target = World<'a>;

    fn deref(&self) -> &World<'a> {
        self.w
    }
}

/// The part of a run's state a policy can see, owned by the engine and read through a [`View`].
pub struct World<'a> {
    pub now: u64,
    pub machine: &'a Machine,
    pub domains: &'a Domains,
    pub config: &'a EngineConfig,
    pub(crate) cpus: Vec<CpuState>,
    pub(crate) procs: Vec<ProcState>,
    pub(crate) groups: Vec<GroupState>,
    /// The sync points shared by the applications that share theirs (`App::shared_points`).
    pub(crate) shared_sync: crate::state::SyncPoints,
    pub(crate) workload: &'a Workload,
    pub(crate) held: std::collections::BTreeSet<Pid>,
    /// CPUs with two or more runnable tasks, and how many.
    pub(crate) overloaded: CpuSet,
    pub(crate) overloaded_count: usize,
    /// How many times a runqueue went from fewer than two tasks to two or more.
    pub(crate) overload_events: u64,
    /// A digest of the workload (`World::run_seed`).
    pub(crate) run_seed: u64,
    /// Load sums of the domains' groups, kept within a tick.
    pub(crate) group_loads: GroupLoads,
    /// `now / tick_ns`: the tick whose load averages it reads (kept with `now`).
    pub(crate) tick: u64,
    /// Per process, the CPUs it may run on now (`None`: every CPU); empty when no process of
    /// the workload has an affinity, so that asking costs one bounds check.
    pub(crate) allowed: Vec<Option<CpuSet>>,
    /// Whether PELT signals are kept for this run (`Policy::tracks_pelt`).
    pub(crate) pelt: bool,
    /// The half-life of the duty-cycle averages kept for this run, if any
    /// (`Policy::duty_cycle_half_life_ns`), and the averages, per process (empty when off:
    /// nothing kept per process).
    pub(crate) duty_half_life: Option<u64>,
    pub(crate) duty: Vec<crate::load::Ravg>,
    /// The shared dispatch queues (`Policy::shared_queues`; none when the policy has none):
    /// each its processes by (key, arrival sequence).
    pub(crate) shared: Vec<std::collections::BTreeSet<(u64, u64, Pid)>>,
    /// Per process, the queue it waits in and its place there (empty when there are no shared
    /// queues: nothing kept per process).
    pub(crate) shared_of: Vec<Option<(usize, u64, u64)>>,
}

impl World<'_> {
    /// A number fixed by the run's workload — a digest of every process's seed, arrival,
    /// demand, kind and parent CPU — for a policy that draws pseudo-random numbers (as a
    /// kernel seeds its generators at boot): every run of the same workload draws the same,
    /// other workloads (other replications) draw others.
    #[inline]
    pub fn run_seed(&self) -> u64 {
        self.run_seed
    }

    /// The CPUs `pid` may run on now (`p->cpus_ptr`), or `None` when it may run on every CPU
    /// (the default: then nothing restricts it and every test below is true).
    #[inline]
    pub fn allowed(&self, pid: Pid) -> Option<&CpuSet> {
        self.allowed.get(pid).and_then(Option::as_ref)
    }

    /// Whether `pid` may run on `cpu` now (`cpumask_test_cpu(cpu, p->cpus_ptr)`).
    #[inline]
    pub fn may_run(&self, pid: Pid, cpu: CpuId) -> bool {
        self.allowed(pid).is_none_or(|set| set.contains(cpu))
    }

    /// Whether some process of the workload has an affinity (a policy may skip its checks
    /// when none has).
    #[inline]
    pub fn any_affinity(&self) -> bool {
        !self.allowed.is_empty()
    }

    /// The kernel's `select_fallback_rq(cpu, p)` for `pid`: `cpu` if `pid` may run there,
    /// else the lowest CPU it may run on in `cpu`'s node, else the lowest CPU it may run on.
    pub fn fallback_cpu(&self, pid: Pid, cpu: CpuId) -> CpuId {
        let Some(set) = self.allowed(pid) else {
            return cpu;
        };
        if set.contains(cpu) {
            return cpu;
        }
        let node = self.machine.cpu_node(cpu);
        self.machine
            .node_cpus(node)
            .iter()
            .copied()
            .find(|&c| set.contains(c))
            .or_else(|| set.first())
            .expect("an affinity allows some CPU")
    }
}

/// The pages a thread of a sized group uses: `(node, MB)`, sparse, in the order first touched.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ThreadPages<'a> {
    /// Its private part.
    pub private: &'a [(usize, f64)],
    /// Its group's shared part (all of it; every thread of the group uses it).
    pub shared: &'a [(usize, f64)],
}

/// A process as a policy sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProcInfo {
    pub pid: Pid,
    pub tgid: usize,
    pub kind: Kind,
    pub mem: f64,
    pub state: PState,
    /// Current CPU (or the last one).
    pub cpu: CpuId,
    pub origin_cpu: Option<CpuId>,
    /// When it last stopped running (for cache hotness); `None` if it never ran.
    pub last_ran_ns: Option<u64>,
    pub arrival_ns: u64,
    /// Time on a CPU so far (up to the last accounting of its CPU): a policy that samples it
    /// periodically gets the process's load history.
    pub cpu_ns: u64,
}

impl View<'_> {
    /// Runnable + running processes on `cpu`.
    pub fn nr_running(&self, cpu: CpuId) -> usize {
        self.cpus[cpu].nr_running()
    }

    /// The running process.
    pub fn current(&self, cpu: CpuId) -> Option<Pid> {
        self.cpus[cpu].current
    }

    /// Runnable, not running processes; the front runs next.
    pub fn queued(
        &self,
        cpu: CpuId,
    ) -> impl DoubleEndedIterator<Item = Pid> + ExactSizeIterator + '_ {
        self.cpus[cpu].queue.iter().copied()
    }

    /// Whether nothing runs on `cpu`.
    pub fn idle(&self, cpu: CpuId) -> bool {
        self.cpus[cpu].current.is_none() && self.cpus[cpu].queue.is_empty()
    }

    /// The time `cpu` has had a process running since the run started, up to now (what the
    /// run's utilisation per CPU sums): a policy that samples it periodically gets each CPU's
    /// utilisation over its period, as sched_ext schedulers measure it.
    pub fn cpu_busy_ns(&self, cpu: CpuId) -> u64 {
        let c = &self.cpus[cpu];
        match c.current {
            Some(_) => c.busy_ns + self.now.saturating_sub(c.acct_ns),
            None => c.busy_ns,
        }
    }

    /// Instantaneous load: `NICE_0_LOAD` × nr_running (`raw_weighted_load`).
    pub fn raw_load(&self, cpu: CpuId) -> u64 {
        NICE_0_LOAD * self.nr_running(cpu) as u64
    }

    /// `cpu_load[idx - 1]` decayed per tick up to now (idx 0 = the raw load).
    pub fn cpu_load(&self, cpu: CpuId, idx: usize) -> u64 {
        if idx == 0 {
            return self.raw_load(cpu);
        }
        self.cpus[cpu].load_at(self.tick).cpu_load[idx - 1]
    }

    /// The CPUs with two or more runnable tasks (the only ones a pull can take from).
    pub fn overloaded(&self) -> &CpuSet {
        &self.overloaded
    }

    /// Whether no CPU has two runnable tasks (`overloaded` is empty), in constant time.
    pub fn none_overloaded(&self) -> bool {
        self.overloaded_count == 0
    }

    /// How many times, since the run started, a runqueue went from fewer than two runnable
    /// tasks to two or more (a CPU joined [`View::overloaded`]): a policy that keeps a flag
    /// such a change sets — as the kernel's `add_nr_running` sets `rd->overloaded` — compares
    /// it with the count it last saw.
    pub fn overload_events(&self) -> u64 {
        self.overload_events
    }

    /// The sums of `group`'s CPUs' loads now at load index `idx` (0 = instantaneous, `i` =
    /// `cpu_load[i − 1]`): what a scan of its CPUs with [`View::raw_load`], [`View::cpu_load`]
    /// and [`View::nr_running`] would give, kept between scans (crate::load, step 3).
    #[inline]
    pub fn group_load(&self, group: &Group, idx: usize) -> GroupLoad {
        let tick = self.tick;
        self.group_loads
            .get(group.id, tick, idx, &self.domains.member_of, |c| {
                let cpu = &self.cpus[c];
                let load = cpu.load_at(tick);
                let nr = cpu.nr_running();
                (nr, load.cpu_load, load.settled(NICE_0_LOAD * nr as u64))
            })
    }

    /// ⌊`NICE_0_LOAD` × the group's tasks / its CPUs⌋: its average instantaneous load, which
    /// bounds its averages at every load index, `avg_source ≤ bound ≤ avg_target` (each CPU's
    /// `source_load` is at most its instantaneous load, its `target_load` at least that). It
    /// depends on the tasks only, not on the tick, and costs no load read (crate::load, step 5).
    #[inline]
    pub fn group_bound(&self, group: &Group) -> u64 {
        self.group_loads.bound(group.id)
    }

    /// The group's tasks (runnable + running) now: `group_load(..).nr_running` without reading
    /// loads (crate::load, step 5).
    #[inline]
    pub fn group_nr_running(&self, group: &Group) -> u64 {
        self.group_loads.nr_running(group.id)
    }

    /// The largest [`View::group_bound`] of `level`'s groups other than its own (0 when it has
    /// none): from the level's ring when it has one (crate::load, step 6), else read.
    #[inline]
    pub fn others_max_bound(&self, level: &Level) -> u64 {
        match level.ring {
            Some(at) => ring::max_bound(&self.group_loads.ring_others(at)),
            None => level
                .groups
                .iter()
                .filter(|g| !g.local)
                .map(|g| self.group_bound(g))
                .max()
                .unwrap_or(0),
        }
    }

    /// The smallest [`View::group_bound`] of `level`'s groups other than its own (`None` when
    /// it has none), as [`View::others_max_bound`] finds the largest.
    #[inline]
    pub fn others_min_bound(&self, level: &Level) -> Option<u64> {
        match level.ring {
            Some(at) => {
                Some(ring::min_bound(&self.group_loads.ring_others(at))).filter(|&m| m != u64::MAX)
            }
            None => level
                .groups
                .iter()
                .filter(|g| !g.local)
                .map(|g| self.group_bound(g))
                .min(),
        }
    }

    /// The first of `level`'s groups from list position `from` on, other than its own, that
    /// has more tasks than CPUs and a bound above `max_load`: the next one
    /// `find_busiest_group` must read when the busiest so far has `max_load` (another's
    /// `avg_source` is at most its bound). From the level's ring when it has one.
    #[inline]
    pub fn next_busiest_candidate(
        &self,
        level: &Level,
        from: usize,
        max_load: u64,
    ) -> Option<usize> {
        self.next_other(
            level,
            from,
            |n| ring::max_eligible(n) > max_load,
            |g| self.group_nr_running(g) > g.weight as u64 && self.group_bound(g) > max_load,
        )
    }

    /// The first of `level`'s groups from list position `from` on, other than its own, with a
    /// bound below `min_load`: the next one `find_idlest_group` must read when the idlest so
    /// far has `min_load` (another's `avg_target` is at least its bound). From the level's ring
    /// when it has one.
    #[inline]
    pub fn next_idlest_candidate(
        &self,
        level: &Level,
        from: usize,
        min_load: u64,
    ) -> Option<usize> {
        self.next_other(
            level,
            from,
            |n| ring::min_bound(n) < min_load,
            |g| self.group_bound(g) < min_load,
        )
    }

    /// The first of `level`'s groups from list position `from` on, other than its own, that
    /// `passes`: searched on the level's ring with `on_ring`, the same test of a tree node
    /// (true when it holds for one of the node's groups), when the level has one, else read.
    #[inline]
    fn next_other(
        &self,
        level: &Level,
        from: usize,
        on_ring: impl Fn(&[u64; 3]) -> bool,
        passes: impl Fn(&Group) -> bool,
    ) -> Option<usize> {
        match level.ring {
            // The level's own group is its first.
            Some(at) => self.group_loads.ring_next(at, from.max(1), &on_ring),
            None => (from..level.groups.len()).find(|&i| {
                let g = &level.groups[i];
                !g.local && passes(g)
            }),
        }
    }

    /// `pid`'s PELT signals now (all zero unless the policy asked for them:
    /// [`Policy::tracks_pelt`](super::Policy::tracks_pelt)).
    pub fn task_pelt(&self, pid: Pid) -> PeltAvg {
        let p = &self.procs[pid];
        p.pelt.at(self.now, p.pelt_ind.0, p.pelt_ind.1).avg()
    }

    /// `cpu`'s PELT sums now: its `cfs_rq` signals, the sums of its attached tasks' (runnable
    /// and running ones, and blocked ones that last ran there, decaying).
    pub fn cpu_pelt(&self, cpu: CpuId) -> PeltAvg {
        let c = &self.cpus[cpu];
        c.pelt.at(self.now, c.pelt_ind.0, c.pelt_ind.1).avg()
    }

    /// `pid`'s duty cycle now, in [0, 1]: the share of time it was runnable (running or
    /// queued; not held, blocked or pending) over a window halving every
    /// [`Policy::duty_cycle_half_life_ns`](super::Policy::duty_cycle_half_life_ns), read at
    /// this instant without changing it (sched_ext's `ravg_read`, crate::load::Ravg); 0 when
    /// the policy did not ask for it.
    pub fn duty_cycle(&self, pid: Pid) -> f64 {
        match self.duty_half_life {
            Some(h) => self.duty[pid].read(self.now, h),
            None => 0.0,
        }
    }

    /// The sum of [`View::duty_cycle`] over the processes on `cpu` now (running and queued).
    pub fn cpu_duty_cycle(&self, cpu: CpuId) -> f64 {
        let c = &self.cpus[cpu];
        c.current
            .into_iter()
            .chain(c.queue.iter().copied())
            .map(|pid| self.duty_cycle(pid))
            .sum()
    }

    /// The CPU whose PELT sums hold `pid`'s signals, if any.
    pub fn pelt_cpu(&self, pid: Pid) -> Option<CpuId> {
        self.procs[pid].pelt_cpu
    }

    /// How many processes the workload has (pids `0..proc_count()`).
    pub fn proc_count(&self) -> usize {
        self.procs.len()
    }

    /// A process.
    pub fn proc(&self, pid: Pid) -> ProcInfo {
        let p = &self.procs[pid];
        let w = &self.workload.processes[pid];
        ProcInfo {
            pid,
            tgid: w.tgid as usize,
            kind: w.kind,
            mem: w.mem,
            state: p.state,
            cpu: p.cpu,
            origin_cpu: p.origin_cpu,
            last_ran_ns: p.last_ran_ns,
            arrival_ns: w.arrival_ns,
            cpu_ns: p.run_ns_by_node.iter().map(|(_, ns)| ns).sum(),
        }
    }

    /// `pid`'s time on a CPU up to now: [`ProcInfo::cpu_ns`] (accounted up to the last event
    /// of its CPU) and, while it runs, the time since (the kernel's `update_curr` before a
    /// tick reads `sum_exec_runtime`). Stalls on its CPU count, as in `cpu_ns`.
    pub fn cpu_time_ns(&self, pid: Pid) -> u64 {
        let p = &self.procs[pid];
        let accounted: u64 = p.run_ns_by_node.iter().map(|(_, ns)| ns).sum();
        let c = &self.cpus[p.cpu];
        if c.current == Some(pid) {
            accounted + self.now.saturating_sub(c.acct_ns)
        } else {
            accounted
        }
    }

    /// `pid`'s time on a CPU up to the last accounting of its CPU: [`ProcInfo::cpu_ns`]
    /// without the rest of [`View::proc`].
    #[inline]
    pub fn accounted_cpu_ns(&self, pid: Pid) -> u64 {
        self.procs[pid]
            .run_ns_by_node
            .iter()
            .map(|(_, ns)| ns)
            .sum()
    }

    /// Threads of group `tgid` that are runnable or running on `node` (kept incrementally: O(1)
    /// for multithreaded groups).
    pub fn group_threads_on_node(&self, tgid: usize, node: usize) -> u32 {
        self.groups[tgid].threads_on_node(node)
    }

    /// Live threads of group `tgid` (placed, not completed; sleeping ones included) on `node`
    /// — by the node of the CPU each is on or last ran on — and in all. Kept incrementally:
    /// O(1). `(0, 0)` for a single-threaded group (nothing is kept for it).
    pub fn group_live_on_node(&self, tgid: usize, node: usize) -> (u32, u32) {
        self.groups[tgid].live_on_node(node)
    }

    /// Number of threads in group `tgid`.
    pub fn group_threads(&self, tgid: usize) -> usize {
        self.groups[tgid].threads
    }

    /// How many shared dispatch queues the run keeps (`Policy::shared_queues`).
    pub fn shared_queues(&self) -> usize {
        self.shared.len()
    }

    /// How many processes wait in shared queue `queue`.
    pub fn shared_len(&self, queue: usize) -> usize {
        self.shared[queue].len()
    }

    /// The processes waiting in shared queue `queue`, in the order CPUs take them (key, then
    /// arrival).
    pub fn shared_tasks(&self, queue: usize) -> impl DoubleEndedIterator<Item = Pid> + '_ {
        self.shared[queue].iter().map(|&(_, _, pid)| pid)
    }

    /// The shared queue `pid` waits in, if it does.
    pub fn shared_queue_of(&self, pid: Pid) -> Option<usize> {
        self.shared_of
            .get(pid)
            .copied()
            .flatten()
            .map(|(q, _, _)| q)
    }

    /// Processes waiting for a processor (placement `None`), in pid order.
    pub fn held(&self) -> impl Iterator<Item = Pid> + '_ {
        self.held.iter().copied()
    }

    /// Held threads of group `tgid`, in pid order (a range of the held set: O(log n + k)).
    pub fn held_in(&self, tgid: usize) -> impl Iterator<Item = Pid> + '_ {
        let end = tgid + self.groups[tgid].threads.max(1);
        self.held.range(tgid..end).copied()
    }

    /// Threads of group `tgid` released from a sync point at this instant whose wake-up is
    /// still to come (the join's last thread ended and the next phase's threads are about to be
    /// placed): a space-sharing scheduler counts them as runnable.
    pub fn group_waking(&self, tgid: usize) -> u32 {
        self.groups[tgid].waking
    }

    /// Whether every thread of group `tgid` has completed.
    pub fn group_done(&self, tgid: usize) -> bool {
        self.groups[tgid].done == self.groups[tgid].threads
    }

    /// The most threads of group `tgid` that can be runnable at once as its program declares
    /// it (process control's "maximum parallelism"): the largest set of threads whose first
    /// segment waits for the same sync point (or for none); the group's size for a group
    /// without structure.
    pub fn group_parallelism(&self, tgid: usize) -> usize {
        match self.groups[tgid].app {
            Some(app) => self.workload.apps[app].parallelism(),
            None => self.groups[tgid].threads,
        }
    }

    /// MB placed so far for thread `pid` (its private part and its share of the shared part),
    /// and MB it shares with the other threads of its group; `(0, 0)` for a process without
    /// sizes (crate::memory).
    pub fn resident_mb(&self, pid: Pid) -> (f64, f64) {
        let tgid = self.workload.processes[pid].tgid as usize;
        self.groups[tgid].memory.resident_mb(pid - tgid)
    }

    /// Where thread `pid`'s pages are, by part (MB per node of its private part and of its
    /// group's shared part); `None` for a process without sizes (its pages are
    /// [`View::pages`], shares of its group).
    pub fn thread_pages(&self, pid: Pid) -> Option<ThreadPages<'_>> {
        let tgid = self.workload.processes[pid].tgid as usize;
        self.groups[tgid]
            .memory
            .parts(pid - tgid)
            .map(|(private, shared)| ThreadPages { private, shared })
    }

    /// Whether group `tgid` is an application with a structure (barriers or a pipeline).
    pub fn is_app(&self, tgid: usize) -> bool {
        self.groups[tgid].app.is_some()
    }

    /// Pages of group `tgid`: `(node, amount)` for the nodes holding any: shares of the group
    /// (no sizes) or MB (an application with a footprint).
    pub fn pages(&self, tgid: usize) -> &[(usize, f64)] {
        self.groups[tgid].memory.pages()
    }
}
