//! An external policy: decisions made by code outside the core (a Python class, through the
//! bindings) for the hooks it overrides, a registered `base` policy for every other hook. The
//! gating, the timers and the strict checking of every decision live here, so that the code
//! outside is asked only when its answer can matter and a wrong answer stops the run with
//! one line naming the hook, the simulated time, the CPU and the offending item.
//!
//! ```text
//!   engine ──► External ── hook overridden? ──no──► base (linux26, linux, ...)
//!                 │ yes
//!                 ├─ global_balance every period_ns ───────► Callbacks::balance
//!                 ├─ balance(cpu, level, kind), gate open ──► Callbacks::balance_cpu
//!                 ├─ place_new / place_wakeup ──────────────► Callbacks::place (None: base's)
//!                 ├─ the base's pulls, which task first ────► Callbacks::rank (Policy::set_task_order)
//!                 └─ extra_metrics (base's, then its own) ──► Callbacks::metrics
//!   each answer ──► check (pids, CPUs, nodes, shares, one move per pid) ──► Attempt | failure
//!   failure ──► every later hook answers as the base, and Policy::failure ends the run
//! ```
//!
//! 1. [`Hooks`] says which callbacks the code overrides; the others are never called.
//!    `Callbacks::setup` is called once, when the run starts, before any other.
//! 2. Machine-wide balancing runs every [`Hooks::period_ns`]: the engine's `global_balance`.
//! 3. Per-CPU balancing replaces the base's: each CPU keeps, per level of its hierarchy, the
//!    time it last balanced there; a level comes due after its `min_interval_ms` on an idle
//!    CPU, `busy_factor` times that on a busy one (the kernel's rule, read from the domains),
//!    and newly-idle balancing runs at the levels whose flags ask for it
//!    (`SD_BALANCE_NEWIDLE`). The callback is asked only when the [`Gate`] is open.
//! 4. The order of a pull's tasks: the base is handed a [`TaskOrder`] that asks
//!    `Callbacks::rank` for one rank per candidate (the busiest runqueue's tasks its balancer
//!    would take, in its own order); the base takes them lowest rank first. A base without
//!    that decision point refuses it, and the run does not start.
//! 5. Decisions are checked before the engine sees them (see [`External::check_moves`]); the
//!    first bad one is kept as the run's failure, and the engine stops the run at its next
//!    look (`Policy::failure`).
//!
//! Known limits: the callbacks' own computing is not charged to any CPU (a model of a
//! balancer, not of its code); with per-CPU balancing overridden the base's tick, kicks and
//! nohz balancing are not run.

use std::sync::{Arc, Mutex, MutexGuard};

use crate::domains::sd;
use crate::error::InputError;
use crate::interface::{
    Attempt, BalanceKind, MigrationKind, Move, PState, PageMove, Pid, Policy, PolicyContext, Quiet,
    TaskOrder, View,
};
use crate::machine::CpuId;

/// A decision as the external code gave it: numbers not yet checked.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Decision {
    /// Move process `pid` to `cpu`.
    Move { pid: i64, cpu: i64 },
    /// Move `share` of group `tgid`'s pages from one node to another.
    Pages {
        tgid: i64,
        from_node: i64,
        to_node: i64,
        share: f64,
    },
}

/// Why a callback gave no decisions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// It raised (the caller keeps its own account of it, e.g. a traceback).
    Raised,
    /// Its answer was not of the right shape: what was wrong.
    Type(String),
}

/// Why a placement is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    Fork,
    Wake,
}

impl Why {
    pub fn name(self) -> &'static str {
        match self {
            Why::Fork => "fork",
            Why::Wake => "wake",
        }
    }
}

