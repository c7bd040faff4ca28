//! The `linux` policy's load balancer: hand-computed group classification, the imbalance of each
//! migration type, the NUMA allowance at fork (`imb_numa_nr`), detach_tasks' limits, the PELT
//! signals the engine keeps for it, its options, and whole runs (its PELT sums checked at every
//! decision).

use numasim_core::config::EngineConfig;
use numasim_core::domains::{BuildOptions, Builder};
use numasim_core::interface::{Attempt, BalanceKind, Pid, Policy, View};
use numasim_core::load::{PELT_HALF_LIFE_PERIODS, PELT_PERIOD_NS};
use numasim_core::machine::CpuId;
use numasim_core::policy::linux::{
    adjust_numa_imbalance, calculate_imbalance, group_classify, sibling_imbalance, GroupType,
    IdleType, ImbalanceEnv, Linux, MigrationType, Options, SgStats,
};
use numasim_core::testutils::{self, Setup};
use numasim_core::workload::{Kind, WorkloadSpec};
use proptest::prelude::*;

const MS: u64 = 1_000_000;
const HALF_LIFE_NS: u64 = PELT_PERIOD_NS * PELT_HALF_LIFE_PERIODS;

/// A group of `weight` CPUs (capacity 1024 each) with these sums.
fn group(weight: u64, nr: u64, util: u64, runnable: u64) -> SgStats {
    SgStats {
        group_capacity: 1024 * weight,
        group_weight: weight,
        sum_nr_running: nr,
        group_util: util,
        group_runnable: runnable,
        ..SgStats::default()
    }
}

#[test]
fn the_busiest_of_tied_fully_busy_groups_is_the_last_one_seen() {
    // update_sd_pick_busiest (6.5+): fully busy groups carry no avg_load (0), so they tie, and a
    // tie returns true unless the busiest so far is SMT: the later group replaces it. A higher
    // type still wins over order, and among has-spare groups fewer idle CPUs wins.
    use numasim_core::policy::linux::pick_busiest;
    let fully_busy = |nr| SgStats {
        group_type: GroupType::FullyBusy,
        ..group(2, nr, 2048, 2048)
    };
    let (first, second) = (fully_busy(2), fully_busy(2));
    assert!(pick_busiest(None, &first));
    assert!(pick_busiest(Some(&first), &second));
    let overloaded = SgStats {
        group_type: GroupType::Overloaded,
        avg_load: 100,
        ..group(2, 3, 2048, 3072)
    };
    assert!(!pick_busiest(Some(&overloaded), &second));
    let spare = |idle| SgStats {
        group_type: GroupType::HasSpare,
        idle_cpus: idle,
        ..group(4, 1, 1024, 1024)
    };
    assert!(pick_busiest(Some(&spare(3)), &spare(2)));
    assert!(!pick_busiest(Some(&spare(2)), &spare(2)));
}

#[test]
fn group_classification_of_constructed_groups() {
    // Two CPUs (capacity 2048), imbalance_pct 117: 2048·100 = 204 800, 2048·117 = 239 616.
    let cases = [
        // 3 tasks, util 2048: 204 800 < 2048·117 = 239 616 → overloaded.
        (group(2, 3, 2048, 2048), GroupType::Overloaded),
        // 3 tasks, util 1000, runnable 2500: 239 616 < 250 000 → overloaded by runnable.
        (group(2, 3, 1000, 2500), GroupType::Overloaded),
        // 3 tasks but util 1500 (175 500 < 204 800) and runnable 2000 (200 000 < 239 616):
        // not overloaded, and it has capacity (204 800 > 175 500) → has spare.
        (group(2, 3, 1500, 2000), GroupType::HasSpare),
        // 2 tasks on 2 CPUs, util 1900: 204 800 > 222 300 fails → no capacity → fully busy.
        (group(2, 2, 1900, 2000), GroupType::FullyBusy),
        // 2 tasks, util 1700 (198 900 < 204 800): capacity left → has spare.
        (group(2, 2, 1700, 1800), GroupType::HasSpare),
        // Fewer tasks than CPUs: has spare whatever the util.
        (group(2, 1, 2048, 4000), GroupType::HasSpare),
        // 2 tasks, runnable 2400: 239 616 < 240 000 → no capacity → fully busy.
        (group(2, 2, 100, 2400), GroupType::FullyBusy),
    ];
    for (i, (s, want)) in cases.iter().enumerate() {
        assert_eq!(group_classify(117, s), *want, "case {i}: {s:?}");
    }
}

fn env(idle: IdleType, llc: bool, numa: bool, imb_numa_nr: i64, prefer: bool) -> ImbalanceEnv {
    ImbalanceEnv {
        idle,
        llc,
        numa,
        imb_numa_nr,
        prefer_sibling: prefer,
    }
}

fn classified(mut s: SgStats) -> SgStats {
    s.group_type = group_classify(117, &s);
    if s.group_type == GroupType::Overloaded {
        s.avg_load = s.group_load * 1024 / s.group_capacity;
    }
    s
}

#[test]
fn calculate_imbalance_migrate_util_fills_the_local_spare_capacity() {
    // Local: 2 CPUs, 1 task, util 500 (has spare); busiest overloaded; a NUMA level (not LLC).
    let mut local = classified(group(2, 1, 500, 500));
    let busiest = classified(group(2, 4, 2048, 4096));
    assert_eq!(busiest.group_type, GroupType::Overloaded);
    let e = env(IdleType::NotIdle, false, true, 1, false);
    let got = calculate_imbalance(&e, &mut local, &busiest, 4096, 4096);
    assert_eq!(got, (MigrationType::Util, 2048 - 500));
    // Util at or above capacity on an idle puller: one task instead.
    let mut full = classified(group(2, 1, 2100, 2100));
    let e = env(IdleType::Idle, false, true, 1, false);
    let got = calculate_imbalance(&e, &mut full, &busiest, 4096, 4096);
    assert_eq!(got, (MigrationType::Task, 1));
}

#[test]
fn calculate_imbalance_migrate_task_evens_tasks_or_idle_cpus() {
    let busiest = classified(group(2, 4, 800, 900)); // 4 tasks, low util: has spare
    assert_eq!(busiest.group_type, GroupType::HasSpare);
    // prefer_sibling, same sizes, idle puller: sibling_imbalance = 4 − 0 = 4, halved → 2.
    let mut local = classified(group(2, 0, 0, 0));
    local.idle_cpus = 2;
    let e = env(IdleType::Idle, true, false, 1, true);
    assert_eq!(
        calculate_imbalance(&e, &mut local, &busiest, 1024, 4096),
        (MigrationType::Task, 2)
    );
    // No prefer_sibling: the idle-CPU difference, 2 − 0, halved → 1.
    let mut b = busiest;
    b.idle_cpus = 0;
    let e = env(IdleType::Idle, true, false, 1, false);
    assert_eq!(
        calculate_imbalance(&e, &mut local, &b, 1024, 4096),
        (MigrationType::Task, 1)
    );
    // A busy puller gets no sibling imbalance.
    let e = env(IdleType::NotIdle, true, false, 1, true);
    assert_eq!(
        calculate_imbalance(&e, &mut local, &busiest, 1024, 4096),
        (MigrationType::Task, 0)
    );
}

#[test]
fn calculate_imbalance_at_numa_levels_allows_two_tasks_while_the_destination_is_light() {
    let busiest = classified(group(2, 2, 600, 600));
    let mut local = classified(group(2, 0, 0, 0));
    local.idle_cpus = 2;
    // sibling_imbalance 2 → adjust_numa_imbalance(2, 0 + 1, imb_numa_nr 1): 1 ≤ 1 and 2 ≤ 2
    // → 0.
    let e = env(IdleType::Idle, false, true, 1, true);
    assert_eq!(
        calculate_imbalance(&e, &mut local, &busiest, 1200, 4096),
        (MigrationType::Task, 0)
    );
    // One task already on the destination: 2 > 1, the imbalance stays 2, halved → 1 (busiest
    // 3 tasks so that sibling_imbalance = 3 − 1 = 2).
    let busiest = classified(group(2, 3, 600, 600));
    let mut local = classified(group(2, 1, 100, 100));
    local.idle_cpus = 1;
    assert_eq!(
        calculate_imbalance(&e, &mut local, &busiest, 1200, 4096),
        (MigrationType::Task, 1)
    );
    assert_eq!(
        adjust_numa_imbalance(3, 1, 4),
        3,
        "more than NUMA_IMBALANCE_MIN"
    );
    assert_eq!(
        adjust_numa_imbalance(2, 5, 4),
        2,
        "destination above imb_numa_nr"
    );
    assert_eq!(adjust_numa_imbalance(2, 4, 4), 0);
}

