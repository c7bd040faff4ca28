//! The policy-facing interface: the trait every balancing policy implements, the view
//! it reads and the decisions it returns. The engine and the policies both depend on this module;
//! it depends on neither.
//!
//! ```text
//!   engine ── start(view) once, when the run starts
//!          ── place_new(view, pid, spawn_cpu) ──────────────► Some(cpu) | None = hold it
//!          ── place_wakeup(view, pid, prev_cpu) ────────────► Some(cpu) | None = hold it
//!          ── first_touch_node(view, pid, cpu) ─────────────► node       (page placement)
//!          ── cpu_idle(view, cpu) ──────────────────────────► Attempt    (before newly-idle)
//!          ── process_held(view, pid) ──────────────────────► Attempt    (after a None placement)
//!          ── next_periodic_ns(view, cpu) ──────────────────► time       (timer on each CPU;
//!             asked again when another process runs there if timer_follows_running())
//!          ── quiet_periodic(view, cpu) at that timer ──────► true + costs (decided nothing)
//!          ── or tick(view, cpu) at that timer, first ──────► Attempt    (per-task tick work)
//!          ── kick(view, cpu) right after ──────────────────► (other cpu, when): an interrupt
//!          ── next_kicked(view, cpu) when one arrives ──────► cpu to balance for, or None
//!          ── balance(view, cpu, level, Periodic|NewIdle) ──► Attempt    (pulls/pushes/exchanges)
//!          ── active_balance(view, busiest, target) ─────────► Attempt    (at once, or later:
//!             active_balance_latency_ns)
//!          ── global_balance(view) every global_period_ns ──► Attempt    (machine-wide, scx-style;
//!             its work charged to global_charge_cpu(view), if any)
//!          ── enqueue(view, pid, cpu, why) (shared_queues() > 0) ► Local | Shared{queue, key}
//!          ── dispatch(view, cpu, order) (shared_queues() > 0) ──► shared queues to take from
//!          ── timeslice_ns(), slice_tick_ns(), tracks_pelt() ► slice, its tick, PELT kept or not
//!          ── duty_cycle_half_life_ns() ──────────────────► per-task duty cycle kept or not
//!          ── affinity_cpu(view, pid) when its CPU left its mask ► Distribute | To(cpu) | Hold
//!          ── extra_metrics() at the end of the run ──────────► [(name, value)] (summary)
//!   engine checks every decision (a CPU out of range, a process not where the move says, a
//!   CPU the process may not run on: View::may_run), applies it, charges its cost and records it.
//! ```
//!
//! Design for every policy of the literature numasim models: an [`Attempt`] carries moves of any kind (pull, push,
//! exchange halves, idle, active, placement) from any CPU to any CPU, so sender-initiated pushes
//! and exchanges need no engine change; the view exposes speeds, per-process origin, kind,
//! thread group and page shares, per-group per-node thread counts and each process's CPU time so
//! far (load history); [`PageMove`] migrates pages and `first_touch_node` places them; space
//! sharing (Koita et al.'s schemes) holds a process (placement `None`) until an attempt's `places` gives it a
//! processor, typically from `cpu_idle`, and takes a processor back by holding its thread again
//! (`holds`); user-space balancers (sched_ext's scx_rusty style) get `global_balance` (charged
//! where `global_charge_cpu` says), a per-task duty cycle (`duty_cycle_half_life_ns`), moves
//! applied at a process's next enqueue ([`LazyMove`]) and shared dispatch queues that any CPU
//! takes from (`shared_queues`, `enqueue`, `dispatch`).

mod columns;
mod view;

pub use crate::state::{MigrationKind, PState};
pub use crate::workload::Pid;
pub use columns::{CpuColumns, TaskColumns};
pub use view::{ProcInfo, ThreadPages, View, World};

use crate::config::EngineConfig;
use crate::domains::Domains;
use crate::machine::{CpuId, Machine};

/// What a policy gets when it is built.
pub struct PolicyContext<'a> {
    pub machine: &'a Machine,
    pub domains: &'a Domains,
    pub config: &'a EngineConfig,
}

