//! Space sharing (docs/policies/home-cluster.md): hand-computed processor allocations of Koita et al.'s base priority
//! and schemes, each scheme's deallocation, the slide, and equipartition's shares.
//!
//! Machine for all: 4 clusters × 2 processors, cluster k = CPUs 2k and 2k + 1.

use numasim_core::apps::Segment;
use numasim_core::config::EngineConfig;
use numasim_core::domains::Builder;
use numasim_core::engine;
use numasim_core::policy::space::equi::equipartition;
use numasim_core::policy::space::home_cluster::HomeCluster;
use numasim_core::policy::space::{self, Alloc, Proc, Scheme};
use numasim_core::testutils::{self, Setup};
use numasim_core::workload::{App, Kind, Process, Workload};

const A: usize = 0;
const B: usize = 1;
const C: usize = 2;

fn setup(clusters: usize, per: usize) -> Setup {
    let m = testutils::machine(&testutils::two_level_table(clusters, 37), per);
    let w = Workload {
        processes: vec![testutils::process(0, Kind::Cpu, 1)],
        apps: Vec::new(),
    };
    Setup::new(m, Builder::Flat, w)
}

/// An allocator with processes A, B, C known and `held[p]` allocated to process p.
fn alloc(s: &Setup, held: [&[usize]; 3]) -> Alloc {
    let mut a = Alloc::new(&s.ctx());
    for (tgid, cpus) in held.iter().enumerate() {
        a.procs.insert(tgid, Proc::default());
        for &c in *cpus {
            a.allocate(0, c, tgid);
        }
    }
    a
}

#[test]
fn base_priority_step_1_before_processors_first() {
    // A holds CPU 4 (cluster 2) and released CPU 6 (cluster 3): step 1 gives CPU 6 back, although
    // step 2 would give CPU 5 (cluster 2, where A holds a processor).
    let s = setup(4, 2);
    let mut a = alloc(&s, [&[4, 6], &[], &[]]);
    a.release(0, 6);
    assert_eq!(
        a.procs[&A].before.iter().copied().collect::<Vec<_>>(),
        vec![6]
    );
    assert_eq!(a.base_priority(A, &|c| a.free(c)), Some(6));
}

#[test]
fn base_priority_step_2_the_cluster_where_it_holds_most() {
    // A holds CPUs 4, 5 (cluster 2, full) and 0 (cluster 0); B holds 2. Step 2 ranks cluster 2
    // (two of A's) then cluster 0 (one): cluster 2 has no free processor, so CPU 1 — not
    // cluster 3's CPU 6, which step 4 (most free processors) would pick.
    let s = setup(4, 2);
    let a = alloc(&s, [&[4, 5, 0], &[2], &[]]);
    assert_eq!(a.base_priority(A, &|c| a.free(c)), Some(1));
}

#[test]
fn base_priority_step_3_the_cluster_with_most_before_processors() {
    // A holds nothing; its before-processor CPU 6 (cluster 3) is B's now, CPU 7 is free. Step 3
    // picks cluster 3 → CPU 7; step 4 would pick cluster 0 (two free, lowest index) → CPU 0.
    let s = setup(4, 2);
    let mut a = alloc(&s, [&[6], &[2], &[]]);
    a.release(0, 6);
    a.allocate(0, 6, B);
    assert_eq!(a.base_priority(A, &|c| a.free(c)), Some(7));
}

#[test]
fn base_priority_step_4_the_cluster_with_most_free_processors() {
    // A is new. B holds 0, 2, 3: clusters 2 and 3 have two free each, cluster 0 one → cluster 2
    // (lowest of the tie) → CPU 4.
    let s = setup(4, 2);
    let a = alloc(&s, [&[], &[0, 2, 3], &[]]);
    assert_eq!(a.base_priority(A, &|c| a.free(c)), Some(4));
}

