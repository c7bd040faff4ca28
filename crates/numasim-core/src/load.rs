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

/// Load weight of a nice-0 task (`NICE_0_LOAD` / `SCHED_LOAD_SCALE` in 2.6.18).
pub const NICE_0_LOAD: u64 = 128;

/// Per-tick decayed CPU load (2.6.18 `update_load` in `scheduler_tick`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct LoadAvg {
    pub(crate) cpu_load: [u64; 3],
    /// Index of the last tick applied.
    pub(crate) tick: u64,
}

impl LoadAvg {
    /// The averages after applying ticks up to `now_tick` with a constant `raw` load.
    pub(crate) fn at(&self, now_tick: u64, raw: u64) -> [u64; 3] {
        let mut l = self.cpu_load;
        let mut t = self.tick;
        while t < now_tick {
            let before = l;
            for (i, v) in l.iter_mut().enumerate() {
                let scale = 1u64 << i;
                *v = (*v * (scale - 1) + raw) / scale;
            }
            t += 1;
            if l == before {
                break; // converged: further ticks change nothing
            }
        }
        l
    }

    pub(crate) fn caught_up(self, now_tick: u64, raw: u64) -> Self {
        if now_tick <= self.tick {
            return self;
        }
        Self {
            cpu_load: self.at(now_tick, raw),
            tick: now_tick,
        }
    }
}
