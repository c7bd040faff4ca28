//! LIM, cluster-limited two-level scheduling (Ohishi, Saisho & Fukuda, IEICE Trans. J80-D-I(1),
//! 1997; English version Systems and Computers in Japan 29(2), 1998), with Dist pages as Koita
//! et al. compare it. Only the abstract is available (reference §C): "Cluster-limited"
//! allocates a process's processors from one cluster; its options (idle-processor keep or
//! release, running- or waiting-process first) hardly change its results.
//!
//! Rules (docs/policies/home-cluster.md):
//! 1. A process holding processors gets more only in the cluster of the ones it holds [abstract].
//! 2. A process holding none takes a cluster by the base priority over all free processors
//!    (its earlier cluster first, else the cluster with the most free ones) [reconstruction].
//! 3. An idle processor is released (the idle-processor-release option) [reconstruction: the
//!    abstract finds the option immaterial for LIM].
//! 4. Freed processors go to processes holding none first (waiting-process-first), then in
//!    request order [reconstruction, as 3].

use super::{Alloc, Idle, Pages, Scheme};
use crate::cpuset::CpuSet;
use crate::interface::View;
use crate::machine::CpuId;

pub struct Limited;

impl Scheme for Limited {
    fn name(&self) -> &'static str {
        "lim"
    }

    fn pages(&self) -> Pages {
        Pages::Dist
    }

    fn grant(&self, a: &Alloc, _v: &View<'_>, tgid: usize, fits: Option<&CpuSet>) -> Option<CpuId> {
        let bound = a.procs.get(&tgid)?.held.first().map(|&c| a.node_of[c]);
        match bound {
            Some(k) => a.base_priority_fit(tgid, &|c| a.free(c) && a.node_of[c] == k, fits),
            None => a.base_priority_fit(tgid, &|c| a.free(c), fits),
        }
    }

    fn idle(&self, _a: &Alloc, _v: &View<'_>, _cpu: CpuId, _tgid: usize) -> Idle {
        Idle::Release
    }

    fn waiting_first(&self) -> bool {
        true
    }
}