/// The code outside the core. Each method gets the view of the instant; decisions go into
/// `out` (cleared before the call).
pub trait Callbacks: Send {
    /// Once a run, before any other callback: when the run starts (`Policy::start`).
    fn setup(&mut self, _view: &View<'_>) -> Result<(), Failure> {
        Ok(())
    }
    /// Machine-wide balancing.
    fn balance(&mut self, view: &View<'_>, out: &mut Vec<Decision>) -> Result<(), Failure>;
    /// Per-CPU balancing of `cpu` at `level`.
    fn balance_cpu(
        &mut self,
        view: &View<'_>,
        cpu: CpuId,
        level: usize,
        kind: BalanceKind,
        out: &mut Vec<Decision>,
    ) -> Result<(), Failure>;
    /// Placement of `pid`, given its parent's CPU (fork) or the CPU it slept on (wake):
    /// `None` leaves it to the base.
    fn place(
        &mut self,
        view: &View<'_>,
        pid: Pid,
        cpu: CpuId,
        why: Why,
    ) -> Result<Option<i64>, Failure>;
    /// What the code counted over the run, by name.
    fn metrics(&self) -> Result<Vec<(String, f64)>, Failure>;
    /// One rank per candidate into `out` for a pull to `this_cpu` from `busiest` (lower
    /// first); asked only when [`Hooks::rank`] is set.
    fn rank(
        &mut self,
        _view: &View<'_>,
        _this_cpu: CpuId,
        _busiest: CpuId,
        _candidates: &[Pid],
        _out: &mut Vec<i64>,
    ) -> Result<(), Failure> {
        Ok(())
    }
}

/// When per-CPU balancing asks the callback (every condition named must hold).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Gate {
    /// Only when the balancing CPU runs nothing.
    pub idle: bool,
    /// Only when some CPU has two or more runnable tasks (something could be pulled).
    pub overloaded: bool,
}

impl Gate {
    /// `always`, or `idle`, `overloaded` joined by `+` (both must hold).
    pub fn parse(origin: &str, text: &str) -> Result<Self, InputError> {
        let mut gate = Gate::default();
        if text.trim() == "always" {
            return Ok(gate);
        }
        for word in text.split('+').map(str::trim) {
            match word {
                "idle" => gate.idle = true,
                "overloaded" => gate.overloaded = true,
                _ => {
                    return Err(InputError::new(
                        origin,
                        format!(
                            "balance_cpu_when must be always, idle, overloaded or \
                             idle+overloaded, not '{text}'"
                        ),
                    ))
                }
            }
        }
        Ok(gate)
    }

    fn open(self, view: &View<'_>, cpu: CpuId) -> bool {
        (!self.idle || view.idle(cpu)) && (!self.overloaded || !view.none_overloaded())
    }
}

/// Which callbacks the external code overrides, and how they are run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Hooks {
    /// Machine-wide balancing every this many ns (`None`: not overridden).
    pub period_ns: Option<u64>,
    /// Per-CPU balancing and its gate (`None`: not overridden).
    pub balance_cpu: Option<Gate>,
    pub place: bool,
    pub metrics: bool,
    /// The base's pulls take their tasks in the order `Callbacks::rank` gives.
    pub rank: bool,
}

/// The external policy (see the module doc).
pub struct External {
    base: Box<dyn Policy>,
    /// Shared with the order handed to the base (`Hooks::rank`).
    callbacks: Shared<Box<dyn Callbacks>>,
    hooks: Hooks,
    /// Names the policy in errors (`py:nodebal.py:NodeBalancer`).
    label: String,
    decisions: Vec<Decision>,
    /// Per CPU and level: when per-CPU balancing last ran there.
    last_ns: Vec<Vec<u64>>,
    /// The first failure, the order's included (it shares it).
    failure: Shared<Option<InputError>>,
    /// A failure of the metrics callback (asked through `&self`, once the run has ended).
    metrics_failure: std::cell::RefCell<Option<InputError>>,
    /// The failure was handed to the engine.
    reported: bool,
}

impl External {
    /// The external policy over `base` (already built for the run); refused when the code
    /// ranks pulls ([`Hooks::rank`]) and `base` has no such decision point.
    pub fn new(
        ctx: &PolicyContext<'_>,
        mut base: Box<dyn Policy>,
        callbacks: Box<dyn Callbacks>,
        hooks: Hooks,
        label: impl Into<String>,
    ) -> Result<Self, InputError> {
        let last_ns = ctx.domains.cpus.iter().map(|l| vec![0; l.len()]).collect();
        let label = label.into();
        let callbacks = Arc::new(Mutex::new(callbacks));
        let failure = Arc::new(Mutex::new(None));
        if hooks.rank {
            let order = ExternalOrder {
                callbacks: Arc::clone(&callbacks),
                failure: Arc::clone(&failure),
                label: label.clone(),
            };
            if !base.set_task_order(Box::new(order)) {
                return Err(InputError::new(
                    format!("policy {label}"),
                    format!(
                        "rank orders the tasks a pull takes, and the base {} has no such \
                         choice (linux26 has)",
                        base.name()
                    ),
                ));
            }
        }
        Ok(Self {
            base,
            callbacks,
            hooks,
            label,
            decisions: Vec::new(),
            last_ns,
            failure,
            metrics_failure: std::cell::RefCell::new(None),
            reported: false,
        })
    }

