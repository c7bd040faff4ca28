//! scx-rusty's rules, hand-computed: the balancer's node-level push and closest-task pick
//! (on its pure functions), and through the engine on two-node machines of one CPU each: a
//! transfer the balancer decides is applied at the task's next enqueue, and an idle CPU steals
//! across nodes only from domains with fewer queued tasks than `xnuma_greedy`.

use numasim_core::domains::Builder;
use numasim_core::engine::RunResult;
use numasim_core::policy::scx_rusty::load_balance::{self, LbTask, Transfer};
use numasim_core::policy::MigrationKind;
use numasim_core::testutils::{self, Setup};
use numasim_core::workload::{Kind, Workload};

fn task(pid: usize, load: f64) -> LbTask {
    LbTask {
        pid,
        load,
        dom_mask: u64::MAX,
        preferred_dom_mask: 0,
    }
}

#[test]
fn a_node_level_push_moves_the_closest_task_and_its_amounts_follow() {
    // Three nodes of one domain each, duty-cycle sums 3.25, 1.25, 1.5: loads 325, 125, 150
    // (× 100), total 600, average 200 (17 %: 34). Node 0 (+125) pushes, cutoff 62.5; node 1
    // (−75) and node 2 (−50) pull.
    // Node 0 → node 1 (least loaded first): x = min(125, 75) / 2 = 37.5; of tasks 15, 35, 60,
    // 90, the last ≤ x is 35 (|125 − 35| + |75 − 35| = 130), the first ≥ x is 60 (65 + 15 =
    // 80): 60 goes; node 0 at 265 (+65), node 1 at 185. Pushed 60 < 62.5: node 2 next, with
    // imbalances +65 and −50: x = 25; 15 leaves 50 + 35 = 85, 35 leaves 30 + 15 = 45: 35
    // goes. Pushed 95 ≥ 62.5: node 0 is done.
    let l = load_balance::ledger(&[3.25, 1.25, 1.5], 12, 151, false);
    assert_eq!(l.total_load, 600.0);
    let out = load_balance::load_balance(3, &[0, 1, 2], &l, &mut |d| match d {
        0 => vec![task(1, 15.0), task(2, 35.0), task(3, 60.0), task(4, 90.0)],
        _ => Vec::new(),
    });
    let moved: Vec<(usize, usize, f64)> = out
        .transfers
        .iter()
        .map(|t: &Transfer| (t.pid, t.to_dom, t.load))
        .collect();
    assert_eq!(moved, vec![(3, 1, 60.0), (2, 2, 35.0)]);
}

#[test]
fn the_closest_task_is_refused_when_it_would_not_reduce_the_imbalance() {
    // Two nodes: loads 300 and 100 (imbalances ±100, old imbalance 200, x = 50). Of 10 and
    // 260, 10 leaves 90 + 90 = 180 and 260 leaves 160 + 160 = 320: 10 goes. Alone, 260 is
    // refused (320 > 200) and nothing moves.
    let l = load_balance::ledger(&[3.0, 1.0], 8, 151, false);
    let out =
        load_balance::load_balance(2, &[0, 1], &l, &mut |_| vec![task(1, 10.0), task(2, 260.0)]);
    assert_eq!(out.transfers.len(), 1);
    assert_eq!(out.transfers[0].pid, 1);
    let out = load_balance::load_balance(2, &[0, 1], &l, &mut |_| vec![task(2, 260.0)]);
    assert!(out.transfers.is_empty());
}

/// A two-node machine of one CPU per node (CPU c on node c).
fn two_by_one() -> numasim_core::machine::Machine {
    testutils::machine(&testutils::two_level_table(2, 20), 1)
}

/// CPU-bound processes without memory traffic (so a move changes no speed), spawned on CPU 0
/// at time 0, with these demands.
fn cpu_bound(demands_ms: &[u64]) -> Workload {
    let mut w = testutils::workload(Kind::Cpu, demands_ms);
    for p in &mut w.processes {
        p.mem = 0.0;
    }
    w
}

fn run(w: Workload, policy: &str) -> RunResult {
    let s = Setup::new(two_by_one(), Builder::Flat, w);
    numasim_core::run_policy(&s.m, &s.d, &s.w, policy, &s.config).unwrap()
}

/// `pid`'s pulls: a CPU taking it from a shared queue when it last ran elsewhere (here
/// always across nodes); its first placement on the other node is not one.
fn cross_node(r: &RunResult, pid: usize) -> u32 {
    let pull = MigrationKind::ALL
        .iter()
        .position(|&k| k == MigrationKind::Pull)
        .expect("a kind");
    r.processes[pid].migrations_by_kind[pull]
}

