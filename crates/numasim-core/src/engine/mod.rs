//! The discrete-event simulation engine: the event loop, dispatch, and the checking and
//! applying of policy decisions. The state it changes is in [`crate::state`], the memory model in
//! [`crate::memory`], load tracking in [`crate::load`], and what policies see and return in
//! [`crate::interface`].
//!
//! ```text
//!   arrivals: pids by arrival time, read in order (first among events at the same instant)
//!   events: 4-ary heap<(time_ns, seq, Event)>   Arrive(pid) | Milestone(cpu, gen)
//!                                               | IoDone(pid) | SyncDone(pid) | Balance(cpu, gen)
//!                                               | Active{busiest, target, level} | Kick(cpu)
//!                                               | KickNext(cpu) | Global | Affinity(pid, k)
//!   wheel:  Balance(cpu, gen) timers on a tick of the next 512, a bucket per tick (wheel.rs);
//!           the next event is the heap's top or the wheel's front, whichever key is smaller
//!   cpu c:  current ── running, progress accounted up to acct_ns
//!           queue   ── runnable, front runs next (round robin: the policy's slice or timeslice_ns)
//!           stall_until ── cache refill or balancing work: the current process makes no progress
//!           load    ── 128 × nr_running, and its per-tick decayed averages cpu_load[0..3]
//!           pelt    ── PELT sums of its attached tasks (policies that ask: tracks_pelt)
//!           kicked  ── balancing on other CPUs' behalf, a KickNext pending
//!   process: remaining work (ns at speed 1, all-local), current burst, origin, metrics,
//!            allowed CPUs (View::allowed: kept only when some process has an affinity)
//!   group:   page shares per node (first touch), threads per node
//! ```
//!
//! 1. Pop the earliest event; account the progress of every CPU it touches up to its time.
//! 2. A running process progresses at `speed / ((1 − m) + m · L)` where
//!    `L = Σ_k share_k · distance(node, k) / 10` over its group's pages; stalls make no progress.
//! 3. Arrivals ask the policy where to place the process; IO completions and sync-point releases
//!    (an application thread at a barrier or an empty queue, which left the runqueue) where to
//!    wake it; a CPU with nothing left — its process stopped, or a decision moved or held it
//!    away — balances newly-idle (levels the policy allows) before idling; every CPU has a
//!    periodic balancing timer the policy sets. An expired slice is seen at once, or at the
//!    policy's tick (`Policy::slice_tick_ns`).
//! 4. Work that happens later is an event of its own: a kick sent at another CPU's periodic
//!    event (`Policy::kick` → `Kick`), after which the kicked CPU balances CPUs on their behalf
//!    one after another (`Policy::next_kicked`, a `KickNext` when its charged work ends); an
//!    active balance asked for with a latency (`Policy::active_balance_latency_ns` → `Active`,
//!    after the asking CPU's work; without one it runs at once); an affinity change at its time
//!    (`Affinity`; docs/engine.md, "Affinity").
//! 5. Every decision is checked (CPUs that exist, a process where the move says, a CPU its
//!    affinity allows) and applied here: moves set the cache-refill penalty (0.1 ms in a
//!    node, 0.5 ms × distance/10 across nodes), each attempt stalls the CPU that does it for
//!    1 µs per runqueue, 0.2 µs per task examined and 5 µs per migration (all configurable).
//! 6. The run ends when every process has completed; metrics are gathered from the states. A
//!    watched run (`run_watched`) also hands its watch the progress every
//!    `WATCH_EVERY_EVENTS` events and ends, with no result, when the watch says stop (watch.rs).
//!
//! Determinism: one event order (time, then insertion sequence: keys are unique, so any correct
//! priority queue pops the same sequence; a 4-ary heap, whose pops touch half the levels of a
//! binary one, is the faster on big machines, and a wheel of per-tick buckets, appended to in
//! sequence order, for the balancing timers), ordered containers, each
//! process's own RNG for its bursts and waits. Known limits: no priorities or preemption on
//! wake-up (every process is nice 0); time advances in integer ns, work in f64 ns.

pub mod metrics;
#[cfg(feature = "testutils")]
pub mod scene;
pub mod watch;
mod wheel;

use dary_heap::QuaternaryHeap;
use std::borrow::Cow;
use std::ops::ControlFlow;

use rand::SeedableRng;
use rand_distr::{Distribution, Exp};
use rand_pcg::Pcg64;

use crate::assumptions::{Exec, Memory, SliceCharge};
use crate::config::EngineConfig;
use crate::domains::Domains;
use crate::error::{InputError, Result};
use crate::interface::{
    bits, AffinityMove, Attempt, BalanceKind, Costs, Enqueue, EnqueueKind, MigrationKind, PState,
    Pid, Policy, Quiet, View, World,
};
use crate::machine::{CpuId, Machine};
use crate::memory::GroupMemory;
use crate::state::{CpuState, GroupState, ProcState, SyncPoints};
use crate::workload::{Kind, Workload};

pub use metrics::{ProcResult, RunResult, Summary};
pub use watch::{Outcome, Paced, Progress, Watch, WATCH_EVERY_EVENTS};

/// One running interval of a process on a CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Slice {
    pub cpu: CpuId,
    pub pid: Pid,
    pub start_ns: u64,
    pub end_ns: u64,
}

/// The CPU of a traced balancing attempt that belongs to no CPU (a machine-wide callback).
pub const MACHINE_WIDE: CpuId = CpuId::MAX;

