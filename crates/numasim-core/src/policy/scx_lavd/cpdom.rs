//! Compute domains and their neighbour lists, as scx_lavd's `cpu_order.rs` builds them
//! (`CpuOrder::build_cpdom`, `circular_sort`, `dist`).
//!
//! ```text
//!   machine ── node 0 ── big CPUs    = domain 0 ── neighbours by distance level:
//!           │         └─ little CPUs = domain 1       level 0: [2]      (other node, same type)
//!           └─ node 1 ── big CPUs    = domain 2       level 1: [1]      (same node, other type)
//!                     └─ little CPUs = domain 3       level 2: [3]      (other node, other type)
//! ```
//!
//! 1. A domain is the CPUs of one node and one core type (LAVD keys it by node, LLC and core
//!    type; numasim's machines have one LLC per node). A CPU is big when its speed is the
//!    machine's highest, little otherwise (LAVD's `big_core`: the core type is not Little).
//! 2. Domain ids follow the first CPU of each domain in the order node, then big before
//!    little, then CPU id (LAVD numbers domains as it meets them in its CPU order, which in
//!    performance mode sorts by node, then by capacity, highest first).
//! 3. Between two domains LAVD's `dist()` adds 100 for another core type and 10 for another
//!    node (and 1 or 2 for another LLC in the same node, which numasim's machines lack):
//!    every other node is as far as any other. [`DistModel::Slit`] replaces the 10 by the
//!    nodes' SLIT distance, so that the farther nodes of a multi-hop machine are farther.
//! 4. A domain's neighbours are grouped by distance, nearest group first (LAVD's
//!    `neighbor_map`, a `BTreeMap` keyed by distance); within a group they are in circular
//!    order from the domain's id (`circular_sort`).

use crate::machine::{CpuId, Machine};

/// How neighbour domains are ordered by distance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DistModel {
    /// LAVD's `dist()`: same node or another node, nothing in between (the default).
    Lavd,
    /// The nodes' SLIT distance in place of LAVD's one "other node" step.
    Slit,
}

/// A compute domain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cpdom {
    pub id: usize,
    pub node: usize,
    pub big: bool,
    pub cpus: Vec<CpuId>,
    /// The sum of its CPUs' capacities (`cap_sum_active_cpus`; 1024 for the fastest CPU).
    pub cap_sum: u64,
    /// Neighbour domain ids per distance level, nearest level first.
    pub neighbors: Vec<Vec<usize>>,
}

/// A CPU's capacity on LAVD's scale: 1024 for the machine's fastest CPU, in proportion below.
pub fn capacity(machine: &Machine, cpu: CpuId) -> u64 {
    let max = (0..machine.cpus())
        .map(|c| machine.speed(c))
        .fold(0.0_f64, f64::max);
    ((machine.speed(cpu) / max) * 1024.0).round() as u64
}

/// The machine's compute domains (module doc, steps 1-4).
pub fn build(machine: &Machine, model: DistModel) -> Vec<Cpdom> {
    let max = (0..machine.cpus())
        .map(|c| machine.speed(c))
        .fold(0.0_f64, f64::max);
    let big = |c: CpuId| machine.speed(c) >= max;
    let mut order: Vec<CpuId> = (0..machine.cpus()).collect();
    order.sort_by_key(|&c| (machine.cpu_node(c), !big(c), c));
    let mut doms: Vec<Cpdom> = Vec::new();
    for c in order {
        let (node, b) = (machine.cpu_node(c), big(c));
        let cap = capacity(machine, c);
        match doms.iter_mut().find(|d| d.node == node && d.big == b) {
            Some(d) => {
                d.cpus.push(c);
                d.cap_sum += cap;
            }
            None => doms.push(Cpdom {
                id: doms.len(),
                node,
                big: b,
                cpus: vec![c],
                cap_sum: cap,
                neighbors: Vec::new(),
            }),
        }
    }
    let dist = |a: &Cpdom, b: &Cpdom| -> u64 {
        let mut d = 0;
        if a.big != b.big {
            d += 100_000;
        }
        if a.node != b.node {
            d += match model {
                DistModel::Lavd => 10,
                DistModel::Slit => u64::from(machine.distance(a.node, b.node)),
            };
        }
        d
    };
    let all = doms.clone();
    for d in &mut doms {
        let mut by_dist: std::collections::BTreeMap<u64, Vec<usize>> = Default::default();
        for o in all.iter().filter(|o| o.id != d.id) {
            by_dist.entry(dist(d, o)).or_default().push(o.id);
        }
        d.neighbors = by_dist
            .into_values()
            .map(|ids| circular_sort(d.id, &ids))
            .collect();
    }
    doms
}