#[test]
fn calculate_imbalance_migrate_load_brings_both_groups_to_the_domain_average() {
    // Both overloaded: local load 3072 on 2048 (avg 1536), busiest 6144 on 2048 (avg 3072);
    // domain 9216 on 4096 → sd_avg 2304. min((3072 − 2304)·2048, (2304 − 1536)·2048) / 1024
    // = 1536.
    let mut local = group(2, 3, 2048, 3072);
    local.group_load = 3072;
    let mut local = classified(local);
    let mut busiest = group(2, 6, 2048, 6144);
    busiest.group_load = 6144;
    let busiest = classified(busiest);
    assert_eq!((local.avg_load, busiest.avg_load), (1536, 3072));
    let e = env(IdleType::NotIdle, false, true, 1, false);
    assert_eq!(
        calculate_imbalance(&e, &mut local, &busiest, 9216, 4096),
        (MigrationType::Load, 1536)
    );
    // Local fully busy (2 tasks, util 2048, load 2048 → avg computed: 1024); domain 8192 on
    // 4096 → sd_avg 2048: min((3072 − 2048)·2048, (2048 − 1024)·2048) / 1024 = 2048.
    let mut fb = group(2, 2, 2048, 2048);
    fb.group_load = 2048;
    let mut fb = classified(fb);
    assert_eq!(fb.group_type, GroupType::FullyBusy);
    assert_eq!(
        calculate_imbalance(&e, &mut fb, &busiest, 8192, 4096),
        (MigrationType::Load, 2048)
    );
    assert_eq!(fb.avg_load, 1024);
    // A fully busy local group above the domain average pulls nothing.
    let mut heavy = group(2, 2, 2048, 2048);
    heavy.group_load = 2900;
    let mut heavy = classified(heavy);
    assert_eq!(
        calculate_imbalance(&e, &mut heavy, &busiest, 5000, 4096).1,
        0,
        "1450 ≥ sd_avg 1250"
    );
}

#[test]
fn sibling_imbalance_between_groups_of_different_sizes() {
    // Local 2 CPUs empty, busiest 4 CPUs with 5 tasks: 2·5 − 4·0 = 10 → (2·10 + 2 + 4) / 6 = 4.
    let (l, b) = (group(2, 0, 0, 0), group(4, 5, 0, 0));
    assert_eq!(sibling_imbalance(true, &b, &l), 4);
    // Local 2 empty, busiest 8 CPUs with 2 tasks: 2·2 = 4 → (8 + 10) / 10 = 1 → forced to 2.
    assert_eq!(sibling_imbalance(true, &group(8, 2, 0, 0), &l), 2);
    assert_eq!(sibling_imbalance(false, &b, &l), 0, "busy puller");
}

/// Two nodes of 16 CPUs at distance 20 (fork balancing kept: 20 ≤ RECLAIM_DISTANCE 30), `linux`
/// domains: imb_numa_nr = max(1, 16 >> 3) = 2 at the NUMA level.
fn two_nodes_16(n: usize) -> Setup {
    let m = testutils::machine(&testutils::two_level_table(2, 20), 16);
    let w = testutils::workload(Kind::Cpu, &vec![100; n]);
    Setup::new(m, Builder::Linux, w)
}

#[test]
fn fork_placement_keeps_a_small_imbalance_on_the_parent_node() {
    // One task runs on node 0 (CPU 0): at the NUMA level local has 15 idle CPUs, node 1 16;
    // |15 − 16| = 1 and the destination would run 1 + 1 = 2 ≤ imb_numa_nr 2 → allowed: stay on
    // node 0; at the MC level an idle CPU (CPU 1) beats CPU 0's group.
    let s = two_nodes_16(4);
    let mut sc = s.scene();
    sc.put(0, 0, 0, 0);
    let mut p = Linux::new(&s.ctx(), Options::default());
    assert_eq!(p.place_new(&sc.view(), 3, 0), Some(1));
    // Two tasks on node 0 (CPUs 0, 1): 2 + 1 = 3 > 2 → the imbalance (2) stands, node 1 has
    // more idle CPUs → the first idle CPU of node 1.
    sc.put(1, 1, 1, 0);
    assert_eq!(p.place_new(&sc.view(), 3, 0), Some(16));
}

#[test]
fn fork_placement_with_imb_numa_nr_one_spreads_at_the_second_task() {
    // Nodes of 4 CPUs: imb_numa_nr = max(1, 4 >> 3) = 1. One task on node 0: the destination
    // would run 2 > 1 → the idle-CPU difference |3 − 4| = 1 is not forgiven → node 1 (CPU 4).
    let m = testutils::machine(&testutils::two_level_table(2, 20), 4);
    let w = testutils::workload(Kind::Cpu, &[100; 3]);
    let s = Setup::new(m, Builder::Linux, w);
    let mut sc = s.scene();
    let mut p = Linux::new(&s.ctx(), Options::default());
    // Nothing running: local 4 idle, node 1 4 idle, 0 + 1 ≤ 1 → stay; CPU 0 itself is idle.
    assert_eq!(p.place_new(&sc.view(), 2, 0), Some(0));
    sc.put(0, 0, 0, 0);
    assert_eq!(p.place_new(&sc.view(), 2, 0), Some(4));
}

/// One node of 2 CPUs (`linux` domains: one MC level, groups {0}, {1}), `n` processes.
fn one_node_2(n: usize) -> Setup {
    let m = testutils::machine(&testutils::two_level_table(1, 20), 2);
    let w = testutils::workload(Kind::Cpu, &vec![100; n]);
    Setup::new(m, Builder::Linux, w)
}

/// The options with `NI_RANDOM` off: every newly-idle level that passes the gates runs.
fn no_dice() -> Options {
    Options {
        ni_random: false,
        ..Options::default()
    }
}

fn pulled(a: &Attempt) -> Vec<Pid> {
    a.moves.iter().map(|m| m.pid).collect()
}

#[test]
fn detach_tasks_looks_at_nr_migrate_tasks_and_moves_the_task_imbalance() {
    // 100 cold tasks on CPU 0, CPU 1 idle, no PELT history (util 0: CPU 0 has spare):
    // sibling_imbalance 100 → 50 tasks, but loop_max = min(32, 100): 32 tasks move, the
    // least recently run first (the queue's front: pids 1, 2, ...; 0 runs).
    let s = one_node_2(100);
    let mut sc = s.scene();
    for pid in 0..100 {
        sc.put(pid, 0, 0, 0);
    }
    sc.at(10 * MS);
    let mut p = Linux::new(&s.ctx(), Options::default());
    let a = p
        .balance(&sc.view(), 1, 0, BalanceKind::Periodic)
        .expect("due");
    assert_eq!(pulled(&a), (1..=32).collect::<Vec<_>>());
    assert_eq!(a.tasks_examined, 32);
    // With nr-migrate=8: 8 looked at, 8 moved.
    let mut p = Linux::new(
        &s.ctx(),
        Options {
            nr_migrate: 8,
            ..Options::default()
        },
    );
    let a = p.balance(&sc.view(), 1, 0, BalanceKind::Periodic).unwrap();
    assert_eq!(pulled(&a), (1..=8).collect::<Vec<_>>());
}

#[test]
fn detach_tasks_stops_at_the_imbalance_skips_hot_tasks_and_newly_idle_takes_one() {
    // 6 tasks on CPU 0 (pid 0 runs): sibling_imbalance 6 → 3 tasks. Pids 1 and 2 stopped
    // running 0.1 ms ago (hot: < 0.5 ms), so the first three cold ones move: 3, 4, 5.
    let s = one_node_2(6);
    let mut sc = s.scene();
    let now = 50 * MS;
    for pid in 0..6 {
        let last = if pid == 1 || pid == 2 {
            now - MS / 10
        } else {
            0
        };
        sc.put(pid, 0, 0, last);
    }
    sc.at(now);
    let mut p = Linux::new(&s.ctx(), Options::default());
    let a = p.balance(&sc.view(), 1, 0, BalanceKind::Periodic).unwrap();
    assert_eq!(pulled(&a), vec![3, 4, 5]);
    // Newly idle (NI_RANDOM off: no dice): one task, the first cold one.
    let mut p = Linux::new(&s.ctx(), no_dice());
    let mut sc2 = s.scene();
    for pid in 0..6 {
        let last = if pid == 1 || pid == 2 {
            now - MS / 10
        } else {
            0
        };
        sc2.put(pid, 0, 0, last);
    }
    sc2.at(now);
    let a = p.balance(&sc2.view(), 1, 0, BalanceKind::NewIdle).unwrap();
    assert_eq!(pulled(&a), vec![3]);
}

#[test]
fn detach_tasks_load_type_relaxes_shr_bound_after_a_failure() {
    // PELT on: CPU 0 runs pid 0 with 1, 2 queued; CPU 1 runs 3 with 4 queued; every task new at
    // 0, runnable since: load_avg 1024 each (a new task starts at its full weight). At 100 ms
    // both CPUs are overloaded (util near 1024 > 1024/1.17): CPU 1 (busy, its group's only CPU)
    // balances: avg loads 2048 (local) and 3072, sd_avg 5120·1024/2048 = 2560 →
    // migrate_load, imbalance min(512·1024, 512·1024)/1024 = 512. A task's load 1024 >> 0 =
    // 1024 > 512: nothing moves, nr_balance_failed = 1; next pass 1024 >> 1 = 512 ≤ 512: pid 1
    // (the least recently run) moves.
    let s = one_node_2(5);
    let mut sc = s.scene();
    sc.with_pelt();
    for (pid, cpu) in [(0, 0), (1, 0), (2, 0), (3, 1), (4, 1)] {
        sc.put(pid, cpu, cpu, 0);
    }
    sc.at(100 * MS);
    let v = sc.view();
    assert_eq!(v.task_pelt(1).load_avg.round(), 1024.0);
    assert_eq!(v.cpu_pelt(0).load_avg.round(), 3072.0);
    assert!(v.cpu_pelt(1).util_avg > 1024.0 * 100.0 / 117.0);
    let mut p = Linux::new(&s.ctx(), Options::default());
    let a = p.balance(&v, 1, 0, BalanceKind::Periodic).unwrap();
    assert!(a.moves.is_empty(), "{a:?}");
    assert_eq!(a.active_from, None, "no active balance for migrate_load");
    // Busy interval: 2 ms × 16 − 1 jiffy = 31 ms later.
    sc.at(131 * MS);
    assert!(p.balance(&sc.view(), 1, 0, BalanceKind::Periodic).is_some());
    let mut p2 = Linux::new(&s.ctx(), Options::default());
    let _ = p2.balance(&sc.view(), 1, 0, BalanceKind::Periodic);
    sc.at(162 * MS);
    let a = p2.balance(&sc.view(), 1, 0, BalanceKind::Periodic).unwrap();
    assert_eq!(pulled(&a), vec![1]);
}