/// What a traced run recorded besides its slices (for traces and debugging balancers). Kinds
/// are names (`Cow`: borrowed while recording, owned when read back from a saved run).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TraceEvents {
    /// `(time_ns, pid, from_cpu, to_cpu, kind)` for every migration.
    pub migrations: Vec<(u64, Pid, CpuId, CpuId, Cow<'static, str>)>,
    /// `(time_ns, cpu, level, kind, moved)` for every balancing attempt; `cpu` is
    /// [`MACHINE_WIDE`] for a callback that belongs to no CPU. Kinds: `periodic`, `newidle`,
    /// `active`, `other` (`cpu_idle`, the tick's work, a machine-wide callback) and `kicked`
    /// (a periodic balancing a kicked CPU did on `cpu`'s behalf).
    pub balances: Vec<(u64, CpuId, usize, Cow<'static, str>, usize)>,
    /// `(time_ns, cpu, nr_running)` whenever a runqueue's length changes.
    pub runqueue: Vec<(u64, CpuId, usize)>,
    /// `(pid, segment, start_ns, end_ns)` for every segment of an application's thread: from
    /// when it could start (its wait satisfied) to when its work was done.
    #[serde(default)]
    pub segments: Vec<(Pid, u32, u64, u64)>,
    /// `(time_ns, pid)` for every wake-up of a blocked process (IO done, or released from a
    /// sync point): when it became runnable again. Its next slice's start less this time is
    /// the wake-up's delay.
    #[serde(default)]
    pub wakeups: Vec<(u64, Pid)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Event {
    Arrive(Pid),
    Milestone(CpuId, u64),
    IoDone(Pid),
    /// A thread blocked at a sync point of its application is released.
    SyncDone(Pid),
    Balance(CpuId, u64),
    Global,
    /// Change `k` of the process's affinity (`Process::affinity[k]`) takes effect.
    Affinity(Pid, u32),
    /// An active balance asked for by an attempt of `target` at `level` runs: `busiest`'s
    /// migration thread (`Policy::active_balance_latency_ns`).
    Active {
        busiest: CpuId,
        target: CpuId,
        level: usize,
    },
    /// An interrupt another CPU sent (`Policy::kick`) reaches this CPU.
    Kick(CpuId),
    /// This CPU's balancing on other CPUs' behalf goes on (`Policy::next_kicked`).
    KickNext(CpuId),
}

/// An event in the heap, earliest first: by time, then by the sequence number it was
/// scheduled with (unique, so two entries never tie and the event itself is never compared).
/// Compared as one 128-bit key, `time << 64 | sequence`: the order of the `(time, sequence)`
/// pair, at one comparison (the heap's sifts are most of its cost).
#[derive(Debug, Clone, Copy)]
struct Scheduled {
    t: u64,
    seq: u64,
    ev: Event,
}

impl Scheduled {
    fn key(&self) -> u128 {
        key(self.t, self.seq)
    }
}

/// `time << 64 | sequence`: the order of events, in the heap and in the wheel.
#[inline]
fn key(t: u64, seq: u64) -> u128 {
    (u128::from(t) << 64) | u128::from(seq)
}

impl PartialEq for Scheduled {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Scheduled {}

impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Scheduled {
    /// Reversed: the heap is a max-heap, and the earliest goes first.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other.key().cmp(&self.key())
    }
}

/// Balancing statistics per (kind, level).
#[derive(Debug, Clone, Default)]
struct BalanceStats {
    /// `[periodic, newidle, active, other]` × level; "other" = `cpu_idle` (level 0) and the
    /// machine-wide callback (level 0).
    invocations: [Vec<u64>; 4],
    moved: [Vec<u64>; 4],
    cost_ns: u64,
    /// Candidate evaluations policies reported (`Attempt::evaluations`).
    evaluations: u64,
    rejected: u64,
    /// Per CPU: attempts made while it had nothing to run (newly idle, or periodic when idle).
    idle_attempts: Vec<u64>,
}

struct State<'a> {
    /// What policies see of the run (through a [`View`]: one pointer, made at every call).
    w: World<'a>,
    seq: u64,
    events: QuaternaryHeap<Scheduled>,
    /// The periodic-balancing timers on a tick within the next ticks (the rest: `events`).
    wheel: wheel::Wheel,
    mals: Vec<u32>,
    done: usize,
    stats: BalanceStats,
    trace: Vec<Slice>,
    trace_events: TraceEvents,
    events_processed: u64,
    /// CPUs whose running process a decision moved away: they pick their next one.
    vacated: Vec<CpuId>,
    /// Per CPU: whether it is balancing on other CPUs' behalf (a `KickNext` is pending).
    kicked: Vec<bool>,
    /// Processes to arrive, by arrival time then pid (read in order by `drive`).
    arrivals: Vec<Pid>,
    /// Per application: running ns and remote-share-weighted ns per time bin (metrics).
    app_bins: Vec<Vec<(f64, f64)>>,
    /// The slice a running process gets before the next queued one runs: the policy's
    /// (`Policy::timeslice_ns`) or the config's.
    slice_ns: u64,
    /// The tick at which an expired slice is seen (`Policy::slice_tick_ns`; 0: at once).
    slice_tick_ns: u64,
    /// How long after the asking attempt an active balance runs (`None`: at once).
    active_latency_ns: Option<u64>,
    /// Whether PELT signals are kept (`Policy::tracks_pelt`).
    pelt: bool,
    /// Whether the periodic timer depends on the running process
    /// (`Policy::timer_follows_running`): asked again when a CPU's running process changes.
    timer_follows_running: bool,
    /// Per CPU, the time its periodic timer is armed for (`None`: not armed).
    timer_at: Vec<Option<u64>>,
    /// The attempts of a quiet periodic balancing (`Policy::quiet_periodic`), kept to reuse.
    quiet: Quiet,
    /// The ns of the tick `w.tick`, `[start, end)` (`set_now`).
    tick_span: (u64, u64),
    /// Whether some process has an affinity (results then report the `affinity` kind).
    affine: bool,
    /// Per process with one pending, the node its lazy move sends it to at its next enqueue
    /// (`Attempt::lazy_moves`; few at a time, nothing per process).
    lazy: std::collections::BTreeMap<Pid, usize>,
    /// `cpumask_any_and_distribute`'s last answer (the kernel's per-CPU
    /// `distribute_cpu_mask_prev`; one for the machine here: docs/engine.md, "Affinity").
    distribute_prev: CpuId,
    /// The next arrival sequence in a shared queue (equal keys are taken in this order).
    shared_seq: u64,
    /// The order of shared queues a policy's `dispatch` answered, kept to reuse.
    shared_order: Vec<usize>,
    /// Since when processes have waited in shared queues with every CPU idle, as seen at the
    /// machine-wide calls (`global`): the watchdog's clock.
    stalled_since: Option<u64>,
    /// Why the run cannot go on (the watchdog fired), reported after the event.
    stalled: Option<InputError>,
    /// How many accountings credited work (`advance`): `drive`'s livelock check compares it.
    progress: u64,
    /// The count that check saw last, and since when it has seen it unchanged with the
    /// machine running (`None`: it changed, or the machine was seen running nothing).
    progress_seen: (u64, Option<u64>),
}

/// How long a run may go with processes running but none making progress (every running one
/// stalled: cache refills and balancing work that outlast its slices), as seen every
/// `WATCH_EVERY_EVENTS` events, before it ends with an error rather than run forever.
const NO_PROGRESS_NS: u64 = 60_000_000_000;

/// How long processes may wait in shared queues with every CPU idle before the run ends with
/// an error: sched_ext's watchdog timeout (`SCX_WATCHDOG_MAX_TIMEOUT`, 30 s), after which the
/// kernel ejects a scheduler whose runnable task has not run.
const SHARED_STALL_NS: u64 = 30_000_000_000;

/// Numerical slack on work (ns): integer event times are rounded up, so a burst that should end
/// exactly may keep a few 1e-9 of work.
const WORK_EPS: f64 = 1e-3;

impl<'a> State<'a> {
    /// Moves the clock to `now`, and `w.tick` with it: a division only when `now` leaves the
    /// current tick (most events share one with the event before).
    #[inline]
    fn set_now(&mut self, now: u64) {
        self.w.now = now;
        let (start, end) = self.tick_span;
        if now < start || now >= end {
            let tick_ns = self.w.config.tick_ns;
            self.w.tick = now / tick_ns;
            self.tick_span = (
                self.w.tick * tick_ns,
                (self.w.tick + 1).saturating_mul(tick_ns),
            );
        }
    }

    fn view(&self) -> View<'_> {
        View::new(&self.w)
    }

    /// After a change of `pid`'s state at this instant: its duty cycle and PELT signals, when
    /// the policy asked for them.
    ///
    /// Duty cycle (`Policy::duty_cycle_half_life_ns`): its average is told the new value (1
    /// runnable, 0 not) when it changed, as scx_rusty's `task_load_adj` from `ops.runnable`
    /// and `ops.quiescent` (crate::load::Ravg).
    ///
    /// PELT (`Policy::tracks_pelt`): brings its signals up to now with the indicators they
    /// followed, moves them from the CPU it was attached to to the one it is on (blocked tasks
    /// stay attached where they last ran; held and completed ones leave), and records the new
    /// indicators of the task and of those CPUs (crate::load::Pelt).
    fn signals_update(&mut self, pid: Pid) {
        if let Some(h) = self.w.duty_half_life {
            let now = self.w.now;
            let p = &self.w.procs[pid];
            let running = self.w.cpus[p.cpu].current == Some(pid);
            let runnable = f64::from(u8::from(running || p.state == PState::Runnable));
            let duty = &mut self.w.duty[pid];
            if duty.value() != runnable {
                duty.accumulate(runnable, now, h);
            }
        }
        if !self.pelt {
            return;
        }
        let now = self.w.now;
        let p = &self.w.procs[pid];
        let running = self.w.cpus[p.cpu].current == Some(pid);
        let runnable = running || p.state == PState::Runnable;
        let target = match p.state {
            PState::Runnable | PState::Running | PState::Blocked => Some(p.cpu),
            PState::Pending | PState::Held | PState::Done => None,
        };
        let mut t = p.pelt.at(now, p.pelt_ind.0, p.pelt_ind.1);
        let old = p.pelt_cpu;
        if old != target {
            if let Some(c) = old {
                self.cpu_pelt_sync(c);
                self.w.cpus[c].pelt.sub(&t);
            }
            if let Some(c) = target {
                self.cpu_pelt_sync(c);
                if !self.w.procs[pid].pelt_started {
                    t = crate::load::Pelt::new_task(&self.w.cpus[c].pelt, now);
                    self.w.procs[pid].pelt_started = true;
                }
                self.w.cpus[c].pelt.add(&t);
            }
        } else if let Some(c) = target {
            self.cpu_pelt_sync(c);
        }
        let p = &mut self.w.procs[pid];
        p.pelt = t;
        p.pelt_ind = (f64::from(u8::from(runnable)), f64::from(u8::from(running)));
        p.pelt_cpu = target;
    }

    /// Brings `cpu`'s PELT sums up to now with the indicators they followed and records its
    /// current ones (runnable tasks, one running).
    fn cpu_pelt_sync(&mut self, cpu: CpuId) {
        let now = self.w.now;
        let c = &mut self.w.cpus[cpu];
        c.pelt = c.pelt.at(now, c.pelt_ind.0, c.pelt_ind.1);
        c.pelt_ind = (
            c.nr_running() as f64,
            f64::from(u8::from(c.current.is_some())),
        );
    }

    fn push(&mut self, t: u64, ev: Event) {
        self.seq += 1;
        self.events.push(Scheduled {
            t,
            seq: self.seq,
            ev,
        });
    }

    /// After a change of `cpu`'s runqueue length: keeps the overloaded set and the groups'
    /// load sums up to date, and records the length (traced runs only).
    fn rq_changed(&mut self, cpu: CpuId) {
        let nr = self.w.cpus[cpu].nr_running();
        let over = nr >= 2;
        if over != self.w.overloaded.contains(cpu) {
            self.w.overloaded.set(cpu, over);
            self.w.overloaded_count = if over {
                self.w.overload_events += 1;
                self.w.overloaded_count + 1
            } else {
                self.w.overloaded_count - 1
            };
        }
        // touch_load caught the averages up to now before the change.
        let tick = self.w.tick;
        let avg = self.w.cpus[cpu].load.get();
        debug_assert!(avg.tick >= tick);
        self.w
            .group_loads
            .changed(cpu, &self.w.domains.member_of[cpu], tick, avg.cpu_load, nr);
        if self.w.config.record_trace {
            self.record_rq_len(cpu);
        }
    }

    /// Records `cpu`'s runqueue length now (traced runs; the last one at an instant stands).
    fn record_rq_len(&mut self, cpu: CpuId) {
        let n = self.w.cpus[cpu].nr_running();
        let rq = &mut self.trace_events.runqueue;
        match rq.last_mut() {
            Some(last) if last.0 == self.w.now && last.1 == cpu => last.2 = n,
            _ => rq.push((self.w.now, cpu, n)),
        }
    }

    /// Applies pending ticks to `cpu`'s load averages before its load changes.
    fn touch_load(&mut self, cpu: CpuId) {
        self.w.cpus[cpu].load_at(self.w.tick);
    }

    /// `(L, remote share)` of `pid` running on `cpu` (crate::memory).
    fn remote_factor(&self, pid: Pid, cpu: CpuId) -> (f64, f64) {
        let tgid = self.w.workload.processes[pid].tgid as usize;
        let node = self.w.machine.cpu_node(cpu);
        let scale = self.w.config.assumptions.remote.scale();
        self.w.groups[tgid]
            .memory
            .remote_factor(self.w.machine, node, pid - tgid, scale)
    }

    /// Progress per ns of `pid` on `cpu`, with its `(L, remote share)`.
    fn rate(&self, pid: Pid, cpu: CpuId) -> (f64, (f64, f64)) {
        let m = self.w.workload.processes[pid].mem;
        let (l, share) = self.remote_factor(pid, cpu);
        (self.w.machine.speed(cpu) / ((1.0 - m) + m * l), (l, share))
    }

    /// Accounts the running process's progress on `cpu` up to now.
    fn advance(&mut self, cpu: CpuId) {
        let now = self.w.now;
        let c = &self.w.cpus[cpu];
        let Some(pid) = c.current else {
            self.w.cpus[cpu].acct_ns = now;
            return;
        };
        let from = c.acct_ns;
        if now <= from {
            return;
        }
        let stalled = c.stall_until.clamp(from, now) - from;
        let productive = (now - from - stalled) as f64;
        let (rate, (l, remote_share)) = self.rate(pid, cpu);
        let m = self.w.workload.processes[pid].mem;
        let node = self.w.machine.cpu_node(cpu);
        let fast = self.w.machine.speed(cpu) > 1.0;
        let p = &mut self.w.procs[pid];
        // Event times are whole ns rounded up: never credit more work than the burst has left.
        let work = (productive * rate).min(p.burst_left.max(0.0));
        p.remaining -= work;
        p.burst_left -= work;
        p.work_done += work;
        self.progress += u64::from(work > 0.0);
        let wall = now - from;
        match p
            .run_ns_by_node
            .iter_mut()
            .find(|(n, _)| *n as usize == node)
        {
            Some((_, ns)) => *ns += wall,
            None => p.run_ns_by_node.push((node as u32, wall)),
        }
        if fast {
            p.run_ns_fast += wall;
        } else {
            p.run_ns_slow += wall;
        }
        p.remote_weighted_ns += l * wall as f64;
        p.remote_share_ns += remote_share * wall as f64;
        p.mem_time_ns += productive * (m * l) / ((1.0 - m) + m * l);
        p.slice_left_ns = p.slice_left_ns.saturating_sub(wall);
        self.w.cpus[cpu].busy_ns += wall;
        self.w.cpus[cpu].acct_ns = now;
        let tgid = self.w.workload.processes[pid].tgid as usize;
        if let Some(app) = self.w.groups[tgid].app {
            metrics::bin_remote_share(&mut self.app_bins[app], from, now, remote_share);
        }
    }

    /// (Re)schedules the milestone of `cpu`'s running process: end of burst or of slice.
    fn schedule_milestone(&mut self, cpu: CpuId) {
        self.w.cpus[cpu].milestone_gen += 1;
        let Some(pid) = self.w.cpus[cpu].current else {
            return;
        };
        let (rate, _) = self.rate(pid, cpu);
        let start = self.w.cpus[cpu].stall_until.max(self.w.now);
        let p = &self.w.procs[pid];
        let need = (p.burst_left.max(0.0) / rate).ceil() as u64;
        let t_work = start + need;
        let mut t_slice = self.w.now + p.slice_left_ns.max(1);
        if self.slice_tick_ns > 0 {
            // The end of a slice is seen at the policy's tick (Policy::slice_tick_ns).
            t_slice = t_slice.div_ceil(self.slice_tick_ns) * self.slice_tick_ns;
        }
        let gen = self.w.cpus[cpu].milestone_gen;
        self.push(t_work.min(t_slice), Event::Milestone(cpu, gen));
    }

    /// Stalls `cpu` for `ns` (balancing work or cache refill).
    #[inline]
    fn stall(&mut self, cpu: CpuId, ns: u64) {
        if ns == 0 {
            return;
        }
        let now = self.w.now;
        let c = &mut self.w.cpus[cpu];
        if c.current.is_none() {
            // A CPU running nothing: no progress to account (`advance` would only move
            // `acct_ns`, which `dispatch` sets before it is read) and no milestone to plan again
            // (a new one takes a generation above every earlier one); the stall delays the next
            // process dispatched here.
            c.acct_ns = now;
            c.stall_until = c.stall_until.max(now) + ns;
            return;
        }
        self.advance(cpu);
        let c = &mut self.w.cpus[cpu];
        c.stall_until = c.stall_until.max(now) + ns;
        self.schedule_milestone(cpu);
    }

    fn first_touch(&mut self, pid: Pid, node: usize) {
        let tgid = self.w.workload.processes[pid].tgid as usize;
        let g = &mut self.w.groups[tgid];
        g.memory.first_touch(pid - tgid, node, g.threads);
    }

    /// Puts `pid` at the tail of `cpu`'s queue, the runqueue's length not yet reported.
    fn queue_tail(&mut self, pid: Pid, cpu: CpuId) {
        self.touch_load(cpu);
        let node = self.w.machine.cpu_node(cpu);
        let tgid = self.w.workload.processes[pid].tgid as usize;
        let g = &mut self.w.groups[tgid];
        g.count_on_node(node, 1);
        let p = &mut self.w.procs[pid];
        if g.threads > 1 && p.live_node != Some(node as u32) {
            g.move_live(p.live_node.map(|n| n as usize), Some(node));
            p.live_node = Some(node as u32);
        }
        p.state = PState::Runnable;
        p.cpu = cpu;
        self.w.cpus[cpu].queue.push_back(pid);
    }

    fn enqueue(&mut self, pid: Pid, cpu: CpuId) {
        self.queue_tail(pid, cpu);
        self.rq_changed(cpu);
        self.signals_update(pid);
    }

    fn leave_node(&mut self, pid: Pid, cpu: CpuId) {
        let node = self.w.machine.cpu_node(cpu);
        let tgid = self.w.workload.processes[pid].tgid as usize;
        self.w.groups[tgid].count_on_node(node, -1);
    }

    /// Stops the running process of `cpu` (it stays on no queue).
    fn take_current(&mut self, cpu: CpuId) -> Pid {
        let pid = self.stop_current(cpu);
        self.rq_changed(cpu);
        pid
    }

    /// Stops the running process of `cpu` and puts it at the tail of the same CPU's queue (the
    /// end of a slice with others waiting). The runqueue's length is the same before and
    /// after, so the groups' load sums and rings are left as they are: taking the process off
    /// and back would trade the CPU's contribution for the one of a task fewer and back, the
    /// same integer sums at the same tick (its averages caught up before, as `take_current`
    /// does). What the two changes would leave behind is kept: a CPU of two tasks passes
    /// through one, so it counts as becoming overloaded again (`View::overload_events`), and a
    /// traced run records the length at this instant. The process stays on the CPU's node, so
    /// its group's thread counts are left as they are too (`leave_node` then `queue_tail` would
    /// count it off the node and back).
    fn requeue_current(&mut self, cpu: CpuId) {
        let pid = self.stop_current(cpu);
        let tgid = self.w.workload.processes[pid].tgid as usize;
        let multithreaded = self.w.groups[tgid].threads > 1;
        let node = self.w.machine.cpu_node(cpu) as u32;
        let p = &mut self.w.procs[pid];
        debug_assert!(p.cpu == cpu && (!multithreaded || p.live_node == Some(node)));
        p.state = PState::Runnable;
        self.w.cpus[cpu].queue.push_back(pid);
        let nr = self.w.cpus[cpu].nr_running();
        debug_assert!(self.w.overloaded.contains(cpu) == (nr >= 2));
        if nr == 2 {
            self.w.overload_events += 1;
        }
        if self.w.config.record_trace {
            self.record_rq_len(cpu);
        }
        self.signals_update(pid);
    }

    /// What `take_current` does but report the runqueue's new length.
    fn stop_current(&mut self, cpu: CpuId) -> Pid {
        self.advance(cpu);
        self.touch_load(cpu);
        let pid = self.w.cpus[cpu].current.take().expect("a running process");
        self.w.cpus[cpu].milestone_gen += 1;
        self.w.procs[pid].last_ran_ns = Some(self.w.now);
        if self.w.config.record_trace {
            self.trace.push(Slice {
                cpu,
                pid,
                start_ns: self.w.procs[pid].run_start_ns,
                end_ns: self.w.now,
            });
        }
        pid
    }

    /// Runs the next queued process if the CPU has none running: the front of its runqueue,
    /// or when that is empty, one the policy's `dispatch` takes from a shared queue.
    fn dispatch(&mut self, policy: &mut dyn Policy, cpu: CpuId) {
        if self.w.cpus[cpu].current.is_some() {
            return;
        }
        if !self.w.shared.is_empty() && self.w.cpus[cpu].queue.is_empty() {
            self.take_shared(policy, cpu);
        }
        self.run_next(policy, cpu);
    }

    /// Runs the front of the CPU's runqueue if it has none running (shared queues are not
    /// asked: `dispatch` was, at this stop).
    fn run_next(&mut self, policy: &mut dyn Policy, cpu: CpuId) {
        if self.w.cpus[cpu].current.is_some() {
            return;
        }
        let Some(pid) = self.w.cpus[cpu].queue.pop_front() else {
            return;
        };
        let now = self.w.now;
        self.w.cpus[cpu].current = Some(pid);
        self.w.cpus[cpu].acct_ns = now;
        if self.w.procs[pid].first_run_ns.is_none() {
            self.w.procs[pid].first_run_ns = Some(now);
            // `memory=parent` set the origin at creation (`place`); `first-run` sets it here.
            let origin = *self.w.procs[pid].origin_cpu.get_or_insert(cpu);
            let node = policy.first_touch_node(&self.view(), pid, origin);
            let node = if node < self.w.machine.nodes() {
                node
            } else {
                self.w.machine.cpu_node(origin)
            };
            self.first_touch(pid, node);
        }
        self.w.procs[pid].state = PState::Running;
        self.signals_update(pid);
        let p = &mut self.w.procs[pid];
        p.run_start_ns = now;
        if p.slice_left_ns == 0 {
            p.slice_left_ns = self.slice_ns;
        }
        let refill = std::mem::take(&mut p.refill_pending_ns);
        p.refill_ns += refill;
        let c = &mut self.w.cpus[cpu];
        c.stall_until = c.stall_until.max(now) + refill;
        self.schedule_milestone(cpu);
    }

    /// Enqueues a new or woken process on `cpu`, counting a placement or wake-up migration
    /// when it lands away from its parent's CPU (new) or the CPU it slept on (woken).
    fn place(&mut self, pid: Pid, cpu: CpuId) {
        self.arrive_on(pid, cpu, false);
        self.enqueue(pid, cpu);
    }

    /// Counts what `pid` coming to `cpu` is: for a process that never ran, its creation there
    /// (its origin under `memory=parent`, a placement away from its parent's CPU); else a
    /// migration away from the CPU it was on, of kind `pull` when a CPU took it from a shared
    /// queue (`shared`), else `placement` (given a processor again after `holds`) or `wakeup`.
    fn arrive_on(&mut self, pid: Pid, cpu: CpuId, shared: bool) {
        if self.w.procs[pid].first_run_ns.is_none() {
            let spawn = self.w.workload.processes[pid].spawn_cpu as usize;
            if self.w.config.assumptions.memory == Memory::Parent {
                // Created on its parent's CPU: its memory and origin are there (`memory=parent`).
                self.w.procs[pid].origin_cpu = Some(spawn);
            }
            if cpu != spawn {
                // Placement is where the process first runs, so it pays no cache refill.
                let level = self.level_of(spawn, cpu);
                self.w.procs[pid].count_migration(MigrationKind::Placement, level);
                if self.w.config.record_trace {
                    let kind = MigrationKind::Placement.name();
                    self.trace_events
                        .migrations
                        .push((self.w.now, pid, spawn, cpu, kind.into()));
                }
            }
        } else {
            let prev = self.w.procs[pid].cpu;
            // A process a policy took off its processor (`holds`) is given one again: a
            // processor allocation, counted as a placement (with the refill of a migration).
            let kind = if shared {
                MigrationKind::Pull
            } else if std::mem::take(&mut self.w.procs[pid].preempted) {
                MigrationKind::Placement
            } else {
                MigrationKind::Wakeup
            };
            if cpu != prev {
                self.record_migration(pid, prev, cpu, kind);
            }
        }
    }

    /// Puts runnable `pid`, on no CPU's runqueue, in shared queue `queue` at `key` (after the
    /// processes of equal keys already there).
    fn queue_shared(&mut self, pid: Pid, queue: usize, key: u64) {
        let seq = self.shared_seq;
        self.shared_seq += 1;
        self.w.shared[queue].insert((key, seq, pid));
        self.w.shared_of[pid] = Some((queue, key, seq));
        self.w.procs[pid].state = PState::Runnable;
        self.signals_update(pid);
    }

    /// Asks the policy which shared queues `cpu` (its runqueue empty) takes from, and puts on
    /// its runqueue the first process, in key order, of the first of them that has one it may
    /// run; true if it found one.
    fn take_shared(&mut self, policy: &mut dyn Policy, cpu: CpuId) -> bool {
        debug_assert!(self.w.cpus[cpu].queue.is_empty());
        let mut order = std::mem::take(&mut self.shared_order);
        order.clear();
        policy.dispatch(&View::new(&self.w), cpu, &mut order);
        let mut found = None;
        for &q in &order {
            let Some(queue) = self.w.shared.get(q) else {
                self.stats.rejected += 1;
                continue;
            };
            if let Some(&entry) = queue.iter().find(|e| self.w.may_run(e.2, cpu)) {
                found = Some((q, entry));
                break;
            }
        }
        self.shared_order = order;
        let Some((q, entry)) = found else {
            return false;
        };
        let pid = entry.2;
        self.w.shared[q].remove(&entry);
        self.w.shared_of[pid] = None;
        self.arrive_on(pid, cpu, true);
        self.enqueue(pid, cpu);
        true
    }

    /// Sets the slice `pid` gets when it next runs, if the policy's enqueue gave one.
    #[inline]
    fn set_slice(&mut self, pid: Pid, slice_ns: Option<u64>) {
        if let Some(ns) = slice_ns.filter(|&ns| ns > 0) {
            self.w.procs[pid].slice_left_ns = ns;
        }
    }

    /// Reads the policy's `enqueue` answer for `pid`, setting the slice it gives:
    /// `Some((queue, key, kick))` for a shared queue that exists, `None` for the CPU's own
    /// runqueue (a shared queue out of range is refused, counted, and the runqueue used).
    fn shared_answer(&mut self, pid: Pid, answer: Enqueue) -> Option<(usize, u64, Option<CpuId>)> {
        match answer {
            Enqueue::Shared {
                queue,
                key,
                slice_ns,
                kick,
            } if queue < self.w.shared.len() => {
                self.set_slice(pid, slice_ns);
                Some((queue, key, kick))
            }
            Enqueue::Shared { slice_ns, .. } => {
                self.stats.rejected += 1;
                self.set_slice(pid, slice_ns);
                None
            }
            Enqueue::Local { slice_ns } => {
                self.set_slice(pid, slice_ns);
                None
            }
        }
    }

    fn level_of(&self, from: CpuId, to: CpuId) -> usize {
        let d = self
            .w
            .machine
            .distance(self.w.machine.cpu_node(from), self.w.machine.cpu_node(to));
        self.mals
            .binary_search(&d)
            .expect("a distance of the table")
    }

    fn record_migration(&mut self, pid: Pid, from: CpuId, to: CpuId, kind: MigrationKind) {
        if self.w.config.record_trace {
            self.trace_events
                .migrations
                .push((self.w.now, pid, from, to, kind.name().into()));
        }
        let level = self.level_of(from, to);
        let refill = if level == 0 {
            self.w.config.refill_in_node_ns
        } else {
            let d = self
                .w
                .machine
                .distance(self.w.machine.cpu_node(from), self.w.machine.cpu_node(to));
            self.w.config.refill_per_distance_ns * u64::from(d)
        };
        let cross = self.w.machine.speed(from) != self.w.machine.speed(to);
        let p = &mut self.w.procs[pid];
        p.count_migration(kind, level);
        p.refill_pending_ns += refill;
        p.class_migrations += u32::from(cross);
    }

    /// Takes `pid` off `from`: as its running process (`running`: preempted, as by a migration
    /// thread; `from` then picks its next one) or out of its queue.
    #[inline(always)]
    fn detach(&mut self, pid: Pid, from: CpuId, running: bool) {
        if running {
            self.take_current(from);
            self.vacated.push(from);
        } else {
            self.touch_load(from);
            let q = &mut self.w.cpus[from].queue;
            let at = q.iter().position(|&p| p == pid).expect("queued there");
            q.remove(at);
            self.rq_changed(from);
        }
        self.leave_node(pid, from);
    }

    /// Moves `pid`, running (preempted, as by a migration thread) or queued on `from`, to the
    /// tail of `to`'s queue, counting a migration of `kind`.
    #[inline(always)]
    fn move_task(&mut self, pid: Pid, from: CpuId, to: CpuId, running: bool, kind: MigrationKind) {
        self.detach(pid, from, running);
        self.enqueue(pid, to);
        self.record_migration(pid, from, to, kind);
    }

    /// The CPU a lazy move of `pid` to `node` enqueues it on: the node's CPU with the fewest
    /// runnable tasks that `pid` may run on, the lowest on ties (an idle one if there is one,
    /// as scx_rusty's enqueue kicks an idle CPU of the new domain); `None` if it may run on
    /// none of them.
    fn lazy_target(&self, pid: Pid, node: usize) -> Option<CpuId> {
        self.w
            .machine
            .node_cpus(node)
            .iter()
            .copied()
            .filter(|&c| self.w.may_run(pid, c))
            .min_by_key(|&c| (self.w.cpus[c].nr_running(), c))
    }

    /// Cancels `pid`'s pending lazy move, if any.
    #[inline]
    fn cancel_lazy(&mut self, pid: Pid) {
        if !self.lazy.is_empty() {
            self.lazy.remove(&pid);
        }
    }

    /// The node of `pid`'s pending lazy move, if any.
    #[inline]
    fn lazy_node(&self, pid: Pid) -> Option<usize> {
        if self.lazy.is_empty() {
            None
        } else {
            self.lazy.get(&pid).copied()
        }
    }

    /// Takes `pid`'s pending lazy move, if any, as the CPU it is to be enqueued on (dropped,
    /// counted as refused, if its affinity has since excluded the whole node).
    fn take_lazy(&mut self, pid: Pid) -> Option<CpuId> {
        let node = self.lazy.remove(&pid)?;
        let cpu = self.lazy_target(pid, node);
        if cpu.is_none() {
            self.stats.rejected += 1;
        }
        cpu
    }

    /// `cpumask_any_and_distribute(mask)`: the first CPU of `mask` after the one it last
    /// answered, wrapping round (so its first answer skips CPU 0, as the kernel's does).
    fn distribute(&mut self, pid: Pid) -> CpuId {
        let n = self.w.cpus.len();
        let prev = self.distribute_prev;
        let next = (1..=n)
            .map(|k| (prev + k) % n)
            .find(|&c| self.w.may_run(pid, c))
            .expect("an affinity allows some CPU");
        self.distribute_prev = next;
        next
    }

    /// `pid`'s allowed CPUs are now `list` (`None`: every CPU): the set the view reads.
    fn set_allowed(&mut self, pid: Pid, list: Option<&crate::workload::CpuList>) {
        let n = self.w.cpus.len();
        self.w.allowed[pid] = list
            .filter(|l| l.0.len() < n)
            .map(|l| crate::cpuset::CpuSet::from_ids(n, l.0.iter().map(|&c| c as usize)));
    }

    /// Takes `pid`, running or queued, off its CPU and holds it until a `places` gives it a
    /// processor again (counted then as a placement); false if it is neither.
    fn hold(&mut self, pid: Pid) -> bool {
        let Some(p) = self.w.procs.get(pid) else {
            return false;
        };
        let from = p.cpu;
        let running = matches!(p.state, PState::Running) && self.w.cpus[from].current == Some(pid);
        let queued = matches!(p.state, PState::Runnable) && self.w.cpus[from].queue.contains(&pid);
        if !running && !queued {
            return false;
        }
        self.detach(pid, from, running);
        let p = &mut self.w.procs[pid];
        p.state = PState::Held;
        p.preempted = true;
        self.w.held.insert(pid);
        self.signals_update(pid);
        true
    }

    /// Checks and applies a policy's attempt made on `cpu`; returns the CPUs that received
    /// processes (one entry per process moved).
    fn apply(
        &mut self,
        cpu: Option<CpuId>,
        level: usize,
        slot: usize,
        attempt: &Attempt,
    ) -> Vec<CpuId> {
        self.apply_for(cpu, cpu, level, slot, attempt)
    }

    /// [`State::apply`] of an attempt made for `cpu` (counted and traced as its) by `payer`,
    /// whose CPU does the work and stalls for it: another CPU balancing on its behalf.
    fn apply_for(
        &mut self,
        cpu: Option<CpuId>,
        payer: Option<CpuId>,
        level: usize,
        slot: usize,
        attempt: &Attempt,
    ) -> Vec<CpuId> {
        let mut touched = Vec::new();
        if let Some(c) = cpu {
            self.count_idle_attempt(c, slot);
        }
        for &pid in &attempt.holds {
            if !self.hold(pid) {
                self.stats.rejected += 1;
            }
        }
        for &(pid, to) in &attempt.places {
            if to >= self.w.cpus.len() || !self.w.may_run(pid, to) || !self.w.held.remove(&pid) {
                self.stats.rejected += 1;
                continue;
            }
            self.cancel_lazy(pid);
            self.place(pid, to);
            touched.push(to);
        }
        for mv in &attempt.moves {
            let valid =
                mv.from < self.w.cpus.len() && mv.to < self.w.cpus.len() && mv.from != mv.to;
            let queued = valid
                && self
                    .w
                    .procs
                    .get(mv.pid)
                    .is_some_and(|p| p.state == PState::Runnable && p.cpu == mv.from)
                && self.w.cpus[mv.from].queue.contains(&mv.pid);
            // The running process may move too (preempted, as by a migration thread).
            let running = valid && self.w.cpus[mv.from].current == Some(mv.pid);
            // Never to a CPU the process may not run on (its affinity).
            if (!queued && !running) || !self.w.may_run(mv.pid, mv.to) {
                self.stats.rejected += 1;
                continue;
            }
            self.cancel_lazy(mv.pid);
            self.move_task(mv.pid, mv.from, mv.to, running, mv.kind);
            touched.push(mv.to);
        }
        for lazy in &attempt.lazy_moves {
            let valid = lazy.node < self.w.machine.nodes()
                && self
                    .w
                    .procs
                    .get(lazy.pid)
                    .is_some_and(|p| p.state != PState::Done)
                && self.lazy_target(lazy.pid, lazy.node).is_some();
            if !valid {
                self.stats.rejected += 1;
                continue;
            }
            self.lazy.insert(lazy.pid, lazy.node);
        }
        let moved = touched.len();
        if !attempt.pages.is_empty() {
            // Account the past at the old speeds before the pages move.
            for c in 0..self.w.cpus.len() {
                self.advance(c);
            }
        }
        for pm in &attempt.pages {
            self.w.groups[pm.tgid]
                .memory
                .migrate(pm.from_node, pm.to_node, pm.share);
        }
        self.charge(cpu, payer, level, slot, &attempt.costs(), moved);
        if !attempt.pages.is_empty() {
            // Page moves change the speed of every running thread of the moved groups.
            for c in 0..self.w.cpus.len() {
                if self.w.cpus[c].current.is_some() {
                    self.schedule_milestone(c);
                }
            }
        }
        touched
    }

    /// Counts an attempt on `cpu` made while it had nothing to run: newly idle (slot 1), or
    /// periodic (slot 0) on an idle CPU.
    #[inline]
    fn count_idle_attempt(&mut self, cpu: CpuId, slot: usize) {
        if slot == 1 || (slot == 0 && self.w.cpus[cpu].current.is_none()) {
            self.stats.idle_attempts[cpu] += 1;
        }
    }

    /// Charges an attempt's costs and the `moved` migrations it made (balancing CPU time and cache refills) to `payer`
    /// (none: a machine-wide callback), and counts it for `cpu`, its kind (`slot`) and level
    /// (`payer` is `cpu` unless another CPU balanced on `cpu`'s behalf). Inlined: it runs once
    /// per attempt, most of them an idle CPU's quiet ones, whose constant slot and `moved` then
    /// fold away (docs/PERFORMANCE.md, "How the engine is made fast").
    #[inline(always)]
    fn charge(
        &mut self,
        cpu: Option<CpuId>,
        payer: Option<CpuId>,
        level: usize,
        slot: usize,
        c: &Costs,
        moved: usize,
    ) {
        let cost = self.w.config.balancing_ns(
            c.rqs_examined + c.locks,
            c.tasks_examined,
            c.evaluations,
            moved as u64,
        ) + c.work_ns;
        self.stats.cost_ns += cost;
        self.stats.evaluations += u64::from(c.evaluations);
        let inv = &mut self.stats.invocations[slot];
        if inv.len() <= level {
            inv.resize(level + 1, 0);
            self.stats.moved[slot].resize(level + 1, 0);
        }
        inv[level] += 1;
        self.stats.moved[slot][level] += moved as u64;
        if self.w.config.record_trace {
            // A periodic balancing another CPU did on `cpu`'s behalf (a kicked CPU's) is
            // "kicked", so a trace tells it from `cpu`'s own.
            let kind = if slot == 0 && payer != cpu {
                "kicked"
            } else {
                ["periodic", "newidle", "active", "other"][slot]
            };
            let at = cpu.unwrap_or(MACHINE_WIDE);
            self.trace_events
                .balances
                .push((self.w.now, at, level, kind.into(), moved));
        }
        if let Some(cpu) = payer {
            self.w.cpus[cpu].balance_ns += cost;
            if self.w.config.assumptions.slice == SliceCharge::Work {
                if let Some(pid) = self.w.cpus[cpu].current {
                    // The stall is wall time of the running slice: give it back (`slice=work`).
                    self.advance(cpu);
                    self.w.procs[pid].slice_left_ns += cost;
                }
            }
            self.stall(cpu, cost);
        }
    }
}

