//! The kept group load sums (crate::load, step 3) and the overloaded set are what a fresh scan
//! would give, at every balancing decision of random runs: a checking policy wraps linux26 and
//! compares, for every group of the level it is asked about, `View::group_load` with the sums of
//! `View::cpu_load` / `View::raw_load` / `View::nr_running` over the group's CPUs, and
//! `View::overloaded` with the CPUs that have two tasks or more; and `View::group_bound` with
//! the group's instantaneous load per CPU, between its two averages.

use numasim_core::assumptions::Assumptions;
use numasim_core::config::EngineConfig;
use numasim_core::domains::{BuildOptions, Builder};
use numasim_core::interface::{Attempt, BalanceKind, Pid, Policy, PolicyContext, Quiet, View};
use numasim_core::load::GroupLoad;
use numasim_core::machine::{CpuId, Machine};
use numasim_core::policy::linux26::Linux26;
use numasim_core::policy::origin_aware::{Options as OriginOptions, OriginAware};
use numasim_core::testutils;
use numasim_core::workload::Workload;
use numasim_core::workload::WorkloadSpec;
use numasim_core::Domains;
use proptest::prelude::*;

/// linux26, checking the view at every balancing call and placement.
struct Checked {
    inner: Linux26,
    checks: usize,
    /// Checks of a level with a ring (crate::load, step 6).
    ring_checks: usize,
}

/// What a balancer asks of a level's other groups (crate::load, step 6), against reading each
/// group's bound: from the level's ring, where it has one, the same answers.
fn check_level_questions(v: &View<'_>, l: &numasim_core::Level) {
    let others = || {
        l.groups
            .iter()
            .filter(|g| !g.local)
            .map(|g| v.group_bound(g))
    };
    assert_eq!(
        v.others_max_bound(l),
        others().max().unwrap_or(0),
        "at {}",
        v.now
    );
    assert_eq!(v.others_min_bound(l), others().min(), "at {}", v.now);
    let len = l.groups.len();
    for from in [0, 1, len / 3, len - 1, len] {
        for thr in [0, 64, 127, 128, 136, 200, u64::MAX] {
            let busiest = (from..len).find(|&i| {
                let g = &l.groups[i];
                !g.local && v.group_nr_running(g) > g.weight as u64 && v.group_bound(g) > thr
            });
            assert_eq!(
                v.next_busiest_candidate(l, from, thr),
                busiest,
                "{from} {thr}"
            );
            let idlest =
                (from..len).find(|&i| !l.groups[i].local && v.group_bound(&l.groups[i]) < thr);
            assert_eq!(
                v.next_idlest_candidate(l, from, thr),
                idlest,
                "{from} {thr}"
            );
        }
    }
}

fn scanned(v: &View<'_>, g: &numasim_core::Group, idx: usize) -> GroupLoad {
    let mut s = GroupLoad::default();
    for c in g.span.iter() {
        let raw = v.raw_load(c);
        let l = v.cpu_load(c, idx);
        s.nr_running += v.nr_running(c) as u64;
        s.raw += raw;
        s.source += l.min(raw);
        s.target += l.max(raw);
    }
    let power = 128 * g.span.len() as u64;
    s.avg_source = s.source * 128 / power;
    s.avg_target = s.target * 128 / power;
    s
}

impl Checked {
    fn check(&mut self, v: &View<'_>, cpu: CpuId) {
        for c in 0..v.machine.cpus() {
            assert_eq!(v.overloaded().contains(c), v.nr_running(c) >= 2, "cpu {c}");
        }
        assert_eq!(v.none_overloaded(), v.overloaded().is_empty());
        for l in &v.domains.cpus[cpu] {
            check_level_questions(v, l);
            self.ring_checks += usize::from(l.ring.is_some());
            for g in l.groups.iter() {
                for idx in 0..4 {
                    let (kept, fresh) = (v.group_load(g, idx), scanned(v, g, idx));
                    assert_eq!(kept, fresh, "at {} group {} index {idx}", v.now, g.id);
                    // The tick-free bound of crate::load, step 5.
                    let bound = fresh.raw / g.span.len() as u64;
                    assert_eq!(v.group_bound(g), bound, "at {} group {}", v.now, g.id);
                    assert_eq!(v.group_nr_running(g), fresh.nr_running);
                    assert!(fresh.avg_source <= bound && bound <= fresh.avg_target);
                }
                self.checks += 1;
            }
        }
    }
}

