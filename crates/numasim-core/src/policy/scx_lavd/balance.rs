//! The pure parts of scx_lavd's cross-domain balancing (`balance.bpf.c`, `sys_stat.bpf.c`,
//! `util.bpf.c`), in LAVD's integer arithmetic: the utilisation averages, each domain's fair
//! share and role, and the walks over neighbour domains that steal a task.
//!
//! ```text
//!   every 10 ms:  per CPU  cur util = busy / interval (×1024)  → avg util (asymmetric EWMA)
//!                 per domain load = Σ avg util (capacity-invariant) + queued load
//!                 fair share = total load × domain capacity / total capacity
//!                 load ≤ fair − δ → stealer (budget (fair − load)/2)
//!                 load ≥ fair + δ, queue not empty → stealee (budget (load − fair)/2)
//!   dispatch:     stealer CPU → walk neighbours level by level, a stealee's queue first;
//!                 after a level that gave nothing, go on with probability 1/PROB_FT
//!                 own queue empty → take from any neighbour, nearest first (force steal)
//! ```

/// LAVD's fixed-point shift and scale (`LAVD_SHIFT`, `LAVD_SCALE`: 1.0 = 1024).
pub const LAVD_SHIFT: u32 = 10;
pub const LAVD_SCALE: u64 = 1 << LAVD_SHIFT;

/// The statistics period (`LAVD_SYS_STAT_INTERVAL_NS`, 10 ms).
pub const SYS_STAT_INTERVAL_NS: u64 = 10_000_000;
/// The longest slice (`LAVD_SLICE_MAX_NS_DFL`, 5 ms).
pub const SLICE_MAX_NS: u64 = 5_000_000;
/// One over the probability of walking one distance level further
/// (`LAVD_CPDOM_MIG_PROB_FT` = 10 ms / 5 ms = 2: "roughly twice per interval").
pub const MIG_PROB_FT: u32 = (SYS_STAT_INTERVAL_NS / SLICE_MAX_NS) as u32;
/// The migration margin's shifts (`LAVD_CPDOM_MIG_SHIFT_UL`, `_SHIFT`, `_SHIFT_OL`): ±25 %
/// when no domain has queued load, ±6.25 % when every active domain has, ±12.5 % otherwise.
pub const MIG_SHIFT_UL: u32 = 2;
pub const MIG_SHIFT: u32 = 3;
pub const MIG_SHIFT_OL: u32 = 4;
/// The running averages' half-life (`LAVD_RAVG_HALFLIFE_NS`, 128 ms): a task's `util_est`.
pub const RAVG_HALFLIFE_NS: u64 = 128_000_000;

/// scx's `__calc_avg(old, new, decay)` (common.bpf.h): `old` keeps (1 − 2^−decay) of its
/// weight, or half while either value is below 2^decay.
pub fn calc_avg(old: u64, new: u64, decay: u32) -> u64 {
    let thr = 1_u64 << decay;
    if old < thr || new < thr {
        if old == 1 && new == 0 {
            0
        } else {
            (old - (old >> 1)) + (new >> 1)
        }
    } else {
        (old - (old >> decay)) + (new >> decay)
    }
}

/// LAVD's `calc_asym_avg`: rises fast (the new value keeps 3/4), falls slowly (1/8).
pub fn calc_asym_avg(old: u64, new: u64) -> u64 {
    if old < new {
        calc_avg(new, old, 2)
    } else {
        calc_avg(old, new, 3)
    }
}

/// The margin around a domain's fair share (`calc_mig_delta`): `nz_qlen` domains have queued
/// load, of `nr_active_cpdoms`; `factor` (×1024) is `--mig-delta-pct`'s, 0 when unset.
pub fn calc_mig_delta(avg: u64, nz_qlen: usize, nr_active_cpdoms: usize, factor: u64) -> u64 {
    if factor > 0 {
        return avg * factor / LAVD_SCALE;
    }
    if nz_qlen >= nr_active_cpdoms {
        return avg >> MIG_SHIFT_OL;
    }
    if nz_qlen == 0 {
        return avg >> MIG_SHIFT_UL;
    }
    avg >> MIG_SHIFT
}

