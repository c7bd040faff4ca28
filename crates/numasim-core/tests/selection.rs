//! Thread-aware and memory-aware selection: hand-computed runqueues of
//! threads of three groups spread in known ways — which thread moves, and why — and the rules
//! they keep from linux26.

use numasim_core::apps::Segment;
use numasim_core::domains::Builder;
use numasim_core::engine::scene::Scene;
use numasim_core::policy::linux26::{Linux26, Selector};
use numasim_core::policy::memory_aware::MemoryAware;
use numasim_core::policy::thread_aware::ThreadAware;
use numasim_core::policy::{self, Attempt, BalanceKind, Policy};
use numasim_core::testutils::{self, Setup};
use numasim_core::workload::{App, Kind, Process, Workload};

/// A thread of group `tgid`.
fn thread(pid: u32, tgid: u32) -> Process {
    Process {
        tgid,
        ..testutils::process(pid, Kind::Cpu, 200)
    }
}

/// 2 nodes × 2 CPUs (CPUs 0, 1 on node 0; 2, 3 on node 1), SLIT 10/20, two-level domains.
/// Groups: A = pids 0–3, B = pids 4–7, C = pids 8–9, S = pid 10 (single-threaded).
fn groups() -> Setup {
    let m = testutils::machine(&testutils::two_level_table(2, 20), 2);
    let tgids = [0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 10];
    let w = Workload {
        apps: Vec::new(),
        processes: (0..11).map(|p| thread(p, tgids[p as usize])).collect(),
    };
    Setup::new(m, Builder::TwoLevel, w)
}

/// CPU 0 runs A0 and queues B0, C0, A1, B1, S (S at the tail); CPU 1 runs A2, queues A3;
/// CPU 3 runs B2, queues B3, C1; CPU 2 is idle. Live threads per node:
///   A: node 0 = 4 of 4 (share 1)       B: node 0 = 2 of 4 (share 1/2), node 1 = 2
///   C: node 0 = 1 of 2 (share 1/2), node 1 = 1         S: node 0 = 1 of 1 (share 1)
/// At rest until 1 s: nobody is cache-hot.
fn spread(s: &Setup) -> Scene<'_> {
    let mut sc = s.scene();
    for (pid, cpu) in [
        (0, 0),
        (4, 0),
        (8, 0),
        (1, 0),
        (5, 0),
        (10, 0),
        (2, 1),
        (3, 1),
        (6, 3),
        (7, 3),
        (9, 3),
    ] {
        sc.put(pid, cpu, cpu, 0);
    }
    sc.at(1_000_000_000);
    sc
}

fn pids(a: &Attempt) -> Vec<usize> {
    a.moves.iter().map(|m| m.pid).collect()
}

#[test]
fn thread_aware_picks_the_least_exclusive_group_then_the_one_with_most_on_the_destination() {
    let s = groups();
    let sc = spread(&s);
    let v = sc.view();
    assert_eq!(sc.runqueue(0), vec![0, 4, 8, 1, 5, 10]);
    // Movable from CPU 0, the kernel's tail-first order: S, B1, A1, C0, B0.
    let mut movable = vec![10, 5, 1, 8, 4];
    let mut moved = Vec::new();
    let mut evaluations = 0;
    let mut order = Vec::new();
    while !movable.is_empty() {
        let at = ThreadAware.pick(&v, 0, 2, &movable, &moved, &mut evaluations);
        order.push(movable.remove(at));
        moved.push(*order.last().unwrap());
    }
    // 1. B1: B and C both have half their threads on node 0; B has 2 on node 1, C 1.
    // 2. B0: B's share is now 1/4 (B1 counted as moved), the lowest.
    // 3. C0: C at 1/2 beats A and S at 1.
    // 4. S before A1: both wholly on node 0 with none on node 1: linux26's order.
    assert_eq!(order, vec![5, 4, 8, 10, 1]);
    // Groups evaluated per pick (S never is): A, B, C; A, B, C; A, C; A; A.
    assert_eq!(evaluations, 3 + 3 + 2 + 1 + 1);
}

