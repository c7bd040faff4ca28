//! Hand-computed schedules and engine invariants.

use numasim_core::config::EngineConfig;
use numasim_core::domains::{BuildOptions, Builder};
use numasim_core::engine::{self, RunResult};
use numasim_core::interface;
use numasim_core::machine::Machine;
use numasim_core::policy;
use numasim_core::testutils;
use numasim_core::workload::{Kind, Process, Workload};

fn proc(pid: u32, arrival_ms: u64, demand_ms: u64, spawn: u32, mem: f64) -> Process {
    Process {
        arrival_ns: arrival_ms * 1_000_000,
        spawn_cpu: spawn,
        mem,
        ..testutils::process(pid, Kind::Cpu, demand_ms)
    }
}

fn simulate(m: &Machine, builder: Builder, w: &Workload, config: &EngineConfig) -> RunResult {
    let d = builder.build(m, &BuildOptions::default());
    numasim_core::run_policy(m, &d, w, "linux26", config).unwrap()
}

fn tat(r: &RunResult) -> Vec<f64> {
    r.processes.iter().map(|p| p.turnaround_ms).collect()
}

#[test]
fn one_cpu_round_robin() {
    let m = testutils::machine(&testutils::two_level_table(1, 20), 1);
    let w = Workload {
        apps: Vec::new(),
        processes: vec![
            proc(0, 0, 150, 0, 0.5),
            proc(1, 0, 100, 0, 0.5),
            proc(2, 0, 50, 0, 0.5),
        ],
    };
    let r = simulate(&m, Builder::Flat, &w, &EngineConfig::default());
    // P0 0-100 (slice), P1 100-200, P2 200-250, P0 250-300.
    assert_eq!(tat(&r), vec![300.0, 200.0, 250.0]);
    assert_eq!(r.summary.makespan_ms, 300.0);
    assert_eq!(r.summary.migrations, 0);
}

fn free_balancing() -> EngineConfig {
    EngineConfig {
        cost_per_rq_ns: 0,
        cost_per_task_ns: 0,
        cost_per_migration_ns: 0,
        ..EngineConfig::default()
    }
}

#[test]
fn idle_cpu_pulls_once_the_task_is_cache_cold() {
    // One node, two CPUs (flat domains: in-node parameters, 2.5 ms cache-hot time).
    let m = testutils::machine(&testutils::two_level_table(1, 20), 2);
    let w = Workload {
        apps: Vec::new(),
        processes: vec![
            proc(0, 0, 100, 0, 0.5),
            proc(1, 0, 300, 0, 0.5),
            proc(2, 0, 300, 0, 0.5),
        ],
    };
    let r = simulate(&m, Builder::Flat, &w, &free_balancing());
    // Fork placement: P0 to the idle CPU 1 (equal loads: the other group wins), P1 and P2 stay
    // on CPU 0 (decayed loads still 0 there, CPU 1 counts P0). P0 ends at 100 ms; newly-idle
    // balancing sees no gain (decayed loads); idle ticks at 101 and 102 ms find P1 cache-hot
    // (it last ran at 100 ms); at 103 ms CPU 1 pulls P1, which refills its cache for 0.1 ms and
    // runs its last 200 ms alone. P2 runs on CPU 0 from 100 ms to 400 ms.
    assert_eq!(tat(&r), vec![100.0, 303.1, 400.0]);
    let p1 = &r.processes[1];
    assert_eq!(p1.origin_cpu, 0);
    assert_eq!(p1.migrations, 1);
    assert_eq!(r.summary.migrations_by_kind[3], ("idle".to_string(), 1));
    assert_eq!(
        r.processes[0].migrations_by_kind[5], 1,
        "P0's fork placement"
    );
    assert!((p1.refill_ms - 0.1).abs() < 1e-9);
}

/// A policy for tests: places every process on `place`, never balances, and once (at the first
/// tick) moves all pages of group 0 from node 0 to node 1.
struct MovePagesOnce {
    place: usize,
    done: bool,
}

impl policy::Policy for MovePagesOnce {
    fn name(&self) -> &'static str {
        "test"
    }
    fn place_new(&mut self, _: &interface::View<'_>, _: usize, _: usize) -> Option<usize> {
        Some(self.place)
    }
    fn place_wakeup(&mut self, _: &interface::View<'_>, _: usize, prev: usize) -> Option<usize> {
        Some(prev)
    }
    fn next_periodic_ns(&self, _: &interface::View<'_>, _: usize) -> Option<u64> {
        (!self.done).then_some(0)
    }
    fn balance(
        &mut self,
        _: &interface::View<'_>,
        _: usize,
        _: usize,
        _: policy::BalanceKind,
    ) -> Option<policy::Attempt> {
        if self.done {
            return None;
        }
        self.done = true;
        Some(policy::Attempt {
            pages: vec![policy::PageMove {
                tgid: 0,
                from_node: 0,
                to_node: 1,
                share: 1.0,
            }],
            ..policy::Attempt::default()
        })
    }
}

#[test]
fn memory_at_distance_20_with_m_half_runs_one_and_a_half_times_slower() {
    let m = testutils::machine(&testutils::two_level_table(2, 20), 1);
    let d = Builder::Linux.build(&m, &BuildOptions::default());
    let w = Workload {
        apps: Vec::new(),
        processes: vec![proc(0, 0, 100, 0, 0.5)],
    };
    let mut p = MovePagesOnce {
        place: 0,
        done: false,
    };
    let r = engine::run(&m, &d, &w, &mut p, &EngineConfig::default()).unwrap();
    // 1 ms local (first touch on node 0), then the pages move to node 1 at the first tick:
    // L = 20/10 = 2, rate = 1 / (0.5 + 0.5 · 2) = 1/1.5, so 99 ms of work take 148.5 ms.
    assert!(
        (r.processes[0].turnaround_ms - 149.5).abs() < 1e-6,
        "{}",
        r.processes[0].turnaround_ms
    );
    let rf = r.processes[0].remote_factor;
    assert!((rf - (1.0 + 148.5 * 2.0) / 149.5).abs() < 1e-9, "{rf}");
}

#[test]
fn a_speed_2_core_halves_the_run_time() {
    let m = testutils::machine_with_speeds(&testutils::two_level_table(1, 20), 2, vec![2.0, 1.0]);
    let w = Workload {
        apps: Vec::new(),
        processes: vec![proc(0, 0, 100, 0, 0.5), proc(1, 0, 100, 1, 0.5)],
    };
    // Each process has its own CPU: placement keeps P1 on CPU 1 (P0 holds CPU 0... or 1).
    let r = simulate(&m, Builder::Flat, &w, &free_balancing());
    let mut by_speed: Vec<(f64, f64)> = r
        .processes
        .iter()
        .map(|p| (if p.fast_cpu_ms > 0.0 { 2.0 } else { 1.0 }, p.turnaround_ms))
        .collect();
    by_speed.sort_by(|a, b| a.0.total_cmp(&b.0));
    assert_eq!(by_speed, vec![(1.0, 100.0), (2.0, 50.0)]);
}

/// Space-sharing style test policy: holds every process; an idle CPU takes the lowest held pid
/// (FCFS); pages optionally concentrated on `home`; an optional machine-wide callback that
/// moves the tail of CPU 0's queue to CPU 1.
struct Hold {
    home: Option<usize>,
    global_ns: Option<u64>,
    global_calls: u32,
}