/// A domain's role for one round, with its budgets (`cpdom_ctx`'s `is_stealer`,
/// `is_stealee`, `stealer_budget_invr`, `stealee_budget_invr`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Role {
    pub stealer: bool,
    pub stealee: bool,
    pub stealer_budget: i64,
    pub stealee_budget: i64,
}

impl Role {
    /// `decrement_stealee_budget`: an exhausted budget ends the stealee role for the round.
    pub fn debit_stealee(&mut self, amount: u64) {
        self.stealee_budget -= amount as i64;
        if self.stealee_budget <= 0 {
            self.stealee = false;
        }
    }

    /// `decrement_stealer_budget`.
    pub fn debit_stealer(&mut self, amount: u64) {
        self.stealer_budget -= amount as i64;
        if self.stealer_budget <= 0 {
            self.stealer = false;
        }
    }
}

/// A domain's fair share of the total load by its capacity
/// (`total_load × cap_sum / total_cap_sum`, `classify_cpdom`).
pub fn fair_share(total_load: u64, cap_sum: u64, total_cap: u64) -> u64 {
    (total_load * cap_sum).checked_div(total_cap).unwrap_or(0)
}

/// What every domain's classification in one round shares.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    pub load: u64,
    pub cap: u64,
    /// Domains with queued load.
    pub nz_qlen: usize,
    /// Active domains (all of them: every numasim CPU is active).
    pub nr_active_cpdoms: usize,
    /// `mig_delta_factor` (×1024), 0 when unset.
    pub factor: u64,
}

/// `classify_cpdom` for an active domain (every numasim CPU is active: LAVD's core
/// compaction is not modelled) with load `load`, queued load `qload` and capacity `cap_sum`.
pub fn classify(load: u64, qload: u64, cap_sum: u64, t: &Totals) -> Role {
    let fair = fair_share(t.load, cap_sum, t.cap);
    let delta = calc_mig_delta(fair, t.nz_qlen, t.nr_active_cpdoms, t.factor);
    let (stealer_thr, stealee_thr) = (fair - delta, fair + delta);
    if load <= stealer_thr {
        let budget = if fair > load { (fair - load) / 2 } else { 0 };
        return Role {
            stealer: true,
            stealer_budget: budget as i64,
            ..Role::default()
        };
    }
    if load >= stealee_thr && qload > 0 {
        let budget = if load > fair { (load - fair) / 2 } else { 0 };
        if budget > 0 {
            return Role {
                stealee: true,
                stealee_budget: budget as i64,
                ..Role::default()
            };
        }
    }
    Role::default()
}

/// One round's inputs per domain (`plan_x_cpdom_migration`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DomLoad {
    /// Σ of its CPUs' capacity-invariant average utilisation (`avg_util_invr_sum`).
    pub util_invr_sum: u64,
    /// Σ of its CPUs' wall-clock average utilisation (`avg_util_wall_sum`).
    pub util_wall_sum: u64,
    /// Σ of its queued tasks' `util_est` (`qload_invr`).
    pub qload: u64,
    pub nr_cpus: u64,
    pub cap_sum: u64,
}