#[test]
fn a_transfer_is_applied_at_the_tasks_next_enqueue() {
    // New tasks take domains round robin from CPU 0's cursor: pids 0, 2 in domain 1 (CPU 1),
    // pids 1, 3 in domain 0 (CPU 0). Pids 0 and 2 end by 200 ms; pids 1 and 3 (4 s each)
    // share CPU 0 in 20 ms slices. With stealing off (greedy_threshold=0 and no greedy
    // masks), only the balancer can move one: at 2.0 s domain 0's duty cycle is about 2
    // and domain 1's about 0.1 of decaying history: node 0 pushes one of them (each about
    // 100, the closest to half the imbalance) to domain 1. The move waits for that task's
    // next enqueue (its slice's end, at most 20 ms later); CPU 1, kicked, takes it from
    // domain 1's queue. Each had about 1 s of CPU by then and runs its last 3 s alone: both
    // end at about 5.0 s rather than 8.0 s.
    let w = cpu_bound(&[100, 4000, 100, 4000]);
    let off = "scx-rusty:greedy_threshold=0,direct_greedy_under=0,kick_greedy_under=0";
    let r = run(w.clone(), off);
    let moved: Vec<u32> = [1, 3].iter().map(|&p| cross_node(&r, p)).collect();
    assert_eq!(
        moved.iter().sum::<u32>(),
        1,
        "one of the long tasks moves: {moved:?}"
    );
    for p in [1, 3] {
        let c = r.processes[p].completion_ms;
        assert!((4900.0..5200.0).contains(&c), "pid {p} ends at {c} ms");
    }
    let metrics: std::collections::BTreeMap<_, _> =
        r.summary.policy_metrics.iter().cloned().collect();
    assert_eq!(metrics["rusty_lb_transfers"], 1.0);
    assert_eq!(metrics["rusty_load_balance"], 1.0);
    // Without the balancer they share CPU 0 to the end (8 s of work on one CPU).
    let r = run(w.clone(), &format!("{off},balance_load=0"));
    assert_eq!(cross_node(&r, 1) + cross_node(&r, 3), 0);
    assert!(r.processes[1].completion_ms > 7900.0);
    // As the code reads at 7a58a3a (xfer=current), the enqueue undoes the decision: no move.
    let r = run(w, &format!("{off},xfer=current"));
    assert_eq!(cross_node(&r, 1) + cross_node(&r, 3), 0);
}

#[test]
fn an_idle_cpu_steals_across_nodes_only_from_a_domain_with_fewer_queued_than_the_threshold() {
    // Pids 0 and 2 (500 ms) in domain 1, pids 1 (50 ms) and 3 (55 ms) in domain 0. CPU 0 runs
    // pids 1 and 3 in turn and is idle from 105 ms, its domain's queue empty; domain 1 then
    // holds one queued task (one of 0 and 2 runs on CPU 1, the other waits). CPU 0's cursor
    // stands at 4 (four domain picks at creation): the walk inside the node visits domain 0
    // (its own), the walk across nodes domain 1.
    // xnuma_greedy=2: 1 queued < 2: CPU 0 steals it at 105 ms; by then each long task had
    // about 52 ms, and the pair ends near 105 + 448 = 553 ms.
    // xnuma_greedy=1: 1 ≥ 1: skipped (the source's test), nothing is stolen before the
    // balancer's first round at 2 s: the pair shares CPU 1 and ends at 1 s.
    let w = cpu_bound(&[500, 50, 500, 55]);
    let r = run(w.clone(), "scx-rusty:xnuma_greedy=2");
    assert_eq!(cross_node(&r, 0) + cross_node(&r, 2), 1);
    let last = r.processes[0]
        .completion_ms
        .max(r.processes[2].completion_ms);
    assert!((540.0..570.0).contains(&last), "the pair ends at {last} ms");
    let metrics: std::collections::BTreeMap<_, _> =
        r.summary.policy_metrics.iter().cloned().collect();
    assert_eq!(metrics["rusty_greedy_xnuma"], 1.0);
    let r = run(w.clone(), "scx-rusty:xnuma_greedy=1");
    assert_eq!(cross_node(&r, 0) + cross_node(&r, 2), 0);
    let last = r.processes[0]
        .completion_ms
        .max(r.processes[2].completion_ms);
    assert!(last > 990.0, "the pair ends at {last} ms");
    // The default (0) does not steal across nodes either.
    let r = run(w, "scx-rusty");
    assert_eq!(cross_node(&r, 0) + cross_node(&r, 2), 0);
}

#[test]
fn with_two_domains_the_cursor_keeps_one_cpu_from_ever_stealing_across_nodes() {
    // The mirror of the case above: the long pair in domain 0, CPU 1 idle from 105 ms. Each
    // walk takes nr_doms − 1 = 1 step of CPU 1's cursor: from an even cursor the walk inside
    // the node lands on domain 0 (another node: skipped) and the walk across nodes on domain
    // 1 (its own), so the cursor is even again; CPU 1 never reaches domain 0 and the pair
    // shares CPU 0 to 1 s, as rusty_dispatch's bpf_repeat loops do on two domains.
    let r = run(cpu_bound(&[50, 500, 55, 500]), "scx-rusty:xnuma_greedy=2");
    assert_eq!(cross_node(&r, 1) + cross_node(&r, 3), 0);
    assert!(
        r.processes[1]
            .completion_ms
            .max(r.processes[3].completion_ms)
            > 990.0
    );
}

#[test]
fn a_task_whose_affinity_changes_in_its_domain_queue_is_enqueued_again_in_its_new_domain() {
    // Pid 0 (300 ms) runs on CPU 1 (domain 1), pid 1 (300 ms) on CPU 0 (domain 0); pid 2
    // (100 ms, domain 1) waits in domain 1's queue. At 10 ms it may run on CPU 0 only: it is
    // taken out and enqueued again (rusty_set_cpumask picks domain 0, the only one it may run
    // in), and CPU 0 takes it at the end of pid 1's slice, at 20 ms. Left in domain 1's queue
    // it could never run (CPU 1 passes over it).
    let mut w = cpu_bound(&[300, 300, 100]);
    w.processes[2].affinity = vec![numasim_core::workload::AffinityChange {
        at_ns: 10_000_000,
        cpus: numasim_core::workload::CpuList(vec![0]),
    }];
    let r = run(w, "scx-rusty");
    let p2 = &r.processes[2];
    assert_eq!(p2.most_node, 0);
    assert!(
        p2.first_run_ms >= 20.0 && p2.first_run_ms < 21.0,
        "{}",
        p2.first_run_ms
    );
    assert!(p2.completion_ms < 250.0, "{}", p2.completion_ms);
}