impl policy::Policy for Hold {
    fn name(&self) -> &'static str {
        "hold"
    }
    fn place_new(&mut self, _: &interface::View<'_>, _: usize, spawn: usize) -> Option<usize> {
        if self.global_ns.is_some() {
            Some(spawn)
        } else {
            None
        }
    }
    fn place_wakeup(&mut self, _: &interface::View<'_>, _: usize, _: usize) -> Option<usize> {
        None
    }
    fn first_touch_node(&mut self, v: &interface::View<'_>, _: usize, cpu: usize) -> usize {
        self.home.unwrap_or(v.machine.cpu_node(cpu))
    }
    fn cpu_idle(&mut self, v: &interface::View<'_>, cpu: usize) -> Option<policy::Attempt> {
        let pid = v.held().next()?;
        Some(policy::Attempt {
            places: vec![(pid, cpu)],
            ..policy::Attempt::default()
        })
    }
    fn next_periodic_ns(&self, _: &interface::View<'_>, _: usize) -> Option<u64> {
        None
    }
    fn balance(
        &mut self,
        _: &interface::View<'_>,
        _: usize,
        _: usize,
        _: policy::BalanceKind,
    ) -> Option<policy::Attempt> {
        None
    }
    fn global_period_ns(&self) -> Option<u64> {
        self.global_ns
    }
    fn global_balance(&mut self, v: &interface::View<'_>) -> Option<policy::Attempt> {
        self.global_calls += 1;
        let pid = v.queued(0).next_back()?;
        Some(policy::Attempt {
            moves: vec![policy::Move {
                pid,
                from: 0,
                to: 1,
                kind: policy::MigrationKind::Push,
            }],
            ..policy::Attempt::default()
        })
    }
}

#[test]
fn held_processes_run_when_a_cpu_frees_fcfs() {
    // One CPU; three 100 ms processes held at arrival and handed out one at a time by cpu_idle:
    // no round robin, so they end at 100, 200 and 300 ms (round robin would give 300 for P0).
    let m = testutils::machine(&testutils::two_level_table(1, 20), 1);
    let w = Workload {
        apps: Vec::new(),
        processes: vec![
            proc(0, 0, 100, 0, 0.5),
            proc(1, 0, 100, 0, 0.5),
            proc(2, 0, 100, 0, 0.5),
        ],
    };
    let d = Builder::Flat.build(&m, &BuildOptions::default());
    let mut p = Hold {
        home: None,
        global_ns: None,
        global_calls: 0,
    };
    let r = engine::run(&m, &d, &w, &mut p, &free_balancing()).unwrap();
    assert_eq!(tat(&r), vec![100.0, 200.0, 300.0]);
    assert_eq!(r.summary.balance.other[0], 3, "one placement per process");
    assert_eq!(r.summary.migrations, 0);
}

#[test]
fn first_touch_pages_can_be_concentrated_on_a_home_node() {
    // Two nodes at distance 20, one CPU each; the process runs on node 0 but its pages go to
    // its home node 1 from the start: 100 ms of work at m = 0.5 take 150 ms.
    let m = testutils::machine(&testutils::two_level_table(2, 20), 1);
    let w = Workload {
        apps: Vec::new(),
        processes: vec![proc(0, 0, 100, 0, 0.5)],
    };
    let d = Builder::Linux.build(&m, &BuildOptions::default());
    let mut p = Hold {
        home: Some(1),
        global_ns: None,
        global_calls: 0,
    };
    let r = engine::run(&m, &d, &w, &mut p, &free_balancing()).unwrap();
    assert_eq!(r.processes[0].origin_node, 0);
    assert!((r.processes[0].turnaround_ms - 150.0).abs() < 1e-6);
    assert!((r.processes[0].remote_factor - 2.0).abs() < 1e-12);
}

#[test]
fn the_machine_wide_callback_runs_on_its_period() {
    // Both processes start on CPU 0; every 30 ms the callback pushes CPU 0's queue tail to CPU 1.
    let m = testutils::machine(&testutils::two_level_table(1, 20), 2);
    let w = Workload {
        apps: Vec::new(),
        processes: vec![proc(0, 0, 100, 0, 0.0), proc(1, 0, 100, 0, 0.0)],
    };
    let d = Builder::Flat.build(&m, &BuildOptions::default());
    let mut p = Hold {
        home: None,
        global_ns: Some(30_000_000),
        global_calls: 0,
    };
    let r = engine::run(&m, &d, &w, &mut p, &free_balancing()).unwrap();
    // P0 runs 0-100 ms on CPU 0; P1 waits until the push at 30 ms, refills 0.1 ms, ends at
    // 130.1 ms. The callback ran at 30, 60, 90 and 120 ms (the run ends at 130.1 ms).
    assert_eq!(tat(&r), vec![100.0, 130.1]);
    assert_eq!(p.global_calls, 4);
    assert_eq!(
        r.summary.balance.other[0], 1,
        "only the first call had something to push"
    );
    assert_eq!(r.summary.migrations_by_kind[1], ("push".to_string(), 1));
}

/// Places every process on CPU `place`; balances once, on CPU `place` at `at_ns`, examining
/// `rqs` runqueues and moving nothing (a pure balancing stall of `rqs` µs).
struct StallOnce {
    place: usize,
    at_ns: u64,
    rqs: u32,
    done: bool,
}

impl policy::Policy for StallOnce {
    fn name(&self) -> &'static str {
        "test"
    }
    fn place_new(&mut self, _: &interface::View<'_>, _: usize, _: usize) -> Option<usize> {
        Some(self.place)
    }
    fn place_wakeup(&mut self, _: &interface::View<'_>, _: usize, prev: usize) -> Option<usize> {
        Some(prev)
    }
    fn next_periodic_ns(&self, _: &interface::View<'_>, cpu: usize) -> Option<u64> {
        (cpu == self.place && !self.done).then_some(self.at_ns)
    }
    fn balance(
        &mut self,
        _: &interface::View<'_>,
        cpu: usize,
        level: usize,
        kind: policy::BalanceKind,
    ) -> Option<policy::Attempt> {
        if self.done || cpu != self.place || level != 0 || kind != policy::BalanceKind::Periodic {
            return None;
        }
        self.done = true;
        Some(policy::Attempt {
            rqs_examined: self.rqs,
            ..policy::Attempt::default()
        })
    }
}

fn with(assume: &str) -> EngineConfig {
    EngineConfig {
        assumptions: numasim_core::assumptions::Assumptions::parse("test", assume).unwrap(),
        ..EngineConfig::default()
    }
}

#[test]
fn memory_parent_leaves_a_placed_child_s_pages_on_its_parent_s_node() {
    // Two nodes of one CPU at distance 20; a 100 ms process (m = 0.5) created on CPU 0 and
    // placed on CPU 1 before it runs.
    let m = testutils::machine(&testutils::two_level_table(2, 20), 1);
    let d = Builder::Linux.build(&m, &BuildOptions::default());
    let w = Workload {
        apps: Vec::new(),
        processes: vec![proc(0, 0, 100, 0, 0.5)],
    };
    let run = |assume: &str| {
        let mut p = StallOnce {
            place: 1,
            at_ns: 0,
            rqs: 0,
            done: true,
        };
        engine::run(&m, &d, &w, &mut p, &with(assume)).unwrap()
    };
    // first-run: pages first touched on node 1 where it runs: all local, 100 ms.
    let r = run("memory=first-run");
    assert_eq!(
        (r.processes[0].origin_cpu, r.processes[0].turnaround_ms),
        (1, 100.0)
    );
    // parent: pages on node 0 (its parent's), L = 2, rate 1/1.5: 150 ms; its origin is CPU 0,
    // and it ran all its life away from it.
    let r = run("memory=parent");
    let p = &r.processes[0];
    assert_eq!(p.origin_cpu, 0);
    // (event times are whole ns, rounded up: 1 ns over)
    assert!(
        (p.turnaround_ms - 150.0).abs() <= 1e-6,
        "{}",
        p.turnaround_ms
    );
    assert!((p.remote_factor - 2.0).abs() < 1e-12);
    assert_eq!(r.summary.far_from_origin, 1);
}

