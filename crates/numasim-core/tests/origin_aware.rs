//! The origin-aware balancer: the paper's worked example on mehta-m1, the cycle
//! alternation, the options, and RI-LB's preference order.

use numasim_core::domains::Builder;
use numasim_core::engine::scene::Scene;
use numasim_core::policy::origin_aware::{Options, OriginAware};
use numasim_core::policy::{Attempt, BalanceKind, MigrationKind, Move, Policy};
use numasim_core::testutils::{self, Setup};
use numasim_core::workload::{Kind, Workload};

fn workload(n: u32) -> Workload {
    Workload {
        apps: Vec::new(),
        processes: (0..n)
            .map(|pid| testutils::process(pid, Kind::Cpu, 200))
            .collect(),
    }
}

/// mehta-m1 over multilevel domains, 400 processes to place.
fn m1() -> Setup {
    Setup::new(
        testutils::preset("mehta-m1"),
        Builder::Multilevel,
        workload(400),
    )
}

fn origin_aware(s: &Setup, options: Options) -> OriginAware {
    OriginAware::new(&s.ctx(), options)
}

/// The paper's worked example. mehta-m1 has 2 CPUs per node: CPU c is on node c / 2.
/// P0 runs p37 (home) and queues p1 (N3, P6), p9 (N1, P2), p45 (N5, P10), p31 (N5, P11),
/// p17 (N14, P28), p118 (N5, P10). P10 holds 4 (origins N9, N3, N14, N7); P11 holds 5 (origins
/// N3, N9, N0 = p91 from P0, N6, N3); P24 (N12) holds 3; every other CPU 6, none from N0.
fn worked_example(s: &Setup) -> Scene<'_> {
    let mut sc = s.scene();
    let mut put = |pid: usize, cpu: usize, origin: usize| {
        sc.put(pid, cpu, origin, 0);
    };
    for (pid, origin) in [
        (37, 0),
        (1, 6),
        (9, 2),
        (45, 10),
        (31, 11),
        (17, 28),
        (118, 10),
    ] {
        put(pid, 0, origin);
    }
    let mut next = 200;
    let mut fresh = || {
        next += 1;
        next - 1
    };
    for origin in [18, 6, 28, 14] {
        put(fresh(), 10, origin);
    }
    for (i, origin) in [7, 19, 0, 12, 6].into_iter().enumerate() {
        let pid = if i == 2 { 91 } else { fresh() };
        put(pid, 11, origin);
    }
    for _ in 0..3 {
        put(fresh(), 24, 24);
    }
    for cpu in (1..32).filter(|c| ![10, 11, 24].contains(c)) {
        // CPU 1 is on N0: its processes come from N1, so that none on the machine is from N0
        // apart from p37 and p91.
        let origin = if cpu == 1 { 3 } else { cpu };
        for _ in 0..6 {
            put(fresh(), cpu, origin);
        }
    }
    // One second later: the decayed loads have caught up with the runqueues.
    sc.at(1_000_000_000);
    sc
}

fn mv(pid: usize, from: usize, to: usize, kind: MigrationKind) -> Move {
    Move {
        pid,
        from,
        to,
        kind,
    }
}

