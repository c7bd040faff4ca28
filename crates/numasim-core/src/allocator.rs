//! jemalloc as the global allocator, for what links this crate with the `jemalloc` feature: the
//! Python extension (`numasim._core`) and this crate's own tests, examples and benches. The
//! library alone chooses nothing.
//!
//! Why (docs/PERFORMANCE.md, "How the engine is made fast"): glibc's malloc gives a run's freed memory
//! back to the OS (its heap top is trimmed, its large blocks unmapped), and the next run in the
//! same process faults it in again, page by page: about 100 page faults a run of bench (a)
//! (500 processes on mehta-m1), whose engine phase is 19–24 % faster without them. jemalloc
//! keeps freed pages for reuse (it returns them after seconds unused), so an experiment
//! worker's runs, and a benchmark's repeated runs, reuse warm memory. Results do not depend on
//! the allocator (the fingerprint test and `examples/equivalence` run under it).

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;
