//! Load tracking: what a CPU's load is, as balancers read it — 2.6's per-tick `cpu_load[]`
//! (below) and 6.x's PELT ([`Pelt`], kept by the engine for policies that ask for it).
//!
//! ```text
//!   raw load      = NICE_0_LOAD × nr_running                (2.6.18 raw_weighted_load)
//!   cpu_load[i]   = (cpu_load[i] · (2^i − 1) + raw) / 2^i   per tick, i = 0..2 (update_load)
//!   PELT signal   s ← s · y^(Δ/P) + ind · (1 − y^(Δ/P))    y^32 = 1/2, P = 1024 µs (pelt.c)
//! ```
//!
//! 1. Between two changes of a CPU's runqueue length its raw load is constant, so the ticks in
//!    between are applied lazily: when the load is read or is about to change.
//! 2. Catching up stops early once the averages converge (further ticks change nothing).
//! 3. Balancers sum these loads over a scheduling group's CPUs for every group of a level
//!    (`find_busiest_group`, `find_idlest_group`). The sums of a group are kept for the tick
//!    they were taken in ([`GroupLoads`]); when one of its CPUs' runqueue changes within that
//!    tick they trade that CPU's old contribution for its new one (otherwise they are dropped):
//!    every CPU that balances at that tick reads them, and the top level of a 1 024-CPU machine
//!    has 64 groups rather than 1 024 CPUs. A load read at tick t depends only on the CPU's
//!    runqueue length and t, so a kept sum is the sum a fresh scan would give.
//! 4. A sum taken at a new tick reads only the group's CPUs whose averages may still move: the
//!    settled ones (at a fixed point for their task count) contribute a part kept per group
//!    until one of them changes ([`GroupLoads`]), so at light load a tick costs the CPUs that
//!    changed recently rather than every CPU of the group.
//! 5. A group's task count does not depend on the tick, and bounds its averages: every CPU's
//!    `source_load` is at most its instantaneous load and its `target_load` at least that, so
//!    `avg_source ≤ ⌊NICE_0_LOAD · nr / cpus⌋ ≤ avg_target` ([`View::group_bound`]). The counts
//!    are kept per group at every runqueue change; a balancer can rule a level out from them
//!    without reading (and catching up) the loads of every group.
//! 6. Levels with many groups ([`crate::domains::RING_MIN_GROUPS`]) list them as a rotation of a
//!    ring ([`crate::domains::RingAt`]); each ring's bounds are also kept in a tree
//!    ([`crate::ring::RingTree`]), updated with them, so that the largest or smallest bound of a
//!    level's other groups, and its next group past a bound, are found without reading every
//!    group (`View::others_max_bound` and the like).
//!
//! [`View::group_bound`]: crate::interface::View::group_bound

/// Load weight of a nice-0 task (`NICE_0_LOAD` / `SCHED_LOAD_SCALE` in 2.6.18).
pub const NICE_0_LOAD: u64 = 128;

/// Per-tick decayed CPU load (2.6.18 `update_load` in `scheduler_tick`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LoadAvg {
    pub(crate) cpu_load: [u64; 3],
    /// Index of the last tick applied.
    pub(crate) tick: u64,
    /// The raw load at which catching up last found the averages settled (another tick changed
    /// nothing), or `u64::MAX`.
    settled_raw: u64,
}

impl Default for LoadAvg {
    fn default() -> Self {
        Self {
            cpu_load: [0; 3],
            tick: 0,
            settled_raw: u64::MAX,
        }
    }
}

impl LoadAvg {
    /// The averages after applying ticks up to `now_tick` with a constant `raw` load, and
    /// whether they settled on the way (a tick that changed nothing: every later one would not
    /// either).
    fn at(&self, now_tick: u64, raw: u64) -> ([u64; 3], bool) {
        let mut l = self.cpu_load;
        let mut t = self.tick;
        while t < now_tick {
            let before = l;
            for (i, v) in l.iter_mut().enumerate() {
                // (v · (2^i − 1) + raw) / 2^i, the division a shift (unsigned: the same value).
                *v = (*v * ((1u64 << i) - 1) + raw) >> i;
            }
            t += 1;
            if l == before {
                return (l, true); // converged: further ticks change nothing
            }
        }
        (l, false)
    }

    /// Whether these averages are known to be a fixed point at load `raw` (every later tick
    /// gives the same values); `false` when not known.
    pub(crate) fn settled(&self, raw: u64) -> bool {
        self.settled_raw == raw
    }

