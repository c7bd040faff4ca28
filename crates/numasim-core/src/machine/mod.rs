//! The machine model: nodes, CPUs, speed factors, the SLIT distance table and its
//! memory access levels (MALs).
//!
//! ```text
//!   node 0 ── cpus [0, 1]      distances (SLIT, 10 = local)      MALs = sorted distinct values
//!   node 1 ── cpus [2, 3]      [[10, 20],                        [10, 20]
//!   node 2 ── cpus []  (memory-only)  ...]
//!   cpu c ── node(c), speed(c)  (1.0 normal, 2.0 a "speed core")
//! ```
//!
//! Inputs, each in its own module: a plain distance matrix (`distance`: sysfs rows or the
//! `numactl --hardware` block), a TOML machine file (`file`), the running host (`sysfs`, with a root
//! prefix so tests read fake trees) and synthetic generators (`generate`). Every input ends in
//! [`Machine::new`], which checks what no input format can: counts, speeds, CPU ids.
//!
//! Known limits: CPU ids are dense (`0..C-1`); a host whose ids are not is renumbered with a
//! warning.

pub mod distance;
pub mod file;
pub mod generate;
pub mod sysfs;

use serde::Serialize;

use crate::error::{InputError, Result};

pub use distance::DistanceTable;

/// Index of a CPU, `0..C-1`.
pub type CpuId = usize;
/// Index of a node, `0..N-1`.
pub type NodeId = usize;

/// The SLIT value of a local access (`LOCAL_DISTANCE` in `include/linux/topology.h`).
pub const LOCAL_DISTANCE: u32 = 10;

/// A NUMA machine: nodes with CPUs, per-CPU speeds and a validated distance table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Machine {
    /// Short name (a preset name, or the file stem).
    pub name: String,
    /// One-line description.
    pub description: String,
    /// Where the numbers come from (paper, manual, or "modelling choice").
    pub source: String,
    node_cpus: Vec<Vec<CpuId>>,
    cpu_node: Vec<NodeId>,
    speeds: Vec<f64>,
    distances: DistanceTable,
    #[serde(skip)]
    warnings: Vec<String>,
}

/// Everything needed to build a [`Machine`]; the inputs fill it and [`Machine::new`] checks it.
#[derive(Debug, Clone)]
pub struct MachineParts {
    pub name: String,
    pub description: String,
    pub source: String,
    /// For each node, its CPU ids (global). Together they must be exactly `0..C-1`.
    pub node_cpus: Vec<Vec<CpuId>>,
    /// Speed factor per CPU (len C); `None` means every CPU runs at 1.0.
    pub speeds: Option<Vec<f64>>,
    pub distances: DistanceTable,
}

impl Machine {
    /// Checks the parts and builds the machine. `origin` names the input in error messages.
    pub fn new(origin: &str, parts: MachineParts) -> Result<Self> {
        let nodes = parts.node_cpus.len();
        let rows = parts.distances.nodes();
        if nodes != rows {
            let message = if nodes > rows {
                format!("node {rows} has no row in the distance table ({nodes} nodes, {rows} rows)")
            } else {
                format!("the distance table has {rows} rows but the machine has {nodes} nodes")
            };
            return Err(InputError::new(origin, message));
        }
        let cpus: usize = parts.node_cpus.iter().map(Vec::len).sum();
        if cpus == 0 {
            return Err(InputError::new(origin, "the machine has no CPU"));
        }
        let mut cpu_node = vec![usize::MAX; cpus];
        for (node, list) in parts.node_cpus.iter().enumerate() {
            for &cpu in list {
                if cpu >= cpus {
                    return Err(InputError::new(
                        origin,
                        format!(
                            "cpu {cpu} of node {node} is out of range: ids must be 0..{}",
                            cpus - 1
                        ),
                    ));
                }
                if cpu_node[cpu] != usize::MAX {
                    return Err(InputError::new(
                        origin,
                        format!(
                            "cpu {cpu} is listed in node {} and node {node}",
                            cpu_node[cpu]
                        ),
                    ));
                }
                cpu_node[cpu] = node;
            }
        }
        let speeds = parts.speeds.unwrap_or_else(|| vec![1.0; cpus]);
        if speeds.len() != cpus {
            return Err(InputError::new(
                origin,
                format!("{} speeds given for {cpus} CPUs", speeds.len()),
            )
            .at("field speed"));
        }
        if let Some((cpu, s)) = speeds
            .iter()
            .enumerate()
            .find(|(_, s)| !(s.is_finite() && **s > 0.0))
        {
            return Err(InputError::new(
                origin,
                format!("cpu {cpu} has speed {s}; a speed must be a positive number"),
            )
            .at("field speed"));
        }
        if let Some((cpu, s)) = speeds
            .iter()
            .enumerate()
            .find(|(_, s)| !(MIN_SPEED..=MAX_SPEED).contains(*s))
        {
            return Err(InputError::new(
                origin,
                format!("cpu {cpu} has speed {s}, outside {MIN_SPEED}..{MAX_SPEED}"),
            )
            .at("field speed"));
        }
        let mut node_cpus = parts.node_cpus;
        for list in &mut node_cpus {
            list.sort_unstable();
        }
        let warnings = parts.distances.warnings().to_vec();
        Ok(Self {
            name: parts.name,
            description: parts.description,
            source: parts.source,
            node_cpus,
            cpu_node,
            speeds,
            distances: parts.distances,
            warnings,
        })
    }