#[test]
fn remote_scales_the_cost_of_remote_pages_only() {
    // The schedule above: a 100 ms process (m = 0.5) created on CPU 0 (node 0) and placed on
    // CPU 1 (node 1, distance 20) before it runs.
    let m = testutils::machine(&testutils::two_level_table(2, 20), 1);
    let d = Builder::Linux.build(&m, &BuildOptions::default());
    let w = Workload {
        apps: Vec::new(),
        processes: vec![proc(0, 0, 100, 0, 0.5)],
    };
    let run = |assume: &str| {
        let mut p = StallOnce {
            place: 1,
            at_ns: 0,
            rqs: 0,
            done: true,
        };
        engine::run(&m, &d, &w, &mut p, &with(assume)).unwrap()
    };
    // memory=parent: every page on node 0, remote. A remote access costs R · 20 / 10:
    // R = 1 (slit): L = 2, 100 · (0.5 + 0.5 · 2) = 150 ms; R = 2: L = 4, 250 ms; R = 1.5: L = 3,
    // 200 ms; R = 3: L = 6, 350 ms.
    for (remote, l, tat) in [
        ("slit", 2.0, 150.0),
        ("scaled", 4.0, 250.0),
        ("scaled:1.5", 3.0, 200.0),
        ("scaled:3", 6.0, 350.0),
    ] {
        let r = run(&format!("memory=parent,remote={remote}"));
        let p = &r.processes[0];
        assert!(
            (p.remote_factor - l).abs() < 1e-12,
            "{remote}: L = {}",
            p.remote_factor
        );
        // (event times are whole ns, rounded up: 1 ns over)
        assert!(
            (p.turnaround_ms - tat).abs() <= 1e-6,
            "{remote}: {}",
            p.turnaround_ms
        );
    }
    // memory=first-run: every page on node 1 where it runs; local pages cost 1 whatever R.
    let r = run("memory=first-run,remote=scaled:3");
    assert_eq!(r.processes[0].turnaround_ms, 100.0);
    assert_eq!(r.processes[0].remote_factor, 1.0);
    // remote=scaled:1 is slit, bit for bit.
    let a = run("memory=parent,remote=scaled:1");
    let b = run("memory=parent");
    assert_eq!(
        a.processes[0].turnaround_ms.to_bits(),
        b.processes[0].turnaround_ms.to_bits()
    );
}

#[test]
fn slice_work_gives_a_balancing_stall_back_to_the_running_slice() {
    // One CPU runs two 100 ms processes (the 100 ms slice is exactly one process); at 50 ms a
    // balancing attempt examines 1 000 runqueues: a 1 ms stall of P0.
    let m = testutils::machine(&testutils::two_level_table(2, 20), 1);
    let d = Builder::Linux.build(&m, &BuildOptions::default());
    let w = Workload {
        apps: Vec::new(),
        processes: vec![proc(0, 0, 100, 0, 0.0), proc(1, 0, 100, 0, 0.0)],
    };
    let run = |assume: &str| {
        let mut p = StallOnce {
            place: 0,
            at_ns: 50_000_000,
            rqs: 1000,
            done: false,
        };
        let r = engine::run(&m, &d, &w, &mut p, &with(assume)).unwrap();
        assert!((r.summary.balance.cost_ms - 1.0).abs() < 1e-12);
        tat(&r)
    };
    // wall: P0's slice ends at 100 ms with 99 ms done; P1 runs 100-200; P0 ends 200-201.
    assert_eq!(run("slice=wall"), vec![201.0, 200.0]);
    // work: the 1 ms is given back, P0 finishes at 101 ms inside its slice; P1 runs 101-201.
    assert_eq!(run("slice=work"), vec![101.0, 201.0]);
}

#[test]
fn cost_paper_charges_the_attempt_and_scales_every_charge() {
    // One CPU runs two 100 ms processes; at 50 ms one attempt examines 10 runqueues and moves
    // nothing. kernel: 10 × 1 µs = 10 µs of stall. paper:S: (10 + 1 for the attempt itself)
    // × 1 µs × S. Under slice=wall the stall is P0's: its first slice ends at 100 ms that much
    // short, P1 runs 100-200 ms, P0 finishes the rest after it.
    let m = testutils::machine(&testutils::two_level_table(2, 20), 1);
    let d = Builder::Linux.build(&m, &BuildOptions::default());
    let w = Workload {
        apps: Vec::new(),
        processes: vec![proc(0, 0, 100, 0, 0.0), proc(1, 0, 100, 0, 0.0)],
    };
    let run = |assume: &str| {
        let mut p = StallOnce {
            place: 0,
            at_ns: 50_000_000,
            rqs: 10,
            done: false,
        };
        let r = engine::run(&m, &d, &w, &mut p, &with(assume)).unwrap();
        (tat(&r), r.summary.balance.cost_ms)
    };
    let close = |(got, cost): (Vec<f64>, f64), want: [f64; 2], want_cost: f64| {
        assert!(
            (cost - want_cost).abs() < 1e-9,
            "cost {cost} ms, want {want_cost}"
        );
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() < 1e-6, "{got:?} vs {want:?}");
        }
    };
    close(run("slice=wall,cost=kernel"), [200.01, 200.0], 0.01);
    close(run("slice=wall,cost=paper:100"), [201.1, 200.0], 1.1);
    // paper alone is paper:30: 11 × 30 µs = 0.33 ms; under slice=work P0 gets it back.
    close(run("slice=work,cost=paper"), [100.33, 200.33], 0.33);
    // paper:1 still charges the attempt itself: 11 µs.
    close(run("slice=wall,cost=paper:1"), [200.011, 200.0], 0.011);
}

#[test]
fn a_balancing_stall_of_an_idle_cpu_delays_the_next_process_it_runs() {
    // Two CPUs in one node; everything is placed on and balanced by CPU 0. P0 runs 0-10 ms,
    // then CPU 0 idles; at 50 ms it balances, examining 1 000 runqueues: a 1 ms stall, until
    // 51 ms. P1 arrives at 50.5 ms, is placed there at once, starts when the stall ends and
    // runs its 100 ms: 51-151 ms, a turnaround of 100.5 ms.
    let m = testutils::machine(&testutils::two_level_table(1, 20), 2);
    let d = Builder::Flat.build(&m, &BuildOptions::default());
    let late = Process {
        arrival_ns: 50_500_000,
        ..proc(1, 0, 100, 0, 0.0)
    };
    let w = Workload {
        apps: Vec::new(),
        processes: vec![proc(0, 0, 10, 0, 0.0), late],
    };
    let mut p = StallOnce {
        place: 0,
        at_ns: 50_000_000,
        rqs: 1000,
        done: false,
    };
    let r = engine::run(&m, &d, &w, &mut p, &EngineConfig::default()).unwrap();
    assert_eq!(tat(&r), vec![10.0, 100.5]);
    assert_eq!(r.summary.makespan_ms, 151.0);
    assert!((r.summary.balance.cost_ms - 1.0).abs() < 1e-12);
}