    pub(crate) fn caught_up(self, now_tick: u64, raw: u64) -> Self {
        if now_tick <= self.tick {
            return self;
        }
        let (cpu_load, settled) = self.at(now_tick, raw);
        Self {
            cpu_load,
            tick: now_tick,
            settled_raw: if settled { raw } else { u64::MAX },
        }
    }
}

/// What balancers read of one scheduling group at one load index: sums over its CPUs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupLoad {
    /// Runnable + running tasks.
    pub nr_running: u64,
    /// Instantaneous load (`NICE_0_LOAD` × nr_running).
    pub raw: u64,
    /// 2.6.18 `source_load` at the index: the smaller of the decayed (`cpu_load[idx − 1]`, or
    /// the instantaneous load at index 0) and the instantaneous load (a group balanced against).
    pub source: u64,
    /// `target_load`, the larger (the balancing CPU's own group).
    pub target: u64,
    /// `source` per unit of CPU power, 2.6.18's `avg_load`: sum × `SCHED_LOAD_SCALE` /
    /// `cpu_power`, with a power of `SCHED_LOAD_SCALE` per CPU.
    pub avg_source: u64,
    /// `target` per unit of CPU power.
    pub avg_target: u64,
}

/// What each CPU adds to its groups' sums, at every load index (index 0 the instantaneous load).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Totals {
    nr_running: u64,
    raw: u64,
    source: [u64; 4],
    target: [u64; 4],
}

impl Totals {
    /// Adds one CPU with `nr` tasks and decayed averages `avg` (`cpu_load[0..3]`).
    pub(crate) fn add(&mut self, nr: usize, avg: [u64; 3]) {
        let raw = NICE_0_LOAD * nr as u64;
        self.nr_running += nr as u64;
        self.raw += raw;
        self.source[0] += raw;
        self.target[0] += raw;
        for (i, a) in avg.into_iter().enumerate() {
            self.source[i + 1] += a.min(raw);
            self.target[i + 1] += a.max(raw);
        }
    }

    /// Takes back what [`Totals::add`] added for a CPU with `nr` tasks and averages `avg`.
    fn remove(&mut self, nr: usize, avg: [u64; 3]) {
        let raw = NICE_0_LOAD * nr as u64;
        self.nr_running -= nr as u64;
        self.raw -= raw;
        self.source[0] -= raw;
        self.target[0] -= raw;
        for (i, a) in avg.into_iter().enumerate() {
            self.source[i + 1] -= a.min(raw);
            self.target[i + 1] -= a.max(raw);
        }
    }
}

/// 2.6.18's `avg_load` of a group of `cpus` CPUs whose loads sum to `sum`: `sum ×
/// SCHED_LOAD_SCALE / cpu_power` with a power of `SCHED_LOAD_SCALE` per CPU, which is
/// ⌊sum / cpus⌋ (the same rational, so the same floor): a shift when `cpus` is a power of two,
/// as the groups of most machines are.
fn per_cpu(sum: u64, cpus: u64) -> u64 {
    if cpus.is_power_of_two() {
        sum >> cpus.trailing_zeros()
    } else {
        sum / cpus
    }
}

/// A group's sums at every load index and their averages (what is kept; [`GroupLoad`] is one
/// index of it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct GroupSums {
    totals: Totals,
    avg_source: [u64; 4],
    avg_target: [u64; 4],
}

impl GroupSums {
    /// Sets the averages of a group of `cpus` CPUs from its totals.
    fn finish(&mut self, cpus: usize) {
        let cpus = cpus as u64;
        for i in 0..4 {
            self.avg_source[i] = per_cpu(self.totals.source[i], cpus);
            self.avg_target[i] = per_cpu(self.totals.target[i], cpus);
        }
    }

    fn at(&self, idx: usize) -> GroupLoad {
        GroupLoad {
            nr_running: self.totals.nr_running,
            raw: self.totals.raw,
            source: self.totals.source[idx],
            target: self.totals.target[idx],
            avg_source: self.avg_source[idx],
            avg_target: self.avg_target[idx],
        }
    }
}