#[test]
fn basic_home_takes_its_home_first_and_never_another_home() {
    // A's home is cluster 3, B's cluster 2. C holds 1, 2, 6, 7: free are 0 (cluster 0), 3
    // (cluster 1), 4 and 5 (cluster 2, B's home).
    let s = setup(4, 2);
    let sc = s.scene();
    let v = sc.view();
    let mut a = alloc(&s, [&[], &[], &[1, 2, 6, 7]]);
    a.procs.get_mut(&A).unwrap().home = Some(3);
    a.home_of[3] = Some(A);
    a.procs.get_mut(&B).unwrap().home = Some(2);
    a.home_of[2] = Some(B);
    let fr = HomeCluster::by_name("fr-con").unwrap();
    let hb = HomeCluster::by_name("hb-con").unwrap();
    // Cluster-free: step 4 over every free processor → cluster 2, B's home.
    assert_eq!(fr.grant(&a, &v, A, None), Some(4));
    // Basic home: A's home has none free; clusters 0 and 1 have one each → CPU 0.
    assert_eq!(hb.grant(&a, &v, A, None), Some(0));
    // With a free processor in its home it takes that first.
    a.release(0, 7);
    assert_eq!(hb.grant(&a, &v, A, None), Some(7));
    // B, whose home is cluster 2, gets its home's processors; C (no home) never does.
    assert_eq!(hb.grant(&a, &v, B, None), Some(4));
    assert_eq!(hb.grant(&a, &v, C, None), Some(0));
}

/// Thread plans of one phase each: `(arrival ms, [work ms of each thread])` per process, with
/// no memory cost.
fn workload(procs: &[(u64, &[u64])]) -> Workload {
    let mut processes = Vec::new();
    let mut apps = Vec::new();
    for (arrival, works) in procs {
        let tgid = processes.len() as u32;
        let plans: Vec<Vec<Segment>> = works
            .iter()
            .map(|&w| {
                vec![Segment {
                    wait: None,
                    work_ns: w * 1_000_000,
                    signal: None,
                    sleep_ns: None,
                }]
            })
            .collect();
        for (t, &w) in works.iter().enumerate() {
            processes.push(Process {
                tgid,
                arrival_ns: arrival * 1_000_000,
                mem: 0.0,
                ..testutils::process(tgid + t as u32, Kind::Cpu, w)
            });
        }
        apps.push(App {
            tgid,
            name: "t".into(),
            footprint_mb: 0.0,
            shared: 0.0,
            points: 0,
            plans,
            shared_points: false,
        });
    }
    Workload { processes, apps }
}

/// No balancing or refill cost: times are whole milliseconds.
fn free() -> EngineConfig {
    EngineConfig {
        cost_per_rq_ns: 0,
        cost_per_task_ns: 0,
        cost_per_migration_ns: 0,
        refill_in_node_ns: 0,
        refill_per_distance_ns: 0,
        record_trace: true,
        ..EngineConfig::default()
    }
}

struct Outcome {
    /// Response time (ms) per process.
    response: Vec<f64>,
    /// `(ms, pid, from, to)` of every migration that was not a placement.
    moves: Vec<(f64, usize, usize, usize)>,
    log: Vec<(u64, usize, Option<usize>)>,
}

fn run(name: &str, w: &Workload) -> Outcome {
    let s = Setup::new(
        testutils::machine(&testutils::two_level_table(2, 37), 2),
        Builder::Flat,
        w.clone(),
    );
    let config = free();
    let ctx = numasim_core::interface::PolicyContext {
        machine: &s.m,
        domains: &s.d,
        config: &config,
    };
    let mut p = space::by_name(name, &ctx);
    let r = engine::run(&s.m, &s.d, w, &mut p, &config).unwrap();
    Outcome {
        response: r.apps.iter().map(|a| a.turnaround_ms).collect(),
        moves: r
            .trace_events
            .migrations
            .iter()
            .filter(|m| m.4 != "placement")
            .map(|m| (m.0 as f64 / 1e6, m.1, m.2, m.3))
            .collect(),
        log: p.alloc.log.clone(),
    }
}