impl Policy for Checked {
    fn name(&self) -> &'static str {
        "checked"
    }
    fn place_new(&mut self, v: &View<'_>, pid: Pid, spawn: CpuId) -> Option<CpuId> {
        self.check(v, spawn);
        self.inner.place_new(v, pid, spawn)
    }
    fn place_wakeup(&mut self, v: &View<'_>, pid: Pid, prev: CpuId) -> Option<CpuId> {
        self.check(v, prev);
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
        self.check(v, cpu);
        self.inner.balance(v, cpu, level, kind)
    }
    fn active_balance(&mut self, v: &View<'_>, busiest: CpuId, target: CpuId) -> Option<Attempt> {
        self.check(v, target);
        self.inner.active_balance(v, busiest, target)
    }
}

/// A random machine (`nodes` × `cpn` CPUs), its domains by builder `b`, and `n` processes of
/// kind `kind` (cpu, io, mixed) arriving over `over_ms`.
fn random_run(
    nodes: usize,
    cpn: usize,
    b: usize,
    n: usize,
    kind: usize,
    seed: u64,
    over_ms: u64,
) -> (Machine, Domains, Workload) {
    let rows: Vec<Vec<u32>> = (0..nodes)
        .map(|i| {
            (0..nodes)
                .map(|j| {
                    if i == j {
                        10
                    } else {
                        20 + 10 * (i + j) as u32 % 30
                    }
                })
                .collect()
        })
        .collect();
    let m = testutils::machine(&rows, cpn);
    let d = Builder::ALL[b].build(&m, &BuildOptions::default());
    let kind = ["cpu", "io", "mixed"][kind];
    let spec = format!("n={n},kind={kind},exec=1-40,arrival=uniform:{over_ms},burst=3,wait=5");
    let w = WorkloadSpec::parse("w", &spec)
        .unwrap()
        .generate("w", seed, m.node_cpu_lists())
        .unwrap();
    (m, d, w)
}

/// linux26 wrapped in [`Checked`] over `w`: the processes that completed, and the checker.
fn run_checked(m: &Machine, d: &Domains, w: &Workload) -> (usize, Checked) {
    run_checked_sliced(m, d, w, EngineConfig::default().timeslice_ns)
}

/// [`run_checked`] with slices of `timeslice_ns`.
fn run_checked_sliced(
    m: &Machine,
    d: &Domains,
    w: &Workload,
    timeslice_ns: u64,
) -> (usize, Checked) {
    let config = EngineConfig {
        timeslice_ns,
        ..EngineConfig::default()
    };
    let ctx = PolicyContext {
        machine: m,
        domains: d,
        config: &config,
    };
    let mut p = Checked {
        inner: Linux26::new(&ctx),
        checks: 0,
        ring_checks: 0,
    };
    let r = numasim_core::engine::run(m, d, w, &mut p, &config).unwrap();
    (r.processes.len(), p)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn kept_sums_are_fresh_sums(
        nodes in 1usize..5,
        cpn in 1usize..4,
        b in 0usize..5,
        n in 1usize..40,
        kind in 0usize..3,
        seed in 0u64..1000,
    ) {
        let (m, d, w) = random_run(nodes, cpn, b, n, kind, seed, 60);
        let (done, p) = run_checked(&m, &d, &w);
        prop_assert_eq!(done, n);
        prop_assert!(p.checks > 0 || m.cpus() == 1);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    /// Slices of 1 ms, shorter than most processes: a CPU with others waiting puts its running
    /// process back at its queue's tail at every slice's end, which leaves the kept sums as
    /// they were (the runqueue's length does not change).
    #[test]
    fn kept_sums_are_fresh_sums_through_slice_rotations(
        nodes in 1usize..4,
        cpn in 1usize..4,
        b in 0usize..5,
        n in 10usize..40,
        seed in 0u64..1000,
    ) {
        let (m, d, w) = random_run(nodes, cpn, b, n, 0, seed, 10);
        let (done, p) = run_checked_sliced(&m, &d, &w, 1_000_000);
        prop_assert_eq!(done, n);
        prop_assert!(p.checks > 0 || m.cpus() == 1);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(8))]

    /// Machines with levels of 32 groups or more, whose bounds are kept on rings: the same
    /// checks (and linux26's own, in debug builds: every scan that skips groups against one
    /// that reads them all).
    #[test]
    fn ring_answers_are_fresh_answers(
        nodes in 33usize..70,
        cpn in 1usize..3,
        b in prop::sample::select(vec![0usize, 1, 2, 3]),
        n in 20usize..120,
        kind in 0usize..3,
        seed in 0u64..1000,
    ) {
        let (m, d, w) = random_run(nodes, cpn, b, n, kind, seed, 30);
        let (done, p) = run_checked(&m, &d, &w);
        prop_assert_eq!(done, n);
        prop_assert!(p.ring_checks > 0, "{} levels with a ring", d.rings.len());
    }
}

