//! Automatic NUMA balancing (policy::linux::numa; docs/policies/linux-numa.md): hand-computed
//! cases of the kernel rules — `update_task_scan_period`, the decay of `task_numa_placement`,
//! the preferred node, `should_numa_migrate_memory`'s two-stage filter, `task_numa_find_cpu`
//! / `task_numa_compare` (move to an idle CPU, swap, `SMALLIMP`, `adjust_numa_imbalance`) — a
//! small end-to-end run, and the engine's invariants with NUMA balancing on random runs.

use numasim_core::domains::Builder;
use numasim_core::engine::RunResult;
use numasim_core::interface::{
    Attempt, BalanceKind, MigrationKind, Move, Pid, Policy, PolicyContext, View,
};
use numasim_core::machine::{CpuId, Machine};
use numasim_core::policy::linux::numa::{
    should_migrate, update_task_scan_period, GroupFaults, LastAccess, NumaBalancing, NumaConfig,
};
use numasim_core::policy::linux26::Linux26;
use numasim_core::testutils::{self, Setup};
use numasim_core::workload::{Kind, WorkloadSpec};
use proptest::prelude::*;

mod common;

const PRIVATE: usize = 1;

fn two_nodes(cpus_per_node: usize, n: usize) -> Setup {
    let m = testutils::machine(&testutils::two_level_table(2, 20), cpus_per_node);
    Setup::new(
        m,
        Builder::TwoLevel,
        testutils::workload(Kind::Cpu, &vec![10_000; n]),
    )
}

// ---- update_task_scan_period ------------------------------------------------------------

#[test]
fn scan_period_adapts_to_locality_and_sharing() {
    // (period, [remote, local, failed], shared, private) → period; min 100, max 60000.
    let f = |p, loc, s, pr| update_task_scan_period(p, loc, s, pr, 100, 60_000, 60_000);
    // Mostly private: ps = 10 ≥ 7 → + (10 − 7) · ceil(1000/10) = +300.
    assert_eq!(f(1000, [100, 900, 0], 0, 1000), (1300, false));
    // ps exactly 7 → slot max(1, 0) = 1 → +100.
    assert_eq!(f(1000, [100, 900, 0], 300, 700), (1100, false));
    // Mostly shared and local: ps = 1, lr = 8 → +(8 − 7) · 100.
    assert_eq!(f(1000, [200, 800, 0], 900, 100), (1100, false));
    // Remote and mixed: lr = 2, ps = 4 → −(7 − 4) · 100.
    assert_eq!(f(1000, [800, 200, 0], 600, 400), (700, false));
    // Slot rounds up: period 1234 → slot 124; lr = 0, ps = 0 → −7 · 124 = −868 → 366.
    assert_eq!(f(1234, [10, 0, 0], 10, 0), (1234 - 868, false));
    // Clamped to the minimum.
    assert_eq!(
        update_task_scan_period(1000, [800, 200, 0], 600, 400, 1000, 60_000, 60_000),
        (1000, false)
    );
    // No local and no shared faults: the period doubles, up to the task's maximum.
    assert_eq!(f(1000, [500, 0, 0], 0, 500), (2000, true));
    assert_eq!(
        update_task_scan_period(40_000, [500, 0, 0], 0, 500, 100, 60_000, 60_000),
        (60_000, true)
    );
    // Failed migrations: doubles too.
    assert_eq!(f(1000, [0, 900, 1], 0, 900), (2000, true));
}

// ---- task_numa_placement: decay, preferred node ------------------------------------------

