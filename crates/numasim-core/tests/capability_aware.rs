//! The capability-aware balancer against linux26 on machines with speed cores.

use numasim_core::config::EngineConfig;
use numasim_core::domains::{BuildOptions, Builder};
use numasim_core::engine::scene::Scene;
use numasim_core::engine::RunResult;
use numasim_core::policy::capability_aware::{CapabilityAware, PlaceScope};
use numasim_core::policy::linux26::Linux26;
use numasim_core::policy::{Attempt, BalanceKind, Policy};
use numasim_core::testutils::{self, Setup};
use numasim_core::workload::{Kind, Workload, WorkloadSpec};

/// One node; CPUs at the given speeds; flat domains (one level, in-node parameters); one
/// 200 ms process of each kind given.
fn setup(speeds: Vec<f64>, kinds: &[Kind]) -> Setup {
    let m =
        testutils::machine_with_speeds(&testutils::two_level_table(1, 20), speeds.len(), speeds);
    let w = Workload {
        apps: Vec::new(),
        processes: (0..kinds.len() as u32)
            .map(|p| testutils::process(p, kinds[p as usize], 200))
            .collect(),
    };
    Setup::new(m, Builder::Flat, w)
}

/// Processes on CPUs (first on each CPU runs), at rest until 1 s (loads settled, cold).
fn scene<'a>(s: &'a Setup, placement: &[(usize, usize)]) -> Scene<'a> {
    let mut sc = s.scene();
    for &(pid, cpu) in placement {
        sc.put(pid, cpu, cpu, 0);
    }
    sc.at(1_000_000_000);
    sc
}

fn moved(a: &Attempt) -> Vec<usize> {
    a.moves.iter().map(|m| m.pid).collect()
}

/// The paper's scenario: a speed core C0 with 10 processes (CPU- and IO-bound), a normal core
/// (the paper's C7; CPU 1 here) with 2. C0 runs p0; its queue is p1..p9, IO-bound: p1, p3, p6.
fn c0_c7() -> (Setup, Vec<(usize, usize)>) {
    use Kind::{Cpu, Io};
    let kinds = [Cpu, Io, Cpu, Io, Cpu, Cpu, Io, Cpu, Cpu, Cpu, Cpu, Cpu];
    let s = setup(vec![2.0, 1.0], &kinds);
    let mut placement: Vec<(usize, usize)> = (0..10).map(|p| (p, 0)).collect();
    placement.extend([(10, 1), (11, 1)]);
    (s, placement)
}

fn balance_c7(p: &mut dyn Policy, sc: &Scene<'_>) -> Attempt {
    p.balance(&sc.view(), 1, 0, BalanceKind::Periodic)
        .expect("due at 1 s")
}

/// Balances C7 once a second until it moves nothing; returns what it pulled, round by round.
fn rounds(p: &mut dyn Policy, sc: &mut Scene<'_>) -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    for round in 1..=5 {
        let a = balance_c7(p, sc);
        if a.moves.is_empty() {
            break;
        }
        out.push(moved(&a));
        let (_, rejected) = sc.apply(1, 0, a);
        assert_eq!(rejected, 0);
        sc.at(1_000_000_000 * (round + 1)); // loads settle again
    }
    out
}

#[test]
fn normal_core_pulls_so_that_speed_weighted_loads_equalise() {
    let (s, placement) = c0_c7();
    // linux26 equalises counts, tail first whatever the kind: first imbalance
    // min(1279 − 767, 767 − 256) = 511 (the integer decay keeps C0 at 1279 and the raw load
    // counts for C7), three tasks; then one more: 6 and 6.
    let mut sc = scene(&s, &placement);
    let plain = rounds(&mut Linux26::new(&s.ctx()), &mut sc);
    assert_eq!(plain, vec![vec![9, 8, 7], vec![6]]);
    assert_eq!((sc.runqueue(0).len(), sc.runqueue(1).len()), (6, 6));
    // capability-aware: k = ⌊(10·1 − 2·2) / (2 + 1)⌋ = 2 at once, and no more: C7 ends with 4
    // of the 12 (a third: 8/2 = 4/1), IO-bound ones first (tail first: p6, p3).
    let mut sc = scene(&s, &placement);
    let cap = rounds(
        &mut CapabilityAware::new(&s.ctx(), PlaceScope::default()),
        &mut sc,
    );
    assert_eq!(cap, vec![vec![6, 3]]);
    assert_eq!((sc.runqueue(0).len(), sc.runqueue(1).len()), (8, 4));
    assert!(cap[0].iter().all(|&p| s.w.processes[p].kind == Kind::Io));
}

