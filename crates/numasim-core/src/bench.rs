//! Whole-run benchmarks (`numasim bench`): time the phases of one run without serialising its
//! per-process results, so the figure is the simulator's, not the output's.
//!
//! 1. generate the workload from its spec and seed; 2. build the domains; 3. build the policy
//!    and run the engine. Each phase is timed with `Instant`; the engine's event count gives
//!    events per second.

use std::time::Instant;

use serde::Serialize;

use crate::config::EngineConfig;
use crate::domains::{BuildOptions, Builder};
use crate::engine::{Outcome, Watch};
use crate::error::Result;
use crate::machine::Machine;
use crate::workload::WorkloadSpec;

/// Timings and size of one benchmark run.
#[derive(Debug, Clone, Serialize)]
pub struct BenchResult {
    pub processes: usize,
    pub cpus: usize,
    pub events: u64,
    pub generate_s: f64,
    pub domains_s: f64,
    pub run_s: f64,
    pub events_per_s: f64,
    pub mean_tat_ms: f64,
    pub makespan_ms: f64,
}

/// Runs one scenario and times its phases; `None` if `watch` stopped the run. With a watch the
/// engine asks it every `WATCH_EVERY_EVENTS` events, as in the runs the bindings make, and the
/// time includes that (the `scenario` example times a run without one, for comparison).
pub fn run(
    machine: &Machine,
    spec: &str,
    seed: u64,
    policy_name: &str,
    builder: Builder,
    watch: Option<&mut dyn Watch>,
) -> Result<Option<BenchResult>> {
    let t0 = Instant::now();
    let workload = WorkloadSpec::parse("scenario", spec)?.generate(
        "scenario",
        seed,
        machine.node_cpu_lists(),
    )?;
    let t1 = Instant::now();
    let domains = builder.build(machine, &BuildOptions::default());
    let t2 = Instant::now();
    let config = EngineConfig::default();
    let outcome = match watch {
        Some(w) => {
            crate::run_policy_watched(machine, &domains, &workload, policy_name, &config, w)?
        }
        None => Outcome::Finished(Box::new(crate::run_policy(
            machine,
            &domains,
            &workload,
            policy_name,
            &config,
        )?)),
    };
    let t3 = Instant::now();
    let Some(r) = outcome.finished() else {
        return Ok(None);
    };
    let run_s = (t3 - t2).as_secs_f64();
    Ok(Some(BenchResult {
        processes: workload.processes.len(),
        cpus: machine.cpus(),
        events: r.events,
        generate_s: (t1 - t0).as_secs_f64(),
        domains_s: (t2 - t1).as_secs_f64(),
        run_s,
        events_per_s: r.events as f64 / run_s.max(1e-12),
        mean_tat_ms: r.summary.mean_tat_ms,
        makespan_ms: r.summary.makespan_ms,
    }))
}
