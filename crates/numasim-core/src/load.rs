//! Load tracking: what a CPU's load is, as balancers read it.
//!
//! ```text
//!   raw load      = NICE_0_LOAD × nr_running                (2.6.18 raw_weighted_load)
//!   cpu_load[i]   = (cpu_load[i] · (2^i − 1) + raw) / 2^i   per tick, i = 0..2 (update_load)
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

/// A group's sums at every load index (what is kept; [`GroupLoad`] is one index of it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct GroupSums {
    nr_running: u64,
    raw: u64,
    source: [u64; 4],
    target: [u64; 4],
    avg_source: [u64; 4],
    avg_target: [u64; 4],
}

impl GroupSums {
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

    /// Takes back what [`GroupSums::add`] added for a CPU with `nr` tasks and averages `avg`.
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

    /// Sets the averages of a group of `cpus` CPUs once its CPUs are added.
    pub(crate) fn finish(&mut self, cpus: usize) {
        let power = NICE_0_LOAD * cpus as u64;
        for i in 0..4 {
            self.avg_source[i] = self.source[i] * NICE_0_LOAD / power;
            self.avg_target[i] = self.target[i] * NICE_0_LOAD / power;
        }
    }

    fn at(&self, idx: usize) -> GroupLoad {
        GroupLoad {
            nr_running: self.nr_running,
            raw: self.raw,
            source: self.source[idx],
            target: self.target[idx],
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
}

#[derive(Debug, Default)]
struct Kept {
    /// Per group id: (first tick, last tick they hold for; the sums); none when first > last.
    sums: Vec<(u64, u64, GroupSums)>,
    /// Per group id: what its settled CPUs contribute (averages not set).
    settled: Vec<GroupSums>,
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
    /// of zero at no load: settled).
    pub(crate) fn new(weights: Vec<usize>, cpus: usize) -> Self {
        let groups = weights.len();
        Self {
            inner: std::cell::RefCell::new(Kept {
                sums: vec![(1, 0, GroupSums::default()); groups],
                settled: vec![GroupSums::default(); groups],
                unsettled: vec![Vec::new(); groups],
                nr: vec![0; cpus],
                in_unsettled: vec![false; cpus],
                epoch: vec![0; cpus],
            }),
            weights,
        }
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
        let mut sums = kept.settled[g];
        let mut list = std::mem::take(&mut kept.unsettled[g]);
        list.retain(|&(cpu, epoch)| {
            let c = cpu as usize;
            if !kept.listed(c, epoch) {
                return false; // stale
            }
            let (nr, avg, settled) = read(c);
            debug_assert_eq!(nr, kept.nr[c], "every runqueue change was reported");
            sums.add(nr, avg);
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
        sums.finish(self.weights[g]);
        kept.sums[g] = (tick, if all_settled { u64::MAX } else { tick }, sums);
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
            let entry = &mut kept.sums[id as usize];
            if (entry.0..=entry.1).contains(&tick) {
                entry.2.remove(old, avg);
                entry.2.add(nr, avg);
                entry.2.finish(self.weights[id as usize]);
                (entry.0, entry.1) = (tick, tick);
            } else {
                (entry.0, entry.1) = (1, 0);
            }
        }
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