/// `plan_x_cpdom_migration` (the fast load balancer, LAVD's default): every domain's role for
/// the round, or every role reset when the busiest domain's average CPU utilisation is below
/// `low_util_wall` (×1024; 0 never skips) or no domain became a stealee.
pub fn plan(doms: &[DomLoad], low_util_wall: u64, factor: u64) -> Vec<Role> {
    let mut max_util_wall = 0;
    let (mut total_load, mut total_cap, mut nz_qlen) = (0, 0, 0);
    let loads: Vec<u64> = doms
        .iter()
        .map(|d| {
            let util = (d.util_wall_sum << LAVD_SHIFT) / d.nr_cpus.max(1);
            max_util_wall = max_util_wall.max(util >> LAVD_SHIFT);
            let load = d.util_invr_sum + d.qload;
            if d.qload > 0 {
                nz_qlen += 1;
            }
            total_load += load;
            total_cap += d.cap_sum;
            load
        })
        .collect();
    let reset = vec![Role::default(); doms.len()];
    if low_util_wall > 0 && max_util_wall < low_util_wall {
        return reset;
    }
    let totals = Totals {
        load: total_load,
        cap: total_cap,
        nz_qlen,
        nr_active_cpdoms: doms.len(),
        factor,
    };
    let roles: Vec<Role> = doms
        .iter()
        .zip(&loads)
        .map(|(d, &load)| classify(load, d.qload, d.cap_sum, &totals))
        .collect();
    if roles.iter().any(|r| r.stealee) {
        roles
    } else {
        reset
    }
}

/// LAVD's `prob_x_out_of_y`: true with probability x / y, from one 32-bit draw (none when
/// x ≥ y).
pub fn prob_x_out_of_y(x: u32, y: u32, draw: &mut impl FnMut() -> u32) -> bool {
    if x >= y {
        return true;
    }
    draw() % y < x
}

/// Where a walk took a task from: the domain and its distance level (0 = nearest).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Steal {
    pub dom: usize,
    pub level: usize,
}

/// `try_to_steal_task`: over `neighbors` (per level, nearest first), the first stealee with
/// budget left whose queue `gives` a task to this CPU; after a level that gave none, the walk
/// goes one level further only with probability 1/`prob_ft`. `deepest` is set to the deepest
/// level the walk looked at (for the walk's statistics).
pub fn try_steal(
    neighbors: &[Vec<usize>],
    roles: &[Role],
    prob_ft: u32,
    mut gives: impl FnMut(usize) -> bool,
    draw: &mut impl FnMut() -> u32,
    deepest: &mut usize,
) -> Option<Steal> {
    for (level, doms) in neighbors.iter().enumerate() {
        *deepest = level;
        for &d in doms {
            let r = &roles[d];
            if !r.stealee || r.stealee_budget <= 0 {
                continue;
            }
            if gives(d) {
                return Some(Steal { dom: d, level });
            }
        }
        if !prob_x_out_of_y(1, prob_ft, draw) {
            break;
        }
    }
    None
}