#[test]
fn pelt_in_a_scene_a_new_task_running_one_half_life() {
    // A new task on an idle CPU starts at util 512 (half the spare capacity) and load 1024;
    // after one half-life of running: util 512/2 + 1024/2 = 768, load stays 1024.
    let s = one_node_2(2);
    let mut sc = s.scene();
    sc.with_pelt();
    sc.put(0, 0, 0, 0);
    sc.at(HALF_LIFE_NS);
    let t = sc.view().task_pelt(0);
    assert!((t.util_avg - 768.0).abs() < 1e-6, "{t:?}");
    assert!((t.load_avg - 1024.0).abs() < 1e-6);
    let c = sc.view().cpu_pelt(0);
    assert!(
        (c.util_avg - 768.0).abs() < 1e-6,
        "the CPU sums its one task: {c:?}"
    );
    assert_eq!(sc.view().cpu_pelt(1).util_avg, 0.0);
}

#[test]
fn bad_options_are_refused_with_one_line() {
    for (spec, want) in [
        (
            "linux:slice-us=0",
            "linux option 'slice-us' must be an integer from 1 to 1000000, not '0'",
        ),
        (
            "linux:nr-migrate=x",
            "linux option 'nr-migrate' must be an integer from 1 to 1000000, not 'x'",
        ),
        (
            "linux:colour=red",
            "unknown linux option 'colour'; choose slice-us, nr-migrate, hz, nohz, ni_random, \
             numa_balancing or select",
        ),
        (
            "linux:hz=200",
            "linux option 'hz' must be one of 100, 250, 300 or 1000 (CONFIG_HZ's choices), not \
             '200'",
        ),
        (
            "linux:numa_balancing=yes",
            "linux option 'numa_balancing' must be on or off, not 'yes'",
        ),
    ] {
        let e = numasim_core::policy::validate("--policy", spec).unwrap_err();
        let text = e.to_string();
        assert!(text.contains(want), "{spec}: {text}");
        assert!(!text.contains('\n'));
    }
    numasim_core::policy::validate("--policy", "linux:slice-us=3000,nr-migrate=8").unwrap();
    numasim_core::policy::validate("--policy", "linux:numa_balancing=off").unwrap();
}

#[test]
fn the_slice_is_eevdfs_base_slice_scaled_by_the_cpu_count() {
    // 0.70 ms × (1 + ilog2(min(CPUs, 8))): 2 CPUs → 1.4 ms; 32 CPUs → 2.8 ms (6.12.32+).
    let s = one_node_2(1);
    assert_eq!(
        Linux::new(&s.ctx(), Options::default()).timeslice_ns(),
        Some(1_400_000)
    );
    let m1 = testutils::preset("mehta-m1");
    let d = Builder::Linux.build(&m1, &BuildOptions::default());
    let config = EngineConfig::default();
    let ctx = numasim_core::interface::PolicyContext {
        machine: &m1,
        domains: &d,
        config: &config,
    };
    assert_eq!(
        Linux::new(&ctx, Options::default()).timeslice_ns(),
        Some(2_800_000)
    );
}

#[test]
fn balancing_intervals_are_whole_jiffies_of_4_ms() {
    // get_sd_balance_interval at HZ = 250 on mehta-m1 (levels of 2, 8, 14, 20, 26 and 32 CPUs,
    // min_interval = the span weight in ms, busy_factor 16): idle msecs_to_jiffies(ms) (rounded
    // up: 14 ms → 4 jiffies, 26 ms → 7); busy msecs_to_jiffies(16 × ms) − 1. At HZ = 1000 a
    // jiffy is 1 ms.
    let m1 = testutils::preset("mehta-m1");
    let d = Builder::Linux.build(&m1, &BuildOptions::default());
    let config = EngineConfig::default();
    let ctx = numasim_core::interface::PolicyContext {
        machine: &m1,
        domains: &d,
        config: &config,
    };
    let p = Linux::new(&ctx, Options::default());
    assert_eq!(p.jiffy_ns(), 4 * MS);
    let idle: Vec<u64> = (0..6).map(|li| p.balance_interval(0, li, false)).collect();
    let busy: Vec<u64> = (0..6).map(|li| p.balance_interval(0, li, true)).collect();
    assert_eq!(idle, [1, 2, 4, 5, 7, 8]);
    assert_eq!(busy, [7, 31, 55, 79, 103, 127]);
    let o = Options {
        hz: 1000,
        ..Options::default()
    };
    let p = Linux::new(&ctx, o);
    assert_eq!(p.jiffy_ns(), MS);
    let idle: Vec<u64> = (0..6).map(|li| p.balance_interval(0, li, false)).collect();
    let busy: Vec<u64> = (0..6).map(|li| p.balance_interval(0, li, true)).collect();
    assert_eq!(idle, [2, 8, 14, 20, 26, 32]);
    assert_eq!(busy, [31, 127, 223, 319, 415, 511]);
}

#[test]
fn a_tick_balances_only_once_jiffies_reach_rq_next_balance() {
    // Two nodes of 2 CPUs (MC: 2 ms → 1 jiffy idle, 32 ms → 7 busy; NUMA: 4 ms → 1 idle,
    // 64 ms → 15 busy). CPU 0 runs a task, the others are idle. CPU 0's first softirq at
    // jiffy 1 (4 ms) visits both levels, neither due (last_balance 0, busy intervals 7 and
    // 15), and sets rq->next_balance to the earliest, 0 + 7 = jiffy 7. The CPU still ticks
    // every jiffy (its timer: for the NUMA tick, and to kick the idle load balancer), but the
    // softirq waits for jiffy 7 (28 ms); booted with nohz=off and without NUMA balancing its
    // timer is set at jiffy 7 itself.
    let m = testutils::machine(&testutils::two_level_table(2, 20), 2);
    let w = testutils::workload(Kind::Cpu, &[100]);
    let s = Setup::new(m, Builder::Linux, w);
    let mut sc = s.scene();
    sc.put(0, 0, 0, 0);
    let mut p = Linux::new(&s.ctx(), Options::default());
    assert_eq!(
        p.next_balance(0),
        0,
        "sched_init: rq->next_balance = jiffies"
    );
    sc.at(4 * MS);
    assert!(p.balance(&sc.view(), 0, 0, BalanceKind::Periodic).is_none());
    assert!(p.balance(&sc.view(), 0, 1, BalanceKind::Periodic).is_none());
    assert_eq!(p.next_balance(0), 7);
    assert_eq!(
        p.next_periodic_ns(&sc.view(), 0),
        Some(8 * MS),
        "the next tick"
    );
    let off = Options {
        numa_balancing: Some(false),
        nohz: false,
        ..Options::default()
    };
    let mut q = Linux::new(&s.ctx(), off);
    assert!(q.balance(&sc.view(), 0, 0, BalanceKind::Periodic).is_none());
    assert!(q.balance(&sc.view(), 0, 1, BalanceKind::Periodic).is_none());
    assert_eq!(q.next_periodic_ns(&sc.view(), 0), Some(28 * MS));
    // At jiffy 6 (24 ms) no softirq; at jiffy 7 MC runs (busy, nothing to pull: balanced, so
    // its interval doubles to 4 ms, 15 busy jiffies, due at 22), and the NUMA level, due at
    // 15, is not: rq->next_balance = min(22, 15) = 15.
    sc.at(24 * MS);
    assert!(p.balance(&sc.view(), 0, 0, BalanceKind::Periodic).is_none());
    sc.at(28 * MS);
    assert!(p.balance(&sc.view(), 0, 0, BalanceKind::Periodic).is_some());
    assert!(p.balance(&sc.view(), 0, 1, BalanceKind::Periodic).is_none());
    assert_eq!(p.balance_interval(0, 0, true), 15);
    assert_eq!(p.next_balance(0), 15);
}

/// `linux`, checking at every call that each CPU's PELT sums are the sums of its attached
/// tasks' signals, and that no task is attached anywhere but where the View says.
struct Checked {
    inner: Linux,
    /// Processes in the workload.
    n: usize,
    checks: usize,
}

