//! EQUI, equipartition (Tucker & Gupta's process control; Gupta, Tucker & Urushibara,
//! SIGMETRICS 1991, Koita et al.'s reference [1]), with Dist pages. The sources are not
//! available here; the rules follow the best-documented reading (reference §C,
//! docs/policies/home-cluster.md):
//! 1. At every process creation and end, each live process's allocation target is an equal
//!    share of the processors, never more than its maximum parallelism (the most threads it
//!    forks at once, as a process-control program declares it), the leftovers water-filled to
//!    the others; when processes outnumber processors the oldest get one each.
//! 2. A process below its target takes free processors (base priority), then processors of
//!    the process furthest above its target (an idle one first; a running thread is held
//!    again); at its target, its further threads wait for its own processors.
//! 3. A process keeps its idle processors (threads forking and ending do not reallocate), unless
//!    it holds more than its target: then the idle one is released.

use std::cmp::Reverse;
use std::collections::BTreeMap;

use super::{Alloc, Idle, Pages, Scheme};
use crate::cpuset::CpuSet;
use crate::interface::View;
use crate::machine::CpuId;

#[derive(Default)]
pub struct Equi {
    target: BTreeMap<usize, usize>,
}

/// Water-filling of `cpus` processors over processes with these maximum parallelisms (oldest
/// first): equal shares capped by each one's parallelism.
pub fn equipartition(cpus: usize, maxpar: &[usize]) -> Vec<usize> {
    let mut target = vec![0; maxpar.len()];
    let mut open: Vec<usize> = (0..maxpar.len()).collect();
    let mut left = cpus;
    while !open.is_empty() && left > 0 {
        let share = left / open.len();
        if share == 0 {
            for &i in open.iter().take(left) {
                target[i] += 1;
            }
            break;
        }
        let capped: Vec<usize> = open
            .iter()
            .copied()
            .filter(|&i| maxpar[i] - target[i] <= share)
            .collect();
        if capped.is_empty() {
            for &i in &open {
                target[i] += share;
            }
            left -= share * open.len();
            // The remainder, one each to the oldest.
            for &i in open.iter().take(left) {
                target[i] += 1;
            }
            break;
        }
        for &i in &capped {
            left -= maxpar[i] - target[i];
            target[i] = maxpar[i];
        }
        open.retain(|i| !capped.contains(i));
    }
    target
}

impl Equi {
    fn target(&self, tgid: usize) -> usize {
        self.target.get(&tgid).copied().unwrap_or(0)
    }
}

impl Scheme for Equi {
    fn name(&self) -> &'static str {
        "equi"
    }

    fn pages(&self) -> Pages {
        Pages::Dist
    }

    fn changed(&mut self, a: &Alloc, v: &View<'_>) {
        let live: Vec<usize> = a.procs.keys().copied().collect();
        let maxpar: Vec<usize> = live
            .iter()
            .map(|&t| v.group_parallelism(t).max(1))
            .collect();
        let shares = equipartition(a.node_of.len(), &maxpar);
        self.target = live.into_iter().zip(shares).collect();
    }

    fn grant(&self, a: &Alloc, _v: &View<'_>, tgid: usize, fits: Option<&CpuSet>) -> Option<CpuId> {
        // Its share counts the processors the waiting thread may run on (all of them unless
        // it has an affinity): a thread pinned off its process's processors is not starved.
        let usable = a.procs.get(&tgid).map_or(0, |p| match fits {
            None => p.held.len(),
            Some(m) => p.held.iter().filter(|&&c| m.contains(c)).count(),
        });
        if usable >= self.target(tgid) {
            return None;
        }
        if let Some(c) = a.base_priority_fit(tgid, &|c| a.free(c), fits) {
            return Some(c);
        }
        let victim = a
            .procs
            .iter()
            .map(|(&t, p)| (p.held.len() as i64 - self.target(t) as i64, t))
            .filter(|&(over, t)| over > 0 && t != tgid)
            .max_by_key(|&(over, t)| (over, Reverse(t)))?
            .1;
        let theirs = |c: CpuId| a.owner[c] == Some(victim);
        a.base_priority_fit(tgid, &|c| theirs(c) && !a.busy[c], fits)
            .or_else(|| a.base_priority_fit(tgid, &theirs, fits))
    }

    fn idle(&self, a: &Alloc, _v: &View<'_>, _cpu: CpuId, tgid: usize) -> Idle {
        if a.holds(tgid) > self.target(tgid) {
            Idle::Release
        } else {
            Idle::Hold
        }
    }
}