/// The sums of every distinct scheduling group ([`crate::domains::Group::id`]), each kept for
/// the tick it was taken in (or longer, settled) and brought up to date when one of its CPUs'
/// runqueue length changes within that tick.
///
/// A group's sums at a new tick are not a scan of all its CPUs: a CPU whose averages have
/// settled at its task count (another tick changes none of them) contributes the same at
/// every later tick until its runqueue changes, so each group keeps the part of its sums that
/// its settled CPUs contribute, and the list of the others, which alone are read again:
///
/// ```text
///   group g:  settled[g] = Σ contributions of its settled CPUs   (constant between changes)
///             unsettled[g] = [(cpu, epoch), …]                   (read at each new tick)
///   sums(g, t) = settled[g] + Σ_{c ∈ unsettled[g]} contribution(c, t)
/// ```
///
/// 1. A runqueue change of a settled CPU takes its contribution out of the settled part of each
///    of its groups and lists it in each (a new epoch; `in_unsettled`).
/// 2. A read that finds a listed CPU settled adds its contribution to the settled part of each
///    of its groups and unlists it everywhere at once (entries of another epoch, or of a CPU no
///    longer listed, are stale and dropped where met).
/// 3. The sums are integer sums of per-CPU values, so this is the sum a scan would give.
#[derive(Debug, Default)]
pub(crate) struct GroupLoads {
    inner: std::cell::RefCell<Kept>,
    /// CPUs per group id (for its averages).
    weights: Vec<usize>,
    /// Per group id: its tasks (runnable + running) now, and ⌊NICE_0_LOAD × tasks / CPUs⌋,
    /// kept at every runqueue change. They do not depend on the tick, and the second bounds
    /// the group's averages without reading them (step 5).
    nr_running: Vec<(u64, u64)>,
    /// Per ring of [`crate::domains::Domains::rings`]: its bounds (step 6).
    rings: Vec<crate::ring::RingTree>,
    /// Per group id: the rings it is on, and where (empty when there are no rings).
    ring_slots: Vec<smallvec::SmallVec<[(u32, u32); 2]>>,
}

#[derive(Debug, Default)]
struct Kept {
    /// Per group id: (first tick, last tick they hold for; the sums); none when first > last.
    sums: Vec<(u64, u64, GroupSums)>,
    /// Per group id: what its settled CPUs contribute.
    settled: Vec<Totals>,
    /// Per group id: its CPUs not known settled, with the epoch they were listed in.
    unsettled: Vec<Vec<(u32, u64)>>,
    /// Per CPU: the task count the sums hold for it.
    nr: Vec<usize>,
    /// Per CPU: whether it is listed as unsettled in its groups, and in which epoch.
    in_unsettled: Vec<bool>,
    epoch: Vec<u64>,
}

impl Kept {
    fn listed(&self, cpu: usize, epoch: u64) -> bool {
        self.in_unsettled[cpu] && self.epoch[cpu] == epoch
    }
}

impl GroupLoads {
    /// For groups of `weights` CPUs on a machine of `cpus` CPUs, every runqueue empty (averages
    /// of zero at no load: settled), the groups of `rings` (ids) on rings in that order.
    pub(crate) fn new(weights: Vec<usize>, cpus: usize, rings: &[Vec<u32>]) -> Self {
        let groups = weights.len();
        // None at all without rings (most machines): a change then skips them in one test.
        let mut ring_slots =
            vec![smallvec::SmallVec::new(); if rings.is_empty() { 0 } else { groups }];
        for (r, ids) in rings.iter().enumerate() {
            for (pos, &id) in ids.iter().enumerate() {
                ring_slots[id as usize].push((r as u32, pos as u32));
            }
        }
        Self {
            inner: std::cell::RefCell::new(Kept {
                sums: vec![(1, 0, GroupSums::default()); groups],
                settled: vec![Totals::default(); groups],
                unsettled: vec![Vec::new(); groups],
                nr: vec![0; cpus],
                in_unsettled: vec![false; cpus],
                epoch: vec![0; cpus],
            }),
            nr_running: vec![(0, 0); groups],
            weights,
            rings: rings
                .iter()
                .map(|ids| crate::ring::RingTree::new(ids.len()))
                .collect(),
            ring_slots,
        }
    }

    /// The groups `ids` changed their tasks: their leaves on the rings (step 6).
    #[inline(never)]
    fn rings_changed(&mut self, ids: &[u32]) {
        for &id in ids {
            let (n, bound) = self.nr_running[id as usize];
            let eligible = n > self.weights[id as usize] as u64;
            for &(ring, pos) in &self.ring_slots[id as usize] {
                self.rings[ring as usize].set(pos as usize, bound, eligible);
            }
        }
    }

    /// The bounds of the groups of `at`'s ring but its first (a level's own group): their
    /// largest, smallest and largest busiest-eligible (step 6).
    #[inline]
    pub(crate) fn ring_others(&self, at: crate::domains::RingAt) -> [u64; 3] {
        self.rings[at.ring as usize].others(at.start as usize)
    }

