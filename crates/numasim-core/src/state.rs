//! The state of a run that the engine changes and policies read (through
//! [`crate::interface::View`]): per CPU, per process, per thread group.
//!
//! ```text
//!   CpuState:   current, queue (front runs next), accounting clock, stall, timers, load averages
//!   ProcState:  lifecycle, CPU, origin, work left, burst, slice, metrics accumulated so far
//!   GroupState: threads, threads runnable/running per node, memory (crate::memory)
//! ```

use std::collections::VecDeque;

use rand_pcg::Pcg64;

use crate::load::{LoadAvg, Pelt, NICE_0_LOAD};
use crate::machine::CpuId;
use crate::memory::{entry, GroupMemory};
use crate::workload::Pid;

/// What kind of migration a move is (reported by kind in every result).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MigrationKind {
    Pull,
    Push,
    Exchange,
    Idle,
    Active,
    Placement,
    /// Woken on another CPU than it slept on.
    Wakeup,
    /// Moved by the engine because a change of its allowed CPUs excluded its CPU (the
    /// kernel's `affine_move_task`); counted apart from every balancer's moves.
    Affinity,
}

impl MigrationKind {
    /// Every kind, in report order.
    pub const ALL: [MigrationKind; 8] = [
        Self::Pull,
        Self::Push,
        Self::Exchange,
        Self::Idle,
        Self::Active,
        Self::Placement,
        Self::Wakeup,
        Self::Affinity,
    ];

    /// The kinds a run without affinity reports (every kind but `affinity`, which results
    /// list only when the workload gives some process an affinity: other results read as
    /// before it existed).
    pub const CLASSIC: usize = 7;

    /// Name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Pull => "pull",
            Self::Push => "push",
            Self::Exchange => "exchange",
            Self::Idle => "idle",
            Self::Active => "active",
            Self::Placement => "placement",
            Self::Wakeup => "wakeup",
            Self::Affinity => "affinity",
        }
    }
}

/// Lifecycle of a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PState {
    Pending,
    /// Arrived or woken, waiting for the policy to give it a processor.
    Held,
    Runnable,
    Running,
    Blocked,
    Done,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct CpuState {
    pub(crate) queue: VecDeque<Pid>,
    pub(crate) current: Option<Pid>,
    pub(crate) acct_ns: u64,
    pub(crate) stall_until: u64,
    pub(crate) milestone_gen: u64,
    pub(crate) balance_gen: u64,
    pub(crate) busy_ns: u64,
    pub(crate) balance_ns: u64,
    /// Averages up to the last tick applied. A `Cell` so that reading them through the View
    /// can memoise the ticks it had to apply (the raw load is constant between updates).
    pub(crate) load: std::cell::Cell<LoadAvg>,
    /// PELT sums of its attached tasks (only for policies that ask: `Policy::tracks_pelt`),
    /// and the indicators they follow since `pelt.at_ns`: (runnable tasks, one running).
    pub(crate) pelt: Pelt,
    pub(crate) pelt_ind: (f64, f64),
}

impl CpuState {
    /// The load averages with every tick up to `now_tick` applied (at the current raw load,
    /// constant since the last change), memoised in the cell.
    pub(crate) fn load_at(&self, now_tick: u64) -> LoadAvg {
        let raw = NICE_0_LOAD * self.nr_running() as u64;
        let load = self.load.get().caught_up(now_tick, raw);
        self.load.set(load);
        load
    }

    pub(crate) fn nr_running(&self) -> usize {
        self.queue.len() + usize::from(self.current.is_some())
    }
}

#[derive(Debug, Clone)]
pub(crate) struct ProcState {
    pub(crate) state: PState,
    pub(crate) cpu: CpuId,
    pub(crate) origin_cpu: Option<CpuId>,
    pub(crate) remaining: f64,
    pub(crate) burst_left: f64,
    pub(crate) rng: Pcg64,
    /// Under `exec = total`, the length of the IO wait that reaches the end of its time alone
    /// (cut there, before a 1 ns exit burst); 0 when it has none (`crate::engine::total_time`).
    pub(crate) final_wait_ns: u64,
    pub(crate) slice_left_ns: u64,
    pub(crate) last_ran_ns: Option<u64>,
    pub(crate) refill_pending_ns: u64,
    pub(crate) first_run_ns: Option<u64>,
    pub(crate) completion_ns: Option<u64>,
    /// (node, ns) for the nodes it ran on: processes visit few nodes, machines have many (two
    /// kept inline: most processes run on one or two, and need no allocation for it).
    pub(crate) run_ns_by_node: smallvec::SmallVec<[(u32, u64); 2]>,
    pub(crate) run_ns_fast: u64,
    pub(crate) run_ns_slow: u64,
    pub(crate) refill_ns: u64,
    pub(crate) migrations_by_kind: [u32; MigrationKind::ALL.len()],
    /// Per memory access level (up to six inline: no allocation per process).
    pub(crate) migrations_by_level: smallvec::SmallVec<[u32; 6]>,
    /// Migrations between CPUs of different speeds.
    pub(crate) class_migrations: u32,
    pub(crate) remote_weighted_ns: f64,
    /// Share of its accesses to other nodes, time-weighted like `remote_weighted_ns`.
    pub(crate) remote_share_ns: f64,
    pub(crate) mem_time_ns: f64,
    pub(crate) io_wait_ns: u64,
    /// Time blocked at a sync point (barrier or pipeline queue) of its application.
    pub(crate) sync_wait_ns: u64,
    /// Index of the current segment of its application's plan (structured threads only).
    pub(crate) segment: u32,
    /// When its current segment could start (traced runs record it).
    pub(crate) segment_start_ns: u64,
    /// Taken off its CPU by a policy's `holds` (its next placement is a migration).
    pub(crate) preempted: bool,
    /// Node it is counted on in its group's live counts (multithreaded groups only).
    pub(crate) live_node: Option<u32>,
    pub(crate) blocked_since: u64,
    pub(crate) work_done: f64,
    pub(crate) run_start_ns: u64,
    /// PELT signals (only for policies that ask), the indicators they follow since
    /// `pelt.at_ns` (runnable, running), and the CPU whose sums hold them.
    pub(crate) pelt: Pelt,
    pub(crate) pelt_ind: (f64, f64),
    pub(crate) pelt_cpu: Option<CpuId>,
    /// Whether it was ever attached (a first attach starts it as a new task).
    pub(crate) pelt_started: bool,
}