#[test]
fn wake_idlest_places_a_waking_process_as_a_new_one() {
    // Two nodes of two CPUs; CPUs 0 and 1 (node 0) each run a process, node 1 is idle. P2
    // slept on CPU 0.
    let m = testutils::machine(&testutils::two_level_table(2, 20), 2);
    let w = Workload {
        apps: Vec::new(),
        processes: (0..3).map(|p| proc(p, 0, 100, 0, 0.5)).collect(),
    };
    let woken_on = |assume: &str| {
        let mut s = testutils::Setup::new(m.clone(), Builder::TwoLevel, w.clone());
        s.config = with(assume);
        let mut p = policy::by_name("linux26", &s.ctx()).unwrap();
        let mut sc = s.scene();
        sc.put(0, 0, 0, 0).put(1, 1, 1, 0).at(1_000_000_000);
        p.place_wakeup(&sc.view(), 2, 0).unwrap()
    };
    // 2.6.18 try_to_wake_up: where it slept.
    assert_eq!(woken_on("wake=previous"), 0);
    // The papers: the least loaded group (node 1), then sched_balance_self's walk down from
    // CPU 2: at node level the other, equally idle group wins (find_idlest_group returns it
    // unless this group is 12 % less loaded: 0 < 0 is false), so CPU 3.
    assert_eq!(woken_on("wake=idlest"), 3);
}

/// A work segment of `ms` milliseconds, waiting for `(point, count)`, signalling `signal`.
fn seg(ms: u64, wait: Option<(u32, u32)>, signal: Option<u32>) -> numasim_core::apps::Segment {
    numasim_core::apps::Segment {
        wait: wait.map(|(point, count)| numasim_core::apps::Wait { point, count }),
        work_ns: ms * 1_000_000,
        signal,
        sleep_ns: None,
    }
}

/// An application of `plans.len()` threads (pids 0 ..), all spawned on CPU `spawn` at 0.
fn app_workload(plans: Vec<Vec<numasim_core::apps::Segment>>, points: u32, spawn: u32) -> Workload {
    let processes = plans
        .iter()
        .enumerate()
        .map(|(t, plan)| Process {
            tgid: 0,
            ..proc(
                t as u32,
                0,
                plan.iter().map(|s| s.work_ns).sum::<u64>() / 1_000_000,
                spawn,
                0.0,
            )
        })
        .collect();
    let w = Workload {
        apps: vec![numasim_core::workload::App {
            tgid: 0,
            name: "hand".into(),
            footprint_mb: 0.0,
            shared: 0.0,
            points,
            plans,
            shared_points: false,
        }],
        processes,
    };
    w.validate("test", 2).unwrap();
    w
}

#[test]
fn a_thread_at_a_barrier_waits_for_its_sibling() {
    // One node, two CPUs; no memory effect, balancing free. Phase 0: 10 ms and 30 ms, then a
    // barrier; phase 1: 10 ms each. t0 is placed on CPU 0, t1 on CPU 1 (fork balancing: the
    // idlest CPU); t0 waits 10–30 off the runqueue, wakes on CPU 0 (where it slept); both run
    // phase 1 from 30 to 40. The application completes at 40 ms.
    let m = testutils::machine(&testutils::two_level_table(1, 20), 2);
    let w = app_workload(
        vec![
            vec![seg(10, None, Some(0)), seg(10, Some((0, 2)), None)],
            vec![seg(30, None, Some(0)), seg(10, Some((0, 2)), None)],
        ],
        1,
        0,
    );
    let r = simulate(&m, Builder::Flat, &w, &free_balancing());
    assert_eq!(tat(&r), vec![40.0, 40.0]);
    assert_eq!(r.processes[0].sync_wait_ms, 20.0);
    assert_eq!(r.processes[1].sync_wait_ms, 0.0);
    assert_eq!(r.processes[0].cpu_ms, 20.0);
    assert_eq!(r.apps[0].completion_ms, 40.0);
    assert_eq!(r.apps[0].sync_wait_ms, 20.0);
    assert_eq!(r.summary.migrations, 1, "only t1's placement on CPU 1");
}

/// Two processes (groups 0 and 1) whose applications share their sync points: a ping-pong.
fn ping_pong(a: Vec<numasim_core::apps::Segment>, b: Vec<numasim_core::apps::Segment>) -> Workload {
    let app = |tgid: u32, plan: Vec<numasim_core::apps::Segment>| numasim_core::workload::App {
        tgid,
        name: "pair".into(),
        footprint_mb: 0.0,
        shared: 0.0,
        points: 2,
        plans: vec![plan],
        shared_points: true,
    };
    let demand = |plan: &[numasim_core::apps::Segment]| {
        plan.iter().map(|s| s.work_ns).sum::<u64>() / 1_000_000
    };
    let w = Workload {
        processes: vec![
            proc(0, 0, demand(&a), 0, 0.0),
            proc(1, 0, demand(&b), 0, 0.0),
        ],
        apps: vec![app(0, a), app(1, b)],
    };
    w.validate("test", 2).unwrap();
    w
}

#[test]
fn a_process_waits_for_another_process_through_shared_points_then_sleeps() {
    // Two processes, one node of two CPUs, balancing free. A works 10 ms and signals point 0;
    // B, created blocked on point 0, is placed at 10 ms and works 5 ms, then signals point 1 at
    // 15 ms; A, blocked on point 1 since 10 ms, works 10 ms (15–25), sleeps 5 ms (25–30) and
    // works 3 ms more: it completes at 33 ms.
    let m = testutils::machine(&testutils::two_level_table(1, 20), 2);
    let mut slept = seg(3, None, None);
    slept.sleep_ns = Some(5_000_000);
    let w = ping_pong(
        vec![seg(10, None, Some(0)), seg(10, Some((1, 1)), None), slept],
        vec![seg(5, Some((0, 1)), Some(1))],
    );
    let r = simulate(&m, Builder::Flat, &w, &free_balancing());
    assert_eq!(tat(&r), vec![33.0, 15.0], "B arrived at 0");
    assert_eq!(r.processes[1].first_run_ms, 10.0);
    assert_eq!(r.processes[0].sync_wait_ms, 5.0);
    assert_eq!(r.processes[0].io_wait_ms, 5.0);
    assert_eq!(r.processes[0].cpu_ms, 23.0);
}

#[test]
fn a_shared_point_nobody_signals_enough_is_refused_and_so_is_a_bad_sleep() {
    let mut w = ping_pong(
        vec![seg(10, None, Some(0))],
        vec![seg(5, Some((0, 1)), None)],
    );
    w.apps[1].plans[0][0].wait = Some(numasim_core::apps::Wait { point: 0, count: 2 });
    let e = w.validate("t", 2).unwrap_err().to_string();
    assert!(
        e.contains("shared point 0 is waited for 2 times but signalled 1"),
        "{e}"
    );
    // Without shared points, each application's point 0 is its own: A's is never waited for,
    // B's never signalled.
    w.apps[1].plans[0][0].wait = Some(numasim_core::apps::Wait { point: 0, count: 1 });
    w.apps[0].shared_points = false;
    w.apps[1].shared_points = false;
    let e = w.validate("t", 2).unwrap_err().to_string();
    assert!(
        e.contains("point 0 is waited for 1 times but signalled 0"),
        "{e}"
    );
    let mut w = ping_pong(
        vec![seg(10, None, None), seg(1, None, None)],
        vec![seg(5, None, None)],
    );
    w.apps[0].plans[0][0].sleep_ns = Some(1);
    let e = w.validate("t", 2).unwrap_err().to_string();
    assert!(e.contains("segment 0: a first segment cannot sleep"), "{e}");
    w.apps[0].plans[0][0].sleep_ns = None;
    w.apps[0].plans[0][1].sleep_ns = Some(0);
    let e = w.validate("t", 2).unwrap_err().to_string();
    assert!(e.contains("a sleep of 0 ns must be positive"), "{e}");
    w.apps[0].plans[0][1].sleep_ns = Some(4);
    w.apps[0].plans[0][1].wait = Some(numasim_core::apps::Wait { point: 0, count: 1 });
    w.apps[1].plans[0][0].signal = Some(0);
    let e = w.validate("t", 2).unwrap_err().to_string();
    assert!(e.contains("it sleeps and waits"), "{e}");
}