#[test]
fn placement_decays_faults_per_scan_pass_and_picks_the_preferred_node() {
    let s = two_nodes(2, 1);
    let mut scene = s.scene();
    scene.put(0, 0, 0, 0); // runs on node 0, pages on node 0
    let v = scene.view();
    let mut nb = NumaBalancing::new(&s.ctx(), NumaConfig::default());
    // At time 0 no placement runs from the fault path (retry time not passed).
    nb.task_numa_fault(&v, 0, LastAccess::Unset, 1, 100, false);
    assert_eq!(nb.preferred_node(0), None);
    nb.reset_scan(0);
    nb.task_numa_placement(&v, 0);
    let t = nb.task(0).unwrap();
    assert_eq!(t.mem[1][PRIVATE], 100);
    assert_eq!(t.total_faults, 100);
    assert_eq!(nb.preferred_node(0), Some(1));
    // CPU faults on node 0: first placement weighs by LOAD_AVG_MAX / (LOAD_AVG_MAX + 1):
    // (47742 << 16) / 47743 = 65534, × 100 / (100 + 1) = 64885.
    assert_eq!(t.cpu[0][PRIVATE], 64885);
    // No local faults: the period doubles from scan_delay 1000 ms.
    assert_eq!(t.scan_period_ms, 2000);

    // Next pass: 40 local faults. mem[1] = 100 − 50, mem[0] = 40; node 1 still first.
    nb.task_numa_fault(&v, 0, LastAccess::Unset, 0, 40, true);
    nb.reset_scan(0);
    nb.task_numa_placement(&v, 0);
    let t = nb.task(0).unwrap();
    assert_eq!((t.mem[1][PRIVATE], t.mem[0][PRIVATE]), (50, 40));
    assert_eq!(t.total_faults, 90);
    assert_eq!(nb.preferred_node(0), Some(1));
    // No CPU time since the last placement: CPU faults halve (64885 − 32442).
    assert_eq!(t.cpu[0][PRIVATE], 32443);
    // Locality [100, 40]: lr = 2, ps = 10 → +3 · ceil(2000/10) = 2600.
    assert_eq!(t.scan_period_ms, 2600);

    // A placement without a new scan_seq changes nothing.
    nb.task_numa_fault(&v, 0, LastAccess::Unset, 0, 30, true);
    nb.task_numa_placement(&v, 0);
    assert_eq!(nb.task(0).unwrap().mem[0][PRIVATE], 40);
    // Next pass: mem[1] = 25, mem[0] = 40 − 20 + 30 = 50 → the preferred node is now 0.
    nb.reset_scan(0);
    nb.task_numa_placement(&v, 0);
    let t = nb.task(0).unwrap();
    assert_eq!((t.mem[1][PRIVATE], t.mem[0][PRIVATE]), (25, 50));
    assert_eq!(t.total_faults, 75);
    assert_eq!(nb.preferred_node(0), Some(0));
    // Locality [0, 30]: lr = ps = 10 → +3 · 260.
    assert_eq!(t.scan_period_ms, 3380);
}

// ---- should_numa_migrate_memory ------------------------------------------------------------

fn group(cpu: [u64; 2], mem: [u64; 2]) -> GroupFaults {
    GroupFaults {
        mem: vec![[mem[0], 0], [mem[1], 0]],
        cpu: vec![[cpu[0], 0], [cpu[1], 0]],
        total: mem[0] + mem[1],
        nr_tasks: 2,
        active_nodes: 1,
        max_faults_cpu: cpu[0].max(cpu[1]),
    }
}

#[test]
fn two_stage_filter() {
    use LastAccess::*;
    let (src, dst) = (1, 0);
    // Early in life (no preferred node): a first or own access migrates, from anywhere.
    assert!(should_migrate(None, 0, Unset, None, src, dst));
    assert!(should_migrate(None, 0, Own { node: 1 }, None, src, dst));
    // Early by scan_seq ≤ 4 (a preferred node already): own access from another node migrates.
    assert!(should_migrate(Some(1), 4, Own { node: 1 }, None, src, dst));
    // Early (scan_seq ≤ 4) but another task's access from another node: stage one stops it.
    assert!(!should_migrate(
        Some(1),
        4,
        Other { node: 1 },
        None,
        src,
        dst
    ));
    // Another task's access from this node, no group: migrates.
    assert!(should_migrate(
        Some(1),
        4,
        Other { node: 0 },
        None,
        src,
        dst
    ));
    // Past early life (scan_seq 5): own access from another node does not migrate (stage
    // one: the same node must fault twice in a row), from this node it does.
    assert!(!should_migrate(Some(1), 5, Own { node: 1 }, None, src, dst));
    assert!(should_migrate(Some(1), 5, Own { node: 0 }, None, src, dst));
    // Shared, in a group: dst's CPU faults more than 3× src's → migrate (100 > 90).
    let g = group([100, 30], [100, 100]);
    assert!(should_migrate(
        Some(1),
        5,
        Other { node: 0 },
        Some(&g),
        src,
        dst
    ));
    // 60 ≤ 90, but 60·100·3 = 18000 > 30·100·4 = 12000 → migrate.
    let g = group([60, 30], [100, 100]);
    assert!(should_migrate(
        Some(1),
        5,
        Other { node: 0 },
        Some(&g),
        src,
        dst
    ));
    // 40·100·3 = 12000 = 30·100·4: not greater → stays.
    let g = group([40, 30], [100, 100]);
    assert!(!should_migrate(
        Some(1),
        5,
        Other { node: 0 },
        Some(&g),
        src,
        dst
    ));
    // Memory already mostly on dst: 60·50·3 = 9000 < 30·150·4 = 18000 → stays.
    let g = group([60, 30], [150, 50]);
    assert!(!should_migrate(
        Some(1),
        5,
        Other { node: 0 },
        Some(&g),
        src,
        dst
    ));
    // A first access after early life, in a group: the group test decides (12000 = 12000).
    let g = group([40, 30], [100, 100]);
    assert!(!should_migrate(Some(1), 5, Unset, Some(&g), src, dst));
    // Another task's access from a third node: stage one.
    let g = group([100, 0], [0, 100]);
    assert!(!should_migrate(
        Some(1),
        5,
        Other { node: 2 },
        Some(&g),
        src,
        dst
    ));
}

