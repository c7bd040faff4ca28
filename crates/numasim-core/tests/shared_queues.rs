//! The engine's shared dispatch queues, the slice an enqueue gives, and where a machine-wide
//! balancer's work is charged, on hand-computed schedules with a probe policy.

use numasim_core::config::EngineConfig;
use numasim_core::domains::{BuildOptions, Builder};
use numasim_core::engine::{self, RunResult};
use numasim_core::interface::{Attempt, BalanceKind, Enqueue, EnqueueKind, Pid, Policy, View};
use numasim_core::machine::{CpuId, Machine};
use numasim_core::testutils;
use numasim_core::workload::{Kind, Process, Workload};

/// A CPU-bound process of `demand_ms` from `arrival_ms` with its parent on `spawn`, all its
/// memory local (no remote slowdown).
fn proc(pid: u32, arrival_ms: u64, demand_ms: u64, spawn: u32) -> Process {
    Process {
        arrival_ns: arrival_ms * 1_000_000,
        spawn_cpu: spawn,
        mem: 0.0,
        ..testutils::process(pid, Kind::Cpu, demand_ms)
    }
}

fn workload(processes: Vec<Process>) -> Workload {
    Workload {
        apps: Vec::new(),
        processes,
    }
}

/// Balancing and cache refills free: the schedules below are the queues' alone.
fn free() -> EngineConfig {
    EngineConfig {
        cost_per_rq_ns: 0,
        cost_per_task_ns: 0,
        cost_per_migration_ns: 0,
        refill_in_node_ns: 0,
        refill_per_distance_ns: 0,
        ..EngineConfig::default()
    }
}

fn tat(r: &RunResult) -> Vec<f64> {
    r.processes.iter().map(|p| p.turnaround_ms).collect()
}

fn kind_count(r: &RunResult, kind: &str) -> u64 {
    r.summary
        .migrations_by_kind
        .iter()
        .find(|(k, _)| k == kind)
        .map_or(0, |(_, n)| *n)
}

/// Places every process on its parent's CPU (waking ones where they slept) and enqueues them as
/// `to` says; every CPU dispatches from queue 0 (then `extra`, if any). Its machine-wide call
/// (every `period_ns`, if set) records what the view shows of the queues and charges `work_ns`
/// to `charge`.
struct Probe {
    queues: usize,
    to: fn(Pid, EnqueueKind) -> Enqueue,
    extra: Option<usize>,
    period_ns: Option<u64>,
    half_life_ns: Option<u64>,
    work_ns: u64,
    charge: Option<CpuId>,
    enqueued: Vec<(Pid, CpuId, EnqueueKind)>,
    dispatched: Vec<CpuId>,
    seen: Vec<Seen>,
}

/// What a machine-wide call saw: time (ms), queue 0's processes, where process 1 waits, its
/// duty cycle.
type Seen = (u64, Vec<Pid>, Option<usize>, f64);

impl Probe {
    fn new(queues: usize, to: fn(Pid, EnqueueKind) -> Enqueue) -> Self {
        Probe {
            queues,
            to,
            extra: None,
            period_ns: None,
            half_life_ns: None,
            work_ns: 0,
            charge: None,
            enqueued: Vec::new(),
            dispatched: Vec::new(),
            seen: Vec::new(),
        }
    }
}

