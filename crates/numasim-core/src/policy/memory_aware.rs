//! `memory-aware`: the memory-aware selection of Chiang et al. (COMPSAC 2018; SPE 2019, "kMLB";
//! cited by Mehta & Kanungo), built on linux26: between nodes, move the thread with
//! the fewest resident pages, then the one sharing the least memory with others.
//!
//! ```text
//!   candidate t:  resident(t) = MB of its private part + its share of its group's shared part
//!                 shared(t)   = MB of its group's shared part (0 for a single thread)
//!   pick: lowest resident, then lowest shared, then linux26's order (tail first)
//! ```
//!
//! 1. Everything linux26 decides is kept (when, from where, how many, cache-hot rule, placement);
//!    inside a node the kernel's tail-first order is unchanged.
//! 2. Between nodes, each task to move is the movable one that "uses the least amount of page
//!    frames … and/or shares the least amount of memory with other processes" (the COMPSAC 2018
//!    abstract): fewest resident MB first, then least shared MB.
//! 3. Resident pages are what the thread has placed so far (crate::memory): a thread that never
//!    ran has none. The kernel tracks "the amount of memory used by each thread on each node"
//!    (SPE 2019 abstract); numasim's memory model gives each thread its private part and an
//!    equal share of the shared part.
//! 4. Every candidate is evaluated at each pick (no shortcut is described for this policy);
//!    evaluations are counted and charged as balancing work.
//!
//! Known limit: processes without sizes (single-threaded workloads, `threads=T` groups) have
//! no resident pages in numasim (0 MB): among them the order is linux26's; mixed with sized
//! applications they move first.

use crate::interface::{PolicyContext, View};
use crate::machine::CpuId;
use crate::workload::Pid;

use super::linux26::{Linux26, Selector};

/// The memory-aware selector.
#[derive(Debug, Default)]
pub struct MemoryAware;

impl Selector for MemoryAware {
    fn pick(
        &mut self,
        v: &View<'_>,
        _from: CpuId,
        _to: CpuId,
        movable: &[Pid],
        _moved: &[Pid],
        evaluations: &mut u32,
    ) -> usize {
        *evaluations += movable.len() as u32;
        let mut best = 0;
        let mut best_key = v.resident_mb(movable[0]);
        for (i, &pid) in movable.iter().enumerate().skip(1) {
            let key = v.resident_mb(pid);
            let lower = key
                .0
                .total_cmp(&best_key.0)
                .then(key.1.total_cmp(&best_key.1));
            if lower.is_lt() {
                best = i;
                best_key = key;
            }
        }
        best
    }
}

/// linux26 with memory-aware selection between nodes.
pub fn new(ctx: &PolicyContext<'_>) -> Linux26 {
    Linux26::new(ctx).with_selector("memory-aware", Box::new(MemoryAware))
}
