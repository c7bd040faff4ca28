//! # numasim-core
//!
//! A discrete-event simulator of process scheduling and load balancing on NUMA
//! multiprocessors. This crate is pure Rust (no Python); `numasim-py` binds it.
//!
//! ```text
//!   Machine (nodes, CPUs, speeds, SLIT distances, MALs)      machine/
//!      │
//!      ▼
//!   Domain builder (flat, node-only, two-level,              domains/
//!   multilevel, linux) ──► per CPU: levels → groups
//! ```
//!
//! Later layers build on these two, each depending only on the ones above it:
//!
//! ```text
//!   workload ─┐   load (cpu_load, PELT)   memory (pages per node)
//!             └──────────┬────────────────────┘
//!                      state        per CPU, process, thread group
//!                        │
//!                    interface      Policy trait, View, decisions (Attempt, Move, PageMove)
//!                  ┌─────┴──────┐
//!               engine        policy/   event loop + metrics │ one module per policy + registry
//!                  └─────┬──────┘
//!                  run_policy, trace (Perfetto), bench
//! ```

#[cfg(all(feature = "jemalloc", not(target_env = "msvc")))]
mod allocator;
pub mod apps;
pub mod assumptions;
pub mod bench;
pub mod budget;
pub mod config;
pub mod cpuset;
pub mod domains;
pub mod engine;
pub mod error;
pub mod interface;
pub mod load;
pub mod machine;
pub mod memory;
pub mod policy;
pub(crate) mod ring;
pub mod state;
#[cfg(feature = "testutils")]
pub mod testutils;
pub mod textfile;
pub mod trace;
pub mod workload;

pub use domains::{Builder, Domains, Group, Level, LevelParams};
pub use error::{InputError, Result};
pub use machine::Machine;

/// Runs `workload` on `machine` under the policy a setting names (`name[:key=value,...]`),
/// built for these domains and this config: what the bindings, `numasim bench` and tests run.
pub fn run_policy(
    machine: &Machine,
    domains: &Domains,
    workload: &workload::Workload,
    policy: &str,
    config: &config::EngineConfig,
) -> Result<engine::RunResult> {
    let mut p = policy_for(machine, domains, policy, config)?;
    engine::run(machine, domains, workload, p.as_mut(), config)
}

/// [`run_policy`] asking `watch` as it runs whether to go on (`engine::watch`): what the
/// bindings run, so that Ctrl-C stops a long run and a terminal shows its progress.
pub fn run_policy_watched(
    machine: &Machine,
    domains: &Domains,
    workload: &workload::Workload,
    policy: &str,
    config: &config::EngineConfig,
    watch: &mut dyn engine::Watch,
) -> Result<engine::Outcome> {
    let mut p = policy_for(machine, domains, policy, config)?;
    engine::run_watched(machine, domains, workload, p.as_mut(), config, watch)
}

/// [`run_policy_watched`] under an external policy: code outside the core (`callbacks`) for
/// the hooks `hooks` names, the registered policy `base` (a setting) for the others, every
/// decision checked (`policy::external`). `label` names the policy in errors.
#[allow(clippy::too_many_arguments)] // a run's inputs, and the external code's three
pub fn run_external_watched(
    machine: &Machine,
    domains: &Domains,
    workload: &workload::Workload,
    base: &str,
    callbacks: Box<dyn policy::external::Callbacks>,
    hooks: policy::external::Hooks,
    label: &str,
    config: &config::EngineConfig,
    watch: &mut dyn engine::Watch,
) -> Result<engine::Outcome> {
    let base = policy_for(machine, domains, base, config)?;
    let ctx = interface::PolicyContext {
        machine,
        domains,
        config,
    };
    let mut p = policy::external::External::new(&ctx, base, callbacks, hooks, label)?;
    engine::run_watched(machine, domains, workload, &mut p, config, watch)
}

/// The policy a setting names, built for `machine`, `domains` and `config`.
fn policy_for(
    machine: &Machine,
    domains: &Domains,
    policy: &str,
    config: &config::EngineConfig,
) -> Result<Box<dyn interface::Policy>> {
    let ctx = interface::PolicyContext {
        machine,
        domains,
        config,
    };
    policy::by_name(policy, &ctx)
}
