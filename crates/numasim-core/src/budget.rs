//! Memory budget of a run: refuse, with one line, a workload whose run would not fit in memory,
//! before allocating it (a 10⁸-process workload used to allocate 12 GB and abort the process).
//!
//! ```text
//!   estimate(n, cpus) = n × (WORKLOAD + ENGINE + RESULT bytes per process)
//!                     + cpus × BYTES_PER_CPU + FIXED_BYTES
//!   available         = MemAvailable in /proc/meminfo (None where it cannot be read)
//!   refuse when estimate > available
//! ```
//!
//! 1. The per-process figures are measured, not derived: peak RSS of `numasim run` (which holds
//!    the workload, the engine state, the result, its JSON text and the Python objects made
//!    from it at once) at several sizes, the slope taken per process, rounded up (see
//!    docs/PERFORMANCE.md, "Memory per process").
//! 2. The check runs where a workload is made from a spec (`WorkloadSpec::generate`, so nothing
//!    is allocated for an `n` that cannot be run) and where a workload read from a file is
//!    checked against its machine (`Workload::validate`).
//!
//! Limits: the estimate is for runs without `--trace` slices (a trace adds a slice per context
//! switch, which depends on the schedule); where `/proc/meminfo` cannot be read (not Linux) no
//! check is made.

use crate::error::{InputError, Result};

/// Bytes per process of the workload itself (`Process` and its `Vec` slot).
pub const WORKLOAD_BYTES_PER_PROCESS: u64 = 100;
/// Bytes per process of the engine's state (runqueue slots, per-process accounting, events).
pub const ENGINE_BYTES_PER_PROCESS: u64 = 400;
/// Bytes per process of the result: `ProcResult`, its JSON text, and the Python dict and
/// DataFrame row made from that text.
pub const RESULT_BYTES_PER_PROCESS: u64 = 4_500;
/// Bytes per CPU (runqueues, per-CPU statistics, per-CPU JSON).
pub const BYTES_PER_CPU: u64 = 4_096;
/// The interpreter, libraries and the machine: what a one-process run already takes.
pub const FIXED_BYTES: u64 = 200 << 20;

/// Bytes a run of `processes` processes on `cpus` CPUs needs, at most (to the measurements'
/// accuracy).
pub fn estimate_run_bytes(processes: usize, cpus: usize) -> u64 {
    let per_process =
        WORKLOAD_BYTES_PER_PROCESS + ENGINE_BYTES_PER_PROCESS + RESULT_BYTES_PER_PROCESS;
    (processes as u64)
        .saturating_mul(per_process)
        .saturating_add((cpus as u64).saturating_mul(BYTES_PER_CPU))
        .saturating_add(FIXED_BYTES)
}

/// `MemAvailable` of `/proc/meminfo` text, in bytes.
pub fn mem_available_from_meminfo(text: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let rest = line.strip_prefix("MemAvailable:")?;
        let mut parts = rest.split_whitespace();
        let kib: u64 = parts.next()?.parse().ok()?;
        (parts.next() == Some("kB")).then(|| kib.saturating_mul(1024))
    })
}

/// The memory available now (`MemAvailable` of `/proc/meminfo`), if it can be read.
///
/// Into a buffer of its usual size at once: the file reports a size of 0, so
/// `fs::read_to_string` grew its buffer by reallocation, six times for 1.5 kB, at every run.
pub fn available_bytes() -> Option<u64> {
    use std::io::Read;
    let mut text = String::with_capacity(8 << 10);
    std::fs::File::open("/proc/meminfo")
        .ok()?
        .read_to_string(&mut text)
        .ok()?;
    mem_available_from_meminfo(&text)
}

fn gb(bytes: u64) -> String {
    format!("{:.1} GB", bytes as f64 / 1e9)
}

/// Refuses a run of `processes` processes on `cpus` CPUs that needs more than `available`
/// bytes (`None`: unknown, no check). `origin` and `location` name the input that sets the
/// size (`--workload`, `key n`; or a workload file).
pub fn check_run(
    origin: &str,
    location: &str,
    processes: usize,
    cpus: usize,
    available: Option<u64>,
) -> Result<()> {
    let Some(available) = available else {
        return Ok(());
    };
    let needed = estimate_run_bytes(processes, cpus);
    if needed <= available {
        return Ok(());
    }
    // An empty `location` leaves the error unplaced (`InputError` prints none).
    Err(InputError::new(
        origin,
        format!(
            "{processes} processes need about {} of memory to run (estimate), but only {} is \
             available (MemAvailable in /proc/meminfo); use fewer processes",
            gb(needed),
            gb(available)
        ),
    )
    .at(location))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_mem_available() {
        let text = "MemTotal:       24000000 kB\nMemFree:  1 kB\nMemAvailable:   2000000 kB\n";
        assert_eq!(mem_available_from_meminfo(text), Some(2_048_000_000));
        assert_eq!(mem_available_from_meminfo("MemTotal: 5 kB\n"), None);
        assert_eq!(mem_available_from_meminfo("MemAvailable: x kB\n"), None);
    }

    #[test]
    fn refuses_what_does_not_fit_and_accepts_what_does() {
        let four_gb = Some(4_000_000_000);
        // 10⁸ processes: far above 4 GB.
        let e = check_run("--workload", "key n", 100_000_000, 32, four_gb).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "--workload: key n: 100000000 processes need about {} of memory to run \
                 (estimate), but only 4.0 GB is available (MemAvailable in /proc/meminfo); use \
                 fewer processes",
                gb(estimate_run_bytes(100_000_000, 32))
            )
        );
        assert!(check_run("--workload", "key n", 100_000, 32, four_gb).is_ok());
        // Unknown availability: no check.
        assert!(check_run("--workload", "key n", 100_000_000, 32, None).is_ok());
        // The boundary is the estimate itself.
        let exact = estimate_run_bytes(1000, 4);
        assert!(check_run("w", "", 1000, 4, Some(exact)).is_ok());
        assert!(check_run("w", "", 1000, 4, Some(exact - 1)).is_err());
    }

    #[test]
    fn estimate_saturates_instead_of_overflowing() {
        assert_eq!(estimate_run_bytes(usize::MAX, usize::MAX), u64::MAX);
    }
}