impl<'a> State<'a> {
    fn new(
        machine: &'a Machine,
        domains: &'a Domains,
        workload: &'a Workload,
        config: &'a EngineConfig,
    ) -> Self {
        let n = workload.processes.len();
        let mals = machine.mals();
        let mut groups = vec![GroupState::default(); n];
        for p in &workload.processes {
            let g = &mut groups[p.tgid as usize];
            g.threads += 1;
        }
        for (i, app) in workload.apps.iter().enumerate() {
            let g = &mut groups[app.tgid as usize];
            g.memory = GroupMemory::sized(g.threads, app.footprint_mb, app.shared);
            g.app = Some(i);
            g.sync = SyncPoints::new(app.points);
            g.shared_points = app.shared_points;
        }
        let shared_points = workload
            .apps
            .iter()
            .filter(|a| a.shared_points)
            .map(|a| a.points)
            .max()
            .unwrap_or(0);
        let total = config.assumptions.exec == Exec::Total;
        let procs = workload
            .processes
            .iter()
            .map(|p| {
                let rng = Pcg64::seed_from_u64(p.seed);
                let (remaining, final_wait_ns) =
                    if total && p.kind == Kind::Io && groups[p.tgid as usize].app.is_none() {
                        total_time(p, &rng)
                    } else {
                        (p.demand_ns as f64, 0)
                    };
                (p, rng, remaining, final_wait_ns)
            })
            .map(|(p, rng, remaining, final_wait_ns)| ProcState {
                state: PState::Pending,
                cpu: p.spawn_cpu as usize,
                origin_cpu: None,
                remaining,
                burst_left: 0.0,
                rng,
                final_wait_ns,
                slice_left_ns: config.timeslice_ns,
                last_ran_ns: None,
                refill_pending_ns: 0,
                first_run_ns: None,
                completion_ns: None,
                run_ns_by_node: smallvec::SmallVec::new(),
                run_ns_fast: 0,
                run_ns_slow: 0,
                refill_ns: 0,
                migrations_by_kind: [0; MigrationKind::ALL.len()],
                migrations_by_level: smallvec::smallvec![0; mals.len()],
                class_migrations: 0,
                remote_weighted_ns: 0.0,
                remote_share_ns: 0.0,
                mem_time_ns: 0.0,
                io_wait_ns: 0,
                sync_wait_ns: 0,
                segment: 0,
                live_node: None,
                preempted: false,
                segment_start_ns: 0,
                blocked_since: 0,
                work_done: 0.0,
                run_start_ns: 0,
                pelt: crate::load::Pelt::default(),
                pelt_ind: (0.0, 0.0),
                pelt_cpu: None,
                pelt_started: false,
            })
            .collect();
        State {
            w: World {
                now: 0,
                tick: 0,
                machine,
                domains,
                config,
                workload,
                cpus: vec![CpuState::default(); machine.cpus()],
                procs,
                groups,
                shared_sync: SyncPoints::new(shared_points),
                held: std::collections::BTreeSet::new(),
                overloaded: crate::cpuset::CpuSet::empty(machine.cpus()),
                overloaded_count: 0,
                overload_events: 0,
                run_seed: workload_digest(workload),
                group_loads: crate::load::GroupLoads::new(
                    domains.group_spans.iter().map(|s| s.len()).collect(),
                    machine.cpus(),
                    &domains.rings,
                ),
                allowed: Vec::new(),
                pelt: false,
                duty_half_life: None,
                duty: Vec::new(),
                shared: Vec::new(),
                shared_of: Vec::new(),
            },
            seq: 0,
            events: QuaternaryHeap::new(),
            wheel: wheel::Wheel::new(config.tick_ns),
            mals,
            done: 0,
            stats: BalanceStats {
                idle_attempts: vec![0; machine.cpus()],
                ..BalanceStats::default()
            },
            trace: Vec::new(),
            trace_events: TraceEvents::default(),
            events_processed: 0,
            vacated: Vec::new(),
            kicked: vec![false; machine.cpus()],
            arrivals: Vec::new(),
            app_bins: vec![Vec::new(); workload.apps.len()],
            slice_ns: config.timeslice_ns,
            slice_tick_ns: 0,
            active_latency_ns: None,
            pelt: false,
            timer_follows_running: false,
            timer_at: vec![None; machine.cpus()],
            quiet: Quiet::default(),
            tick_span: (0, config.tick_ns),
            affine: false,
            distribute_prev: 0,
            lazy: std::collections::BTreeMap::new(),
            shared_seq: 0,
            shared_order: Vec::new(),
            stalled_since: None,
            stalled: None,
            progress: 0,
            progress_seen: (0, None),
        }
    }
}