    fn callbacks(&self) -> MutexGuard<'_, Box<dyn Callbacks>> {
        self.callbacks.lock().expect("not poisoned")
    }

    fn failed(&self) -> bool {
        self.failure.lock().expect("not poisoned").is_some()
    }

    /// Keeps the first failure: `hook` at `now` on `cpu` (None: machine-wide), `what` wrong.
    fn fail(&mut self, view: &View<'_>, hook: &str, cpu: Option<CpuId>, what: String) {
        keep_failure(&self.failure, &self.label, view, hook, cpu, what);
    }

    fn fail_callback(&mut self, view: &View<'_>, hook: &str, cpu: Option<CpuId>, f: Failure) {
        self.fail(view, hook, cpu, failure_text(f));
    }

    /// The checked attempt of `self.decisions` made by `hook` on `cpu` (None: machine-wide):
    /// a move names a runnable or running process and a CPU of the machine it may run on,
    /// other than its own, and no process moves twice; a page move names a thread group,
    /// two different nodes and a share in [0, 1]. The first problem fails the run.
    fn check_moves(&mut self, view: &View<'_>, hook: &str, cpu: Option<CpuId>) -> Option<Attempt> {
        let cpus = view.machine.cpus();
        let nodes = view.machine.nodes();
        let procs = view.procs.len();
        let mut attempt = Attempt::default();
        let mut problem = None;
        for d in std::mem::take(&mut self.decisions) {
            match d {
                Decision::Move { pid, cpu: to } => {
                    let Some(p) = usize::try_from(pid).ok().filter(|&p| p < procs) else {
                        problem = Some(format!("move of pid {pid}: no such process"));
                        break;
                    };
                    let Some(to) = usize::try_from(to).ok().filter(|&c| c < cpus) else {
                        problem = Some(format!(
                            "move of pid {pid} to CPU {to}: the machine has CPUs 0 to {}",
                            cpus - 1
                        ));
                        break;
                    };
                    let st = &view.procs[p];
                    let from = st.cpu;
                    let running = st.state == PState::Running && view.current(from) == Some(p);
                    let queued = st.state == PState::Runnable;
                    if !running && !queued {
                        let state = format!("{:?}", st.state).to_lowercase();
                        problem = Some(format!(
                            "move of pid {pid}: it is not queued or running (it is {state})"
                        ));
                        break;
                    }
                    if from == to {
                        problem = Some(format!("move of pid {pid}: it is already on CPU {to}"));
                        break;
                    }
                    if !view.may_run(p, to) {
                        problem = Some(format!(
                            "move of pid {pid} to CPU {to}: its affinity does not allow that CPU"
                        ));
                        break;
                    }
                    if attempt.moves.iter().any(|m| m.pid == p) {
                        problem = Some(format!("pid {pid} is moved twice in one answer"));
                        break;
                    }
                    let kind = if Some(to) == cpu {
                        MigrationKind::Pull
                    } else {
                        MigrationKind::Push
                    };
                    attempt.moves.push(Move {
                        pid: p,
                        from,
                        to,
                        kind,
                    });
                }
                Decision::Pages {
                    tgid,
                    from_node,
                    to_node,
                    share,
                } => {
                    let group = usize::try_from(tgid)
                        .ok()
                        .filter(|&t| t < procs && view.workload.processes[t].tgid as usize == t);
                    let Some(tgid) = group else {
                        problem = Some(format!("page move of group {tgid}: no such thread group"));
                        break;
                    };
                    let node = |n: i64| usize::try_from(n).ok().filter(|&n| n < nodes);
                    let (Some(from), Some(to)) = (node(from_node), node(to_node)) else {
                        problem = Some(format!(
                            "page move of group {tgid} from node {from_node} to node \
                             {to_node}: the machine has nodes 0 to {}",
                            nodes - 1
                        ));
                        break;
                    };
                    if !(0.0..=1.0).contains(&share) {
                        problem = Some(format!(
                            "page move of group {tgid}: share {share} is outside [0, 1]"
                        ));
                        break;
                    }
                    if from == to {
                        problem = Some(format!(
                            "page move of group {tgid}: from and to are both node {from}"
                        ));
                        break;
                    }
                    attempt.pages.push(PageMove {
                        tgid,
                        from_node: from,
                        to_node: to,
                        share,
                    });
                }
            }
        }
        if let Some(what) = problem {
            self.fail(view, hook, cpu, what);
            return None;
        }
        (!attempt.moves.is_empty() || !attempt.pages.is_empty()).then_some(attempt)
    }

    /// Asks the callback where `pid` goes; `None` leaves it to the base.
    fn place(&mut self, view: &View<'_>, pid: Pid, cpu: CpuId, why: Why) -> Option<CpuId> {
        if !self.hooks.place || self.failed() {
            return None;
        }
        let hook = "place";
        let answer = self.callbacks().place(view, pid, cpu, why);
        match answer {
            Err(f) => {
                self.fail_callback(view, hook, Some(cpu), f);
                None
            }
            Ok(None) => None,
            Ok(Some(to)) => {
                let cpus = view.machine.cpus();
                match usize::try_from(to).ok().filter(|&c| c < cpus) {
                    Some(c) if view.may_run(pid, c) => Some(c),
                    Some(c) => {
                        let what = format!(
                            "pid {pid} placed on CPU {c}: its affinity does not allow that CPU"
                        );
                        self.fail(view, hook, Some(cpu), what);
                        None
                    }
                    None => {
                        let what = format!(
                            "pid {pid} placed on CPU {to}: the machine has CPUs 0 to {}",
                            cpus - 1
                        );
                        self.fail(view, hook, Some(cpu), what);
                        None
                    }
                }
            }
        }
    }

    /// The interval of `cpu`'s `level` now: `min_interval_ms`, times `busy_factor` when busy.
    fn interval_ns(view: &View<'_>, cpu: CpuId, level: usize) -> u64 {
        let p = &view.domains.cpus[cpu][level].params;
        let ms = if view.idle(cpu) {
            p.min_interval_ms
        } else {
            p.min_interval_ms * u64::from(p.busy_factor.max(1))
        };
        ms.max(1) * 1_000_000
    }

    fn own_cpu_balancing(&self) -> bool {
        self.hooks.balance_cpu.is_some() && !self.failed()
    }
}