fn continue_to_completion(p: &mut dyn Policy) -> RunResult {
    let (s, placement) = c0_c7();
    let mut sc = scene(&s, &placement);
    let first = balance_c7(p, &sc);
    sc.apply(1, 0, first);
    sc.finish(p).expect("completes")
}

#[test]
fn speed_core_idles_less_under_capability_aware() {
    let (s, _) = c0_c7();
    let plain = continue_to_completion(&mut Linux26::new(&s.ctx()));
    let cap = continue_to_completion(&mut CapabilityAware::new(&s.ctx(), PlaceScope::default()));
    for r in [&plain, &cap] {
        assert_eq!(r.processes.len(), 12);
        assert_eq!(r.summary.balance.rejected, 0);
    }
    let (p0, c0) = (
        plain.summary.balance.idle_per_cpu[0],
        cap.summary.balance.idle_per_cpu[0],
    );
    eprintln!("C0 idle-balancing attempts: capability-aware {c0}, linux26 {p0}");
    assert!(
        c0 < p0,
        "C0 idle-balancing attempts: capability-aware {c0}, linux26 {p0}"
    );
    assert_eq!(
        plain.summary.balance.idle_fast + plain.summary.balance.idle_slow,
        plain.summary.balance.idle_per_cpu.iter().sum::<u64>()
    );
}

#[test]
fn with_no_more_tasks_than_speed_cores_only_speed_cores_run_them() {
    // 4 speed cores (CPUs 0-3), 4 normal ones (4-7); 3 tasks: C4 runs p0 and queues p1, C5
    // runs p2.
    let s = setup(
        vec![2.0, 2.0, 2.0, 2.0, 1.0, 1.0, 1.0, 1.0],
        &[Kind::Cpu; 3],
    );
    let placement = [(0, 4), (1, 4), (2, 5)];
    let sc = scene(&s, &placement);
    let v = sc.view();
    let mut cap = CapabilityAware::new(&s.ctx(), PlaceScope::default());
    // An idle normal core does no balancing (linux26's would pull p1 from C4).
    assert_eq!(cap.balance(&v, 7, 0, BalanceKind::Periodic), None);
    let plain = Linux26::new(&s.ctx()).balance(&v, 7, 0, BalanceKind::Periodic);
    assert_eq!(moved(&plain.unwrap()), vec![1]);
    // A free speed core pulls every task of the busiest normal core, the running one too.
    let a = cap.balance(&v, 0, 0, BalanceKind::Periodic).unwrap();
    assert_eq!(moved(&a), vec![1, 0]);
    assert!(a.moves.iter().all(|m| m.from == 4 && m.to == 0));
    // A normal core pushes all its tasks to free speed cores, one each.
    let a = cap.balance(&v, 4, 0, BalanceKind::Periodic).unwrap();
    assert_eq!(
        a.moves.iter().map(|m| (m.pid, m.to)).collect::<Vec<_>>(),
        vec![(1, 0), (0, 1)]
    );
    // Continued to completion from C4's push: C5 pushes p2 at its next busy balancing (64 ms);
    // the normal cores run nothing after that.
    let mut sc = Scene::new(&s.m, &s.d, &s.w, &s.config);
    sc.at(1_000_000_000);
    for (pid, cpu) in placement {
        sc.put(pid, cpu, cpu, 0);
    }
    sc.apply(4, 0, a);
    let r = sc.finish(&mut cap).unwrap();
    for p in &r.processes {
        assert!(
            p.slow_cpu_ms < 70.0,
            "pid {} on normal cores {} ms",
            p.pid,
            p.slow_cpu_ms
        );
        assert!(p.fast_cpu_ms > 90.0);
    }
    assert!(r.summary.migrations_between_classes >= 3);
}

