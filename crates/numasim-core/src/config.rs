//! Engine parameters: timeslice, tick, the costs the engine charges for cache refills
//! and balancing work, tracing, and the modelling assumptions (`crate::assumptions`). Read by the engine and,
//! through [`crate::interface::PolicyContext`] and the view, by policies.

use crate::assumptions::{Assumptions, Cost};

/// Engine parameters (defaults: 100 ms slice, 1 ms tick, the costs below; all configurable).
#[derive(Debug, Clone, PartialEq)]
pub struct EngineConfig {
    /// Round-robin timeslice (2.6 `DEF_TIMESLICE`, 100 ms).
    pub timeslice_ns: u64,
    /// Scheduler tick (HZ = 1000).
    pub tick_ns: u64,
    /// Cache refill after a migration inside a node.
    pub refill_in_node_ns: u64,
    /// Cache refill after a migration across nodes, per SLIT unit (0.5 ms × distance / 10).
    pub refill_per_distance_ns: u64,
    pub cost_per_rq_ns: u64,
    pub cost_per_task_ns: u64,
    pub cost_per_migration_ns: u64,
    /// One candidate evaluation of a selection policy (thread-aware, memory-aware): charged
    /// like examining a task (0.2 µs), which is what the evaluation adds to it.
    pub cost_per_evaluation_ns: u64,
    /// Record every running interval (for traces and invariant checks).
    pub record_trace: bool,
    /// The modelling assumptions (`crate::assumptions`): where memory and origin are,
    /// what uses up a slice, the scale of balancing costs.
    pub assumptions: Assumptions,
}

impl EngineConfig {
    /// What one balancing attempt costs its CPU, in ns, for its counts and `moved` migrations
    /// (the policy's own priced `work_ns` apart): the rates above under `cost=kernel`; under
    /// `cost=paper:S` the attempt itself is charged as one more runqueue and the sum times S,
    /// rounded to the ns. The engine charges this; a policy that needs its cost ahead reads it
    /// here.
    pub fn balancing_ns(
        &self,
        rqs_and_locks: u32,
        tasks: u32,
        evaluations: u32,
        moved: u64,
    ) -> u64 {
        let rates = self.cost_per_rq_ns * u64::from(rqs_and_locks)
            + self.cost_per_task_ns * u64::from(tasks)
            + self.cost_per_evaluation_ns * u64::from(evaluations)
            + self.cost_per_migration_ns * moved;
        match self.assumptions.cost {
            Cost::Kernel => rates,
            Cost::Paper(scale) => ((rates + self.cost_per_rq_ns) as f64 * scale).round() as u64,
        }
    }
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            timeslice_ns: 100_000_000,
            tick_ns: 1_000_000,
            refill_in_node_ns: 100_000,
            refill_per_distance_ns: 50_000,
            cost_per_rq_ns: 1_000,
            cost_per_task_ns: 200,
            cost_per_migration_ns: 5_000,
            cost_per_evaluation_ns: 200,
            record_trace: false,
            assumptions: Assumptions::default(),
        }
    }
}