/// State the external policy shares with the order it hands its base.
type Shared<T> = Arc<Mutex<T>>;

fn failure_text(f: Failure) -> String {
    match f {
        Failure::Raised => "raised an exception".to_owned(),
        Failure::Type(t) => t,
    }
}

/// Keeps the first failure in `slot`: `hook` at `now` on `cpu` (None: machine-wide), `what`.
fn keep_failure(
    slot: &Shared<Option<InputError>>,
    label: &str,
    view: &View<'_>,
    hook: &str,
    cpu: Option<CpuId>,
    what: String,
) {
    let mut slot = slot.lock().expect("not poisoned");
    if slot.is_none() {
        let at = match cpu {
            Some(c) => format!("on CPU {c}"),
            None => "(machine-wide)".to_owned(),
        };
        let ms = view.now as f64 / 1e6;
        *slot = Some(InputError::new(
            format!("policy {label}"),
            format!("{hook} at {ms:.3} ms {at}: {what}"),
        ));
    }
}

/// The order handed to the base (step 4 of the module doc): the code's ranks, checked (one
/// integer per candidate); after any failure the base's own order.
struct ExternalOrder {
    callbacks: Shared<Box<dyn Callbacks>>,
    failure: Shared<Option<InputError>>,
    label: String,
}

impl TaskOrder for ExternalOrder {
    fn rank(
        &mut self,
        view: &View<'_>,
        this_cpu: CpuId,
        busiest: CpuId,
        candidates: &[Pid],
        ranks: &mut Vec<i64>,
    ) -> bool {
        if self.failure.lock().expect("not poisoned").is_some() {
            return false;
        }
        ranks.clear();
        let asked = self
            .callbacks
            .lock()
            .expect("not poisoned")
            .rank(view, this_cpu, busiest, candidates, ranks);
        let what = match asked {
            Err(f) => failure_text(f),
            Ok(()) if ranks.len() == candidates.len() => return true,
            Ok(()) => format!(
                "{} ranks for {} tasks (pids {:?}): one integer per task",
                ranks.len(),
                candidates.len(),
                candidates
            ),
        };
        keep_failure(
            &self.failure,
            &self.label,
            view,
            "rank",
            Some(this_cpu),
            what,
        );
        false
    }
}

