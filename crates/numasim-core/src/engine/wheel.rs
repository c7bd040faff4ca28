//! The periodic-balancing timers that fall on a tick within the next [`WINDOW_TICKS`] ticks, in
//! a ring of per-tick buckets instead of the event heap (docs/engine.md).
//!
//! ```text
//!   bucket[k mod W]: the timers due at tick k, in the order they were scheduled
//!   head: the earliest non-empty tick, and the key of its bucket's first timer
//! ```
//!
//! Every shipped policy asks for its balancing at a tick (linux26's `last_balance` advances by
//! whole ticks, and the engine never sets a timer before the next tick), and most events of a
//! run with idle CPUs are those timers. A bucket is appended to in scheduling order, which is
//! sequence order, so its front is its smallest key; the earliest bucket's front is the
//! wheel's. The engine takes whichever of the heap's top and the wheel's front has the smaller
//! `(time, sequence)` key: the keys and so the order of events are those of one heap holding
//! everything. What a bucket costs is an append and a read at its front, where the heap sifts
//! through its levels (a cache miss each on a big machine). Timers off a tick boundary or
//! beyond the window go to the heap.
//!
//! Every timer waiting here is at the current tick or later, and within the window of the tick
//! it was set at, so the pending ticks lie in `[now_tick, now_tick + W)` and no two share a
//! bucket; a bucket is emptied (popped to its end) before the clock leaves its tick, and only a
//! tick after the current one is ever appended to, never the bucket being popped. The timers
//! live in the slots of one vector, a bucket being a list of them, so that a run allocates no
//! bucket of its own and a freed slot is reused while it is still in the cache.

use super::key;
use crate::machine::CpuId;

/// Ticks of the window (the ring's buckets): 512 ms at the default 1 ms tick, more than the
/// longest balancing interval of a busy CPU at a level inside a node (2.6.18's 4 ms × 64).
pub(super) const WINDOW_TICKS: u64 = 512;

/// No slot (the end of a bucket or of the free list).
const NONE: u32 = u32::MAX;

/// A timer: its sequence number (its place among events at one instant), the generation it was
/// set with (`CpuState::balance_gen`), its CPU, and the next slot of its bucket (or of the
/// free list).
#[derive(Debug, Clone, Copy)]
struct Slot {
    seq: u64,
    gen: u64,
    cpu: u32,
    next: u32,
}

/// The timers, each in a slot of one vector; a bucket is a list of slots, first to last in the
/// order they were set (no allocation per bucket: a run's buckets start empty, and freed slots
/// are reused).
#[derive(Debug)]
pub(super) struct Wheel {
    tick_ns: u64,
    /// `tick_ns` as a u32 divisor (a 32-bit division: every offset in the window fits), or 0
    /// when the window does not fit in 32 bits of ns (then everything goes to the heap).
    tick_ns_32: u32,
    slots: Vec<Slot>,
    /// The first free slot.
    free: u32,
    /// Per bucket: its first and last slot.
    buckets: Vec<(u32, u32)>,
    /// The earliest pending tick (`u64::MAX` when empty), its time in ns, and the key of its
    /// first timer (`u128::MAX` when empty).
    head_tick: u64,
    head_ns: u64,
    head_key: u128,
    /// Pending timers.
    len: usize,
}

impl Wheel {
    pub(super) fn new(tick_ns: u64) -> Self {
        let fits = tick_ns
            .checked_mul(WINDOW_TICKS)
            .is_some_and(|w| w <= u64::from(u32::MAX));
        Self {
            tick_ns,
            tick_ns_32: if fits { tick_ns as u32 } else { 0 },
            slots: Vec::new(),
            free: NONE,
            buckets: vec![(NONE, NONE); WINDOW_TICKS as usize],
            head_tick: u64::MAX,
            head_ns: u64::MAX,
            head_key: u128::MAX,
            len: 0,
        }
    }

    /// Schedules the timer `(seq, cpu, gen)` at `t` ns, the clock being at tick `now_tick`
    /// (`t` after it); false, and nothing done, when `t` is not on a tick or beyond the window:
    /// the heap takes it.
    #[inline]
    pub(super) fn push(&mut self, t: u64, now_tick: u64, seq: u64, cpu: CpuId, gen: u64) -> bool {
        let base = now_tick * self.tick_ns;
        debug_assert!(t > base, "a timer is set after the current tick");
        let offset = t - base;
        if self.tick_ns_32 == 0 || offset >= WINDOW_TICKS * self.tick_ns {
            return false;
        }
        let offset = offset as u32;
        let ahead = offset / self.tick_ns_32;
        if ahead * self.tick_ns_32 != offset {
            return false; // not on a tick
        }
        let tick = now_tick + u64::from(ahead);
        let slot = Slot {
            seq,
            gen,
            cpu: cpu as u32,
            next: NONE,
        };
        let i = if self.free == NONE {
            self.slots.push(slot);
            (self.slots.len() - 1) as u32
        } else {
            let i = self.free;
            self.free = self.slots[i as usize].next;
            self.slots[i as usize] = slot;
            i
        };
        let b = (tick % WINDOW_TICKS) as usize;
        let (first, last) = self.buckets[b];
        debug_assert!(
            last == NONE || self.slots[last as usize].seq < seq,
            "in sequence order"
        );
        if last == NONE {
            self.buckets[b] = (i, i);
        } else {
            self.slots[last as usize].next = i;
            self.buckets[b] = (first, i);
        }
        if tick < self.head_tick {
            debug_assert_eq!(last, NONE, "an earlier tick's bucket was empty");
            self.head_tick = tick;
            self.head_ns = t;
            self.head_key = key(t, seq);
        }
        self.len += 1;
        true
    }

