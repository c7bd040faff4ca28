//! `scx-lavd`: the cross-domain load balancing of sched_ext's scx_lavd (sched-ext/scx,
//! `scheds/rust/scx_lavd`, commit 7a58a3a: `balance.bpf.c`, `sys_stat.bpf.c`,
//! `cpu_order.rs`), over a FIFO queue per compute domain. LAVD's latency criticality,
//! virtual deadlines, core compaction and power management are not modelled
//! (docs/policies/scx-lavd.md lists every simplification).
//!
//! ```text
//!   compute domains (cpdom.rs)          one shared queue each, FIFO
//!   node 0 ── domain 0 ── CPUs 0..k  ◄── enqueue: the chosen CPU's domain
//!   node 1 ── domain 1 ── CPUs ...   ──► dispatch (a CPU with nothing to run):
//!     neighbours by distance level         1. its domain a stealer: probabilistic walk
//!                                          2. its own domain's queue
//!   every 10 ms: roles (balance.rs)        3. nothing there: force steal, nearest first
//! ```
//!
//! 1. Placement (`pick_idle_cpu` without SMT, core types or sync wake-ups): the previous CPU
//!    if idle, else the lowest idle CPU of its domain, else (a new process whose parent's
//!    domain is a stealee: LAVD's aggressive migration at exec) an idle CPU of the nearest
//!    stealer neighbour, else the previous CPU.
//! 2. Enqueue (`lavd_enqueue`): to the chosen CPU's own runqueue when it is idle and its
//!    domain's queue is empty (`can_direct_dispatch`), else to its domain's queue; at a
//!    slice's end placement runs again from the CPU it ran on and an idle CPU found is kicked.
//!    The task's `util_est` (its duty cycle, 128 ms half-life, ×1024) is noted at enqueue: its
//!    domain's queued load sums these notes (`account_queued_load`).
//! 3. Every 10 ms (`update_sys_stat`): each CPU's busy share of the interval, ×1024, enters an
//!    asymmetric average (`calc_asym_avg`), wall-clock and capacity-invariant; each domain's
//!    load is its CPUs' invariant averages plus its queued load; `plan_x_cpdom_migration`
//!    makes stealers and stealees with budgets (balance.rs).
//! 4. Dispatch (`consume_task`): a CPU of a stealer domain first walks its neighbours
//!    (`try_to_steal_task`, the walk going one level further with probability 1/2 after a
//!    level that gave nothing); then it takes from its own domain's queue; with that empty,
//!    from the nearest neighbour that has a task it may run (`force_to_steal_task`, unless
//!    `mig-delta-pct` is set). A steal debits both budgets by the stolen queue's head task's
//!    `util_est` (`dsq_peek_task_load`).
//!
//! Statistics (`extra_metrics`): steals by the walk and forced, per distance level; walks.

pub mod balance;
pub mod cpdom;
mod policy;

use crate::error::InputError;
use crate::interface::PolicyContext;
pub use cpdom::DistModel;
pub use policy::ScxLavd;

/// The policy's options (`scx-lavd:dist=slit,mig-delta-pct=10`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// How neighbour domains are ordered: LAVD's `dist()` (one remote level) or the SLIT.
    pub dist: DistModel,
    /// `--mig-delta-pct` (0-100): a fixed margin of this percent of the fair share, and no
    /// force stealing; 0 (LAVD's default): the margin by queued load, force stealing on.
    pub mig_delta_pct: u8,
    /// `--lb-low-util-pct` (0-100): no roles while the busiest domain's average CPU
    /// utilisation is below this percent; LAVD's default 25, 0 never skips.
    pub lb_low_util_pct: u8,
    /// The slice, µs: LAVD's longest (`LAVD_SLICE_MAX_NS_DFL`, 5 ms) by default; LAVD's own
    /// slice adapts to the load and latency criticality, which is not modelled.
    pub slice_us: u64,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            dist: DistModel::Lavd,
            mig_delta_pct: 0,
            lb_low_util_pct: 25,
            slice_us: balance::SLICE_MAX_NS / 1000,
        }
    }
}