/// A digest of `workload` (`World::run_seed`): splitmix64 steps over each process's seed,
/// arrival, demand, kind and parent CPU, in pid order.
fn workload_digest(workload: &Workload) -> u64 {
    let mix = |h: u64, x: u64| {
        let mut z = (h ^ x).wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    workload.processes.iter().fold(0, |h, p| {
        let kind = match p.kind {
            Kind::Cpu => 0,
            Kind::Io => 1,
        };
        [
            p.seed,
            p.arrival_ns,
            p.demand_ns,
            kind,
            u64::from(p.spawn_cpu),
        ]
        .into_iter()
        .fold(h, mix)
    })
}

/// Runs `workload` on `machine` with `policy` over `domains`.
pub fn run(
    machine: &Machine,
    domains: &Domains,
    workload: &Workload,
    policy: &mut dyn Policy,
    config: &EngineConfig,
) -> Result<RunResult> {
    let outcome = start(machine, domains, workload, policy, config, None)?;
    Ok(outcome.finished().expect("no watch stops the run"))
}

/// Runs `workload` like [`run`], asking `watch` every [`WATCH_EVERY_EVENTS`] events whether to
/// go on (the `watch` module): [`Outcome::Stopped`] if it said stop.
pub fn run_watched(
    machine: &Machine,
    domains: &Domains,
    workload: &Workload,
    policy: &mut dyn Policy,
    config: &EngineConfig,
    watch: &mut dyn Watch,
) -> Result<Outcome> {
    start(machine, domains, workload, policy, config, Some(watch))
}

fn start(
    machine: &Machine,
    domains: &Domains,
    workload: &Workload,
    policy: &mut dyn Policy,
    config: &EngineConfig,
    watch: Option<&mut dyn Watch>,
) -> Result<Outcome> {
    workload.validate("workload", machine.cpus())?;
    if config.tick_ns == 0 || config.timeslice_ns == 0 {
        return Err(InputError::new(
            "engine config",
            "tick and timeslice must be positive",
        ));
    }
    drive(prepare(machine, domains, workload, config), policy, watch)
}

/// The state a run starts from.
fn prepare<'a>(
    machine: &'a Machine,
    domains: &'a Domains,
    workload: &'a Workload,
    config: &'a EngineConfig,
) -> State<'a> {
    let mut s = State::new(machine, domains, workload, config);
    // Arrivals are read in order from here rather than pushed: the heap holds only what is
    // scheduled, not a million future arrivals. They go first among events at the same
    // instant, in pid order, as they would with the lowest insertion sequences.
    s.arrivals = (0..workload.processes.len()).collect();
    s.arrivals
        .sort_unstable_by_key(|&pid| (workload.processes[pid].arrival_ns, pid)); // pid order on ties
    s.affine = workload.processes.iter().any(|p| !p.affinity.is_empty());
    if s.affine {
        s.w.allowed = vec![None; workload.processes.len()];
        // Changes after a process's creation are events at their time, scheduled now in pid
        // then time order (first among events at one instant, after arrivals); the ones at
        // or before it set the CPUs it is created with (`arrive`).
        for (pid, p) in workload.processes.iter().enumerate() {
            for (k, c) in p.affinity.iter().enumerate() {
                if c.at_ns > p.arrival_ns {
                    s.push(c.at_ns, Event::Affinity(pid, k as u32));
                }
            }
        }
    }
    s
}

