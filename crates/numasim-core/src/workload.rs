//! Workloads: processes and threads arriving over time, CPU- or IO-bound, with a memory
//! intensity and a spawn CPU; generated deterministically from a seed, or loaded from CSV/JSON.
//!
//! ```text
//!   spec "n=300,kind=cpu,exec=200,arrival=uniform:1000"  ──generate(seed, cpus)──►  Workload
//!   Workload = [Process { pid, tgid, arrival_ns, demand_ns, kind, mem, spawn_cpu,
//!                         burst_mean_ns, wait_mean_ns, seed }]
//! ```
//!
//! Generation, for process i in pid order, from one `Pcg64` seeded with the seed:
//! 1. kind (mixed: IO-bound with probability `io_share`);
//! 2. demand (fixed or uniform range);
//! 3. arrival (per pattern);
//! 4. spawn CPU (per distribution);
//! 5. a private seed from which the engine draws this process's IO bursts and waits, so every
//!    policy sees the same bursts and waits whatever order the engine meets them in (common
//!    random numbers).
//!
//! Threads: with `threads=T`, every T consecutive pids form one application (tgid = first pid);
//! they arrive at the application's arrival time plus, with `fork=over:MS`, a uniform offset.

use std::borrow::Cow;
use std::fmt::Write as _;

use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Exp};
use rand_pcg::Pcg64;
use serde::{Deserialize, Serialize};

use crate::apps::{self, Segment};
use crate::error::{InputError, Result};

/// Index of a process in the workload (= its pid).
pub type Pid = usize;

const MS: f64 = 1e6;

/// The longest time a workload may give (2^53 ns, about 104 days): the engine counts work in
/// f64 ns, exact to the nanosecond up to here, and a longer time would be a run nobody waits for
/// (a million-year demand used to be accepted and simulated forever).
pub const MAX_TIME_NS: u64 = 1 << 53;

/// What a process does with the CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Runs until its demand is spent.
    Cpu,
    /// Alternates CPU bursts and IO waits until its demand is spent.
    Io,
}

/// One process (or thread) of a workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Process {
    pub pid: u32,
    /// Thread group; a single-threaded process is its own group.
    pub tgid: u32,
    pub arrival_ns: u64,
    /// CPU demand: ns of work at speed 1.0 with all-local memory.
    pub demand_ns: u64,
    pub kind: Kind,
    /// Memory intensity m ∈ [0, 1]: share of all-local running time spent waiting on memory.
    pub mem: f64,
    /// CPU of the parent: where the process is created.
    pub spawn_cpu: u32,
    /// IO-bound: mean CPU burst (exponential).
    pub burst_mean_ns: u64,
    /// IO-bound: mean IO wait (exponential).
    pub wait_mean_ns: u64,
    /// Seed of this process's own burst/wait draws.
    pub seed: u64,
    /// Its allowed CPUs over time (`sched_setaffinity`), changes in increasing time: from each
    /// change's `at_ns` on, it may run only on that change's CPUs. Empty (the default): every
    /// CPU, always. Changes at or before its arrival set the CPUs it is created with.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub affinity: Vec<AffinityChange>,
}

/// One change of a process's allowed CPUs: from `at_ns` on, it may run only on `cpus`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AffinityChange {
    pub at_ns: u64,
    pub cpus: CpuList,
}

/// CPU ids, sorted without repeats, read and written in the kernel's cpulist form (`"0-3,8"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuList(pub Vec<u32>);

/// The largest CPU id a cpulist may name (a bound on what a typo can make numasim allocate).
pub const MAX_CPU_ID: u32 = 1 << 20;

impl CpuList {
    /// Parses the kernel's cpulist syntax: `0`, `0-3,8`, `1,3-5` (ranges inclusive; order and
    /// repeats do not matter), with `+` accepted for `,` (a workload spec separates its keys by
    /// commas: `pin=cpus:0-3+8`). Errors say what is wrong, not where (the caller names that).
    pub fn parse(text: &str) -> std::result::Result<Self, String> {
        const SEPARATORS: [char; 2] = [',', '+'];
        let mut ids: Vec<u32> = Vec::new();
        let several = text.contains(SEPARATORS);
        for part in text.split(SEPARATORS).map(str::trim) {
            if part.is_empty() {
                return Err(format!("'{text}' is not a CPU list (like 0-3,8)"));
            }
            // The part, and the list it is in when that is more than the part.
            let named = if several {
                format!("'{part}' in '{text}'")
            } else {
                format!("'{part}'")
            };
            let id = |x: &str| {
                x.trim()
                    .parse::<u32>()
                    .ok()
                    .filter(|&c| c <= MAX_CPU_ID)
                    .ok_or_else(|| format!("{named} is not a CPU or a range of CPUs"))
            };
            let (lo, hi) = match part.split_once('-') {
                Some((a, b)) => (id(a)?, id(b)?),
                None => (id(part)?, id(part)?),
            };
            if lo > hi {
                return Err(format!("range {named} is empty"));
            }
            ids.extend(lo..=hi);
        }
        ids.sort_unstable();
        ids.dedup();
        Ok(Self(ids))
    }

    /// Every CPU of a machine with `cpus` CPUs.
    pub fn all(cpus: usize) -> Self {
        Self((0..cpus as u32).collect())
    }

    /// The cpulist form (`"0-3,8"`).
    pub fn to_cpulist(&self) -> String {
        crate::cpuset::cpulist(self.0.iter().map(|&c| c as usize))
    }

    pub fn contains(&self, cpu: u32) -> bool {
        self.0.binary_search(&cpu).is_ok()
    }
}

impl Serialize for CpuList {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_cpulist())
    }
}

impl<'de> Deserialize<'de> for CpuList {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        CpuList::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// The CPUs a process's affinity allows at `t_ns` (`None`: every CPU).
pub fn allowed_at(affinity: &[AffinityChange], t_ns: u64) -> Option<&CpuList> {
    affinity
        .iter()
        .take_while(|c| c.at_ns <= t_ns)
        .last()
        .map(|c| &c.cpus)
}

/// A CSV cell of an affinity: `AT_NS:CPULIST` per change, `;` between them (`0:0;1000000000:0-3`).
fn affinity_cell(affinity: &[AffinityChange]) -> String {
    affinity
        .iter()
        .map(|c| format!("{}:{}", c.at_ns, c.cpus.to_cpulist()))
        .collect::<Vec<_>>()
        .join(";")
}

fn parse_affinity_cell(cell: &str) -> std::result::Result<Vec<AffinityChange>, String> {
    if cell.is_empty() {
        return Ok(Vec::new());
    }
    cell.split(';')
        .map(|entry| {
            let entry = entry.trim();
            let (at, cpus) = entry.split_once(':').ok_or_else(|| {
                format!("'{entry}' is not AT_NS:CPULIST (like 0:0-3;1000000000:0-7)")
            })?;
            let at_ns = at
                .trim()
                .parse()
                .map_err(|_| format!("'{at}' in '{entry}' is not a whole number of nanoseconds"))?;
            Ok(AffinityChange {
                at_ns,
                cpus: CpuList::parse(cpus.trim())?,
            })
        })
        .collect()
}

/// A workload: processes in pid order, and the parallel structure of its applications.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    pub processes: Vec<Process>,
    /// Applications with a structure (barriers, pipelines) and sized memory; a thread group
    /// not listed here is independent threads with unsized memory (today's model).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub apps: Vec<App>,
}

/// One instance of an application profile: its threads are the pids `tgid ..` in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct App {
    pub tgid: u32,
    /// The profile it was made from.
    pub name: String,
    /// Memory footprint (MB) and the share of it every thread uses.
    pub footprint_mb: f64,
    pub shared: f64,
    /// Sync points its segments wait at and signal (numbered 0 ..).
    pub points: u32,
    /// Per thread, in pid order: its segments.
    pub plans: Vec<Vec<Segment>>,
    /// Its points are the workload's shared ones rather than its own: every application that
    /// says so waits at and signals one set of points (numbered 0 .. the largest `points` among
    /// them), so a thread can wait for a thread of another group. No generated workload does;
    /// a trace replayed closed-loop does (a process woken by another process).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shared_points: bool,
}

