//! `multilevel`: the scheduling domains of Corrêa, Zorzo & Scheer, "Operating system multilevel
//! load balancing" (ACM SAC 2006).
//!
//! ```text
//!   node 0 of mehta-m1 (distances 10, 20, …, 60):
//!   NUMA60  span = every node        groups = one per node at distance ≤ 60
//!   ...
//!   NUMA20  span = nodes {0,1,6,11}  groups = {0} {1} {6} {11} (one per node)
//!   CPU     span = cpus(0)           groups = one per CPU of node 0
//! ```
//!
//! 1. For each node N with CPUs, take the distinct distances d from N, increasing.
//! 2. d = 10: one level spanning N's CPUs, one group per CPU (in-node parameters).
//! 3. d > 10: one level whose groups are the nodes at distance ≤ d from N, each one group; its
//!    span is their union (node parameters).
//! 4. Replicate N's hierarchy to every CPU of N; groups start with the CPU's own group (CPU
//!    groups ascending from the CPU, node groups from N upwards, wrapping — as 2.6.18 orders them).
//! 5. Remove degenerate levels as 2.6.18 `cpu_attach_domain` does.
//!
//! Choices the paper leaves open: memory-only nodes give no group (they have no CPU to balance);
//! a distance reached only by memory-only nodes therefore adds a level equal to the one below,
//! which step 5 removes; so n MALs give n levels on machines without memory-only nodes.

use crate::cpuset::CpuSet;
use crate::machine::Machine;

use super::{node_set, nodes_wrapping_from, plain_groups, Era, Era26Params, Interner, Level};

/// Builds every CPU's multilevel hierarchy. The levels above the CPU level are the same for
/// every CPU of a node (step 4): they are built once per node and cloned (shared sets).
pub(crate) fn build(machine: &Machine, p: &Era26Params, shared: &mut Interner) -> Vec<Vec<Level>> {
    let mut per_node: Vec<Option<Vec<Option<Level>>>> = vec![None; machine.nodes()];
    (0..machine.cpus())
        .map(|cpu| {
            let node = machine.cpu_node(cpu);
            let levels = per_node[node].get_or_insert_with(|| node_levels(machine, p, node));
            let chain = levels
                .iter()
                .map(|level| match level {
                    Some(numa) => numa.clone(),
                    None => {
                        let span = node_set(machine, node);
                        let groups = plain_groups(
                            span.iter_wrap(cpu)
                                .map(|c| CpuSet::from_ids(machine.cpus(), [c])),
                        );
                        Level::new("CPU".into(), span, groups, p.in_node.clone())
                    }
                })
                .collect();
            shared.chain(cpu, Era::Linux26.attach(chain))
        })
        .collect()
}

/// One level per distinct distance from `node`, increasing: `None` for the node's own distance
/// (the CPU level, which differs per CPU), else the level of the nodes at that distance or less.
fn node_levels(machine: &Machine, p: &Era26Params, node: usize) -> Vec<Option<Level>> {
    let mut distances: Vec<u32> = (0..machine.nodes())
        .map(|k| machine.distance(node, k))
        .collect();
    distances.sort_unstable();
    distances.dedup();
    distances
        .iter()
        .map(|&d| {
            if d == machine.distance(node, node) {
                return None;
            }
            let members: Vec<usize> = nodes_wrapping_from(machine, node)
                .into_iter()
                .filter(|&k| machine.distance(node, k) <= d)
                .collect();
            let mut span = CpuSet::empty(machine.cpus());
            for &k in &members {
                span.union_with(&node_set(machine, k));
            }
            Some(Level::new(
                format!("NUMA{d}"),
                span,
                plain_groups(members.iter().map(|&k| node_set(machine, k))),
                p.node.clone(),
            ))
        })
        .collect()
}