impl Checked {
    fn check(&mut self, v: &View<'_>) {
        let n = v.machine.cpus();
        let mut sums = vec![(0.0f64, 0.0f64, 0.0f64); n];
        for pid in 0..self.n {
            let info = v.proc(pid);
            if let Some(c) = v.pelt_cpu(pid) {
                assert_eq!(c, info.cpu, "pid {pid} attached to its CPU");
                let t = v.task_pelt(pid);
                sums[c].0 += t.load_avg;
                sums[c].1 += t.runnable_avg;
                sums[c].2 += t.util_avg;
            }
        }
        for (c, s) in sums.iter().enumerate() {
            let p = v.cpu_pelt(c);
            for (got, want) in [(p.load_avg, s.0), (p.runnable_avg, s.1), (p.util_avg, s.2)] {
                assert!(
                    (got - want).abs() < 1e-6 * (1.0 + want),
                    "cpu {c} at {}: {got} vs {want}",
                    v.now
                );
            }
        }
        self.checks += 1;
    }
}

impl Policy for Checked {
    fn name(&self) -> &'static str {
        "checked-linux"
    }
    fn timeslice_ns(&self) -> Option<u64> {
        self.inner.timeslice_ns()
    }
    fn tracks_pelt(&self) -> bool {
        true
    }
    fn place_new(&mut self, v: &View<'_>, pid: Pid, spawn: CpuId) -> Option<CpuId> {
        self.check(v);
        self.inner.place_new(v, pid, spawn)
    }
    fn place_wakeup(&mut self, v: &View<'_>, pid: Pid, prev: CpuId) -> Option<CpuId> {
        self.check(v);
        self.inner.place_wakeup(v, pid, prev)
    }
    fn next_periodic_ns(&self, v: &View<'_>, cpu: CpuId) -> Option<u64> {
        self.inner.next_periodic_ns(v, cpu)
    }
    fn balance(
        &mut self,
        v: &View<'_>,
        cpu: CpuId,
        level: usize,
        kind: BalanceKind,
    ) -> Option<Attempt> {
        self.check(v);
        self.inner.balance(v, cpu, level, kind)
    }
    fn active_balance(&mut self, v: &View<'_>, busiest: CpuId, target: CpuId) -> Option<Attempt> {
        self.check(v);
        self.inner.active_balance(v, busiest, target)
    }
    fn active_balance_latency_ns(&self) -> Option<u64> {
        self.inner.active_balance_latency_ns()
    }
    fn slice_tick_ns(&self) -> Option<u64> {
        self.inner.slice_tick_ns()
    }
    fn tick(&mut self, v: &View<'_>, cpu: CpuId) -> Option<Attempt> {
        self.inner.tick(v, cpu)
    }
    fn kick(&mut self, v: &View<'_>, cpu: CpuId) -> Option<(CpuId, u64)> {
        self.inner.kick(v, cpu)
    }
    fn next_kicked(&mut self, v: &View<'_>, cpu: CpuId) -> Option<CpuId> {
        self.check(v);
        self.inner.next_kicked(v, cpu)
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    #[test]
    fn pelt_sums_are_the_sums_of_attached_tasks(seed in 0u64..1000, n in 5usize..30, nodes in 1usize..4) {
        let m = testutils::machine(&testutils::two_level_table(nodes, 20), 2);
        let d = Builder::Linux.build(&m, &BuildOptions::default());
        let w = WorkloadSpec::parse("w", &format!("n={n},kind=mixed,exec=20-80,arrival=random"))
            .unwrap()
            .generate("w", seed, m.node_cpu_lists())
            .unwrap();
        let config = EngineConfig::default();
        let ctx = numasim_core::interface::PolicyContext { machine: &m, domains: &d, config: &config };
        let mut p = Checked { inner: Linux::new(&ctx, Options::default()), n, checks: 0 };
        let r = numasim_core::engine::run(&m, &d, &w, &mut p, &config).unwrap();
        prop_assert_eq!(r.processes.len(), n);
        prop_assert!(p.checks > 0);
    }
}

#[test]
fn a_run_on_mehta_m1_completes_and_balances() {
    let m = testutils::preset("mehta-m1");
    let d = Builder::Linux.build(&m, &BuildOptions::default());
    let w = WorkloadSpec::parse("w", "n=300,kind=mixed,exec=50-400,arrival=random")
        .unwrap()
        .generate("w", 1, m.node_cpu_lists())
        .unwrap();
    let r = numasim_core::run_policy(&m, &d, &w, "linux", &EngineConfig::default()).unwrap();
    assert_eq!(r.processes.len(), 300);
    let kinds: std::collections::BTreeMap<_, _> =
        r.summary.migrations_by_kind.iter().cloned().collect();
    assert!(
        kinds["pull"] > 0 && kinds["idle"] > 0 && kinds["placement"] > 0,
        "{kinds:?}"
    );
    assert!(r.summary.balance.newidle.iter().sum::<u64>() > 0);
}

#[test]
fn active_balance_pushes_a_lone_running_task_after_cache_nice_tries_plus_two_failures() {
    // Two nodes of 4 CPUs at distance 20; node 0 runs four tasks, one per CPU; node 1 is idle.
    // CPU 4 balancing the NUMA level (level 1; idle, interval 8 ms = 2 jiffies of 4 ms, HZ =
    // 250): both groups have spare
    // (no PELT history), prefer_sibling (the MC level below has SD_PREFER_SIBLING) and
    // sibling_imbalance 4 − 0 = 4 > 1 force it; adjust_numa_imbalance(4, 0 + 1, 1) keeps 4
    // (> NUMA_IMBALANCE_MIN), halved: migrate_task 2. The busiest CPU (CPU 0, most tasks, the
    // first of equals) has one task: nothing to detach, nr_balance_failed++. After more than
    // cache_nice_tries (2, NUMA) + 2 = 4 failures, the fifth pass asks for active balancing,
    // which pushes CPU 0's running task to CPU 4 and resets the failures.
    let m = testutils::machine(&testutils::two_level_table(2, 20), 4);
    let w = testutils::workload(Kind::Cpu, &[100; 4]);
    let s = Setup::new(m, Builder::Linux, w);
    let mut sc = s.scene();
    for pid in 0..4 {
        sc.put(pid, pid, pid, 0);
    }
    let mut p = Linux::new(&s.ctx(), Options::default());
    for pass in 1..=5u64 {
        sc.at(pass * 8 * MS);
        let a = p
            .balance(&sc.view(), 4, 1, BalanceKind::Periodic)
            .expect("due every 8 ms");
        assert!(a.moves.is_empty(), "pass {pass}");
        let want = (pass == 5).then_some(0);
        assert_eq!(a.active_from, want, "pass {pass}");
    }
    let a = p.active_balance(&sc.view(), 0, 4).expect("a task to push");
    assert_eq!(pulled(&a), vec![0]);
    let (got, rejected) = sc.apply(4, 1, a);
    assert_eq!((got, rejected), (vec![4], 0));
    assert_eq!(sc.runqueue(4), vec![0]);
    // The fifth pass (jiffy 10) left rq->next_balance at its idle interval: jiffy 12 (48 ms).
    // CPU 4 is busy now: its interval is msecs_to_jiffies(8 ms × busy_factor 16) − 1 = 31
    // jiffies (124 ms), so at jiffy 12 the softirq runs but the level is not due, and
    // rq->next_balance becomes jiffy 10 + 31 = 41 (164 ms): no balancing at 160 ms; at 164 ms
    // a busy puller finds no overloaded group: balanced, nothing moves, no active balance.
    assert_eq!(p.next_balance(4), 12);
    sc.at(48 * MS);
    assert!(p.balance(&sc.view(), 4, 1, BalanceKind::Periodic).is_none());
    assert_eq!(p.next_balance(4), 41);
    sc.at(160 * MS);
    assert!(p.balance(&sc.view(), 4, 1, BalanceKind::Periodic).is_none());
    sc.at(164 * MS);
    let a = p
        .balance(&sc.view(), 4, 1, BalanceKind::Periodic)
        .expect("due");
    assert!(a.moves.is_empty() && a.active_from.is_none());
}

