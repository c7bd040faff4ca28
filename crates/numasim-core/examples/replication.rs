//! Replications of an experiment's grid from the command line, without Python: what one
//! `reproduce` worker computes (domains built once, a workload per cell and replication, every
//! policy on it, under the experiment's modelling assumptions), for profiling the engine on an
//! experiment's real mix of cells. Prints the runs, their events and the time they took.
//!
//! ```text
//! cargo run --release -p numasim-core --example replication -- MACHINE.toml ASSUMPTIONS \
//!     DOMAINS POLICY[,POLICY...] N[,N...] REPLICATIONS SPEC [SPEC...]
//! # origin-aware-m1's grid, 10 replications:
//! cargo run --release -p numasim-core --example replication -- \
//!     python/numasim/data/machines/mehta-m1.toml memory=parent,slice=work,wake=idlest \
//!     multilevel linux26,origin-aware 25,50,100,200,300,400,500 10 \
//!     kind=cpu,exec=200,arrival=same kind=cpu,exec=200,arrival=random \
//!     kind=cpu,exec=300,arrival=random
//! ```

use std::path::Path;
use std::time::Instant;

use numasim_core::assumptions::Assumptions;
use numasim_core::config::EngineConfig;
use numasim_core::domains::BuildOptions;
use numasim_core::workload::WorkloadSpec;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [machine, assume, domains, policies, ns, reps, specs @ ..] = args.as_slice() else {
        eprintln!(
            "usage: replication MACHINE.toml ASSUMPTIONS DOMAINS POLICIES NS REPLICATIONS SPEC..."
        );
        std::process::exit(2);
    };
    let fail = |e: numasim_core::InputError| -> ! {
        eprintln!("{e}");
        std::process::exit(2)
    };
    let m = numasim_core::machine::file::read(Path::new(machine)).unwrap_or_else(|e| fail(e));
    let builder: numasim_core::Builder = domains.parse().unwrap_or_else(|e| fail(e));
    let d = builder.build(&m, &BuildOptions::default());
    let config = EngineConfig {
        assumptions: Assumptions::parse("assumptions", assume).unwrap_or_else(|e| fail(e)),
        ..EngineConfig::default()
    };
    let reps: u64 = reps.parse().expect("a count");
    let (mut runs, mut events) = (0u64, 0u64);
    let t0 = Instant::now();
    for spec in specs {
        for n in ns.split(',') {
            for r in 0..reps {
                let w = WorkloadSpec::parse("spec", &format!("n={n},{spec}"))
                    .and_then(|s| s.generate("spec", 1000 + r, m.node_cpu_lists()))
                    .unwrap_or_else(|e| fail(e));
                for policy in policies.split(',') {
                    let result = numasim_core::run_policy(&m, &d, &w, policy, &config)
                        .unwrap_or_else(|e| fail(e));
                    runs += 1;
                    events += result.events;
                }
            }
        }
    }
    let s = t0.elapsed().as_secs_f64();
    println!(
        "{runs} runs, {events} events, {s:.3} s ({:.3} ms/run)",
        s * 1e3 / runs as f64
    );
}