/// Why balancing runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum BalanceKind {
    /// The CPU's periodic balancing timer for a level.
    Periodic,
    /// The CPU is about to go idle.
    NewIdle,
}

/// Move a runnable (not running) process from one runqueue to another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Move {
    pub pid: Pid,
    pub from: CpuId,
    pub to: CpuId,
    pub kind: MigrationKind,
}

/// Send a process to `node` the next time it is enqueued (woken, or put back on a runqueue at
/// the end of its slice) rather than at once: a user-space balancer's deferred move, as
/// scx_rusty's balancer writes a task's new domain for `ops.enqueue` to apply (docs/engine.md,
/// "Lazy moves").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LazyMove {
    pub pid: Pid,
    pub node: usize,
}

/// Why a runnable process is enqueued ([`Policy::enqueue`]; sched_ext's `ops.enqueue`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnqueueKind {
    /// Created (or released before it ever ran): after `place_new`.
    New,
    /// Woken: after `place_wakeup`.
    Wakeup,
    /// Its slice ran out while its CPU had something else to run.
    SliceEnd,
    /// Its allowed CPUs changed while it waited in a shared queue: taken out and enqueued
    /// again, as `sched_setaffinity` dequeues a queued task and enqueues it after
    /// `ops.set_cpumask` (docs/engine.md, "Shared dispatch queues").
    Affinity,
}

/// Where a runnable process goes ([`Policy::enqueue`]): its CPU's own runqueue or a shared
/// dispatch queue (docs/engine.md, "Shared dispatch queues").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enqueue {
    /// The tail of the CPU's own runqueue, as every policy without shared queues (sched_ext's
    /// `SCX_DSQ_LOCAL`). `slice_ns`: the slice it gets when it next runs (`None`: what is left
    /// of its slice, or a full one of [`Policy::timeslice_ns`] if none is left).
    Local { slice_ns: Option<u64> },
    /// Shared queue `queue` (`0..shared_queues()`), ordered by `key`, lower first; equal keys
    /// in arrival order, so a constant key is FIFO (`scx_bpf_dsq_insert_vtime`,
    /// `scx_bpf_dsq_insert`). It waits there runnable but on no CPU (no CPU's runqueue, no
    /// node counts it) until a CPU's [`Policy::dispatch`] takes it. The CPU it was enqueued
    /// on dispatches at once if it is idle, and so does `kick` (`scx_bpf_kick_cpu`).
    Shared {
        queue: usize,
        key: u64,
        slice_ns: Option<u64>,
        kick: Option<CpuId>,
    },
}

/// Where a process goes when a change of its allowed CPUs excludes its CPU
/// ([`Policy::affinity_cpu`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AffinityMove {
    /// To the engine's destination (`cpumask_any_and_distribute`).
    Distribute,
    /// To this CPU; refused (counted) if the process may not run there, and the engine's
    /// destination used.
    To(CpuId),
    /// Off its CPU and held, as [`Attempt::holds`] does, until a later `places` gives it a
    /// processor; [`Policy::process_held`] is asked next (a policy that allocates processors to
    /// processes, whose thread waits for one it may run on).
    Hold,
}

/// Move a share of a thread group's pages from one node to another.
#[derive(Debug, Clone, PartialEq)]
pub struct PageMove {
    pub tgid: usize,
    pub from_node: usize,
    pub to_node: usize,
    /// Fraction of the group's pages (0..=1 of the whole group) to move.
    pub share: f64,
}