#[test]
fn one_stopper_per_busiest_cpu_until_it_has_run() {
    // The scene above: CPU 4's fifth failing pass at the NUMA level (jiffy 10) kicks CPU 0's
    // stopper (rq->active_balance set). Before it runs (the engine runs it 5 µs later), CPU 4's
    // next pass (jiffy 12: the interval back at its minimum) fails again — nr_balance_failed 6
    // — but kicks nothing: the flag is set. The stopper then pushes CPU 0's task, counts it at
    // CPU 4's lowest level spanning CPU 0 (level 1) and clears the flag; run again, it finds
    // the flag clear and does nothing.
    let m = testutils::machine(&testutils::two_level_table(2, 20), 4);
    let w = testutils::workload(Kind::Cpu, &[100; 4]);
    let s = Setup::new(m, Builder::Linux, w);
    let mut sc = s.scene();
    for pid in 0..4 {
        sc.put(pid, pid, pid, 0);
    }
    let mut p = Linux::new(&s.ctx(), Options::default());
    assert_eq!(p.active_balance_latency_ns(), Some(5_000));
    for pass in 1..=6u64 {
        sc.at(pass * 8 * MS);
        let a = p
            .balance(&sc.view(), 4, 1, BalanceKind::Periodic)
            .expect("due every 8 ms");
        assert!(a.moves.is_empty(), "pass {pass}");
        assert_eq!(a.active_from, (pass == 5).then_some(0), "pass {pass}");
    }
    // The passes at level 1 (the top) recomputed rd->overloaded: no CPU has two tasks. The
    // stopper's enqueue beside CPU 0's one task makes two: the flag is set (add_nr_running).
    assert!(!p.rd_overloaded(&sc.view()));
    let a = p
        .active_balance(&sc.view(), 0, 4)
        .expect("the kicked stopper");
    assert!(p.rd_overloaded(&sc.view()));
    assert_eq!(pulled(&a), vec![0]);
    assert_eq!(a.counted_at, Some(1));
    assert!(p.active_balance(&sc.view(), 0, 4).is_none(), "flag cleared");
    // A stopper that finds no CFS task left (busiest_rq->nr_running <= 1: itself) does nothing
    // and clears the flag. CPU 4 runs task 0 now, so CPU 5 balances for node 1 (the first idle
    // CPU of its balance mask): node 0 (3 tasks, 1 idle) against node 1 (1 task, 3 idle),
    // prefer_sibling with sibling_imbalance 2 → migrate_task (2 − 0 after
    // adjust_numa_imbalance: local runs 1 + 1 > imb_numa_nr 1) >> 1 = 1 from CPU 1 (the first
    // of the CPUs with most tasks); nothing detachable, so its fifth pass (jiffies 14, 16, …,
    // 22) kicks CPU 1's stopper. CPU 1's task leaves before the stopper runs.
    let (got, _) = sc.apply(4, 1, a);
    assert_eq!(got, vec![4]);
    for pass in 7..=11u64 {
        sc.at(pass * 8 * MS);
        let a = p
            .balance(&sc.view(), 5, 1, BalanceKind::Periodic)
            .expect("due every 8 ms");
        assert!(a.moves.is_empty(), "pass {pass}");
        assert_eq!(a.active_from, (pass == 11).then_some(1), "pass {pass}");
    }
    let away = |pid, from, to| Attempt {
        moves: vec![numasim_core::interface::Move {
            pid,
            from,
            to,
            kind: numasim_core::interface::MigrationKind::Pull,
        }],
        ..Attempt::default()
    };
    sc.apply(6, 1, away(1, 1, 6));
    assert!(
        p.active_balance(&sc.view(), 1, 5).is_none(),
        "nothing to move"
    );
    // Its task back, a stopper run now would find the flag clear: nothing.
    sc.apply(1, 1, away(1, 6, 1));
    assert!(p.active_balance(&sc.view(), 1, 5).is_none(), "flag cleared");
}

#[test]
fn rd_overloaded_is_sticky_until_a_pass_at_the_top_level() {
    // One node of 3 CPUs (one MC level: the root domain). Task 1 joins task 0 on CPU 0 (a
    // runqueue goes from one task to two: add_nr_running sets rd->overloaded) and is pulled to
    // CPU 1: no CPU has two tasks now, but the flag stays. So CPU 2's newly-idle balancing
    // passes the gate and runs its pass (nothing to pull); that pass, at the root, recomputes
    // the flag from the runqueues: cleared, and CPU 2's next newly-idle balancing is gated.
    let m = testutils::machine(&testutils::two_level_table(1, 20), 3);
    let w = testutils::workload(Kind::Cpu, &[100; 2]);
    let s = Setup::new(m, Builder::Linux, w);
    let mut sc = s.scene();
    let mut p = Linux::new(&s.ctx(), Options::default());
    sc.put(0, 0, 0, 0);
    assert!(!p.rd_overloaded(&sc.view()));
    sc.put(1, 0, 0, 0);
    let mv = Attempt {
        moves: vec![numasim_core::interface::Move {
            pid: 1,
            from: 0,
            to: 1,
            kind: numasim_core::interface::MigrationKind::Pull,
        }],
        ..Attempt::default()
    };
    sc.apply(1, 0, mv);
    assert_eq!(sc.view().overload_events(), 1);
    assert!(sc.view().none_overloaded());
    assert!(p.rd_overloaded(&sc.view()));
    sc.at(10 * MS);
    let a = p
        .balance(&sc.view(), 2, 0, BalanceKind::NewIdle)
        .expect("the gate is open");
    assert!(a.moves.is_empty());
    assert!(!p.rd_overloaded(&sc.view()));
    sc.at(20 * MS);
    assert!(p.balance(&sc.view(), 2, 0, BalanceKind::NewIdle).is_none());
}

/// One periodic event of `cpu` as the engine runs it: the tick, the kick, then every level
/// (attempts applied); the kick it sends.
fn tick_event(
    p: &mut Linux,
    sc: &mut numasim_core::engine::scene::Scene<'_>,
    cpu: CpuId,
) -> Option<(CpuId, u64)> {
    assert!(p.tick(&sc.view(), cpu).is_none());
    let kick = p.kick(&sc.view(), cpu);
    let levels = sc.view().domains.cpus[cpu].len();
    for li in 0..levels {
        if let Some(a) = p.balance(&sc.view(), cpu, li, BalanceKind::Periodic) {
            sc.apply(cpu, li, a);
        }
    }
    kick
}

#[test]
fn idle_cpus_stop_their_tick_and_the_idle_load_balancer_balances_them() {
    // Two nodes of 2 CPUs (MC 1 jiffy idle; NUMA 4 ms = 1 jiffy idle). Tasks 0 and 1 on
    // CPU 0, task 1 queued and cache-hot until 4.4 ms (it last ran at 3.9 ms); CPUs 1–3 idle.
    let m = testutils::machine(&testutils::two_level_table(2, 20), 2);
    let w = testutils::workload(Kind::Cpu, &[100; 2]);
    let s = Setup::new(m, Builder::Linux, w);
    let mut sc = s.scene();
    sc.put(0, 0, 0, 0);
    sc.put(1, 0, 0, 3_900_000);
    let off = Options {
        numa_balancing: Some(false),
        ..Options::default()
    };
    let mut p = Linux::new(&s.ctx(), off);
    for cpu in 1..4 {
        assert_eq!(p.next_periodic_ns(&sc.view(), cpu), Some(4 * MS));
    }
    // Jiffy 1 (4 ms): each idle CPU's first tick in the idle loop balances it (its
    // rq->next_balance, 0, is due; CPU 1 leaves the hot task) and stops its tick
    // (nohz_balance_enter_idle): no timer after it. CPU 1's NUMA pass holds
    // sched_balance_running for its work; CPUs 2 and 3, ticking at the same instant, reach
    // their NUMA level within it and skip it, so their rq->next_balance stays due (jiffy 1);
    // CPU 1's is 1 + 1.
    sc.at(4 * MS);
    for cpu in 1..4 {
        assert_eq!(
            tick_event(&mut p, &mut sc, cpu),
            None,
            "an idle tick never kicks"
        );
        assert!(p.nohz_tick_stopped(cpu), "CPU {cpu}");
        assert_eq!(p.next_balance(cpu), if cpu == 1 { 2 } else { 1 });
        assert_eq!(p.next_periodic_ns(&sc.view(), cpu), None);
    }
    // CPU 0's tick, busy with two tasks, jiffies 1 >= nohz.next_balance 0: a BALANCE kick
    // (and NEXT: CPUs entered nohz). nohz.next_balance = 1 + 1; the ILB is the lowest idle CPU
    // of the mask other than CPU 0: CPU 1, reached by an IPI 2 µs later.
    assert_eq!(tick_event(&mut p, &mut sc, 0), Some((1, 4 * MS + 2_000)));
    assert_eq!(p.nohz_next_balance(), 2);
    assert_eq!(
        p.next_periodic_ns(&sc.view(), 0),
        Some(8 * MS),
        "busy: every tick"
    );
    // The ILB run, from CPU 2 round to CPU 1 itself: CPUs 2 and 3 are due and balanced for
    // themselves at CPU_IDLE (their NUMA level: the ILB, CPU 1, holds sched_balance_running
    // itself), CPU 1 is not due; nohz.next_balance becomes their earliest rq->next_balance, 2.
    sc.at(4 * MS + 2_000);
    let run = |p: &mut Linux, sc: &mut numasim_core::engine::scene::Scene<'_>| {
        let (mut visited, mut pulled_by) = (Vec::new(), Vec::new());
        while let Some(x) = p.next_kicked(&sc.view(), 1) {
            visited.push(x);
            for li in 0..2 {
                if let Some(a) = p.balance(&sc.view(), x, li, BalanceKind::Periodic) {
                    if !a.moves.is_empty() {
                        pulled_by.push((x, li));
                    }
                    sc.apply(x, li, a);
                }
            }
        }
        (visited, pulled_by)
    };
    assert_eq!(run(&mut p, &mut sc), (vec![2, 3], vec![]));
    assert_eq!((p.next_balance(2), p.next_balance(3)), (2, 2));
    assert_eq!(p.nohz_next_balance(), 2);
    // Jiffy 2: CPU 0 kicks again; CPUs 2, 3 and 1 are due, in that order (ILB + 1, wrapping,
    // the ILB last). CPU 1, last, pulls task 1 (cold now) at its MC level.
    sc.at(8 * MS);
    assert_eq!(tick_event(&mut p, &mut sc, 0), Some((1, 8 * MS + 2_000)));
    sc.at(8 * MS + 2_000);
    assert_eq!(run(&mut p, &mut sc), (vec![2, 3, 1], vec![(1, 0)]));
    assert_eq!(sc.runqueue(1), vec![1]);
    // CPUs 2 and 3 are due again at 2 + 1 (MC's idle interval); CPU 1, busy after its pull,
    // at 2 + 7 (MC's busy interval): nohz.next_balance is the earliest, 3.
    assert_eq!(p.next_balance(2), 3);
    assert_eq!(p.next_balance(1), 9);
    assert_eq!(p.nohz_next_balance(), 3);
    // CPU 1's first busy tick takes it out of the mask (nohz_balance_exit_idle). Node 0 then
    // has two CPUs whose tick runs (nr_busy_cpus 2 > 1): CPU 1 kicks CPU 2, the lowest idle
    // CPU of the mask.
    sc.at(12 * MS);
    assert_eq!(tick_event(&mut p, &mut sc, 1), Some((2, 12 * MS + 2_000)));
    assert!(!p.nohz_tick_stopped(1));
    // Booted with nohz=off, no CPU ever stops its tick or kicks.
    let mut q = Linux::new(&s.ctx(), Options { nohz: false, ..off });
    sc.at(16 * MS);
    assert_eq!(tick_event(&mut q, &mut sc, 3), None);
    assert!(!q.nohz_tick_stopped(3));
    assert_eq!(tick_event(&mut q, &mut sc, 0), None);
}

