//! CPU affinity: the engine's mechanism (a change that excludes a process's CPU moves it, to
//! the documented CPU, as a migration of kind `affinity`; every decision is checked) and every
//! policy honouring it (docs/engine.md and docs/policies/*.md, "Affinity").

mod common;

use numasim_core::config::EngineConfig;
use numasim_core::domains::{BuildOptions, Builder};
use numasim_core::engine::{self, RunResult};
use numasim_core::interface::{Attempt, BalanceKind, Pid, Policy, View};
use numasim_core::machine::{CpuId, Machine};
use numasim_core::policy::POLICIES;
use numasim_core::testutils;
use numasim_core::workload::{AffinityChange, CpuList, Kind, Process, Workload, WorkloadSpec};
use proptest::prelude::*;

const MS: u64 = 1_000_000;

/// 2 nodes × 2 CPUs, remote distance 20.
fn m2x2() -> Machine {
    testutils::machine(&testutils::two_level_table(2, 20), 2)
}

fn change(at_ms: u64, cpus: &str) -> AffinityChange {
    AffinityChange {
        at_ns: at_ms * MS,
        cpus: CpuList::parse(cpus).unwrap(),
    }
}

fn traced(m: &Machine, builder: Builder, w: &Workload, policy: &str) -> RunResult {
    let d = builder.build(m, &BuildOptions::default());
    let config = EngineConfig {
        record_trace: true,
        ..EngineConfig::default()
    };
    numasim_core::run_policy(m, &d, w, policy, &config).unwrap()
}

fn builder_of(policy: &str) -> Builder {
    let name = POLICIES.iter().find(|p| p.name == policy).unwrap();
    *Builder::ALL
        .iter()
        .find(|b| b.name() == name.default_domains)
        .unwrap()
}

/// The CPUs `w`'s process `pid` may run on at `t_ns`, on a machine of `cpus` CPUs.
fn allowed(w: &Workload, pid: usize, t_ns: u64, cpus: usize) -> Vec<usize> {
    match numasim_core::workload::allowed_at(&w.processes[pid].affinity, t_ns) {
        Some(l) => l.0.iter().map(|&c| c as usize).collect(),
        None => (0..cpus).collect(),
    }
}

/// Every slice of the trace runs on a CPU its process may run on throughout, and every
/// migration's destination is one it may run on then. A change takes effect at its instant, and
/// decisions at that instant may come before it in the engine's order (another process's change
/// at the same instant can hand this one a processor): a move then, or a slice of no length
/// (moved off at once), may follow the CPUs allowed just before.
fn respects(w: &Workload, r: &RunResult, cpus: usize) -> Result<(), TestCaseError> {
    let may = |pid: usize, t: u64, cpu: usize| allowed(w, pid, t, cpus).contains(&cpu);
    let changes = |pid: usize| w.processes[pid].affinity.iter().map(|c| c.at_ns);
    let may_then = |pid: usize, t: u64, cpu: usize| {
        may(pid, t, cpu) || (t > 0 && changes(pid).any(|at| at == t) && may(pid, t - 1, cpu))
    };
    for s in &r.trace {
        let (pid, cpu, start) = (s.pid, s.cpu, s.start_ns);
        if s.end_ns == start {
            prop_assert!(
                may_then(pid, start, cpu),
                "pid {pid} put on cpu {cpu} at {start}"
            );
            continue;
        }
        prop_assert!(
            may(pid, start, cpu),
            "pid {pid} ran on cpu {cpu} at {start}"
        );
        for at in changes(pid).filter(|&at| at > start && at < s.end_ns) {
            prop_assert!(may(pid, at, cpu), "pid {pid} ran on cpu {cpu} past {at}");
        }
    }
    for (t, pid, _, to, kind) in &r.trace_events.migrations {
        prop_assert!(
            may_then(*pid, *t, *to),
            "pid {pid} moved ({kind}) to cpu {to} at {t}"
        );
    }
    Ok(())
}

