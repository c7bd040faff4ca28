//! External policies (`policy::external`): code outside the core for the hooks it overrides,
//! a registered base for the others. Hand-made callbacks check that the machine-wide hook
//! gives the registered `node-push` bit for bit when it answers the same, that a callback that
//! overrides nothing is its base, that each kind of wrong answer stops the run with one line
//! naming the hook, the time, the CPU and the item, and that per-CPU balancing is gated.

use std::ops::ControlFlow;

use numasim_core::config::EngineConfig;
use numasim_core::domains::{BuildOptions, Builder};
use numasim_core::engine::{Outcome, Progress};
use numasim_core::interface::{BalanceKind, TaskColumns, View};
use numasim_core::machine::{CpuId, Machine};
use numasim_core::policy::external::{Callbacks, Decision, Failure, Gate, Hooks, Why};
use numasim_core::policy::node_push::node_push_pass;
use numasim_core::testutils;
use numasim_core::workload::{Pid, Workload, WorkloadSpec};
use numasim_core::{Domains, InputError};

fn setup(preset: &str, spec: &str) -> (Machine, Domains, Workload) {
    // `numa-2x4`: two nodes of four CPUs, distance 20 (a small machine made here).
    let m = if preset == "numa-2x4" {
        testutils::machine(&testutils::two_level_table(2, 20), 4)
    } else {
        testutils::preset(preset)
    };
    let d = Builder::TwoLevel.build(&m, &BuildOptions::default());
    let w = WorkloadSpec::parse("t", spec)
        .unwrap()
        .generate("t", 3, m.node_cpu_lists())
        .unwrap();
    (m, d, w)
}

