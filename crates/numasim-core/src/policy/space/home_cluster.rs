//! Koita, Katayama, Saisho & Fukuda's processor schemes (§2.2), each with Dist or Con pages:
//! the ten policies FR/FH/FP/HB/HS × Dist/Con.
//!
//! | scheme | allocation | an allocated processor with nothing to run |
//! |---|---|---|
//! | FR release | base priority over free processors | released |
//! | FH hold | same | kept until the process ends |
//! | FP partial-hold | same | kept inside the home cluster, released outside |
//! | HB basic-home | free home processors, then base priority excluding other home clusters | as FP (reconstruction) |
//! | HS slide | as HB | home: a thread of the owner running outside moves onto it, else kept; outside: released |
//!
//! Every process reserves a home cluster at creation when one is unreserved (the cluster-free
//! schemes need it for Con pages and FP's deallocation; they ignore it when allocating: "the
//! cluster-free schemes do not take into account the notion of the home-cluster in
//! allocation").

use super::{Alloc, Idle, Pages, Scheme};
use crate::cpuset::CpuSet;
use crate::interface::View;
use crate::machine::CpuId;

/// The five processor schemes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Koita {
    Release,
    Hold,
    PartialHold,
    BasicHome,
    Slide,
}

/// One of the ten policies.
#[derive(Debug, Clone, Copy)]
pub struct HomeCluster {
    pub scheme: Koita,
    pub pages: Pages,
}

/// The five schemes in the order of the names ([`super::NAMES`]: the Dist five, then Con).
const SCHEMES: [Koita; 5] = [
    Koita::Release,
    Koita::Hold,
    Koita::PartialHold,
    Koita::BasicHome,
    Koita::Slide,
];

impl HomeCluster {
    /// The policy called `name` (one of the first ten [`super::NAMES`]).
    pub fn by_name(name: &str) -> Option<Self> {
        let at = super::NAMES[..10].iter().position(|&n| n == name)?;
        let pages = if at < 5 { Pages::Dist } else { Pages::Con };
        Some(Self {
            scheme: SCHEMES[at % 5],
            pages,
        })
    }

    fn home_scheme(&self) -> bool {
        matches!(self.scheme, Koita::BasicHome | Koita::Slide)
    }
}

impl Scheme for HomeCluster {
    fn name(&self) -> &'static str {
        let at = SCHEMES
            .iter()
            .position(|&s| s == self.scheme)
            .expect("a scheme");
        super::NAMES[at + if self.pages == Pages::Dist { 0 } else { 5 }]
    }

    fn pages(&self) -> Pages {
        self.pages
    }

    fn homes(&self) -> bool {
        true
    }

    fn grant(&self, a: &Alloc, _v: &View<'_>, tgid: usize, fits: Option<&CpuSet>) -> Option<CpuId> {
        if !self.home_scheme() {
            return a.base_priority_fit(tgid, &|c| a.free(c), fits);
        }
        // "first free processors in the home-cluster of the process and second free processors
        // in the base priority except ones belonging to other home-clusters"
        let home = a.procs.get(&tgid)?.home;
        if let Some(c) = home.and_then(|h| {
            a.clusters[h]
                .iter()
                .copied()
                .find(|&c| a.free(c) && fits.is_none_or(|m| m.contains(c)))
        }) {
            return Some(c);
        }
        let open = |c: CpuId| a.free(c) && a.home_of[a.node_of[c]].is_none_or(|o| o == tgid);
        a.base_priority_fit(tgid, &open, fits)
    }

    fn idle(&self, a: &Alloc, v: &View<'_>, cpu: CpuId, tgid: usize) -> Idle {
        let p = &a.procs[&tgid];
        let in_home = p.home == Some(a.node_of[cpu]);
        match self.scheme {
            Koita::Release => Idle::Release,
            Koita::Hold => Idle::Hold,
            Koita::PartialHold | Koita::BasicHome => {
                if in_home {
                    Idle::Hold
                } else {
                    Idle::Release
                }
            }
            Koita::Slide if in_home => p
                .held
                .iter()
                .filter(|&&c| Some(a.node_of[c]) != p.home)
                .find_map(|&c| v.current(c).filter(|&t| v.may_run(t, cpu)))
                .map_or(Idle::Hold, Idle::Slide),
            Koita::Slide => Idle::Release,
        }
    }
}