/// The harness's case on a small machine: four busy loops all pinned to CPU 0 (created there),
/// released to every CPU at 100 ms.
fn pinned_then_released() -> Workload {
    let spec =
        WorkloadSpec::parse("w", "n=4,kind=cpu,exec=300,mem=0,pin=cpus:0,release=100").unwrap();
    spec.generate("w", 1, m2x2().node_cpu_lists()).unwrap()
}

#[test]
fn spec_keys_make_the_pinned_then_released_workload() {
    let w = pinned_then_released();
    for p in &w.processes {
        assert_eq!(p.spawn_cpu, 0);
        assert_eq!(p.affinity, vec![change(0, "0"), change(100, "0-3")]);
    }
    let each = WorkloadSpec::parse("w", "n=5,pin=each,release=50")
        .unwrap()
        .generate("w", 1, m2x2().node_cpu_lists())
        .unwrap();
    let firsts: Vec<String> = each
        .processes
        .iter()
        .map(|p| p.affinity[0].cpus.to_cpulist())
        .collect();
    assert_eq!(firsts, ["0", "1", "2", "3", "0"]);
    assert!(each
        .processes
        .iter()
        .all(|p| p.spawn_cpu == p.affinity[0].cpus.0[0]));
    // A spec writes `+` for a cpulist's commas.
    let listed = WorkloadSpec::parse("w", "n=1,pin=cpus:0-1+3")
        .unwrap()
        .generate("w", 1, m2x2().node_cpu_lists())
        .unwrap();
    assert_eq!(listed.processes[0].affinity, vec![change(0, "0,1,3")]);
    // Round trips through both file formats.
    assert_eq!(Workload::from_csv("f", &w.to_csv().unwrap()).unwrap(), w);
    assert_eq!(Workload::from_json("f", &w.to_json()).unwrap(), w);
}

#[test]
fn bad_affinity_keys_name_the_key() {
    let err = |spec: &str| {
        WorkloadSpec::parse("--workload", spec)
            .unwrap_err()
            .to_string()
    };
    assert!(err("n=2,release=10").starts_with("--workload: key release: release needs pin"));
    assert!(err("n=2,pin=cpus:").contains("key pin:"));
    assert!(err("n=2,pin=cpus:3-1").contains("key pin: range '3-1'"));
    assert!(err("n=2,pin=some").contains("key pin: 'some' is not one of each, cpus:LIST"));
    assert!(err("n=2,pin=cpus:0-1,spawn=cpu:2").contains("key spawn: CPU 2 is not among"));
    assert!(err("n=2,pin=each,spawn=cpu:0").contains("key spawn: with pin=each"));
    assert!(err("n=2,pin=each,spawn=node:0").contains("key spawn: with pin, give spawn=cpu:K"));
    let gen = |spec: &str| {
        WorkloadSpec::parse("--workload", spec)
            .unwrap()
            .generate("--workload", 1, m2x2().node_cpu_lists())
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        gen("n=2,pin=cpus:0-7"),
        "--workload: key pin: CPU 4 does not exist (the machine has 4 CPUs)"
    );
    assert_eq!(
        gen("n=2,spawn=cpu:9"),
        "--workload: key spawn: CPU 9 does not exist (the machine has 4 CPUs)"
    );
}

#[test]
fn file_affinities_are_checked() {
    let mut w = pinned_then_released();
    w.processes[1].affinity[0] = change(0, "1");
    let e = w.validate("w.json", 4).unwrap_err().to_string();
    assert!(
        e.contains("process 1 (pid 1): spawn cpu 0 is not among"),
        "{e}"
    );
    w.processes[1].affinity = vec![change(5, "0"), change(5, "1")];
    let e = w.validate("w.json", 4).unwrap_err().to_string();
    assert!(e.contains("increasing time"), "{e}");
    w.processes[1].affinity = vec![change(0, "0,9")];
    let e = w.validate("w.json", 4).unwrap_err().to_string();
    assert!(e.contains("CPU 9, which does not exist"), "{e}");
    // The CSV cell names its column.
    let csv = pinned_then_released()
        .to_csv()
        .unwrap()
        .replace("0:0;", "x:0;");
    let e = Workload::from_csv("w.csv", &csv).unwrap_err().to_string();
    assert!(e.starts_with("w.csv: line 2, column affinity: 'x'"), "{e}");
}