#[test]
fn a_pipeline_stage_waits_for_the_item_before_it() {
    // Stage "in" (t0): items of 5 ms; stage "out" (t1): items of 10 ms, each waiting for the
    // same item from "in". t1 is created blocked (nothing to take), placed at 5 ms on the idle
    // CPU 1, runs item 0 from 5 to 15 and item 1 (ready since 10) from 15 to 25.
    let m = testutils::machine(&testutils::two_level_table(1, 20), 2);
    let w = app_workload(
        vec![
            vec![seg(5, None, Some(0)), seg(5, None, Some(1))],
            vec![seg(10, Some((0, 1)), None), seg(10, Some((1, 1)), None)],
        ],
        2,
        0,
    );
    let r = simulate(&m, Builder::Flat, &w, &free_balancing());
    assert_eq!(tat(&r), vec![10.0, 25.0]);
    assert_eq!(r.processes[1].first_run_ms, 5.0);
    assert_eq!(r.processes[1].sync_wait_ms, 5.0);
    assert_eq!(r.apps[0].completion_ms, 25.0);
}

#[test]
fn a_slice_ends_at_the_first_tick_after_it_runs_out_when_the_policy_says_so() {
    // One CPU, two 8 ms CPU-bound processes, `linux` with a 3 ms slice (slice-us=3000, one
    // CPU: factor 1). Its slice is seen at the tick (Policy::slice_tick_ns, the jiffy): at
    // HZ = 250 each runs until the next 4 ms tick — P0 0–4, P1 4–8, P0 8–12 (done), P1 12–16;
    // at HZ = 1000 (1 ms ticks) the 3 ms slice ends on a tick — P0 0–3, P1 3–6, P0 6–9,
    // P1 9–12, P0 12–14 (done), P1 14–16.
    let m = testutils::machine(&testutils::two_level_table(1, 20), 1);
    let w = Workload {
        apps: Vec::new(),
        processes: vec![proc(0, 0, 8, 0, 0.0), proc(1, 0, 8, 0, 0.0)],
    };
    let d = Builder::Linux.build(&m, &BuildOptions::default());
    let config = EngineConfig::default();
    for (policy, want) in [
        ("linux:slice-us=3000", [12.0, 16.0]),
        ("linux:slice-us=3000,hz=1000", [14.0, 16.0]),
    ] {
        let r = numasim_core::run_policy(&m, &d, &w, policy, &config).unwrap();
        assert_eq!(tat(&r), want, "{policy}");
    }
}

/// Every process starts on CPU 0. CPU 1 asks once for an active balance from CPU 0: at its
/// periodic balancing at 1 ms, or (`newidle`) when its own short process ends; each ask
/// examines 3 runqueues (3 µs). The stopper moves CPU 0's queued process (or the running one).
struct Kicker {
    latency: Option<u64>,
    newidle: bool,
    asked: bool,
    /// (time, busiest, target) of each `active_balance` call.
    calls: Vec<(u64, usize, usize)>,
    /// (time, cpu) of each newly-idle balancing call at level 0.
    newidle_calls: Vec<(u64, usize)>,
}

impl policy::Policy for Kicker {
    fn name(&self) -> &'static str {
        "test"
    }
    fn place_new(&mut self, _: &interface::View<'_>, pid: usize, _: usize) -> Option<usize> {
        Some(usize::from(self.newidle && pid == 2))
    }
    fn place_wakeup(&mut self, _: &interface::View<'_>, _: usize, prev: usize) -> Option<usize> {
        Some(prev)
    }
    fn next_periodic_ns(&self, _: &interface::View<'_>, cpu: usize) -> Option<u64> {
        (cpu == 1 && !self.newidle && !self.asked).then_some(1_000_000)
    }
    fn balance(
        &mut self,
        v: &interface::View<'_>,
        cpu: usize,
        level: usize,
        kind: policy::BalanceKind,
    ) -> Option<policy::Attempt> {
        if kind == policy::BalanceKind::NewIdle && level == 0 {
            self.newidle_calls.push((v.now, cpu));
        }
        let wanted = if self.newidle {
            policy::BalanceKind::NewIdle
        } else {
            policy::BalanceKind::Periodic
        };
        if cpu != 1 || kind != wanted || self.asked {
            return None;
        }
        self.asked = true;
        Some(policy::Attempt {
            rqs_examined: 3,
            active_from: Some(0),
            ..policy::Attempt::default()
        })
    }
    fn active_balance_latency_ns(&self) -> Option<u64> {
        self.latency
    }
    fn active_balance(
        &mut self,
        v: &interface::View<'_>,
        busiest: usize,
        target: usize,
    ) -> Option<policy::Attempt> {
        self.calls.push((v.now, busiest, target));
        let pid = v.queued(busiest).next().or(v.current(busiest))?;
        Some(policy::Attempt {
            moves: vec![policy::Move {
                pid,
                from: busiest,
                to: target,
                kind: policy::MigrationKind::Active,
            }],
            counted_at: Some(0),
            ..policy::Attempt::default()
        })
    }
}

#[test]
fn an_active_balance_runs_at_once_or_the_policy_s_latency_after_the_asking_work() {
    // Two CPU-bound processes on CPU 0 of a 2-CPU node; CPU 1's periodic balancing at 1 ms
    // (3 µs of work) asks for an active balance. Without a latency the stopper runs at 1 ms;
    // with 5 µs, at 1 ms + 3 µs + 5 µs — and the queued process P1 moves to CPU 1 then.
    let m = testutils::machine(&testutils::two_level_table(1, 20), 2);
    let w = Workload {
        apps: Vec::new(),
        processes: vec![proc(0, 0, 50, 0, 0.0), proc(1, 0, 50, 0, 0.0)],
    };
    let d = Builder::Flat.build(&m, &BuildOptions::default());
    for (latency, at) in [(None, 1_000_000), (Some(5_000), 1_008_000)] {
        let mut p = Kicker {
            latency,
            newidle: false,
            asked: false,
            calls: Vec::new(),
            newidle_calls: Vec::new(),
        };
        let r = engine::run(&m, &d, &w, &mut p, &EngineConfig::default()).unwrap();
        assert_eq!(p.calls, vec![(at, 0, 1)], "{latency:?}");
        assert_eq!(r.summary.balance.active, vec![1]);
        assert_eq!(r.summary.migrations_by_kind[4], ("active".to_string(), 1));
    }
}

#[test]
fn a_newly_idle_attempt_may_ask_for_an_active_balance_too() {
    // P0 and P1 on CPU 0, P2 (1 ms) on CPU 1: when P2 ends at 1 ms CPU 1 balances newly idle
    // (3 µs) and asks for an active balance, which runs 5 µs after that work.
    let m = testutils::machine(&testutils::two_level_table(1, 20), 2);
    let w = Workload {
        apps: Vec::new(),
        processes: vec![
            proc(0, 0, 50, 0, 0.0),
            proc(1, 0, 50, 0, 0.0),
            proc(2, 0, 1, 1, 0.0),
        ],
    };
    let d = Builder::Flat.build(&m, &BuildOptions::default());
    let mut p = Kicker {
        latency: Some(5_000),
        newidle: true,
        asked: false,
        calls: Vec::new(),
        newidle_calls: Vec::new(),
    };
    let r = engine::run(&m, &d, &w, &mut p, &EngineConfig::default()).unwrap();
    assert_eq!(p.calls, vec![(1_008_000, 0, 1)]);
    assert_eq!(r.summary.migrations_by_kind[4], ("active".to_string(), 1));
}