    /// The earliest timer's key, `time << 64 | sequence` (as `Scheduled::key`), or `u128::MAX`
    /// when there is none.
    #[inline]
    pub(super) fn head_key(&self) -> u128 {
        self.head_key
    }

    /// Takes the earliest timer: `(time, cpu, gen)`. The wheel must not be empty.
    #[inline]
    pub(super) fn pop(&mut self) -> (u64, CpuId, u64) {
        let b = (self.head_tick % WINDOW_TICKS) as usize;
        let i = self.buckets[b].0;
        let slot = self.slots[i as usize];
        let t = self.head_ns;
        self.slots[i as usize].next = self.free;
        self.free = i;
        self.len -= 1;
        if slot.next == NONE {
            self.buckets[b] = (NONE, NONE);
            self.advance_head();
        } else {
            self.buckets[b].0 = slot.next;
            self.head_key = key(t, self.slots[slot.next as usize].seq);
        }
        (t, slot.cpu as CpuId, slot.gen)
    }

    /// After the head's bucket emptied: the next non-empty tick, if any.
    #[cold]
    fn advance_head(&mut self) {
        if self.len == 0 {
            self.head_tick = u64::MAX;
            self.head_ns = u64::MAX;
            self.head_key = u128::MAX;
            return;
        }
        // Pending ticks lie within WINDOW_TICKS of the head: the first non-empty bucket after it.
        let (tick, first) = (1..WINDOW_TICKS)
            .map(|ahead| self.head_tick + ahead)
            .find_map(|tick| {
                let first = self.buckets[(tick % WINDOW_TICKS) as usize].0;
                (first != NONE).then_some((tick, first))
            })
            .expect("a pending timer within the window");
        self.head_tick = tick;
        self.head_ns = tick * self.tick_ns;
        self.head_key = key(self.head_ns, self.slots[first as usize].seq);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pops everything as `(time, seq)`.
    fn drain(w: &mut Wheel) -> Vec<(u64, u64)> {
        std::iter::from_fn(|| {
            let key = Some(w.head_key()).filter(|&k| k != u128::MAX)?;
            let (t, _, _) = w.pop();
            assert_eq!(t, (key >> 64) as u64);
            Some((t, key as u64))
        })
        .collect()
    }

    #[test]
    fn timers_come_by_tick_then_in_the_order_they_were_set() {
        let mut w = Wheel::new(1_000);
        // Set at tick 0: ticks 3, 1, 3, 2 (sequences 1-4); one off a tick; one beyond the window.
        assert!(w.push(3_000, 0, 1, 0, 0));
        assert!(w.push(1_000, 0, 2, 1, 0));
        assert!(w.push(3_000, 0, 3, 2, 0));
        assert!(w.push(2_000, 0, 4, 3, 0));
        assert!(!w.push(2_500, 0, 5, 4, 0), "off a tick");
        assert!(
            !w.push(WINDOW_TICKS * 1_000, 0, 6, 5, 0),
            "beyond the window"
        );
        assert_eq!(w.head_key(), (1_000u128 << 64) | 2);
        assert_eq!(w.pop(), (1_000, 1, 0));
        // Set at tick 1, after those: tick 3 again (after sequences 1 and 3) and the last tick
        // of the window, which wraps onto bucket 0.
        assert!(w.push(3_000, 1, 7, 6, 0));
        assert!(w.push(WINDOW_TICKS * 1_000, 1, 8, 7, 0));
        assert_eq!(
            drain(&mut w),
            [
                (2_000, 4),
                (3_000, 1),
                (3_000, 3),
                (3_000, 7),
                (WINDOW_TICKS * 1_000, 8)
            ]
        );
        assert_eq!(w.head_key(), u128::MAX);
    }

    #[test]
    fn an_earlier_tick_set_later_becomes_the_head_and_the_ring_is_reused() {
        let mut w = Wheel::new(1_000);
        assert!(w.push(400_000, 0, 1, 0, 0));
        assert!(w.push(5_000, 0, 2, 1, 0));
        assert_eq!(w.pop(), (5_000, 1, 0));
        // From tick 5, a timer 510 ticks on lands in bucket 3 while tick 400's waits in bucket 400.
        assert!(w.push(515_000, 5, 3, 2, 0));
        assert_eq!(drain(&mut w), [(400_000, 1), (515_000, 3)]);
        // Later laps of the ring reuse the buckets.
        for lap in 1..4u64 {
            let now_tick = lap * WINDOW_TICKS;
            assert!(w.push((now_tick + 1) * 1_000, now_tick, 10 + lap, 0, lap));
            assert_eq!(w.pop(), ((now_tick + 1) * 1_000, 0, lap));
        }
    }

    #[test]
    fn a_tick_too_long_for_32_bits_sends_everything_to_the_heap() {
        let mut w = Wheel::new(u64::from(u32::MAX));
        assert!(!w.push(u64::from(u32::MAX), 0, 1, 0, 0));
        assert_eq!(w.head_key(), u128::MAX);
    }
}