    /// The first position of the level entering `at`'s ring, from `from` on, whose bounds
    /// satisfy `hit` (a test of a node of [`crate::ring::RingTree`]).
    #[inline]
    pub(crate) fn ring_next(
        &self,
        at: crate::domains::RingAt,
        from: usize,
        hit: &impl Fn(&[u64; 3]) -> bool,
    ) -> Option<usize> {
        self.rings[at.ring as usize].next(at.start as usize, from, hit)
    }

    /// Group `id`'s tasks now (what [`GroupLoads::get`] gives as `nr_running`, at any tick).
    #[inline]
    pub(crate) fn nr_running(&self, id: u32) -> u64 {
        self.nr_running[id as usize].0
    }

    /// ⌊`NICE_0_LOAD` × group `id`'s tasks / its CPUs⌋, which bounds its averages (step 5).
    #[inline]
    pub(crate) fn bound(&self, id: u32) -> u64 {
        self.nr_running[id as usize].1
    }

    /// The sums of group `id` at tick `tick` and load index `idx`: kept ones, or the settled
    /// part plus what `read(cpu)` gives for each unsettled CPU (then kept). `read` returns the
    /// CPU's task count, its averages at `tick` and whether they have settled; `member_of` is
    /// [`crate::domains::Domains::member_of`]. When no CPU of the group is left unsettled the
    /// sums hold at every later tick too, until a runqueue of the group changes.
    #[inline]
    pub(crate) fn get(
        &self,
        id: u32,
        tick: u64,
        idx: usize,
        member_of: &[Vec<u32>],
        read: impl Fn(usize) -> (usize, [u64; 3], bool),
    ) -> GroupLoad {
        let mut guard = self.inner.borrow_mut();
        let g = id as usize;
        let (first, last, _) = guard.sums[g];
        if !(first..=last).contains(&tick) {
            self.refresh(&mut guard, g, tick, member_of, read);
        }
        guard.sums[g].2.at(idx)
    }

    /// Takes group `g`'s sums at `tick`: its settled part plus a read of its unsettled CPUs
    /// (out of line: most reads find the sums kept).
    #[cold]
    #[inline(never)]
    fn refresh(
        &self,
        kept: &mut Kept,
        g: usize,
        tick: u64,
        member_of: &[Vec<u32>],
        read: impl Fn(usize) -> (usize, [u64; 3], bool),
    ) {
        let mut totals = kept.settled[g];
        let mut list = std::mem::take(&mut kept.unsettled[g]);
        list.retain(|&(cpu, epoch)| {
            let c = cpu as usize;
            if !kept.listed(c, epoch) {
                return false; // stale
            }
            let (nr, avg, settled) = read(c);
            debug_assert_eq!(nr, kept.nr[c], "every runqueue change was reported");
            totals.add(nr, avg);
            if settled {
                kept.in_unsettled[c] = false;
                for &h in &member_of[c] {
                    kept.settled[h as usize].add(nr, avg);
                }
            }
            !settled
        });
        let all_settled = list.is_empty();
        kept.unsettled[g] = list;
        let entry = &mut kept.sums[g];
        (entry.0, entry.1) = (tick, if all_settled { u64::MAX } else { tick });
        entry.2.totals = totals;
        entry.2.finish(self.weights[g]);
    }

    /// CPU `cpu`, a member of groups `ids`, now has `nr` tasks; `avg` are its averages at tick
    /// `tick` (caught up before the change, so the same as the kept sums read). Sums kept for
    /// this tick trade its old contribution for its new one (exact: integer sums of per-CPU
    /// values) and now hold for this tick only (its averages are no longer settled); others are
    /// dropped. A settled CPU leaves the settled part of its groups (step 1).
    pub(crate) fn changed(&mut self, cpu: usize, ids: &[u32], tick: u64, avg: [u64; 3], nr: usize) {
        let kept = self.inner.get_mut();
        let old = std::mem::replace(&mut kept.nr[cpu], nr);
        for &id in ids {
            let (n, bound) = &mut self.nr_running[id as usize];
            *n = *n - old as u64 + nr as u64;
            *bound = per_cpu(NICE_0_LOAD * *n, self.weights[id as usize] as u64);
            let entry = &mut kept.sums[id as usize];
            if (entry.0..=entry.1).contains(&tick) {
                entry.2.totals.remove(old, avg);
                entry.2.totals.add(nr, avg);
                entry.2.finish(self.weights[id as usize]);
                (entry.0, entry.1) = (tick, tick);
            } else {
                (entry.0, entry.1) = (1, 0);
            }
        }
        if !self.ring_slots.is_empty() {
            self.rings_changed(ids);
        }
        let kept = self.inner.get_mut();
        if kept.in_unsettled[cpu] {
            return;
        }
        // Settled until now: its averages are the fixed point it settled at, `avg`.
        kept.in_unsettled[cpu] = true;
        kept.epoch[cpu] += 1;
        let epoch = kept.epoch[cpu];
        for &id in ids {
            let g = id as usize;
            kept.settled[g].remove(old, avg);
            let list = &mut kept.unsettled[g];
            // Stale entries are dropped once they outnumber the group's CPUs (each CPU has at
            // most one live entry), so a group nobody reads does not grow without bound.
            if list.len() >= 2 * self.weights[g] + 8 {
                let (in_unsettled, epochs) = (&kept.in_unsettled, &kept.epoch);
                list.retain(|&(c, e)| in_unsettled[c as usize] && epochs[c as usize] == e);
            }
            list.push((cpu as u32, epoch));
        }
    }
}