#[test]
fn a_cpu_emptied_by_a_move_balances_newly_idle() {
    // P0 alone on CPU 0. CPU 1's periodic balancing at 1 ms (3 µs) asks for an active balance
    // that runs 5 µs later and pushes the running P0 to CPU 1: CPU 0, left with nothing, then
    // balances newly idle at that instant (the kernel's schedule() after the stopper); CPU 1,
    // which received work, does not.
    let m = testutils::machine(&testutils::two_level_table(1, 20), 2);
    let w = Workload {
        apps: Vec::new(),
        processes: vec![proc(0, 0, 50, 0, 0.0)],
    };
    let d = Builder::Flat.build(&m, &BuildOptions::default());
    let mut p = Kicker {
        latency: Some(5_000),
        newidle: false,
        asked: false,
        calls: Vec::new(),
        newidle_calls: Vec::new(),
    };
    let r = engine::run(&m, &d, &w, &mut p, &EngineConfig::default()).unwrap();
    assert_eq!(p.calls, vec![(1_008_000, 0, 1)]);
    // (and CPU 1 when P0 ends: at 50.1 ms, the 0.1 ms refill after the move).
    assert_eq!(p.newidle_calls, vec![(1_008_000, 0), (50_100_000, 1)]);
    assert_eq!(tat(&r), vec![50.1]);
}

/// CPU 0's periodic event at 1 ms interrupts CPU 1 (arriving 2 µs later), which then balances
/// CPUs 2 and 3 on their behalf, 10 runqueues (10 µs) each. With `busy_ilb`, CPU 1 balances
/// itself at 1 ms too (5 runqueues: 5 µs of work).
struct OnBehalf {
    busy_ilb: bool,
    queue: Vec<usize>,
    /// (time, cpu) of each periodic `balance` call.
    balanced: Vec<(u64, usize)>,
}

impl policy::Policy for OnBehalf {
    fn name(&self) -> &'static str {
        "test"
    }
    fn place_new(&mut self, _: &interface::View<'_>, _: usize, _: usize) -> Option<usize> {
        Some(0)
    }
    fn place_wakeup(&mut self, _: &interface::View<'_>, _: usize, prev: usize) -> Option<usize> {
        Some(prev)
    }
    fn next_periodic_ns(&self, v: &interface::View<'_>, cpu: usize) -> Option<u64> {
        let own = cpu == 0 || (cpu == 1 && self.busy_ilb);
        (own && v.now < 1_000_000).then_some(1_000_000)
    }
    fn kick(&mut self, v: &interface::View<'_>, cpu: usize) -> Option<(usize, u64)> {
        (cpu == 0).then_some((1, v.now + 2_000))
    }
    fn next_kicked(&mut self, _: &interface::View<'_>, cpu: usize) -> Option<usize> {
        assert_eq!(cpu, 1);
        self.queue.pop()
    }
    fn balance(
        &mut self,
        v: &interface::View<'_>,
        cpu: usize,
        _: usize,
        kind: policy::BalanceKind,
    ) -> Option<policy::Attempt> {
        if kind != policy::BalanceKind::Periodic || cpu == 0 {
            return None;
        }
        self.balanced.push((v.now, cpu));
        Some(policy::Attempt {
            rqs_examined: if cpu == 1 { 5 } else { 10 },
            ..policy::Attempt::default()
        })
    }
}

#[test]
fn a_kicked_cpu_balances_others_on_their_behalf_one_after_another() {
    // CPU 2 is balanced at 1.002 ms, CPU 3 once CPU 1's 10 µs of work for it end (1.012 ms);
    // the attempts count as CPUs 2 and 3's (their level 0, periodic), the stall is CPU 1's.
    let m = testutils::machine(&testutils::two_level_table(1, 20), 4);
    let w = Workload {
        apps: Vec::new(),
        processes: vec![proc(0, 0, 5, 0, 0.0)],
    };
    let d = Builder::Flat.build(&m, &BuildOptions::default());
    let mut p = OnBehalf {
        busy_ilb: false,
        queue: vec![3, 2],
        balanced: Vec::new(),
    };
    let config = EngineConfig {
        record_trace: true,
        ..EngineConfig::default()
    };
    let r = engine::run(&m, &d, &w, &mut p, &config).unwrap();
    assert_eq!(p.balanced, vec![(1_002_000, 2), (1_012_000, 3)]);
    // CPU 1 busy with its own balancing until 1.005 ms when the interrupt arrives: it takes
    // the work up then.
    let mut q = OnBehalf {
        busy_ilb: true,
        queue: vec![3, 2],
        balanced: Vec::new(),
    };
    engine::run(&m, &d, &w, &mut q, &config).unwrap();
    assert_eq!(
        q.balanced,
        vec![(1_000_000, 1), (1_005_000, 2), (1_015_000, 3)]
    );
    let balances: Vec<(u64, usize)> = r.trace_events.balances.iter().map(|b| (b.0, b.1)).collect();
    assert_eq!(balances, vec![(1_002_000, 2), (1_012_000, 3)]);
    assert_eq!(r.summary.balance.periodic, vec![2]);
    assert_eq!(r.summary.balance.idle_per_cpu, vec![0, 0, 1, 1]);
    assert_eq!(r.summary.balance.cost_ms, 0.02);
}

/// `assume` without balancing costs; event times are whole ns, rounded up, so each burst may end
/// up to 1 ns late (the tolerances below: 100 ns).
fn free(assume: &str) -> EngineConfig {
    EngineConfig {
        assumptions: numasim_core::assumptions::Assumptions::parse("test", assume).unwrap(),
        ..free_balancing()
    }
}

/// The bursts and waits an IO-bound process draws from its own generator, in the engine's
/// order (burst, wait, burst, …): the `n` first of each, in ns.
fn draws(p: &Process, n: usize) -> (Vec<f64>, Vec<f64>) {
    use rand::SeedableRng;
    use rand_distr::{Distribution, Exp};
    let mut rng = rand_pcg::Pcg64::seed_from_u64(p.seed);
    let burst = Exp::new(1.0 / p.burst_mean_ns as f64).unwrap();
    let wait = Exp::new(1.0 / p.wait_mean_ns as f64).unwrap();
    let (mut bs, mut ws) = (Vec::new(), Vec::new());
    for _ in 0..n {
        bs.push(burst.sample(&mut rng).max(1.0));
        ws.push((wait.sample(&mut rng).round() as u64).max(1) as f64);
    }
    (bs, ws)
}

