//! Checks shared by the integration tests (each test file that needs them declares `mod common;`).

use numasim_core::engine::RunResult;
use proptest::prelude::*;

/// What every traced run must satisfy: every process completes exactly once and did all its
/// work, its slices add up to its CPU time and end when it completes, nothing runs on two CPUs,
/// no CPU runs two processes, and the engine refused no decision.
pub fn sound(r: &RunResult) -> Result<(), TestCaseError> {
    // Every process completes exactly once, and did all its work.
    prop_assert_eq!(r.processes.len(), r.summary.processes);
    let mut pids: Vec<usize> = r.processes.iter().map(|p| p.pid).collect();
    pids.sort_unstable();
    pids.dedup();
    prop_assert_eq!(pids.len(), r.processes.len());
    for p in &r.processes {
        prop_assert!(
            (p.work_ms - p.demand_ms).abs() < 1e-6,
            "pid {}: work {} demand {}",
            p.pid,
            p.work_ms,
            p.demand_ms
        );
        prop_assert!(p.completion_ms >= p.arrival_ms + p.demand_ms / 2.0 - 1e-9);
        prop_assert!(p.first_run_ms >= p.arrival_ms);
        // One migration count per memory access level, whether it moved or not, adding up to
        // its migrations of every kind.
        prop_assert_eq!(
            p.migrations_by_level.len(),
            r.summary.migrations_by_level.len()
        );
        prop_assert_eq!(p.migrations_by_level.iter().sum::<u32>(), p.migrations);
        let slices: f64 = r
            .trace
            .iter()
            .filter(|s| s.pid == p.pid)
            .map(|s| (s.end_ns - s.start_ns) as f64 / 1e6)
            .sum();
        prop_assert!(
            (slices - p.cpu_ms).abs() < 1e-6,
            "pid {}: slices {} cpu {}",
            p.pid,
            slices,
            p.cpu_ms
        );
        let last = r
            .trace
            .iter()
            .filter(|s| s.pid == p.pid)
            .map(|s| s.end_ns)
            .max()
            .unwrap();
        prop_assert!(
            (last as f64 / 1e6 - p.completion_ms).abs() < 1e-9,
            "ends when it completes"
        );
    }
    // Nothing runs on two CPUs, no CPU runs two processes.
    let mut by_cpu = r.trace.clone();
    by_cpu.sort_by_key(|s| (s.cpu, s.start_ns, s.end_ns));
    for w in by_cpu.windows(2) {
        if w[0].cpu == w[1].cpu {
            prop_assert!(
                w[0].end_ns <= w[1].start_ns,
                "cpu {} overlap {:?}",
                w[0].cpu,
                w
            );
        }
    }
    let mut by_pid = r.trace.clone();
    by_pid.sort_by_key(|s| (s.pid, s.start_ns, s.end_ns));
    for w in by_pid.windows(2) {
        if w[0].pid == w[1].pid {
            prop_assert!(
                w[0].end_ns <= w[1].start_ns,
                "pid {} on two CPUs {:?}",
                w[0].pid,
                w
            );
        }
    }
    prop_assert_eq!(r.summary.balance.rejected, 0);
    Ok(())
}

/// Random machines of 1-4 nodes with 1-3 CPUs each, SLIT distances 11-60 (multi-hop ones
/// among them), some CPUs at speed 2 (asymmetric machines: two core types).
#[allow(dead_code)] // not every test file that declares `mod common;` draws machines
pub fn random_machine() -> impl Strategy<Value = numasim_core::machine::Machine> {
    (1usize..5, 1usize..4).prop_flat_map(|(n, cpn)| {
        (
            proptest::collection::vec(11u32..=60, n * (n - 1) / 2),
            proptest::collection::vec(proptest::bool::weighted(0.3), n * cpn),
        )
            .prop_map(move |(upper, fast)| {
                let mut rows = vec![vec![10u32; n]; n];
                let pairs = (0..n).flat_map(|i| (i + 1..n).map(move |j| (i, j)));
                for ((i, j), v) in pairs.zip(upper) {
                    rows[i][j] = v;
                    rows[j][i] = v;
                }
                let speeds = fast.iter().map(|&f| if f { 2.0 } else { 1.0 }).collect();
                numasim_core::testutils::machine_with_speeds(&rows, cpn, speeds)
            })
    })
}
