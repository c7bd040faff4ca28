//! Invariants over random machines, workloads and builders: every process completes exactly
//! once, work is conserved, no CPU runs two processes at once, no process runs on two CPUs at
//! once, CPU time adds up, and the same seed gives the same result — also run in parallel.

use numasim_core::config::EngineConfig;
use numasim_core::domains::{BuildOptions, Builder};
use numasim_core::engine::RunResult;
use numasim_core::machine::Machine;
use numasim_core::testutils;
use numasim_core::workload::WorkloadSpec;
use proptest::prelude::*;

mod common;
use common::sound;

/// Every policy, some with options.
const POLICIES: [&str; 15] = [
    "linux26",
    "linux",
    "linux:slice-us=100,nr-migrate=2",
    "linux:select=thread-aware",
    "linux:select=memory-aware,nr-migrate=3",
    "thread-aware",
    "memory-aware",
    "capability-aware",
    "origin-aware",
    "origin-aware:v1=off,nearest=move",
    "origin-aware:v2=off,min-load=1.5",
    "scx-rusty",
    "scx-rusty:fifo=1,xnuma_greedy=2,interval_ms=30,tune_interval_ms=10,slice_us_overutil=5000",
    "scx-lavd",
    "scx-lavd:dist=slit,mig-delta-pct=10,lb-low-util-pct=0,slice-us=3500",
];

/// Each pair of values of any two assumptions appears in one of these.
const ASSUMPTIONS: [&str; 4] = [
    "memory=first-run,slice=wall,wake=previous",
    "memory=first-run,slice=work,wake=idlest",
    "memory=parent,slice=wall,wake=idlest",
    "memory=parent,slice=work,wake=previous",
];

fn run(m: &Machine, b: Builder, policy: &str, spec: &str, seed: u64, trace: bool) -> RunResult {
    run_assuming(m, b, policy, spec, seed, trace, ASSUMPTIONS[0])
}

fn run_assuming(
    m: &Machine,
    b: Builder,
    policy: &str,
    spec: &str,
    seed: u64,
    trace: bool,
    assume: &str,
) -> RunResult {
    let mut s = testutils::Setup::from_spec(m.clone(), b, spec, seed);
    s.config.record_trace = trace;
    s.config.assumptions = numasim_core::assumptions::Assumptions::parse("test", assume).unwrap();
    numasim_core::run_policy(&s.m, &s.d, &s.w, policy, &s.config).unwrap()
}

