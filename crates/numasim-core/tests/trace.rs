//! Perfetto traces: a hand-checked two-CPU run as a golden snapshot, windows, saved runs read
//! back, and the trace rules on every policy over random machines and workloads.

use numasim_core::config::EngineConfig;
use numasim_core::domains::{BuildOptions, Builder};
use numasim_core::engine::RunResult;
use numasim_core::machine::{file, Machine};
use numasim_core::policy;
use numasim_core::testutils;
use numasim_core::trace::{chrome_trace, problems, utilisation_timeline, RunEvents, Window};
use numasim_core::workload::{Kind, Workload, WorkloadSpec};
use proptest::prelude::*;
use serde_json::Value;

fn run(m: &Machine, b: Builder, policy: &str, w: &Workload, config: &EngineConfig) -> RunResult {
    let d = b.build(m, &BuildOptions::default());
    numasim_core::run_policy(m, &d, w, policy, config).unwrap()
}

/// tests/engine.rs's `idle_cpu_pulls_once_the_task_is_cache_cold`, traced: one node, two CPUs,
/// P0 (100 ms) and P1, P2 (300 ms each) forked on CPU 0, balancing free.
fn two_cpu_run() -> (Machine, RunResult) {
    let m = testutils::machine(&testutils::two_level_table(1, 20), 2);
    let w = Workload {
        apps: Vec::new(),
        processes: vec![
            testutils::process(0, Kind::Cpu, 100),
            testutils::process(1, Kind::Cpu, 300),
            testutils::process(2, Kind::Cpu, 300),
        ],
    };
    let config = EngineConfig {
        cost_per_rq_ns: 0,
        cost_per_task_ns: 0,
        cost_per_migration_ns: 0,
        record_trace: true,
        ..EngineConfig::default()
    };
    let r = run(&m, Builder::Flat, "linux26", &w, &config);
    (m, r)
}

fn of_phase<'a>(trace: &'a Value, ph: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(move |e| e["ph"] == ph)
}