    /// Number of nodes (including memory-only nodes).
    pub fn nodes(&self) -> usize {
        self.node_cpus.len()
    }

    /// Number of CPUs.
    pub fn cpus(&self) -> usize {
        self.cpu_node.len()
    }

    /// The CPUs of `node`, sorted.
    pub fn node_cpus(&self, node: NodeId) -> &[CpuId] {
        &self.node_cpus[node]
    }

    /// Every node's CPUs, by node (what a workload spawns on).
    pub fn node_cpu_lists(&self) -> &[Vec<CpuId>] {
        &self.node_cpus
    }

    /// The node of `cpu`.
    pub fn cpu_node(&self, cpu: CpuId) -> NodeId {
        self.cpu_node[cpu]
    }

    /// The speed factor of `cpu` (1.0 normal).
    pub fn speed(&self, cpu: CpuId) -> f64 {
        self.speeds[cpu]
    }

    /// SLIT distance between two nodes.
    pub fn distance(&self, from: NodeId, to: NodeId) -> u32 {
        self.distances.get(from, to)
    }

    /// The distance table.
    pub fn distance_table(&self) -> &DistanceTable {
        &self.distances
    }

    /// Memory access levels: the sorted distinct distance values of the table.
    pub fn mals(&self) -> Vec<u32> {
        self.distances.distinct_values()
    }

    /// Nodes that have at least one CPU, in increasing order.
    pub fn cpu_nodes(&self) -> impl Iterator<Item = NodeId> + '_ {
        (0..self.nodes()).filter(|&n| !self.node_cpus[n].is_empty())
    }

    /// Non-fatal remarks about the input (e.g. an asymmetric table), to show the user.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The machine as its JSON object (`topology --json`'s `"machine"`); saved runs
    /// carry it and [`file::from_info`] reads it back.
    pub fn info(&self) -> serde_json::Value {
        let nodes: Vec<_> = (0..self.nodes())
            .map(|n| serde_json::json!({"id": n, "cpus": self.node_cpus(n)}))
            .collect();
        let cpus: Vec<_> = (0..self.cpus())
            .map(|c| serde_json::json!({"id": c, "node": self.cpu_node(c), "speed": self.speed(c)}))
            .collect();
        serde_json::json!({
            "name": self.name,
            "description": self.description,
            "source": self.source,
            "nodes": nodes,
            "cpus": cpus,
            "distances": self.distances.rows(),
            "mals": self.mals(),
        })
    }
}

/// Which CPUs of each node are speed cores.
#[derive(Debug, Clone, PartialEq)]
pub enum FastCpus {
    /// No speed cores.
    None,
    /// In each node, the first half of its CPUs (rounded down): the default fast CPUs.
    FirstHalf,
    /// Exactly these global CPU ids.
    List(Vec<CpuId>),
}