#[test]
fn booted_with_nohz_off_a_busy_cpu_s_timer_waits_for_its_task_s_numa_work() {
    // Two nodes of 2 CPUs, CPU 0 running task 0 since 0 ns, every CPU keeping its tick
    // (nohz=off). Its first tick at jiffy 1 (4 ms) meets the task for NUMA balancing and
    // sets rq->next_balance to jiffy 7 (as above). The task has nothing due before it has run
    // 1 s, so the CPU's timer is its balancing's, jiffy 7 (28 ms), as with NUMA balancing
    // off, not the next jiffy; it depends on the running task, so the engine asks again when
    // another runs (timer_follows_running). Under nohz a busy CPU ticks every jiffy anyway.
    let m = testutils::machine(&testutils::two_level_table(2, 20), 2);
    let w = testutils::workload(Kind::Cpu, &[100]);
    let s = Setup::new(m, Builder::Linux, w);
    let mut sc = s.scene();
    sc.put(0, 0, 0, 0);
    let on = Options {
        nohz: false,
        ..Options::default()
    };
    let off = Options {
        numa_balancing: Some(false),
        ..on
    };
    let mut p = Linux::new(&s.ctx(), on);
    let mut q = Linux::new(&s.ctx(), off);
    assert!(p.timer_follows_running());
    assert!(!q.timer_follows_running());
    assert!(!Linux::new(&s.ctx(), Options::default()).timer_follows_running());
    sc.at(4 * MS);
    assert_eq!(tick_event(&mut p, &mut sc, 0), None);
    assert_eq!(tick_event(&mut q, &mut sc, 0), None);
    assert_eq!(p.next_balance(0), 7);
    assert_eq!(p.next_periodic_ns(&sc.view(), 0), Some(28 * MS));
    assert_eq!(q.next_periodic_ns(&sc.view(), 0), Some(28 * MS));
}

#[test]
fn one_numa_level_pass_at_a_time_machine_wide() {
    // Two nodes of 2 CPUs; CPUs 1 and 3 run a task each, CPUs 0 and 2 idle, booted with
    // nohz=off (both balance themselves at their ticks). At jiffy 1 (4 ms) both are due at MC
    // and at the NUMA level. CPU 0's MC pass examines 2 runqueues (2 µs), so its NUMA pass
    // starts at 4.002 ms and holds sched_balance_running for its charged work: 4 runqueues,
    // 4 µs, until 4.006 ms. CPU 2, at the same instant, reaches its NUMA level at 4.002 ms as
    // well: held, skipped — no pass, last_balance kept, so its rq->next_balance (1) stays
    // due and its next tick (jiffy 2) balances it.
    let m = testutils::machine(&testutils::two_level_table(2, 20), 2);
    let w = testutils::workload(Kind::Cpu, &[100; 2]);
    let s = Setup::new(m, Builder::Linux, w);
    let mut sc = s.scene();
    sc.put(0, 1, 1, 0);
    sc.put(1, 3, 3, 0);
    let o = Options {
        numa_balancing: Some(false),
        nohz: false,
        ..Options::default()
    };
    let mut p = Linux::new(&s.ctx(), o);
    sc.at(4 * MS);
    let mc0 = p
        .balance(&sc.view(), 0, 0, BalanceKind::Periodic)
        .expect("MC due");
    assert_eq!(mc0.rqs_examined, 2);
    let numa0 = p
        .balance(&sc.view(), 0, 1, BalanceKind::Periodic)
        .expect("NUMA due");
    assert_eq!(numa0.rqs_examined, 4);
    assert!(p.balance(&sc.view(), 2, 0, BalanceKind::Periodic).is_some());
    assert!(
        p.balance(&sc.view(), 2, 1, BalanceKind::Periodic).is_none(),
        "held by CPU 0"
    );
    assert_eq!(p.next_balance(2), 1);
    assert_eq!(p.next_balance(0), 2);
    sc.at(8 * MS);
    assert!(p.balance(&sc.view(), 2, 0, BalanceKind::Periodic).is_some());
    assert!(p.balance(&sc.view(), 2, 1, BalanceKind::Periodic).is_some());
}

#[test]
fn ni_random_runs_newly_idle_balancing_as_often_as_it_succeeds() {
    // One node of 2 CPUs; CPU 0 runs task 0 with task 1 queued, hot (it ran at 0 and every
    // try is within 0.5 ms: a nanosecond apart), so a newly-idle pass of CPU 1 finds it but
    // pulls nothing. newidle_ratio starts
    // at 512: a pass runs when the 1k-sided dice shows at most 513 (about half the time);
    // every try, run or skipped, counts a call, and at the 1024th call (the 512th here: the
    // count starts at 512) newidle_ratio becomes the successes (256 at start, none since) and
    // both counts halve — so after 512 failures the ratio is 256, after 512 more 128, …,
    // 0 after 5 120, when a pass runs only on a dice of 0 or 1 (2 in 1024).
    let s = one_node_2(2);
    let mut sc = s.scene();
    sc.put(0, 0, 0, 0);
    sc.put(1, 0, 0, 0);
    let mut p = Linux::new(&s.ctx(), Options::default());
    let mut runs = 0;
    let mut tries = 0;
    let mut try_once = |p: &mut Linux, sc: &mut numasim_core::engine::scene::Scene<'_>| {
        tries += 1;
        sc.at(tries);
        let a = p.balance(&sc.view(), 1, 0, BalanceKind::NewIdle);
        if let Some(a) = a {
            assert!(a.moves.is_empty());
            1
        } else {
            0
        }
    };
    for _ in 0..511 {
        runs += try_once(&mut p, &mut sc);
    }
    assert_eq!(p.newidle_ratio(1, 0), 512);
    runs += try_once(&mut p, &mut sc);
    assert_eq!(p.newidle_ratio(1, 0), 256);
    assert!((200..=312).contains(&runs), "about half of 512 ran: {runs}");
    for _ in 0..4095 {
        try_once(&mut p, &mut sc);
    }
    assert_eq!(p.newidle_ratio(1, 0), 2);
    for _ in 0..512 {
        try_once(&mut p, &mut sc);
    }
    assert_eq!(p.newidle_ratio(1, 0), 1);
    try_once(&mut p, &mut sc);
    assert_eq!(p.newidle_ratio(1, 0), 0);
    let late: u32 = (0..2048).map(|_| try_once(&mut p, &mut sc)).sum();
    assert!(late <= 12, "about 2 in 1024 run: {late} of 2048");
    // With NI_RANDOM off every try runs.
    let mut q = Linux::new(&s.ctx(), no_dice());
    sc.at(100_000);
    assert!(q.balance(&sc.view(), 1, 0, BalanceKind::NewIdle).is_some());
}