impl App {
    /// The most threads that can be runnable at once by its structure: the largest set of
    /// threads whose first segment waits for the same point (or for none).
    pub fn parallelism(&self) -> usize {
        let mut firsts: Vec<Option<u32>> = self
            .plans
            .iter()
            .map(|plan| plan.first().and_then(|s| s.wait.map(|w| w.point)))
            .collect();
        firsts.sort_unstable();
        firsts
            .chunk_by(|a, b| a == b)
            .map(<[_]>::len)
            .max()
            .unwrap_or(1)
    }
}

/// Arrival pattern.
#[derive(Debug, Clone, PartialEq)]
pub enum Arrival {
    /// All at t = 0.
    Same,
    /// Uniform in [0, window] ("almost same time": 10 ms).
    Uniform { window_ns: u64 },
    /// One every `interval_ns`, the first at 0.
    Periodic { interval_ns: u64 },
    /// Poisson process with `rate_per_s`, the first at its first event.
    Poisson { rate_per_s: f64 },
}

/// Where processes are spawned.
#[derive(Debug, Clone, PartialEq)]
pub enum Spawn {
    /// Uniform over all CPUs.
    Uniform,
    /// All on CPUs of one node.
    Node(usize),
    /// A share on one node, the rest uniform over all CPUs.
    Share { node: usize, share: f64 },
    /// All on one CPU (a parent that forks every process from there).
    Cpu(usize),
}

/// Which CPUs processes may run on (`sched_setaffinity` at creation).
#[derive(Debug, Clone, PartialEq)]
pub enum Pin {
    /// Process i on CPU i mod the machine's CPUs only.
    Each,
    /// Every process on these CPUs only.
    Cpus(CpuList),
}

/// A workload generator, parsed from `key=value,...`.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkloadSpec {
    pub n: usize,
    /// Probability that a process is IO-bound (0: all CPU-bound, 1: all IO-bound).
    pub io_share: f64,
    pub exec_ns: (u64, u64),
    pub arrival: Arrival,
    pub burst_mean_ns: u64,
    pub wait_mean_ns: u64,
    /// Memory intensity of CPU-bound and IO-bound processes.
    pub mem_cpu: f64,
    pub mem_io: f64,
    pub spawn: Spawn,
    pub threads: usize,
    pub fork_spread_ns: u64,
    /// Application profiles with their thread counts (`app=canneal:16+x264`, a missing count
    /// is `threads`): each of the `n` rounds starts them in turn.
    pub apps: Vec<(String, Option<u32>)>,
    /// Load level (app workloads), from which Poisson creation times are drawn (`load=0.75`):
    /// offered work / machine capacity, or what `load_level` says it measures.
    pub load: Option<f64>,
    /// What the load level measures (the `load` modelling assumption; not a key of the spec:
    /// the caller sets it from the run's assumptions).
    pub load_level: crate::assumptions::LoadLevel,
    /// Allowed CPUs at creation (`pin=each`, `pin=cpus:LIST`); `None`: every CPU.
    pub pin: Option<Pin>,
    /// When every process's allowed CPUs become all CPUs (`release=MS`), with `pin`.
    pub release_ns: Option<u64>,
}

/// Window of the `random` arrival alias: uniform over the first second (documented choice).
pub const RANDOM_WINDOW_NS: u64 = 1_000_000_000;
/// Window of "almost same time" arrivals: uniform in [0, 10 ms].
pub const ALMOST_WINDOW_NS: u64 = 10_000_000;

impl Default for WorkloadSpec {
    fn default() -> Self {
        Self {
            n: 0,
            io_share: 0.0,
            exec_ns: (200_000_000, 200_000_000),
            arrival: Arrival::Same,
            burst_mean_ns: 10_000_000,
            wait_mean_ns: 20_000_000,
            mem_cpu: 0.5,
            mem_io: 0.3,
            spawn: Spawn::Uniform,
            threads: 1,
            fork_spread_ns: 0,
            apps: Vec::new(),
            load: None,
            load_level: crate::assumptions::LoadLevel::Work,
            pin: None,
            release_ns: None,
        }
    }
}

fn ms_to_ns(origin: &str, key: &str, v: &str) -> Result<u64> {
    let ms: f64 = v.parse().map_err(|_| {
        InputError::new(origin, format!("'{v}' is not a number of milliseconds"))
            .at(format!("key {key}"))
    })?;
    if !(ms.is_finite() && ms >= 0.0) {
        return Err(
            InputError::new(origin, format!("{v} ms must be a non-negative time"))
                .at(format!("key {key}")),
        );
    }
    let ns = (ms * MS).round();
    if ns > MAX_TIME_NS as f64 {
        return Err(InputError::new(
            origin,
            format!(
                "{v} ms is longer than numasim simulates ({} ms, about 104 days)",
                MAX_TIME_NS / 1_000_000
            ),
        )
        .at(format!("key {key}")));
    }
    Ok(ns as u64)
}

fn positive_ms(origin: &str, key: &str, v: &str) -> Result<u64> {
    let ns = ms_to_ns(origin, key, v)?;
    if ns == 0 {
        return Err(
            InputError::new(origin, format!("{v} ms must be positive")).at(format!("key {key}"))
        );
    }
    Ok(ns)
}

fn number(origin: &str, key: &str, v: &str) -> Result<f64> {
    v.parse::<f64>()
        .ok()
        .filter(|x| x.is_finite())
        .ok_or_else(|| {
            InputError::new(origin, format!("'{v}' is not a number")).at(format!("key {key}"))
        })
}

fn fraction(origin: &str, key: &str, v: &str) -> Result<f64> {
    let x = number(origin, key, v)?;
    if !(0.0..=1.0).contains(&x) {
        return Err(
            InputError::new(origin, format!("{v} must be between 0 and 1"))
                .at(format!("key {key}")),
        );
    }
    Ok(x)
}