/// PELT's period: 1024 units of 1024 ns (`accumulate_sum` shifts ns by 10, a period is 1024
/// of those): 1.048576 ms.
pub const PELT_PERIOD_NS: u64 = 1024 * 1024;
/// Periods over which a contribution halves (`LOAD_AVG_PERIOD`, y^32 = 1/2).
pub const PELT_HALF_LIFE_PERIODS: u64 = 32;
/// `y^k = 2^(−k/32)` for k = 0..31 whole periods (the kernel keeps them as
/// `runnable_avg_yN_inv`, 32-bit fixed point; these are the same values in f64).
pub const PELT_Y: [f64; 32] = [
    1.0,
    0.9785720620877001,
    0.9576032806985737,
    0.93708381705515,
    0.9170040432046712,
    0.8973545375015536,
    0.8781260801866497,
    0.859309649061239,
    0.8408964152537145,
    0.8228777390769825,
    0.8052451659746271,
    0.7879904225539432,
    0.7711054127039704,
    0.7545822137967114,
    0.7384130729697497,
    0.7225904034885233,
    std::f64::consts::FRAC_1_SQRT_2,
    0.691954940981916,
    0.6771277734684463,
    0.6626183215798707,
    0.6484197773255048,
    0.6345254785958666,
    0.620928906036742,
    0.6076236799902345,
    0.5946035575013605,
    0.5818624293887887,
    0.5693943173783458,
    0.5571933712979462,
    0.5452538663326288,
    0.5335702003384118,
    0.5221368912137069,
    0.5109485743270583,
];
/// The full scale of a task's PELT signals: the load weight of a nice-0 task after
/// `scale_load_down` (1024) and `SCHED_CAPACITY_SCALE` for runnable and util.
pub const PELT_SCALE: f64 = 1024.0;

/// PELT signals (Linux 6.x `kernel/sched/pelt.c`) in the compact form of a continuous
/// exponential average: each signal follows its indicator (1 while runnable, resp. running) with
/// the kernel's decay `y` per period, `y^32 = 1/2`:
///
/// ```text
///   s(t + Δ) = s(t) · y^(Δ/P) + ind · (1 − y^(Δ/P))      P = PELT_PERIOD_NS
///   load_avg = 1024 · load      runnable_avg = 1024 · runnable      util_avg = 1024 · util
/// ```
///
/// For a task the indicators are 0 or 1; for a CPU (its `cfs_rq`) they are the number of runnable
/// tasks and whether one runs, and a task's values are added when it attaches to the CPU and
/// taken away when it leaves it (`attach_entity_load_avg`, `remove_entity_load_avg`): by
/// linearity the CPU's signal stays the sum of its attached tasks' (blocked ones decaying).
/// The kernel sums whole periods (`accumulate_sum`, divider `LOAD_AVG_MAX − 1024 +
/// period_contrib`); this form is what those sums tend to and agrees with them at period
/// boundaries up to that divider's rounding (docs/policies/linux.md).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Pelt {
    /// Runnable-weighted average, as a share of the full weight (`load_avg / 1024`).
    pub load: f64,
    /// Runnable average (`runnable_avg / 1024`); differs from `load` only by its start value.
    pub runnable: f64,
    /// Running average (`util_avg / 1024`).
    pub util: f64,
    /// When the values were last brought up to date.
    pub at_ns: u64,
}

/// A task's or CPU's PELT signals at one instant, on the kernel's scale.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PeltAvg {
    pub load_avg: f64,
    pub runnable_avg: f64,
    pub util_avg: f64,
}