#[test]
fn prefer_sibling_is_the_busiest_group_s_own_flag() {
    // mehta-m1's `linux` domains seen from CPU 0: a group holds the flags of the domain it was
    // built from, so node-sized groups (the MC level's span) prefer siblings and groups built
    // from NUMA levels do not; single-CPU groups (MC's) have no flags (their SMT/cluster
    // domain was degenerate and destroyed).
    let m1 = testutils::preset("mehta-m1");
    let w = testutils::workload(Kind::Cpu, &[100; 9]);
    let s = Setup::new(m1, Builder::Linux, w);
    let p = Linux::new(&s.ctx(), Options::default());
    let sc = s.scene();
    let v = sc.view();
    let flags: Vec<Vec<(usize, bool)>> = (0..6)
        .map(|li| {
            let level = &v.domains.cpus[0][li];
            (0..level.groups.len())
                .map(|gi| {
                    let w = level.groups[gi].weight;
                    (w, p.group_prefers_sibling(&v, 0, li, gi))
                })
                .collect()
        })
        .collect();
    assert_eq!(
        flags,
        vec![
            vec![(1, false), (1, false)],
            vec![(2, true), (2, true), (2, true), (2, true)],
            vec![(8, false), (2, true), (2, true), (2, true)],
            vec![(14, false), (12, false)],
            vec![(20, false), (2, true), (2, true), (8, false)],
            vec![(26, false), (26, false), (26, false)],
        ]
    );
    drop(sc);
    // CPU 0, idle, balancing NUMA2 (14 CPUs: its 8-CPU NUMA1 span and three nodes): three
    // tasks in its local group, six on one remote node (5 on its first CPU, 1 on the other),
    // no PELT (every group has spare). The busiest group is that node, a 2-CPU group built
    // from the MC level: prefer_sibling. sibling_imbalance = (2·(8·6 − 2·3) + 8 + 2) / (8 + 2)
    // = 9 > 1 forces the balance, and migrate_task is 9 (adjust_numa_imbalance keeps it: the
    // destination would run 4 > imb_numa_nr 1 tasks) >> 1 = 4: four tasks pulled. (With the
    // flag of CPU 0's level below, NUMA1's, it would be the idle-CPU difference 5 >> 1 = 2.)
    let mut sc = s.scene();
    let level = &s.d.cpus[0][2];
    let node = level
        .groups
        .iter()
        .find(|g| !g.local && g.weight == 2)
        .unwrap();
    let (a, b) = {
        let mut it = node.span.iter();
        (it.next().unwrap(), it.next().unwrap())
    };
    let local: Vec<usize> = level.groups[0]
        .span
        .iter()
        .filter(|&c| c != 0)
        .take(3)
        .collect();
    for (pid, &c) in local.iter().enumerate() {
        sc.put(pid, c, c, 0);
    }
    for pid in 3..8 {
        sc.put(pid, a, a, 0);
    }
    sc.put(8, b, b, 0);
    sc.at(100 * MS);
    let mut p = Linux::new(&s.ctx(), Options::default());
    let got = p
        .balance(&sc.view(), 0, 2, BalanceKind::Periodic)
        .expect("due");
    assert_eq!(got.moves.len(), 4, "{got:?}");
    assert!(got.moves.iter().all(|m| m.from == a && m.to == 0));
}

#[test]
fn wake_up_goes_to_prev_if_idle_else_an_idle_cpu_of_its_node_else_prev() {
    // Two nodes of 2 CPUs. The waker is the previous CPU (wake=previous): select_idle_sibling
    // keeps it when idle, else takes an idle CPU of the same LLC (node), else stays, even with
    // node 1 idle (wake-ups do not cross the LLC; periodic balancing will).
    let m = testutils::machine(&testutils::two_level_table(2, 20), 2);
    let w = testutils::workload(Kind::Io, &[100; 4]);
    let s = Setup::new(m, Builder::Linux, w);
    let mut sc = s.scene();
    let mut p = Linux::new(&s.ctx(), Options::default());
    assert_eq!(p.place_wakeup(&sc.view(), 0, 0), Some(0));
    sc.put(1, 0, 0, 0);
    assert_eq!(p.place_wakeup(&sc.view(), 0, 0), Some(1));
    sc.put(2, 1, 1, 0);
    assert_eq!(p.place_wakeup(&sc.view(), 0, 0), Some(0));
}

#[test]
fn avg_idle_follows_idle_durations_and_gates_newly_idle_balancing() {
    // CPU 1 goes newly idle at 10 ms with nothing to pull (no CPU has two tasks): idle_stamp
    // 10 ms. A task wakes there 0.1 ms later: avg_idle = 1 ms + (0.1 ms − 1 ms) / 8 = 887.5 µs.
    let s = one_node_2(4);
    let mut sc = s.scene();
    sc.put(0, 0, 0, 0);
    sc.at(10 * MS);
    let mut p = Linux::new(&s.ctx(), no_dice());
    assert_eq!(p.avg_idle_ns(1), 1_000_000, "start: 2 × migration cost");
    assert!(p.balance(&sc.view(), 1, 0, BalanceKind::NewIdle).is_none());
    sc.at(10 * MS + 100_000);
    assert_eq!(p.place_wakeup(&sc.view(), 3, 1), Some(1));
    assert_eq!(p.avg_idle_ns(1), 887_500);

    // With a runqueue costing 1 ms to examine, one newly-idle pass costs 4 runqueues (two groups,
    // the busiest group again, one lock) = 4 ms + 1 task × 0.2 µs + 5 µs per migration: more
    // than avg_idle (1 ms), so the next newly-idle pass is skipped; at the default costs it runs.
    let mut costly = one_node_2(4);
    costly.config.cost_per_rq_ns = 1_000_000;
    for (setup, runs_again) in [(&costly, false), (&s, true)] {
        let mut sc = setup.scene();
        for pid in 0..3 {
            sc.put(pid, 0, 0, 0);
        }
        sc.at(10 * MS);
        let mut p = Linux::new(&setup.ctx(), no_dice());
        let a = p
            .balance(&sc.view(), 1, 0, BalanceKind::NewIdle)
            .expect("runs");
        assert_eq!(pulled(&a), vec![1]);
        sc.at(20 * MS);
        let again = p.balance(&sc.view(), 1, 0, BalanceKind::NewIdle);
        assert_eq!(again.is_some(), runs_again);
    }
}

// ---- Capacity (asymmetric machines: speed cores) ----

/// One node of `speeds.len()` CPUs with these speeds (`linux` domains: one MC level, groups of
/// one CPU), `n` processes.
fn one_node_speeds(speeds: Vec<f64>, n: usize) -> Setup {
    let cpus = speeds.len();
    let m = testutils::machine_with_speeds(&testutils::two_level_table(1, 20), cpus, speeds);
    let w = testutils::workload(Kind::Cpu, &vec![100; n]);
    Setup::new(m, Builder::Linux, w)
}

#[test]
fn capacities_are_speed_scaled_so_the_fastest_cpu_is_1024() {
    use numasim_core::policy::linux::{capacity_greater, cpu_capacities, fits_capacity};
    // Speeds 2.0 / 1.0: 1024 × 2 / 2 = 1024 and 1024 × 1 / 2 = 512; the MC level spans both
    // capacities: SD_ASYM_CPUCAPACITY.
    let s = one_node_speeds(vec![2.0, 2.0, 1.0, 1.0], 1);
    let p = Linux::new(&s.ctx(), Options::default());
    assert_eq!(
        (0..4).map(|c| p.capacity_of(c)).collect::<Vec<_>>(),
        vec![1024, 1024, 512, 512]
    );
    assert!(p.asym_level(0, 0));
    // One speed (whatever it is): 1024 everywhere, no asymmetry.
    let s = one_node_speeds(vec![1.0; 4], 1);
    let p = Linux::new(&s.ctx(), Options::default());
    assert_eq!(
        (0..4).map(|c| p.capacity_of(c)).collect::<Vec<_>>(),
        vec![1024; 4]
    );
    assert!(!p.asym_level(0, 0));
    // amc1: the first half of each node's CPUs at 2.0.
    let m = testutils::preset("amc1");
    let caps = cpu_capacities(&m);
    for (c, &cap) in caps.iter().enumerate() {
        let want = if m.speed(c) == 2.0 { 1024 } else { 512 };
        assert_eq!(cap, want, "CPU {c}");
    }
    // fits_capacity(util, 512): 409 × 1280 = 523 520 < 524 288; 410 × 1280 = 524 800 is not.
    assert!(fits_capacity(409, 512) && !fits_capacity(410, 512));
    assert!(fits_capacity(819, 1024) && !fits_capacity(820, 1024));
    // capacity_greater: 1024 × 1024 > 512 × 1078; 1024 vs 1000: 1 048 576 > 1 078 000 fails.
    assert!(capacity_greater(1024, 512) && !capacity_greater(1024, 1000));
}

#[test]
fn group_classification_with_unequal_capacities() {
    // Two CPUs, 3 tasks, util 1400, runnable 1500, imbalance_pct 117.
    // Capacities 1024 + 1024: 2048 × 100 < 1400 × 117 = 163 800? no; 2048 × 117 = 239 616 <
    // 150 000? no → not overloaded; has capacity: 204 800 > 163 800 → has spare.
    // Capacities 1024 + 512 = 1536: 153 600 < 163 800 → overloaded.
    let g = |cap: u64| SgStats {
        group_capacity: cap,
        group_weight: 2,
        sum_nr_running: 3,
        group_util: 1400,
        group_runnable: 1500,
        ..SgStats::default()
    };
    assert_eq!(group_classify(117, &g(2048)), GroupType::HasSpare);
    assert_eq!(group_classify(117, &g(1536)), GroupType::Overloaded);
    // Two tasks on two CPUs of 512 + 512 with util 900: nr 2 ≥ weight 2, 1024 × 100 = 102 400 >
    // 900 × 117 = 105 300? no → fully busy; the same sums over 2048 have spare.
    let h = |cap: u64| SgStats {
        group_capacity: cap,
        group_weight: 2,
        sum_nr_running: 2,
        group_util: 900,
        group_runnable: 900,
        ..SgStats::default()
    };
    assert_eq!(group_classify(117, &h(1024)), GroupType::FullyBusy);
    assert_eq!(group_classify(117, &h(2048)), GroupType::HasSpare);
    // A misfit load makes the group misfit, below overloaded, above fully busy.
    let mut m = h(1024);
    m.group_misfit_task_load = 1024;
    assert_eq!(group_classify(117, &m), GroupType::MisfitTask);
    let mut o = g(1536);
    o.group_misfit_task_load = 1024;
    assert_eq!(group_classify(117, &o), GroupType::Overloaded);
}