impl WorkloadSpec {
    /// Parses `n=300,kind=cpu,exec=200,arrival=uniform:1000` (times in ms). Keys:
    /// `n`, `kind` (cpu|io|mixed), `io_share` (mixed; default 0.5), `exec` (ms, or `lo-hi`),
    /// `arrival` (same|almost|random|uniform:MS|periodic:MS|poisson:PER_S), `burst`, `wait`
    /// (IO means, ms), `mem` (both kinds) / `mem_cpu` / `mem_io`, `spawn`
    /// (uniform|node:K|share:K:F), `threads`, `fork` (at-once|over:MS).
    pub fn parse(origin: &str, text: &str) -> Result<Self> {
        let mut spec = Self::default();
        let mut kind_mixed = false;
        let mut io_share = None;
        let mut have_n = false;
        // Keys seen so far: a key given twice (`n=10,n=20`) is refused, not last-one-wins.
        let mut seen: Vec<&str> = Vec::new();
        for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let Some((key, v)) = item.split_once('=') else {
                return Err(InputError::new(
                    origin,
                    format!("'{item}' is not key=value"),
                ));
            };
            let (key, v) = (key.trim(), v.trim());
            let bad = |msg: String| InputError::new(origin, msg).at(format!("key {key}"));
            if seen.contains(&key) {
                return Err(bad(format!("'{key}' is given twice")));
            }
            // `mem` sets both intensities: with `mem_cpu` or `mem_io` as well, the result would
            // depend on the order of the keys.
            let clash = match key {
                "mem" => seen.iter().find(|k| matches!(**k, "mem_cpu" | "mem_io")),
                "mem_cpu" | "mem_io" => seen.iter().find(|k| **k == "mem"),
                _ => None,
            };
            if let Some(other) = clash {
                return Err(bad(format!(
                    "'{key}' and '{other}' both set a memory intensity; give mem, or mem_cpu and mem_io"
                )));
            }
            seen.push(key);
            match key {
                "n" => {
                    spec.n = v.parse().map_err(|_| bad(format!("'{v}' is not a process count")))?;
                    have_n = true;
                }
                "kind" => match v {
                    "cpu" => spec.io_share = 0.0,
                    "io" => spec.io_share = 1.0,
                    "mixed" => kind_mixed = true,
                    _ => return Err(bad(format!("'{v}' is not one of cpu, io, mixed"))),
                },
                "io_share" => io_share = Some(fraction(origin, key, v)?),
                "exec" => {
                    // A leading '-' is a sign (refused below), not a range separator.
                    let range = if v.starts_with('-') { None } else { v.split_once('-') };
                    spec.exec_ns = match range {
                        Some((lo, hi)) => (positive_ms(origin, key, lo)?, positive_ms(origin, key, hi)?),
                        None => {
                            let x = positive_ms(origin, key, v)?;
                            (x, x)
                        }
                    };
                    if spec.exec_ns.0 > spec.exec_ns.1 {
                        return Err(bad(format!("range '{v}' is empty")));
                    }
                }
                "arrival" => {
                    let (pattern, arg) = v.split_once(':').map_or((v, None), |(a, b)| (a, Some(b)));
                    let need = |what: &str| {
                        arg.ok_or_else(|| bad(format!("'{pattern}' needs :{what}")))
                    };
                    spec.arrival = match pattern {
                        "same" => Arrival::Same,
                        "almost" => Arrival::Uniform { window_ns: ALMOST_WINDOW_NS },
                        "random" => Arrival::Uniform { window_ns: RANDOM_WINDOW_NS },
                        // A zero window is a well-defined distribution (all at 0); a zero
                        // period is no period at all, refused as `poisson:0` is.
                        "uniform" => Arrival::Uniform { window_ns: ms_to_ns(origin, key, need("WINDOW_MS")?)? },
                        "periodic" => Arrival::Periodic { interval_ns: positive_ms(origin, key, need("INTERVAL_MS")?)? },
                        "poisson" => {
                            let rate = number(origin, key, need("RATE_PER_S")?)?;
                            if rate <= 0.0 {
                                return Err(bad(format!("rate {rate} must be positive")));
                            }
                            Arrival::Poisson { rate_per_s: rate }
                        }
                        _ => {
                            return Err(bad(format!(
                                "'{pattern}' is not one of same, almost, random, uniform:MS, periodic:MS, poisson:RATE"
                            )))
                        }
                    };
                }
                "burst" => spec.burst_mean_ns = positive_ms(origin, key, v)?,
                "wait" => spec.wait_mean_ns = positive_ms(origin, key, v)?,
                "mem" => {
                    spec.mem_cpu = fraction(origin, key, v)?;
                    spec.mem_io = spec.mem_cpu;
                }
                "mem_cpu" => spec.mem_cpu = fraction(origin, key, v)?,
                "mem_io" => spec.mem_io = fraction(origin, key, v)?,
                "spawn" => {
                    let parts: Vec<&str> = v.split(':').collect();
                    spec.spawn = match parts.as_slice() {
                        ["uniform"] => Spawn::Uniform,
                        ["node", k] => Spawn::Node(k.parse().map_err(|_| bad(format!("'{k}' is not a node id")))?),
                        ["share", k, f] => Spawn::Share {
                            node: k.parse().map_err(|_| bad(format!("'{k}' is not a node id")))?,
                            share: fraction(origin, key, f)?,
                        },
                        ["cpu", k] => Spawn::Cpu(k.parse().ok().filter(|&c| c <= MAX_CPU_ID as usize).ok_or_else(|| bad(format!("'{k}' is not a CPU id")))?),
                        _ => return Err(bad(format!("'{v}' is not one of uniform, node:K, share:K:F, cpu:K"))),
                    };
                }
                "threads" => {
                    spec.threads = v.parse().ok().filter(|&t| t >= 1).ok_or_else(|| bad(format!("'{v}' is not a thread count ≥ 1")))?;
                }
                "pin" => {
                    spec.pin = Some(match v.split_once(':') {
                        None if v == "each" => Pin::Each,
                        Some(("cpus", list)) => Pin::Cpus(CpuList::parse(list.trim()).map_err(bad)?),
                        _ => return Err(bad(format!("'{v}' is not one of each, cpus:LIST"))),
                    });
                }
                "release" => spec.release_ns = Some(positive_ms(origin, key, v)?),
                "load" => {
                    let x = number(origin, key, v)?;
                    if !(x > 0.0 && x.is_finite()) {
                        return Err(bad(format!("load level {v} must be positive")));
                    }
                    spec.load = Some(x);
                }
                "fork" => {
                    spec.fork_spread_ns = match v.split_once(':') {
                        None if v == "at-once" => 0,
                        Some(("over", ms)) => ms_to_ns(origin, key, ms)?,
                        _ => return Err(bad(format!("'{v}' is not one of at-once, over:MS"))),
                    };
                }
                "app" => {
                    for item in v.split('+').map(str::trim) {
                        let (name, threads) = match item.split_once(':') {
                            None => (item, None),
                            Some((name, t)) => {
                                let t = t.trim().parse().ok().filter(|&t: &u32| t >= 1).ok_or_else(|| {
                                    bad(format!("'{t}' in '{item}' is not a thread count ≥ 1"))
                                })?;
                                (name.trim(), Some(t))
                            }
                        };
                        apps::profile(origin, name)?;
                        spec.apps.push((name.to_string(), threads));
                    }
                }
                _ => {
                    return Err(InputError::new(
                        origin,
                        format!("unknown key '{key}'; keys are n, kind, io_share, exec, arrival, burst, wait, mem, mem_cpu, mem_io, spawn, threads, fork, app, load, pin, release"),
                    ))
                }
            }
        }
        if !spec.apps.is_empty() {
            // An application's profile sets its kind, demand and memory: keys that would also set
            // them are refused rather than ignored.
            if let Some(k) = seen.iter().find(|k| {
                !matches!(
                    **k,
                    "app"
                        | "n"
                        | "threads"
                        | "arrival"
                        | "load"
                        | "spawn"
                        | "fork"
                        | "pin"
                        | "release"
                )
            }) {
                return Err(InputError::new(
                    origin,
                    format!("'{k}' does not apply to app workloads (the profile sets it); keys are app, n, threads, arrival, load, spawn, fork, pin, release"),
                )
                .at(format!("key {k}")));
            }
            if spec.load.is_some() && seen.contains(&"arrival") {
                return Err(InputError::new(
                    origin,
                    "load and arrival both set the creation times; give one",
                )
                .at("key load"));
            }
            if !have_n {
                spec.n = 1;
                have_n = true;
            }
        } else if spec.load.is_some() {
            return Err(InputError::new(
                origin,
                "load applies only to app workloads (app=...); give arrival for processes",
            )
            .at("key load"));
        }
        spec.check_affinity(origin, &seen)?;
        if !have_n {
            return Err(InputError::new(origin, "no process count: give n=N"));
        }
        if spec.n == 0 {
            return Err(
                InputError::new(origin, "n=0: a workload needs at least one process").at("key n"),
            );
        }
        if kind_mixed {
            spec.io_share = io_share.unwrap_or(0.5);
        } else if io_share.is_some() {
            return Err(
                InputError::new(origin, "io_share applies only to kind=mixed").at("key io_share"),
            );
        }
        Ok(spec)
    }

    /// The affinity keys together: `release` needs `pin`; with `pin`, processes are created
    /// on a CPU they may run on (`spawn=cpu:K` with K pinned, or no `spawn`: one of their own).
    fn check_affinity(&self, origin: &str, seen: &[&str]) -> Result<()> {
        let err =
            |key: &str, msg: String| Err(InputError::new(origin, msg).at(format!("key {key}")));
        let Some(pin) = &self.pin else {
            if self.release_ns.is_some() {
                return err(
                    "release",
                    "release needs pin=each or pin=cpus:LIST (without pin every process may already run on every CPU)".into(),
                );
            }
            return Ok(());
        };
        if matches!(pin, Pin::Each) && !self.apps.is_empty() {
            return err(
                "pin",
                "pin=each gives each thread its own CPU, but an application's threads are created on one CPU; give pin=cpus:LIST".into(),
            );
        }
        if !seen.contains(&"spawn") {
            return Ok(());
        }
        match (&self.spawn, pin) {
            (Spawn::Cpu(k), Pin::Cpus(list)) if !list.contains(*k as u32) => err(
                "spawn",
                format!(
                    "CPU {k} is not among pin's CPUs {}: processes would be created on a CPU they may not run on",
                    list.to_cpulist()
                ),
            ),
            (Spawn::Cpu(_), Pin::Cpus(_)) => Ok(()),
            (Spawn::Cpu(k), Pin::Each) => err(
                "spawn",
                format!("with pin=each process i may run only on CPU i, not all on CPU {k}; leave spawn out (each process is then created on its own CPU)"),
            ),
            _ => err(
                "spawn",
                "with pin, give spawn=cpu:K (K a pinned CPU) or leave spawn out (each process is then created on one of its allowed CPUs)".into(),
            ),
        }
    }

    /// The CPUs `pin` allows process `i` on a machine of `cpus` CPUs (`None`: no pin), checked
    /// against the machine.
    #[inline(always)]
    fn pinned(&self, origin: &str, i: usize, cpus: usize) -> Result<Option<CpuList>> {
        Ok(match &self.pin {
            None => None,
            Some(Pin::Each) => Some(CpuList(vec![(i % cpus) as u32])),
            Some(Pin::Cpus(list)) => {
                if let Some(&c) = list.0.iter().find(|&&c| c as usize >= cpus) {
                    return Err(InputError::new(
                        origin,
                        format!("CPU {c} does not exist (the machine has {cpus} CPUs)"),
                    )
                    .at("key pin"));
                }
                Some(list.clone())
            }
        })
    }

    /// The affinity of a process pinned to `pinned` (its changes: the pin from 0, then every
    /// CPU from `release`).
    fn affinity_of(&self, pinned: Option<CpuList>, cpus: usize) -> Vec<AffinityChange> {
        let Some(pinned) = pinned else {
            return Vec::new();
        };
        let mut changes = vec![AffinityChange {
            at_ns: 0,
            cpus: pinned,
        }];
        if let Some(at_ns) = self.release_ns {
            changes.push(AffinityChange {
                at_ns,
                cpus: CpuList::all(cpus),
            });
        }
        changes
    }

    /// Generates the workload for a machine with `cpus` CPUs (`node_cpus` for spawn on a node).
    pub fn generate(&self, origin: &str, seed: u64, node_cpus: &[Vec<usize>]) -> Result<Workload> {
        if !self.apps.is_empty() {
            return self.generate_apps(origin, seed, node_cpus);
        }
        let cpus: usize = node_cpus.iter().map(Vec::len).sum();
        let node_list = |k: usize| -> Result<&Vec<usize>> {
            node_cpus.get(k).filter(|l| !l.is_empty()).ok_or_else(|| {
                InputError::new(origin, format!("node {k} does not exist or has no CPU"))
                    .at("key spawn")
            })
        };
        if let Spawn::Node(k) | Spawn::Share { node: k, .. } = self.spawn {
            node_list(k)?;
        }
        // Refuse an n whose run cannot fit in memory before allocating anything for it.
        crate::budget::check_run(
            origin,
            "key n",
            self.n,
            cpus,
            crate::budget::available_bytes(),
        )?;
        let mut rng = Pcg64::seed_from_u64(seed);
        let mut processes = Vec::with_capacity(self.n);
        let mut app_arrival = 0u64;
        let mut poisson_t = 0.0f64;
        for i in 0..self.n {
            let kind = if rng.random::<f64>() < self.io_share {
                Kind::Io
            } else {
                Kind::Cpu
            };
            let demand_ns = if self.exec_ns.0 == self.exec_ns.1 {
                self.exec_ns.0
            } else {
                rng.random_range(self.exec_ns.0..=self.exec_ns.1)
            };
            let thread = i % self.threads;
            if thread == 0 {
                app_arrival = self.draw_arrival(&mut rng, i / self.threads, &mut poisson_t);
            }
            let arrival_ns = if thread > 0 && self.fork_spread_ns > 0 {
                app_arrival + rng.random_range(0..=self.fork_spread_ns)
            } else {
                app_arrival
            };
            let pinned = self.pinned(origin, i, cpus)?;
            let spawn_cpu = self.draw_spawn(origin, &mut rng, node_cpus, cpus, pinned.as_ref())?;
            let pid = i as u32;
            processes.push(Process {
                pid,
                tgid: pid - thread as u32,
                arrival_ns,
                demand_ns,
                kind,
                mem: if kind == Kind::Cpu {
                    self.mem_cpu
                } else {
                    self.mem_io
                },
                spawn_cpu: spawn_cpu as u32,
                burst_mean_ns: self.burst_mean_ns,
                wait_mean_ns: self.wait_mean_ns,
                seed: rng.random(),
                affinity: self.affinity_of(pinned, cpus),
            });
        }
        Ok(Workload {
            processes,
            apps: Vec::new(),
        })
    }

    /// The arrival of application `index` (a process, or a group of threads), drawn per
    /// `self.arrival`; `poisson_t` carries the Poisson process's clock (s) between calls.
    fn draw_arrival(&self, rng: &mut Pcg64, index: usize, poisson_t: &mut f64) -> u64 {
        match self.arrival {
            Arrival::Same => 0,
            Arrival::Uniform { window_ns } => rng.random_range(0..=window_ns),
            Arrival::Periodic { interval_ns } => index as u64 * interval_ns,
            Arrival::Poisson { rate_per_s } => {
                *poisson_t += Exp::new(rate_per_s).expect("positive rate").sample(rng);
                (*poisson_t * 1e9).round() as u64
            }
        }
    }

    /// The spawn CPU of the next process or application, drawn per `self.spawn`; a process
    /// pinned (`pinned`) without a `spawn` key is created on one of its CPUs, drawn uniformly.
    fn draw_spawn(
        &self,
        origin: &str,
        rng: &mut Pcg64,
        node_cpus: &[Vec<usize>],
        cpus: usize,
        pinned: Option<&CpuList>,
    ) -> Result<usize> {
        if let (Some(list), Spawn::Uniform) = (pinned, &self.spawn) {
            return Ok(list.0[rng.random_range(0..list.0.len())] as usize);
        }
        let node_list = |k: usize| -> Result<&Vec<usize>> {
            node_cpus.get(k).filter(|l| !l.is_empty()).ok_or_else(|| {
                InputError::new(origin, format!("node {k} does not exist or has no CPU"))
                    .at("key spawn")
            })
        };
        Ok(match self.spawn {
            Spawn::Uniform => rng.random_range(0..cpus),
            Spawn::Node(k) => {
                let l = node_list(k)?;
                l[rng.random_range(0..l.len())]
            }
            Spawn::Share { node, share } => {
                if rng.random::<f64>() < share {
                    let l = node_list(node)?;
                    l[rng.random_range(0..l.len())]
                } else {
                    rng.random_range(0..cpus)
                }
            }
            Spawn::Cpu(k) if k < cpus => k,
            Spawn::Cpu(k) => {
                return Err(InputError::new(
                    origin,
                    format!("CPU {k} does not exist (the machine has {cpus} CPUs)"),
                )
                .at("key spawn"))
            }
        })
    }

    /// `n` rounds of the application list, in turn: instance j of app a is application
    /// `j · apps + a`. Per application, in order: arrival (per pattern, one draw per
    /// application), spawn CPU (shared by its threads: they are created by its main thread),
    /// its plan (`apps::Profile::plan`), then per thread a fork offset (`fork=over:MS`, thread 0
    /// at the arrival) and a private seed.
    fn generate_apps(&self, origin: &str, seed: u64, node_cpus: &[Vec<usize>]) -> Result<Workload> {
        let cpus: usize = node_cpus.iter().map(Vec::len).sum();
        let profiles: Vec<(&apps::Profile, u32)> = self
            .apps
            .iter()
            .map(|(a, t)| Ok((apps::profile(origin, a)?, t.unwrap_or(self.threads as u32))))
            .collect::<Result<_>>()?;
        let per_round: usize = profiles
            .iter()
            .map(|(p, t)| p.thread_count(*t) as usize)
            .sum();
        crate::budget::check_run(
            origin,
            "key n",
            self.n.saturating_mul(per_round),
            cpus,
            crate::budget::available_bytes(),
        )?;
        let mut spec = Cow::Borrowed(self);
        if let Some(load) = self.load {
            // What load measures per unit time = load × capacity (one unit per CPU per unit of
            // time): applications arrive as a Poisson process at load · cpus / E[per process],
            // the unit its work (load=work) or the processor time it holds (load=held).
            let per_process = |p: &apps::Profile, t: u32| match self.load_level {
                crate::assumptions::LoadLevel::Work => p.work_ms,
                crate::assumptions::LoadLevel::Held => p.held_ms(t),
            };
            let mean_s = profiles
                .iter()
                .map(|&(p, t)| per_process(p, t))
                .sum::<f64>()
                / profiles.len() as f64
                / 1e3;
            spec.to_mut().arrival = Arrival::Poisson {
                rate_per_s: load * cpus as f64 / mean_s,
            };
        }
        let spec = spec.as_ref();
        let mut rng = Pcg64::seed_from_u64(seed);
        let mut processes = Vec::new();
        let mut apps_out = Vec::new();
        let mut poisson_t = 0.0f64;
        for index in 0..self.n * profiles.len() {
            let (profile, threads) = profiles[index % profiles.len()];
            let arrival = spec.draw_arrival(&mut rng, index, &mut poisson_t);
            let pinned = self.pinned(origin, index, cpus)?;
            let spawn_cpu =
                self.draw_spawn(origin, &mut rng, node_cpus, cpus, pinned.as_ref())? as u32;
            let plan = profile.plan(threads, &mut rng);
            let tgid = processes.len() as u32;
            for (t, segments) in plan.threads.iter().enumerate() {
                let arrival_ns = if t > 0 && self.fork_spread_ns > 0 {
                    arrival + rng.random_range(0..=self.fork_spread_ns)
                } else {
                    arrival
                };
                processes.push(Process {
                    pid: tgid + t as u32,
                    tgid,
                    arrival_ns,
                    demand_ns: segments.iter().map(|s| s.work_ns).sum(),
                    kind: Kind::Cpu,
                    mem: profile.mem,
                    spawn_cpu,
                    burst_mean_ns: self.burst_mean_ns,
                    wait_mean_ns: self.wait_mean_ns,
                    seed: rng.random(),
                    affinity: self.affinity_of(pinned.clone(), cpus),
                });
            }
            apps_out.push(App {
                tgid,
                name: profile.name.clone(),
                footprint_mb: profile.footprint_mb,
                shared: profile.shared,
                points: plan.points,
                plans: plan.threads,
                shared_points: false,
            });
        }
        Ok(Workload {
            processes,
            apps: apps_out,
        })
    }
}