/// A policy as it was before `due_levels`: asked about every level at each periodic balancing.
struct EveryLevel<P>(P);

impl<P: Policy> Policy for EveryLevel<P> {
    fn name(&self) -> &'static str {
        self.0.name()
    }
    fn place_new(&mut self, v: &View<'_>, pid: Pid, spawn: CpuId) -> Option<CpuId> {
        self.0.place_new(v, pid, spawn)
    }
    fn place_wakeup(&mut self, v: &View<'_>, pid: Pid, prev: CpuId) -> Option<CpuId> {
        self.0.place_wakeup(v, pid, prev)
    }
    fn next_periodic_ns(&self, v: &View<'_>, cpu: CpuId) -> Option<u64> {
        self.0.next_periodic_ns(v, cpu)
    }
    fn balance(
        &mut self,
        v: &View<'_>,
        cpu: CpuId,
        level: usize,
        kind: BalanceKind,
    ) -> Option<Attempt> {
        self.0.balance(v, cpu, level, kind)
    }
    fn active_balance(&mut self, v: &View<'_>, busiest: CpuId, target: CpuId) -> Option<Attempt> {
        self.0.active_balance(v, busiest, target)
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// The engine asks linux26 and origin-aware only about the levels their `due_levels` names:
    /// every result (events, each process, the balancing counts per kind and level) is the one
    /// of asking them about every level.
    #[test]
    fn due_levels_changes_no_result(
        nodes in 1usize..5,
        cpn in 1usize..5,
        b in 0usize..5,
        n in 1usize..60,
        kind in 0usize..3,
        seed in 0u64..1000,
        origin in any::<bool>(),
    ) {
        // Sparser arrivals than above: idle CPUs balance level after level.
        let (m, d, w) = random_run(nodes, cpn, b, n, kind, seed, 400);
        let config = EngineConfig::default();
        let ctx = PolicyContext { machine: &m, domains: &d, config: &config };
        let run = |p: &mut dyn Policy| numasim_core::engine::run(&m, &d, &w, p, &config).unwrap();
        let (due, every) = if origin {
            let new = || OriginAware::new(&ctx, OriginOptions::default());
            (run(&mut new()), run(&mut EveryLevel(new())))
        } else {
            (run(&mut Linux26::new(&ctx)), run(&mut EveryLevel(Linux26::new(&ctx))))
        };
        prop_assert_eq!(serde_json::to_string(&due).unwrap(), serde_json::to_string(&every).unwrap());
    }
}

/// A policy built by name, with `Policy::quiet_periodic` answered by it (`quiet`) or left at
/// the default (false: the engine asks `tick`, `due_levels` and `balance` at every periodic
/// balancing); counts the periodic balancings it did in one call.
struct QuietOrNot {
    inner: Box<dyn Policy>,
    quiet: bool,
    calls: usize,
}