// ---- hinting faults in expectation over a sized group -----------------------------------

#[test]
fn hinting_faults_split_private_and_shared_pages_in_expectation() {
    // A 2-thread application of 1000 MB, half shared: thread 0 (pid 0) runs on node 0 with
    // its private 250 MB and the shared 500 MB first touched on node 1; thread 1 runs on node 0
    // with its private 250 MB there.
    let m = testutils::machine(&testutils::two_level_table(2, 20), 2);
    let mut w = WorkloadSpec::parse("w", "app=canneal:2")
        .unwrap()
        .generate("w", 1, m.node_cpu_lists())
        .unwrap();
    w.apps[0].footprint_mb = 1000.0;
    w.apps[0].shared = 0.5;
    let s = Setup::new(m, Builder::TwoLevel, w);
    let mut scene = s.scene();
    scene.put(0, 0, 2, 0).put(1, 1, 1, 0);
    let mut nb = NumaBalancing::new(&s.ctx(), NumaConfig::default());
    assert!(nb.hinting_faults(&scene.view(), 0).is_none(), "no pass yet");
    assert!(nb.hinting_faults(&scene.view(), 1).is_none());
    scene.at(1_000_000_000);
    // The pass marks 256 of 1000 MB: f = 0.256 of every part; 256 MB × 2560 ns.
    assert_eq!(nb.scan_pass(&scene.view(), 0), 655_360);

    // Thread 0: private 250 MB · 256 · 0.256 = 16384 pages on node 1; shared 500 MB · 256 ·
    // 0.256 / 2 threads = 16384 pages on node 1. No thread has faulted yet: every access is a
    // first one (private, early in life) → all 32768 migrate to node 0: 128 MB of 1000.
    let a = nb.hinting_faults(&scene.view(), 0).expect("faults");
    assert_eq!(a.pages.len(), 1);
    let pm = &a.pages[0];
    assert_eq!((pm.tgid, pm.from_node, pm.to_node), (0, 1, 0));
    assert!((pm.share - 0.128).abs() < 1e-12, "{}", pm.share);
    assert_eq!(a.work_ns, 32_768 * 1_000 + 32_768 * 2_000);
    let st = nb.stats();
    assert_eq!(
        (st.faults, st.faults_local, st.pages_migrated),
        (32_768, 0, 32_768)
    );
    assert_eq!(nb.task(0).unwrap().membuf[0][PRIVATE], 32_768);
    scene.apply(0, 0, a);

    // The move took 128/750 of every part on node 1: shared 500 → 414.67 MB on node 1 and
    // 85.33 MB on node 0. Thread 1: private 16384 pages, local; shared 16384 pages, of which
    // 85.33/500 (2796.1) on node 0 and 13587.9 on node 1. Its last accessor is itself (never
    // faulted: first access) or thread 0 (on node 0), 1/2 each; rounded per bucket: local
    // 1398 + 1398, remote 6794 + 6794 → all 13588 migrate (first access early in life; thread
    // 0's from this node passes stage one, and thread 1 has no group yet).
    let a = nb.hinting_faults(&scene.view(), 1).expect("faults");
    let st = nb.stats();
    assert_eq!(st.faults, 32_768 + 16_384 + 2 * 1_398 + 2 * 6_794);
    assert_eq!(st.faults_local, 32_768 - 13_588);
    assert_eq!(st.pages_migrated, 32_768 + 13_588);
    assert_eq!(a.pages.len(), 1);
    let t1 = nb.task(1).unwrap();
    // Private: its own pages and first accesses; shared: thread 0's, which made it join the
    // group.
    assert_eq!(t1.membuf[0][PRIVATE], 16_384 + 1_398 + 6_794);
    assert_eq!(t1.membuf[0][0], 1_398 + 6_794);
    assert!(t1.in_group);
    assert_eq!(nb.group(0).map(|g| g.nr_tasks), Some(1));
}

// ---- task_numa_migrate: move, swap --------------------------------------------------------

/// `pid` with `faults[n]` private faults on node n, placed once so they are its statistics.
fn with_faults(nb: &mut NumaBalancing, v: &View<'_>, pid: Pid, faults: &[u64]) {
    for (node, &f) in faults.iter().enumerate() {
        if f > 0 {
            nb.task_numa_fault(v, pid, LastAccess::Unset, node, f, false);
        }
    }
    nb.reset_scan(pid);
    nb.task_numa_placement(v, pid);
}