/// Two clusters × 2 CPUs. A (t = 0) forks four threads: 10, 100, 20, 100 ms. By the base
/// priority they get CPUs 0, 1 (cluster 0: the most free, lowest index; then where A holds
/// most) and 2, 3; A's home is cluster 0. B (t = 5) forks one 50 ms thread and finds no free
/// processor. At 10 ms CPU 0 (A's home) goes idle, at 20 ms CPU 2 (outside it); A ends at 100.
fn scenario() -> Workload {
    workload(&[(0, &[10, 100, 20, 100]), (5, &[50])])
}

#[test]
fn allocation_follows_the_base_priority() {
    let o = run("fr-dist", &scenario());
    let first: Vec<_> = o.log.iter().take(4).map(|&(t, c, p)| (t, c, p)).collect();
    assert_eq!(
        first,
        vec![
            (0, 0, Some(A)),
            (0, 1, Some(A)),
            (0, 2, Some(A)),
            (0, 3, Some(A))
        ]
    );
}

#[test]
fn release_frees_an_idle_processor_at_once() {
    // FR: CPU 0 is free at 10 ms and B runs there 10–60: response 55.
    let o = run("fr-dist", &scenario());
    assert_eq!(o.response, vec![100.0, 55.0]);
    assert!(o.log.contains(&(10_000_000, 0, Some(4))), "{:?}", o.log);
}

#[test]
fn hold_keeps_idle_processors_until_the_process_ends() {
    // FH: A keeps CPUs 0 and 2 idle; B waits until A ends at 100 and runs 100–150: 145.
    for name in ["fh-dist", "fh-con"] {
        assert_eq!(
            run(name, &scenario()).response,
            vec![100.0, 145.0],
            "{name}"
        );
    }
}

#[test]
fn partial_hold_keeps_only_home_cluster_processors() {
    // FP and HB: CPU 0 (home) is kept, CPU 2 (cluster 1) is released at 20: B runs 20–70: 65.
    for name in ["fp-dist", "fp-con", "hb-dist", "hb-con"] {
        let o = run(name, &scenario());
        assert_eq!(o.response, vec![100.0, 65.0], "{name}");
        assert!(
            o.log.contains(&(20_000_000, 2, Some(4))),
            "{name}: {:?}",
            o.log
        );
        assert!(o.moves.is_empty(), "{name} moves no thread");
    }
}

#[test]
fn slide_moves_a_thread_outside_home_onto_an_idle_home_processor() {
    // HS: at 10 ms CPU 0 (home) goes idle while A's threads run on CPUs 2 and 3 outside it: the
    // one on CPU 2 (pid 2, 10 of its 20 ms done) moves to CPU 0; CPU 2, outside the home, is
    // released and B runs there 10–60 (55). Pid 2 ends on CPU 0 at 20 ms, when the thread on
    // CPU 3 slides onto CPU 0 in turn and CPU 3 is released.
    for name in ["hs-dist", "hs-con"] {
        let o = run(name, &scenario());
        assert_eq!(o.response, vec![100.0, 55.0], "{name}");
        assert_eq!(o.moves, vec![(10.0, 2, 2, 0), (20.0, 3, 3, 0)], "{name}");
        assert!(
            o.log.contains(&(10_000_000, 2, Some(4))),
            "{name}: {:?}",
            o.log
        );
        assert!(
            o.log.contains(&(20_000_000, 3, None)),
            "{name}: {:?}",
            o.log
        );
    }
}

#[test]
fn equipartition_water_fills_capped_shares() {
    // 8 processors over parallelisms 1, 10, 3, 10: the first is capped at 1; 7 left over three
    // (2 each, none capped at 2), the remaining 1 to the oldest of them.
    assert_eq!(equipartition(8, &[1, 10, 3, 10]), vec![1, 3, 2, 2]);
    // Equal shares, the remainder to the oldest.
    assert_eq!(equipartition(8, &[5, 5, 5]), vec![3, 3, 2]);
    // More processes than processors: the oldest get one each.
    assert_eq!(equipartition(2, &[4, 4, 4]), vec![1, 1, 0]);
    assert_eq!(equipartition(64, &[]), Vec::<usize>::new());
}
