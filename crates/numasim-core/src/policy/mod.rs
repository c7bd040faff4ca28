//! Balancing policies: one module per policy, behind one trait. The engine never names a
//! policy; a policy never touches engine internals — it reads a [`View`] and returns decisions.
//!
//! ```text
//!   engine ── place_new(view, pid, spawn_cpu) ──────────────► Some(cpu) | None = hold it
//!          ── place_wakeup(view, pid, prev_cpu) ────────────► Some(cpu) | None = hold it
//!          ── first_touch_node(view, pid, cpu) ─────────────► node       (page placement)
//!          ── cpu_idle(view, cpu) ──────────────────────────► Attempt    (before newly-idle)
//!          ── next_periodic_ns(view, cpu) ──────────────────► time       (timer on each CPU)
//!          ── balance(view, cpu, level, Periodic|NewIdle) ──► Attempt    (pulls/pushes/exchanges)
//!          ── active_balance(view, busiest, target, level) ─► Attempt
//!          ── global_balance(view) every global_period_ns ──► Attempt    (machine-wide, scx-style)
//!   engine checks every decision, applies it, charges its cost (SPEC §4) and records it.
//! ```
//!
//! Design for every policy of SPEC §6: an [`Attempt`] carries moves of any kind (pull, push,
//! exchange halves, idle, active, placement) from any CPU to any CPU, so sender-initiated pushes
//! and exchanges need no engine change; the view exposes speeds, per-process origin, kind,
//! thread group and page shares, per-group per-node thread counts and each process's CPU time so
//! far (load history); [`PageMove`] migrates pages and `first_touch_node` places them; space
//! sharing (§6.6) holds a process (placement `None`) until an attempt's `places` gives it a
//! processor, typically from `cpu_idle`; user-space balancers (§6.7) get `global_balance`.

pub mod capability_aware;
pub mod linux26;
pub mod origin_aware;

use crate::engine::View;
use crate::error::InputError;
use crate::machine::CpuId;

/// Index of a process in the workload (= its pid).
pub type Pid = usize;

/// Why balancing runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum BalanceKind {
    /// The CPU's periodic balancing timer for a level.
    Periodic,
    /// The CPU is about to go idle.
    NewIdle,
}

/// What kind of migration a move is (SPEC §7).
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
}

impl MigrationKind {
    /// Every kind, in report order.
    pub const ALL: [MigrationKind; 7] = [
        Self::Pull,
        Self::Push,
        Self::Exchange,
        Self::Idle,
        Self::Active,
        Self::Placement,
        Self::Wakeup,
    ];

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
        }
    }
}

/// Move a runnable (not running) process from one runqueue to another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Move {
    pub pid: Pid,
    pub from: CpuId,
    pub to: CpuId,
    pub kind: MigrationKind,
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
    /// Runqueues examined (charged per SPEC §4).
    pub rqs_examined: u32,
    /// Tasks examined.
    pub tasks_examined: u32,
    /// Extra runqueue locks taken beyond the balancing CPU's own (charged like a runqueue).
    pub locks: u32,
    /// Moves, applied in order.
    pub moves: Vec<Move>,
    /// Page migrations.
    pub pages: Vec<PageMove>,
    /// Processor for held processes (see [`Policy::place_new`]).
    pub places: Vec<(Pid, CpuId)>,
    /// Ask the engine to run `active_balance(busiest, target=this cpu)` right after.
    pub active_from: Option<CpuId>,
}

/// A balancing policy.
pub trait Policy: Send {
    /// Configuration name.
    fn name(&self) -> &'static str;

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
    fn cpu_idle(&mut self, _view: &View<'_>, _cpu: CpuId) -> Option<Attempt> {
        None
    }

