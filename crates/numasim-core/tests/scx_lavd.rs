//! scx-lavd in whole runs: a stealer domain's CPU takes from a stealee's queue before its own,
//! nothing crosses domains through the walk when no domain is ever a stealer, the walk goes a
//! level further with the source's probability, and `dist=slit` changes nothing on a machine
//! whose remote nodes are all equally far.

use numasim_core::config::EngineConfig;
use numasim_core::domains::{BuildOptions, Builder};
use numasim_core::engine::RunResult;
use numasim_core::machine::Machine;
use numasim_core::testutils;
use numasim_core::workload::{Kind, Process, Workload};
use proptest::prelude::*;

mod common;

fn proc(pid: u32, demand_ms: u64, spawn: u32) -> Process {
    Process {
        spawn_cpu: spawn,
        ..testutils::process(pid, Kind::Cpu, demand_ms)
    }
}

fn run(m: &Machine, w: &Workload, policy: &str) -> RunResult {
    let d = Builder::Flat.build(m, &BuildOptions::default());
    let config = EngineConfig {
        record_trace: true,
        ..EngineConfig::default()
    };
    numasim_core::run_policy(m, &d, w, policy, &config).unwrap()
}

fn metric(r: &RunResult, name: &str) -> f64 {
    r.summary
        .policy_metrics
        .iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no metric {name}: {:?}", r.summary.policy_metrics))
        .1
}

/// Two nodes of one CPU; nine long tasks created on CPU 0, two on CPU 1.
fn nine_and_two() -> (Machine, Workload) {
    let m = testutils::machine(&testutils::two_level_table(2, 20), 1);
    let processes = (0..11)
        .map(|pid| proc(pid, 400, if pid < 9 { 0 } else { 1 }))
        .collect();
    let w = Workload {
        apps: Vec::new(),
        processes,
    };
    (m, w)
}

#[test]
fn a_stealer_cpu_takes_from_the_stealee_before_its_own_queue() {
    // Domain 0 (CPU 0) holds 9 tasks, domain 1 (CPU 1) 2. Both CPUs are always busy, so
    // their utilisation is equal and domain 0's queued load (8 tasks against 1) makes it the
    // stealee and domain 1 the stealer once the tasks' duty cycles have grown. CPU 1's own
    // queue is never empty (it always has a task waiting), so no steal is forced: every task
    // that crosses to node 1 was taken by the walk, from a stealee, at the one distance level
    // a 2-node machine has.
    let (m, w) = nine_and_two();
    let r = run(&m, &w, "scx-lavd");
    assert!(metric(&r, "lavd_walk_steals_level0") > 0.0);
    // Until CPU 1's own two tasks are done its queue always has one waiting, so whatever it
    // took from node 0 before then it took by the walk (force stealing needs an empty queue).
    let own_done_ns = r
        .trace
        .iter()
        .filter(|s| s.pid >= 9)
        .map(|s| s.end_ns)
        .max()
        .unwrap();
    let crossed_early = r
        .trace
        .iter()
        .filter(|s| s.pid < 9 && s.cpu == 1 && s.start_ns < own_done_ns)
        .count();
    assert!(
        crossed_early > 0,
        "no task of node 0 ran on node 1 by the walk"
    );
    // The walk evened the load: node 1 ran more than its own two tasks' 800 ms.
    let on_cpu1_ms: f64 = r
        .trace
        .iter()
        .filter(|s| s.cpu == 1)
        .map(|s| (s.end_ns - s.start_ns) as f64 / 1e6)
        .sum();
    assert!(on_cpu1_ms > 1200.0, "{on_cpu1_ms}");
}

#[test]
fn without_roles_the_busy_cpus_keep_their_own_tasks() {
    // lb-low-util-pct=100: the averages never reach 1024 (the rising average of a CPU busy
    // all the time stops at 1023 in LAVD's integers), so every round resets the roles: no
    // walk, and CPU 1, whose own queue is never empty, never takes from node 0.
    let (m, w) = nine_and_two();
    let r = run(&m, &w, "scx-lavd:lb-low-util-pct=100");
    assert_eq!(metric(&r, "lavd_walks"), 0.0);
    assert_eq!(metric(&r, "lavd_rounds_with_stealees"), 0.0);
    // Node 1 keeps its own two tasks and takes nothing from node 0 until they are done; then
    // its queue is empty and it takes from node 0 by force (work conservation).
    let own_done_ns = r
        .trace
        .iter()
        .filter(|s| s.pid >= 9)
        .map(|s| s.end_ns)
        .max()
        .unwrap();
    assert!(r
        .trace
        .iter()
        .all(|s| s.pid >= 9 || s.cpu == 0 || s.start_ns >= own_done_ns));
    assert!(r.trace.iter().all(|s| s.pid < 9 || s.cpu == 1));
    assert!(metric(&r, "lavd_force_steals_level0") > 0.0);
}

