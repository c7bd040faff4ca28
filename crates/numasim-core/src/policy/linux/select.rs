//! `linux:select=…`: which task a pull between nodes takes inside `detach_tasks` — the kernel's
//! order, or the thread-aware or memory-aware selection of Chiang et al. (the place where their
//! modified kernel chooses the thread to migrate).
//!
//! ```text
//!   sched_balance_rq → detach_tasks(env)         src node = dst node, or select=kernel:
//!                        │                         the kernel's walk, unchanged
//!                        └ src node ≠ dst node, select=thread-aware | memory-aware:
//!       1. walk cfs_tasks from the tail, at most loop_max looked at:
//!          can_migrate_task (affinity, migrate_degrades_locality, task_hot) → movable
//!       2. while the kernel would go on detaching:
//!          eligible = movable tasks the migration type's test lets through
//!          pick     = the selector's choice among eligible (thread_aware.rs, memory_aware.rs)
//!          imbalance, src_nr as the kernel updates them; newly idle stops at one
//! ```
//!
//! 1. Everything else is `linux`'s: when and where it balances, the busiest group and runqueue,
//!    the migration type and imbalance, `can_migrate_task` before the selection (NUMA
//!    balancing's `migrate_degrades_locality` included), failures and active balancing, fork
//!    and wake-up placement, NUMA balancing itself.
//! 2. The kernel takes the first task of its walk that passes its tests; the selection takes
//!    the selector's pick among all of them, so it looks at every task up to `loop_max` before
//!    moving any (the kernel stops at the imbalance). The kernel's next pick would be the
//!    first eligible task in the walk's order: the selectors break their ties by that order,
//!    so a runqueue with nothing to choose between moves what the kernel moves.
//! 3. The selectors are the linux26 ones (`policy::thread_aware`, `policy::memory_aware`),
//!    unchanged: their evaluations are counted in `Attempt::evaluations` and charged
//!    `cost_per_evaluation_ns` each, in the pass's cost (`Linux::cost_of`: newly-idle gating
//!    and `SD_SERIALIZE` see it) and by the engine.
//! 4. Active balancing (`detach_one_task`, from the stopper) keeps the kernel's order: it is not
//!    `detach_tasks`, and takes the first task that may run on the target, hot or not.
//!
//! Statistics ([`SelectStats`], the run's policy metrics): selection passes, picks, picks
//! with a choice between thread groups, picks that differ from the kernel's, evaluations.

use crate::error::InputError;
use crate::interface::{Pid, View};
use crate::machine::CpuId;
use crate::policy::linux26::Selector;
use crate::policy::memory_aware::MemoryAware;
use crate::policy::thread_aware::ThreadAware;

/// Which task a pull between nodes takes (`linux:select=…`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Select {
    /// The kernel's: the first that passes `detach_tasks`' tests, from the tail of `cfs_tasks`.
    #[default]
    Kernel,
    /// Chiang & Su's thread-aware selection.
    ThreadAware,
    /// Chiang et al.'s memory-aware selection.
    MemoryAware,
}

impl Select {
    /// The option's words.
    pub const CHOICES: [(&'static str, Select); 3] = [
        ("kernel", Select::Kernel),
        ("thread-aware", Select::ThreadAware),
        ("memory-aware", Select::MemoryAware),
    ];

    /// `select=WORD`.
    pub fn parse(origin: &str, value: &str) -> Result<Self, InputError> {
        crate::policy::option_choice(origin, "linux", "select", value, &Self::CHOICES)
    }

    /// The index in `eligible` (never empty, in the walk's order) of the task to take next;
    /// `moved`: the tasks this pass took before, in order.
    pub fn pick(
        self,
        v: &View<'_>,
        from: CpuId,
        to: CpuId,
        eligible: &[Pid],
        moved: &[Pid],
        evaluations: &mut u32,
    ) -> usize {
        match self {
            Select::Kernel => 0,
            Select::ThreadAware => ThreadAware.pick(v, from, to, eligible, moved, evaluations),
            Select::MemoryAware => MemoryAware.pick(v, from, to, eligible, moved, evaluations),
        }
    }
}

/// What the selection did over a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SelectStats {
    /// `detach_tasks` passes between nodes (with or without anything to move).
    pub passes: u64,
    /// Tasks the selection moved.
    pub picks: u64,
    /// Picks whose eligible tasks belonged to two thread groups or more.
    pub picks_with_choice: u64,
    /// Picks of another task than the kernel's (the first eligible one).
    pub picks_changed: u64,
    /// Candidate evaluations of the picks.
    pub evaluations: u64,
}

impl SelectStats {
    /// One pick: `at` of `eligible`, after `evaluations`.
    pub fn count(&mut self, v: &View<'_>, eligible: &[Pid], at: usize, evaluations: u32) {
        self.picks += 1;
        let first = v.proc(eligible[0]).tgid;
        if eligible.iter().any(|&p| v.proc(p).tgid != first) {
            self.picks_with_choice += 1;
        }
        if at != 0 {
            self.picks_changed += 1;
        }
        self.evaluations += u64::from(evaluations);
    }

    /// The run's policy metrics.
    pub fn metrics(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("select_passes", self.passes as f64),
            ("select_picks", self.picks as f64),
            ("select_picks_with_choice", self.picks_with_choice as f64),
            ("select_picks_changed", self.picks_changed as f64),
            ("select_evaluations", self.evaluations as f64),
        ]
    }
}