type Answer = Box<dyn FnMut(&View<'_>) -> Vec<Decision> + Send>;
type CpuAnswer = Box<dyn FnMut(&View<'_>, CpuId, BalanceKind) -> Vec<Decision> + Send>;
type Placement = Box<dyn FnMut(&View<'_>, Pid) -> Option<i64> + Send>;
type Ranks = Box<dyn FnMut(&View<'_>, CpuId, &[Pid]) -> Vec<i64> + Send>;

/// What each callback answers (a closure per hook), and how often each was asked.
#[derive(Default)]
struct Scripted {
    balance: Option<Answer>,
    balance_cpu: Option<CpuAnswer>,
    place: Option<Placement>,
    rank: Option<Ranks>,
    raise_at_ns: Option<u64>,
    asked_cpu: std::sync::Arc<std::sync::Mutex<Vec<(CpuId, bool, bool)>>>,
}

impl Callbacks for Scripted {
    fn balance(&mut self, view: &View<'_>, out: &mut Vec<Decision>) -> Result<(), Failure> {
        if self.raise_at_ns.is_some_and(|t| view.now >= t) {
            return Err(Failure::Raised);
        }
        out.extend((self.balance.as_mut().unwrap())(view));
        Ok(())
    }

    fn balance_cpu(
        &mut self,
        view: &View<'_>,
        cpu: CpuId,
        _level: usize,
        kind: BalanceKind,
        out: &mut Vec<Decision>,
    ) -> Result<(), Failure> {
        self.asked_cpu
            .lock()
            .unwrap()
            .push((cpu, view.idle(cpu), !view.none_overloaded()));
        out.extend((self.balance_cpu.as_mut().unwrap())(view, cpu, kind));
        Ok(())
    }

    fn place(
        &mut self,
        view: &View<'_>,
        pid: Pid,
        _cpu: CpuId,
        _why: Why,
    ) -> Result<Option<i64>, Failure> {
        Ok((self.place.as_mut().unwrap())(view, pid))
    }

    fn metrics(&self) -> Result<Vec<(String, f64)>, Failure> {
        Ok(vec![("answers".to_owned(), 1.0)])
    }

    fn rank(
        &mut self,
        view: &View<'_>,
        this_cpu: CpuId,
        _busiest: CpuId,
        candidates: &[Pid],
        out: &mut Vec<i64>,
    ) -> Result<(), Failure> {
        out.extend((self.rank.as_mut().unwrap())(view, this_cpu, candidates));
        Ok(())
    }
}

fn run(
    case: &(Machine, Domains, Workload),
    cb: Scripted,
    hooks: Hooks,
) -> Result<numasim_core::engine::RunResult, InputError> {
    run_on("linux26", case, cb, hooks)
}

fn run_on(
    base: &str,
    (m, d, w): &(Machine, Domains, Workload),
    cb: Scripted,
    hooks: Hooks,
) -> Result<numasim_core::engine::RunResult, InputError> {
    let config = EngineConfig {
        record_trace: true,
        ..EngineConfig::default()
    };
    let mut watch = |_: &Progress| ControlFlow::Continue(());
    let outcome = numasim_core::run_external_watched(
        m,
        d,
        w,
        base,
        Box::new(cb),
        hooks,
        "test",
        &config,
        &mut watch,
    )?;
    match outcome {
        Outcome::Finished(r) => Ok(*r),
        Outcome::Stopped(_) => panic!("the watch never stops"),
    }
}

fn traced(policy: &str, (m, d, w): &(Machine, Domains, Workload)) -> String {
    let config = EngineConfig {
        record_trace: true,
        ..EngineConfig::default()
    };
    let r = numasim_core::run_policy(m, d, w, policy, &config).unwrap();
    serde_json::to_string(&r).unwrap()
}

#[test]
fn the_machine_wide_hook_answering_node_push_is_node_push_bit_for_bit() {
    for preset in ["numa-2x4", "numa-4x8", "mehta-m1"] {
        let case = setup(preset, "n=120,kind=cpu,exec=100,arrival=random");
        let mut tasks = TaskColumns::default();
        let cb = Scripted {
            balance: Some(Box::new(move |v| {
                v.fill_task_columns(&mut tasks);
                node_push_pass(v, &tasks, 0.17)
                    .into_iter()
                    .map(|m| Decision::Move {
                        pid: m.pid as i64,
                        cpu: m.to as i64,
                    })
                    .collect()
            })),
            ..Scripted::default()
        };
        let hooks = Hooks {
            period_ns: Some(10_000_000),
            ..Hooks::default()
        };
        let ours = run(&case, cb, hooks).unwrap();
        let rust = traced("node-push", &case);
        assert_eq!(serde_json::to_string(&ours).unwrap(), rust, "{preset}");
        assert!(
            ours.summary.migrations > 0,
            "{preset}: the balancer moved tasks"
        );
    }
}

/// origin-aware's RI-LB order, as an outside order: the pulling CPU's own first, then its
/// node's (or never ran), then by distance from the origin node.
fn origin_ranks(v: &View<'_>, this_cpu: CpuId, candidates: &[Pid]) -> Vec<i64> {
    let m = v.machine;
    let here = m.cpu_node(this_cpu);
    let rank = |pid: Pid| match v.proc(pid).origin_cpu {
        Some(o) if o == this_cpu => 0,
        Some(o) if m.cpu_node(o) != here => 2 + i64::from(m.distance(m.cpu_node(o), here)),
        _ => 1,
    };
    candidates.iter().map(|&p| rank(p)).collect()
}

#[test]
fn ranking_linux26_pulls_in_origin_order_is_origin_aware_without_si_lb_bit_for_bit() {
    for preset in ["numa-4x8", "mehta-m1"] {
        let case = setup(preset, "n=200,kind=mixed,exec=100,arrival=random");
        let asked = std::sync::Arc::new(std::sync::Mutex::new(0));
        let count = std::sync::Arc::clone(&asked);
        let cb = Scripted {
            rank: Some(Box::new(move |v, cpu, candidates| {
                assert!(candidates.len() >= 2, "asked only when there is a choice");
                *count.lock().unwrap() += 1;
                origin_ranks(v, cpu, candidates)
            })),
            ..Scripted::default()
        };
        let hooks = Hooks {
            rank: true,
            ..Hooks::default()
        };
        let ours = serde_json::to_string(&run(&case, cb, hooks).unwrap()).unwrap();
        assert_eq!(ours, traced("origin-aware:si-lb=off", &case), "{preset}");
        assert_ne!(
            ours,
            traced("linux26", &case),
            "{preset}: the order moved other tasks"
        );
        assert!(*asked.lock().unwrap() > 0);
    }
}

#[test]
fn a_base_without_a_pull_order_refuses_an_outside_one() {
    let case = setup("numa-2x4", "n=40,kind=mixed,exec=100");
    let cb = Scripted {
        rank: Some(Box::new(|_, _, c| vec![0; c.len()])),
        ..Scripted::default()
    };
    let hooks = Hooks {
        rank: true,
        ..Hooks::default()
    };
    let err = run_on("linux", &case, cb, hooks).unwrap_err().to_string();
    assert!(
        err.ends_with("the base linux has no such choice (linux26 has)"),
        "{err}"
    );
}

#[test]
fn an_external_policy_that_overrides_nothing_is_its_base() {
    let case = setup("numa-4x8", "n=80,kind=mixed,exec=100,arrival=random");
    let ours = run(&case, Scripted::default(), Hooks::default()).unwrap();
    assert_eq!(
        serde_json::to_string(&ours).unwrap(),
        traced("linux26", &case)
    );
}

/// The error of a run whose machine-wide callback answers `answer` at its first call.
fn first_answer_error(answer: Vec<Decision>) -> String {
    let case = setup("numa-2x4", "n=40,kind=cpu,exec=100");
    let cb = Scripted {
        balance: Some(Box::new(move |_| answer.clone())),
        ..Scripted::default()
    };
    let hooks = Hooks {
        period_ns: Some(5_000_000),
        ..Hooks::default()
    };
    run(&case, cb, hooks).unwrap_err().to_string()
}

#[test]
fn each_wrong_answer_stops_the_run_naming_hook_time_cpu_and_item() {
    let mv = |pid, cpu| Decision::Move { pid, cpu };
    let pages = |tgid, from_node, to_node, share| Decision::Pages {
        tgid,
        from_node,
        to_node,
        share,
    };
    let at = "policy test: balance at 5.000 ms (machine-wide): ";
    // 40 processes on 8 CPUs from time 0: at 5 ms pid 39 is queued on some CPU.
    let cases = [
        (vec![mv(4000, 1)], "move of pid 4000: no such process"),
        (vec![mv(-1, 1)], "move of pid -1: no such process"),
        (
            vec![mv(39, 8)],
            "move of pid 39 to CPU 8: the machine has CPUs 0 to 7",
        ),
        (
            vec![pages(0, 0, 1, 1.5)],
            "page move of group 0: share 1.5 is outside [0, 1]",
        ),
        (
            vec![pages(0, 0, 2, 0.5)],
            "page move of group 0 from node 0 to node 2: the machine has nodes 0 to 1",
        ),
    ];
    for (answer, what) in cases {
        assert_eq!(first_answer_error(answer), format!("{at}{what}"));
    }
}

/// The first queued process and its CPU.
fn queued(v: &View<'_>) -> (Pid, CpuId) {
    (0..8)
        .find_map(|c| v.queued(c).next().map(|p| (p, c)))
        .unwrap()
}

#[test]
fn a_pid_moved_twice_or_to_its_own_cpu_or_not_runnable_is_refused() {
    // Read the state at the call to build the wrong answers from it.
    let case = setup("numa-2x4", "n=40,kind=cpu,exec=100");
    let answer = |make: fn(&View<'_>) -> Vec<Decision>| {
        let cb = Scripted {
            balance: Some(Box::new(make)),
            ..Scripted::default()
        };
        let hooks = Hooks {
            period_ns: Some(5_000_000),
            ..Hooks::default()
        };
        run(&case, cb, hooks).unwrap_err().to_string()
    };
    let err = answer(|v| {
        let (pid, cpu) = queued(v);
        let other = (cpu + 1) % 8;
        vec![
            Decision::Move {
                pid: pid as i64,
                cpu: other as i64,
            },
            Decision::Move {
                pid: pid as i64,
                cpu: ((cpu + 2) % 8) as i64,
            },
        ]
    });
    assert!(err.ends_with("is moved twice in one answer"), "{err}");
    let err = answer(|v| {
        let (pid, cpu) = queued(v);
        vec![Decision::Move {
            pid: pid as i64,
            cpu: cpu as i64,
        }]
    });
    assert!(err.contains("it is already on CPU"), "{err}");
    let two = setup("numa-2x4", "n=40,kind=cpu,exec=100,arrival=uniform:400");
    let cb = Scripted {
        // The last process arrives at 400 ms: at 5 ms it is still pending.
        balance: Some(Box::new(|_| vec![Decision::Move { pid: 39, cpu: 0 }])),
        ..Scripted::default()
    };
    let hooks = Hooks {
        period_ns: Some(5_000_000),
        ..Hooks::default()
    };
    let err = run(&two, cb, hooks).unwrap_err().to_string();
    assert!(
        err.ends_with("move of pid 39: it is not queued or running (it is pending)"),
        "{err}"
    );
}

#[test]
fn a_callback_that_raises_stops_the_run_at_its_call() {
    let case = setup("numa-2x4", "n=40,kind=cpu,exec=100");
    let cb = Scripted {
        balance: Some(Box::new(|_| Vec::new())),
        raise_at_ns: Some(30_000_000),
        ..Scripted::default()
    };
    let hooks = Hooks {
        period_ns: Some(10_000_000),
        ..Hooks::default()
    };
    let err = run(&case, cb, hooks).unwrap_err().to_string();
    assert_eq!(
        err,
        "policy test: balance at 30.000 ms (machine-wide): raised an exception"
    );
}

#[test]
fn a_placement_outside_the_machine_is_refused_and_none_is_the_base_s() {
    let case = setup("numa-2x4", "n=20,kind=cpu,exec=50");
    let hooks = Hooks {
        place: true,
        ..Hooks::default()
    };
    let none = Scripted {
        place: Some(Box::new(|_, _| None)),
        ..Scripted::default()
    };
    let ours = run(&case, none, hooks).unwrap();
    assert_eq!(
        serde_json::to_string(&ours).unwrap(),
        traced("linux26", &case)
    );
    let bad = Scripted {
        place: Some(Box::new(|_, pid| (pid == 3).then_some(9))),
        ..Scripted::default()
    };
    let err = run(&case, bad, hooks).unwrap_err().to_string();
    assert!(
        err.ends_with("pid 3 placed on CPU 9: the machine has CPUs 0 to 7"),
        "{err}"
    );
    assert!(
        err.starts_with("policy test: place at 0.000 ms on CPU "),
        "{err}"
    );
}

#[test]
fn per_cpu_balancing_is_asked_only_when_its_gate_is_open() {
    let case = setup("numa-2x4", "n=60,kind=cpu,exec=100,arrival=random");
    for (gate, idle, overloaded) in [
        ("idle", true, false),
        ("overloaded", false, true),
        ("idle+overloaded", true, true),
    ] {
        let asked = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let cb = Scripted {
            balance_cpu: Some(Box::new(|_, _, _| Vec::new())),
            asked_cpu: asked.clone(),
            ..Scripted::default()
        };
        let hooks = Hooks {
            balance_cpu: Some(Gate::parse("t", gate).unwrap()),
            ..Hooks::default()
        };
        run(&case, cb, hooks).unwrap();
        let asked = asked.lock().unwrap();
        assert!(!asked.is_empty(), "{gate}: asked some time");
        for &(cpu, was_idle, was_overloaded) in asked.iter() {
            assert!(!idle || was_idle, "{gate}: CPU {cpu} was busy");
            assert!(!overloaded || was_overloaded, "{gate}: none overloaded");
        }
    }
    assert!(Gate::parse("t", "sometimes").is_err());
}