#[test]
fn exec_total_makes_an_io_process_alone_finish_in_its_execution_time() {
    // One CPU, one IO-bound process of exec 200 ms (bursts 10 ms, waits 20 ms, m = 0: its rate
    // is 1 wherever its pages are).
    let m = testutils::machine(&testutils::two_level_table(1, 20), 1);
    let mut p = testutils::process(0, Kind::Io, 200);
    p.mem = 0.0;
    p.seed = 3;
    let w = Workload {
        apps: Vec::new(),
        processes: vec![p.clone()],
    };
    let (bs, ws) = draws(&p, 200);
    let run = |assume: &str| simulate(&m, Builder::Flat, &w, &free(assume)).processes[0].clone();
    // cpu: bursts until 200 ms of work are done, every wait between them on top.
    let (mut work, mut k) = (0.0, 0);
    while work + bs[k] < 200e6 {
        work += bs[k];
        k += 1;
    }
    let waits: f64 = ws[..k].iter().sum();
    let r = run("exec=cpu");
    assert!((r.cpu_ms - 200.0).abs() < 1e-4, "{}", r.cpu_ms);
    assert!((r.io_wait_ms - waits / 1e6).abs() < 1e-4);
    assert!((r.turnaround_ms - (200.0 + waits / 1e6)).abs() < 1e-4);
    assert!(
        r.turnaround_ms > 250.0,
        "waits of 20 ms between 10 ms bursts"
    );
    // total: bursts and waits alternate until their sum reaches 200 ms; it finishes in 200 ms,
    // and its CPU time is the bursts that fit.
    let (mut t, mut cpu, mut i) = (0.0, 0.0, 0);
    loop {
        let b = bs[i].min(200e6 - t);
        t += b;
        cpu += b;
        if 200e6 - t <= 1e-3 {
            break;
        }
        if t + ws[i] + 1.0 > 200e6 {
            cpu += 1.0; // the cut last wait, then a 1 ns exit burst
            break;
        }
        t += ws[i];
        i += 1;
    }
    let r = run("exec=total");
    assert!(
        (r.turnaround_ms - 200.0).abs() <= 1e-4,
        "{}",
        r.turnaround_ms
    );
    assert!((r.cpu_ms - cpu / 1e6).abs() < 1e-4, "{} {}", r.cpu_ms, cpu);
    assert!((r.cpu_ms + r.io_wait_ms - 200.0).abs() <= 1e-4);
    assert!(r.cpu_ms < 100.0, "about a third of 200 ms is CPU");
    // A CPU-bound process reads the same under both.
    let c = Workload {
        apps: Vec::new(),
        processes: vec![testutils::process(0, Kind::Cpu, 200)],
    };
    for assume in ["exec=cpu", "exec=total"] {
        let r = simulate(&m, Builder::Flat, &c, &free(assume));
        assert_eq!(r.processes[0].turnaround_ms, 200.0);
    }
}

#[test]
fn exec_total_cuts_a_wait_that_outlasts_the_execution_time() {
    // Waits of 1 s mean after bursts of 10 ms mean, exec 50 ms (Corrêa's IO time against a
    // short execution): under total the first wait is cut at 50 ms less the 1 ns exit burst.
    let m = testutils::machine(&testutils::two_level_table(1, 20), 1);
    let mut p = testutils::process(0, Kind::Io, 50);
    p.mem = 0.0;
    p.seed = 1;
    p.wait_mean_ns = 1_000_000_000;
    let (bs, ws) = draws(&p, 1);
    assert!(
        bs[0] < 50e6 && bs[0] + ws[0] > 50e6,
        "seed 1 draws a short burst, a long wait"
    );
    let w = Workload {
        apps: Vec::new(),
        processes: vec![p],
    };
    let r = simulate(&m, Builder::Flat, &w, &free("exec=total")).processes[0].clone();
    assert!(
        (r.turnaround_ms - 50.0).abs() <= 1e-4,
        "{}",
        r.turnaround_ms
    );
    assert!((r.cpu_ms - (bs[0] + 1.0) / 1e6).abs() < 1e-4);
    // Under cpu the same process runs 50 ms of bursts with a wait of ~1 s after each.
    let r = simulate(&m, Builder::Flat, &w, &free("exec=cpu")).processes[0].clone();
    assert!((r.cpu_ms - 50.0).abs() < 1e-4);
    assert!(r.turnaround_ms > 50.0 + ws[0] / 1e6);
}

#[test]
fn a_traced_run_records_each_wake_up_when_its_wait_ends() {
    // One CPU, an IO-bound process alone (exec=cpu, m = 0): it wakes after each of its waits,
    // at the sum of the bursts and waits so far, and runs at once (a delay of 0); a CPU-bound
    // process beside it never sleeps, so never wakes. An untraced run records nothing.
    let m = testutils::machine(&testutils::two_level_table(1, 20), 1);
    let mut p = testutils::process(0, Kind::Io, 200);
    p.mem = 0.0;
    p.seed = 3;
    let (bs, ws) = draws(&p, 200);
    let w = Workload {
        apps: Vec::new(),
        processes: vec![p],
    };
    let traced = EngineConfig {
        record_trace: true,
        ..free("exec=cpu")
    };
    let r = simulate(&m, Builder::Flat, &w, &traced);
    let (mut work, mut k) = (0.0, 0);
    while work + bs[k] < 200e6 {
        work += bs[k];
        k += 1;
    }
    let wakes = &r.trace_events.wakeups;
    assert_eq!(wakes.len(), k, "one wake-up per wait");
    let mut t = 0.0;
    for (i, &(at, pid)) in wakes.iter().enumerate() {
        t += bs[i] + ws[i];
        assert_eq!(pid, 0);
        assert!((at as f64 - t).abs() <= 100.0 * (i + 1) as f64, "{at} {t}");
        let next = r
            .trace
            .iter()
            .find(|s| s.pid == 0 && s.start_ns >= at)
            .unwrap();
        assert_eq!(next.start_ns, at, "an idle CPU runs it at once");
    }
    let untraced = simulate(&m, Builder::Flat, &w, &free("exec=cpu"));
    assert!(untraced.trace_events.wakeups.is_empty());
    assert_eq!(untraced.processes, r.processes, "recording changes nothing");
    let c = Workload {
        apps: Vec::new(),
        processes: vec![testutils::process(0, Kind::Cpu, 20)],
    };
    assert!(simulate(&m, Builder::Flat, &c, &traced)
        .trace_events
        .wakeups
        .is_empty());
}

/// Places every process on its spawn CPU, keeps duty cycles with a 100 ms half-life (or none)
/// and reads every process's duty cycle at each machine-wide call, every 50 ms.
struct DutyProbe {
    half_life_ns: Option<u64>,
    reads: Vec<(u64, Vec<f64>)>,
}

impl policy::Policy for DutyProbe {
    fn name(&self) -> &'static str {
        "duty-probe"
    }
    fn place_new(&mut self, _: &interface::View<'_>, _: usize, spawn: usize) -> Option<usize> {
        Some(spawn)
    }
    fn place_wakeup(&mut self, _: &interface::View<'_>, _: usize, prev: usize) -> Option<usize> {
        Some(prev)
    }
    fn next_periodic_ns(&self, _: &interface::View<'_>, _: usize) -> Option<u64> {
        None
    }
    fn balance(
        &mut self,
        _: &interface::View<'_>,
        _: usize,
        _: usize,
        _: policy::BalanceKind,
    ) -> Option<policy::Attempt> {
        None
    }
    fn duty_cycle_half_life_ns(&self) -> Option<u64> {
        self.half_life_ns
    }
    fn global_period_ns(&self) -> Option<u64> {
        Some(50_000_000)
    }
    fn global_balance(&mut self, v: &interface::View<'_>) -> Option<policy::Attempt> {
        let duty = (0..v.proc_count()).map(|pid| v.duty_cycle(pid)).collect();
        self.reads.push((v.now / 1_000_000, duty));
        let on_cpu: f64 = v
            .current(0)
            .into_iter()
            .chain(v.queued(0))
            .map(|p| v.duty_cycle(p))
            .sum();
        assert_eq!(v.cpu_duty_cycle(0), on_cpu);
        None
    }
}

