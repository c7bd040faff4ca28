//! scx_rusty's tuner (`scheds/rust/scx_rusty/src/tuner.rs`, `Tuner::step`) as a pure
//! function: every tune interval (0.1 s), from each CPU's utilisation over the interval, the
//! CPUs idle tasks may be pushed to directly (`direct_greedy`), the CPUs an enqueue may kick
//! to steal (`kick_greedy`), whether the machine is fully utilised and the slice.
//!
//! ```text
//!   per-CPU busy/total over the interval ──► per-domain mean ──► domain < 90 %:  direct greedy
//!                                        │                  └─► domain < 100 %: kick greedy
//!                                        └─► machine mean ≥ 0.99999: fully utilised → 1 ms slice
//! ```
//!
//! 1. A CPU's utilisation is busy / (busy + idle) over the interval (`calc_util`, from
//!    /proc/stat), clamped to [0, 1]; 1 when the interval is empty.
//! 2. The machine's mean over all CPUs decides `fully_utilized` (≥ 0.99999) and the slice:
//!    `slice_us_overutil` when fully utilised, else `slice_us` (`step`'s last lines).
//! 3. Each domain's mean over its CPUs: its CPUs join the direct-greedy mask when the mean is
//!    below `direct_greedy_under` (or that is ≥ 100 %), the kick-greedy mask when below
//!    `kick_greedy_under` (or that is ≥ 100 %).
//!
//! Known limits: numasim's busy time is the time a process ran on the CPU (its stalls
//! included); the source's also counts interrupts and steal time, which are not modelled.

use crate::machine::CpuId;

/// What one tuner step sets.
#[derive(Debug, Clone, PartialEq)]
pub struct Tuning {
    /// Per CPU: in the direct-greedy mask.
    pub direct_greedy: Vec<bool>,
    /// Per CPU: in the kick-greedy mask.
    pub kick_greedy: Vec<bool>,
    pub fully_utilized: bool,
    pub slice_ns: u64,
}

impl Tuning {
    /// Before the first step (`Tuner::new`): empty masks, not fully utilised, the
    /// under-utilised slice.
    pub fn initial(nr_cpus: usize, slice_ns: u64) -> Self {
        Self {
            direct_greedy: vec![false; nr_cpus],
            kick_greedy: vec![false; nr_cpus],
            fully_utilized: false,
            slice_ns,
        }
    }
}

/// The tuner's thresholds and slices (fractions, not percents).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TunerParams {
    pub direct_greedy_under: f64,
    pub kick_greedy_under: f64,
    pub underutil_slice_ns: u64,
    pub overutil_slice_ns: u64,
}

/// `calc_util`: busy share of an interval, 1 when the interval is empty.
pub fn utilisation(busy_ns: u64, interval_ns: u64) -> f64 {
    if interval_ns == 0 {
        1.0
    } else {
        (busy_ns as f64 / interval_ns as f64).clamp(0.0, 1.0)
    }
}

/// `Tuner::step` on each CPU's utilisation `util` over the interval, with the domains' CPUs.
pub fn step(util: &[f64], domains: &[Vec<CpuId>], p: &TunerParams) -> Tuning {
    let nr_cpus = util.len();
    let mut dom_util_sum = vec![0.0_f64; domains.len()];
    let mut avg_util = 0.0_f64;
    for (d, cpus) in domains.iter().enumerate() {
        for &cpu in cpus {
            dom_util_sum[d] += util[cpu];
            avg_util += util[cpu];
        }
    }
    avg_util /= nr_cpus as f64;
    let fully_utilized = avg_util >= 0.99999;
    let mut t = Tuning::initial(nr_cpus, p.underutil_slice_ns);
    t.fully_utilized = fully_utilized;
    for (d, cpus) in domains.iter().enumerate() {
        let dom_util = match cpus.len() {
            0 => 0.0,
            nr => dom_util_sum[d] / nr as f64,
        };
        let direct = p.direct_greedy_under > 0.99999 || dom_util < p.direct_greedy_under;
        let kick = p.kick_greedy_under > 0.99999 || dom_util < p.kick_greedy_under;
        for &cpu in cpus {
            t.direct_greedy[cpu] = direct;
            t.kick_greedy[cpu] = kick;
        }
    }
    t.slice_ns = if fully_utilized {
        p.overutil_slice_ns
    } else {
        p.underutil_slice_ns
    };
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: TunerParams = TunerParams {
        direct_greedy_under: 0.90,
        kick_greedy_under: 1.00,
        underutil_slice_ns: 20_000_000,
        overutil_slice_ns: 1_000_000,
    };

    #[test]
    fn utilisation_is_the_busy_share_of_the_interval() {
        assert_eq!(utilisation(25_000_000, 100_000_000), 0.25);
        assert_eq!(utilisation(120, 100), 1.0);
        assert_eq!(utilisation(0, 0), 1.0);
    }

    #[test]
    fn domains_below_90_percent_take_direct_greedy_pushes_and_kicks_always() {
        // Two domains of two CPUs: domain 0 at (1.0 + 0.7) / 2 = 85 % (< 90 %: direct
        // greedy), domain 1 at (1.0 + 0.9) / 2 = 95 % (not). kick_greedy_under = 100 % is
        // "always" (> 0.99999). Machine mean 90 %: not fully utilised, 20 ms slice.
        let t = step(&[1.0, 0.7, 1.0, 0.9], &[vec![0, 1], vec![2, 3]], &P);
        assert_eq!(t.direct_greedy, vec![true, true, false, false]);
        assert_eq!(t.kick_greedy, vec![true; 4]);
        assert!(!t.fully_utilized);
        assert_eq!(t.slice_ns, 20_000_000);
    }

    #[test]
    fn a_fully_utilised_machine_gets_the_short_slice() {
        // Every CPU busy the whole interval: mean 1.0 ≥ 0.99999: 1 ms. A kick threshold
        // below 100 % now excludes domains at 100 %.
        let p = TunerParams {
            kick_greedy_under: 0.95,
            ..P
        };
        let t = step(&[1.0; 4], &[vec![0, 1], vec![2, 3]], &p);
        assert!(t.fully_utilized);
        assert_eq!(t.slice_ns, 1_000_000);
        assert_eq!(t.direct_greedy, vec![false; 4]);
        assert_eq!(t.kick_greedy, vec![false; 4]);
        // 0.99999 is the threshold: one CPU at 0.99998 of four leaves the mean at 0.999995.
        let t = step(&[1.0, 1.0, 1.0, 0.99998], &[vec![0, 1], vec![2, 3]], &P);
        assert!(t.fully_utilized);
        let t = step(&[1.0, 1.0, 1.0, 0.9999], &[vec![0, 1], vec![2, 3]], &P);
        assert!(!t.fully_utilized);
    }
}