/// `rest` in circular order from `start` (scx_lavd's `CpuOrder::circular_sort`): the ids,
/// with `start`, sorted and seen as a ring; nearest to `start` on the ring first, the lower
/// ring position first between two as near.
pub fn circular_sort(start: usize, rest: &[usize]) -> Vec<usize> {
    let mut list = rest.to_vec();
    list.push(start);
    list.sort_unstable();
    let s = list.binary_search(&start).expect("start is in the list");
    let n = list.len();
    let ring = |x: usize| {
        let d = (x + n - s) % n;
        d.min(n - d)
    };
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&x| (ring(x), x));
    order[1..].iter().map(|&i| list[i]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutils::{machine, machine_with_speeds, two_level_table};

    #[test]
    fn circular_order_is_the_sources_example() {
        // cpu_order.rs: from 0 of 0..8: 1, 7, 2, 6, 3, 5, 4; from 1: 0, 2, 3, 7, 4, 6, 5;
        // from 7: 0, 6, 1, 5, 2, 4, 3.
        let all = |s: usize| (0..8).filter(|&x| x != s).collect::<Vec<_>>();
        assert_eq!(circular_sort(0, &all(0)), vec![1, 7, 2, 6, 3, 5, 4]);
        assert_eq!(circular_sort(1, &all(1)), vec![0, 2, 3, 7, 4, 6, 5]);
        assert_eq!(circular_sort(7, &all(7)), vec![0, 6, 1, 5, 2, 4, 3]);
    }

    #[test]
    fn lavd_sees_one_remote_level_and_slit_sees_the_hops() {
        // Four nodes on a line: 0-1-2-3, SLIT 10 / 20 / 30 / 40.
        let d = vec![
            vec![10, 20, 30, 40],
            vec![20, 10, 20, 30],
            vec![30, 20, 10, 20],
            vec![40, 30, 20, 10],
        ];
        let m = machine(&d, 2);
        let lavd = build(&m, DistModel::Lavd);
        assert_eq!(lavd.len(), 4);
        assert_eq!(lavd[0].cpus, vec![0, 1]);
        assert_eq!(lavd[0].cap_sum, 2048);
        // One level: every other node, in circular order from 0 (1, 3, 2).
        assert_eq!(lavd[0].neighbors, vec![vec![1, 3, 2]]);
        assert_eq!(lavd[2].neighbors, vec![vec![1, 3, 0]]);
        let slit = build(&m, DistModel::Slit);
        assert_eq!(slit[0].neighbors, vec![vec![1], vec![2], vec![3]]);
        assert_eq!(slit[2].neighbors, vec![vec![1, 3], vec![0]]);
    }

    #[test]
    fn core_types_split_a_node_and_come_after_the_other_nodes() {
        // Two nodes of 4 CPUs, CPUs 0-1 and 4-5 at speed 2.0, the rest at 1.0.
        let m = machine_with_speeds(
            &two_level_table(2, 20),
            4,
            vec![2.0, 2.0, 1.0, 1.0, 2.0, 2.0, 1.0, 1.0],
        );
        let doms = build(&m, DistModel::Lavd);
        let summary: Vec<_> = doms
            .iter()
            .map(|d| (d.node, d.big, d.cpus.clone(), d.cap_sum))
            .collect();
        assert_eq!(
            summary,
            vec![
                (0, true, vec![0, 1], 2048),
                (0, false, vec![2, 3], 1024),
                (1, true, vec![4, 5], 2048),
                (1, false, vec![6, 7], 1024),
            ]
        );
        // Same type on the other node (10), then the other type here (100), then there (110).
        assert_eq!(doms[0].neighbors, vec![vec![2], vec![1], vec![3]]);
        assert_eq!(doms[3].neighbors, vec![vec![1], vec![2], vec![0]]);
    }
}