impl Pelt {
    /// `y^(Δ/P)`: the share of the old value left after `dt_ns`. Whole periods from the table
    /// [`PELT_Y`] (as the kernel's `decay_load` uses `runnable_avg_yN_inv`) and a power of two
    /// per 32 of them, the rest of a period by a short series: only IEEE additions and
    /// multiplications, so the same on every platform (`exp2` is not guaranteed to be).
    pub fn decay(dt_ns: u64) -> f64 {
        let periods = dt_ns / PELT_PERIOD_NS;
        let (halvings, k) = (
            periods / PELT_HALF_LIFE_PERIODS,
            periods % PELT_HALF_LIFE_PERIODS,
        );
        if halvings > 1000 {
            return 0.0;
        }
        // 2^−halvings, built from its exponent bits (exact).
        let half_powers = f64::from_bits((1023 - halvings) << 52);
        // y^(r/P) = e^x with x = −ln 2 · r / (32 P) in (−0.0217, 0]: six terms leave < 1e-16.
        let rest = (dt_ns % PELT_PERIOD_NS) as f64;
        let x = -std::f64::consts::LN_2 * rest / (PELT_HALF_LIFE_PERIODS * PELT_PERIOD_NS) as f64;
        let within = 1.0
            + x * (1.0
                + x / 2.0 * (1.0 + x / 3.0 * (1.0 + x / 4.0 * (1.0 + x / 5.0 * (1.0 + x / 6.0)))));
        PELT_Y[k as usize] * half_powers * within
    }

    /// The values at `now_ns` (not before `at_ns`) with `runnable` runnable tasks (0 or 1 for a
    /// task) and `running` (whether one runs) constant since `at_ns`.
    pub fn at(&self, now_ns: u64, runnable: f64, running: f64) -> Pelt {
        if now_ns <= self.at_ns {
            return *self;
        }
        let k = Self::decay(now_ns - self.at_ns);
        Pelt {
            load: self.load * k + runnable * (1.0 - k),
            runnable: self.runnable * k + runnable * (1.0 - k),
            util: self.util * k + running * (1.0 - k),
            at_ns: now_ns,
        }
    }

    /// On the kernel's scale.
    pub fn avg(&self) -> PeltAvg {
        PeltAvg {
            load_avg: self.load * PELT_SCALE,
            runnable_avg: self.runnable * PELT_SCALE,
            util_avg: self.util * PELT_SCALE,
        }
    }

    /// Adds a task's values (both up to date at the same instant).
    pub(crate) fn add(&mut self, t: &Pelt) {
        self.load += t.load;
        self.runnable += t.runnable;
        self.util += t.util;
    }

    /// Takes a task's values away (never below zero: float sums may round).
    pub(crate) fn sub(&mut self, t: &Pelt) {
        self.load = (self.load - t.load).max(0.0);
        self.runnable = (self.runnable - t.runnable).max(0.0);
        self.util = (self.util - t.util).max(0.0);
    }

    /// A new task's values when it first attaches to a CPU whose values are `cpu` (at the same
    /// instant): `init_entity_runnable_average` (full load weight) then
    /// `post_init_entity_util_avg` (util = the CPU's util × weight / (its load + 1), at most half
    /// the CPU's spare capacity, all of that half when the CPU has no util; runnable = util).
    pub fn new_task(cpu: &Pelt, now_ns: u64) -> Pelt {
        let (cpu_util, cpu_load) = (cpu.util * PELT_SCALE, cpu.load * PELT_SCALE);
        let cap = ((PELT_SCALE - cpu_util) / 2.0).max(0.0);
        let util = if cpu_util > 0.0 {
            (cpu_util * PELT_SCALE / (cpu_load + 1.0)).min(cap)
        } else {
            cap
        };
        Pelt {
            load: 1.0,
            runnable: util / PELT_SCALE,
            util: util / PELT_SCALE,
            at_ns: now_ns,
        }
    }
}

#[cfg(test)]
mod pelt_tests {
    use super::*;

    const HALF_LIFE_NS: u64 = PELT_PERIOD_NS * PELT_HALF_LIFE_PERIODS;