/// Runs the event loop from `s` until every process has completed, or `watch` stops it.
fn drive(
    mut s: State<'_>,
    policy: &mut dyn Policy,
    mut watch: Option<&mut dyn Watch>,
) -> Result<Outcome> {
    let n = s.w.workload.processes.len();
    let last_arrival_ns = s
        .arrivals
        .last()
        .map_or(0, |&pid| s.w.workload.processes[pid].arrival_ns);
    if let Some(slice) = policy.timeslice_ns().filter(|&t| t > 0) {
        s.slice_ns = slice;
        for p in &mut s.w.procs {
            p.slice_left_ns = p.slice_left_ns.min(slice);
        }
    }
    s.slice_tick_ns = policy.slice_tick_ns().unwrap_or(0);
    s.active_latency_ns = policy.active_balance_latency_ns();
    s.pelt = policy.tracks_pelt();
    s.w.pelt = s.pelt;
    s.w.duty_half_life = policy.duty_cycle_half_life_ns().filter(|&h| h > 0);
    if s.w.duty_half_life.is_some() {
        s.w.duty = vec![crate::load::Ravg::default(); s.w.procs.len()];
    }
    s.timer_follows_running = policy.timer_follows_running();
    let queues = policy.shared_queues();
    if queues > 0 {
        s.w.shared = vec![std::collections::BTreeSet::new(); queues];
        s.w.shared_of = vec![None; s.w.procs.len()];
    }
    for cpu in 0..s.w.machine.cpus() {
        refresh_balance_timer(&mut s, policy, cpu);
    }
    policy.start(&s.view());
    let global_period = policy.global_period_ns().filter(|&p| p > 0);
    if let Some(period) = global_period {
        s.push(s.w.now + period, Event::Global);
    }
    let mut next_arrival = 0;
    while s.done < n {
        // The earliest scheduled event: the heap's or the wheel's, by key (u128::MAX: none;
        // keys are unique, and no event is scheduled at u64::MAX ns).
        let heap = s.events.peek().map_or(u128::MAX, Scheduled::key);
        let from_wheel = s.wheel.head_key() < heap;
        let earliest = heap.min(s.wheel.head_key());
        // The next arrival goes first unless a scheduled event is strictly earlier.
        let arrival = s
            .arrivals
            .get(next_arrival)
            .map(|&pid| (s.w.workload.processes[pid].arrival_ns, pid))
            .filter(|&(t, _)| u128::from(t) <= earliest >> 64);
        let next = match arrival {
            Some((t, pid)) => {
                next_arrival += 1;
                Some((t, Event::Arrive(pid)))
            }
            None if from_wheel => {
                let (t, cpu, gen) = s.wheel.pop();
                Some((t, Event::Balance(cpu, gen)))
            }
            None => s.events.pop().map(|e| (e.t, e.ev)),
        };
        let Some((t, ev)) = next else {
            return Err(InputError::new(
                "engine",
                format!(
                    "the simulation stopped with {} of {n} processes unfinished",
                    n - s.done
                ),
            ));
        };
        debug_assert!(t >= s.w.now, "time never goes backwards");
        s.set_now(t);
        s.events_processed += 1;
        if s.events_processed & (WATCH_EVERY_EVENTS - 1) == 0 {
            if let Some(e) = policy.failure() {
                return Err(e);
            }
            if s.progress != s.progress_seen.0 {
                s.progress_seen = (s.progress, None);
            } else if s.w.cpus.iter().all(|c| c.current.is_none()) {
                s.progress_seen.1 = None; // nothing running: waiting, not a livelock
            } else if s.w.now - *s.progress_seen.1.get_or_insert(s.w.now) > NO_PROGRESS_NS {
                return Err(InputError::new(
                    format!("policy {}", policy.name()),
                    format!(
                        "no process made progress for {} s of simulated time at {:.0} ms, with \
                         {} of {n} processes unfinished: the CPUs spent it stalled (cache \
                         refills after migrations, or balancing work, that outlast the slices; \
                         docs/engine.md, \"Stalls\")",
                        NO_PROGRESS_NS / 1_000_000_000,
                        s.w.now as f64 / 1e6,
                        n - s.done
                    ),
                ));
            }
            if let Some(w) = watch.as_deref_mut() {
                let progress = Progress {
                    now_ns: s.w.now,
                    events: s.events_processed,
                    done: s.done,
                    processes: n,
                    last_arrival_ns,
                };
                if w.check(&progress) == ControlFlow::Break(()) {
                    return Ok(Outcome::Stopped(progress));
                }
            }
        }
        match ev {
            Event::Arrive(pid) => arrive(&mut s, policy, pid),
            Event::Milestone(cpu, gen) => {
                if gen == s.w.cpus[cpu].milestone_gen {
                    milestone(&mut s, policy, cpu);
                }
            }
            Event::IoDone(pid) => io_done(&mut s, policy, pid),
            Event::SyncDone(pid) => sync_done(&mut s, policy, pid),
            Event::Balance(cpu, gen) => {
                if gen == s.w.cpus[cpu].balance_gen {
                    periodic(&mut s, policy, cpu);
                }
            }
            Event::Global => {
                global(
                    &mut s,
                    policy,
                    global_period.expect("scheduled with a period"),
                );
                if let Some(e) = s.stalled.take() {
                    return Err(e);
                }
            }
            Event::Affinity(pid, k) => affinity_change(&mut s, policy, pid, k as usize),
            Event::Active {
                busiest,
                target,
                level,
            } => active_balance(&mut s, policy, busiest, target, level),
            Event::Kick(cpu) => kick(&mut s, policy, cpu),
            Event::KickNext(cpu) => kick_step(&mut s, policy, cpu),
        }
    }
    if let Some(e) = policy.failure() {
        return Err(e);
    }
    let mut result = metrics::collect(s);
    result.summary.policy_metrics = policy.extra_metrics();
    if let Some(e) = policy.failure() {
        return Err(e);
    }
    Ok(Outcome::Finished(Box::new(result)))
}

/// The sync points group `tgid`'s application waits at and signals: its own, or the
/// workload's shared ones.
fn sync_of<'s>(w: &'s mut World<'_>, tgid: usize) -> &'s mut SyncPoints {
    if w.groups[tgid].shared_points {
        &mut w.shared_sync
    } else {
        &mut w.groups[tgid].sync
    }
}

/// The segment plan of `pid` if it is a thread of a structured application.
fn plan_of<'w>(s: &State<'w>, pid: Pid) -> Option<&'w [crate::apps::Segment]> {
    let tgid = s.w.workload.processes[pid].tgid as usize;
    let app = s.w.groups[tgid].app?;
    Some(&s.w.workload.apps[app].plans[pid - tgid])
}