#[test]
fn pick_busiest_at_asym_levels_orders_misfits_and_spares_fast_groups() {
    use numasim_core::policy::linux::{update_sd_pick_busiest, AsymPick};
    let misfit = |load: u64| SgStats {
        group_capacity: 512,
        min_capacity: 512,
        max_capacity: 512,
        group_weight: 1,
        sum_nr_running: 1,
        group_util: 512,
        group_runnable: 512,
        group_misfit_task_load: load,
        group_type: GroupType::MisfitTask,
        ..SgStats::default()
    };
    let fast = AsymPick {
        dst_capacity: 1024,
        local_type: GroupType::HasSpare,
    };
    // The biggest misfit wins (ties: the first, `>` in 6.12).
    assert!(update_sd_pick_busiest(Some(fast), None, &misfit(500)));
    assert!(update_sd_pick_busiest(
        Some(fast),
        Some(&misfit(500)),
        &misfit(1024)
    ));
    assert!(!update_sd_pick_busiest(
        Some(fast),
        Some(&misfit(1024)),
        &misfit(1024)
    ));
    assert!(!update_sd_pick_busiest(
        Some(fast),
        Some(&misfit(1024)),
        &misfit(500)
    ));
    // A slow puller (512 is not capacity_greater than 512), or a local group without spare
    // capacity, cannot help a misfit.
    let slow = AsymPick {
        dst_capacity: 512,
        ..fast
    };
    assert!(!update_sd_pick_busiest(Some(slow), None, &misfit(1024)));
    let busy_local = AsymPick {
        local_type: GroupType::FullyBusy,
        ..fast
    };
    assert!(!update_sd_pick_busiest(
        Some(busy_local),
        None,
        &misfit(1024)
    ));
    // A group of fast CPUs (min capacity 1024, capacity_greater than 512) with at most one
    // task per CPU does not replace a busiest of its type for a slow puller, but does for a
    // fast one; a higher type still wins before that test (as in the kernel).
    let fast_group = |t: GroupType, idle: u64| SgStats {
        group_capacity: 2048,
        min_capacity: 1024,
        max_capacity: 1024,
        group_weight: 2,
        sum_nr_running: 2 - idle,
        idle_cpus: idle,
        group_type: t,
        ..SgStats::default()
    };
    let spare = fast_group(GroupType::HasSpare, 1);
    let full = fast_group(GroupType::FullyBusy, 0);
    assert!(!update_sd_pick_busiest(Some(slow), None, &spare));
    assert!(update_sd_pick_busiest(Some(fast), None, &spare));
    assert!(!update_sd_pick_busiest(Some(slow), Some(&full), &full));
    assert!(update_sd_pick_busiest(Some(fast), Some(&full), &full));
    assert!(update_sd_pick_busiest(Some(slow), None, &full));
}

#[test]
fn calculate_imbalance_for_a_misfit_group_is_migrate_misfit_one() {
    let mut local = classified(group(1, 0, 0, 0));
    let mut busiest = group(1, 1, 512, 512);
    busiest.group_capacity = 512;
    busiest.group_misfit_task_load = 1024;
    let busiest = classified(busiest);
    assert_eq!(busiest.group_type, GroupType::MisfitTask);
    let e = env(IdleType::Idle, true, false, 1, false);
    assert_eq!(
        calculate_imbalance(&e, &mut local, &busiest, 1024, 1536),
        (MigrationType::Misfit, 1)
    );
}

#[test]
fn an_idle_fast_cpu_pulls_a_misfit_task_from_a_slow_one_by_active_balance() {
    // CPU 0 fast (1024), CPU 1 slow (512). A new task on CPU 1 starts at util 512: 512 × 1280
    // = 655 360 ≥ 512 × 1024 = 524 288, so it does not fit CPU 1 → misfit_task_load = its load
    // 1024. CPU 0, idle, balancing the MC level (asym): group {1} is misfit (the only task
    // runs: no idle CPU), 1024 is capacity_greater than 512 and local has spare → busiest;
    // force_balance → migrate_misfit 1; find_src_rq: CPU 1 (misfit 1024); one task running,
    // nothing to detach → need_active_balance (migrate_misfit) at once, without a failure
    // counted; the stopper pushes the running task to CPU 0.
    let s = one_node_speeds(vec![2.0, 1.0], 1);
    let mut sc = s.scene();
    sc.with_pelt();
    sc.put(0, 1, 1, 0);
    let mut p = Linux::new(&s.ctx(), Options::default());
    assert_eq!(p.misfit_task_load(&sc.view(), 1), 1024);
    sc.at(100 * MS);
    let a = p
        .balance(&sc.view(), 0, 0, BalanceKind::Periodic)
        .expect("due");
    assert!(a.moves.is_empty());
    assert_eq!(a.active_from, Some(1));
    let a = p.active_balance(&sc.view(), 1, 0).expect("a task to push");
    assert_eq!(pulled(&a), vec![0]);
    let (got, _) = sc.apply(0, 0, a);
    assert_eq!(got, vec![0]);
    assert_eq!(sc.runqueue(0), vec![0]);
    // On the fast CPU the task is no misfit (the highest capacity), and the slow CPU, idle,
    // does not pull a lone task from a group of more capacity (update_sd_pick_busiest).
    assert_eq!(p.misfit_task_load(&sc.view(), 0), 0);
    sc.at(200 * MS);
    let a = p
        .balance(&sc.view(), 1, 0, BalanceKind::Periodic)
        .expect("due");
    assert!(a.moves.is_empty() && a.active_from.is_none());
}

#[test]
fn the_same_scene_on_one_speed_pulls_nothing() {
    // As above with speeds 1.0 / 1.0: capacities 1024, no SD_ASYM_CPUCAPACITY, no misfit; one
    // task alone on CPU 1 is has_spare with one task → balanced.
    let s = one_node_speeds(vec![1.0, 1.0], 1);
    let mut sc = s.scene();
    sc.with_pelt();
    sc.put(0, 1, 1, 0);
    let mut p = Linux::new(&s.ctx(), Options::default());
    assert_eq!(p.misfit_task_load(&sc.view(), 1), 0);
    sc.at(100 * MS);
    let a = p
        .balance(&sc.view(), 0, 0, BalanceKind::Periodic)
        .expect("due");
    assert!(a.moves.is_empty() && a.active_from.is_none());
}

#[test]
fn a_run_on_amc1_completes_and_moves_misfits_to_fast_cpus() {
    let m = testutils::preset("amc1");
    let d = Builder::Linux.build(&m, &BuildOptions::default());
    // Demands of 100–500 ms: the fast CPUs run out of work while slow ones still run tasks
    // that do not fit them.
    let w = WorkloadSpec::parse("w", "n=64,kind=cpu,exec=100-500,arrival=same")
        .unwrap()
        .generate("w", 1, m.node_cpu_lists())
        .unwrap();
    let cfg = EngineConfig::default();
    let ctx = numasim_core::interface::PolicyContext {
        machine: &m,
        domains: &d,
        config: &cfg,
    };
    assert!(numasim_core::policy::by_name("linux", &ctx).is_ok());
    let r = numasim_core::run_policy(&m, &d, &w, "linux", &cfg).unwrap();
    assert_eq!(r.processes.len(), 64);
    let kinds: std::collections::BTreeMap<_, _> =
        r.summary.migrations_by_kind.iter().cloned().collect();
    assert!(kinds.get("active").copied().unwrap_or(0) > 0, "{kinds:?}");
}

#[test]
fn wake_up_on_an_asymmetric_node_looks_for_a_cpu_the_task_fits() {
    // One node: CPUs 0, 1 fast (1024), 2, 3 slow (512); sd_asym_cpucapacity = the node. Task 0
    // runs on CPU 3 with util 512 (a new task): it does not fit 512 (512 × 1280 ≥ 512 × 1024).
    // Waking with prev = target = CPU 2 (idle): asym_fits_cpu fails, no recent CPU, so
    // select_idle_capacity from CPU 2 wrapping: 2 idle but too small (best so far), 3 busy,
    // 0 idle and fits → CPU 0.
    let s = one_node_speeds(vec![2.0, 2.0, 1.0, 1.0], 3);
    let mut sc = s.scene();
    sc.with_pelt();
    sc.put(0, 3, 3, 0);
    let mut p = Linux::new(&s.ctx(), Options::default());
    assert_eq!(p.place_wakeup(&sc.view(), 0, 2), Some(0));
    // Both fast CPUs busy: no idle CPU fits; the idle CPU of the highest capacity, the first
    // on ties from the target: CPU 2.
    sc.put(1, 0, 0, 0);
    sc.put(2, 1, 1, 0);
    let mut p = Linux::new(&s.ctx(), Options::default());
    assert_eq!(p.place_wakeup(&sc.view(), 0, 2), Some(2));
    // One speed: the idle previous CPU, as before.
    let s = one_node_speeds(vec![1.0; 4], 1);
    let mut sc = s.scene();
    sc.with_pelt();
    sc.put(0, 3, 3, 0);
    let mut p = Linux::new(&s.ctx(), Options::default());
    assert_eq!(p.place_wakeup(&sc.view(), 0, 2), Some(2));
}