#[test]
fn the_duty_cycle_is_the_runnable_share_over_a_halving_window() {
    // One CPU, 100 ms slices: P0 runs 0-100 ms, P1 waits then runs 100-200 ms (runnable from
    // 0), P2 arrives at 350 ms and runs 10 ms. Half-life 100 ms, periods from 0:
    //   50:  P0, P1 half a period runnable: old 0, cur 1/2 → 1/4
    //   150: P0 old 1/2 → 1/2 · (1 − 1/4) = 3/8;  P1 old 1/2, cur 1/2 → 3/8 + 1/4 = 5/8
    //   200: P0 1/4;  P1 3/4        250: P0 3/16;  P1 9/16
    //   300: P0 1/8;  P1 3/8        350: P0 3/32;  P1 9/32;  P2 0 (runnable from now)
    let m = testutils::machine(&testutils::two_level_table(1, 20), 1);
    let w = Workload {
        apps: Vec::new(),
        processes: vec![
            proc(0, 0, 100, 0, 0.0),
            proc(1, 0, 100, 0, 0.0),
            proc(2, 350, 10, 0, 0.0),
        ],
    };
    let d = Builder::Flat.build(&m, &BuildOptions::default());
    let mut p = DutyProbe {
        half_life_ns: Some(100_000_000),
        reads: Vec::new(),
    };
    let r = engine::run(&m, &d, &w, &mut p, &free_balancing()).unwrap();
    assert_eq!(tat(&r), vec![100.0, 200.0, 10.0]);
    let want: [(u64, [f64; 3]); 7] = [
        (50, [0.25, 0.25, 0.0]),
        (100, [0.5, 0.5, 0.0]),
        (150, [0.375, 0.625, 0.0]),
        (200, [0.25, 0.75, 0.0]),
        (250, [0.1875, 0.5625, 0.0]),
        (300, [0.125, 0.375, 0.0]),
        (350, [0.09375, 0.28125, 0.0]),
    ];
    assert_eq!(p.reads.len(), want.len(), "{:?}", p.reads);
    for ((at, got), (want_at, want)) in p.reads.iter().zip(want) {
        assert_eq!(*at, want_at);
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() < 1e-12, "at {at} ms: {got:?}, want {want:?}");
        }
    }
    // Kept or not, the duty cycle changes nothing in the run; off, it reads zero.
    let mut off = DutyProbe {
        half_life_ns: None,
        reads: Vec::new(),
    };
    let r_off = engine::run(&m, &d, &w, &mut off, &free_balancing()).unwrap();
    assert_eq!(
        serde_json::to_string(&r).unwrap(),
        serde_json::to_string(&r_off).unwrap()
    );
    assert!(off.reads.iter().all(|(_, d)| d.iter().all(|&x| x == 0.0)));
}

/// Places every process on its spawn CPU and wakes it where it slept; at its first machine-wide
/// call (every 20 ms) gives the lazy moves `lazy`; records, at every call, what CPUs 0 and 1
/// run.
struct LazyProbe {
    lazy: Vec<policy::LazyMove>,
    running: Vec<(u64, Option<usize>, Option<usize>)>,
}

impl policy::Policy for LazyProbe {
    fn name(&self) -> &'static str {
        "lazy-probe"
    }
    fn place_new(&mut self, _: &interface::View<'_>, _: usize, spawn: usize) -> Option<usize> {
        Some(spawn)
    }
    fn place_wakeup(&mut self, _: &interface::View<'_>, _: usize, prev: usize) -> Option<usize> {
        Some(prev)
    }
    fn next_periodic_ns(&self, _: &interface::View<'_>, _: usize) -> Option<u64> {
        None
    }
    fn balance(
        &mut self,
        _: &interface::View<'_>,
        _: usize,
        _: usize,
        _: policy::BalanceKind,
    ) -> Option<policy::Attempt> {
        None
    }
    fn global_period_ns(&self) -> Option<u64> {
        Some(20_000_000)
    }
    fn global_balance(&mut self, v: &interface::View<'_>) -> Option<policy::Attempt> {
        self.running
            .push((v.now / 1_000_000, v.current(0), v.current(1)));
        let lazy_moves = std::mem::take(&mut self.lazy);
        (!lazy_moves.is_empty()).then(|| policy::Attempt {
            lazy_moves,
            ..policy::Attempt::default()
        })
    }
}

fn lazy(pid: usize, node: usize) -> policy::LazyMove {
    policy::LazyMove { pid, node }
}

fn run_lazy(w: &Workload, moves: Vec<policy::LazyMove>) -> (RunResult, LazyProbe) {
    // Two nodes at distance 20, one CPU each: a move across them refills for 1 ms.
    let m = testutils::machine(&testutils::two_level_table(2, 20), 1);
    let d = Builder::Linux.build(&m, &BuildOptions::default());
    let mut p = LazyProbe {
        lazy: moves,
        running: Vec::new(),
    };
    let r = engine::run(&m, &d, w, &mut p, &free_balancing()).unwrap();
    (r, p)
}

fn kind_count(r: &RunResult, kind: &str) -> u64 {
    r.summary
        .migrations_by_kind
        .iter()
        .find(|(k, _)| k == kind)
        .map_or(0, |(_, n)| *n)
}

#[test]
fn a_blocked_process_given_a_lazy_move_wakes_on_its_node() {
    // P0 runs 0-10 ms on CPU 0 (node 0), sleeps 10-30 ms, then works 10 ms. At 20 ms, asleep,
    // it is sent to node 1 lazily: it wakes at 30 ms on CPU 1 (its policy said CPU 0), a
    // wake-up migration, refills 1 ms and completes at 41 ms. Without the move: 40 ms, there.
    let mut slept = seg(10, None, None);
    slept.sleep_ns = Some(20_000_000);
    let w = app_workload(vec![vec![seg(10, None, None), slept]], 0, 0);
    let (r, _) = run_lazy(&w, vec![lazy(0, 1)]);
    assert_eq!(tat(&r), vec![41.0]);
    assert_eq!(kind_count(&r, "wakeup"), 1);
    assert_eq!(r.summary.migrations, 1);
    assert_eq!(r.summary.balance.rejected, 0);
    let (r, _) = run_lazy(&w, Vec::new());
    assert_eq!(tat(&r), vec![40.0]);
    assert_eq!(r.summary.migrations, 0);
}

#[test]
fn a_running_process_given_a_lazy_move_stays_until_it_is_enqueued_again() {
    // P0 and P1, 300 ms each, both on CPU 0 (100 ms slices): P0 runs first. At 20 ms P0 is
    // sent to node 1 lazily; it keeps CPU 0 until its slice ends at 100 ms with P1 waiting,
    // is put back on a runqueue and so goes to CPU 1 (a push), refills 1 ms, and completes at
    // 100 + 1 + 200 = 301 ms. P1 runs alone on CPU 0 from 100 ms: 400 ms.
    let w = Workload {
        apps: Vec::new(),
        processes: vec![proc(0, 0, 300, 0, 0.0), proc(1, 0, 300, 0, 0.0)],
    };
    let (r, p) = run_lazy(&w, vec![lazy(0, 1)]);
    assert_eq!(tat(&r), vec![301.0, 400.0]);
    assert_eq!(kind_count(&r, "push"), 1);
    assert_eq!(r.summary.migrations, 1);
    let at = |ms: u64| p.running.iter().find(|r| r.0 == ms).map(|r| (r.1, r.2));
    assert_eq!(
        at(40),
        Some((Some(0), None)),
        "P0 still on CPU 0 after the move"
    );
    assert_eq!(at(80), Some((Some(0), None)));
    assert_eq!(at(120), Some((Some(1), Some(0))));
}

#[test]
fn lazy_moves_to_no_node_or_of_no_process_are_refused_and_a_later_one_replaces_an_earlier() {
    let mut slept = seg(10, None, None);
    slept.sleep_ns = Some(20_000_000);
    let w = app_workload(vec![vec![seg(10, None, None), slept]], 0, 0);
    let (r, _) = run_lazy(&w, vec![lazy(0, 2), lazy(5, 1)]);
    assert_eq!(r.summary.balance.rejected, 2);
    assert_eq!((tat(&r), r.summary.migrations), (vec![40.0], 0));
    // To node 1, then back to node 0 (its own): it wakes where it slept.
    let (r, _) = run_lazy(&w, vec![lazy(0, 1), lazy(0, 0)]);
    assert_eq!((tat(&r), r.summary.migrations), (vec![40.0], 0));
    assert_eq!(r.summary.balance.rejected, 0);
}