/// One balancing attempt and what it decided.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Attempt {
    /// Runqueues examined (charged `EngineConfig::cost_per_rq_ns` each).
    pub rqs_examined: u32,
    /// Tasks examined.
    pub tasks_examined: u32,
    /// Extra runqueue locks taken beyond the balancing CPU's own (charged like a runqueue).
    pub locks: u32,
    /// Candidates a selection policy evaluated (charged `cost_per_evaluation_ns` each).
    pub evaluations: u32,
    /// Other work the policy did on the CPU, in ns, charged as it is (e.g. a model of page-table
    /// scanning, hinting faults and page copies that prices its own work).
    pub work_ns: u64,
    /// Moves, applied in order.
    pub moves: Vec<Move>,
    /// Page migrations.
    pub pages: Vec<PageMove>,
    /// Processes taken off their CPU (running or queued) and held until a later `places` gives
    /// them a processor (space sharing's processor preemption); applied before `places`.
    pub holds: Vec<Pid>,
    /// Processor for held processes (see [`Policy::place_new`]).
    pub places: Vec<(Pid, CpuId)>,
    /// Nodes processes go to at their next enqueue (applied after `moves`; a later one for
    /// the same process replaces it; a move or place of it now cancels it).
    pub lazy_moves: Vec<LazyMove>,
    /// Ask the engine to run `active_balance(busiest, target=this cpu)`: right after, or
    /// [`Policy::active_balance_latency_ns`] after the attempt's work.
    pub active_from: Option<CpuId>,
    /// The level the engine counts this attempt at (its statistics and trace), when not the
    /// one it was asked about: e.g. an active balance counted, as the kernel's schedstat
    /// counts it, at the target's lowest level that spans the busiest CPU.
    pub counted_at: Option<usize>,
}

impl Attempt {
    /// What the attempt cost, without what it decided.
    pub fn costs(&self) -> Costs {
        Costs {
            rqs_examined: self.rqs_examined,
            tasks_examined: self.tasks_examined,
            locks: self.locks,
            evaluations: self.evaluations,
            work_ns: self.work_ns,
        }
    }
}

/// What a balancing attempt that decided nothing cost (its counts, charged as an
/// [`Attempt`]'s are): the attempts of [`Policy::quiet_periodic`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Costs {
    pub rqs_examined: u32,
    pub tasks_examined: u32,
    pub locks: u32,
    pub evaluations: u32,
    pub work_ns: u64,
}

/// The attempt that decides nothing at these costs.
impl From<Costs> for Attempt {
    fn from(c: Costs) -> Self {
        Attempt {
            rqs_examined: c.rqs_examined,
            tasks_examined: c.tasks_examined,
            locks: c.locks,
            evaluations: c.evaluations,
            work_ns: c.work_ns,
            ..Attempt::default()
        }
    }
}

/// The set bits of `mask`, lowest first: the levels of a level mask (`Policy::due_levels`).
pub fn bits(mut mask: u64) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        (mask != 0).then(|| {
            let bit = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            bit
        })
    })
}

/// A periodic balancing that decided nothing, done in one call ([`Policy::quiet_periodic`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Quiet {
    /// Its attempts' levels and costs, lowest level first.
    pub attempts: Vec<(usize, Costs)>,
    /// What `next_periodic_ns` answers after it: the CPU's next periodic balancing.
    pub next_ns: Option<u64>,
}

/// An order, from outside a policy, for the tasks its pulls take from a busiest runqueue
/// (an external policy's `rank`: `policy::external`), consulted where the policy's balancer
/// chooses which task to take next ([`Policy::set_task_order`]).
pub trait TaskOrder: Send {
    /// One rank per candidate into `ranks` (cleared before the call) for a pull to `this_cpu`
    /// from `busiest`: lower ranks are taken first, ties keep the order of `candidates` (the
    /// balancer's own). `false` keeps the balancer's order (e.g. the order's code failed).
    fn rank(
        &mut self,
        view: &View<'_>,
        this_cpu: CpuId,
        busiest: CpuId,
        candidates: &[Pid],
        ranks: &mut Vec<i64>,
    ) -> bool;
}

/// A balancing policy.
pub trait Policy: Send {
    /// Configuration name.
    fn name(&self) -> &'static str;