impl Policy for External {
    fn name(&self) -> &'static str {
        self.base.name()
    }

    fn start(&mut self, view: &View<'_>) {
        self.base.start(view);
        let asked = self.callbacks().setup(view);
        if let Err(f) = asked {
            self.fail_callback(view, "setup", None, f);
        }
    }

    fn place_new(&mut self, view: &View<'_>, pid: Pid, spawn_cpu: CpuId) -> Option<CpuId> {
        match self.place(view, pid, spawn_cpu, Why::Fork) {
            Some(c) => Some(c),
            None => self.base.place_new(view, pid, spawn_cpu),
        }
    }

    fn place_wakeup(&mut self, view: &View<'_>, pid: Pid, prev_cpu: CpuId) -> Option<CpuId> {
        match self.place(view, pid, prev_cpu, Why::Wake) {
            Some(c) => Some(c),
            None => self.base.place_wakeup(view, pid, prev_cpu),
        }
    }

    fn first_touch_node(&mut self, view: &View<'_>, pid: Pid, cpu: CpuId) -> usize {
        self.base.first_touch_node(view, pid, cpu)
    }

    fn cpu_idle(&mut self, view: &View<'_>, cpu: CpuId) -> Option<Attempt> {
        self.base.cpu_idle(view, cpu)
    }

    fn process_held(&mut self, view: &View<'_>, pid: Pid) -> Option<Attempt> {
        self.base.process_held(view, pid)
    }

    fn next_periodic_ns(&self, view: &View<'_>, cpu: CpuId) -> Option<u64> {
        if !self.own_cpu_balancing() {
            return self.base.next_periodic_ns(view, cpu);
        }
        (0..self.last_ns[cpu].len())
            .filter(|&l| view.domains.load_balances(&view.domains.cpus[cpu][l]))
            .map(|l| self.last_ns[cpu][l] + Self::interval_ns(view, cpu, l))
            .min()
            .map(|t| t.max(view.now + 1))
    }

    fn due_levels(&self, view: &View<'_>, cpu: CpuId) -> u64 {
        if !self.own_cpu_balancing() {
            return self.base.due_levels(view, cpu);
        }
        u64::MAX
    }

    fn quiet_periodic(&mut self, view: &View<'_>, cpu: CpuId, quiet: &mut Quiet) -> bool {
        if self.hooks.balance_cpu.is_some() {
            // Timers of its own: the engine asks each level (cheap: gated here).
            return false;
        }
        self.base.quiet_periodic(view, cpu, quiet)
    }

    fn balance(
        &mut self,
        view: &View<'_>,
        cpu: CpuId,
        level: usize,
        kind: BalanceKind,
    ) -> Option<Attempt> {
        let Some(gate) = self.hooks.balance_cpu else {
            return self.base.balance(view, cpu, level, kind);
        };
        if self.failed() {
            return None;
        }
        let l = &view.domains.cpus[cpu][level];
        if !view.domains.load_balances(l) {
            return None;
        }
        match kind {
            BalanceKind::Periodic => {
                if view.now < self.last_ns[cpu][level] + Self::interval_ns(view, cpu, level) {
                    return None;
                }
                self.last_ns[cpu][level] = view.now;
            }
            BalanceKind::NewIdle => {
                if l.params.flags & sd::BALANCE_NEWIDLE == 0 {
                    return None;
                }
            }
        }
        if !gate.open(view, cpu) {
            return None;
        }
        let mut out = std::mem::take(&mut self.decisions);
        out.clear();
        let asked = self
            .callbacks()
            .balance_cpu(view, cpu, level, kind, &mut out);
        self.decisions = out;
        if let Err(f) = asked {
            self.fail_callback(view, "balance_cpu", Some(cpu), f);
            return None;
        }
        self.check_moves(view, "balance_cpu", Some(cpu))
    }

    fn active_balance(
        &mut self,
        view: &View<'_>,
        busiest: CpuId,
        target: CpuId,
    ) -> Option<Attempt> {
        self.base.active_balance(view, busiest, target)
    }

    fn active_balance_latency_ns(&self) -> Option<u64> {
        self.base.active_balance_latency_ns()
    }

    fn timeslice_ns(&self) -> Option<u64> {
        self.base.timeslice_ns()
    }

    fn slice_tick_ns(&self) -> Option<u64> {
        self.base.slice_tick_ns()
    }

    fn tracks_pelt(&self) -> bool {
        self.base.tracks_pelt()
    }

    fn duty_cycle_half_life_ns(&self) -> Option<u64> {
        self.base.duty_cycle_half_life_ns()
    }

    fn timer_follows_running(&self) -> bool {
        self.base.timer_follows_running()
    }

    fn global_period_ns(&self) -> Option<u64> {
        self.hooks
            .period_ns
            .or_else(|| self.base.global_period_ns())
    }

    fn global_balance(&mut self, view: &View<'_>) -> Option<Attempt> {
        if self.hooks.period_ns.is_none() {
            return self.base.global_balance(view);
        }
        if self.failed() {
            return None;
        }
        let mut out = std::mem::take(&mut self.decisions);
        out.clear();
        let asked = self.callbacks().balance(view, &mut out);
        self.decisions = out;
        if let Err(f) = asked {
            self.fail_callback(view, "balance", None, f);
            return None;
        }
        self.check_moves(view, "balance", None)
    }

    fn global_charge_cpu(&self, view: &View<'_>) -> Option<CpuId> {
        if self.hooks.period_ns.is_some() {
            return None;
        }
        self.base.global_charge_cpu(view)
    }

    fn shared_queues(&self) -> usize {
        self.base.shared_queues()
    }

    fn enqueue(
        &mut self,
        view: &View<'_>,
        pid: Pid,
        cpu: CpuId,
        why: crate::interface::EnqueueKind,
    ) -> crate::interface::Enqueue {
        self.base.enqueue(view, pid, cpu, why)
    }

    fn dispatch(&mut self, view: &View<'_>, cpu: CpuId, order: &mut Vec<usize>) {
        self.base.dispatch(view, cpu, order);
    }

    fn tick(&mut self, view: &View<'_>, cpu: CpuId) -> Option<Attempt> {
        if self.hooks.balance_cpu.is_some() {
            return None;
        }
        self.base.tick(view, cpu)
    }

    fn kick(&mut self, view: &View<'_>, cpu: CpuId) -> Option<(CpuId, u64)> {
        if self.hooks.balance_cpu.is_some() {
            return None;
        }
        self.base.kick(view, cpu)
    }

    fn next_kicked(&mut self, view: &View<'_>, cpu: CpuId) -> Option<CpuId> {
        self.base.next_kicked(view, cpu)
    }

    fn affinity_cpu(&mut self, view: &View<'_>, pid: Pid) -> crate::interface::AffinityMove {
        self.base.affinity_cpu(view, pid)
    }

    fn extra_metrics(&self) -> Vec<(String, f64)> {
        let mut m = self.base.extra_metrics();
        if self.hooks.metrics && !self.failed() {
            let asked = self.callbacks().metrics();
            match asked {
                Ok(own) => m.extend(own),
                Err(f) => {
                    *self.metrics_failure.borrow_mut() = Some(InputError::new(
                        format!("policy {}", self.label),
                        format!("metrics at the end of the run: {}", failure_text(f)),
                    ));
                }
            }
        }
        m
    }

    fn failure(&mut self) -> Option<InputError> {
        if self.reported {
            return None;
        }
        let f = self
            .failure
            .lock()
            .expect("not poisoned")
            .clone()
            .or_else(|| self.metrics_failure.borrow().clone());
        self.reported = f.is_some();
        f
    }
}