impl Policy for Probe {
    fn name(&self) -> &'static str {
        "queue-probe"
    }
    fn place_new(&mut self, _: &View<'_>, _: Pid, spawn: CpuId) -> Option<CpuId> {
        Some(spawn)
    }
    fn place_wakeup(&mut self, _: &View<'_>, _: Pid, prev: CpuId) -> Option<CpuId> {
        Some(prev)
    }
    fn next_periodic_ns(&self, _: &View<'_>, _: CpuId) -> Option<u64> {
        None
    }
    fn balance(&mut self, _: &View<'_>, _: CpuId, _: usize, _: BalanceKind) -> Option<Attempt> {
        None
    }
    fn shared_queues(&self) -> usize {
        self.queues
    }
    fn enqueue(&mut self, _: &View<'_>, pid: Pid, cpu: CpuId, why: EnqueueKind) -> Enqueue {
        self.enqueued.push((pid, cpu, why));
        (self.to)(pid, why)
    }
    fn dispatch(&mut self, _: &View<'_>, cpu: CpuId, order: &mut Vec<usize>) {
        assert!(order.is_empty(), "the order starts empty");
        self.dispatched.push(cpu);
        order.push(0);
        order.extend(self.extra);
    }
    fn duty_cycle_half_life_ns(&self) -> Option<u64> {
        self.half_life_ns
    }
    fn global_period_ns(&self) -> Option<u64> {
        self.period_ns
    }
    fn global_balance(&mut self, v: &View<'_>) -> Option<Attempt> {
        let queued = if v.shared_queues() > 0 {
            assert_eq!(v.shared_len(0), v.shared_tasks(0).count());
            v.shared_tasks(0).collect()
        } else {
            Vec::new()
        };
        let seen = (
            v.now / 1_000_000,
            queued,
            v.shared_queue_of(1),
            v.duty_cycle(1),
        );
        self.seen.push(seen);
        Some(Attempt {
            work_ns: self.work_ns,
            ..Attempt::default()
        })
    }
    fn global_charge_cpu(&self, _: &View<'_>) -> Option<CpuId> {
        self.charge
    }
}

fn run(m: &Machine, w: &Workload, p: &mut Probe) -> RunResult {
    let d = Builder::Flat.build(m, &BuildOptions::default());
    engine::run(m, &d, w, p, &free()).unwrap()
}

/// One node of `cpus` CPUs.
fn node(cpus: usize) -> Machine {
    testutils::machine(&testutils::two_level_table(1, 20), cpus)
}

fn fifo(_: Pid, _: EnqueueKind) -> Enqueue {
    Enqueue::Shared {
        queue: 0,
        key: 0,
        slice_ns: None,
        kick: None,
    }
}

fn fifo_kick_1(_: Pid, _: EnqueueKind) -> Enqueue {
    Enqueue::Shared {
        queue: 0,
        key: 0,
        slice_ns: None,
        kick: Some(1),
    }
}

#[test]
fn a_fifo_queue_rotates_at_each_slice_end_and_an_unkicked_cpu_stays_idle() {
    // Three processes of 150 ms, all created on CPU 0 of two, at 0 ms; 100 ms slices. P0 is
    // enqueued first: CPU 0 is idle and takes it. P1 and P2 wait in the queue: CPU 0 is busy
    // and nobody kicks CPU 1, which stays idle. At 100 ms CPU 0 takes P1 and P0 goes to the
    // tail ([P2, P0]); at 200 ms P2 ([P0, P1]); at 300 ms P0, which ends at 350; then P1 ends
    // at 400 and P2 at 450. Everything ran on CPU 0: no migration.
    let w = workload(vec![
        proc(0, 0, 150, 0),
        proc(1, 0, 150, 0),
        proc(2, 0, 150, 0),
    ]);
    let mut p = Probe::new(1, fifo);
    let r = run(&node(2), &w, &mut p);
    assert_eq!(tat(&r), vec![350.0, 400.0, 450.0]);
    assert_eq!(r.summary.migrations, 0);
    assert_eq!(r.summary.balance.rejected, 0);
    let ends = p
        .enqueued
        .iter()
        .filter(|e| e.2 == EnqueueKind::SliceEnd)
        .map(|e| e.0)
        .collect::<Vec<_>>();
    assert_eq!(ends, vec![0, 1, 2], "each slice end with others waiting");
    assert!(p.dispatched.iter().all(|&c| c == 0), "CPU 1 never asked");
}

