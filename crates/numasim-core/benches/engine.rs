//! `cargo bench -p numasim-core`: the event loop (whole runs) and the balancer's hot paths
//! (domain building, placement- and balance-heavy workloads). Whole-scenario figures with
//! peak memory come from `numasim bench`; see docs/PERFORMANCE.md.

use numasim_core::config::EngineConfig;
use numasim_core::domains::{BuildOptions, Builder};
use numasim_core::machine::{generate::Generator, Machine, MachineParts};
use numasim_core::workload::{Workload, WorkloadSpec};

fn main() {
    divan::main();
}

fn machine(nodes: usize, cpn: usize, group_sizes: Vec<usize>, distances: Vec<u32>) -> Machine {
    let g = Generator::Hierarchy {
        nodes,
        group_sizes,
        distances,
    };
    Machine::new(
        "bench",
        MachineParts {
            name: "bench".into(),
            description: String::new(),
            source: String::new(),
            node_cpus: numasim_core::machine::contiguous_cpus(&vec![cpn; nodes]),
            speeds: None,
            distances: g.table("bench").unwrap(),
        },
    )
    .unwrap()
}

fn workload(m: &Machine, spec: &str) -> Workload {
    WorkloadSpec::parse("b", spec)
        .unwrap()
        .generate("b", 1, m.node_cpu_lists())
        .unwrap()
}

fn run(m: &Machine, b: Builder, w: &Workload) -> u64 {
    run_with(m, b, w, "linux26")
}

fn run_with(m: &Machine, b: Builder, w: &Workload, policy: &str) -> u64 {
    let d = b.build(m, &BuildOptions::default());
    let config = EngineConfig::default();
    numasim_core::run_policy(m, &d, w, policy, &config)
        .unwrap()
        .events
}

/// Event loop: 500 CPU-bound processes on a 16 × 2 machine with 6 levels (scenario a's shape).
#[divan::bench(args = [Builder::TwoLevel, Builder::Multilevel, Builder::Linux])]
fn run_32_cpus_500_procs(bencher: divan::Bencher, b: Builder) {
    let m = machine(16, 2, vec![2, 2, 2], vec![20, 30, 40, 50]);
    let w = workload(&m, "n=500,kind=cpu,exec=200,arrival=random");
    bencher.bench(|| run(&m, b, &w));
}

/// The same under the `linux` policy over linux domains, NUMA balancing on and off (it never
/// acts on 200 ms processes: its scan delay is 1 s of CPU time).
#[divan::bench(args = ["linux", "linux:numa_balancing=off"])]
fn run_32_cpus_500_procs_linux(bencher: divan::Bencher, policy: &str) {
    let m = machine(16, 2, vec![2, 2, 2], vec![20, 30, 40, 50]);
    let w = workload(&m, "n=500,kind=cpu,exec=200,arrival=random");
    bencher.bench(|| run_with(&m, Builder::Linux, &w, policy));
}

/// Balancer-heavy: IO-bound processes wake and sleep, so CPUs go newly idle all the time.
#[divan::bench]
fn run_io_bound_newidle_heavy(bencher: divan::Bencher) {
    let m = machine(16, 2, vec![4], vec![20, 30]);
    let w = workload(&m, "n=200,kind=io,exec=100,arrival=almost,burst=2,wait=4");
    bencher.bench(|| run(&m, Builder::Multilevel, &w));
}

/// Domain building on 1024 CPUs (64 nodes × 16, 4 levels).
#[divan::bench(args = [Builder::TwoLevel, Builder::Multilevel, Builder::Linux])]
fn build_domains_1024(bencher: divan::Bencher, b: Builder) {
    let m = machine(64, 16, vec![4, 4], vec![20, 30, 40]);
    bencher.bench(|| b.build(&m, &BuildOptions::default()).cpus.len());
}

/// Domain building on 4 096 CPUs (256 nodes × 16, 5 levels): groups and levels shared between CPUs.
#[divan::bench(args = [Builder::Multilevel, Builder::Linux], sample_count = 5)]
fn build_domains_4096(bencher: divan::Bencher, b: Builder) {
    let m = machine(256, 16, vec![4, 4, 4], vec![20, 30, 40, 50]);
    bencher.bench(|| b.build(&m, &BuildOptions::default()).cpus.len());
}

/// The balancer at scale: 1 024 CPUs at the load of bench scenario b, for 2 s.
/// Group sums kept within a tick and the overloaded-CPU early exit are what it measures.
#[divan::bench(sample_count = 5)]
fn run_1024_cpus_loaded(bencher: divan::Bencher) {
    let m = machine(64, 16, vec![4, 4], vec![20, 30, 40]);
    let w = workload(&m, "n=10000,kind=cpu,exec=200,arrival=uniform:2000");
    bencher.bench(|| run(&m, Builder::Multilevel, &w));
}

/// Idle CPUs balancing: 1 000 processes on 4 096 CPUs, most CPUs idle all along.
#[divan::bench(sample_count = 3)]
fn run_4096_cpus_light(bencher: divan::Bencher) {
    let m = machine(256, 16, vec![4, 4, 4], vec![20, 30, 40, 50]);
    let w = workload(&m, "n=1000,kind=cpu,exec=200,arrival=uniform:5000");
    bencher.bench(|| run(&m, Builder::Multilevel, &w));
}