fn workload() -> impl Strategy<Value = String> {
    (1usize..40, 0u32..3, 1u32..60, 0u32..150, 1usize..3).prop_map(|(n, kind, exec, window, threads)| {
        let kind = ["cpu", "io", "mixed"][kind as usize];
        format!("n={n},kind={kind},exec=1-{exec},arrival=uniform:{window},burst=3,wait=5,threads={threads}")
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn schedules_are_sound(m in common::random_machine(), spec in workload(), b in 0usize..5, pi in 0usize..POLICIES.len(), seed in 0u64..1000, ai in 0usize..ASSUMPTIONS.len()) {
        let (builder, policy) = (Builder::ALL[b], POLICIES[pi]);
        let r = run_assuming(&m, builder, policy, &spec, seed, true, ASSUMPTIONS[ai]);
        sound(&r)?;
        // Same seed, same result.
        prop_assert_eq!(&r, &run_assuming(&m, builder, policy, &spec, seed, true, ASSUMPTIONS[ai]));
    }
}

/// Random mixes of 1–3 application profiles with 1–4 threads each.
fn app_workload() -> impl Strategy<Value = String> {
    let names: Vec<&'static str> = numasim_core::apps::profiles()
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    (
        proptest::collection::vec((proptest::sample::select(names), 1u32..5), 1..4),
        0u32..50,
        0u32..3,
    )
        .prop_map(|(apps, window, fork)| {
            let list: Vec<String> = apps.iter().map(|(a, t)| format!("{a}:{t}")).collect();
            format!(
                "app={},arrival=uniform:{window},fork=over:{fork}",
                list.join("+")
            )
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// Applications: every thread ends, and no segment starts before its wait is satisfied —
    /// for a barrier, before every thread of the phase has arrived; for a pipeline stage,
    /// before the previous stage has finished the item.
    #[test]
    fn barriers_and_queues_hold(m in common::random_machine(), spec in app_workload(), b in 0usize..5, pi in 0usize..POLICIES.len(), seed in 0u64..1000, ai in 0usize..ASSUMPTIONS.len()) {
        let (builder, policy) = (Builder::ALL[b], POLICIES[pi]);
        let r = run_assuming(&m, builder, policy, &spec, seed, true, ASSUMPTIONS[ai]);
        let w = WorkloadSpec::parse("w", &spec).unwrap().generate("w", seed, m.node_cpu_lists()).unwrap();
        prop_assert_eq!(r.apps.len(), w.apps.len());
        let segs = &r.trace_events.segments;
        for app in &w.apps {
            let first = app.tgid as usize;
            // Per point: the times of its signals (the ends of the segments that signal it).
            let mut signals: Vec<Vec<u64>> = vec![Vec::new(); app.points as usize];
            for (t, plan) in app.plans.iter().enumerate() {
                let mine: Vec<_> = segs.iter().filter(|s| s.0 == first + t).collect();
                prop_assert_eq!(mine.len(), plan.len(), "every segment of pid {} ran once", first + t);
                for (k, seg) in plan.iter().enumerate() {
                    prop_assert_eq!(mine[k].1 as usize, k);
                    if let Some(point) = seg.signal {
                        signals[point as usize].push(mine[k].3);
                    }
                }
            }
            for s in signals.iter_mut() {
                s.sort_unstable();
            }
            for (t, plan) in app.plans.iter().enumerate() {
                let mine: Vec<_> = segs.iter().filter(|s| s.0 == first + t).collect();
                for (k, seg) in plan.iter().enumerate() {
                    if let Some(wait) = seg.wait {
                        let released = signals[wait.point as usize][wait.count as usize - 1];
                        prop_assert!(mine[k].2 >= released, "pid {} segment {k} started at {} before point {} had {} signals ({})", first + t, mine[k].2, wait.point, wait.count, released);
                    }
                    if k > 0 {
                        prop_assert!(mine[k].2 >= mine[k - 1].3, "segments of a thread in order");
                    }
                }
            }
            let res = r.apps.iter().find(|a| a.tgid == first).unwrap();
            let last = r.processes[first..first + app.plans.len()].iter().map(|p| p.completion_ms).fold(0.0, f64::max);
            prop_assert_eq!(res.completion_ms, last);
        }
        sound(&r)?;
    }
}

#[test]
fn same_seed_same_result_in_parallel() {
    let m = testutils::machine(&testutils::two_level_table(4, 20), 2);
    let spec = "n=120,kind=mixed,exec=5-80,arrival=uniform:200";
    for policy in POLICIES {
        let reference = run(&m, Builder::Multilevel, policy, spec, 42, false);
        let results: Vec<RunResult> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..4)
                .map(|_| scope.spawn(|| run(&m, Builder::Multilevel, policy, spec, 42, false)))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for r in results {
            assert_eq!(r, reference);
        }
        assert_ne!(
            run(&m, Builder::Multilevel, policy, spec, 43, false),
            reference
        );
    }
}

/// Workloads of Koita et al.'s parallel processes, or of any profiles, for space sharing.
fn space_workload() -> impl Strategy<Value = String> {
    let names: Vec<&'static str> = numasim_core::apps::profiles()
        .iter()
        .map(|p| p.name.as_str())
        // canneal's 1 024 barriers would make a case slow.
        .filter(|&n| n != "canneal")
        .collect();
    prop_oneof![
        (1u32..6, 1usize..12, 0.2f64..2.0)
            .prop_map(|(t, n, load)| format!("app=koita:{t},n={n},load={load:.2}")),
        (proptest::sample::select(names), 1u32..4, 0u32..50)
            .prop_map(|(a, t, window)| format!("app={a}:{t},n=2,arrival=uniform:{window}")),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Space sharing: every process ends; no processor is held by two processes (a processor is
    /// only taken from its owner by the schemes that preempt); every thread runs only on a
    /// processor its process holds; at the end every processor is free again.
    #[test]
    fn space_sharing_keeps_processors_exclusive(m in common::random_machine(), spec in space_workload(), pi in 0usize..13, seed in 0u64..1000) {
        let name = numasim_core::policy::space::NAMES[pi];
        let d = Builder::Flat.build(&m, &BuildOptions::default());
        let config = EngineConfig { record_trace: true, ..EngineConfig::default() };
        let w = WorkloadSpec::parse("w", &spec).unwrap().generate("w", seed, m.node_cpu_lists()).unwrap();
        let ctx = numasim_core::interface::PolicyContext { machine: &m, domains: &d, config: &config };
        let mut p = numasim_core::policy::space::by_name(name, &ctx);
        let r = numasim_core::engine::run(&m, &d, &w, &mut p, &config).unwrap();
        sound(&r)?;
        let log = &p.alloc.log;
        let preempts = matches!(name, "equi" | "dyn");
        let mut owner: Vec<Option<usize>> = vec![None; m.cpus()];
        for &(t, cpu, to) in log {
            if let (Some(from), Some(_)) = (owner[cpu], to) {
                prop_assert!(preempts, "{name}: cpu {cpu} given to {to:?} at {t} while {from} held it");
            }
            owner[cpu] = to;
        }
        prop_assert!(owner.iter().all(Option::is_none), "{name}: processors still held at the end: {owner:?}");
        for s in r.trace.iter().filter(|s| s.end_ns > s.start_ns) {
            let tgid = w.processes[s.pid].tgid as usize;
            // The owner at the slice's start: the last change at or before it.
            let at_start = log.iter().rfind(|e| e.1 == s.cpu && e.0 <= s.start_ns).and_then(|e| e.2);
            prop_assert_eq!(at_start, Some(tgid), "{}: pid {} ran on cpu {} from {} without holding it", name, s.pid, s.cpu, s.start_ns);
            let changes = log.iter().filter(|e| e.1 == s.cpu && e.0 > s.start_ns && e.0 < s.end_ns).count();
            prop_assert_eq!(changes, 0, "{}: cpu {} changed owner while pid {} ran", name, s.cpu, s.pid);
        }
    }
}