impl Policy for QuietOrNot {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn place_new(&mut self, v: &View<'_>, pid: Pid, spawn: CpuId) -> Option<CpuId> {
        self.inner.place_new(v, pid, spawn)
    }
    fn place_wakeup(&mut self, v: &View<'_>, pid: Pid, prev: CpuId) -> Option<CpuId> {
        self.inner.place_wakeup(v, pid, prev)
    }
    fn first_touch_node(&mut self, v: &View<'_>, pid: Pid, cpu: CpuId) -> usize {
        self.inner.first_touch_node(v, pid, cpu)
    }
    fn cpu_idle(&mut self, v: &View<'_>, cpu: CpuId) -> Option<Attempt> {
        self.inner.cpu_idle(v, cpu)
    }
    fn process_held(&mut self, v: &View<'_>, pid: Pid) -> Option<Attempt> {
        self.inner.process_held(v, pid)
    }
    fn next_periodic_ns(&self, v: &View<'_>, cpu: CpuId) -> Option<u64> {
        self.inner.next_periodic_ns(v, cpu)
    }
    fn due_levels(&self, v: &View<'_>, cpu: CpuId) -> u64 {
        self.inner.due_levels(v, cpu)
    }
    fn quiet_periodic(&mut self, v: &View<'_>, cpu: CpuId, out: &mut Quiet) -> bool {
        let done = self.quiet && self.inner.quiet_periodic(v, cpu, out);
        self.calls += usize::from(done);
        done
    }
    fn balance(
        &mut self,
        v: &View<'_>,
        cpu: CpuId,
        level: usize,
        kind: BalanceKind,
    ) -> Option<Attempt> {
        self.inner.balance(v, cpu, level, kind)
    }
    fn active_balance(&mut self, v: &View<'_>, busiest: CpuId, target: CpuId) -> Option<Attempt> {
        self.inner.active_balance(v, busiest, target)
    }
    fn timeslice_ns(&self) -> Option<u64> {
        self.inner.timeslice_ns()
    }
    fn tracks_pelt(&self) -> bool {
        self.inner.tracks_pelt()
    }
    fn global_period_ns(&self) -> Option<u64> {
        self.inner.global_period_ns()
    }
    fn global_balance(&mut self, v: &View<'_>) -> Option<Attempt> {
        self.inner.global_balance(v)
    }
    fn tick(&mut self, v: &View<'_>, cpu: CpuId) -> Option<Attempt> {
        self.inner.tick(v, cpu)
    }
    fn extra_metrics(&self) -> Vec<(String, f64)> {
        self.inner.extra_metrics()
    }
}

/// `policy` on `(m, d, w)` under `assumptions`, with its quiet periodic balancing and without:
/// both results, serialised, and how many periodic balancings were quiet.
fn with_and_without_quiet(
    (m, d, w): &(Machine, Domains, Workload),
    policy: &str,
    assumptions: &str,
) -> (String, String, usize) {
    let config = EngineConfig {
        assumptions: Assumptions::parse("test", assumptions).unwrap(),
        ..EngineConfig::default()
    };
    let ctx = PolicyContext {
        machine: m,
        domains: d,
        config: &config,
    };
    let run = |quiet: bool| {
        let inner = numasim_core::policy::by_name(policy, &ctx).unwrap();
        let mut p = QuietOrNot {
            inner,
            quiet,
            calls: 0,
        };
        let r = numasim_core::engine::run(m, d, w, &mut p, &config).unwrap();
        (serde_json::to_string(&r).unwrap(), p.calls)
    };
    let ((with, calls), (without, none)) = (run(true), run(false));
    assert_eq!(none, 0);
    (with, without, calls)
}

const POLICIES: [&str; 6] = [
    "linux26",
    "origin-aware",
    "origin-aware:v1=off,v2=off,nearest=move",
    "thread-aware",
    "memory-aware",
    "capability-aware",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// A periodic balancing the policy does in one call (`Policy::quiet_periodic`) changes no
    /// result: events, each process, the balancing counts and costs per kind, level and CPU.
    #[test]
    fn quiet_periodic_balancing_changes_no_result(
        nodes in 1usize..5,
        cpn in 1usize..5,
        b in 0usize..5,
        n in 1usize..60,
        kind in 0usize..3,
        seed in 0u64..1000,
        policy in 0usize..POLICIES.len(),
        assumptions in 0usize..3,
    ) {
        let run = random_run(nodes, cpn, b, n, kind, seed, 400);
        let assumptions = ["", "slice=work,wake=idlest", "memory=parent"][assumptions];
        let (with, without, _) = with_and_without_quiet(&run, POLICIES[policy], assumptions);
        prop_assert_eq!(with, without);
    }
}

/// On a machine with idle CPUs, linux26 and origin-aware (in both of its cycles) do most
/// periodic balancing in one call, with the results of the general path.
#[test]
fn idle_cpus_balance_quietly_with_the_same_results() {
    let run = random_run(4, 2, 0, 3, 0, 7, 10);
    for policy in ["linux26", "origin-aware"] {
        let (with, without, calls) = with_and_without_quiet(&run, policy, "slice=work");
        assert_eq!(with, without, "{policy}");
        let events: u64 = serde_json::from_str::<serde_json::Value>(&with).unwrap()["events"]
            .as_u64()
            .unwrap();
        assert!(
            calls as u64 > events / 2,
            "{policy}: {calls} of {events} events"
        );
    }
}