#[test]
fn preferred_node_appears_and_the_task_moves_to_an_idle_cpu_there() {
    let s = two_nodes(2, 1);
    let mut scene = s.scene();
    scene.put(0, 0, 0, 0);
    let mut nb = NumaBalancing::new(&s.ctx(), NumaConfig::default());
    {
        let v = scene.view();
        with_faults(&mut nb, &v, 0, &[0, 100]);
    }
    assert_eq!(nb.preferred_node(0), Some(1));
    scene.at(5_000_000);
    let attempt = nb.numa_migrate_preferred(&scene.view(), 0).expect("a move");
    // Node 1 is empty: imbalance max(0, (0 + 1) − (1 − 1)) = 1, dst_running 1 ≤ imb_numa_nr
    // max(1, 2 >> 3) = 1 and 1 ≤ NUMA_IMBALANCE_MIN → 0: move to its first idle CPU, 2.
    assert_eq!(
        attempt.moves,
        vec![Move {
            pid: 0,
            from: 0,
            to: 2,
            kind: MigrationKind::Active
        }]
    );
    // Retry in min(1000 ms, 2000 ms / 16) = 125 ms.
    assert_eq!(
        nb.task(0).unwrap().migrate_retry_ns,
        5_000_000 + 125_000_000
    );
    let (got, rejected) = scene.apply(0, 0, attempt);
    assert_eq!((got, rejected), (vec![2], 0));
    assert_eq!(scene.runqueue(2), vec![0]);
    assert_eq!(nb.stats().task_moves, 1);
}

#[test]
fn a_move_that_would_unbalance_a_node_with_spare_capacity_waits_for_imb_numa_nr() {
    // Node 0: p (CPU 0) and r (CPU 1); node 1: q on CPU 2, CPU 3 idle.
    for (imb, expect) in [(None, None), (Some(2), Some(3))] {
        let s = two_nodes(2, 3);
        let mut scene = s.scene();
        scene.put(0, 0, 0, 0).put(1, 1, 1, 0).put(2, 2, 2, 0);
        let cfg = NumaConfig {
            imb_numa_nr: imb,
            ..NumaConfig::default()
        };
        let mut nb = NumaBalancing::new(&s.ctx(), cfg);
        let v = scene.view();
        with_faults(&mut nb, &v, 0, &[0, 100]);
        // src_running = 2 − 1, dst_running = 1 + 1: imbalance 1. With imb_numa_nr 1,
        // 2 > 1 keeps it (no move to the idle CPU; no swap while node 1 has spare
        // capacity); with imb_numa_nr 2 it is forgiven → move to idle CPU 3.
        let got = nb.task_numa_migrate(&v, 0).map(|a| a.moves);
        let want = expect.map(|to| {
            vec![Move {
                pid: 0,
                from: 0,
                to,
                kind: MigrationKind::Active,
            }]
        });
        assert_eq!(got, want, "imb_numa_nr {imb:?}");
    }
}

#[test]
fn a_swap_when_the_preferred_node_is_busy_and_smallimp_rejects_tiny_gains() {
    // One CPU per node: p on node 0 prefers node 1, q on node 1 prefers node 0.
    let m = testutils::machine(&testutils::two_level_table(2, 20), 1);
    let s = Setup::new(
        m,
        Builder::TwoLevel,
        testutils::workload(Kind::Cpu, &[10_000, 10_000]),
    );
    let mut scene = s.scene();
    scene.put(0, 0, 0, 0).put(1, 1, 1, 0);
    let v = scene.view();
    let mut nb = NumaBalancing::new(&s.ctx(), NumaConfig::default());
    with_faults(&mut nb, &v, 0, &[0, 100]);
    with_faults(&mut nb, &v, 1, &[100, 0]);
    // Node 1 fully busy (1 task, 1 CPU): moving p alone would make the loads 0 : 2048
    // (load_too_imbalanced) → no move. Swap: taskimp = 1000 − 0; + tw(q, 0) − tw(q, 1) =
    // 1000 → 2000; q prefers the source node: + 2000/8 → 2250 ≥ SMALLIMP.
    let a = nb.task_numa_migrate(&v, 0).expect("a swap");
    assert_eq!(
        a.moves,
        vec![
            Move {
                pid: 0,
                from: 0,
                to: 1,
                kind: MigrationKind::Exchange
            },
            Move {
                pid: 1,
                from: 1,
                to: 0,
                kind: MigrationKind::Exchange
            },
        ]
    );
    assert_eq!(nb.stats().task_swaps, 1);

    // Tiny gains: p 49 : 51 (taskimp 510 − 490 = 20), q 50 : 50 (prefers node 0, weights
    // 500 : 500): imp = 20 + 0, + 20/8 = 22 < SMALLIMP 30 → nothing.
    let mut scene = s.scene();
    scene.put(0, 0, 0, 0).put(1, 1, 1, 0);
    let v = scene.view();
    let mut nb = NumaBalancing::new(&s.ctx(), NumaConfig::default());
    with_faults(&mut nb, &v, 0, &[49, 51]);
    with_faults(&mut nb, &v, 1, &[50, 50]);
    assert_eq!(nb.preferred_node(0), Some(1));
    assert_eq!(nb.preferred_node(1), Some(0));
    assert_eq!(nb.task_numa_migrate(&v, 0), None);
    assert_eq!(nb.stats().task_swaps, 0);
}