#[test]
fn a_kicked_idle_cpu_takes_from_the_queue_and_a_take_from_another_cpu_is_a_pull() {
    // As above, but each enqueue kicks CPU 1. P0 runs on CPU 0 at once; P1's kick wakes CPU 1,
    // which takes it (its first run away from its parent's CPU: a placement); P2 waits. At
    // 100 ms CPU 0 (its milestone came first) takes P2 and P0 waits; CPU 1's slice ends too:
    // it takes P0, last run on CPU 0 (a pull), and P1 waits. P0 ends at 150 on CPU 1, which
    // takes P1 back (no move) until 200. CPU 0's slice ends at 200 with nothing queued: P2
    // keeps running and ends at 250.
    let w = workload(vec![
        proc(0, 0, 150, 0),
        proc(1, 0, 150, 0),
        proc(2, 0, 150, 0),
    ]);
    let mut p = Probe::new(1, fifo_kick_1);
    let r = run(&node(2), &w, &mut p);
    assert_eq!(tat(&r), vec![150.0, 200.0, 250.0]);
    assert_eq!(kind_count(&r, "placement"), 1);
    assert_eq!(kind_count(&r, "pull"), 1);
    assert_eq!(r.summary.migrations, 2);
}

fn by_pid_descending(pid: Pid, _: EnqueueKind) -> Enqueue {
    Enqueue::Shared {
        queue: 0,
        key: 10 - pid as u64,
        slice_ns: None,
        kick: None,
    }
}

#[test]
fn a_queue_is_taken_in_key_order() {
    // One CPU; keys 10, 9, 8 for P0, P1, P2 (lower first). P0 runs at once; P2 (key 8) runs
    // before P1 (key 9) at 100 ms; at 200 ms P1 (9) before P0 (10); at 300 ms P2 again (8),
    // which ends at 350; then P1 (ends 400) and P0 (ends 450).
    let w = workload(vec![
        proc(0, 0, 150, 0),
        proc(1, 0, 150, 0),
        proc(2, 0, 150, 0),
    ]);
    let mut p = Probe::new(1, by_pid_descending);
    let r = run(&node(1), &w, &mut p);
    assert_eq!(tat(&r), vec![450.0, 400.0, 350.0]);
}

fn local_10ms(_: Pid, _: EnqueueKind) -> Enqueue {
    Enqueue::Local {
        slice_ns: Some(10_000_000),
    }
}

fn shared_10ms(_: Pid, _: EnqueueKind) -> Enqueue {
    Enqueue::Shared {
        queue: 0,
        key: 0,
        slice_ns: Some(10_000_000),
        kick: None,
    }
}

#[test]
fn an_enqueue_gives_the_slice_the_process_runs_next() {
    // One CPU, two processes of 30 ms: 10 ms slices alternate them (P0 0-10, P1 10-20, ...):
    // P0 ends at 50, P1 at 60, on the CPU's own queue or a shared one alike. With the
    // engine's 100 ms slices P0 would end at 30.
    let w = workload(vec![proc(0, 0, 30, 0), proc(1, 0, 30, 0)]);
    for to in [local_10ms as fn(Pid, EnqueueKind) -> Enqueue, shared_10ms] {
        let mut p = Probe::new(1, to);
        let r = run(&node(1), &w, &mut p);
        assert_eq!(tat(&r), vec![50.0, 60.0]);
    }
    let mut p = Probe::new(1, |_, _| Enqueue::Local { slice_ns: None });
    assert_eq!(tat(&run(&node(1), &w, &mut p)), vec![30.0, 60.0]);
}

fn to_queue_5(_: Pid, _: EnqueueKind) -> Enqueue {
    Enqueue::Shared {
        queue: 5,
        key: 0,
        slice_ns: None,
        kick: None,
    }
}

