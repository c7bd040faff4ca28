//! Builders for small machines, for tests here and in dependants (feature `testutils`).

use crate::machine::{contiguous_cpus, DistanceTable, Machine, MachineParts};

/// A machine with `cpus_per_node` CPUs on every node of the table `rows`, all at speed 1.0.
pub fn machine(rows: &[Vec<u32>], cpus_per_node: usize) -> Machine {
    machine_with_counts(rows, &vec![cpus_per_node; rows.len()])
}

/// A machine with `counts[n]` CPUs on node n (0 = memory-only node).
pub fn machine_with_counts(rows: &[Vec<u32>], counts: &[usize]) -> Machine {
    build(rows, counts, None)
}

fn build(rows: &[Vec<u32>], counts: &[usize], speeds: Option<Vec<f64>>) -> Machine {
    Machine::new(
        "test",
        MachineParts {
            name: "test".into(),
            description: String::new(),
            source: String::new(),
            node_cpus: contiguous_cpus(counts),
            speeds,
            distances: DistanceTable::from_matrix("test", rows).expect("valid test table"),
        },
    )
    .expect("valid test machine")
}

/// A symmetric 2-level table: 10 local, `remote` elsewhere.
pub fn two_level_table(nodes: usize, remote: u32) -> Vec<Vec<u32>> {
    (0..nodes)
        .map(|i| {
            (0..nodes)
                .map(|j| if i == j { 10 } else { remote })
                .collect()
        })
        .collect()
}

/// Like [`machine`], with per-CPU speeds.
pub fn machine_with_speeds(rows: &[Vec<u32>], cpus_per_node: usize, speeds: Vec<f64>) -> Machine {
    build(rows, &vec![cpus_per_node; rows.len()], Some(speeds))
}

/// A machine preset shipped with the Python package (`python/numasim/data/machines`).
pub fn preset(name: &str) -> Machine {
    let path = format!(
        "{}/../../python/numasim/data/machines/{name}.toml",
        env!("CARGO_MANIFEST_DIR")
    );
    crate::machine::file::read(std::path::Path::new(&path)).expect("preset parses")
}

/// A single-threaded process arriving at 0 on CPU 0, with the defaults for its kind
/// (memory intensity 0.5 CPU-bound / 0.3 IO-bound, bursts 10 ms, waits 20 ms); seed = pid.
pub fn process(pid: u32, kind: crate::workload::Kind, demand_ms: u64) -> crate::workload::Process {
    crate::workload::Process {
        pid,
        tgid: pid,
        arrival_ns: 0,
        demand_ns: demand_ms * 1_000_000,
        kind,
        mem: if kind == crate::workload::Kind::Cpu {
            0.5
        } else {
            0.3
        },
        spawn_cpu: 0,
        burst_mean_ns: 10_000_000,
        wait_mean_ns: 20_000_000,
        seed: u64::from(pid),
        affinity: Vec::new(),
    }
}

/// A workload of [`process`]es of one kind, pids 0, 1, … with these demands.
pub fn workload(kind: crate::workload::Kind, demands_ms: &[u64]) -> crate::workload::Workload {
    crate::workload::Workload {
        processes: (0u32..)
            .zip(demands_ms)
            .map(|(pid, &d)| process(pid, kind, d))
            .collect(),
        apps: Vec::new(),
    }
}

/// A machine with its domains, a workload and the default engine config: what the policy
/// tests build policies and hand-made states ([`Scene`](crate::engine::scene::Scene)) from.
pub struct Setup {
    pub m: Machine,
    pub d: crate::Domains,
    pub w: crate::workload::Workload,
    pub config: crate::config::EngineConfig,
}

impl Setup {
    /// `m` with `builder`'s domains and workload `w`.
    pub fn new(m: Machine, builder: crate::Builder, w: crate::workload::Workload) -> Self {
        let d = builder.build(&m, &crate::domains::BuildOptions::default());
        Self {
            m,
            d,
            w,
            config: crate::config::EngineConfig::default(),
        }
    }

    /// `m` with `builder`'s domains and the workload `spec` generates with `seed`.
    pub fn from_spec(m: Machine, builder: crate::Builder, spec: &str, seed: u64) -> Self {
        let w = crate::workload::WorkloadSpec::parse("w", spec)
            .expect("a valid workload spec")
            .generate("w", seed, m.node_cpu_lists())
            .expect("a workload this machine can run");
        Self::new(m, builder, w)
    }

    /// What a policy is built from.
    pub fn ctx(&self) -> crate::interface::PolicyContext<'_> {
        crate::interface::PolicyContext {
            machine: &self.m,
            domains: &self.d,
            config: &self.config,
        }
    }

    /// An empty state of this setup, to place processes in.
    pub fn scene(&self) -> crate::engine::scene::Scene<'_> {
        crate::engine::scene::Scene::new(&self.m, &self.d, &self.w, &self.config)
    }
}
