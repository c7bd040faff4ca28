//! Watching a run from outside: the engine hands a [`Watch`] the run's [`Progress`] every
//! [`WATCH_EVERY_EVENTS`] events, and stops when the watch says so. It is how a caller shows
//! progress or stops a long run (the Python bindings check for Ctrl-C there) without the engine
//! knowing who asks or why.
//!
//! ```text
//!   event loop ── every WATCH_EVERY_EVENTS events ──► watch.check(&Progress)
//!        ▲                                                 │
//!        └──────── Continue: go on │ Break: return Stopped(progress) ◄┘
//!
//!   Paced(watch): asks the watch inside at most once every PACE_MS of wall-clock time
//! ```
//!
//! 1. The loop counts events; when the count is a multiple of [`WATCH_EVERY_EVENTS`] and a
//!    watch was given, it asks the watch with the run's progress so far.
//! 2. `ControlFlow::Continue` goes on; `ControlFlow::Break` ends the run at once: the caller
//!    gets [`Outcome::Stopped`] with the progress it had reached, and no result.
//! 3. A watch whose question is costly goes inside [`Paced`], which reads the clock when asked
//!    and passes the question on only when [`PACE_MS`] have passed since it last did.
//!
//! Events cost from tens of nanoseconds (a few CPUs) to tens of microseconds (a hundred
//! thousand threads on 32 CPUs, where each balancing pass examines thousands of tasks), so a
//! count of events alone cannot promise an answer in time: the count is small, which keeps the
//! slowest runs answering within a few milliseconds, and the clock paces the real question.
//!
//! A watch reads nothing of the simulation's state but the progress, and the engine changes
//! nothing when asking: a run with a watch that never stops it is the run without one, bit for
//! bit. Known limits: a watch is asked between events, so one very long event (a balancing
//! pass over thousands of CPUs) delays the question by that much.

use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use super::RunResult;

/// How often the engine asks its watch, in events: a power of two (a mask test per event).
/// 256 of the slowest events known (30 µs each: `app=canneal:100000` on mehta-m1) take 8 ms;
/// asking costs a call and, in [`Paced`], a clock read (about 25 ns), 0.1 ns an event.
pub const WATCH_EVERY_EVENTS: u64 = 1 << 8;

/// How often [`Paced`] passes the question on, in milliseconds of wall-clock time: fast enough
/// for a progress display and for Ctrl-C to feel immediate.
pub const PACE_MS: u64 = 20;

/// Where a run stands when its watch is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Progress {
    /// The simulated time reached.
    pub now_ns: u64,
    /// Events handled so far.
    pub events: u64,
    /// Processes completed.
    pub done: usize,
    /// Processes of the workload.
    pub processes: usize,
    /// The latest arrival of the workload: the run lasts at least until then.
    pub last_arrival_ns: u64,
}

/// What the engine asks while it runs (see the module doc). Closures taking `&Progress` and
/// returning a `ControlFlow<()>` are watches.
pub trait Watch {
    /// `ControlFlow::Break(())` stops the run.
    fn check(&mut self, progress: &Progress) -> ControlFlow<()>;
}

impl<F: FnMut(&Progress) -> ControlFlow<()>> Watch for F {
    fn check(&mut self, progress: &Progress) -> ControlFlow<()> {
        self(progress)
    }
}

/// How a watched run ended.
#[derive(Debug)]
pub enum Outcome {
    /// Every process completed: the run's result.
    Finished(Box<RunResult>),
    /// The watch stopped the run at this progress; nothing of it is kept.
    Stopped(Progress),
}

impl Outcome {
    /// The result of a finished run; `None` if the watch stopped it.
    pub fn finished(self) -> Option<RunResult> {
        match self {
            Outcome::Finished(r) => Some(*r),
            Outcome::Stopped(_) => None,
        }
    }
}

/// A watch asked at most once every [`PACE_MS`] of wall-clock time (step 3 of the module doc);
/// between two questions the run goes on.
#[derive(Debug)]
pub struct Paced<W> {
    /// The watch asked.
    pub inner: W,
    next: Instant,
}

impl<W: Watch> Paced<W> {
    /// `inner`, first asked [`PACE_MS`] from now.
    pub fn new(inner: W) -> Self {
        Self {
            inner,
            next: Instant::now() + Duration::from_millis(PACE_MS),
        }
    }
}

impl<W: Watch> Watch for Paced<W> {
    fn check(&mut self, progress: &Progress) -> ControlFlow<()> {
        let now = Instant::now();
        if now < self.next {
            return ControlFlow::Continue(());
        }
        self.next = now + Duration::from_millis(PACE_MS);
        self.inner.check(progress)
    }
}
