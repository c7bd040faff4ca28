//! DYN, McCann, Vaswani & Zahorjan's dynamic policy (ACM TOCS 11(2), 1993; Koita et al.'s
//! reference [3]), with Dist pages. Only the abstract is available ("reallocates processors
//! from one parallel job to another based on the currently realized parallelism"); the rules
//! follow the best-documented reading (reference §C, docs/policies/home-cluster.md):
//! 1. A process with a thread waiting for a processor takes: a free processor; else an idle
//!    processor of another process ("willing to yield"); else, if it holds fewer than its
//!    equal share (processors / live processes), a processor of the process holding the most
//!    above its equal share, whose thread is held again — only from a process holding at
//!    least two more than the requester (reconstruction: no processor ping-pong).
//! 2. A processor with nothing to run stays with its process, willing to yield.
//! 3. Waiting processes holding no processor are served first, then in request order.

use std::cmp::Reverse;

use super::{Alloc, Idle, Pages, Scheme};
use crate::cpuset::CpuSet;
use crate::interface::View;
use crate::machine::CpuId;

pub struct Dynamic;

impl Scheme for Dynamic {
    fn name(&self) -> &'static str {
        "dyn"
    }

    fn pages(&self) -> Pages {
        Pages::Dist
    }

    fn grant(&self, a: &Alloc, _v: &View<'_>, tgid: usize, fits: Option<&CpuSet>) -> Option<CpuId> {
        if let Some(c) = a.base_priority_fit(tgid, &|c| a.free(c), fits) {
            return Some(c);
        }
        let other = |c: CpuId| a.owner[c].is_some_and(|o| o != tgid);
        if let Some(c) = a.base_priority_fit(tgid, &|c| other(c) && !a.busy[c], fits) {
            return Some(c);
        }
        let share = a.node_of.len() as f64 / a.procs.len() as f64;
        let mine = a.holds(tgid);
        if mine as f64 >= share {
            return None;
        }
        let victim = a
            .procs
            .iter()
            .map(|(&t, p)| (p.held.len(), t))
            .filter(|&(n, t)| t != tgid && n as f64 > share && n >= mine + 2)
            .max_by_key(|&(n, t)| (n, Reverse(t)))?
            .1;
        a.base_priority_fit(tgid, &|c| a.owner[c] == Some(victim), fits)
    }

    fn idle(&self, _a: &Alloc, _v: &View<'_>, _cpu: CpuId, _tgid: usize) -> Idle {
        Idle::Hold
    }

    fn waiting_first(&self) -> bool {
        true
    }
}