#[test]
fn migrate_degrades_locality() {
    let m = testutils::machine(&testutils::two_level_table(2, 20), 2);
    let s = Setup::new(
        m,
        Builder::TwoLevel,
        testutils::workload(Kind::Cpu, &[10_000, 10_000, 10_000]),
    );
    let mut scene = s.scene();
    // p (0) queued behind r (1) on CPU 0; q (2) on CPU 2.
    scene.put(1, 0, 0, 0).put(0, 0, 0, 0).put(2, 2, 2, 0);
    let v = scene.view();
    let mut nb = NumaBalancing::new(&s.ctx(), NumaConfig::default());
    assert_eq!(
        nb.degrades_locality(&v, 0, 0, 2, false),
        -1,
        "no faults yet"
    );
    with_faults(&mut nb, &v, 0, &[70, 30]);
    assert_eq!(nb.degrades_locality(&v, 0, 0, 1, false), -1, "same node");
    // Leaving its preferred node, where not every task prefers it (2 running, 1 preferring).
    assert_eq!(nb.degrades_locality(&v, 0, 0, 2, false), 1);
    with_faults(&mut nb, &v, 1, &[100, 0]);
    // Both tasks on CPU 0 prefer node 0: no opinion.
    assert_eq!(nb.degrades_locality(&v, 0, 0, 2, false), -1);
    // Toward the preferred node: improves.
    assert_eq!(nb.degrades_locality(&v, 0, 2, 0, false), 0);
    // CPU 0: two tasks with a preferred node, both on it; CPU 2: q without one.
    assert_eq!(nb.rq_numa_counts(&v, 0), (2, 2));
    assert_eq!(nb.rq_numa_counts(&v, 2), (0, 0));
    // q prefers node 1 (faults 10 : 60 : …): between two other nodes the weights decide.
    let m3 = testutils::machine(&testutils::two_level_table(3, 20), 1);
    let s3 = Setup::new(
        m3,
        Builder::TwoLevel,
        testutils::workload(Kind::Cpu, &[10_000]),
    );
    let mut scene3 = s3.scene();
    scene3.put(0, 0, 0, 0);
    let v3 = scene3.view();
    let mut nb3 = NumaBalancing::new(&s3.ctx(), NumaConfig::default());
    with_faults(&mut nb3, &v3, 0, &[30, 10, 60]);
    // From node 0 (weight 300) to node 1 (weight 100): degrades; idle destination: −1.
    assert_eq!(nb3.degrades_locality(&v3, 0, 0, 1, false), 1);
    assert_eq!(nb3.degrades_locality(&v3, 0, 0, 1, true), -1);
    assert_eq!(nb3.degrades_locality(&v3, 0, 1, 0, false), 0);
}

// ---- end to end ------------------------------------------------------------------------------

/// linux26 whose periodic balancing at level 0 runs the NUMA tick of the task on its CPU.
struct WithNuma {
    inner: Linux26,
    numa: NumaBalancing,
}

impl WithNuma {
    fn new(ctx: &PolicyContext<'_>) -> Self {
        Self {
            inner: Linux26::new(ctx),
            numa: NumaBalancing::new(ctx, NumaConfig::default()),
        }
    }
}

impl Policy for WithNuma {
    fn name(&self) -> &'static str {
        "linux26+numa"
    }
    fn place_new(&mut self, v: &View<'_>, pid: Pid, spawn: CpuId) -> Option<CpuId> {
        self.inner.place_new(v, pid, spawn)
    }
    fn place_wakeup(&mut self, v: &View<'_>, pid: Pid, prev: CpuId) -> Option<CpuId> {
        self.inner.place_wakeup(v, pid, prev)
    }
    fn next_periodic_ns(&self, v: &View<'_>, cpu: CpuId) -> Option<u64> {
        self.inner.next_periodic_ns(v, cpu)
    }
    fn balance(
        &mut self,
        v: &View<'_>,
        cpu: CpuId,
        level: usize,
        kind: BalanceKind,
    ) -> Option<Attempt> {
        let numa = if level == 0 && kind == BalanceKind::Periodic {
            self.numa.task_tick(v, cpu)
        } else {
            None
        };
        let inner = self.inner.balance(v, cpu, level, kind);
        match (numa, inner) {
            (None, x) | (x, None) => x,
            (Some(mut a), Some(b)) => {
                a.rqs_examined += b.rqs_examined;
                a.tasks_examined += b.tasks_examined;
                a.locks += b.locks;
                a.evaluations += b.evaluations;
                a.moves.extend(b.moves);
                a.pages.extend(b.pages);
                a.active_from = b.active_from;
                Some(a)
            }
        }
    }
    fn active_balance(&mut self, v: &View<'_>, busiest: CpuId, target: CpuId) -> Option<Attempt> {
        self.inner.active_balance(v, busiest, target)
    }
    fn extra_metrics(&self) -> Vec<(String, f64)> {
        let named = self.numa.stats().metrics().into_iter();
        named.map(|(k, v)| (k.to_owned(), v)).collect()
    }
}