const CSV_HEADER: &str =
    "pid,tgid,arrival_ns,demand_ns,kind,mem,spawn_cpu,burst_mean_ns,wait_mean_ns,seed";
/// The optional last column: a process's affinity (`AT_NS:CPULIST` per change, `;` between).
const CSV_AFFINITY: &str = "affinity";

impl Process {
    /// What an affinity must be on a machine of `cpus` CPUs: changes in increasing time, each
    /// naming existing CPUs, and the CPU the process is created on among those allowed then.
    fn validate_affinity(&self, cpus: usize) -> std::result::Result<(), String> {
        if self.affinity.is_empty() {
            return Ok(());
        }
        let mut last: Option<u64> = None;
        for c in &self.affinity {
            if c.cpus.0.is_empty() {
                return Err(format!(
                    "the affinity change at {} ns allows no CPU",
                    c.at_ns
                ));
            }
            if let Some(&bad) = c.cpus.0.iter().find(|&&x| x as usize >= cpus) {
                return Err(format!(
                    "the affinity change at {} ns names CPU {bad}, which does not exist (the machine has {cpus} CPUs)",
                    c.at_ns
                ));
            }
            if c.at_ns > MAX_TIME_NS {
                return Err(format!(
                    "an affinity change at {} ns is later than numasim simulates ({MAX_TIME_NS} ns)",
                    c.at_ns
                ));
            }
            if let Some(t) = last.filter(|&t| c.at_ns <= t) {
                return Err(format!(
                    "affinity changes must be in increasing time (a change at {} ns follows one at {t} ns)",
                    c.at_ns
                ));
            }
            last = Some(c.at_ns);
        }
        if let Some(list) = allowed_at(&self.affinity, self.arrival_ns) {
            if !list.contains(self.spawn_cpu) {
                return Err(format!(
                    "spawn cpu {} is not among the CPUs it may run on when created ({})",
                    self.spawn_cpu,
                    list.to_cpulist()
                ));
            }
        }
        Ok(())
    }
}

