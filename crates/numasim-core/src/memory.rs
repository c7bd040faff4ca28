//! The memory model: where a thread group's pages are, and what that costs a thread.
//!
//! ```text
//!   unsized group g (single-threaded processes, `threads=T` workloads):
//!       pages = [(node, share)]        shares of the whole group; each thread touches 1/threads
//!   sized group (an application with a footprint, crate::apps):
//!       shared  = [(node, MB)]         footprint · shared, placed by the group's first thread
//!       private = per thread [(node, MB)]   footprint · (1 − shared) / threads each
//!   thread t on node n:  L = Σ_k amount_k · cost(n, k)  /  Σ_k amount_k
//!       cost(n, n) = distance(n, n) / 10 (= 1),  cost(n, k) = R · distance(n, k) / 10 for k ≠ n
//!       over the group's pages (unsized) or over t's private part and the shared part (sized)
//!       R: the `remote` assumption (1 = the SLIT distance itself, crate::assumptions::Remote)
//! ```
//!
//! Lists are sparse: a group touches few nodes, machines may have many.
//!
//! 1. First touch: a thread, when it first runs, puts its pages on the node the policy names (by
//!    default its origin CPU's node). Sized: its private part; the group's first thread (the main
//!    thread, which in the PARSEC programs reads the input) also the shared part.
//! 2. A page move takes a share of the whole group from one node to another (never more than the
//!    node holds); sized: in proportion from every part on that node.
//! 3. The remote factor `L` of a thread averages the SLIT distance to the pages it uses, weighted
//!    by amount (1.0 = all local; a thread with no pages placed yet is local), each remote
//!    distance times R (with R = 1 the sum is computed as before, bit for bit). Sized groups weight
//!    by MB: accesses are spread evenly over the bytes a thread uses (a documented modelling
//!    decision: docs/apps.md).
//! 4. Hinting faults (automatic NUMA balancing, docs/policies/linux-numa.md): a scan pass marks
//!    the same fraction of every part on every node; [`marked_pages`] gives the marked pages a
//!    thread takes faults on, its own and its share of the group's shared ones. The fault
//!    statistics and what they decide are the `linux` policy's (`policy/linux/numa.rs`).

use smallvec::SmallVec;

use crate::machine::Machine;

/// A sparse `(node, amount)` list. Most hold one node (a process's pages, the node it is
/// runnable on), so that one is kept inline: no allocation for each of a million processes.
pub(crate) type NodeList<T> = SmallVec<[(usize, T); 1]>;

/// The entry of `node` in a sparse list, created at `zero` if missing.
pub(crate) fn entry<T: Copy>(list: &mut NodeList<T>, node: usize, zero: T) -> &mut T {
    let at = match list.iter().position(|(n, _)| *n == node) {
        Some(at) => at,
        None => {
            list.push((node, zero));
            list.len() - 1
        }
    };
    &mut list[at].1
}

/// Amounts per node, sparse: `(node, amount)`.
pub(crate) type NodeAmounts = [(usize, f64)];

/// The pages of one thread group.
#[derive(Debug, Clone, Default)]
pub(crate) struct GroupMemory {
    /// Per node: shares of the whole group (unsized), or MB of all its pages (sized).
    pages: NodeList<f64>,
    sized: Option<Sized>,
}

/// Pages with sizes: a shared part every thread uses, placed by the group's first thread, and
/// a private part per thread, placed by that thread.
#[derive(Debug, Clone)]
struct Sized {
    shared_mb: f64,
    private_mb: f64,
    shared: NodeList<f64>,
    private: Vec<NodeList<f64>>,
}

/// `Σ amount · distance(node, k) / 10`, `Σ amount` and the amount on `node` over a sparse list.
fn weighted(machine: &Machine, node: usize, list: &[(usize, f64)]) -> (f64, f64, f64) {
    list.iter().fold((0.0, 0.0, 0.0), |(d, t, local), &(k, a)| {
        let here = if k == node { a } else { 0.0 };
        (
            d + a * f64::from(machine.distance(node, k)) / 10.0,
            t + a,
            local + here,
        )
    })
}

/// Takes `fraction` of every amount on `from` in `list` to `to`; returns what moved.
fn take(list: &mut NodeList<f64>, from: usize, to: usize, fraction: f64) -> f64 {
    let amount = match list.iter_mut().find(|(n, _)| *n == from) {
        Some((_, a)) => {
            let moved = *a * fraction;
            *a -= moved;
            moved
        }
        None => 0.0,
    };
    if amount > 0.0 {
        *entry(list, to, 0.0) += amount;
    }
    amount
}