/// Before the release nothing migrates and every process runs on CPU 0 only; after it the
/// balancers spread them. linux26 (two-level: a node level of 8–32 ms over an in-node level of
/// 1–4 ms): the idle CPUs' attempts before the release find every task pinned (`all_pinned`)
/// and double their intervals — CPU 1 in its node at 1, 3, 7, 15, 31, 63 (next 127) ms; CPUs 2
/// and 3 at the node level at 8, 24, 56 (next 120) ms, their in-node level finding nothing. So
/// the first move after the release is CPU 2's node-level pull at 120 ms (CPU 2 before CPU 3:
/// their timers fire in CPU order), from CPU 0, an idle pull; P0 ran its 100 ms slice first
/// and P1 runs now, so the tail of CPU 0's queue is P0, cache-cold (ran 20 ms ago).
#[test]
fn pinned_then_released_round_robins_on_cpu_0_then_spreads() {
    let m = m2x2();
    let w = pinned_then_released();
    for (policy, builder) in [("linux26", Builder::TwoLevel), ("linux", Builder::Linux)] {
        let r = traced(&m, builder, &w, policy);
        common::sound(&r).unwrap();
        respects(&w, &r, 4).unwrap();
        let early: Vec<_> = r.trace.iter().filter(|s| s.start_ns < 100 * MS).collect();
        assert!(early.iter().all(|s| s.cpu == 0), "{policy}");
        assert!(
            r.trace_events
                .migrations
                .iter()
                .all(|m| m.0 >= 100 * MS && m.4 != "affinity"),
            "{policy}"
        );
        // Spread: after the release every CPU runs something.
        let mut late: Vec<usize> = r
            .trace
            .iter()
            .filter(|s| s.start_ns >= 100 * MS)
            .map(|s| s.cpu)
            .collect();
        late.sort_unstable();
        late.dedup();
        assert_eq!(late, [0, 1, 2, 3], "{policy}");
        if policy == "linux" {
            // EEVDF's slice (2.25 ms on 4 CPUs): all four take turns on CPU 0.
            let mut ran: Vec<usize> = early.iter().map(|s| s.pid).collect();
            ran.sort_unstable();
            ran.dedup();
            assert_eq!(ran, [0, 1, 2, 3]);
        } else {
            let first = &r.trace_events.migrations[0];
            assert_eq!(
                (first.0, first.1, first.2, first.3, &*first.4),
                (120 * MS, 0, 0, 2, "idle")
            );
        }
    }
}

/// A policy that leaves everything where it is: new processes on their parent's CPU, woken
/// ones where they slept; it never balances (the engine's own moves, alone).
struct Stay;

impl Policy for Stay {
    fn name(&self) -> &'static str {
        "stay"
    }
    fn place_new(&mut self, _: &View<'_>, _: Pid, spawn_cpu: CpuId) -> Option<CpuId> {
        Some(spawn_cpu)
    }
    fn place_wakeup(&mut self, _: &View<'_>, _: Pid, prev_cpu: CpuId) -> Option<CpuId> {
        Some(prev_cpu)
    }
    fn next_periodic_ns(&self, _: &View<'_>, _: CpuId) -> Option<u64> {
        None
    }
    fn balance(&mut self, _: &View<'_>, _: CpuId, _: usize, _: BalanceKind) -> Option<Attempt> {
        None
    }
}