impl Workload {
    /// Checks what every workload must satisfy, whatever its source.
    pub fn validate(&self, origin: &str, cpus: usize) -> Result<()> {
        if self.processes.is_empty() {
            return Err(InputError::new(origin, "the workload is empty"));
        }
        crate::budget::check_run(
            origin,
            "",
            self.processes.len(),
            cpus,
            crate::budget::available_bytes(),
        )?;
        for (i, p) in self.processes.iter().enumerate() {
            let at = || format!("process {i} (pid {})", p.pid);
            if p.pid as usize != i {
                return Err(InputError::new(
                    origin,
                    format!(
                        "pid {} out of order: pids must be 0, 1, 2, … in order",
                        p.pid
                    ),
                )
                .at(at()));
            }
            if p.tgid > p.pid || self.processes[p.tgid as usize].tgid != p.tgid {
                return Err(InputError::new(
                    origin,
                    format!(
                        "tgid {} is not a thread-group leader at or before this pid",
                        p.tgid
                    ),
                )
                .at(at()));
            }
            if p.demand_ns == 0 {
                return Err(InputError::new(origin, "demand must be positive").at(at()));
            }
            let longest = p
                .demand_ns
                .max(p.arrival_ns)
                .max(p.burst_mean_ns)
                .max(p.wait_mean_ns);
            if longest > MAX_TIME_NS {
                return Err(InputError::new(
                    origin,
                    format!(
                        "a time of {longest} ns is longer than numasim simulates ({MAX_TIME_NS} ns, about 104 days)"
                    ),
                )
                .at(at()));
            }
            if !(0.0..=1.0).contains(&p.mem) {
                return Err(InputError::new(
                    origin,
                    format!("memory intensity {} is not in [0, 1]", p.mem),
                )
                .at(at()));
            }
            if p.spawn_cpu as usize >= cpus {
                return Err(InputError::new(
                    origin,
                    format!(
                        "spawn cpu {} does not exist (the machine has {cpus} CPUs)",
                        p.spawn_cpu
                    ),
                )
                .at(at()));
            }
            if p.kind == Kind::Io && (p.burst_mean_ns == 0 || p.wait_mean_ns == 0) {
                return Err(InputError::new(
                    origin,
                    "an IO-bound process needs positive burst and wait means",
                )
                .at(at()));
            }
            p.validate_affinity(cpus)
                .map_err(|msg| InputError::new(origin, msg).at(at()))?;
        }
        self.validate_apps(origin)
    }