#[test]
fn thread_aware_balance_moves_b1_where_linux26_moves_the_tail() {
    let s = groups();
    let top = s.d.cpus[2].len() - 1;
    let mut sc = spread(&s);
    let mut base = Linux26::new(&s.ctx());
    let mut ta = policy::thread_aware::new(&s.ctx());
    let a = base
        .balance(&sc.view(), 2, top, BalanceKind::Periodic)
        .expect("due at 1 s");
    let b = ta
        .balance(&sc.view(), 2, top, BalanceKind::Periodic)
        .expect("due at 1 s");
    // Same imbalance, same number of moves, same CPUs; different threads.
    assert!(!a.moves.is_empty());
    assert_eq!(a.moves.len(), b.moves.len());
    assert_eq!(pids(&a)[0], 10, "linux26 takes the tail");
    assert_eq!(pids(&b)[0], 5, "thread-aware takes B1");
    assert_eq!(a.evaluations, 0);
    assert!(b.evaluations >= 3);
    assert_eq!(a.rqs_examined, b.rqs_examined);
    let (_, rejected) = sc.apply(2, top, b);
    assert_eq!(rejected, 0);
}

#[test]
fn inside_a_node_the_kernel_order_is_unchanged() {
    let s = groups();
    let sc = spread(&s);
    // CPU 1 pulls from CPU 0 at the node level: both policies take the same threads.
    let mut base = Linux26::new(&s.ctx());
    let mut ta = policy::thread_aware::new(&s.ctx());
    let mut ma = policy::memory_aware::new(&s.ctx());
    let a = base.balance(&sc.view(), 1, 0, BalanceKind::Periodic);
    let b = ta.balance(&sc.view(), 1, 0, BalanceKind::Periodic);
    let c = ma.balance(&sc.view(), 1, 0, BalanceKind::Periodic);
    let a = a.expect("due");
    assert!(
        !a.moves.is_empty(),
        "CPU 0 holds 6, CPU 1 two: something moves"
    );
    assert_eq!(Some(&a.moves), b.as_ref().map(|b| &b.moves));
    assert_eq!(Some(&a.moves), c.as_ref().map(|c| &c.moves));
    assert_eq!(b.unwrap().evaluations, 0);
}

/// Applications with sizes: A (pids 0, 1) 400 MB, half shared; B (2, 3) 100 MB, 80 % shared;
/// C (4, 5) 100 MB, 20 % shared; D (6) one thread, 60 MB, half "shared" (with nobody).
fn sized() -> Setup {
    let m = testutils::machine(&testutils::two_level_table(2, 20), 2);
    let tgids = [0, 0, 2, 2, 4, 4, 6];
    let processes: Vec<Process> = (0..7).map(|p| thread(p, tgids[p as usize])).collect();
    let app = |tgid: u32, n: usize, footprint_mb: f64, shared: f64| App {
        tgid,
        name: format!("g{tgid}"),
        footprint_mb,
        shared,
        points: 0,
        plans: vec![
            vec![Segment {
                wait: None,
                work_ns: 200_000_000,
                signal: None,
                sleep_ns: None,
            }];
            n
        ],
        shared_points: false,
    };
    let w = Workload {
        apps: vec![
            app(0, 2, 400.0, 0.5),
            app(2, 2, 100.0, 0.8),
            app(4, 2, 100.0, 0.2),
            app(6, 1, 60.0, 0.5),
        ],
        processes,
    };
    w.validate("test", 4).unwrap();
    Setup::new(m, Builder::TwoLevel, w)
}

#[test]
fn memory_aware_picks_fewest_resident_pages_then_least_shared() {
    let s = sized();
    let mut sc = s.scene();
    // Every thread first runs on node 0 (its pages there); CPU 0 runs pid 0, queues the rest.
    for pid in 0..7 {
        sc.put(pid, 0, 0, 0);
    }
    sc.at(1_000_000_000);
    let v = sc.view();
    // Resident MB = private + shared / threads; shared with others = the group's shared part.
    //   A: 100 + 200/2 = 200, 200    B: 10 + 80/2 = 50, 80    C: 40 + 20/2 = 50, 20
    //   D: 30 + 30 = 60, 0
    assert_eq!(v.resident_mb(1), (200.0, 200.0));
    assert_eq!(v.resident_mb(2), (50.0, 80.0));
    assert_eq!(v.resident_mb(5), (50.0, 20.0));
    assert_eq!(v.resident_mb(6), (60.0, 0.0));
    // Tail-first: 6, 5, 4, 3, 2, 1.
    let mut movable = vec![6, 5, 4, 3, 2, 1];
    let mut order = Vec::new();
    let mut evaluations = 0;
    while !movable.is_empty() {
        let at = MemoryAware.pick(&v, 0, 2, &movable, &order, &mut evaluations);
        order.push(movable.remove(at));
    }
    // C (50, 20) before B (50, 80), then D (60), then A (200); ties in the kernel's order.
    assert_eq!(order, vec![5, 4, 3, 2, 6, 1]);
    assert_eq!(evaluations, 6 + 5 + 4 + 3 + 2 + 1);
}
