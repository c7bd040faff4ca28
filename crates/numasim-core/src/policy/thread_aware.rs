//! `thread-aware`: Chiang & Su's thread-aware selection (Applied Sciences 11(14):6486, 2021),
//! built on linux26: when balancing between nodes moves a thread, it takes the one
//! whose thread group has the least exclusive distribution over the nodes.
//!
//! ```text
//!   group g:  live(g, n) = live threads of g on node n (task_cpu; sleeping ones included)
//!             live(g)    = Σ_n live(g, n)          kept by the engine as threads move: O(1)
//!   pull from node s to node d, candidate t of group g, k = threads of g this pass moved:
//!             share(g) = (live(g, s) − k) / live(g)       lower = less exclusive = moves first
//!             ties:      live(g, d) + k                   higher = joins its siblings, first
//!             ties:      linux26's order (tail of the runqueue first)
//! ```
//!
//! 1. Everything linux26 decides is kept: when to balance, the busiest group and queue, the
//!    imbalance (how many tasks move), the cache-hot rule, `nr_balance_failed`, active balancing,
//!    fork and wake-up placement. Inside a node the kernel's tail-first order is unchanged.
//! 2. Between nodes, each task to move is chosen among the movable ones (not running, not
//!    cache-hot unless aggressive) by the lowest share of its group on the source node (the
//!    abstract: "the thread is selected for which its thread group has the least exclusive
//!    thread distribution, and thread members are distributed more evenly on nodes"), ties by
//!    most of its group already on the destination node (a decision), then linux26's order.
//! 3. Efficiency measures (the abstract: "several enhancements to eliminate superfluous
//!    evaluations for multithreaded processes"): a single-threaded process is not evaluated
//!    (its share is 1: it is wholly on the source node); each group is evaluated once per pick,
//!    from counts the engine keeps incrementally (O(1) per evaluation). Every evaluation is
//!    counted (`Attempt::evaluations`) and charged as balancing work.
//! 4. After a pick, the shares of the picked thread's group account for it (`k`), so a second
//!    thread of the same group is judged on the distribution the first move leaves.
//!
//! Open decisions (docs/policies/thread-aware.md): the counts include sleeping threads (the
//! kernel keeps `task_cpu` of a sleeping task; a thread at a barrier still lives on its node);
//! the share is of the group's live threads (completed threads do not count); the tie rule
//! is ours, the paper's own is not available here.

use crate::interface::{PolicyContext, View};
use crate::machine::CpuId;
use crate::workload::Pid;

use super::linux26::{Linux26, Selector};

/// The thread-aware selector.
#[derive(Debug, Default)]
pub struct ThreadAware;

/// A candidate's group on the source node: `(on source, live)` as a fraction, and how many of
/// its threads are on the destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Score {
    on_source: u64,
    live: u64,
    on_dest: u64,
}

impl Score {
    /// Whether `self` moves before `other`: lower share on the source, then more on the
    /// destination (fractions compared exactly).
    fn before(&self, other: &Score) -> bool {
        let a = self.on_source * other.live;
        let b = other.on_source * self.live;
        a < b || (a == b && self.on_dest > other.on_dest)
    }
}

impl Selector for ThreadAware {
    fn pick(
        &mut self,
        v: &View<'_>,
        from: CpuId,
        to: CpuId,
        movable: &[Pid],
        moved: &[Pid],
        evaluations: &mut u32,
    ) -> usize {
        let (s, d) = (v.machine.cpu_node(from), v.machine.cpu_node(to));
        // Groups evaluated in this pick (a runqueue holds few groups).
        let mut seen: Vec<(usize, Score)> = Vec::new();
        let mut best: Option<(usize, Score)> = None;
        for (i, &pid) in movable.iter().enumerate() {
            let tgid = v.proc(pid).tgid;
            let score = if v.group_threads(tgid) <= 1 {
                // Single-threaded: wholly on the source node; no evaluation needed.
                Score {
                    on_source: 1,
                    live: 1,
                    on_dest: 0,
                }
            } else if let Some(&(_, sc)) = seen.iter().find(|(g, _)| *g == tgid) {
                sc
            } else {
                *evaluations += 1;
                let k = moved.iter().filter(|&&p| v.proc(p).tgid == tgid).count() as u64;
                let (on_s, live) = v.group_live_on_node(tgid, s);
                let (on_d, _) = v.group_live_on_node(tgid, d);
                let sc = Score {
                    on_source: u64::from(on_s).saturating_sub(k),
                    live: u64::from(live).max(1),
                    on_dest: u64::from(on_d) + k,
                };
                seen.push((tgid, sc));
                sc
            };
            if best.is_none_or(|(_, b)| score.before(&b)) {
                best = Some((i, score));
            }
        }
        best.map_or(0, |(i, _)| i)
    }
}

/// linux26 with thread-aware selection between nodes.
pub fn new(ctx: &PolicyContext<'_>) -> Linux26 {
    Linux26::new(ctx).with_selector("thread-aware", Box::new(ThreadAware))
}