    /// Checks the applications: each names a whole thread group, its plans add up to its
    /// threads' demands, and every wait can be satisfied (enough signals of its point).
    fn validate_apps(&self, origin: &str) -> Result<()> {
        let mut last_tgid = None;
        // The points shared by the applications that share theirs (`App::shared_points`).
        let shared_len = self
            .apps
            .iter()
            .filter(|a| a.shared_points)
            .map(|a| a.points)
            .max()
            .unwrap_or(0) as usize;
        let mut shared_signals = vec![0u32; shared_len];
        let mut shared_needed = vec![0u32; shared_len];
        for (a, app) in self.apps.iter().enumerate() {
            let at = || format!("app {a} (tgid {})", app.tgid);
            let bad = |msg: String| Err(InputError::new(origin, msg).at(at()));
            if last_tgid.is_some_and(|t| app.tgid <= t) {
                return bad("apps must be in increasing tgid order, one per group".into());
            }
            last_tgid = Some(app.tgid);
            let first = app.tgid as usize;
            let members = self.processes.iter().filter(|p| p.tgid == app.tgid).count();
            if app.plans.is_empty() || members != app.plans.len() {
                return bad(format!(
                    "has {} thread plans but its group has {members} threads",
                    app.plans.len()
                ));
            }
            let sizes_ok = app.footprint_mb >= 0.0
                && app.footprint_mb.is_finite()
                && (0.0..=1.0).contains(&app.shared);
            if !sizes_ok {
                return bad("footprint_mb must be ≥ 0 and shared in [0, 1]".into());
            }
            let mut own_signals = vec![0u32; app.points as usize];
            let mut own_needed = vec![0u32; app.points as usize];
            let (signals, needed) = if app.shared_points {
                (&mut shared_signals, &mut shared_needed)
            } else {
                (&mut own_signals, &mut own_needed)
            };
            for (t, plan) in app.plans.iter().enumerate() {
                let Some(p) = self.processes.get(first + t).filter(|p| p.tgid == app.tgid) else {
                    return bad(format!("thread {t} is not pid {}", first + t));
                };
                if p.kind != Kind::Cpu {
                    return bad(format!("thread {t} (pid {}) must be cpu-bound", p.pid));
                }
                let work: u64 = plan.iter().map(|s| s.work_ns).sum();
                if work != p.demand_ns || plan.iter().any(|s| s.work_ns == 0) {
                    return bad(format!(
                        "thread {t}: its segments hold {work} ns of work (each positive), its demand is {} ns",
                        p.demand_ns
                    ));
                }
                for (k, s) in plan.iter().enumerate() {
                    if let Some(sleep) = s.sleep_ns {
                        let why = if sleep == 0 || sleep > MAX_TIME_NS {
                            Some(format!("a sleep of {sleep} ns must be positive and at most {MAX_TIME_NS} ns"))
                        } else if s.wait.is_some() {
                            Some("it sleeps and waits: a segment does one or the other".into())
                        } else if k == 0 {
                            Some(
                                "a first segment cannot sleep (the thread arrives later instead)"
                                    .into(),
                            )
                        } else {
                            None
                        };
                        if let Some(why) = why {
                            return bad(format!("thread {t}: segment {k}: {why}"));
                        }
                    }
                    let in_range = |point: u32| point < app.points;
                    if let Some(point) = s.signal {
                        if !in_range(point) {
                            return bad(format!("signal of point {point} ≥ points {}", app.points));
                        }
                        signals[point as usize] += 1;
                    }
                    if let Some(wait) = s.wait {
                        if !in_range(wait.point) || wait.count == 0 {
                            return bad(format!(
                                "wait for point {} (count {}) is not a point of the app",
                                wait.point, wait.count
                            ));
                        }
                        let n = &mut needed[wait.point as usize];
                        *n = (*n).max(wait.count);
                    }
                }
            }
            if let Some(point) = (0..own_signals.len()).find(|&k| own_signals[k] < own_needed[k]) {
                return bad(format!(
                    "point {point} is waited for {} times but signalled {}: the app would never finish",
                    own_needed[point], own_signals[point]
                ));
            }
        }
        if let Some(point) = (0..shared_len).find(|&k| shared_signals[k] < shared_needed[k]) {
            return Err(InputError::new(
                origin,
                format!(
                    "shared point {point} is waited for {} times but signalled {}: the apps would never finish",
                    shared_needed[point], shared_signals[point]
                ),
            ));
        }
        Ok(())
    }

    /// The application of thread group `tgid`, if it has a structure.
    pub fn app_of(&self, tgid: u32) -> Option<&App> {
        self.apps
            .binary_search_by_key(&tgid, |a| a.tgid)
            .ok()
            .map(|i| &self.apps[i])
    }

    /// The workload as CSV (one row per process; times in ns). An application workload's
    /// structure (barriers, pipelines, sizes) has no CSV columns: it is refused (save JSON).
    pub fn to_csv(&self) -> Result<String> {
        if !self.apps.is_empty() {
            return Err(InputError::new(
                "workload",
                "an application workload (app=...) has barriers and memory sizes that CSV cannot hold; save it as .json",
            ));
        }
        // The affinity column only when a process has one: other workloads read as before.
        let affine = self.processes.iter().any(|p| !p.affinity.is_empty());
        let mut out = String::from(CSV_HEADER);
        if affine {
            let _ = write!(out, ",{CSV_AFFINITY}");
        }
        out.push('\n');
        for p in &self.processes {
            let kind = if p.kind == Kind::Cpu { "cpu" } else { "io" };
            let _ = write!(
                out,
                "{},{},{},{},{},{},{},{},{},{}",
                p.pid,
                p.tgid,
                p.arrival_ns,
                p.demand_ns,
                kind,
                p.mem,
                p.spawn_cpu,
                p.burst_mean_ns,
                p.wait_mean_ns,
                p.seed
            );
            if affine {
                // Quoted: a cpulist has commas.
                let _ = write!(out, ",\"{}\"", affinity_cell(&p.affinity));
            }
            out.push('\n');
        }
        Ok(out)
    }

    /// Reads CSV written by [`Workload::to_csv`] (or by hand, same columns). Errors name the
    /// line, the column and what the cell should hold.
    pub fn from_csv(origin: &str, text: &str) -> Result<Self> {
        let mut reader = csv::ReaderBuilder::new()
            .trim(csv::Trim::All)
            .from_reader(text.as_bytes());
        let headers = reader
            .headers()
            .map_err(|e| InputError::new(origin, format!("cannot read the header: {e}")))?
            .clone();
        let mut want: Vec<&str> = CSV_HEADER.split(',').collect();
        let got: Vec<&str> = headers.iter().collect();
        if got.len() == want.len() + 1 {
            want.push(CSV_AFFINITY);
        }
        if got != want {
            return Err(InputError::new(
                origin,
                format!(
                    "the header must be exactly: {CSV_HEADER} (and optionally ,{CSV_AFFINITY} last)"
                ),
            )
            .at("line 1"));
        }
        let mut processes = Vec::new();
        let mut record = csv::StringRecord::new();
        loop {
            let line = reader.position().line() + 1;
            match reader.read_record(&mut record) {
                Ok(false) => break,
                Ok(true) => {}
                Err(e) => {
                    let (line, msg) = match e.kind() {
                        csv::ErrorKind::UnequalLengths { pos, len, .. } => (
                            pos.as_ref().map_or(line, csv::Position::line),
                            format!("has {len} values but the header has {} columns", want.len()),
                        ),
                        _ => (line, e.to_string()),
                    };
                    return Err(InputError::new(origin, msg).at(format!("line {line}")));
                }
            }
            let line = record.position().map_or(line, csv::Position::line);
            processes.push(csv_process(&record).map_err(|(column, msg)| {
                InputError::new(origin, msg).at(format!("line {line}, column {column}"))
            })?);
        }
        Ok(Self {
            processes,
            apps: Vec::new(),
        })
    }