#[test]
fn a_long_task_with_remote_memory_ends_up_local() {
    // One CPU-bound task (6 s of work, m = 0.5) on CPU 0 with its pages on node 1 (distance
    // 20): 1/1.5 of its speed while remote. linux26's busy balancing at level 0 (every 64 ms
    // and more) is where the wrapper ticks NUMA balancing.
    let run = |numa: bool| -> (RunResult, Option<NumaBalancing>) {
        let s = two_nodes(2, 1);
        let mut w = s.w.clone();
        w.processes[0].demand_ns = 6_000_000_000;
        let s = Setup::new(s.m.clone(), Builder::TwoLevel, w);
        let mut scene = s.scene();
        scene.put(0, 0, 2, 0);
        if numa {
            let mut p = WithNuma::new(&s.ctx());
            let r = scene.finish(&mut p).unwrap();
            (r, Some(p.numa))
        } else {
            let mut p = Linux26::new(&s.ctx());
            (scene.finish(&mut p).unwrap(), None)
        }
    };
    let (plain, _) = run(false);
    let (with, numa) = run(true);
    let numa = numa.unwrap();
    let st = numa.stats();
    // Without NUMA balancing: 6000 ms of work at 1/1.5 = 9000 ms.
    assert!((plain.processes[0].completion_ms - 9000.0).abs() < 1.0);
    // Pass 1 comes at the first tick past 1 s of CPU time (scan_delay; the wrapper's ticks
    // are linux26's busy balancing, here at 1.216 s): it marks all 256 MB (the footprint of a
    // process without sizes) and the task takes 65536 private first faults at once, all
    // remote and early in life → every page migrates to node 0. The placement at those faults
    // sees no faults yet: period 1000 → 2000 ms, next scan at 3.216 s. Pass 2 at the first
    // tick past 1023 ms (stamp + 2 ticks + 32 × 655 µs of scanning) + 2000 ms of CPU time:
    // 65536 faults, all local; its placement sees pass 1's (remote) faults: node 0 preferred,
    // no local faults yet → period 4000 ms, and the task ends before a third pass.
    assert_eq!(st.scan_passes, 2);
    assert_eq!(st.pages_migrated, 65_536);
    assert_eq!((st.faults, st.faults_local), (131_072, 65_536));
    assert_eq!(st.local_share(), 0.5);
    assert_eq!(numa.preferred_node(0), Some(0));
    assert_eq!(st.task_moves + st.task_swaps, 0);
    assert!(st.cpu_ns_with_preferred > 0);
    assert_eq!(st.preferred_residency(), 1.0);
    let p = &with.processes[0];
    assert!(p.remote_share < 0.25, "remote share {}", p.remote_share);
    assert!(
        p.completion_ms < 7500.0,
        "{} vs {}",
        p.completion_ms,
        plain.processes[0].completion_ms
    );
    // The counters reach the run's summary; a policy without any adds nothing to it.
    let metric = |name: &str| {
        with.summary
            .policy_metrics
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, x)| *x)
    };
    assert_eq!(metric("numa_pages_migrated"), Some(65_536.0));
    assert_eq!(metric("numa_hint_faults_local_share"), Some(0.5));
    assert!(plain.summary.policy_metrics.is_empty());
    assert!(!plain.summary_json().contains("policy_metrics"));
    assert!(with
        .summary_json()
        .contains("\"policy_metrics\":[[\"numa_scan_passes\",2.0]"));
    // The work charged: each pass 256 MB × 2560 ns; each fault 1 µs; each page moved 2 µs.
    assert_eq!(st.cost_ns, 2 * 655_360 + 131_072 * 1_000 + 65_536 * 2_000);
}