    /// When `cpu` next wants its periodic balancing (absolute ns), given its current state.
    fn next_periodic_ns(&self, view: &View<'_>, cpu: CpuId) -> Option<u64>;

    /// One balancing attempt on `cpu` at `level`; `None` when the policy does not balance there
    /// (or, for periodic balancing, when that level is not due). The engine asks for every level,
    /// lowest first, applying each attempt before asking for the next.
    fn balance(
        &mut self,
        view: &View<'_>,
        cpu: CpuId,
        level: usize,
        kind: BalanceKind,
    ) -> Option<Attempt>;

    /// Active balancing: `busiest`'s migration thread pushes to `target`.
    fn active_balance(
        &mut self,
        _view: &View<'_>,
        _busiest: CpuId,
        _target: CpuId,
    ) -> Option<Attempt> {
        None
    }

    /// Period of a machine-wide balancing callback (user-space balancers), if any.
    fn global_period_ns(&self) -> Option<u64> {
        None
    }

    /// The machine-wide callback (its work is counted, not charged to a CPU: a user-space
    /// balancer runs beside the workload).
    fn global_balance(&mut self, _view: &View<'_>) -> Option<Attempt> {
        None
    }
}

/// A registered policy: name, one-line description, reference.
pub struct PolicyInfo {
    pub name: &'static str,
    pub description: &'static str,
    pub reference: &'static str,
    /// Domain builder used when none is given.
    pub default_domains: &'static str,
}

/// Every policy, by name.
pub const POLICIES: [PolicyInfo; 3] = [
    PolicyInfo {
        name: "linux26",
        description: "Linux 2.6.18 O(1) scheduler and sched-domain load balancer",
        reference: "Linux 2.6.18 kernel/sched.c (load_balance, find_busiest_group, move_tasks, ...)",
        default_domains: "two-level",
    },
    PolicyInfo {
        name: "origin-aware",
        description: "linux26 with origin-preferring pulls (RI-LB) alternating with pushes and \
                      exchanges toward each process's origin (SI-LB); options v1, v2, min-load, nearest",
        reference: "Mehta & Kanungo, Origin Aware Dynamic Load Balancing Algorithm for NUMA \
                    Multiprocessor Systems, IJETT 73(2), 2025",
        default_domains: "multilevel",
    },
    PolicyInfo {
        name: "capability-aware",
        description: "speed-weighted loads on fast/slow cores: moves in proportion to speed, \
                      CPU-bound work to speed cores, free speed cores balance, threads on one \
                      class; option place (machine, domain, node)",
        reference: "Mehta & Kanungo, capability-aware load balancing for asymmetric multicore \
                    (AMC) systems",
        default_domains: "two-level",
    },
];

/// A policy setting: `name` or `name:key=value,key=value` (options of that policy).
fn split_spec(spec: &str) -> (&str, Vec<(&str, &str)>) {
    let (name, opts) = spec.split_once(':').unwrap_or((spec, ""));
    let pairs = opts
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (k.trim(), v.trim())
        })
        .collect();
    (name.trim(), pairs)
}

/// A parsed policy setting, ready to build.
enum Spec {
    Linux26,
    OriginAware(origin_aware::Options),
    CapabilityAware(capability_aware::PlaceScope),
}

fn parse(origin: &str, spec: &str) -> Result<Spec, InputError> {
    let (name, pairs) = split_spec(spec);
    // An option given twice (`origin-aware:v1=on,v1=off`) is refused, not last-one-wins.
    for (i, (key, _)) in pairs.iter().enumerate() {
        if pairs[..i].iter().any(|(k, _)| k == key) {
            return Err(InputError::new(
                origin,
                format!("policy option '{key}' is given twice"),
            ));
        }
    }
    let no_options = |name: &str| {
        if pairs.is_empty() {
            Ok(())
        } else {
            Err(InputError::new(
                origin,
                format!("policy '{name}' takes no options"),
            ))
        }
    };
    match name {
        "linux26" => no_options(name).map(|()| Spec::Linux26),
        "origin-aware" => origin_aware::Options::parse(origin, &pairs).map(Spec::OriginAware),
        "capability-aware" => {
            capability_aware::PlaceScope::parse(origin, &pairs).map(Spec::CapabilityAware)
        }
        _ => {
            let names: Vec<_> = POLICIES.iter().map(|p| p.name).collect();
            Err(InputError::new(
                origin,
                format!(
                    "unknown policy '{name}'; choose one of {}",
                    names.join(", ")
                ),
            ))
        }
    }
}

/// Checks a policy setting (`name[:options]`) without building it.
pub fn validate(origin: &str, spec: &str) -> Result<(), InputError> {
    parse(origin, spec).map(|_| ())
}

/// The registered name of a policy setting (`origin-aware:v2=off` → `origin-aware`).
pub fn base_name(spec: &str) -> &str {
    split_spec(spec).0
}

/// Builds a policy from its setting: `name` or `name:key=value,...`.
pub fn by_name(
    spec: &str,
    ctx: &crate::engine::PolicyContext<'_>,
) -> Result<Box<dyn Policy>, InputError> {
    Ok(match parse("--policy", spec)? {
        Spec::Linux26 => Box::new(linux26::Linux26::new(ctx)),
        Spec::OriginAware(o) => Box::new(origin_aware::OriginAware::new(ctx, o)),
        Spec::CapabilityAware(scope) => {
            Box::new(capability_aware::CapabilityAware::new(ctx, scope))
        }
    })
}