#[test]
fn worked_example_one_si_lb_cycle_on_p0() {
    use MigrationKind::{Exchange, Push};
    let s = m1();
    let mut sc = worked_example(&s);
    let policy = origin_aware(&s, Options::default());
    let attempt = policy.si_lb(&sc.view(), 0);
    // p45, p118 → P10 (7 > 4, then 6 > 5); p31: P11 (5) and P10 (6) not lighter than P0 (5):
    // exchanged with p91 (variant 1); p17: N14's CPUs hold 6, no N0 process there; N12 is at
    // 20 from N14 (nearer than N0's 50) and P24 holds 3 < 5 (variant 2). p1: P0 now holds 4,
    // nothing lighter near N3 (P24 holds 4 now), nothing to exchange; p9 from the nearest
    // remote level and p37 (home) stay.
    assert_eq!(
        attempt.moves,
        vec![
            mv(45, 0, 10, Push),
            mv(118, 0, 10, Push),
            mv(31, 0, 11, Exchange),
            mv(91, 11, 0, Exchange),
            mv(17, 0, 24, Push),
        ]
    );
    // Costs, counted by hand from the rules in the module doc: runqueues = own 1; p45: P10;
    // p118: P10; p31: P11, P10, then P11 scanned for a P0 process (3); p17: P28, P29, two
    // scans of each (origin CPU, then origin node), then P4 P5 P14 P15 P24 (11); p1: P6, P7,
    // two scans of each, then 10 CPUs of N7 N12 N1 N8 N13 (16). Tasks: 6 queued on P0, 2 on
    // P11 (p91 is second), 4 × 5 for N14's queues, 4 × 5 for N3's. Locks: 2 per push/exchange.
    assert_eq!(
        (attempt.rqs_examined, attempt.tasks_examined, attempt.locks),
        (1 + 1 + 1 + 3 + 11 + 16, 6 + 2 + 20 + 20, 8)
    );
    let (received, rejected) = sc.apply(0, 5, attempt);
    assert_eq!(rejected, 0);
    assert_eq!(received, vec![10, 10, 11, 0, 24]);
    assert_eq!(sc.runqueue(0), vec![37, 1, 9, 91]);
    assert_eq!(&sc.runqueue(10)[4..], &[45, 118]);
    assert_eq!(sc.runqueue(11).len(), 5);
    assert!(sc.runqueue(11).contains(&31) && !sc.runqueue(11).contains(&91));
    assert_eq!(sc.runqueue(24).last(), Some(&17));
}

fn moved(a: &Attempt) -> Vec<usize> {
    a.moves.iter().map(|m| m.pid).collect()
}

#[test]
fn variants_and_nearest_level_are_options() {
    let s = m1();
    let sc = worked_example(&s);
    let v = sc.view();
    let only = |v1, v2| {
        origin_aware(
            &s,
            Options {
                variant1: v1,
                variant2: v2,
                ..Options::default()
            },
        )
    };
    // Without variant 1, variant 2 places p31 instead: N12 is at 40 from N5, nearer than N0's
    // 60, and P24 (3) is the first CPU lighter than P0 (5) in N5's order (N9 N10 N11 at 20,
    // N2 N4 N14 at 30, N7 N12 at 40); then P0 (4) finds nothing lighter for p17.
    assert_eq!(moved(&only(false, true).si_lb(&v, 0)), vec![45, 118, 31]);
    // Without variant 2, p17 stays.
    assert_eq!(
        moved(&only(true, false).si_lb(&v, 0)),
        vec![45, 118, 31, 91]
    );
    assert_eq!(moved(&only(false, false).si_lb(&v, 0)), vec![45, 118]);
    // Moving nearest-level processes too: p9 (N1 at 20) is examined, but N1's CPUs hold 6,
    // none from N0, and no node is nearer N1 than N0 — it stays anyway.
    let near = origin_aware(
        &s,
        Options {
            leave_nearest: false,
            ..Options::default()
        },
    );
    let a = near.si_lb(&v, 0);
    assert_eq!(moved(&a), vec![45, 118, 31, 91, 17]);
    assert!(
        a.rqs_examined
            > origin_aware(&s, Options::default())
                .si_lb(&v, 0)
                .rqs_examined
    );
    // Below the minimum system load, SI-LB does nothing (187 tasks on 32 CPUs ≈ 5.84).
    let idle = origin_aware(
        &s,
        Options {
            min_load: 5.9,
            ..Options::default()
        },
    );
    assert!(idle.si_lb(&v, 0).moves.is_empty());
    let busy = origin_aware(
        &s,
        Options {
            min_load: 5.8,
            ..Options::default()
        },
    );
    assert_eq!(busy.si_lb(&v, 0).moves.len(), 5);
}