    #[test]
    fn the_decay_is_two_to_the_minus_periods_over_32() {
        for dt in [
            0,
            1,
            999,
            PELT_PERIOD_NS,
            7 * PELT_PERIOD_NS + 12_345,
            HALF_LIFE_NS,
            3 * HALF_LIFE_NS + 5,
            1_000_000_000,
        ] {
            let want = (-(dt as f64) / HALF_LIFE_NS as f64).exp2();
            assert!(
                (Pelt::decay(dt) - want).abs() < 1e-14,
                "{dt}: {} vs {want}",
                Pelt::decay(dt)
            );
        }
        assert_eq!(Pelt::decay(2 * HALF_LIFE_NS), 0.25);
        assert_eq!(Pelt::decay(u64::MAX), 0.0);
    }

    #[test]
    fn a_half_life_of_running_from_zero_gives_half_the_scale_and_two_give_three_quarters() {
        let p = Pelt::default();
        let one = p.at(HALF_LIFE_NS, 1.0, 1.0).avg();
        assert!((one.util_avg - 512.0).abs() < 1e-9, "{one:?}");
        assert!((one.load_avg - 512.0).abs() < 1e-9);
        let two = p.at(2 * HALF_LIFE_NS, 1.0, 1.0).avg();
        assert!((two.util_avg - 768.0).abs() < 1e-9, "{two:?}");
    }

    #[test]
    fn a_blocked_signal_halves_every_half_life_and_piecewise_updates_compose() {
        let full = Pelt {
            load: 1.0,
            runnable: 1.0,
            util: 1.0,
            at_ns: 0,
        };
        let later = full.at(HALF_LIFE_NS, 0.0, 0.0);
        assert!((later.avg().util_avg - 512.0).abs() < 1e-9);
        let step = full
            .at(HALF_LIFE_NS / 2, 0.0, 0.0)
            .at(HALF_LIFE_NS, 0.0, 0.0);
        assert!((step.util - later.util).abs() < 1e-12);
        // Runnable but not running: load and runnable hold, util decays.
        let waiting = full.at(HALF_LIFE_NS, 1.0, 0.0);
        assert!((waiting.load - 1.0).abs() < 1e-12 && (waiting.util - 0.5).abs() < 1e-12);
    }

    #[test]
    fn a_new_task_on_an_idle_cpu_gets_half_the_capacity_as_util_and_its_full_weight_as_load() {
        let t = Pelt::new_task(&Pelt::default(), 5).avg();
        assert_eq!(
            (t.load_avg, t.util_avg, t.runnable_avg),
            (1024.0, 512.0, 512.0)
        );
        // CPU util 512, load 1023: util = 512·1024/1024 = 512, capped at (1024 − 512)/2 = 256.
        let cpu = Pelt {
            load: 1023.0 / 1024.0,
            runnable: 1.0,
            util: 0.5,
            at_ns: 0,
        };
        assert_eq!(Pelt::new_task(&cpu, 0).avg().util_avg, 256.0);
    }
}

/// `2^−n` (0 beyond the smallest normal power), exact: built from its exponent bits.
fn half_pow(n: u64) -> f64 {
    if n > 1022 {
        0.0
    } else {
        f64::from_bits((1023 - n) << 52)
    }
}

/// A running average with a half-life: sched_ext's `ravg_data` (scx `ravg_impl.bpf.h`,
/// `ravg_accumulate` and `ravg_read`; read in user space by scx_utils' `ravg_read`, whose f64
/// form this is), e.g. a task's duty cycle (its value 1 while runnable, 0 otherwise:
/// scx_rusty's `task_load_adj`).
///
/// ```text
///   time in periods of the half-life H, aligned on multiples of H (now / H is the period)
///   old  = Σ over the completed periods k back (k = 1 the last): mean value in it / 2^k
///   cur  = Σ value × duration / H over the current period so far
///   read = old                                     at a period boundary
///        = old · (1 − E/(2H)) + cur / 2            E = now mod H into the period
/// ```
///
/// The average of a value held at 1 from a boundary reads 1/2 after one half-life, 3/4 after
/// two; a value held at 1 forever reads 1 − 2^−20 (the source folds full periods with a table
/// of 20 sums, kept here), and one held at 0 halves every half-life. Zero is the start (as the
/// source's zeroing). The source keeps `old` and `cur` in fixed point with 20 fractional bits
/// and rounds each duration up; this keeps them in f64, as its user-space reader does.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Ravg {
    /// The value since `val_at`.
    val: f64,
    val_at: u64,
    old: f64,
    cur: f64,
}