#[test]
fn a_queue_out_of_range_is_refused_and_the_process_goes_to_its_cpu() {
    // Enqueues to queue 5 of 1 are refused (counted), and the schedule is round robin on the
    // CPU's own queue; a dispatch order naming queue 5 is refused too, queue 0 then asked.
    let w = workload(vec![proc(0, 0, 150, 0), proc(1, 0, 150, 0)]);
    let mut p = Probe::new(1, to_queue_5);
    let r = run(&node(1), &w, &mut p);
    assert_eq!(tat(&r), vec![250.0, 300.0]);
    assert!(r.summary.balance.rejected >= 3, "two arrivals, slice ends");
    let mut p = Probe::new(1, fifo);
    p.extra = Some(5);
    let r = run(&node(1), &w, &mut p);
    assert_eq!(tat(&r), vec![250.0, 300.0]);
    // Queue 0 had one at each take but the last, when P1 ended: then queue 5 was asked.
    assert_eq!(r.summary.balance.rejected, 1);
}

#[test]
fn a_process_in_a_shared_queue_is_runnable_and_the_view_shows_where_it_waits() {
    // One CPU, P0 and P1 of 150 ms; every 50 ms the probe looks. P1 waits in queue 0 from
    // 0 ms: its duty cycle (half-life 50 ms) is 1/2 at 50 ms. At 100 ms the slice end comes
    // before the machine-wide call (scheduled earlier): P0 waits, P1 runs, runnable all
    // along: 3/4, then 7/8 at 150 ms.
    let w = workload(vec![proc(0, 0, 150, 0), proc(1, 0, 150, 0)]);
    let mut p = Probe::new(1, fifo);
    p.period_ns = Some(50_000_000);
    p.half_life_ns = Some(50_000_000);
    run(&node(1), &w, &mut p);
    assert_eq!(p.seen[0], (50, vec![1], Some(0), 0.5));
    assert_eq!(p.seen[1], (100, vec![0], None, 0.75));
    assert_eq!(p.seen[2], (150, vec![0], None, 0.875));
}

#[test]
fn a_machine_wide_balancer_s_work_stalls_the_cpu_it_is_charged_to() {
    // One process of 100 ms on CPU 0 of two; the balancer runs every 50 ms for 5 ms of work.
    // Charged to CPU 0 it stalls the process at 50 ms and 100 ms: it ends at 110 ms. Charged
    // to CPU 1 (idle) or to none, the process ends at 100 ms, before the call at 100 ms
    // (scheduled later): the work counted is 10 ms, then 5 ms.
    let w = workload(vec![proc(0, 0, 100, 0)]);
    let mut ends = Vec::new();
    let mut costs = Vec::new();
    for charge in [Some(0), Some(1), None] {
        let mut p = Probe::new(0, fifo);
        p.period_ns = Some(50_000_000);
        p.work_ns = 5_000_000;
        p.charge = charge;
        let r = run(&node(2), &w, &mut p);
        assert!(
            p.enqueued.is_empty() && p.dispatched.is_empty(),
            "no queues"
        );
        costs.push(r.summary.balance.cost_ms);
        ends.push(tat(&r)[0]);
    }
    assert_eq!(ends, vec![110.0, 100.0, 100.0]);
    assert_eq!(costs, vec![10.0, 5.0, 5.0]);
}

#[test]
fn a_cpu_takes_only_what_may_run_on_it_and_a_stranded_process_ends_the_run_with_an_error() {
    // As the FIFO schedule, but at 50 ms, while P1 waits in the queue, its allowed CPUs become
    // CPU 1 alone: CPU 0 passes over it (P2 at 100 ms, P0 at 200 ms, P2 at 250 ms) and nobody
    // kicks CPU 1: the run cannot finish, and says so rather than wait forever.
    let mut p1 = proc(1, 0, 150, 0);
    p1.affinity = vec![numasim_core::workload::AffinityChange {
        at_ns: 50_000_000,
        cpus: numasim_core::workload::CpuList(vec![1]),
    }];
    let w = workload(vec![proc(0, 0, 150, 0), p1, proc(2, 0, 150, 0)]);
    let m = node(2);
    let d = Builder::Flat.build(&m, &BuildOptions::default());
    let mut p = Probe::new(1, fifo);
    let e = engine::run(&m, &d, &w, &mut p, &free()).unwrap_err();
    assert!(e.to_string().contains("1 of 3 processes unfinished"), "{e}");
    // Kicked at its creation, CPU 1 takes P1 at once and, as in the kicked schedule, runs it
    // again from 150 ms to 200 ms: everything ends as there.
    let mut p = Probe::new(1, fifo_kick_1);
    let r = engine::run(&m, &d, &w, &mut p, &free()).unwrap();
    assert_eq!(tat(&r), vec![150.0, 200.0, 250.0]);
}