impl ProcState {
    /// One more migration of `kind` across memory access level `level`.
    pub(crate) fn count_migration(&mut self, kind: MigrationKind, level: usize) {
        self.migrations_by_kind[kind as usize] += 1;
        self.migrations_by_level[level] += 1;
    }
}

/// A thread group.
#[derive(Debug, Clone, Default)]
pub(crate) struct GroupState {
    pub(crate) threads: usize,
    /// Threads runnable or running per node, kept as threads are enqueued and leave: sparse
    /// `(node, count)` for single-threaded groups (a million of them must stay small), dense by
    /// node for multithreaded ones (an O(1) read for thread-aware selection).
    on_node: crate::memory::NodeList<u32>,
    on_node_dense: Vec<u32>,
    /// Multithreaded groups only: live threads (placed, not completed) per node of the CPU they
    /// are on or last ran on, sleeping ones included (the kernel's `task_cpu`), and their total.
    live_on_node: Vec<u32>,
    live: u32,
    pub(crate) memory: GroupMemory,
    /// Threads completed.
    pub(crate) done: usize,
    /// Threads released from a sync point whose wake-up event is pending.
    pub(crate) waking: u32,
    /// Index of its application in the workload (structured groups only).
    pub(crate) app: Option<usize>,
    /// Its application's sync points.
    pub(crate) sync: SyncPoints,
    /// Its application waits at and signals the workload's shared points instead
    /// (`App::shared_points`).
    pub(crate) shared_points: bool,
}

impl GroupState {
    /// One more (`+1`) or one fewer (`-1`) thread runnable or running on `node`.
    pub(crate) fn count_on_node(&mut self, node: usize, delta: i32) {
        let c = if self.threads > 1 {
            if self.on_node_dense.len() <= node {
                self.on_node_dense.resize(node + 1, 0);
            }
            &mut self.on_node_dense[node]
        } else {
            entry(&mut self.on_node, node, 0)
        };
        *c = c
            .checked_add_signed(delta)
            .expect("thread counts stay non-negative");
    }

    /// A thread of a multithreaded group is now on `to` (placed, or moved from `from`), or
    /// completed on `from` (`to` = None).
    pub(crate) fn move_live(&mut self, from: Option<usize>, to: Option<usize>) {
        if let Some(from) = from {
            self.live_on_node[from] -= 1;
            self.live -= 1;
        }
        if let Some(to) = to {
            if self.live_on_node.len() <= to {
                self.live_on_node.resize(to + 1, 0);
            }
            self.live_on_node[to] += 1;
            self.live += 1;
        }
    }

    /// Live threads on `node` and in all (multithreaded groups; `(0, 0)` otherwise).
    pub(crate) fn live_on_node(&self, node: usize) -> (u32, u32) {
        (self.live_on_node.get(node).copied().unwrap_or(0), self.live)
    }

    /// Threads runnable or running on `node`.
    pub(crate) fn threads_on_node(&self, node: usize) -> u32 {
        if self.threads > 1 {
            self.on_node_dense.get(node).copied().unwrap_or(0)
        } else {
            self.on_node
                .iter()
                .find(|(n, _)| *n == node)
                .map_or(0, |(_, c)| *c)
        }
    }
}

/// The sync points of one application: how many signals each has had, and who waits for it.
#[derive(Debug, Clone, Default)]
pub(crate) struct SyncPoints {
    arrived: Vec<u32>,
    /// Per point: `(pid, count)` of the threads blocked until it has `count` signals.
    waiting: Vec<Vec<(Pid, u32)>>,
}

impl SyncPoints {
    pub(crate) fn new(points: u32) -> Self {
        Self {
            arrived: vec![0; points as usize],
            waiting: vec![Vec::new(); points as usize],
        }
    }

    /// Whether `point` has had `count` signals.
    pub(crate) fn reached(&self, point: u32, count: u32) -> bool {
        self.arrived[point as usize] >= count
    }

    /// `pid` blocks until `point` has `count` signals.
    pub(crate) fn wait(&mut self, pid: Pid, point: u32, count: u32) {
        self.waiting[point as usize].push((pid, count));
    }

    /// One more signal of `point`: the threads it releases, in the order they blocked.
    pub(crate) fn signal(&mut self, point: u32) -> Vec<Pid> {
        let k = point as usize;
        self.arrived[k] += 1;
        let arrived = self.arrived[k];
        let mut released = Vec::new();
        self.waiting[k].retain(|&(pid, count)| {
            let go = arrived >= count;
            if go {
                released.push(pid);
            }
            !go
        });
        released
    }
}