    /// The run starts: called once, before any other method but the ones read when the run
    /// starts (`timeslice_ns`, `slice_tick_ns`, `active_balance_latency_ns`, `tracks_pelt`)
    /// and the first `next_periodic_ns` of each CPU. Nothing by default.
    fn start(&mut self, _view: &View<'_>) {}

    /// Where a new process starts (fork/exec balancing), given its parent's CPU; `None` holds it
    /// (no runqueue) until an attempt's `places` names its processor.
    fn place_new(&mut self, view: &View<'_>, pid: Pid, spawn_cpu: CpuId) -> Option<CpuId>;

    /// Where a waking process is enqueued, given the CPU it last ran on; `None` holds it.
    fn place_wakeup(&mut self, view: &View<'_>, pid: Pid, prev_cpu: CpuId) -> Option<CpuId>;

    /// The node that receives a thread's first-touch pages, given its origin CPU `cpu` (where
    /// it first runs, or its parent's CPU under `memory=parent`; default: the node of `cpu`; a
    /// policy may concentrate them on a home node).
    fn first_touch_node(&mut self, view: &View<'_>, _pid: Pid, cpu: CpuId) -> usize {
        view.machine.cpu_node(cpu)
    }

    /// `cpu` has nothing to run: a chance to place held processes (before newly-idle balancing).
    /// Called whenever a CPU is left with nothing to run: its process ended or blocked, a
    /// decision moved or held it away, or a process was held while the CPU was idle.
    fn cpu_idle(&mut self, _view: &View<'_>, _cpu: CpuId) -> Option<Attempt> {
        None
    }

    /// `pid` was just held (its placement was `None`), after idle processors were offered it:
    /// a chance to make room for it (take a processor from another process with `holds`, give
    /// it with `places`). Its work is counted, not charged to a CPU.
    fn process_held(&mut self, _view: &View<'_>, _pid: Pid) -> Option<Attempt> {
        None
    }

    /// When `cpu` next wants its periodic balancing (absolute ns), given its current state.
    fn next_periodic_ns(&self, view: &View<'_>, cpu: CpuId) -> Option<u64>;

    /// Whether [`Policy::next_periodic_ns`] depends on which process runs on the CPU (e.g. a
    /// timer at the instant the running process's per-task tick work is due, from
    /// [`View::cpu_time_ns`]): then the engine asks it again whenever a CPU starts running
    /// another process, and sets the timer again if the answer moved. Otherwise it is asked
    /// after the CPU's periodic event and when the CPU becomes busy or idle. Read once, when
    /// the run starts. Default: false.
    fn timer_follows_running(&self) -> bool {
        false
    }

    /// The levels whose periodic balancing on `cpu` may be due: bit `l` for level `l`. Asked
    /// once at each periodic balancing, before any level; the engine then asks `balance` only
    /// about those, lowest first. It must name every level where `balance` would return an
    /// attempt or change the policy's state during this balancing, after the attempts at the
    /// levels below too; a change `balance` makes at whichever level it is first asked about
    /// (the start of the pass, as `linux` makes it) needs no lower level named. Default: every
    /// level (a policy that counts the engine's calls, as origin-aware counts its cycles, or
    /// whose answer the attempts below may change, keeps it).
    fn due_levels(&self, _view: &View<'_>, _cpu: CpuId) -> u64 {
        u64::MAX
    }

    /// One balancing attempt on `cpu` at `level`; `None` when the policy does not balance there
    /// (or, for periodic balancing, when that level is not due). The engine asks for every level
    /// (for periodic balancing: every level `due_levels` names), lowest first, applying each
    /// attempt before asking for the next.
    fn balance(
        &mut self,
        view: &View<'_>,
        cpu: CpuId,
        level: usize,
        kind: BalanceKind,
    ) -> Option<Attempt>;

    /// The whole periodic balancing of `cpu`, a CPU running nothing (the engine asks only
    /// then): `tick`, then `balance` at each level `due_levels` names, then
    /// `next_periodic_ns`, in one call, when the policy can tell that it decides
    /// nothing: no attempt with a move, page move, hold, place or `active_from`. Then it changes
    /// its own state as those calls would, records their attempts and answer in `quiet` (found
    /// empty), and returns true; the engine charges the attempts in order and sets the timer.
    /// Otherwise it returns false having changed nothing, and the engine makes those calls. The
    /// results are the same either way, only faster: most periodic balancing is an idle CPU
    /// finding nothing to pull. Default: false.
    fn quiet_periodic(&mut self, _view: &View<'_>, _cpu: CpuId, _quiet: &mut Quiet) -> bool {
        false
    }

    /// Active balancing: `busiest`'s migration thread pushes to `target` (asked for by an
    /// attempt's `active_from`, periodic or newly idle).
    fn active_balance(
        &mut self,
        _view: &View<'_>,
        _busiest: CpuId,
        _target: CpuId,
    ) -> Option<Attempt> {
        None
    }

    /// How long after the attempt that asked for it an active balance runs (the wake-up of the
    /// busiest CPU's migration thread): `None` (the default) runs it at once, before the next
    /// level is balanced; `Some(ns)` runs it `ns` after the asking CPU's charged work for the
    /// attempt ends, the asking CPU balancing its other levels meanwhile. Read once, when the
    /// run starts.
    fn active_balance_latency_ns(&self) -> Option<u64> {
        None
    }

    /// The slice a running process gets while others wait on its CPU (round robin, the front of
    /// the queue next): the policy's queue discipline; `None` = the config's `timeslice_ns`
    /// (2.6's 100 ms). Read once, when the run starts.
    fn timeslice_ns(&self) -> Option<u64> {
        None
    }

    /// The period of the tick at which the policy's scheduler sees that a running process's
    /// slice has run out, when it has no high-resolution timer for it: a process whose slice
    /// has ended keeps its CPU until the next multiple of this period (the clock starts at a
    /// tick). `None` (the default): the slice ends exactly when it runs out. Read once, when
    /// the run starts.
    fn slice_tick_ns(&self) -> Option<u64> {
        None
    }

    /// Whether the engine keeps PELT signals per task and per CPU for this policy
    /// ([`View::task_pelt`], [`View::cpu_pelt`]; crate::load::Pelt). Read once, when the run
    /// starts; off, they cost nothing and read as zero.
    fn tracks_pelt(&self) -> bool {
        false
    }

    /// The half-life (ns) of a per-task duty-cycle average the engine keeps for the policy:
    /// the share of time each task was runnable (running or queued), over a window that
    /// halves every half-life (sched_ext's running averages, crate::load::Ravg; read with
    /// [`View::duty_cycle`]). Read once, when the run starts; `None` (the default) or 0: not
    /// kept, at no cost, read as zero.
    fn duty_cycle_half_life_ns(&self) -> Option<u64> {
        None
    }

    /// Period of a machine-wide balancing callback (user-space balancers), if any.
    fn global_period_ns(&self) -> Option<u64> {
        None
    }

    /// The machine-wide callback (its work is counted, and charged to
    /// [`Policy::global_charge_cpu`] if it names one).
    fn global_balance(&mut self, _view: &View<'_>) -> Option<Attempt> {
        None
    }

    /// The CPU that pays for [`Policy::global_balance`]'s work (it stalls for the attempt's
    /// costs, as the CPU a user-space balancer's thread runs on would), asked at each call;
    /// `None` (the default): counted, charged to no CPU (the balancer runs beside the
    /// workload at no cost to it).
    fn global_charge_cpu(&self, _view: &View<'_>) -> Option<CpuId> {
        None
    }

    /// How many shared dispatch queues the engine keeps for the policy (sched_ext's DSQs);
    /// read once, when the run starts. 0 (the default): none, and [`Policy::enqueue`] and
    /// [`Policy::dispatch`] are never asked.
    fn shared_queues(&self) -> usize {
        0
    }

    /// A runnable process is enqueued on `cpu` (policies with shared queues only): after
    /// `place_new` or `place_wakeup` chose `cpu` (sched_ext's `ops.select_cpu` then
    /// `ops.enqueue`), and at the end of its slice on `cpu` when the CPU has something else
    /// to run (its runqueue is not empty, or [`Policy::dispatch`] found a task); with nothing
    /// else it keeps running on a new slice and this is not asked (sched_ext without
    /// `SCX_OPS_ENQ_LAST`); and again when its allowed CPUs change while it waits in a shared
    /// queue (`EnqueueKind::Affinity`: out of the queue, enqueued on its CPU if it may still run
    /// there, else on the engine's destination; only the answer's `kick` wakes a CPU). A shared queue out of range is refused (counted) and the process
    /// goes to `cpu`'s runqueue. Default: `cpu`'s runqueue.
    fn enqueue(&mut self, _view: &View<'_>, _pid: Pid, _cpu: CpuId, _why: EnqueueKind) -> Enqueue {
        Enqueue::Local { slice_ns: None }
    }

    /// `cpu` needs a process and its runqueue is empty (it stopped its process, was woken or
    /// kicked idle, or its running process's slice ran out): push onto `order` (empty at the
    /// call) the shared queues to take from, in order (sched_ext's `ops.dispatch` with
    /// `scx_bpf_dsq_move_to_local`). The engine takes, from the first queue that has one, the
    /// first process in key order that may run on `cpu`, counted as a migration of kind
    /// `pull` when `cpu` is not the one it last ran on (`placement` when it never ran and
    /// `cpu` is not its parent's). Asked once each time; nothing by default.
    fn dispatch(&mut self, _view: &View<'_>, _cpu: CpuId, _order: &mut Vec<usize>) {}

    /// The scheduler tick's per-task work on `cpu` (`sched_tick` → `task_tick_numa`), called at
    /// each of the CPU's periodic events ([`Policy::next_periodic_ns`]) before its balancing:
    /// a policy that wants every tick asks for its timer at every tick. None by default.
    fn tick(&mut self, _view: &View<'_>, _cpu: CpuId) -> Option<Attempt> {
        None
    }

    /// An interrupt `cpu` sends another CPU at its periodic event (asked right after
    /// [`Policy::tick`], before its balancing): `(to, at_ns)`. At `at_ns` (or when `to`'s
    /// charged work in progress ends) the engine starts `to`'s balancing on other CPUs' behalf
    /// ([`Policy::next_kicked`]); nothing else happens there (no tick). None by default.
    fn kick(&mut self, _view: &View<'_>, _cpu: CpuId) -> Option<(CpuId, u64)> {
        None
    }

    /// `cpu` was interrupted by a [`Policy::kick`] (or has finished balancing for one CPU): the
    /// next CPU whose periodic balancing it does on that CPU's behalf, or `None` when it is
    /// done. The engine balances the CPU named as at a periodic event of its own
    /// ([`Policy::due_levels`], then [`Policy::balance`] with `Periodic`, each attempt counted
    /// as that CPU's and charged to `cpu`), then asks again once `cpu`'s charged work ends. A
    /// kick that reaches `cpu` while it is at this starts nothing new: the policy knows of it
    /// (it sent it) and may name more CPUs. None by default.
    fn next_kicked(&mut self, _view: &View<'_>, _cpu: CpuId) -> Option<CpuId> {
        None
    }

    /// What happens to `pid` when a change of its allowed CPUs ([`World::allowed`], already
    /// the new ones) excludes the CPU it is running or queued on (asked only then): by
    /// default the engine's destination, Linux 6.x's (`cpumask_any_and_distribute`:
    /// docs/engine.md, "Affinity").
    fn affinity_cpu(&mut self, _view: &View<'_>, _pid: Pid) -> AffinityMove {
        AffinityMove::Distribute
    }

    /// What the policy counted itself over the run (e.g. NUMA hinting faults, pages
    /// migrated), by name, reported in the run's summary as `policy_metrics`; none by default.
    fn extra_metrics(&self) -> Vec<(String, f64)> {
        Vec::new()
    }

    /// Why the policy cannot go on, once it cannot (an external policy whose code raised or
    /// answered wrongly: `policy::external`); `None` while it can. The engine asks every
    /// [`WATCH_EVERY_EVENTS`](crate::engine::WATCH_EVERY_EVENTS) events and once the run has
    /// ended, and ends the run with this error; a policy that fails answers sanely (as if it
    /// decided nothing) until then. Never by default.
    fn failure(&mut self) -> Option<crate::error::InputError> {
        None
    }

    /// Takes `order` as the order of the tasks its pulls take (the candidates it would take,
    /// in its own order, ranked by `order` before it takes them); `false` (the default) when
    /// the policy has no such decision point, `order` dropped.
    fn set_task_order(&mut self, _order: Box<dyn TaskOrder>) -> bool {
        false
    }
}