#[test]
fn the_walk_goes_one_level_further_with_probability_one_half() {
    // Three nodes on a line (10 / 20 / 30), two CPUs each, ordered by the SLIT: domain 0's
    // neighbours are node 1, then node 2. Node 2 starts with 16 tasks, node 1 with 2, node 0
    // with 1. Of the walks whose nearest level gave nothing, each goes on with probability
    // 1/PROB_FT = 1/2 from its own draw: the share that went on is within five standard
    // errors of 1/2 (a false alarm once in 1.7 million seeds).
    let rows = vec![vec![10, 20, 30], vec![20, 10, 20], vec![30, 20, 10]];
    let m = testutils::machine(&rows, 2);
    let processes = (0..19)
        .map(|pid| {
            let spawn = match pid {
                0..=15 => 4,
                16 => 0,
                _ => 2,
            };
            proc(pid, 1500, spawn)
        })
        .collect();
    let w = Workload {
        apps: Vec::new(),
        processes,
    };
    let r = run(&m, &w, "scx-lavd:dist=slit");
    let failed = metric(&r, "lavd_walks_nearest_failed");
    let beyond = metric(&r, "lavd_walks_beyond_nearest");
    assert!(failed >= 100.0, "too few walks to judge: {failed}");
    let share = beyond / failed;
    let se = (0.25 / failed).sqrt();
    assert!(
        (share - 0.5).abs() < 5.0 * se,
        "{beyond} of {failed} went on"
    );
    // The same seed draws the same: the run is bit for bit the same again.
    assert_eq!(r, run(&m, &w, "scx-lavd:dist=slit"));
}

#[test]
fn slit_order_is_lavd_order_when_every_remote_node_is_as_far() {
    // numa-4x8 (10 / 21): one remote distance, so both orders are the same and so is the run.
    let m = testutils::preset("numa-4x8");
    let s = testutils::Setup::from_spec(
        m,
        Builder::Flat,
        "n=120,kind=mixed,exec=20-200,arrival=uniform:300,spawn=node:0",
        3,
    );
    let lavd = numasim_core::run_policy(&s.m, &s.d, &s.w, "scx-lavd", &s.config).unwrap();
    let slit = numasim_core::run_policy(&s.m, &s.d, &s.w, "scx-lavd:dist=slit", &s.config).unwrap();
    assert_eq!(lavd, slit);
    assert!(lavd.summary.migrations > 0);
}

#[test]
fn a_cpus_busy_time_counts_its_running_process_up_to_now() {
    // What the 10 ms round reads (View::cpu_busy_ns): CPU 0 runs a process from 0, CPU 1
    // nothing; at 30 ms CPU 0 has been busy 30 ms (accounted or not), CPU 1 0 ms.
    let m = testutils::machine(&testutils::two_level_table(2, 20), 1);
    let w = Workload {
        apps: Vec::new(),
        processes: vec![proc(0, 100, 0)],
    };
    let s = testutils::Setup::new(m, Builder::Flat, w);
    let mut sc = s.scene();
    sc.put(0, 0, 0, 0).at(30_000_000);
    assert_eq!(sc.view().cpu_busy_ns(0), 30_000_000);
    assert_eq!(sc.view().cpu_busy_ns(1), 0);
}

/// Workloads with CPU- and IO-bound processes, threads, skewed spawning and, sometimes,
/// processes each pinned to one CPU (a shared queue then holds tasks most of its CPUs may
/// not take).
fn workload() -> impl Strategy<Value = String> {
    (
        1usize..40,
        0u32..3,
        1u32..300,
        0u32..150,
        1usize..3,
        0u32..3,
    )
        .prop_map(|(n, kind, exec, window, threads, shape)| {
            let kind = ["cpu", "io", "mixed"][kind as usize];
            let shape = ["", ",spawn=node:0", ",pin=each"][shape as usize];
            format!(
                "n={n},kind={kind},exec=1-{exec},arrival=uniform:{window},burst=3,wait=5,\
                 threads={threads}{shape}"
            )
        })
}

/// The options tried. A slice shorter than a migrated task's cache refill (0.5 ms per 10 of
/// SLIT distance: 3 ms at 60) would let force stealing move a task at every slice's end
/// before it makes progress, so the shortest slice tried is 3.5 ms.
const OPTIONS: [&str; 4] = [
    "scx-lavd",
    "scx-lavd:dist=slit",
    "scx-lavd:mig-delta-pct=10,lb-low-util-pct=0",
    "scx-lavd:dist=slit,lb-low-util-pct=0,slice-us=3500",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The engine's invariants hold under scx-lavd (every process completes once with all its
    /// work, its slices add up, no CPU runs two processes, no process two CPUs, no decision
    /// refused), and the same seed gives the same run.
    #[test]
    fn schedules_are_sound(m in common::random_machine(), spec in workload(), oi in 0usize..OPTIONS.len(), seed in 0u64..1000) {
        let s = testutils::Setup::from_spec(m, Builder::Flat, &spec, seed);
        let mut config = s.config.clone();
        config.record_trace = true;
        let r = numasim_core::run_policy(&s.m, &s.d, &s.w, OPTIONS[oi], &config).unwrap();
        common::sound(&r)?;
        prop_assert_eq!(&r, &numasim_core::run_policy(&s.m, &s.d, &s.w, OPTIONS[oi], &config).unwrap());
    }
}

#[test]
fn a_slice_no_longer_than_the_machine_s_largest_refill_is_refused() {
    // mehta-m1's farthest nodes are 60 apart: a refill of 60 × 50 µs = 3 ms. A 3 ms slice
    // would let a task stolen at every slice's end never progress; 3.001 ms is taken.
    let s = testutils::Setup::new(
        testutils::preset("mehta-m1"),
        Builder::Flat,
        Workload {
            apps: Vec::new(),
            processes: vec![proc(0, 10, 0)],
        },
    );
    let e = numasim_core::policy::by_name("scx-lavd:slice-us=3000", &s.ctx())
        .err()
        .expect("refused");
    assert!(
        e.to_string().contains("above the largest cache refill"),
        "{e}"
    );
    assert!(e.to_string().contains("(3000 µs)"), "{e}");
    assert!(numasim_core::policy::by_name("scx-lavd:slice-us=3001", &s.ctx()).is_ok());
}