#[test]
fn the_linux_policy_brings_remote_memory_local_only_with_numa_balancing_on() {
    // The same task as above (6 s of work, m = 0.5, on CPU 0, pages on node 1) under the
    // `linux` policy itself, which ticks NUMA balancing at every tick of a busy CPU: with
    // `numa_balancing=off` it runs remote throughout (9000 ms, as computed above; nothing
    // moves a lone task on an otherwise idle machine); on (the default on a two-node
    // machine), its first scan pass comes once it has run 1 s, every page is a private
    // early-life fault and migrates to node 0, and the rest runs local.
    let run = |spec: &str| -> RunResult {
        let s = two_nodes(2, 1);
        let mut w = s.w.clone();
        w.processes[0].demand_ns = 6_000_000_000;
        let s = Setup::new(s.m.clone(), Builder::Linux, w);
        let mut policy = numasim_core::policy::by_name(spec, &s.ctx()).unwrap();
        let mut scene = s.scene();
        scene.with_pelt();
        scene.put(0, 0, 2, 0);
        scene.finish(policy.as_mut()).unwrap()
    };
    let off = run("linux:numa_balancing=off");
    let on = run("linux");
    assert!((off.processes[0].completion_ms - 9000.0).abs() < 1.0);
    assert!(off.summary.policy_metrics.is_empty());
    let metric = |name: &str| {
        on.summary
            .policy_metrics
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, x)| *x)
    };
    assert_eq!(metric("numa_pages_migrated"), Some(65_536.0));
    assert!(metric("numa_scan_passes") >= Some(1.0));
    assert_eq!(metric("numa_task_moves"), Some(0.0));
    assert_eq!(on.summary.migrations, 0, "the task itself never moves");
    // 1 s or a little more remote (1.5 s of wall time), the rest local, plus the faults' and
    // copies' cost: well under the 9 s of the remote run.
    let done = on.processes[0].completion_ms;
    assert!((6500.0..7500.0).contains(&done), "{done}");
}

#[test]
fn a_task_s_numa_tick_is_due_when_it_is_new_has_faults_to_take_or_has_run_past_its_stamp() {
    // CPU 0 runs task 0 since 0 ns. Its CPU was last accounted then: 0 ns accounted, and at
    // 4 ms 4 ms of CPU time up to now.
    let s = two_nodes(2, 1);
    let mut scene = s.scene();
    scene.put(0, 0, 0, 0);
    let mut nb = NumaBalancing::new(&s.ctx(), NumaConfig::default());
    scene.at(4_000_000);
    assert_eq!(scene.view().accounted_cpu_ns(0), 0);
    assert_eq!(scene.view().cpu_time_ns(0), 4_000_000);
    assert_eq!(
        nb.next_tick_due_ns(&scene.view(), 1),
        None,
        "nothing runs on CPU 1"
    );
    // Not met yet: its tick is due now (init_numa_balancing at its first tick).
    assert_eq!(nb.next_tick_due_ns(&scene.view(), 0), Some(4_000_000));
    // Met (node_stamp 0, period = the 1 s scan delay), with no faults, no preferred node and
    // no pass to take: nothing is due until its CPU time passes 1 s, 996 ms on as it runs.
    assert!(nb.task_tick(&scene.view(), 0).is_none());
    assert_eq!(nb.next_tick_due_ns(&scene.view(), 0), Some(1_000_000_001));
    scene.at(600_000_000);
    assert!(nb.task_tick(&scene.view(), 0).is_none());
    assert_eq!(nb.next_tick_due_ns(&scene.view(), 0), Some(1_000_000_001));
    // A pass over its group's pages (the group's first scan, due at 4 ms + 1 s) leaves it
    // faults to take: its tick is due at once.
    scene.at(1_004_000_000);
    assert_eq!(nb.scan_pass(&scene.view(), 0), 655_360);
    assert_eq!(nb.next_tick_due_ns(&scene.view(), 0), Some(1_004_000_000));
}

#[test]
fn with_every_tick_kept_numa_balancing_does_what_it_does_under_nohz() {
    // The lone task above under `linux:nohz=off`, where the busy CPU's timer waits for the
    // task's NUMA work instead of firing at every jiffy: its first tick, then the ticks at
    // which its CPU time passes its scan stamp (1 s; then 1 023 ms + the 2 s period). NUMA
    // balancing does what it does under nohz, where the CPU ticks every jiffy anyway: the same
    // two passes, faults and page moves, every page brought local.
    let run = |spec: &str| -> RunResult {
        let s = two_nodes(2, 1);
        let mut w = s.w.clone();
        w.processes[0].demand_ns = 6_000_000_000;
        let s = Setup::new(s.m.clone(), Builder::Linux, w);
        let mut policy = numasim_core::policy::by_name(spec, &s.ctx()).unwrap();
        let mut scene = s.scene();
        scene.with_pelt();
        scene.put(0, 0, 2, 0);
        scene.finish(policy.as_mut()).unwrap()
    };
    let on = run("linux:nohz=off");
    let with_nohz = run("linux");
    assert_eq!(on.summary.policy_metrics, with_nohz.summary.policy_metrics);
    let migrated = on
        .summary
        .policy_metrics
        .iter()
        .find(|(n, _)| n == "numa_pages_migrated")
        .map(|(_, x)| *x);
    assert_eq!(migrated, Some(65_536.0));
}