fn cpu_proc(pid: u32, spawn: u32, demand_ms: u64, affinity: Vec<AffinityChange>) -> Process {
    Process {
        spawn_cpu: spawn,
        mem: 0.0,
        affinity,
        ..testutils::process(pid, Kind::Cpu, demand_ms)
    }
}

/// A queued process whose new mask excludes its CPU moves at that instant to
/// `cpumask_any_and_distribute`'s CPU (the first allowed after the last one it gave, which
/// starts at 0: CPU 2 of {2, 3}); a running one likewise (the next after 2 in {0, 3}: 3). Both
/// as `affinity` migrations; a change that keeps the CPU moves nothing.
#[test]
fn a_change_that_excludes_the_cpu_moves_the_process_to_the_distributed_cpu() {
    let m = m2x2();
    let w = Workload {
        apps: Vec::new(),
        processes: vec![
            cpu_proc(0, 1, 200, vec![change(0, "1"), change(50, "0,3")]),
            cpu_proc(1, 0, 200, vec![]),
            cpu_proc(2, 0, 200, vec![change(0, "0"), change(30, "2-3")]),
            cpu_proc(3, 1, 200, vec![change(0, "1"), change(40, "1-2")]),
        ],
    };
    let d = Builder::TwoLevel.build(&m, &BuildOptions::default());
    let config = EngineConfig {
        record_trace: true,
        ..EngineConfig::default()
    };
    let r = engine::run(&m, &d, &w, &mut Stay, &config).unwrap();
    common::sound(&r).unwrap();
    respects(&w, &r, 4).unwrap();
    let moves: Vec<(u64, usize, usize, usize, &str)> = r
        .trace_events
        .migrations
        .iter()
        .map(|m| (m.0, m.1, m.2, m.3, &*m.4))
        .collect();
    // P3's change at 40 ms keeps CPU 1 (no move) but takes a turn of the distribution (2).
    assert_eq!(
        moves,
        [
            (30 * MS, 2, 0, 2, "affinity"),
            (50 * MS, 0, 1, 3, "affinity")
        ]
    );
    let kinds: Vec<(String, u64)> = r.summary.migrations_by_kind.clone();
    assert_eq!(kinds.last().unwrap(), &("affinity".to_string(), 2));
    assert_eq!(r.processes[2].migrations_by_kind[7], 1);
}

/// A blocked process wakes where its placement says, on a CPU it may run on: linux sends a
/// process allowed one CPU there (`select_task_rq`'s `cpumask_any`), the engine refuses a
/// placement elsewhere (`Stay` wakes it where it slept) and uses `select_fallback_rq`.
#[test]
fn a_blocked_process_wakes_on_an_allowed_cpu() {
    let m = m2x2();
    let io = Process {
        spawn_cpu: 1,
        affinity: vec![change(0, "1"), change(60, "2")],
        ..testutils::process(0, Kind::Io, 300)
    };
    let w = Workload {
        apps: Vec::new(),
        processes: vec![io],
    };
    let r = traced(&m, Builder::Linux, &w, "linux");
    common::sound(&r).unwrap();
    respects(&w, &r, 4).unwrap();
    assert!(r.trace.iter().any(|s| s.cpu == 2));
    let d = Builder::TwoLevel.build(&m, &BuildOptions::default());
    let config = EngineConfig {
        record_trace: true,
        ..EngineConfig::default()
    };
    let r = engine::run(&m, &d, &w, &mut Stay, &config).unwrap();
    respects(&w, &r, 4).unwrap();
    assert!(
        r.summary.balance.rejected > 0,
        "Stay's wake-ups on CPU 1 are refused"
    );
}