impl GroupMemory {
    /// Memory with sizes for a group of `threads` threads: `footprint_mb`, of which `shared`
    /// is used by all threads and the rest split evenly into private parts.
    pub(crate) fn sized(threads: usize, footprint_mb: f64, shared: f64) -> Self {
        Self {
            pages: NodeList::new(),
            sized: Some(Sized {
                shared_mb: footprint_mb * shared,
                private_mb: footprint_mb * (1.0 - shared) / threads.max(1) as f64,
                shared: NodeList::new(),
                private: vec![NodeList::new(); threads],
            }),
        }
    }

    /// `(node, amount)` for the nodes holding any pages, in the order first touched: shares of
    /// the group (unsized) or MB (sized).
    pub(crate) fn pages(&self) -> &[(usize, f64)] {
        &self.pages
    }

    /// MB placed so far for thread `t` (its private part and its share of the shared part), and
    /// MB it shares with the other threads of its group (unsized groups have no sizes: 0, 0).
    pub(crate) fn resident_mb(&self, t: usize) -> (f64, f64) {
        match &self.sized {
            None => (0.0, 0.0),
            Some(s) => {
                let shared: f64 = s.shared.iter().map(|(_, a)| a).sum();
                let own: f64 = s.private[t].iter().map(|(_, a)| a).sum();
                let threads = s.private.len();
                let with_others = if threads > 1 { shared } else { 0.0 };
                (own + shared / threads.max(1) as f64, with_others)
            }
        }
    }

    /// MB per node of thread `t`'s private part and of the group's shared part, or `None` for
    /// a group without sizes.
    pub(crate) fn parts(&self, t: usize) -> Option<(&[(usize, f64)], &NodeAmounts)> {
        self.sized
            .as_ref()
            .map(|s| (s.private[t].as_slice(), s.shared.as_slice()))
    }

    /// Thread `t` of a group of `threads` first runs: it touches its pages on `node` (sized:
    /// its private part, and the shared part if it is the group's first thread).
    pub(crate) fn first_touch(&mut self, t: usize, node: usize, threads: usize) {
        let Some(s) = &mut self.sized else {
            *entry(&mut self.pages, node, 0.0) += 1.0 / threads as f64;
            return;
        };
        let mut placed = 0.0;
        if s.private_mb > 0.0 {
            *entry(&mut s.private[t], node, 0.0) += s.private_mb;
            placed += s.private_mb;
        }
        if t == 0 && s.shared_mb > 0.0 {
            *entry(&mut s.shared, node, 0.0) += s.shared_mb;
            placed += s.shared_mb;
        }
        if placed > 0.0 {
            *entry(&mut self.pages, node, 0.0) += placed;
        }
    }

    /// Moves `share` of the group's pages from `from_node` to `to_node` (at most what it holds).
    /// Sized: `share` of the whole footprint, taken in proportion from every part on `from_node`.
    pub(crate) fn migrate(&mut self, from_node: usize, to_node: usize, share: f64) {
        let Some(s) = &mut self.sized else {
            let from = entry(&mut self.pages, from_node, 0.0);
            let amount = share.min(*from).max(0.0);
            *from -= amount;
            *entry(&mut self.pages, to_node, 0.0) += amount;
            return;
        };
        let total: f64 = self.pages.iter().map(|(_, a)| a).sum();
        let on_from = self
            .pages
            .iter()
            .find(|(n, _)| *n == from_node)
            .map_or(0.0, |(_, a)| *a);
        if on_from <= 0.0 || share <= 0.0 {
            return;
        }
        let fraction = (share * total / on_from).min(1.0);
        let mut moved = take(&mut s.shared, from_node, to_node, fraction);
        for p in &mut s.private {
            moved += take(p, from_node, to_node, fraction);
        }
        *entry(&mut self.pages, from_node, 0.0) -= moved;
        *entry(&mut self.pages, to_node, 0.0) += moved;
    }

    /// Remote factor `L` of thread `t` running on `node`, and the share of its accesses that
    /// go to other nodes: over the group's pages (unsized), or over its private part and the
    /// shared part, weighted by MB (sized); every remote access costs `remote_scale` times its
    /// SLIT distance / 10 (module doc, step 3).
    pub(crate) fn remote_factor(
        &self,
        machine: &Machine,
        node: usize,
        t: usize,
        remote_scale: f64,
    ) -> (f64, f64) {
        let (mut d, total, local) = match &self.sized {
            None => weighted(machine, node, &self.pages),
            Some(s) => {
                let (d1, t1, l1) = weighted(machine, node, &s.private[t]);
                let (d2, t2, l2) = weighted(machine, node, &s.shared);
                (d1 + d2, t1 + t2, l1 + l2)
            }
        };
        if total <= 0.0 {
            return (1.0, 0.0);
        }
        if remote_scale != 1.0 {
            // The remote part of the sum (all of it but the local amount's own distance), R
            // times; R = 1 leaves the sum as it was computed, so results stay bit for bit.
            let own = local * f64::from(machine.distance(node, node)) / 10.0;
            d = own + remote_scale * (d - own);
        }
        (d / total, ((total - local) / total).max(0.0))
    }
}