fn next_burst(s: &mut State<'_>, pid: Pid) {
    if let Some(plan) = plan_of(s, pid) {
        let p = &mut s.w.procs[pid];
        p.burst_left = plan[p.segment as usize].work_ns as f64;
        p.segment_start_ns = s.w.now;
        return;
    }
    let w = &s.w.workload.processes[pid];
    let p = &mut s.w.procs[pid];
    p.burst_left = match w.kind {
        Kind::Cpu => p.remaining,
        Kind::Io => {
            let draw = Exp::new(1.0 / w.burst_mean_ns as f64)
                .expect("positive mean")
                .sample(&mut p.rng);
            draw.max(1.0).min(p.remaining)
        }
    };
}

/// The exit burst of an IO-bound process whose time alone ends in an IO wait (`exec = total`):
/// a process exits on a CPU.
const EXIT_BURST_NS: f64 = 1.0;

/// `exec = total` for IO-bound process `w`: its CPU demand and the length of its cut last wait
/// (0 if none), such that alone — speed 1, local memory, never waiting for a CPU — it finishes
/// `demand_ns` after it arrives. The bursts and waits are the ones the engine will draw from
/// the process's own generator (`rng`, cloned: the same draws in the same order as
/// [`next_burst`] and the IO wait of a stopped burst):
///
/// 1. t = 0; draw a burst as [`next_burst`] does, cut at the time left (demand − t); t += it.
/// 2. Nothing left: the demand is the bursts so far.
/// 3. Else draw the wait (whole ns, ≥ 1). If it and a 1 ns exit burst fit in the time left,
///    t += it and go to 1; else the wait is cut to the time left minus the exit burst (≥ 1 ns),
///    and the demand is the bursts so far plus the exit burst.
pub(crate) fn total_time(w: &crate::workload::Process, rng: &Pcg64) -> (f64, u64) {
    let mut rng = rng.clone();
    let end = w.demand_ns as f64;
    let burst = Exp::new(1.0 / w.burst_mean_ns as f64).expect("positive mean");
    let wait = Exp::new(1.0 / w.wait_mean_ns as f64).expect("positive mean");
    let (mut t, mut cpu) = (0.0_f64, 0.0_f64);
    loop {
        let b = burst.sample(&mut rng).max(1.0).min(end - t);
        t += b;
        cpu += b;
        let left = end - t;
        if left <= WORK_EPS {
            return (cpu, 0);
        }
        let x = (wait.sample(&mut rng).round() as u64).max(1) as f64;
        if x + EXIT_BURST_NS <= left {
            t += x;
        } else {
            let cut = (left - EXIT_BURST_NS).round().max(1.0) as u64;
            return (cpu + EXIT_BURST_NS, cut);
        }
    }
}

fn arrive(s: &mut State<'_>, policy: &mut dyn Policy, pid: Pid) {
    let spawn = s.w.workload.processes[pid].spawn_cpu as usize;
    if s.affine {
        let w = &s.w.workload.processes[pid];
        let list = crate::workload::allowed_at(&w.affinity, w.arrival_ns);
        s.set_allowed(pid, list);
    }
    if let Some(wait) = plan_of(s, pid).and_then(|plan| plan[0].wait) {
        let tgid = s.w.workload.processes[pid].tgid as usize;
        if !sync_of(&mut s.w, tgid).reached(wait.point, wait.count) {
            // A pipeline stage's thread with nothing to take yet: created, it blocks on its
            // queue at once (placed when released, as a new thread).
            let p = &mut s.w.procs[pid];
            p.state = PState::Blocked;
            p.blocked_since = s.w.now;
            sync_of(&mut s.w, tgid).wait(pid, wait.point, wait.count);
            return;
        }
    }
    next_burst(s, pid);
    let cpu = policy.place_new(&s.view(), pid, spawn);
    admit(s, policy, pid, cpu);
}

/// Puts a new or woken process on the CPU the policy chose, or holds it. A CPU that does not
/// exist or that the process may not run on is refused (counted), and the process goes where
/// the kernel's `select_task_rq` sends it then: `select_fallback_rq` from the CPU it is on
/// (its parent's, or the one it slept on).
fn admit(s: &mut State<'_>, policy: &mut dyn Policy, pid: Pid, cpu: Option<CpuId>) {
    match cpu {
        Some(cpu) if cpu < s.w.cpus.len() && s.w.may_run(pid, cpu) => {
            settle(s, policy, pid, cpu);
        }
        Some(_) => {
            s.stats.rejected += 1;
            let cpu = s.w.fallback_cpu(pid, s.w.procs[pid].cpu);
            settle(s, policy, pid, cpu);
        }
        None => {
            s.w.procs[pid].state = PState::Held;
            s.w.held.insert(pid);
            // Idle processors are offered the held work at once, lowest CPU first.
            for cpu in 0..s.w.cpus.len() {
                if s.w.held.is_empty() {
                    break;
                }
                if s.w.cpus[cpu].current.is_none() && s.w.cpus[cpu].queue.is_empty() {
                    if let Some(attempt) = policy.cpu_idle(&s.view(), cpu).as_ref() {
                        let received = s.apply(Some(cpu), 0, 3, attempt);
                        wake_receivers(s, policy, &received);
                    }
                }
            }
            if s.w.held.contains(&pid) {
                if let Some(attempt) = policy.process_held(&s.view(), pid).as_ref() {
                    let received = s.apply(None, 0, 3, attempt);
                    wake_receivers(s, policy, &received);
                }
            }
        }
    }
}

/// Enqueues a new or woken process placed on `cpu`: on its runqueue, or where the policy's
/// `enqueue` says when it has shared queues.
fn settle(s: &mut State<'_>, policy: &mut dyn Policy, pid: Pid, cpu: CpuId) {
    if !s.w.shared.is_empty() {
        let why = if s.w.procs[pid].first_run_ns.is_none() {
            EnqueueKind::New
        } else {
            EnqueueKind::Wakeup
        };
        let answer = policy.enqueue(&s.view(), pid, cpu, why);
        if let Some((queue, key, kick)) = s.shared_answer(pid, answer) {
            s.queue_shared(pid, queue, key);
            wake_idle(s, policy, Some(cpu));
            wake_idle(s, policy, kick);
            return;
        }
    }
    s.place(pid, cpu);
    become_busy(s, policy, cpu);
}

/// A process went to a shared queue: `cpu`, if it names one that is idle, dispatches
/// (`scx_bpf_kick_cpu`, or the wake-up of the CPU the process was enqueued on). A CPU out of
/// range is refused (counted).
fn wake_idle(s: &mut State<'_>, policy: &mut dyn Policy, cpu: Option<CpuId>) {
    match cpu {
        Some(c) if c >= s.w.cpus.len() => s.stats.rejected += 1,
        Some(c) if s.w.cpus[c].current.is_none() => become_busy(s, policy, c),
        _ => {}
    }
}

fn become_busy(s: &mut State<'_>, policy: &mut dyn Policy, cpu: CpuId) {
    let was_idle = s.w.cpus[cpu].current.is_none();
    s.dispatch(policy, cpu);
    if was_idle && s.w.cpus[cpu].current.is_some() {
        refresh_balance_timer(s, policy, cpu);
    }
}

fn io_done(s: &mut State<'_>, policy: &mut dyn Policy, pid: Pid) {
    let p = &mut s.w.procs[pid];
    p.io_wait_ns += s.w.now - p.blocked_since;
    wake(s, policy, pid);
}

/// A blocked process (IO done, or released from a sync point) starts its next burst where the
/// policy's wake-up placement says; one blocked since it was created (a pipeline thread with
/// nothing to take) is placed as a new thread, from its parent's CPU.
fn wake(s: &mut State<'_>, policy: &mut dyn Policy, pid: Pid) {
    let prev = s.w.procs[pid].cpu;
    let never_ran = s.w.procs[pid].first_run_ns.is_none();
    next_burst(s, pid);
    let mut cpu = if never_ran {
        policy.place_new(&s.view(), pid, prev)
    } else {
        policy.place_wakeup(&s.view(), pid, prev)
    };
    if let Some(node) = s.lazy_node(pid) {
        // A pending lazy move: the policy's CPU if it is on the node, else the node's idlest.
        match cpu {
            Some(c) if s.w.machine.cpu_node(c) == node && s.w.may_run(pid, c) => {
                s.cancel_lazy(pid);
            }
            Some(_) => cpu = s.take_lazy(pid).or(cpu),
            None => {} // held: the policy's `places` gives it a CPU, and cancels it
        }
    }
    if s.w.config.record_trace {
        s.trace_events.wakeups.push((s.w.now, pid));
    }
    admit(s, policy, pid, cpu);
}

/// Change `k` of `pid`'s affinity takes effect (the kernel's `__set_cpus_allowed_ptr`): the
/// same CPUs as before change nothing; else the view's set changes and the destination
/// `cpumask_any_and_distribute` is computed (the kernel computes it before deciding whether to
/// move). Only if its CPU is no longer allowed (`affine_move_task`) does a running process
/// (the stopper's `migration_cpu_stop`) or a queued one (`move_queued_task`) leave it: where
/// the policy's `affinity_cpu` says (the destination by default), as a migration of kind
/// `affinity`, or held. A blocked or held process does not move: its next placement is
/// checked against the new set. A completed one is left alone.
fn affinity_change(s: &mut State<'_>, policy: &mut dyn Policy, pid: Pid, k: usize) {
    if s.w.procs[pid].state == PState::Done {
        return;
    }
    let list = &s.w.workload.processes[pid].affinity[k].cpus;
    let before = s.w.allowed[pid].clone();
    s.set_allowed(pid, Some(list));
    if s.w.allowed[pid] == before {
        return; // cpumask_equal: nothing to do
    }
    let dest = s.distribute(pid);
    if let Some(Some((queue, key, seq))) = s.w.shared_of.get(pid).copied() {
        // In a shared queue: taken out and enqueued again (sched_setaffinity's dequeue, then
        // enqueue after ops.set_cpumask), on its CPU if it may still run there, else on the
        // destination. Only the answer's kick wakes a CPU: a CPU that cannot take it passes
        // over it, and one that could learns of it only if told.
        s.w.shared[queue].remove(&(key, seq, pid));
        s.w.shared_of[pid] = None;
        let prev = s.w.procs[pid].cpu;
        let cpu = if s.w.may_run(pid, prev) { prev } else { dest };
        let answer = policy.enqueue(&s.view(), pid, cpu, EnqueueKind::Affinity);
        if let Some((queue, key, kick)) = s.shared_answer(pid, answer) {
            s.queue_shared(pid, queue, key);
            wake_idle(s, policy, kick);
            return;
        }
        s.place(pid, cpu);
        become_busy(s, policy, cpu);
        return;
    }
    let p = &s.w.procs[pid];
    let from = p.cpu;
    if s.w.may_run(pid, from) {
        return;
    }
    let running = p.state == PState::Running && s.w.cpus[from].current == Some(pid);
    let queued = p.state == PState::Runnable;
    if !running && !queued {
        return;
    }
    let to = match policy.affinity_cpu(&s.view(), pid) {
        AffinityMove::Distribute => dest,
        AffinityMove::To(c) if c < s.w.cpus.len() && s.w.may_run(pid, c) => c,
        AffinityMove::To(_) => {
            s.stats.rejected += 1;
            dest
        }
        AffinityMove::Hold => {
            s.hold(pid);
            wake_receivers(s, policy, &[]);
            if s.w.held.contains(&pid) {
                if let Some(attempt) = policy.process_held(&s.view(), pid).as_ref() {
                    let received = s.apply(None, 0, 3, attempt);
                    wake_receivers(s, policy, &received);
                }
            }
            return;
        }
    };
    s.move_task(pid, from, to, running, MigrationKind::Affinity);
    wake_receivers(s, policy, &[to]);
}

/// What a structured thread does after a segment: go on, wait at a sync point, or end.
enum AfterSegment {
    Continue,
    Wait {
        point: u32,
        count: u32,
    },
    /// A timed block of this many ns before the next segment (`Segment::sleep_ns`).
    Sleep(u64),
    Done,
}