/// A process pinned to CPU 1 is placed there on arrival and on every wake-up and never moved,
/// under every policy, while the others overload its node (balancers want to move work off
/// CPU 1, and every policy's placement would put it elsewhere).
#[test]
fn a_process_pinned_to_cpu_1_stays_there_under_every_policy() {
    let m = testutils::machine(&testutils::two_level_table(2, 20), 4);
    let spec = WorkloadSpec::parse(
        "w",
        "n=24,kind=mixed,exec=20-120,arrival=almost,spawn=node:0",
    )
    .unwrap();
    let mut w = spec.generate("w", 3, m.node_cpu_lists()).unwrap();
    for pid in [0, 5] {
        w.processes[pid].spawn_cpu = 1;
        w.processes[pid].affinity = vec![change(0, "1")];
    }
    w.processes[5].kind = Kind::Io;
    for p in POLICIES.iter() {
        let r = traced(&m, builder_of(p.name), &w, p.name);
        common::sound(&r).unwrap_or_else(|e| panic!("{}: {e}", p.name));
        respects(&w, &r, 8).unwrap_or_else(|e| panic!("{}: {e}", p.name));
        for pid in [0, 5] {
            assert!(
                r.trace.iter().filter(|s| s.pid == pid).all(|s| s.cpu == 1),
                "{}",
                p.name
            );
            assert_eq!(r.processes[pid].migrations, 0, "{} pid {pid}", p.name);
        }
    }
}

/// A random affinity for one process: its first CPUs and later CPUs as bit masks over the 2 × 2
/// machine's CPUs (no first CPUs: the one `which` names; no later ones: no change), which of
/// its first CPUs it is created on, and when the change comes (in 0.1 ms after its arrival).
type Mask = (u8, u8, u8, u16);

/// Random workloads with random affinities (and changes) under every policy: no process runs
/// or is moved onto a CPU it may not run on, every run completes, sound, nothing refused.
fn affine_workload() -> impl Strategy<Value = (u64, Vec<Mask>)> {
    (
        0u64..1000,
        proptest::collection::vec((0u8..16, 0u8..16, 0u8..4, 1u16..400), 1..10),
    )
}

/// Ten single-threaded processes, the first ones given `masks`.
fn with_masks(seed: u64, masks: &[Mask]) -> Workload {
    with_thread_masks(
        "n=10,kind=mixed,exec=10-80,arrival=uniform:200",
        seed,
        masks,
    )
}

/// `spec`'s workload on the 2 × 2 machine, its first threads given `masks`.
fn with_thread_masks(spec: &str, seed: u64, masks: &[Mask]) -> Workload {
    let m = m2x2();
    let mut w = WorkloadSpec::parse("w", spec)
        .unwrap()
        .generate("w", seed, m.node_cpu_lists())
        .unwrap();
    for (p, &(a, b, which, at)) in w.processes.iter_mut().zip(masks) {
        let cpus = |bits: u8| CpuList((0..4).filter(|c| bits >> c & 1 == 1).collect());
        let first = Some(cpus(a))
            .filter(|l| !l.0.is_empty())
            .unwrap_or_else(|| CpuList(vec![u32::from(which)]));
        p.spawn_cpu = first.0[usize::from(which) % first.0.len()];
        p.affinity = vec![AffinityChange {
            at_ns: 0,
            cpus: first,
        }];
        if b != 0 {
            let at_ns = p.arrival_ns + u64::from(at) * 100_000;
            p.affinity.push(AffinityChange {
                at_ns,
                cpus: cpus(b),
            });
        }
    }
    w.validate("w", 4).unwrap();
    w
}

fn check_policies(w: &Workload, space: bool) -> Result<(), TestCaseError> {
    let m = m2x2();
    let is_space = |n: &str| numasim_core::policy::space::NAMES.contains(&n);
    for p in POLICIES.iter().filter(|p| is_space(p.name) == space) {
        if space {
            space_run(&m, w, p.name)?;
            continue;
        }
        let d = builder_of(p.name).build(&m, &BuildOptions::default());
        let config = EngineConfig {
            record_trace: true,
            ..EngineConfig::default()
        };
        let r = numasim_core::run_policy(&m, &d, w, p.name, &config)
            .map_err(|e| TestCaseError::fail(format!("{}: {e}", p.name)))?;
        common::sound(&r)?;
        respects(w, &r, 4)?;
    }
    Ok(())
}