#[test]
fn cycles_alternate_ri_lb_and_si_lb() {
    let s = m1();
    let sc = worked_example(&s);
    let v = sc.view();
    let mut p = origin_aware(&s, Options::default());
    let levels = s.d.cpus[0].len();
    let cycle = |p: &mut OriginAware| -> Vec<Attempt> {
        (0..levels)
            .filter_map(|l| p.balance(&v, 0, l, BalanceKind::Periodic))
            .collect()
    };
    // Cycle 0 (even): RI-LB, i.e. linux26's load_balance at every due level — P0 is the
    // busiest CPU of the machine, nothing to pull, no pushes.
    let ri = cycle(&mut p);
    assert!(!ri.is_empty());
    assert!(ri.iter().all(|a| a
        .moves
        .iter()
        .all(|m| m.kind == MigrationKind::Pull && m.to == 0)));
    // Cycle 1 (odd): one SI-LB, the worked example's decision.
    let si = cycle(&mut p);
    assert_eq!(si.len(), 1);
    assert_eq!(si[0], origin_aware(&s, Options::default()).si_lb(&v, 0));
    // Cycle 2: RI-LB again.
    assert!(cycle(&mut p)
        .iter()
        .all(|a| a.moves.iter().all(|m| m.kind != MigrationKind::Push)));
}

#[test]
fn ri_lb_takes_own_cpu_then_own_node_then_nearest_origins() {
    // mehta-m1, CPU 0 idle; CPU 1 (same node) runs p0 and queues p1..p8 (p8 at the tail) with
    // origins P5 (N2, distance 30), P0, P3 (N1, 20), P1 (N0), P10 (N5, 60), P4 (N2, 30),
    // P21 (N10, 60), P9 (N4, 50).
    let s = m1();
    let mut sc = s.scene();
    sc.put(0, 1, 1, 0);
    for (pid, origin) in [5, 0, 3, 1, 10, 4, 21, 9].into_iter().enumerate() {
        sc.put(pid + 1, 1, origin, 0);
    }
    sc.at(1_000_000_000); // every task cache-cold, CPU 1's decayed load at 1151 (integer decay)
    let v = sc.view();
    let mut p = origin_aware(&s, Options::default());
    // Newly idle at level 0 (the node): average 575, imbalance = min(1151 − 575, 575 − 0) = 575:
    // four tasks of 128.
    let a = p
        .balance(&v, 0, 0, BalanceKind::NewIdle)
        .expect("level 0 balances newly idle");
    // origin-aware: p2 (origin P0), p4 (origin node N0), p3 (N1 at 20), then of the two at 30
    // the one nearer the tail (the kernel's order breaks ties): p6 before p1.
    assert_eq!(moved(&a), vec![2, 4, 3, 6]);
    let mut plain = numasim_core::policy::linux26::Linux26::new(&s.ctx());
    let b = plain.balance(&v, 0, 0, BalanceKind::NewIdle).unwrap();
    assert_eq!(moved(&b), vec![8, 7, 6, 5]);
}

#[test]
fn si_all_also_sends_the_running_process_home() {
    use MigrationKind::Push;
    // P0 (N0) runs p0, created on P10 (N5, at 60 from N0), and queues p1, created on P0. Every
    // other CPU is empty. Algorithm 1 step 4 takes the off-node processes that "presently exist
    // in its runqueue": with si=queued there is none (p1 is home); with si=all the running p0
    // is one, and P10 holds 0 < 2: p0 is pushed home, its CPU taking p1.
    let s = m1();
    let mut sc = s.scene();
    sc.put(0, 0, 10, 0);
    sc.put(1, 0, 0, 0);
    sc.at(1_000_000_000);
    let with = |si_running| {
        origin_aware(
            &s,
            Options {
                si_running,
                ..Options::default()
            },
        )
    };
    let queued = with(false).si_lb(&sc.view(), 0);
    assert!(queued.moves.is_empty());
    assert_eq!(queued.tasks_examined, 1);
    let all = with(true).si_lb(&sc.view(), 0);
    assert_eq!(all.moves, vec![mv(0, 0, 10, Push)]);
    assert_eq!((all.tasks_examined, all.rqs_examined, all.locks), (2, 2, 2));
    let (received, rejected) = sc.apply(0, 5, all);
    assert_eq!((received, rejected), (vec![10], 0));
    assert_eq!(sc.runqueue(10), vec![0]);
    assert_eq!(sc.runqueue(0), vec![1]);
}

#[test]
fn the_si_option_is_parsed_and_checked() {
    let o = Options::parse("--policy", &[("si", "all")]).unwrap();
    assert!(o.si_running);
    assert!(!Options::default().si_running);
    assert_eq!(
        Options::parse("--policy", &[("si", "running")])
            .unwrap_err()
            .to_string(),
        "--policy: origin-aware option 'si' must be queued or all, not 'running'"
    );
}