/// Per-CPU speeds for a machine whose node `n` has CPUs `node_cpus[n]`.
pub fn speeds_for(
    origin: &str,
    node_cpus: &[Vec<CpuId>],
    fast: &FastCpus,
    fast_speed: f64,
) -> Result<Vec<f64>> {
    let cpus: usize = node_cpus.iter().map(Vec::len).sum();
    let mut speeds = vec![1.0; cpus];
    match fast {
        FastCpus::None => {}
        FastCpus::FirstHalf => {
            for list in node_cpus {
                for &cpu in &list[..list.len() / 2] {
                    speeds[cpu] = fast_speed;
                }
            }
        }
        FastCpus::List(ids) => {
            for &cpu in ids {
                if cpu >= cpus {
                    return Err(InputError::new(
                        origin,
                        format!("fast cpu {cpu} does not exist (the machine has {cpus} CPUs)"),
                    )
                    .at("field speed.fast_cpus"));
                }
                speeds[cpu] = fast_speed;
            }
        }
    }
    Ok(speeds)
}

/// The slowest and fastest speed a CPU may have, relative to a normal CPU (speed 1): a
/// thousand times either way. Beyond them a run's times lose all meaning (a speed of 1e-300
/// never finishes a process, 1e300 finishes it in 0 ns).
pub const MIN_SPEED: f64 = 1e-3;
/// See [`MIN_SPEED`].
pub const MAX_SPEED: f64 = 1e3;

/// The largest machine numasim builds: 4 096 nodes (Linux's `MAX_NUMNODES` is at most 1 024;
/// a 2 000-node synthetic table must still load) and 16 384 CPUs (twice Linux's largest
/// `NR_CPUS`, 8 192). Beyond them a machine is refused before anything is allocated for it.
pub const MAX_NODES: usize = 4096;
/// See [`MAX_NODES`].
pub const MAX_CPUS: usize = 16_384;

/// Refuses `counts` (CPUs per node) whose total exceeds [`MAX_CPUS`], before allocating.
pub fn check_cpu_counts(origin: &str, location: &str, counts: &[usize]) -> Result<()> {
    let total = counts
        .iter()
        .try_fold(0usize, |acc, &c| acc.checked_add(c))
        .filter(|&t| t <= MAX_CPUS);
    if total.is_none() {
        return Err(InputError::new(
            origin,
            format!("the machine would have more than {MAX_CPUS} CPUs, the most numasim builds"),
        )
        .at(location));
    }
    Ok(())
}

/// CPU lists for nodes with the given CPU counts, numbered contiguously node by node.
pub fn contiguous_cpus(counts: &[usize]) -> Vec<Vec<CpuId>> {
    let mut next = 0;
    counts
        .iter()
        .map(|&count| {
            let list = (next..next + count).collect();
            next += count;
            list
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(rows: &[&[u32]]) -> DistanceTable {
        DistanceTable::from_rows(
            "t",
            rows.iter()
                .map(|r| distance::RawRow::new(None, r.iter().map(|&v| i64::from(v)).collect()))
                .collect(),
        )
        .unwrap()
    }

    #[test]
    fn contiguous_numbering_and_lookups() {
        let parts = MachineParts {
            name: "m".into(),
            description: String::new(),
            source: String::new(),
            node_cpus: contiguous_cpus(&[2, 0, 3]),
            speeds: None,
            distances: table(&[&[10, 20, 30], &[20, 10, 20], &[30, 20, 10]]),
        };
        let m = Machine::new("t", parts).unwrap();
        assert_eq!(m.cpus(), 5);
        assert_eq!(m.node_cpus(2), &[2, 3, 4]);
        assert_eq!(m.cpu_node(4), 2);
        assert_eq!(m.cpu_nodes().collect::<Vec<_>>(), vec![0, 2]);
        assert_eq!(m.mals(), vec![10, 20, 30]);
        assert_eq!(m.distance(0, 2), 30);
    }

    #[test]
    fn first_half_speed_cores() {
        let cpus = contiguous_cpus(&[4, 3]);
        let s = speeds_for("t", &cpus, &FastCpus::FirstHalf, 2.0).unwrap();
        assert_eq!(s, vec![2.0, 2.0, 1.0, 1.0, 2.0, 1.0, 1.0]);
    }

    #[test]
    fn node_without_row_is_refused() {
        let parts = MachineParts {
            name: "m".into(),
            description: String::new(),
            source: String::new(),
            node_cpus: contiguous_cpus(&[1, 1, 1]),
            speeds: None,
            distances: table(&[&[10, 20], &[20, 10]]),
        };
        let err = Machine::new("t", parts).unwrap_err();
        assert!(err.to_string().contains("node 2 has no row"), "{err}");
    }
}
