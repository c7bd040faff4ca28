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
//! Later layers build on these two: workloads (`workload`), the engine and its metrics
//! (`engine/`), balancing policies (`policy/`, one module each) and the Perfetto trace of a
//! run (`trace`).

pub mod assumptions;
pub mod bench;
pub mod budget;
pub mod cpuset;
pub mod domains;
pub mod engine;
pub mod error;
pub mod machine;
pub mod policy;
#[cfg(feature = "testutils")]
pub mod testutils;
pub mod trace;
pub mod workload;

pub use domains::{Builder, Domains, Group, Level, LevelParams};
pub use error::{InputError, Result};
pub use machine::Machine;
