//! Thread-aware and memory-aware selection inside `linux`'s `detach_tasks`
//! (`linux:select=…`): a hand-computed runqueue of threads of three groups and a single-threaded
//! process — which threads the kernel's order, thread-aware and memory-aware take on a pull
//! between nodes, with the evaluations each makes; inside a node nothing changes.

use numasim_core::apps::Segment;
use numasim_core::domains::Builder;
use numasim_core::engine::scene::Scene;
use numasim_core::interface::{Attempt, BalanceKind, Pid, Policy};
use numasim_core::policy::linux::{Linux, Options, Select};
use numasim_core::testutils::{self, Setup};
use numasim_core::workload::{App, Kind, Process, Workload};

/// 2 nodes × 2 CPUs (CPUs 0, 1 on node 0; 2, 3 on node 1), SLIT 10/20, `linux` domains.
/// Applications (resident MB per thread = footprint / threads, the group's shared MB):
///   A = pids 0–3, 400 MB, half shared: 100 MB each, 200 shared
///   B = pids 4–7, 100 MB, 80 % shared:  25 MB each,  80 shared
///   C = pids 8–9,  20 MB, 20 % shared:  10 MB each,   4 shared
///   S = pid 10, one thread, 60 MB:      60 MB,         0 shared (with nobody)
fn setup() -> Setup {
    let m = testutils::machine(&testutils::two_level_table(2, 20), 2);
    let tgids = [0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 10];
    let processes: Vec<Process> = (0..11)
        .map(|p| Process {
            tgid: tgids[p as usize],
            ..testutils::process(p, Kind::Cpu, 200)
        })
        .collect();
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
            app(0, 4, 400.0, 0.5),
            app(4, 4, 100.0, 0.8),
            app(8, 2, 20.0, 0.2),
            app(10, 1, 60.0, 0.5),
        ],
        processes,
    };
    w.validate("test", 4).unwrap();
    Setup::new(m, Builder::Linux, w)
}