    /// The workload as JSON (`{"processes": [...]}`).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("serialisable")
    }

    /// Reads JSON written by [`Workload::to_json`]. Unknown fields are refused (as an extra CSV
    /// column is); errors name the line, column and key path (`processes[3].demand_ns`).
    pub fn from_json(origin: &str, text: &str) -> Result<Self> {
        // serde would read a list as the struct's fields in order ("expected struct Workload
        // with 2 elements"): say what the file must be instead.
        if !text.trim_start().starts_with('{') {
            return Err(InputError::new(
                origin,
                r#"a JSON workload is an object {"processes": [...]} (as numasim run --out writes it)"#,
            ));
        }
        let de = &mut serde_json::Deserializer::from_str(text);
        let w: Self = serde_path_to_error::deserialize(de).map_err(|e| {
            let err = crate::error::serde_json_error(origin, &e);
            // JSON has no NaN or infinity: say so rather than serde's bare "expected value".
            let inner = e.inner();
            let line = text
                .lines()
                .nth(inner.line().saturating_sub(1))
                .unwrap_or("");
            // serde points at the value, or just past its minus sign.
            let mut at = inner.column().saturating_sub(1);
            if line.get(..at).is_some_and(|s| s.ends_with('-')) {
                at -= 1;
            }
            let rest = line.get(at..).unwrap_or("");
            let word: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '+')
                .collect();
            let lower = word.trim_start_matches(['-', '+']).to_ascii_lowercase();
            if ["nan", "inf", "infinity"].contains(&lower.as_str()) {
                InputError {
                    message: format!("{word} is not a number JSON allows"),
                    ..err
                }
            } else {
                err
            }
        })?;
        Ok(w)
    }
}