/// `pid` finished its current segment: signal its point (releasing the threads that waited for
/// it, at this instant), and find what comes next.
fn end_segment(s: &mut State<'_>, pid: Pid, plan: &[crate::apps::Segment]) -> AfterSegment {
    let tgid = s.w.workload.processes[pid].tgid as usize;
    let seg = s.w.procs[pid].segment as usize;
    if s.w.config.record_trace {
        let start = s.w.procs[pid].segment_start_ns;
        s.trace_events
            .segments
            .push((pid, seg as u32, start, s.w.now));
    }
    if let Some(point) = plan[seg].signal {
        for released in sync_of(&mut s.w, tgid).signal(point) {
            // The released thread's group (another one's, with shared points).
            let group = s.w.workload.processes[released].tgid as usize;
            s.w.groups[group].waking += 1;
            s.push(s.w.now, Event::SyncDone(released));
        }
    }
    let next = seg + 1;
    if next == plan.len() {
        return AfterSegment::Done;
    }
    s.w.procs[pid].segment = next as u32;
    if let Some(ns) = plan[next].sleep_ns {
        return AfterSegment::Sleep(ns);
    }
    match plan[next].wait {
        Some(w) if !sync_of(&mut s.w, tgid).reached(w.point, w.count) => AfterSegment::Wait {
            point: w.point,
            count: w.count,
        },
        _ => AfterSegment::Continue,
    }
}

/// A thread released from a sync point wakes as from IO.
fn sync_done(s: &mut State<'_>, policy: &mut dyn Policy, pid: Pid) {
    let tgid = s.w.workload.processes[pid].tgid as usize;
    s.w.groups[tgid].waking -= 1;
    let p = &mut s.w.procs[pid];
    p.sync_wait_ns += s.w.now - p.blocked_since;
    wake(s, policy, pid);
}

fn milestone(s: &mut State<'_>, policy: &mut dyn Policy, cpu: CpuId) {
    s.advance(cpu);
    let pid = s.w.cpus[cpu]
        .current
        .expect("a milestone has a running process");
    let (burst_left, slice_left) = (s.w.procs[pid].burst_left, s.w.procs[pid].slice_left_ns);
    if burst_left <= WORK_EPS {
        let after = plan_of(s, pid).map(|plan| end_segment(s, pid, plan));
        if let Some(AfterSegment::Continue) = after {
            // The next segment can start at once: the thread keeps its CPU and its slice.
            next_burst(s, pid);
            s.schedule_milestone(cpu);
            return;
        }
        let pid = s.take_current(cpu);
        s.leave_node(pid, cpu);
        if let Some(AfterSegment::Wait { point, count }) = after {
            // At a barrier or an empty queue: off the runqueue until released (SyncDone).
            let p = &mut s.w.procs[pid];
            p.state = PState::Blocked;
            p.blocked_since = s.w.now;
            let tgid = s.w.workload.processes[pid].tgid as usize;
            sync_of(&mut s.w, tgid).wait(pid, point, count);
            s.signals_update(pid);
            after_stop(s, policy, cpu);
            return;
        }
        if let Some(AfterSegment::Sleep(ns)) = after {
            // A timed block: off the runqueue, woken as from IO.
            let p = &mut s.w.procs[pid];
            p.state = PState::Blocked;
            p.blocked_since = s.w.now;
            s.push(s.w.now + ns, Event::IoDone(pid));
            s.signals_update(pid);
            after_stop(s, policy, cpu);
            return;
        }
        let p = &mut s.w.procs[pid];
        if matches!(after, Some(AfterSegment::Done)) || p.remaining <= WORK_EPS {
            if let Some(node) = p.live_node.take() {
                let tgid = s.w.workload.processes[pid].tgid as usize;
                s.w.groups[tgid].move_live(Some(node as usize), None);
            }
            let p = &mut s.w.procs[pid];
            p.state = PState::Done;
            p.completion_ns = Some(s.w.now);
            p.remaining = 0.0;
            s.done += 1;
            let tgid = s.w.workload.processes[pid].tgid as usize;
            s.w.groups[tgid].done += 1;
            s.cancel_lazy(pid);
        } else {
            p.state = PState::Blocked;
            p.blocked_since = s.w.now;
            let w = &s.w.workload.processes[pid];
            let wait = Exp::new(1.0 / w.wait_mean_ns as f64)
                .expect("positive mean")
                .sample(&mut p.rng);
            // Under exec = total, the wait before the 1 ns exit burst is cut to end its time
            // alone (only the exit burst is left then: every earlier wait leaves ≥ 2 ns).
            let wait_ns = if p.final_wait_ns > 0 && p.remaining < EXIT_BURST_NS + 0.5 {
                p.final_wait_ns
            } else {
                (wait.round() as u64).max(1)
            };
            let t = s.w.now + wait_ns;
            s.push(t, Event::IoDone(pid));
        }
        s.signals_update(pid);
        after_stop(s, policy, cpu);
    } else if slice_left == 0 {
        s.w.procs[pid].slice_left_ns = s.slice_ns;
        let shared = !s.w.shared.is_empty();
        if s.w.cpus[cpu].queue.is_empty() && !(shared && s.take_shared(policy, cpu)) {
            s.schedule_milestone(cpu);
        } else if shared && slice_end_shared(s, policy, cpu, pid) {
            // Gone to a shared queue; the CPU runs the one it took.
        } else {
            s.requeue_current(cpu);
            if s.lazy_node(pid).is_some() {
                // Enqueued again: a pending lazy move sends it to its node now.
                if let Some(to) = s.take_lazy(pid).filter(|&to| to != cpu) {
                    s.move_task(pid, cpu, to, false, MigrationKind::Push);
                    become_busy(s, policy, to);
                }
            }
            s.dispatch(policy, cpu);
            running_changed(s, policy, cpu);
        }
    } else {
        // Woken early (rate changed since scheduling): schedule again.
        s.schedule_milestone(cpu);
    }
}

/// The end of `pid`'s slice on `cpu`, which has another process queued, under a policy with
/// shared queues: its `enqueue` says where `pid` goes. A shared queue: `pid` leaves the CPU,
/// which runs the next one, and true; its own runqueue: false (the slice-end rotation then
/// requeues it at the tail, with the slice `enqueue` gave).
fn slice_end_shared(s: &mut State<'_>, policy: &mut dyn Policy, cpu: CpuId, pid: Pid) -> bool {
    let answer = policy.enqueue(&s.view(), pid, cpu, EnqueueKind::SliceEnd);
    // The slice is set before the process stops: its CPU's time was accounted up to now at
    // the milestone, so stopping it takes nothing more off the slice.
    let Some((queue, key, kick)) = s.shared_answer(pid, answer) else {
        return false;
    };
    let pid = s.take_current(cpu);
    s.leave_node(pid, cpu);
    s.queue_shared(pid, queue, key);
    s.run_next(policy, cpu);
    running_changed(s, policy, cpu);
    wake_idle(s, policy, kick);
    true
}

/// The CPU's process stopped: run the next one, or let the policy act on the idle CPU and
/// balance newly-idle, or go idle.
fn after_stop(s: &mut State<'_>, policy: &mut dyn Policy, cpu: CpuId) {
    s.dispatch(policy, cpu);
    if s.w.cpus[cpu].current.is_some() {
        running_changed(s, policy, cpu);
        return;
    }
    if let Some(attempt) = policy.cpu_idle(&s.view(), cpu).as_ref() {
        let received = s.apply(Some(cpu), 0, 3, attempt);
        wake_receivers(s, policy, &received);
    }
    newidle_balance(s, policy, cpu);
    s.run_next(policy, cpu);
    refresh_balance_timer(s, policy, cpu);
}

/// Newly-idle balancing of `cpu`, a CPU with nothing to run: the levels the policy balances,
/// lowest first, until one pulls work or the CPU has some.
fn newidle_balance(s: &mut State<'_>, policy: &mut dyn Policy, cpu: CpuId) {
    let levels = s.w.domains.cpus[cpu].len();
    for level in 0..levels {
        if s.w.cpus[cpu].current.is_some() {
            break;
        }
        let attempt = policy.balance(&s.view(), cpu, level, BalanceKind::NewIdle);
        let Some(attempt) = attempt.as_ref() else {
            continue;
        };
        let active = attempt.active_from;
        let received = s.apply(Some(cpu), level, 1, attempt);
        let moved = !received.is_empty();
        wake_receivers(s, policy, &received);
        if let Some(busiest) = active {
            ask_active_balance(s, policy, busiest, cpu, cpu, level);
        }
        if moved {
            break;
        }
    }
}

/// The machine-wide callback of user-space balancers; rescheduled while work remains. With
/// shared queues it also keeps the watchdog: processes left waiting in them while every CPU
/// is idle for [`SHARED_STALL_NS`] end the run with an error (without it a run whose policy
/// never takes them would call this forever).
fn global(s: &mut State<'_>, policy: &mut dyn Policy, period: u64) {
    if !s.w.shared.is_empty() {
        let waiting = s.w.shared.iter().map(|q| q.len()).sum::<usize>();
        let all_idle = s.w.cpus.iter().all(|c| c.current.is_none());
        if waiting > 0 && all_idle {
            let since = *s.stalled_since.get_or_insert(s.w.now);
            if s.w.now - since >= SHARED_STALL_NS {
                s.stalled = Some(InputError::new(
                    format!("policy {}", policy.name()),
                    format!(
                        "{waiting} processes waited in its shared queues for {} s with every \
                         CPU idle (its dispatch never took them; sched_ext's watchdog would \
                         stop such a scheduler)",
                        SHARED_STALL_NS / 1_000_000_000
                    ),
                ));
                return;
            }
        } else {
            s.stalled_since = None;
        }
    }
    if let Some(attempt) = policy.global_balance(&s.view()).as_ref() {
        // Charged to the CPU the policy names (its user-space thread's), if any.
        let payer = policy
            .global_charge_cpu(&s.view())
            .filter(|&c| c < s.w.cpus.len());
        let received = s.apply_for(None, payer, 0, 3, attempt);
        wake_receivers(s, policy, &received);
    }
    s.push(s.w.now + period, Event::Global);
}

fn periodic(s: &mut State<'_>, policy: &mut dyn Policy, cpu: CpuId) {
    // Most periodic balancing decides nothing: the policy may say so in one call.
    if s.w.cpus[cpu].current.is_none() && policy.quiet_periodic(&View::new(&s.w), cpu, &mut s.quiet)
    {
        for i in 0..s.quiet.attempts.len() {
            let (level, costs) = s.quiet.attempts[i];
            s.count_idle_attempt(cpu, 0);
            s.charge(Some(cpu), Some(cpu), level, 0, &costs, 0);
        }
        s.quiet.attempts.clear();
        let next = s.quiet.next_ns.take();
        arm_balance_timer(s, cpu, next);
        return;
    }
    // The tick's per-task work first (counted as "other" balancing work at level 0).
    if let Some(attempt) = policy.tick(&s.view(), cpu).as_ref() {
        let received = s.apply(Some(cpu), 0, 3, attempt);
        wake_receivers(s, policy, &received);
    }
    // An interrupt the tick sends another CPU.
    if let Some((to, t)) = policy.kick(&s.view(), cpu) {
        if to < s.w.cpus.len() {
            s.push(t.max(s.w.now), Event::Kick(to));
        } else {
            s.stats.rejected += 1;
        }
    }
    balance_levels(s, policy, cpu, cpu);
    refresh_balance_timer(s, policy, cpu);
}

