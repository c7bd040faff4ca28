//! The memory model: where a thread group's pages are, and what that costs a thread.
//!
//! ```text
//!   group g: pages = [(node, amount)]   sparse: a group touches few nodes, machines may have many
//!   thread on node n:  L = Σ_k amount_k · distance(n, k) / 10  /  Σ_k amount_k
//! ```
//!
//! 1. First touch: each thread, when it first runs, adds its share (1 / threads of the group) to
//!    the node the policy names (by default its origin CPU's node).
//! 2. A page move takes a share of the whole group from one node to another (never more than the
//!    node holds).
//! 3. The remote factor `L` of a thread running on node `n` averages the SLIT distance to its
//!    group's pages (1.0 = all local; a group without pages is local).

use crate::machine::Machine;

/// The entry of `node` in a sparse list, created at `zero` if missing.
pub(crate) fn entry<T: Copy>(list: &mut Vec<(usize, T)>, node: usize, zero: T) -> &mut T {
    let at = match list.iter().position(|(n, _)| *n == node) {
        Some(at) => at,
        None => {
            list.push((node, zero));
            list.len() - 1
        }
    };
    &mut list[at].1
}

/// The pages of one thread group, as shares per node.
#[derive(Debug, Clone, Default)]
pub(crate) struct GroupMemory {
    pages: Vec<(usize, f64)>,
}

impl GroupMemory {
    /// `(node, share)` for the nodes holding any pages, in the order first touched.
    pub(crate) fn pages(&self) -> &[(usize, f64)] {
        &self.pages
    }

    /// A thread of a group of `threads` touches its pages on `node`.
    pub(crate) fn first_touch(&mut self, node: usize, threads: usize) {
        *entry(&mut self.pages, node, 0.0) += 1.0 / threads as f64;
    }

    /// Moves `share` of the group's pages from `from_node` to `to_node` (at most what it holds).
    pub(crate) fn migrate(&mut self, from_node: usize, to_node: usize, share: f64) {
        let from = entry(&mut self.pages, from_node, 0.0);
        let amount = share.min(*from).max(0.0);
        *from -= amount;
        *entry(&mut self.pages, to_node, 0.0) += amount;
    }

    /// Remote factor `L` of a thread running on `node`.
    pub(crate) fn remote_factor(&self, machine: &Machine, node: usize) -> f64 {
        let total: f64 = self.pages.iter().map(|(_, s)| s).sum();
        if total <= 0.0 {
            return 1.0;
        }
        self.pages
            .iter()
            .map(|&(k, s)| s * f64::from(machine.distance(node, k)) / 10.0)
            .sum::<f64>()
            / total
    }
}