/// `force_to_steal_task`: the first neighbour, nearest level first, whose queue gives a task.
pub fn force_steal(
    neighbors: &[Vec<usize>],
    mut gives: impl FnMut(usize) -> bool,
) -> Option<Steal> {
    neighbors.iter().enumerate().find_map(|(level, doms)| {
        doms.iter()
            .copied()
            .find(|&d| gives(d))
            .map(|dom| Steal { dom, level })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngCore, SeedableRng};

    #[test]
    fn the_averages_follow_scx_integer_arithmetic() {
        // Rising: the new value keeps 3/4 (__calc_avg(new, old, 2)).
        assert_eq!(calc_asym_avg(0, 1024), 512); // old below 2^2: half and half
        assert_eq!(calc_asym_avg(512, 1024), 1024 - 256 + 128); // 896
                                                                // Falling: the old value keeps 7/8.
        assert_eq!(calc_asym_avg(896, 0), 448); // new below 2^3: half and half
        assert_eq!(calc_asym_avg(896, 512), 896 - 112 + 64); // 848
        assert_eq!(calc_avg(1, 0, 3), 0);
    }

    #[test]
    fn the_margin_narrows_as_more_domains_have_queued_load() {
        assert_eq!(calc_mig_delta(1024, 0, 4, 0), 256); // 25 %
        assert_eq!(calc_mig_delta(1024, 2, 4, 0), 128); // 12.5 %
        assert_eq!(calc_mig_delta(1024, 4, 4, 0), 64); // 6.25 %
                                                       // --mig-delta-pct=10: 10 % of 1024 is 102 (×1024), 1024 × 102 / 1024.
        assert_eq!(calc_mig_delta(1024, 0, 4, (10 << 10) / 100), 102);
    }

    #[test]
    fn a_hand_computed_round_makes_one_stealer_and_one_stealee() {
        // Two domains of 4 CPUs (capacity 4096 each). Domain 0: 4 CPUs at 100 % and 3 queued
        // tasks of util_est 512: load 4096 + 1536 = 5632. Domain 1: 1 CPU at 100 %, nothing
        // queued: load 1024. Total 6656, fair share 3328 each; one domain of two has queued
        // load: δ = 3328 >> 3 = 416. Domain 0: 5632 ≥ 3744, queue not empty → stealee with
        // budget (5632 − 3328)/2 = 1152. Domain 1: 1024 ≤ 2912 → stealer with budget
        // (3328 − 1024)/2 = 1152.
        let doms = [
            DomLoad {
                util_invr_sum: 4096,
                util_wall_sum: 4096,
                qload: 1536,
                nr_cpus: 4,
                cap_sum: 4096,
            },
            DomLoad {
                util_invr_sum: 1024,
                util_wall_sum: 1024,
                qload: 0,
                nr_cpus: 4,
                cap_sum: 4096,
            },
        ];
        let roles = plan(&doms, 256, 0);
        assert_eq!(
            roles,
            vec![
                Role {
                    stealee: true,
                    stealee_budget: 1152,
                    ..Role::default()
                },
                Role {
                    stealer: true,
                    stealer_budget: 1152,
                    ..Role::default()
                },
            ]
        );
        // Below the low-utilisation wall (busiest domain's CPUs at 20 % < 25 %): no roles.
        let quiet = [
            DomLoad {
                util_wall_sum: 4 * 204,
                ..doms[0]
            },
            DomLoad {
                util_wall_sum: 0,
                ..doms[1]
            },
        ];
        assert_eq!(plan(&quiet, 256, 0), vec![Role::default(); 2]);
        // Without the wall the same loads are classified.
        assert!(plan(&quiet, 0, 0)[0].stealee);
    }

    #[test]
    fn an_overloaded_domain_with_an_empty_queue_is_no_stealee() {
        // Capacity-weighted: domain 0 has twice the capacity, so twice the fair share.
        // Loads 2048 and 2048, total 4096, capacities 2048 and 1024: fair 2730 and 1365.
        // No queued load anywhere: δ = fair >> 2 (682, 341). Domain 0: 2048 ≤ 2048 → stealer,
        // budget (2730 − 2048)/2 = 341. Domain 1: 2048 ≥ 1706 but its queue is empty → none;
        // and with no stealee the whole round resets.
        let t = Totals {
            load: 4096,
            cap: 3072,
            nz_qlen: 0,
            nr_active_cpdoms: 2,
            factor: 0,
        };
        let r0 = classify(2048, 0, 2048, &t);
        assert_eq!(
            r0,
            Role {
                stealer: true,
                stealer_budget: 341,
                ..Role::default()
            }
        );
        assert_eq!(classify(2048, 0, 1024, &t), Role::default());
        let doms = [
            DomLoad {
                util_invr_sum: 2048,
                util_wall_sum: 2048,
                qload: 0,
                nr_cpus: 2,
                cap_sum: 2048,
            },
            DomLoad {
                util_invr_sum: 2048,
                util_wall_sum: 2048,
                qload: 0,
                nr_cpus: 2,
                cap_sum: 1024,
            },
        ];
        assert_eq!(plan(&doms, 256, 0), vec![Role::default(); 2]);
    }

    #[test]
    fn budgets_end_the_roles_when_spent() {
        let mut r = Role {
            stealee: true,
            stealee_budget: 600,
            stealer: true,
            stealer_budget: 100,
        };
        r.debit_stealee(512);
        assert!(r.stealee);
        assert_eq!(r.stealee_budget, 88);
        r.debit_stealee(88);
        assert!(!r.stealee);
        r.debit_stealer(512);
        assert!(!r.stealer);
        assert_eq!(r.stealer_budget, -412);
    }

    fn stealee(budget: i64) -> Role {
        Role {
            stealee: true,
            stealee_budget: budget,
            ..Role::default()
        }
    }

    #[test]
    fn the_walk_takes_the_first_giving_stealee_and_draws_only_after_a_failed_level() {
        // Domain 0's neighbours: level 0 = [1, 2], level 1 = [3].
        let nbrs = vec![vec![1, 2], vec![3]];
        let roles = vec![Role::default(), stealee(0), stealee(10), stealee(10)];
        let mut draws = 0;
        let mut deepest = 0;
        // Domain 1 has no budget left: skipped; domain 2 gives.
        let mut draw = || {
            draws += 1;
            0
        };
        let got = try_steal(&nbrs, &roles, 2, |d| d == 2, &mut draw, &mut deepest);
        assert_eq!(got, Some(Steal { dom: 2, level: 0 }));
        assert_eq!(draws, 0);
        // Level 0 gives nothing: a draw of 0 (0 % 2 < 1) goes on, domain 3 gives.
        let mut draws = 0;
        let mut draw = || {
            draws += 1;
            0
        };
        let got = try_steal(&nbrs, &roles, 2, |d| d == 3, &mut draw, &mut deepest);
        assert_eq!(got, Some(Steal { dom: 3, level: 1 }));
        assert_eq!((draws, deepest), (1, 1));
        // A draw of 1 (1 % 2 = 1, not < 1) stops after level 0.
        let mut draw = || 1;
        let got = try_steal(&nbrs, &roles, 2, |d| d == 3, &mut draw, &mut deepest);
        assert_eq!((got, deepest), (None, 0));
        // Force stealing ignores roles and draws nothing: nearest giving neighbour.
        assert_eq!(
            force_steal(&nbrs, |d| d != 2),
            Some(Steal { dom: 1, level: 0 })
        );
        assert_eq!(
            force_steal(&nbrs, |d| d == 3),
            Some(Steal { dom: 3, level: 1 })
        );
        assert_eq!(force_steal(&nbrs, |_| false), None);
    }

    #[test]
    fn the_walk_reaches_each_level_with_probability_one_over_prob_ft_per_step() {
        // Three levels, nothing gives: the walk looks at level k with probability 2^-k
        // (MIG_PROB_FT = 2). Over 100 000 walks with a fixed seed the shares of walks that
        // stop at levels 0, 1, 2 are 1/2, 1/4, 1/4 within 0.01 (the standard error of a
        // share near 1/2 over 100 000 draws is 0.0016: 0.01 is over six of them).
        let nbrs = vec![vec![1], vec![2], vec![3]];
        let roles = vec![Role::default(), stealee(1), stealee(1), stealee(1)];
        let mut rng = rand_pcg::Pcg64::seed_from_u64(7);
        let mut draw = || rng.next_u32();
        let n = 100_000;
        let mut stops = [0_u32; 3];
        for _ in 0..n {
            let mut deepest = 0;
            assert_eq!(
                try_steal(
                    &nbrs,
                    &roles,
                    MIG_PROB_FT,
                    |_| false,
                    &mut draw,
                    &mut deepest
                ),
                None
            );
            stops[deepest] += 1;
        }
        let share = |k: usize| f64::from(stops[k]) / f64::from(n);
        assert!((share(0) - 0.5).abs() < 0.01, "{stops:?}");
        assert!((share(1) - 0.25).abs() < 0.01, "{stops:?}");
        assert!((share(2) - 0.25).abs() < 0.01, "{stops:?}");
        assert_eq!(MIG_PROB_FT, 2);
    }
}