/// CPU 0 runs A0 and queues A1, C0, B0, B1, S (A1 least recently run: the tail of cfs_tasks);
/// CPU 1 runs A2, queues A3; CPU 3 runs B2, queues B3, C1; CPU 2 is idle. Each thread's pages
/// are on the node it is on. At rest until 1 s: nobody is cache-hot, no PELT, no NUMA faults.
/// Live threads per node:
///   A: node 0 = 4 of 4 (share 1)     B: node 0 = 2 of 4 (share 1/2), node 1 = 2
///   C: node 0 = 1 of 2 (share 1/2), node 1 = 1          S: node 0 = 1 of 1
fn scene(s: &Setup) -> Scene<'_> {
    let mut sc = s.scene();
    for (pid, cpu) in [
        (0, 0),
        (1, 0),
        (8, 0),
        (4, 0),
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

fn linux(s: &Setup, select: Select) -> Linux {
    Linux::new(
        &s.ctx(),
        Options {
            select,
            ..Options::default()
        },
    )
}

fn pulled(a: &Attempt) -> Vec<Pid> {
    a.moves.iter().map(|m| m.pid).collect()
}

/// CPU 2's periodic pass at the NUMA level (the top one).
fn numa_pull(s: &Setup, select: Select) -> (Attempt, Linux) {
    let sc = scene(s);
    let top = s.d.cpus[2].len() - 1;
    let mut p = linux(s, select);
    let a = p
        .balance(&sc.view(), 2, top, BalanceKind::Periodic)
        .expect("due at 1 s");
    (a, p)
}

fn metric(p: &Linux, name: &str) -> f64 {
    p.extra_metrics()
        .into_iter()
        .find(|(n, _)| *n == name)
        .map(|(_, x)| x)
        .unwrap_or_else(|| panic!("no metric {name}"))
}

#[test]
fn the_scene_is_the_one_computed_by_hand() {
    let s = setup();
    let sc = scene(&s);
    assert_eq!(sc.runqueue(0), vec![0, 1, 8, 4, 5, 10]);
    let v = sc.view();
    assert_eq!(v.resident_mb(1), (100.0, 200.0));
    assert_eq!(v.resident_mb(4), (25.0, 80.0));
    assert_eq!(v.resident_mb(8), (10.0, 4.0));
    assert_eq!(v.resident_mb(10), (60.0, 0.0));
    assert_eq!(v.group_live_on_node(4, 0), (2, 4));
    assert_eq!(v.group_live_on_node(8, 1), (1, 2));
}

#[test]
fn the_kernel_takes_the_tail_of_cfs_tasks() {
    // CPU 2 (idle) at the NUMA level: node 0 holds 8 tasks, node 1 three, no PELT (both
    // groups has_spare); node 0's group prefers siblings and sibling_imbalance = 8 − 3 = 5 > 1
    // forces the balance; imbalance 5 (imb_numa_nr 1 < 3 + 1 keeps it) >> 1 = 2 tasks, from
    // CPU 0 (the most tasks). The walk takes the first two that pass: A1 then C0, and stops.
    let s = setup();
    let (a, p) = numa_pull(&s, Select::Kernel);
    assert_eq!(pulled(&a), vec![1, 8]);
    assert!(a.moves.iter().all(|m| m.from == 0 && m.to == 2));
    assert_eq!(a.tasks_examined, 2);
    assert_eq!(a.evaluations, 0);
    assert!(
        p.extra_metrics()
            .iter()
            .all(|(n, _)| !n.starts_with("select")),
        "the default reports no selection"
    );
}

#[test]
fn thread_aware_takes_both_threads_of_the_least_exclusive_group() {
    // Eligible in the walk's order: A1, C0, B0, B1, S (every one of the 6 looked at).
    // Pick 1: A 4/4, C 1/2 (1 on node 1), B 2/4 (2 on node 1); S single, not evaluated.
    //         B and C tie at 1/2; B has more on the destination → B0 (before B1 in the walk).
    //         Evaluations: A, C, B = 3 (B1 is B's, already scored).
    // Pick 2: B counts B0 as moved: (2 − 1)/4 = 1/4 < C 1/2 < A 1 → B1. Evaluations: A, C, B = 3.
    let s = setup();
    let (a, p) = numa_pull(&s, Select::ThreadAware);
    assert_eq!(pulled(&a), vec![4, 5]);
    assert_eq!(a.evaluations, 3 + 3);
    assert_eq!(a.tasks_examined, 6, "the five queued and the running one");
    assert_eq!(metric(&p, "select_passes"), 1.0);
    assert_eq!(metric(&p, "select_picks"), 2.0);
    assert_eq!(metric(&p, "select_picks_with_choice"), 2.0);
    assert_eq!(
        metric(&p, "select_picks_changed"),
        2.0,
        "the kernel's picks: A1, C0"
    );
    assert_eq!(metric(&p, "select_evaluations"), 6.0);
}

#[test]
fn memory_aware_takes_the_fewest_resident_pages() {
    // Pick 1: resident A1 100, C0 10, B0 25, B1 25, S 60 → C0. Evaluations: 5 candidates.
    // Pick 2: A1 100, B0 25, B1 25, S 60 → B0 (the first of the tie, shared 80 each).
    //         Evaluations: 4. The first pick is C0 where the kernel's is A1; the second B0
    //         where the kernel's would be the first left, A1: both changed.
    let s = setup();
    let (a, p) = numa_pull(&s, Select::MemoryAware);
    assert_eq!(pulled(&a), vec![8, 4]);
    assert_eq!(a.evaluations, 5 + 4);
    assert_eq!(metric(&p, "select_picks_changed"), 2.0);
    assert_eq!(metric(&p, "select_evaluations"), 9.0);
}

#[test]
fn the_selection_is_charged_as_balancing_work() {
    // The same pass costs cost_per_evaluation_ns more per evaluation (and per task examined)
    // than the kernel's, which looked at 2 tasks.
    let s = setup();
    let (k, _) = numa_pull(&s, Select::Kernel);
    let (t, _) = numa_pull(&s, Select::ThreadAware);
    assert_eq!(k.rqs_examined, t.rqs_examined);
    assert_eq!(k.moves.len(), t.moves.len());
    let c = &s.ctx().config.clone();
    let cost = |a: &Attempt| {
        c.cost_per_task_ns * u64::from(a.tasks_examined)
            + c.cost_per_evaluation_ns * u64::from(a.evaluations)
    };
    assert_eq!(
        cost(&t) - cost(&k),
        4 * c.cost_per_task_ns + 6 * c.cost_per_evaluation_ns
    );
}

#[test]
fn inside_a_node_the_kernel_order_is_kept() {
    // CPU 2 (idle) pulls from CPU 3 (B2 running, B3 and C1 queued) at the node level: no
    // selection, the same move under every option (B3, the tail), no evaluation, no
    // selection pass counted.
    let s = setup();
    let sc = scene(&s);
    for select in [Select::Kernel, Select::ThreadAware, Select::MemoryAware] {
        let mut p = linux(&s, select);
        let a = p
            .balance(&sc.view(), 2, 0, BalanceKind::Periodic)
            .expect("due");
        assert_eq!(pulled(&a), vec![7], "{select:?}");
        assert_eq!(a.evaluations, 0);
        if select != Select::Kernel {
            assert_eq!(metric(&p, "select_passes"), 0.0);
        }
    }
}

#[test]
fn hot_tasks_are_not_candidates() {
    // can_migrate_task comes before the selection: B0 and B1 ran 0.1 ms ago (hot, and the
    // first pass has no failures), so thread-aware chooses among A1, C0 and S: C (1/2) first,
    // then A (4/4) and S (1/1) tie with none on node 1 → A1, first in the walk's order.
    let s = setup();
    let mut sc = s.scene();
    let now = 1_000_000_000;
    for (pid, cpu) in [
        (0, 0),
        (1, 0),
        (8, 0),
        (4, 0),
        (5, 0),
        (10, 0),
        (2, 1),
        (3, 1),
        (6, 3),
        (7, 3),
        (9, 3),
    ] {
        let last = if pid == 4 || pid == 5 {
            now - 100_000
        } else {
            0
        };
        sc.put(pid, cpu, cpu, last);
    }
    sc.at(now);
    let top = s.d.cpus[2].len() - 1;
    let mut p = linux(&s, Select::ThreadAware);
    let a = p
        .balance(&sc.view(), 2, top, BalanceKind::Periodic)
        .expect("due");
    assert_eq!(pulled(&a), vec![8, 1]);
    // Pick 1: A, C evaluated (S not) = 2; pick 2: C counts C0 as moved: 0/2, but C has no
    // other thread here; A evaluated = 1.
    assert_eq!(a.evaluations, 2 + 1);
}

#[test]
fn select_is_an_option_of_linux() {
    for spec in [
        "linux:select=kernel",
        "linux:select=thread-aware",
        "linux:select=memory-aware,numa_balancing=off",
    ] {
        numasim_core::policy::validate("--policy", spec).unwrap();
    }
    let e = numasim_core::policy::validate("--policy", "linux:select=fastest").unwrap_err();
    assert!(
        e.to_string().contains(
            "linux option 'select' must be kernel, thread-aware or memory-aware, not 'fastest'"
        ),
        "{e}"
    );
}