fn to_queue_1(_: Pid, _: EnqueueKind) -> Enqueue {
    Enqueue::Shared {
        queue: 1,
        key: 0,
        slice_ns: None,
        kick: None,
    }
}

#[test]
fn processes_no_cpu_takes_end_a_run_with_a_machine_wide_callback_after_30_s() {
    // Every process goes to queue 1 and every CPU takes from queue 0 alone. Without a
    // machine-wide callback nothing is left to happen: the run ends at once with an error.
    // With one every second, the run would go on forever: the watchdog (sched_ext's 30 s)
    // ends it once the processes have waited 30 s with every CPU idle.
    let w = workload(vec![proc(0, 0, 10, 0), proc(1, 0, 10, 0)]);
    let m = node(2);
    let d = Builder::Flat.build(&m, &BuildOptions::default());
    let mut p = Probe::new(2, to_queue_1);
    let e = engine::run(&m, &d, &w, &mut p, &free()).unwrap_err();
    assert!(e.to_string().contains("2 of 2 processes unfinished"), "{e}");
    let mut p = Probe::new(2, to_queue_1);
    p.period_ns = Some(1_000_000_000);
    let e = engine::run(&m, &d, &w, &mut p, &free()).unwrap_err();
    assert!(
        e.to_string()
            .contains("2 processes waited in its shared queues for 30 s"),
        "{e}"
    );
    // Stalled from the first call (1 s): the error comes at the call 30 s later.
    assert_eq!(p.seen.len(), 30);
}

fn fifo_kick_1_slice_1ms(_: Pid, _: EnqueueKind) -> Enqueue {
    Enqueue::Shared {
        queue: 0,
        key: 0,
        slice_ns: Some(1_000_000),
        kick: Some(1),
    }
}

#[test]
fn a_run_whose_processes_all_stay_stalled_ends_with_an_error() {
    // Two nodes 20 apart, a CPU each; a refill of 1 ms per SLIT unit (20 ms across), slices of
    // 1 ms and a FIFO queue both CPUs take from: the three processes change CPU at almost every
    // slice and each slice is spent refilling. The run would go on forever; it ends once no
    // process has progressed for 60 s of simulated time. So it does with numasim's usual 50 µs
    // per unit (1 ms across: no slice outlasts its refill); with 20 µs (0.4 ms) it ends.
    let w = workload(vec![
        proc(0, 0, 100, 0),
        proc(1, 0, 100, 0),
        proc(2, 0, 100, 0),
    ]);
    let m = testutils::machine(&testutils::two_level_table(2, 20), 1);
    let d = Builder::Flat.build(&m, &BuildOptions::default());
    let slow = EngineConfig {
        refill_per_distance_ns: 1_000_000,
        ..free()
    };
    let mut p = Probe::new(1, fifo_kick_1_slice_1ms);
    let e = engine::run(&m, &d, &w, &mut p, &slow).unwrap_err();
    assert!(
        e.to_string().contains("no process made progress for 60 s"),
        "{e}"
    );
    let usual = EngineConfig {
        refill_per_distance_ns: 50_000,
        ..free()
    };
    let mut p = Probe::new(1, fifo_kick_1_slice_1ms);
    assert!(engine::run(&m, &d, &w, &mut p, &usual).is_err());
    let short = EngineConfig {
        refill_per_distance_ns: 20_000,
        ..free()
    };
    let mut p = Probe::new(1, fifo_kick_1_slice_1ms);
    let r = engine::run(&m, &d, &w, &mut p, &short).unwrap();
    assert!(r.summary.makespan_ms > 150.0 && r.summary.makespan_ms < 1000.0);
}
