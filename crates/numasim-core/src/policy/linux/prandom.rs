//! The kernel's `prandom` generator (`lib/random32.c`, `include/linux/prandom.h`), which
//! `sched_rng()` draws from for `NI_RANDOM`: L'Ecuyer's maximally equidistributed combined
//! Tausworthe generator (lfsr113), four 32-bit components.
//!
//! ```text
//!   struct rnd_state   s1 ≥ 2, s2 ≥ 8, s3 ≥ 16, s4 ≥ 128   (u32 each; one per CPU in linux)
//! ```
//!
//! 1. Seed ([`Prandom::seeded`], `prandom_seed_early`): each component is the previous one (the
//!    seed for s1) times the LCG's 69069, plus its minimum if below it; then ten draws
//!    thrown away (`prandom_warmup`).
//! 2. Draw ([`Prandom::next_u32`], `prandom_u32_state`): each component takes one step of its
//!    Tausworthe recurrence; the draw is the four XORed.
//!
//! Known limit: the kernel seeds `sched_rnd_state` per CPU from the entropy pool at boot
//! (`prandom_init_once` → `prandom_seed_full_state`); a simulation must be repeatable, so
//! numasim seeds it from a 32-bit number derived from the run's workload and the CPU
//! ([`Prandom::for_cpu`]): the kernel's sequence, not a real boot's draws.

/// One `struct rnd_state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prandom {
    s: [u32; 4],
}

/// `__seed(x, m)`: a component must be at least `m` (the lfsr113 seeding condition).
fn seed_at_least(x: u32, m: u32) -> u32 {
    if x < m {
        x.wrapping_add(m)
    } else {
        x
    }
}

/// The "super-duper" LCG of `prandom_seed_early`.
fn lcg(x: u32) -> u32 {
    x.wrapping_mul(69069)
}

impl Prandom {
    /// `prandom_seed_early(state, seed, false)` then `prandom_warmup`.
    pub fn seeded(seed: u32) -> Self {
        let s1 = seed_at_least(lcg(seed), 2);
        let s2 = seed_at_least(lcg(s1), 8);
        let s3 = seed_at_least(lcg(s2), 16);
        let s4 = seed_at_least(lcg(s3), 128);
        let mut r = Self {
            s: [s1, s2, s3, s4],
        };
        for _ in 0..10 {
            r.next_u32();
        }
        r
    }

    /// The generator of `cpu` for a run whose workload digest is `run_seed`
    /// (`View::run_seed`): seeded with the digest mixed with the CPU number.
    pub fn for_cpu(run_seed: u64, cpu: usize) -> Self {
        let mut z = run_seed ^ (cpu as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        // splitmix64's finaliser, folded to 32 bits.
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        Self::seeded((z ^ (z >> 32)) as u32)
    }

    /// `prandom_u32_state`.
    pub fn next_u32(&mut self) -> u32 {
        fn taus(s: u32, a: u32, b: u32, c: u32, d: u32) -> u32 {
            ((s & c) << d) ^ (((s << a) ^ s) >> b)
        }
        let s = &mut self.s;
        s[0] = taus(s[0], 6, 13, 4_294_967_294, 18);
        s[1] = taus(s[1], 2, 27, 4_294_967_288, 2);
        s[2] = taus(s[2], 13, 21, 4_294_967_280, 7);
        s[3] = taus(s[3], 3, 12, 4_294_967_168, 13);
        s[0] ^ s[1] ^ s[2] ^ s[3]
    }
}

#[cfg(test)]
mod tests {
    use super::Prandom;

    /// `prandom_state_selftest`'s seed-boundary vectors (`lib/random32.c`): seeded early, warmed
    /// up, the next draw.
    #[test]
    fn the_kernel_s_self_test_vectors() {
        for (seed, want) in [
            (1, 3_484_351_685u32),
            (2, 2_623_130_059),
            (3, 3_125_133_893),
            (4, 984_847_254),
        ] {
            assert_eq!(Prandom::seeded(seed).next_u32(), want, "seed {seed}");
        }
        // And one of its GSL taus113 vectors: seed 931557656, the 959th draw.
        let mut r = Prandom::seeded(931_557_656);
        let got = (0..959).map(|_| r.next_u32()).last();
        assert_eq!(got, Some(2_975_593_782));
    }
}
