//! A watched run (`engine::watch`): the watch is asked as the run goes, stops it when it says
//! so, and a watch that never stops it leaves the run bit-identical to one without a watch.

use std::ops::ControlFlow;

use numasim_core::config::EngineConfig;
use numasim_core::domains::{BuildOptions, Builder};
use numasim_core::engine::{Outcome, Paced, Progress, WATCH_EVERY_EVENTS};
use numasim_core::machine::Machine;
use numasim_core::testutils;
use numasim_core::workload::{Workload, WorkloadSpec};

fn setup(spec: &str) -> (Machine, numasim_core::Domains, Workload) {
    let m = testutils::preset("mehta-m1");
    let d = Builder::Multilevel.build(&m, &BuildOptions::default());
    let w = WorkloadSpec::parse("t", spec)
        .unwrap()
        .generate("t", 7, m.node_cpu_lists())
        .unwrap();
    (m, d, w)
}

const POLICIES: [&str; 3] = ["linux26", "origin-aware", "linux"];

#[test]
fn a_watch_that_never_stops_changes_nothing() {
    let (m, d, w) = setup("n=300,kind=mixed,exec=200,arrival=random");
    let config = EngineConfig {
        record_trace: true,
        ..EngineConfig::default()
    };
    for policy in POLICIES {
        let plain = numasim_core::run_policy(&m, &d, &w, policy, &config).unwrap();
        let mut asked: Vec<Progress> = Vec::new();
        let mut watch = |p: &Progress| {
            asked.push(*p);
            ControlFlow::Continue(())
        };
        let watched = numasim_core::run_policy_watched(&m, &d, &w, policy, &config, &mut watch)
            .unwrap()
            .finished()
            .expect("never stopped");
        assert_eq!(
            serde_json::to_string(&plain).unwrap(),
            serde_json::to_string(&watched).unwrap(),
            "{policy}"
        );
        // Asked once per WATCH_EVERY_EVENTS events, with the progress as it went.
        assert_eq!(
            asked.len() as u64,
            plain.events / WATCH_EVERY_EVENTS,
            "{policy}"
        );
        assert!(asked.windows(2).all(|p| p[0].now_ns <= p[1].now_ns
            && p[0].done <= p[1].done
            && p[1].events == p[0].events + WATCH_EVERY_EVENTS));
        assert!(asked.iter().all(|p| p.processes == 300 && p.done < 300));
    }
}

#[test]
fn the_run_stops_when_the_watch_says_so() {
    let (m, d, w) = setup("n=300,kind=cpu,exec=200,arrival=random");
    let config = EngineConfig::default();
    let full = numasim_core::run_policy(&m, &d, &w, "linux26", &config).unwrap();
    assert!(
        full.events > 4 * WATCH_EVERY_EVENTS,
        "long enough to stop midway"
    );
    let mut asked = 0;
    let mut watch = |_: &Progress| {
        asked += 1;
        if asked == 3 {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    };
    let outcome =
        numasim_core::run_policy_watched(&m, &d, &w, "linux26", &config, &mut watch).unwrap();
    let Outcome::Stopped(at) = outcome else {
        panic!("the run went on after the watch said stop");
    };
    assert_eq!(asked, 3);
    assert_eq!(at.events, 3 * WATCH_EVERY_EVENTS);
    assert!(at.done < 300 && at.now_ns < (full.summary.makespan_ms * 1e6) as u64);
}

#[test]
fn paced_asks_the_watch_inside_at_most_every_pace() {
    let (m, d, w) = setup("n=300,kind=cpu,exec=200,arrival=random");
    let config = EngineConfig::default();
    let mut inner_asked = 0;
    let mut watch = Paced::new(|_: &Progress| {
        inner_asked += 1;
        ControlFlow::Continue(())
    });
    let start = std::time::Instant::now();
    let outcome =
        numasim_core::run_policy_watched(&m, &d, &w, "linux26", &config, &mut watch).unwrap();
    let elapsed_ms = start.elapsed().as_millis() as u64;
    assert!(matches!(outcome, Outcome::Finished(_)));
    assert!(inner_asked <= elapsed_ms / numasim_core::engine::watch::PACE_MS + 1);
}