/// One CSV row: the column that is wrong and why, or the process.
fn csv_process(r: &csv::StringRecord) -> Result<Process, (&'static str, String)> {
    fn cell(r: &csv::StringRecord, i: usize) -> &str {
        r.get(i).unwrap_or("")
    }
    fn whole<T: std::str::FromStr>(
        r: &csv::StringRecord,
        i: usize,
        column: &'static str,
        what: &str,
    ) -> Result<T, (&'static str, String)> {
        let v = cell(r, i);
        v.parse()
            .map_err(|_| (column, format!("'{v}' is not {what}")))
    }
    const NS: &str = "a whole number of nanoseconds";
    const ID: &str = "a whole number from 0 to 4294967295";
    let kind = match cell(r, 4) {
        "cpu" => Kind::Cpu,
        "io" => Kind::Io,
        v => return Err(("kind", format!("'{v}' is not one of cpu, io"))),
    };
    let mem_cell = cell(r, 5);
    let mem = mem_cell
        .parse::<f64>()
        .ok()
        .filter(|m| m.is_finite())
        .ok_or_else(|| {
            (
                "mem",
                format!("'{mem_cell}' is not a number between 0 and 1"),
            )
        })?;
    Ok(Process {
        pid: whole(r, 0, "pid", ID)?,
        tgid: whole(r, 1, "tgid", ID)?,
        arrival_ns: whole(r, 2, "arrival_ns", NS)?,
        demand_ns: whole(r, 3, "demand_ns", NS)?,
        kind,
        mem,
        spawn_cpu: whole(r, 6, "spawn_cpu", ID)?,
        burst_mean_ns: whole(r, 7, "burst_mean_ns", NS)?,
        wait_mean_ns: whole(r, 8, "wait_mean_ns", NS)?,
        seed: whole(
            r,
            9,
            "seed",
            "a whole number from 0 to 18446744073709551615",
        )?,
        affinity: parse_affinity_cell(cell(r, 10)).map_err(|msg| (CSV_AFFINITY, msg))?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes() -> Vec<Vec<usize>> {
        vec![vec![0, 1], vec![2, 3]]
    }

    #[test]
    fn load_held_creates_processes_more_slowly_by_the_processor_time_they_hold() {
        use crate::assumptions::LoadLevel;
        // koita: 400 ms of work in 4 phases; T = 4 forks k uniform on 1..=7 threads a phase,
        // each phase holding k processors for the longest of k exponentials of mean 100/k ms:
        // 100 · H_k. Mean of H_1..H_7 = (1 + 1.5 + 1.8333 + 2.0833 + 2.2833 + 2.45 + 2.5929)/7
        // = 13.7429/7 = 1.96327, so 785.3 ms held; T = 1: one thread a phase, held = work.
        let koita = crate::apps::profile("t", "koita").unwrap();
        assert!(
            (koita.held_ms(4) - 785.306).abs() < 0.01,
            "{}",
            koita.held_ms(4)
        );
        assert_eq!(koita.held_ms(1), 400.0);
        let canneal = crate::apps::profile("t", "canneal").unwrap();
        assert_eq!(canneal.held_ms(8), canneal.work_ms);
        // The same draws at a rate 400/785.3 as high: every arrival later by that ratio.
        let spec = WorkloadSpec::parse("w", "app=koita:4,n=30,load=0.75").unwrap();
        let work = spec.generate("w", 5, &nodes()).unwrap();
        let held = WorkloadSpec {
            load_level: LoadLevel::Held,
            ..spec
        }
        .generate("w", 5, &nodes())
        .unwrap();
        let ratio = koita.held_ms(4) / 400.0;
        for (a, b) in work.apps.iter().zip(&held.apps) {
            let (ta, tb) = (
                work.processes[a.tgid as usize].arrival_ns as f64,
                held.processes[b.tgid as usize].arrival_ns as f64,
            );
            assert!((tb - ta * ratio).abs() <= 2.0 + 1e-9 * tb, "{ta} {tb}");
        }
        assert!(
            held.processes.last().unwrap().arrival_ns > work.processes.last().unwrap().arrival_ns
        );
    }

    #[test]
    fn nan_in_json_is_named() {
        for word in ["NaN", "Infinity", "-Infinity"] {
            let text = format!("{{\"processes\": [{{\"pid\": 0, \"demand_ns\": {word}}}]}}");
            let e = Workload::from_json("w.json", &text).unwrap_err();
            assert!(
                e.to_string()
                    .contains(&format!("{word} is not a number JSON allows")),
                "{e}"
            );
        }
    }

    #[test]
    fn same_seed_same_workload_and_csv_round_trip() {
        let spec =
            WorkloadSpec::parse("w", "n=50,kind=mixed,exec=50-400,arrival=poisson:100").unwrap();
        let a = spec.generate("w", 7, &nodes()).unwrap();
        let b = spec.generate("w", 7, &nodes()).unwrap();
        assert_eq!(a, b);
        assert_ne!(a, spec.generate("w", 8, &nodes()).unwrap());
        assert_eq!(Workload::from_csv("f", &a.to_csv().unwrap()).unwrap(), a);
        assert_eq!(Workload::from_json("f", &a.to_json()).unwrap(), a);
        assert!(a.processes.iter().any(|p| p.kind == Kind::Io));
        assert!(a.processes.iter().any(|p| p.kind == Kind::Cpu));
        assert!(a
            .processes
            .windows(2)
            .all(|w| w[0].arrival_ns <= w[1].arrival_ns));
        a.validate("w", 4).unwrap();
    }

    #[test]
    fn threads_share_a_group_and_spawn_node_is_respected() {
        let spec =
            WorkloadSpec::parse("w", "n=8,threads=4,spawn=node:1,arrival=periodic:5").unwrap();
        let w = spec.generate("w", 1, &nodes()).unwrap();
        let tg: Vec<u32> = w.processes.iter().map(|p| p.tgid).collect();
        assert_eq!(tg, vec![0, 0, 0, 0, 4, 4, 4, 4]);
        assert_eq!(w.processes[4].arrival_ns, 5_000_000);
        assert!(w.processes.iter().all(|p| p.spawn_cpu >= 2));
    }

    #[test]
    fn bad_specs_name_the_key() {
        let e = WorkloadSpec::parse("--workload", "n=5,exec=-3").unwrap_err();
        assert_eq!(
            e.to_string(),
            "--workload: key exec: -3 ms must be a non-negative time"
        );
        let e = WorkloadSpec::parse("--workload", "n=5,exec=0").unwrap_err();
        assert_eq!(e.to_string(), "--workload: key exec: 0 ms must be positive");
        let e = WorkloadSpec::parse("--workload", "n=0").unwrap_err();
        assert_eq!(
            e.to_string(),
            "--workload: key n: n=0: a workload needs at least one process"
        );
        assert!(WorkloadSpec::parse("w", "n=3,colour=red").is_err());
    }

    const ROW: &str = "0,0,0,1000,cpu,0.5,0,10000000,20000000,7";

    fn csv_with(row: &str) -> String {
        format!("{CSV_HEADER}\n{ROW}\n{row}\n")
    }

    #[test]
    fn csv_cells_name_line_and_column() {
        let err = |row: &str| {
            Workload::from_csv("w.csv", &csv_with(row))
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            err("1,1,0,abc,cpu,0.5,0,10000000,20000000,7"),
            "w.csv: line 3, column demand_ns: 'abc' is not a whole number of nanoseconds"
        );
        assert_eq!(
            err("1,1,nan,100,cpu,0.5,0,10000000,20000000,7"),
            "w.csv: line 3, column arrival_ns: 'nan' is not a whole number of nanoseconds"
        );
        assert_eq!(
            err("1,1,0,-100,cpu,0.5,0,10000000,20000000,7"),
            "w.csv: line 3, column demand_ns: '-100' is not a whole number of nanoseconds"
        );
        assert_eq!(
            err("1,1,0,100,gpu,0.5,0,10000000,20000000,7"),
            "w.csv: line 3, column kind: 'gpu' is not one of cpu, io"
        );
        assert_eq!(
            err("1,1,0,100,cpu,inf,0,10000000,20000000,7"),
            "w.csv: line 3, column mem: 'inf' is not a number between 0 and 1"
        );
        assert_eq!(
            err("1,1,0,100,cpu,0.5,0,10000000"),
            "w.csv: line 3: has 8 values but the header has 10 columns"
        );
    }

    #[test]
    fn json_refuses_unknown_fields_and_names_the_key() {
        let row = r#"{"pid":0,"tgid":0,"arrival_ns":0,"demand_ns":1,"kind":"cpu","mem":0.5,"spawn_cpu":0,"burst_mean_ns":1,"wait_mean_ns":1,"seed":1"#;
        let e = Workload::from_json(
            "w.json",
            &format!(r#"{{"processes":[{row},"colour":"red"}}]}}"#),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "w.json: line 1, column 150, key processes[0].colour: unknown field `colour`, \
             expected one of `pid`, `tgid`, `arrival_ns`, `demand_ns`, `kind`, `mem`, \
             `spawn_cpu`, `burst_mean_ns`, `wait_mean_ns`, `seed`, `affinity`"
        );
        let bad = row.replace(r#""demand_ns":1"#, r#""demand_ns":"abc""#);
        let e =
            Workload::from_json("w.json", &format!(r#"{{"processes":[{bad}}}]}}"#)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "w.json: line 1, column 64, key processes[0].demand_ns: invalid type: string \"abc\", \
             expected a whole number ≥ 0"
        );
        for not_object in ["[]", "[[], []]", "  \"x\"", ""] {
            let e = Workload::from_json("w.json", not_object)
                .unwrap_err()
                .to_string();
            assert!(e.starts_with("w.json: a JSON workload is an object"), "{e}");
        }
        let e = Workload::from_json("w.json", r#"{"processes":[],"extra":1}"#).unwrap_err();
        assert!(
            e.to_string().contains("key extra: unknown field `extra`"),
            "{e}"
        );
    }

    #[test]
    fn duplicate_and_conflicting_keys_are_refused() {
        let err = |spec: &str| {
            WorkloadSpec::parse("--workload", spec)
                .unwrap_err()
                .to_string()
        };
        assert_eq!(err("n=10,n=20"), "--workload: key n: 'n' is given twice");
        assert_eq!(
            err("n=10,arrival=same,arrival=random"),
            "--workload: key arrival: 'arrival' is given twice"
        );
        assert_eq!(
            err("n=10,mem=0.5,mem_io=0.2"),
            "--workload: key mem_io: 'mem_io' and 'mem' both set a memory intensity; give mem, \
             or mem_cpu and mem_io"
        );
        assert_eq!(
            err("n=10,arrival=periodic:0"),
            "--workload: key arrival: 0 ms must be positive"
        );
        // A zero-width window is a distribution (everything at its start), not a typo.
        assert!(WorkloadSpec::parse("w", "n=2,arrival=uniform:0,threads=2,fork=over:0").is_ok());
        // mem_cpu and mem_io together are fine.
        let spec = WorkloadSpec::parse("w", "n=2,mem_cpu=0.4,mem_io=0.1").unwrap();
        assert_eq!((spec.mem_cpu, spec.mem_io), (0.4, 0.1));
    }

    #[test]
    fn an_n_that_cannot_fit_in_memory_is_refused_before_allocating() {
        // 10¹² processes need petabytes: refused on any machine, with nothing allocated (the
        // Vec for them alone would abort the process). The message's figures are tested in
        // budget.rs with a fake amount of available memory.
        if crate::budget::available_bytes().is_none() {
            return; // no /proc/meminfo: no check to test here
        }
        let spec = WorkloadSpec::parse("--workload", "n=1000000000000").unwrap();
        let e = spec.generate("--workload", 0, &nodes()).unwrap_err();
        assert_eq!(e.location, "key n");
        let gb = crate::budget::estimate_run_bytes(1_000_000_000_000, 4) as f64 / 1e9;
        assert!(
            e.message.starts_with(&format!(
                "1000000000000 processes need about {gb:.1} GB of memory to run"
            )),
            "{e}"
        );
    }

    #[test]
    fn app_spec_makes_thread_groups_with_plans() {
        let spec = WorkloadSpec::parse("w", "app=swaptions:3+dedup,threads=2,n=2").unwrap();
        let w = spec.generate("w", 3, &nodes()).unwrap();
        // Per round: swaptions with 3 threads, dedup with 1 + 2 + 2 + 2 + 1 threads.
        assert_eq!(w.apps.len(), 4);
        assert_eq!(
            w.apps
                .iter()
                .map(|a| (a.tgid, a.plans.len()))
                .collect::<Vec<_>>(),
            vec![(0, 3), (3, 8), (11, 3), (14, 8)]
        );
        w.validate("w", 4).unwrap();
        for app in &w.apps {
            let threads = &w.processes[app.tgid as usize..app.tgid as usize + app.plans.len()];
            // The main thread creates the others: one spawn CPU, one arrival (fork=at-once).
            assert!(threads.iter().all(|p| p.tgid == app.tgid
                && p.spawn_cpu == threads[0].spawn_cpu
                && p.arrival_ns == threads[0].arrival_ns
                && p.kind == Kind::Cpu));
        }
        let json = w.to_json();
        assert_eq!(Workload::from_json("w", &json).unwrap(), w);
        assert!(w
            .to_csv()
            .unwrap_err()
            .to_string()
            .contains("save it as .json"));
    }

    #[test]
    fn app_spec_refuses_keys_the_profile_sets_and_unknown_apps() {
        for (text, want) in [
            (
                "app=canneal,exec=100",
                "'exec' does not apply to app workloads",
            ),
            ("app=canneal,mem=0.2", "'mem' does not apply"),
            ("app=nosuch", "unknown application 'nosuch'"),
            ("app=canneal:0", "not a thread count"),
        ] {
            let e = WorkloadSpec::parse("w", text).unwrap_err().to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
    }

    #[test]
    fn an_app_whose_wait_is_never_signalled_is_refused() {
        let mut w = WorkloadSpec::parse("w", "app=canneal,threads=2")
            .unwrap()
            .generate("w", 1, &nodes())
            .unwrap();
        w.apps[0].plans[1][1].wait = Some(apps::Wait { point: 0, count: 3 });
        let e = w.validate("w", 4).unwrap_err().to_string();
        assert!(
            e.contains("point 0 is waited for 3 times but signalled 2"),
            "{e}"
        );
    }
}
