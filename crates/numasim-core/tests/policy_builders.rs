//! Every policy over every domain builder balances — or refuses the combination.
//!
//! A policy that accepts a builder but never balances over it gives results that look valid and
//! mean nothing (once, linux26 over `linux` domains did no periodic balancing at all,
//! because 6.x levels carry no 2.6 `SD_LOAD_BALANCE`). The workload here is imbalanced on
//! purpose: every process is spawned on node 0 and they arrive over a second with different
//! demands, so runqueues drift apart after fork placement and only balancing evens them out.
//! A policy with shared dispatch queues balances by the tasks its CPUs take from queues other
//! CPUs filled; it must move some.

use numasim_core::config::EngineConfig;
use numasim_core::domains::{BuildOptions, Builder};
use numasim_core::machine::Machine;
use numasim_core::policy::POLICIES;
use numasim_core::testutils;
use numasim_core::workload::{Workload, WorkloadSpec};

#[test]
fn every_policy_balances_periodically_over_every_builder() {
    // amc1: 16 nodes × 2 CPUs, half of them speed cores, 2 MALs; mehta-m1: 16 × 2, 6 MALs
    // (so `linux` and `multilevel` build up to 6 levels, each of which must be balanced).
    let mut failures = Vec::new();
    for machine in ["amc1", "mehta-m1"] {
        let m = testutils::preset(machine);
        let spec =
            WorkloadSpec::parse("w", "n=300,exec=50-400,arrival=almost,spawn=node:0").unwrap();
        let w = spec.generate("w", 1, m.node_cpu_lists()).unwrap();
        check_machine(machine, &m, &w, &mut failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn check_machine(machine: &str, m: &Machine, w: &Workload, failures: &mut Vec<String>) {
    // Space-sharing policies allocate processors and never balance (space_sharing_never_balances).
    let balancers = POLICIES
        .iter()
        .map(|p| p.name)
        .filter(|n| !numasim_core::policy::space::NAMES.contains(n));
    for policy in balancers {
        for builder in Builder::ALL {
            let d = builder.build(m, &BuildOptions::default());
            let r = numasim_core::run_policy(m, &d, w, policy, &EngineConfig::default())
                .unwrap_or_else(|e| panic!("{machine}: {policy} over {builder}: {e}"));
            let b = &r.summary.balance;
            let periodic: u64 = b.periodic.iter().sum();
            let moved_periodic: u64 = b.moved_periodic.iter().sum();
            let balancing_moves: u64 = r
                .summary
                .migrations_by_kind
                .iter()
                .filter(|(kind, _)| kind != "placement" && kind != "wakeup")
                .map(|(_, n)| n)
                .sum();
            // A policy whose CPUs take from shared dispatch queues (sched_ext's) balances when
            // they take from queues other CPUs filled, not by periodic attempts over domains:
            // it must move tasks, not balance levels.
            let config = EngineConfig::default();
            let ctx = numasim_core::interface::PolicyContext {
                machine: m,
                domains: &d,
                config: &config,
            };
            let shared = numasim_core::policy::by_name(policy, &ctx)
                .unwrap()
                .shared_queues()
                > 0;
            if shared {
                if balancing_moves == 0 {
                    failures.push(format!(
                        "{machine}: {policy} over {builder}: no task taken from another CPU"
                    ));
                }
                continue;
            }
            // Every level of the hierarchy must get periodic attempts somewhere on the machine.
            let levels = d.cpus.iter().map(Vec::len).max().unwrap_or(0);
            let idle_levels: Vec<usize> = (0..levels)
                .filter(|&l| b.periodic.get(l).copied().unwrap_or(0) == 0)
                .collect();
            if periodic == 0
                || moved_periodic == 0
                || balancing_moves == 0
                || !idle_levels.is_empty()
            {
                failures.push(format!(
                    "{machine}: {policy} over {builder}: periodic attempts {periodic}, moved by them \
                     {moved_periodic}, balancing migrations {balancing_moves}, levels never \
                     balanced {idle_levels:?}"
                ));
            }
        }
    }
}

#[test]
fn space_sharing_never_balances() {
    let m = testutils::preset("koita-64");
    let d = Builder::Flat.build(&m, &BuildOptions::default());
    let spec = WorkloadSpec::parse("w", "app=koita:4,n=20,load=0.75").unwrap();
    let w = spec.generate("w", 1, m.node_cpu_lists()).unwrap();
    for policy in numasim_core::policy::space::NAMES {
        let r = numasim_core::run_policy(&m, &d, &w, policy, &EngineConfig::default()).unwrap();
        let b = &r.summary.balance;
        let tried: u64 = b.periodic.iter().chain(&b.newidle).sum();
        assert_eq!(tried, 0, "{policy} balanced");
        assert_eq!(r.apps.len(), 20, "{policy}");
    }
}