// ---- properties ------------------------------------------------------------------------------

fn machine() -> impl Strategy<Value = Machine> {
    (1usize..4, 1usize..3).prop_flat_map(|(n, cpn)| {
        proptest::collection::vec(11u32..=40, n * (n - 1) / 2).prop_map(move |upper| {
            let mut rows = vec![vec![10u32; n]; n];
            let pairs = (0..n).flat_map(|i| (i + 1..n).map(move |j| (i, j)));
            for ((i, j), v) in pairs.zip(upper) {
                rows[i][j] = v;
                rows[j][i] = v;
            }
            testutils::machine(&rows, cpn)
        })
    })
}

fn workload() -> impl Strategy<Value = String> {
    prop_oneof![
        (1usize..6, 0u32..3, 1usize..4).prop_map(|(n, kind, threads)| {
            let kind = ["cpu", "io", "mixed"][kind as usize];
            format!(
                "n={n},kind={kind},exec=500-8000,arrival=uniform:50,burst=30,wait=10,threads={threads}"
            )
        }),
        (1usize..3).prop_map(|n| format!("app=swaptions:3,n={n}")),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn numa_balancing_keeps_the_engine_invariants(m in machine(), spec in workload(), b in 0usize..5, ai in 0usize..ASSUMPTIONS.len(), seed in 0u64..1000) {
        let (b, assume) = (Builder::ALL[b], ASSUMPTIONS[ai]);
        let (r, numa, n) = run_with_numa_on(&m, b, assume, &spec, seed);
        sound(&r, n)?;
        // The same run again gives the same result (a deterministic model).
        let (r2, numa2, _) = run_with_numa_on(&m, b, assume, &spec, seed);
        prop_assert_eq!(numa.stats(), numa2.stats());
        prop_assert_eq!(r.summary.makespan_ms, r2.summary.makespan_ms);
        let st = numa.stats();
        prop_assert!(st.faults_local <= st.faults);
        prop_assert!(st.cpu_ns_on_preferred <= st.cpu_ns_with_preferred);
    }
}

/// The engine's invariants (`common::sound`: every process completes once and did its work,
/// slices add up to CPU time, nothing on two CPUs, no decision refused) for a run of `n`
/// processes.
fn sound(r: &RunResult, n: usize) -> Result<(), TestCaseError> {
    prop_assert_eq!(r.processes.len(), n);
    common::sound(r)
}

fn run_with_numa(m: &Machine, spec: &str, seed: u64) -> (RunResult, NumaBalancing, usize) {
    run_with_numa_on(m, Builder::TwoLevel, ASSUMPTIONS[0], spec, seed)
}

/// Each pair of values of any two assumptions appears in one of these.
const ASSUMPTIONS: [&str; 4] = [
    "memory=first-run,slice=wall,wake=previous",
    "memory=first-run,slice=work,wake=idlest",
    "memory=parent,slice=wall,wake=idlest",
    "memory=parent,slice=work,wake=previous",
];

fn run_with_numa_on(
    m: &Machine,
    b: Builder,
    assume: &str,
    spec: &str,
    seed: u64,
) -> (RunResult, NumaBalancing, usize) {
    let mut s = Setup::from_spec(m.clone(), b, spec, seed);
    s.config.record_trace = true;
    s.config.assumptions = numasim_core::assumptions::Assumptions::parse("test", assume).unwrap();
    let mut p = WithNuma::new(&s.ctx());
    let r = numasim_core::engine::run(&s.m, &s.d, &s.w, &mut p, &s.config).unwrap();
    (r, p.numa, s.w.processes.len())
}

#[test]
fn long_threaded_runs_move_and_swap_tasks_soundly() {
    // Six 3-thread groups of 10–40 s on 3 nodes × 2 CPUs: threads are moved and swapped
    // toward their groups' nodes; the engine takes every decision.
    let m = testutils::machine(&testutils::two_level_table(3, 20), 2);
    let spec = "n=6,kind=cpu,exec=10000-40000,arrival=uniform:50,threads=3";
    let (r, numa, n) = run_with_numa(&m, spec, 7);
    sound(&r, n).unwrap();
    let st = numa.stats();
    assert!(st.task_moves + st.task_swaps > 0, "{st:?}");
    assert!(
        st.pages_migrated > 0 && st.faults_local < st.faults,
        "{st:?}"
    );
    assert!(st.preferred_residency() > 0.5, "{st:?}");
}
