//! The 2005-era builders: `flat`, `node-only` and `two-level` (Linux 2.6.18).
//!
//! ```text
//!   two-level, CPU c on node n           (2.6.18 kernel/sched.c build_sched_domains)
//!   ALLNODES  span = all CPUs, one group per node     only if C > 16 × |cpus(n)|
//!   NODE      span = n + its 15 nearest nodes, one group per node   (sched_domain_node_span)
//!   CPU       span = cpus(n), one group per CPU       (phys_domains, SD_CPU_INIT)
//! ```
//!
//! 1. `sched_domain_node_span(n)`: start with n; 15 times, add the nearest unused node with
//!    CPUs, scanning from n upwards and wrapping (`find_next_best_node`: strict `<`, so ties go to
//!    the first node met in that scan).
//! 2. ALLNODES is built for a CPU when the machine has more than `SD_NODES_PER_DOMAIN` (16)
//!    times as many CPUs as the CPU's node — i.e. above 16 equal nodes.
//! 3. Groups: per-CPU and per-node groups in the kernel's circular order, starting with the
//!    CPU's own group; node groups walk nodes from n upwards, wrapping.
//! 4. Degenerate levels removed as 2.6.18 `cpu_attach_domain` does.
//!
//! `flat` ("1 level SMP") is one level over all CPUs with a group per CPU and the in-node
//! parameters; `node-only` ("1 level NUMA") one level over all CPUs with a group per node and the
//! node parameters. Choice: ALLNODES uses the 2.6 node parameters (ia64's own
//! `SD_ALLNODES_INIT` values are not one of numasim's two 2.6 parameter sets).

use crate::cpuset::CpuSet;
use crate::machine::Machine;

use super::{
    node_set, nodes_wrapping_from, plain_groups, Era, Era26Params, Interner, Level, LevelParams,
};

/// `SD_NODES_PER_DOMAIN` in 2.6.18.
pub const SD_NODES_PER_DOMAIN: usize = 16;

/// Groups of single CPUs of `span`, ascending, rotated to start at `cpu` (the circular
/// list of `init_sched_build_groups`, entered at the CPU's own group).
fn cpu_groups(machine: &Machine, span: &CpuSet, cpu: usize) -> Vec<super::Group> {
    plain_groups(
        span.iter_wrap(cpu)
            .map(|c| CpuSet::from_ids(machine.cpus(), [c])),
    )
}

fn level(name: &str, span: CpuSet, groups: Vec<super::Group>, params: &LevelParams) -> Level {
    Level::new(name.to_string(), span, groups, params.clone())
}

fn node_groups(machine: &Machine, node: usize, span: &CpuSet) -> Vec<super::Group> {
    plain_groups(
        nodes_wrapping_from(machine, node)
            .into_iter()
            .filter(|&k| machine.node_cpus(k).iter().any(|&c| span.contains(c)))
            .map(|k| node_set(machine, k)),
    )
}

fn all(machine: &Machine) -> CpuSet {
    CpuSet::from_ids(machine.cpus(), 0..machine.cpus())
}

/// `flat`: one level spanning every CPU, one group per CPU.
pub(crate) fn flat(machine: &Machine, p: &Era26Params, shared: &mut Interner) -> Vec<Vec<Level>> {
    let span = all(machine);
    (0..machine.cpus())
        .map(|cpu| {
            let l = level(
                "SMP",
                span.clone(),
                cpu_groups(machine, &span, cpu),
                &p.in_node,
            );
            shared.chain(cpu, Era::Linux26.attach(vec![l]))
        })
        .collect()
}

/// `node-only`: one level spanning every CPU, one group per node.
pub(crate) fn node_only(
    machine: &Machine,
    p: &Era26Params,
    shared: &mut Interner,
) -> Vec<Vec<Level>> {
    let span = all(machine);
    (0..machine.cpus())
        .map(|cpu| {
            let node = machine.cpu_node(cpu);
            let groups = node_groups(machine, node, &span);
            shared.chain(
                cpu,
                Era::Linux26.attach(vec![level("NODE", span.clone(), groups, &p.node)]),
            )
        })
        .collect()
}

/// 2.6.18 `find_next_best_node`: the nearest unused node with CPUs, scanning from `node`.
fn find_next_best_node(machine: &Machine, node: usize, used: &mut [bool]) -> usize {
    let n = machine.nodes();
    let mut best = 0;
    let mut min_val = u32::MAX;
    for i in 0..n {
        let k = (node + i) % n;
        if machine.node_cpus(k).is_empty() || used[k] {
            continue;
        }
        let val = machine.distance(node, k);
        if val < min_val {
            min_val = val;
            best = k;
        }
    }
    used[best] = true;
    best
}

/// 2.6.18 `sched_domain_node_span`: `node` and its `SD_NODES_PER_DOMAIN - 1` nearest nodes.
pub fn sched_domain_node_span(machine: &Machine, node: usize) -> CpuSet {
    let mut used = vec![false; machine.nodes()];
    let mut span = node_set(machine, node);
    used[node] = true;
    for _ in 1..SD_NODES_PER_DOMAIN {
        let next = find_next_best_node(machine, node, &mut used);
        span.union_with(&node_set(machine, next));
    }
    span
}

/// `two-level`: the 2.6.18 hierarchy (CPU, NODE, and ALLNODES above 16 nodes).
pub(crate) fn two_level(
    machine: &Machine,
    p: &Era26Params,
    shared: &mut Interner,
) -> Vec<Vec<Level>> {
    // The levels above CPU are the same for every CPU of a node: built once per node and
    // cloned (shared sets and groups, which `Interner::chain` then shares without re-reading).
    let mut per_node: Vec<Option<Vec<Level>>> = vec![None; machine.nodes()];
    (0..machine.cpus())
        .map(|cpu| {
            let node = machine.cpu_node(cpu);
            let phys = node_set(machine, node);
            let mut chain = vec![level(
                "CPU",
                phys.clone(),
                cpu_groups(machine, &phys, cpu),
                &p.in_node,
            )];
            let above = per_node[node].get_or_insert_with(|| {
                let span = sched_domain_node_span(machine, node);
                let groups = node_groups(machine, node, &span);
                let mut above = vec![level("NODE", span, groups, &p.node)];
                if machine.cpus() > SD_NODES_PER_DOMAIN * phys.len() {
                    let span = all(machine);
                    let groups = node_groups(machine, node, &span);
                    above.push(level("ALLNODES", span, groups, &p.node));
                }
                above
            });
            chain.extend(above.iter().cloned());
            shared.chain(cpu, Era::Linux26.attach(chain))
        })
        .collect()
}
