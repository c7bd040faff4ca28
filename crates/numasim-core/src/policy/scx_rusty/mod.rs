//! `scx-rusty`: sched_ext's scx_rusty (sched-ext/scx, `scheds/rust/scx_rusty`, commit
//! 7a58a3a), modelled rule by rule from its source (docs/policies/scx-rusty.md).

pub mod load_balance;
pub mod tuner;