/// The periodic balancing of `cpu`, done by `payer` (itself, or another CPU on its behalf):
/// the levels the policy says may be due, lowest first, each attempt applied before the next,
/// charged to `payer`.
fn balance_levels(s: &mut State<'_>, policy: &mut dyn Policy, cpu: CpuId, payer: CpuId) {
    let levels = s.w.domains.cpus[cpu].len();
    let all = if levels >= 64 {
        u64::MAX
    } else {
        (1 << levels) - 1
    };
    // Only the levels the policy says may be due (bit l: level l), lowest first.
    let due = policy.due_levels(&s.view(), cpu) & all;
    for level in bits(due) {
        // Used where the policy returned it (a view is one pointer: made per level).
        let attempt = policy.balance(&s.view(), cpu, level, BalanceKind::Periodic);
        let Some(attempt) = attempt.as_ref() else {
            continue;
        };
        let active = attempt.active_from;
        let received = s.apply_for(Some(cpu), Some(payer), level, 0, attempt);
        wake_receivers(s, policy, &received);
        if let Some(busiest) = active {
            ask_active_balance(s, policy, busiest, cpu, payer, level);
        }
    }
}

/// A kick reaches `cpu`: a run on other CPUs' behalf in progress takes it up (the policy knows
/// of it); else `cpu` starts one, after the charged work it is busy with if any.
fn kick(s: &mut State<'_>, policy: &mut dyn Policy, cpu: CpuId) {
    if !s.kicked[cpu] && !defer_kicked(s, cpu) {
        kick_step(s, policy, cpu);
    }
}

/// `cpu`, interrupted by another CPU's kick (or going on after balancing one CPU), balances
/// the CPUs the policy names on their behalf (`Policy::next_kicked`), each in turn: its work
/// is charged to `cpu`, and the next one starts when that work ends. A kick that arrives while
/// such a run is in progress joins it (the policy sees it through its own state).
fn kick_step(s: &mut State<'_>, policy: &mut dyn Policy, cpu: CpuId) {
    s.kicked[cpu] = false;
    while let Some(other) = policy.next_kicked(&s.view(), cpu) {
        if other >= s.w.cpus.len() {
            s.stats.rejected += 1;
            break;
        }
        balance_levels(s, policy, other, cpu);
        if defer_kicked(s, cpu) {
            return;
        }
    }
    refresh_balance_timer(s, policy, cpu);
}

/// Whether `cpu` is busy with charged work: then its balancing on other CPUs' behalf goes on
/// when that work ends (a `KickNext` then).
#[inline(always)]
fn defer_kicked(s: &mut State<'_>, cpu: CpuId) -> bool {
    let end = s.w.cpus[cpu].stall_until;
    if end <= s.w.now {
        return false;
    }
    s.kicked[cpu] = true;
    s.push(end, Event::KickNext(cpu));
    true
}

/// An attempt of `target` at `level`, made by `payer`, asked for an active balance from
/// `busiest`: it runs now, or the policy's latency after `payer`'s charged work for the
/// attempt ends (`Policy::active_balance_latency_ns`).
fn ask_active_balance(
    s: &mut State<'_>,
    policy: &mut dyn Policy,
    busiest: CpuId,
    target: CpuId,
    payer: CpuId,
    level: usize,
) {
    match s.active_latency_ns {
        None => active_balance(s, policy, busiest, target, level),
        Some(latency) => {
            let t = s.w.cpus[payer].stall_until.max(s.w.now) + latency;
            s.push(
                t,
                Event::Active {
                    busiest,
                    target,
                    level,
                },
            );
        }
    }
}

/// `busiest`'s migration thread pushes to `target` (the policy's `active_balance`), counted
/// at the attempt's `counted_at` or the asking `level`, charged to `busiest`.
fn active_balance(
    s: &mut State<'_>,
    policy: &mut dyn Policy,
    busiest: CpuId,
    target: CpuId,
    level: usize,
) {
    if let Some(a) = policy.active_balance(&s.view(), busiest, target).as_ref() {
        let received = s.apply(Some(busiest), a.counted_at.unwrap_or(level), 2, a);
        wake_receivers(s, policy, &received);
    }
}

/// CPUs that received processes start running them if they were idle; CPUs whose running
/// process was moved or held away run their next one, or are offered to the policy's
/// `cpu_idle` (which may give them work, or move more), or balance newly idle as a CPU whose
/// process stopped does (the kernel's `schedule()` on the emptied CPU: 2.6's `idle_balance`,
/// 6.x's `sched_balance_newidle`), then idle with the idle balancing interval.
#[inline]
fn wake_receivers(s: &mut State<'_>, policy: &mut dyn Policy, received: &[CpuId]) {
    if received.is_empty() && s.vacated.is_empty() {
        return; // most balancing attempts move nothing
    }
    wake_receivers_of(s, policy, received);
}

fn wake_receivers_of(s: &mut State<'_>, policy: &mut dyn Policy, received: &[CpuId]) {
    for &cpu in received {
        become_busy(s, policy, cpu);
    }
    while let Some(cpu) = s.vacated.pop() {
        s.dispatch(policy, cpu);
        running_changed(s, policy, cpu);
        if s.w.cpus[cpu].current.is_none() {
            if let Some(attempt) = policy.cpu_idle(&s.view(), cpu).as_ref() {
                let received = s.apply(Some(cpu), 0, 3, attempt);
                for c in received {
                    become_busy(s, policy, c);
                }
            }
        }
        if s.w.cpus[cpu].current.is_none() {
            newidle_balance(s, policy, cpu);
            s.run_next(policy, cpu);
            refresh_balance_timer(s, policy, cpu);
        }
    }
}

/// `cpu` started running another process without becoming busy (its timer is not asked again
/// otherwise): when the policy's timer follows the running process
/// (`Policy::timer_follows_running`), the timer is set again if the policy now wants it
/// earlier (never later: the timer set fires, and the policy is asked again then).
#[inline]
fn running_changed(s: &mut State<'_>, policy: &mut dyn Policy, cpu: CpuId) {
    if !s.timer_follows_running || s.w.cpus[cpu].current.is_none() {
        return;
    }
    // Only ever earlier: a timer already set fires, and the policy is asked then.
    let Some(next) = policy.next_periodic_ns(&s.view(), cpu) else {
        return;
    };
    let next = next.max((s.w.tick + 1) * s.w.config.tick_ns);
    if s.timer_at[cpu].is_none_or(|at| next < at) {
        arm_balance_timer(s, cpu, Some(next));
    }
}

fn refresh_balance_timer(s: &mut State<'_>, policy: &mut dyn Policy, cpu: CpuId) {
    let next = policy.next_periodic_ns(&s.view(), cpu);
    arm_balance_timer(s, cpu, next);
}

/// Sets `cpu`'s balancing timer to the policy's `next` periodic balancing, superseding the one
/// it had.
fn arm_balance_timer(s: &mut State<'_>, cpu: CpuId, next: Option<u64>) {
    s.w.cpus[cpu].balance_gen += 1;
    s.timer_at[cpu] = None;
    if let Some(t) = next {
        // Balancing runs from the tick: never at the current instant again.
        let tick = s.w.config.tick_ns;
        let t = t.max((s.w.tick + 1) * tick);
        s.timer_at[cpu] = Some(t);
        let gen = s.w.cpus[cpu].balance_gen;
        // On a tick (as every shipped policy's) and within its window: the wheel, with the
        // sequence number the heap would have given it.
        let seq = s.seq + 1;
        if s.wheel.push(t, s.w.tick, seq, cpu, gen) {
            s.seq = seq;
        } else {
            s.push(t, Event::Balance(cpu, gen));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The heap gives events by time, and at one time in the order they were scheduled — also
    /// where a later-scheduled event has a smaller pid or CPU, and across the 64-bit halves of
    /// the key.
    #[test]
    fn events_come_by_time_then_by_scheduling() {
        let mut heap = QuaternaryHeap::new();
        let entries = [
            (5, 3, Event::Arrive(0)),
            (5, 1, Event::Balance(7, 2)),
            (u64::MAX, 0, Event::Global),
            (4, u64::MAX, Event::Milestone(3, 1)),
            (5, 2, Event::IoDone(1)),
            (0, 9, Event::SyncDone(2)),
        ];
        for (t, seq, ev) in entries {
            heap.push(Scheduled { t, seq, ev });
        }
        let order: Vec<(u64, u64)> = std::iter::from_fn(|| heap.pop())
            .map(|e| (e.t, e.seq))
            .collect();
        assert_eq!(
            order,
            [(0, 9), (4, u64::MAX), (5, 1), (5, 2), (5, 3), (u64::MAX, 0)]
        );
    }

    /// The whole result of `policy` on `workload`, with the balancing timers in the wheel or
    /// (`wheel` false) every event in the heap.
    fn run_with(
        m: &Machine,
        d: &Domains,
        w: &Workload,
        policy: &str,
        config: &EngineConfig,
        wheel: bool,
    ) -> String {
        let ctx = crate::interface::PolicyContext {
            machine: m,
            domains: d,
            config,
        };
        let mut p = crate::policy::by_name(policy, &ctx).expect("a policy");
        let mut s = prepare(m, d, w, config);
        if !wheel {
            s.wheel = wheel::Wheel::new(0); // takes nothing: every timer goes to the heap
        }
        let r = drive(s, p.as_mut(), None)
            .expect("completes")
            .finished()
            .expect("no watch");
        serde_json::to_string(&r).expect("serialisable")
    }

    /// The wheel changes where periodic-balancing timers wait, not the order events are taken
    /// in: every policy family, both assumption profiles, random workloads (ties between a
    /// timer and other events at one instant are common: every timer is on a tick).
    #[test]
    fn the_wheel_takes_events_in_the_heap_s_order() {
        use crate::domains::{BuildOptions, Builder};
        let cases: [(&str, Builder, &[&str], &str); 6] = [
            (
                "mehta-m1",
                Builder::Multilevel,
                &["linux26", "origin-aware"],
                "n=200,kind=cpu,exec=300,arrival=same",
            ),
            (
                "mehta-m1",
                Builder::Multilevel,
                &["linux26"],
                "n=120,kind=cpu,exec=200,arrival=random",
            ),
            (
                "mehta-m1",
                Builder::TwoLevel,
                &["linux26"],
                "n=80,kind=mixed,exec=50-300,arrival=random",
            ),
            (
                "amc1",
                Builder::TwoLevel,
                &["capability-aware:place=domain"],
                "n=100,kind=mixed,exec=50-300,arrival=random",
            ),
            (
                "numa-4x8",
                Builder::Linux,
                &["linux"],
                "n=60,kind=cpu,exec=100,arrival=random",
            ),
            (
                "numa-4x8",
                Builder::TwoLevel,
                &["thread-aware", "hs-con"],
                "app=canneal:8+x264:8",
            ),
        ];
        let profiles = ["kernel26", "paper"].map(|profile| EngineConfig {
            assumptions: crate::assumptions::Assumptions::parse("test", profile).expect("one"),
            ..EngineConfig::default()
        });
        for (preset, builder, policies, spec) in cases {
            let m = crate::testutils::preset(preset);
            let d = builder.build(&m, &BuildOptions::default());
            for config in &profiles {
                for seed in 1..=2 {
                    let w = crate::workload::WorkloadSpec::parse("test", spec)
                        .and_then(|s| s.generate("test", seed, m.node_cpu_lists()))
                        .expect("a workload");
                    for &policy in policies {
                        assert_eq!(
                            run_with(&m, &d, &w, policy, config, true),
                            run_with(&m, &d, &w, policy, config, false),
                            "{preset} {policy} {:?} {spec} seed {seed}",
                            config.assumptions
                        );
                    }
                }
            }
        }
        // Arrivals on ticks, where timers fall too: an arrival goes first at its instant.
        let m = crate::testutils::preset("mehta-m1");
        let d = Builder::Multilevel.build(&m, &BuildOptions::default());
        let w = Workload {
            apps: Vec::new(),
            processes: (0..150u32)
                .map(|pid| crate::workload::Process {
                    arrival_ns: u64::from(pid / 3) * 2_000_000,
                    spawn_cpu: pid * 7 % 32,
                    ..crate::testutils::process(pid, crate::workload::Kind::Cpu, 40)
                })
                .collect(),
        };
        for config in &profiles {
            for policy in ["linux26", "origin-aware"] {
                assert_eq!(
                    run_with(&m, &d, &w, policy, config, true),
                    run_with(&m, &d, &w, policy, config, false),
                    "arrivals on ticks, {policy}"
                );
            }
        }
    }
}