/// A space-sharing policy's changes of owner: `(time_ns, cpu, owner)`.
type OwnerLog = Vec<(u64, usize, Option<usize>)>;

/// Runs `w` under the space-sharing policy `name` and checks, besides soundness and the
/// affinities, the two-level model: every thread runs only on a processor its process holds,
/// no processor changes owner while a thread runs on it, and every processor is free at the
/// end. Returns the run and the policy's log of owners.
fn space_run(
    m: &Machine,
    w: &Workload,
    name: &str,
) -> Result<(RunResult, OwnerLog), TestCaseError> {
    let d = builder_of(name).build(m, &BuildOptions::default());
    let config = EngineConfig {
        record_trace: true,
        ..EngineConfig::default()
    };
    let ctx = numasim_core::interface::PolicyContext {
        machine: m,
        domains: &d,
        config: &config,
    };
    let mut p = numasim_core::policy::space::by_name(name, &ctx);
    let r = engine::run(m, &d, w, &mut p, &config)
        .map_err(|e| TestCaseError::fail(format!("{name}: {e}")))?;
    common::sound(&r).map_err(|e| TestCaseError::fail(format!("{name}: {e}")))?;
    respects(w, &r, m.cpus()).map_err(|e| TestCaseError::fail(format!("{name}: {e}")))?;
    let log = p.alloc.log.clone();
    let mut owner: Vec<Option<usize>> = vec![None; m.cpus()];
    for &(_, cpu, to) in &log {
        owner[cpu] = to;
    }
    prop_assert!(
        owner.iter().all(Option::is_none),
        "{name}: processors still held at the end: {owner:?}"
    );
    for s in r.trace.iter().filter(|s| s.end_ns > s.start_ns) {
        let tgid = w.processes[s.pid].tgid as usize;
        let at_start = log
            .iter()
            .rfind(|e| e.1 == s.cpu && e.0 <= s.start_ns)
            .and_then(|e| e.2);
        prop_assert_eq!(
            at_start,
            Some(tgid),
            "{}: pid {} ran on cpu {} from {} without holding it",
            name,
            s.pid,
            s.cpu,
            s.start_ns
        );
        let changes = log
            .iter()
            .filter(|e| e.1 == s.cpu && e.0 > s.start_ns && e.0 < s.end_ns)
            .count();
        prop_assert_eq!(
            changes,
            0,
            "{}: cpu {} changed owner while pid {} ran",
            name,
            s.cpu,
            s.pid
        );
    }
    Ok((r, log))
}

/// Koita et al.'s parallel processes (threads forked and joined in phases), random affinities
/// on their first threads.
fn affine_apps() -> impl Strategy<Value = (String, u64, Vec<Mask>)> {
    (
        (1u32..5, 1usize..6, 0.3f64..1.5)
            .prop_map(|(t, n, load)| format!("app=koita:{t},n={n},load={load:.2}")),
        0u64..1000,
        proptest::collection::vec((0u8..16, 0u8..16, 0u8..4, 1u16..400), 1..40),
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]

    #[test]
    fn no_balancer_ever_runs_a_process_where_it_may_not((seed, masks) in affine_workload()) {
        check_policies(&with_masks(seed, &masks), false)?;
    }

    /// The same over the space-sharing policies, which must also keep their model: every
    /// thread eventually gets a processor it may run on, and only one its process holds.
    #[test]
    fn no_space_sharing_policy_ever_runs_a_process_where_it_may_not(
        (seed, masks) in affine_workload()
    ) {
        check_policies(&with_masks(seed, &masks), true)?;
    }

    /// The same with parallel processes, whose threads hold processors for each other (the
    /// hold schemes keep a processor idle for the next thread of its process).
    #[test]
    fn space_sharing_finishes_parallel_processes_under_affinity(
        (spec, seed, masks) in affine_apps()
    ) {
        let w = with_thread_masks(&spec, seed, &masks);
        for name in numasim_core::policy::space::NAMES {
            space_run(&m2x2(), &w, name)?;
        }
    }
}