impl Options {
    /// Refuses a slice no longer than the largest cache refill a migration costs on the
    /// machine (`refill_in_node_ns`, or `refill_per_distance_ns` × the largest SLIT distance):
    /// a task force-stolen at every slice's end would spend each slice refilling and never
    /// progress, and the run would not end.
    pub fn check(&self, origin: &str, ctx: &PolicyContext<'_>) -> Result<(), InputError> {
        let m = ctx.machine;
        let far = (0..m.nodes())
            .flat_map(|a| (0..m.nodes()).map(move |b| (a, b)))
            .filter(|&(a, b)| a != b)
            .map(|(a, b)| ctx.config.refill_per_distance_ns * u64::from(m.distance(a, b)))
            .max()
            .unwrap_or(0);
        let refill = far.max(ctx.config.refill_in_node_ns);
        if self.slice_us * 1000 <= refill {
            return Err(InputError::new(
                origin,
                format!(
                    "scx-lavd option 'slice-us' ({}) must be above the largest cache refill \
                     after a migration on this machine ({} µs): a task moved at every slice \
                     would never progress",
                    self.slice_us,
                    refill.div_ceil(1000)
                ),
            ));
        }
        Ok(())
    }

    /// Parses `key=value` pairs; `origin` names the setting in errors.
    pub fn parse(origin: &str, pairs: &[(&str, &str)]) -> Result<Self, InputError> {
        let mut o = Self::default();
        for &(key, value) in pairs {
            let bad = |what: &str| super::option_error(origin, "scx-lavd", key, value, what);
            let pct = || {
                value
                    .parse::<u8>()
                    .ok()
                    .filter(|&p| p <= 100)
                    .ok_or_else(|| bad("a whole percent in 0..=100"))
            };
            match key {
                "dist" => {
                    o.dist = super::option_choice(
                        origin,
                        "scx-lavd",
                        key,
                        value,
                        &[("lavd", DistModel::Lavd), ("slit", DistModel::Slit)],
                    )?;
                }
                "mig-delta-pct" => o.mig_delta_pct = pct()?,
                "lb-low-util-pct" => o.lb_low_util_pct = pct()?,
                "slice-us" => {
                    o.slice_us = value
                        .parse::<u64>()
                        .ok()
                        .filter(|&s| s > 0)
                        .ok_or_else(|| bad("a whole number of µs > 0"))?;
                }
                _ => {
                    return Err(super::no_option(
                        origin,
                        "scx-lavd",
                        key,
                        "dist, mig-delta-pct, lb-low-util-pct, slice-us",
                    ))
                }
            }
        }
        Ok(o)
    }

    /// `mig_delta_factor`: the percent on LAVD's ×1024 scale, 0 when unset.
    pub fn mig_delta_factor(&self) -> u64 {
        (u64::from(self.mig_delta_pct) << balance::LAVD_SHIFT) / 100
    }

    /// `lb_low_util_wall`: the percent on LAVD's ×1024 scale.
    pub fn low_util_wall(&self) -> u64 {
        (u64::from(self.lb_low_util_pct) << balance::LAVD_SHIFT) / 100
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_parse_with_their_units_and_refuse_bad_words() {
        let o = Options::parse(
            "--policy",
            &[
                ("dist", "slit"),
                ("mig-delta-pct", "10"),
                ("slice-us", "2000"),
            ],
        )
        .unwrap();
        assert_eq!(o.dist, DistModel::Slit);
        assert_eq!(o.mig_delta_factor(), 102);
        assert_eq!(o.slice_us, 2000);
        assert_eq!(Options::default().low_util_wall(), 256);
        let err = Options::parse("--policy", &[("dist", "hops")]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "--policy: scx-lavd option 'dist' must be lavd or slit, not 'hops'"
        );
        let err = Options::parse("--policy", &[("lb-low-util-pct", "101")]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "--policy: scx-lavd option 'lb-low-util-pct' must be a whole percent in 0..=100, \
             not '101'"
        );
        let err = Options::parse("--policy", &[("prob", "2")]).unwrap_err();
        assert!(err.to_string().contains("no option 'prob'"));
    }
}