/// 4 KiB pages per MB (the hinting-fault model counts pages).
pub const PAGES_PER_MB: f64 = 256.0;

/// The pages of a thread that a NUMA-balancing scan pass marked, per node, split into the ones
/// only it uses and its share of the ones its group shares (what it takes hinting faults on:
/// the linux policy's automatic NUMA balancing, docs/policies/linux-numa.md), and the group's
/// footprint in MB. A pass marks the same `fraction` of every part on every node.
///
/// * sized groups (`parts` = its private part and the group's shared part, MB): private pages
///   are its own; the shared part is split evenly over the `threads` (one thread: all its own);
/// * unsized groups (`parts` = `None`): the group's page shares (`shares`) of an assumed
///   `footprint_mb`, split evenly over the threads, private when there is one thread, shared
///   otherwise.
pub fn marked_pages(
    parts: Option<ThreadParts<'_>>,
    shares: &[(usize, f64)],
    threads: usize,
    footprint_mb: f64,
    fraction: f64,
    pages_per_mb: f64,
) -> MarkedPages {
    let mut private: Vec<(usize, f64)> = Vec::new();
    let mut shared: Vec<(usize, f64)> = Vec::new();
    let total_mb: f64;
    match parts {
        Some((own, common)) => {
            total_mb = shares.iter().map(|(_, a)| a).sum();
            private.extend(own.iter().map(|&(k, mb)| (k, mb * pages_per_mb * fraction)));
            let to = if threads > 1 {
                &mut shared
            } else {
                &mut private
            };
            let per = if threads > 1 { threads as f64 } else { 1.0 };
            for &(k, mb) in common {
                to.push((k, mb * pages_per_mb * fraction / per));
            }
        }
        None => {
            total_mb = footprint_mb;
            let to = if threads > 1 {
                &mut shared
            } else {
                &mut private
            };
            let per = threads as f64;
            for &(k, s) in shares {
                let pages = s * footprint_mb * pages_per_mb * fraction;
                to.push((k, if threads > 1 { pages / per } else { pages }));
            }
        }
    }
    MarkedPages {
        private,
        shared,
        total_mb,
    }
}

/// A thread's private part and its group's shared part, MB per node (a sized group).
pub type ThreadParts<'a> = (&'a [(usize, f64)], &'a [(usize, f64)]);

/// What [`marked_pages`] gives: marked pages per node only the thread uses, its share of the
/// shared ones, and the group's footprint (MB).
#[derive(Debug, Clone, PartialEq)]
pub struct MarkedPages {
    pub private: Vec<(usize, f64)>,
    pub shared: Vec<(usize, f64)>,
    pub total_mb: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marked_pages_split_private_and_shared_parts() {
        // Sized, 4 threads: 10 MB private on node 1, 40 MB shared on node 0, a quarter marked:
        // private 10 · 256 / 4 = 640 pages; its share of the shared 40 · 256 / 4 / 4 = 640.
        let (own, common) = ([(1, 10.0)], [(0, 40.0)]);
        let m = marked_pages(
            Some((&own, &common)),
            &[(0, 80.0), (1, 40.0)],
            4,
            256.0,
            0.25,
            256.0,
        );
        assert_eq!(m.private, vec![(1, 640.0)]);
        assert_eq!(m.shared, vec![(0, 640.0)]);
        assert_eq!(m.total_mb, 120.0);
        // One thread: the shared part is its own.
        let m = marked_pages(Some((&own, &common)), &[], 1, 256.0, 0.25, 256.0);
        assert_eq!(
            (m.private, m.shared),
            (vec![(1, 640.0), (0, 2560.0)], vec![])
        );
        // Unsized: shares of the assumed 256 MB footprint, all marked; two threads share them.
        let m = marked_pages(None, &[(2, 0.5), (3, 0.5)], 2, 256.0, 1.0, 256.0);
        assert_eq!(m.private, vec![]);
        assert_eq!(m.shared, vec![(2, 16384.0), (3, 16384.0)]);
        assert_eq!(m.total_mb, 256.0);
    }
}