/// A running thread whose new affinity excludes its processor leaves it and waits for one it
/// may run on; it is not put beside another process's thread. Equi, two single-threaded
/// processes on the 2 × 2 machine (targets 1 and 1): P0 gets CPU 0 (cluster 0, the lowest of
/// the clusters with the most free processors), P1 CPU 2 (cluster 1, now the one with the
/// most). At 20 ms P1 may run on CPU 0 only, which P0 holds: P1 is held (CPU 2 stays its
/// allocated-idle processor, at its target) and waits until P0 ends at 100 ms, then takes the
/// freed CPU 0 (a placement, with the refill of a move across clusters).
#[test]
fn space_sharing_holds_a_thread_whose_affinity_excludes_its_processor() {
    let m = m2x2();
    let w = Workload {
        apps: Vec::new(),
        processes: vec![
            cpu_proc(0, 0, 100, vec![]),
            cpu_proc(1, 0, 100, vec![change(0, "0-3"), change(20, "0")]),
        ],
    };
    let (r, log) = space_run(&m, &w, "equi").unwrap();
    let runs = |pid: usize| -> Vec<(u64, u64, usize)> {
        r.trace
            .iter()
            .filter(|s| s.pid == pid)
            .map(|s| (s.start_ns / MS, s.end_ns.div_ceil(MS), s.cpu))
            .collect()
    };
    assert_eq!(runs(0), [(0, 100, 0)]);
    let p1 = runs(1);
    assert_eq!(p1[0], (0, 20, 2));
    assert!(
        p1[1..]
            .iter()
            .all(|&(start, _, cpu)| cpu == 0 && start >= 100),
        "{p1:?}"
    );
    let moves: Vec<(u64, usize, usize, usize, &str)> = r
        .trace_events
        .migrations
        .iter()
        .map(|m| (m.0 / MS, m.1, m.2, m.3, &*m.4))
        .collect();
    // Created on CPU 0, placed on CPU 2; then given CPU 0 when P0 ends.
    assert_eq!(
        moves,
        [(0, 1, 0, 2, "placement"), (100, 1, 2, 0, "placement")]
    );
    let cpu2: Vec<_> = log.iter().filter(|e| e.1 == 2).map(|e| e.2).collect();
    assert_eq!(cpu2, [Some(1), None], "CPU 2 is P1's until P1 ends");
}

/// Two processes, each pinned into the other's home cluster, under HB (basic home: no
/// processor of another process's home cluster). P0 reserves cluster 0 and runs on CPU 0, P1
/// reserves cluster 1 and runs on CPU 2; at 10 ms P0 may run only on CPUs 2–3, P1 only on
/// 0–1. The scheme's rule alone would leave both waiting for ever, each keeping its home
/// processor idle for the other's end. Affinity decides which processor, not whether: P0
/// (which would get its home's free CPU 1 now) takes the free CPU 3 it may run on, moved
/// there at once (an `affinity` migration); P1, which would get nothing more now, is held —
/// and then, its CPU 2 kept idle for it, takes the free CPU 1 (a placement).
#[test]
fn home_cluster_lets_a_thread_pinned_into_another_home_run() {
    let m = m2x2();
    let w = Workload {
        apps: Vec::new(),
        processes: vec![
            cpu_proc(0, 0, 50, vec![change(0, "0"), change(10, "2-3")]),
            cpu_proc(1, 2, 50, vec![change(0, "2"), change(10, "0-1")]),
        ],
    };
    let (r, _) = space_run(&m, &w, "hb-dist").unwrap();
    let moves: Vec<(u64, usize, usize, usize, &str)> = r
        .trace_events
        .migrations
        .iter()
        .map(|m| (m.0 / MS, m.1, m.2, m.3, &*m.4))
        .collect();
    assert_eq!(
        moves,
        [(10, 0, 0, 3, "affinity"), (10, 1, 2, 1, "placement")]
    );
}