#[test]
fn the_hand_checked_two_cpu_run() {
    let (m, r) = two_cpu_run();
    let trace = chrome_trace(&m, &RunEvents::of(&r), Window::ALL).to_value();
    assert_eq!(problems(&trace), Vec::<String>::new());
    // P0 runs alone on CPU 1 (fork placement), P1 then P2 on CPU 0. CPU 1 pulls P1 at 103 ms,
    // when it has become cache-cold; P1 refills its cache for 0.1 ms there, so its 200 ms
    // left end at 303.1 ms. P2 runs alone on CPU 0 from 100 to 400 ms.
    let mut slices: Vec<(u64, String, f64, f64)> = of_phase(&trace, "X")
        .map(|e| {
            let name = e["name"].as_str().unwrap().to_string();
            (
                e["tid"].as_u64().unwrap(),
                name,
                e["ts"].as_f64().unwrap(),
                e["dur"].as_f64().unwrap(),
            )
        })
        .collect();
    slices.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let expect = [
        (0, "pid 1", 0.0, 100_000.0),
        (0, "pid 2", 100_000.0, 300_000.0),
        (1, "pid 0", 0.0, 100_000.0),
        (1, "pid 1", 103_000.0, 200_100.0),
    ];
    assert_eq!(
        slices,
        expect.map(|(t, n, s, d)| (t, n.to_string(), s, d)).to_vec()
    );
    // One arrow: P1 leaves its slice on CPU 0 1 ns before it ends, and lands in its slice on
    // CPU 1 1 ns after it starts.
    let flows: Vec<(String, u64, f64)> = of_phase(&trace, "s")
        .chain(of_phase(&trace, "f"))
        .map(|e| {
            (
                e["ph"].as_str().unwrap().into(),
                e["tid"].as_u64().unwrap(),
                e["ts"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        flows,
        vec![("s".into(), 0, 99_999.999), ("f".into(), 1, 103_000.001)]
    );
    // The pull is an idle balancing instant on CPU 1 at 103 ms that moved one task.
    let pulls: Vec<&Value> = of_phase(&trace, "i")
        .filter(|e| e["args"]["moved"] == 1)
        .collect();
    assert_eq!(pulls.len(), 1);
    assert_eq!(
        (pulls[0]["tid"].as_u64(), pulls[0]["ts"].as_f64()),
        (Some(1), Some(103_000.0))
    );
    assert_eq!(pulls[0]["args"]["kind"], "periodic");
    let lines: Vec<String> = trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .map(Value::to_string)
        .collect();
    insta::assert_snapshot!("two_cpu_trace", lines.join("\n"));
}

#[test]
fn a_window_clips_slices_and_opens_counters() {
    let (m, r) = two_cpu_run();
    let w = Window {
        start_ns: 50_000_000,
        end_ns: 150_000_000,
    };
    let trace = chrome_trace(&m, &RunEvents::of(&r), w).to_value();
    assert_eq!(problems(&trace), Vec::<String>::new());
    for e in of_phase(&trace, "X") {
        let (ts, dur) = (e["ts"].as_f64().unwrap(), e["dur"].as_f64().unwrap());
        assert!(ts >= 50_000.0 && ts + dur <= 150_000.0, "{e}");
    }
    assert_eq!(
        of_phase(&trace, "X").count(),
        4,
        "all four slices reach into 50-150 ms"
    );
    // Each CPU's runqueue counter starts at the window with the length it had then.
    let opening: Vec<(String, u64)> = of_phase(&trace, "C")
        .filter(|e| e["ts"] == 50_000.0)
        .map(|e| {
            (
                e["name"].as_str().unwrap().into(),
                e["args"]["nr_running"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        opening,
        vec![("runqueue cpu 0".into(), 2), ("runqueue cpu 1".into(), 1)]
    );
}

#[test]
fn a_saved_run_gives_the_same_trace() {
    let (m, r) = two_cpu_run();
    let saved = serde_json::to_string(&r).unwrap();
    let back = RunEvents::from_json("run.json", &saved, &m).unwrap();
    assert_eq!(back, RunEvents::of(&r));
    let m2 = file::from_info("run.json", &m.info()).unwrap();
    assert_eq!(m2, m);
    assert_eq!(
        chrome_trace(&m2, &back, Window::ALL).to_value(),
        chrome_trace(&m, &RunEvents::of(&r), Window::ALL).to_value()
    );
    let err = RunEvents::from_json("run.json", "{\"processes\": []}", &m).unwrap_err();
    assert_eq!(
        err.to_string(),
        "run.json: missing field `trace` at line 1 column 17"
    );
    // Events that do not fit the machine are refused, not indexed out of bounds: first by the
    // machine's shape the run's summary names, then (a run without one) CPU by CPU.
    let on_one_cpu = testutils::machine(&testutils::two_level_table(1, 20), 1);
    let err = RunEvents::from_json("run.json", &saved, &on_one_cpu).unwrap_err();
    assert_eq!(
        err.to_string(),
        "run.json: the run was made on a machine of 2 CPUs with memory access levels [10], not \
         on test (1 CPUs, levels [10]): give the machine it ran on"
    );
    let mut unnamed: serde_json::Value = serde_json::from_str(&saved).unwrap();
    unnamed.as_object_mut().unwrap().remove("summary");
    let err = RunEvents::from_json("run.json", &unnamed.to_string(), &on_one_cpu).unwrap_err();
    assert_eq!(
        err.to_string(),
        "run.json: field trace, entry 0: CPU 1, but the machine has 1 CPUs"
    );
    let mut bad = r.clone();
    bad.trace[2].pid = 9;
    let err = RunEvents::from_json("run.json", &serde_json::to_string(&bad).unwrap(), &m);
    assert_eq!(
        err.unwrap_err().to_string(),
        "run.json: field trace, entry 2: pid 9 is not among the processes"
    );
}

#[test]
fn utilisation_timeline_of_the_two_cpu_run() {
    let (_, r) = two_cpu_run();
    // Four bins of 100 ms over 0-400 ms. CPU 0 is busy throughout; CPU 1 runs P0 for the
    // first 100 ms, is idle 100-103 ms, then runs P1 until 303.1 ms.
    let u = utilisation_timeline(&r.trace, 2, 400_000_000, 4);
    assert_eq!(u[0], vec![1.0, 1.0, 1.0, 1.0]);
    let expect = [1.0, 0.97, 1.0, 0.031];
    for (got, want) in u[1].iter().zip(expect) {
        assert!((got - want).abs() < 1e-12, "{:?}", u[1]);
    }
    assert_eq!(
        utilisation_timeline(&r.trace, 2, 0, 4),
        vec![vec![0.0; 4]; 2]
    );
}

/// A trace with node 0 and its CPU 0 named, then `events`.
fn on_cpu_0(events: Value) -> Value {
    let mut all = vec![
        serde_json::json!({"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "node 0"}}),
        serde_json::json!({"ph": "M", "name": "thread_name", "pid": 0, "tid": 0, "args": {"name": "cpu 0"}}),
    ];
    all.extend(events.as_array().unwrap().iter().cloned());
    serde_json::json!({ "traceEvents": all })
}

#[test]
fn problems_are_found() {
    let bad = on_cpu_0(serde_json::json!([
        {"ph": "X", "name": "a", "pid": 0, "tid": 0, "ts": 0, "dur": 10},
        {"ph": "X", "name": "b", "pid": 0, "tid": 0, "ts": 5, "dur": 10},
        {"ph": "X", "name": "c", "pid": 0, "tid": 1, "ts": 0, "dur": 1},
        {"ph": "X", "name": "d", "pid": 0, "tid": 0, "ts": 30},
        {"ph": "s", "name": "m", "id": 1, "pid": 0, "tid": 0, "ts": 3},
        {"ph": "s", "name": "m", "id": 2, "pid": 0, "tid": 0, "ts": 3},
        {"ph": "f", "name": "m", "id": 2, "pid": 0, "tid": 0, "ts": 2},
        {"ph": "s", "name": "m", "id": 3, "pid": 0, "tid": 0, "ts": 1},
        {"ph": "f", "name": "m", "id": 3, "pid": 0, "tid": 0, "ts": 20},
        {"ph": "C", "name": "q", "pid": 4, "ts": 2, "args": {"n": 1}},
    ]));
    let found = problems(&bad);
    assert_eq!(found.len(), 7, "{found:#?}");
    for expected in [
        "X event on unnamed thread 0/1",
        "X without ts and dur >= 0",
        "C event on unnamed process 4",
        "overlapping slices on 0/0: 0-10 and 5",
        "flow 1 lacks an end",
        "flow 2 finishes before it starts",
        "flow 3: its 'f' at 20 is in no slice of its thread",
    ] {
        assert!(
            found.iter().any(|p| p.starts_with(expected)),
            "{expected}: {found:#?}"
        );
    }
}

#[test]
fn float_rounding_of_whole_nanoseconds_is_no_overlap() {
    // From a 3000-process run: 16883303653 ns + 61580179 ns ends where the next slice starts,
    // but in µs the sum of the two floats is 16944883.832000002.
    let trace = on_cpu_0(serde_json::json!([
        {"ph": "X", "name": "a", "pid": 0, "tid": 0, "ts": 16_883_303.653, "dur": 61_580.179},
        {"ph": "X", "name": "b", "pid": 0, "tid": 0, "ts": 16_944_883.832, "dur": 1.0},
    ]));
    assert_eq!(problems(&trace), Vec::<String>::new());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Every policy's trace keeps the rules, and every migration between two running
    /// intervals of the process has its arrow.
    #[test]
    fn traces_keep_the_rules(n in 1usize..5, cpn in 1usize..4, procs in 1usize..30, exec in 1u32..60,
                             pi in 0usize..policy::POLICIES.len(), seed in 0u64..1000) {
        let m = testutils::machine(&testutils::two_level_table(n, 21), cpn);
        let spec = format!("n={procs},kind=mixed,exec=1-{exec},arrival=uniform:50,burst=3,wait=5");
        let w = WorkloadSpec::parse("w", &spec).unwrap().generate("w", seed, m.node_cpu_lists()).unwrap();
        let config = EngineConfig { record_trace: true, ..EngineConfig::default() };
        let p = &policy::POLICIES[pi];
        let r = run(&m, p.default_domains.parse().unwrap(), p.name, &w, &config);
        let trace = chrome_trace(&m, &RunEvents::of(&r), Window::ALL).to_value();
        prop_assert_eq!(problems(&trace), Vec::<String>::new());
        prop_assert_eq!(of_phase(&trace, "X").count(), r.trace.len());
        // An arrow needs the process's last slice on the source CPU ended by the move and its
        // next one on the destination, both at least 2 ns long (each end sits 1 ns inside).
        let arrows = r.trace_events.migrations.iter()
            .filter(|(t, pid, from, to, _)| {
                let on = |cpu: usize| r.trace.iter().filter(move |s| s.pid == *pid && s.cpu == cpu);
                let last = on(*from).filter(|s| s.end_ns <= *t).max_by_key(|s| s.end_ns);
                let next = on(*to).filter(|s| s.start_ns >= *t).min_by_key(|s| s.start_ns);
                matches!((last, next), (Some(a), Some(b)) if a.end_ns - a.start_ns >= 1 && b.end_ns - b.start_ns >= 2)
            })
            .count();
        prop_assert_eq!(of_phase(&trace, "s").count(), arrows);
    }
}