#[test]
fn threads_of_one_process_stay_on_one_core_class() {
    let m = testutils::preset("amc1");
    let d = Builder::TwoLevel.build(&m, &BuildOptions::default());
    let config = EngineConfig::default();
    let w = WorkloadSpec::parse(
        "w",
        "n=96,kind=mixed,exec=20-200,arrival=uniform:300,threads=4",
    )
    .unwrap()
    .generate("w", 5, m.node_cpu_lists())
    .unwrap();
    let r = numasim_core::run_policy(&m, &d, &w, "capability-aware", &config).unwrap();
    let mut groups = std::collections::BTreeMap::<usize, Vec<(f64, f64)>>::new();
    for pr in &r.processes {
        groups
            .entry(pr.tgid)
            .or_default()
            .push((pr.fast_cpu_ms, pr.slow_cpu_ms));
    }
    let mut classes = std::collections::BTreeSet::new();
    for (tgid, threads) in &groups {
        assert_eq!(threads.len(), 4);
        let fast = threads.iter().all(|&(_, slow)| slow == 0.0);
        let slow = threads.iter().all(|&(fast, _)| fast == 0.0);
        assert!(
            fast || slow,
            "group {tgid} ran on both classes: {threads:?}"
        );
        classes.insert(fast);
    }
    // Both classes are used (the rule is not "everything on speed cores").
    assert_eq!(classes.len(), 2);
    // linux26, unaware of speed, splits groups across classes.
    let r = numasim_core::run_policy(&m, &d, &w, "linux26", &config).unwrap();
    let split = r
        .processes
        .chunks(4)
        .filter(|g| g.iter().any(|p| p.fast_cpu_ms > 0.0) && g.iter().any(|p| p.slow_cpu_ms > 0.0))
        .count();
    assert!(split > 0);
}

#[test]
fn the_place_option_sets_the_scope_of_a_least_loaded_core() {
    // Two nodes of two equal cores, two-level domains. Node 0: CPU 0 runs 2, CPU 1 runs 1
    // (load 3/2); node 1: CPU 2 idle, CPU 3 runs 4 (load 4/2). P7 is placed.
    let m = testutils::machine(&testutils::two_level_table(2, 20), 2);
    let w = testutils::workload(Kind::Cpu, &[200; 8]);
    let s = Setup::new(m, Builder::TwoLevel, w);
    let mut sc = s.scene();
    for (pid, cpu) in [(0, 0), (1, 0), (2, 1), (3, 3), (4, 3), (5, 3), (6, 3)] {
        sc.put(pid, cpu, cpu, 0);
    }
    sc.at(1_000_000_000);
    let place = |option: &str, near: usize| {
        let pairs = [("place", option)];
        let mut p = CapabilityAware::new(&s.ctx(), PlaceScope::parse("t", &pairs).unwrap());
        p.place_wakeup(&sc.view(), 7, near).unwrap()
    };
    // machine: the idle CPU 2 wherever it slept.
    assert_eq!((place("machine", 0), place("machine", 2)), (2, 2));
    // domain: the less loaded node (0), then its least loaded core.
    assert_eq!((place("domain", 0), place("domain", 2)), (1, 1));
    // node: the least loaded core of the node it slept on.
    assert_eq!((place("node", 0), place("node", 2)), (1, 2));
    let err = PlaceScope::parse("--policy", &[("place", "rack")]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "--policy: capability-aware option 'place' must be machine, domain or node, not 'rack'"
    );
}