/// `linux`'s `LBF_DST_PINNED`: CPU 2 (idle, the first idle CPU of its node, so the one that
/// balances the NUMA level) finds CPU 0's tasks pinned to {0, 3}: it cannot take them, and
/// retries toward `new_dst_cpu`, CPU 3 of its own group, which is busy with a task of its own
/// (so never pulls at that level itself). Until 10 ms the tasks may run on CPU 0 only, so they
/// start there. Every move onto CPU 3 is CPU 2's doing.
#[test]
fn linux_pulls_pinned_tasks_to_new_dst_cpu() {
    let m = m2x2();
    let w = Workload {
        apps: Vec::new(),
        processes: vec![
            cpu_proc(0, 0, 300, vec![change(0, "0"), change(10, "0,3")]),
            cpu_proc(1, 0, 300, vec![change(0, "0"), change(10, "0,3")]),
            cpu_proc(2, 0, 300, vec![change(0, "0"), change(10, "0,3")]),
            cpu_proc(3, 1, 600, vec![change(0, "1")]),
            cpu_proc(4, 3, 600, vec![change(0, "3")]),
        ],
    };
    let r = traced(&m, Builder::Linux, &w, "linux:numa_balancing=off");
    common::sound(&r).unwrap();
    respects(&w, &r, 4).unwrap();
    let to_3: Vec<_> = r
        .trace_events
        .migrations
        .iter()
        .filter(|m| m.3 == 3 && m.2 == 0 && m.4 != "placement")
        .collect();
    assert!(!to_3.is_empty(), "{:?}", r.trace_events.migrations);
    for mv in to_3 {
        assert!(
            r.trace_events
                .balances
                .iter()
                .any(|b| b.0 == mv.0 && b.1 == 2 && b.4 > 0),
            "a move onto CPU 3 at {} without CPU 2 balancing",
            mv.0
        );
    }
}

/// `linux`'s `LBF_ALL_PINNED` and `group_imbalanced`: two tasks on CPU 0, pinned there until
/// 10 ms and then to {0, 2}. CPU 1 (its node's other CPU) finds both pinned away from it: it
/// drops CPU 0 and, nothing else left outside its group, ends at `out_all_pinned`, marking its
/// node's group at the NUMA level imbalanced (`sgc->imbalance`). Node 0 then has two tasks on
/// two CPUs, one idle — `has_spare`, which the NUMA level would leave alone (the imbalance of
/// 2 is within `imb_numa_nr`'s allowance) — but classified `group_imbalanced`, it is pulled
/// from (`force_balance`, one task): CPU 2 takes one task while both still run.
#[test]
fn linux_moves_work_a_pinned_group_could_not_spread() {
    let m = m2x2();
    let pinned = |pid| cpu_proc(pid, 0, 300, vec![change(0, "0"), change(10, "0,2")]);
    let w = Workload {
        apps: Vec::new(),
        processes: vec![pinned(0), pinned(1)],
    };
    let r = traced(&m, Builder::Linux, &w, "linux:numa_balancing=off");
    common::sound(&r).unwrap();
    respects(&w, &r, 4).unwrap();
    let first = r.trace_events.migrations.first().expect("a move");
    assert_eq!((first.2, first.3), (0, 2), "{first:?}");
    assert!(first.0 < 300 * MS);
    // Without the release to {0, 2} the same run moves nothing.
    let stuck = Workload {
        apps: Vec::new(),
        processes: vec![
            cpu_proc(0, 0, 300, vec![change(0, "0")]),
            cpu_proc(1, 0, 300, vec![change(0, "0")]),
        ],
    };
    let r = traced(&m, Builder::Linux, &stuck, "linux:numa_balancing=off");
    assert!(r.trace_events.migrations.is_empty());
}