impl Ravg {
    /// `ravg_accumulate`: the value changes to `new_val` at `now_ns` (not before the last
    /// change: an earlier instant counts as that one).
    pub fn accumulate(&mut self, new_val: f64, now_ns: u64, half_life_ns: u64) {
        let h = half_life_ns;
        let now = now_ns.max(self.val_at);
        let delta = now / h - self.val_at / h;
        if delta > 0 {
            // Decay `old` to the period before now's, folding the period `cur` covered in.
            let d = half_pow(delta);
            self.old = self.old * d + self.cur * d;
            self.cur = 0.0;
        }
        if self.val != 0.0 {
            let norm = |dur: u64| dur as f64 / h as f64;
            if delta > 0 {
                // The oldest period, maybe partial; the full ones in between (the source's
                // table of 20 sums: 1 − 2^−k, the same from k = 20 on); the current one.
                self.old += self.val * norm(h - self.val_at % h) * half_pow(delta);
                if delta > 1 {
                    self.old += self.val * (1.0 - half_pow((delta - 1).min(20)));
                }
                self.cur += self.val * norm(now % h);
            } else {
                self.cur += self.val * norm(now - self.val_at);
            }
        }
        self.val = new_val;
        self.val_at = now;
    }

    /// `ravg_read`: the average at `now_ns`, from a copy brought up to then (the average
    /// itself unchanged).
    pub fn read(&self, now_ns: u64, half_life_ns: u64) -> f64 {
        let mut t = *self;
        let now = now_ns.max(self.val_at);
        t.accumulate(0.0, now, half_life_ns);
        let elapsed = now % half_life_ns;
        if elapsed == 0 {
            t.old
        } else {
            let progress = elapsed as f64 / half_life_ns as f64;
            t.old * (1.0 - progress / 2.0) + t.cur / 2.0
        }
    }

    /// The value since the last change.
    pub fn value(&self) -> f64 {
        self.val
    }
}

#[cfg(test)]
mod ravg_tests {
    use super::*;

    const H: u64 = 1_000_000_000;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn runnable_for_one_half_life_from_zero_reads_a_half_and_for_two_three_quarters() {
        let mut r = Ravg::default();
        r.accumulate(1.0, 0, H);
        assert_eq!(r.read(H, H), 0.5);
        assert_eq!(r.read(2 * H, H), 0.75);
        // Mid-period: old 0.5 blended with the half period run so far,
        // 0.5 · (1 − 0.25) + 0.5 / 2 = 0.625.
        assert!(
            close(r.read(H + H / 2, H), 0.625),
            "{}",
            r.read(H + H / 2, H)
        );
        // A quarter into the first period: old 0, cur 0.25, read 0.125.
        assert!(close(r.read(H / 4, H), 0.125));
        // Runnable forever: the source's cap, 1 − 2^−20.
        assert_eq!(r.read(100 * H, H), 1.0 - half_pow(20));
    }

    #[test]
    fn a_task_alternating_runnable_and_blocked_reads_the_hand_computed_value() {
        // Runnable the first half of every half-life, blocked the second half, from 0.
        let mut r = Ravg::default();
        for k in 0..3 {
            r.accumulate(1.0, k * H, H);
            r.accumulate(0.0, k * H + H / 2, H);
        }
        // Each period's mean is 1/2: at 3H, old = 1/2 (1/2 + 1/4 + 1/8) = 7/16.
        assert!(close(r.read(3 * H, H), 7.0 / 16.0), "{}", r.read(3 * H, H));
        // At 2.5H (runnable in [2H, 2.5H)): old at 2H = 1/2 (1/2 + 1/4) = 3/8, cur = 1/2:
        // 3/8 · (1 − 1/4) + 1/4 = 17/32.
        let mut s = Ravg::default();
        for k in 0..2 {
            s.accumulate(1.0, k * H, H);
            s.accumulate(0.0, k * H + H / 2, H);
        }
        s.accumulate(1.0, 2 * H, H);
        assert!(close(s.read(2 * H + H / 2, H), 17.0 / 32.0));
        // Blocked from 3H on: halves every half-life.
        assert!(close(r.read(5 * H, H), 7.0 / 64.0));
    }

    #[test]
    fn reading_changes_nothing_and_a_change_to_the_same_value_changes_nothing() {
        let mut a = Ravg::default();
        a.accumulate(1.0, 300, H);
        let mut b = a;
        let _ = b.read(H / 3, H);
        let _ = b.read(7 * H, H);
        assert_eq!(a, b);
        // Splitting an interval at a change to the same value gives the same reads.
        b.accumulate(1.0, H + 17, H);
        a.accumulate(0.0, 2 * H + 5, H);
        b.accumulate(0.0, 2 * H + 5, H);
        assert!(close(a.read(3 * H + 1, H), b.read(3 * H + 1, H)));
    }
}
