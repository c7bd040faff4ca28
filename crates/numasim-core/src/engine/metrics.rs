//! Metrics (per process, per run), gathered from the final simulation state.
//!
//! Per process: arrival, first run, completion, turnaround, response, waiting, CPU time by node
//! and by CPU class, cache-refill time, IO wait, migrations by kind and by distance level, the
//! time-weighted remote-access factor, memory-stall time, origin and the node it ran most on.
//! Per run: mean / median / p95 turnaround (p95 by nearest rank), mean response, makespan,
//! utilisation per CPU, migrations by kind and level, balancing invocations and moves per kind and
//! level with their total cost, total memory-stall time, and the processes far from their origin
//! node (count, %, and by the memory access level of the node where they ran most).

use serde::Serialize;
use smallvec::SmallVec;

use crate::interface::MigrationKind;

use super::State;

const MS: f64 = 1e6;

/// What one process experienced.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProcResult {
    pub pid: usize,
    pub tgid: usize,
    pub kind: &'static str,
    pub demand_ms: f64,
    pub arrival_ms: f64,
    pub first_run_ms: f64,
    pub completion_ms: f64,
    pub turnaround_ms: f64,
    pub response_ms: f64,
    /// Runnable but not running.
    pub waiting_ms: f64,
    /// On a CPU (including cache-refill stalls and balancing work done on its CPU).
    pub cpu_ms: f64,
    pub fast_cpu_ms: f64,
    pub slow_cpu_ms: f64,
    pub refill_ms: f64,
    pub io_wait_ms: f64,
    /// Work done, accumulated from progress (equals `demand_ms` up to rounding).
    pub work_ms: f64,
    /// Time stalled on memory (part of `cpu_ms`).
    pub memory_ms: f64,
    /// Time-weighted mean of L = Σ share · distance / 10 while running (1.0 = all local).
    pub remote_factor: f64,
    /// Time-weighted share of its memory accesses that went to another node.
    pub remote_share: f64,
    /// Blocked at a barrier or pipeline queue of its application.
    pub sync_wait_ms: f64,
    pub origin_cpu: usize,
    pub origin_node: usize,
    pub most_node: usize,
    /// Memory access level of `most_node` seen from `origin_node` (0 = the origin node itself).
    pub most_level: usize,
    pub migrations: u32,
    /// Indexed like [`MigrationKind::ALL`]; without `affinity` (the last) when the workload
    /// gives no process an affinity, so those results read as before it existed.
    pub migrations_by_kind: SmallVec<[u32; MigrationKind::ALL.len()]>,
    /// Indexed by memory access level of the move's distance (0 = inside a node). Up to six
    /// levels inline, like the node lists below: a million results need no allocation each.
    pub migrations_by_level: SmallVec<[u32; 6]>,
    /// Migrations between CPUs of different speeds (fast ↔ slow).
    pub class_migrations: u32,
    /// `(node, ms)` for each node it ran on, in the order first visited.
    pub cpu_ms_by_node: SmallVec<[(usize, f64); 2]>,
}

/// Balancing invocations and moves per level.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BalanceSummary {
    pub periodic: Vec<u64>,
    pub newidle: Vec<u64>,
    pub active: Vec<u64>,
    pub moved_periodic: Vec<u64>,
    pub moved_newidle: Vec<u64>,
    pub moved_active: Vec<u64>,
    /// `cpu_idle` and machine-wide callbacks (counted at level 0).
    pub other: Vec<u64>,
    pub moved_other: Vec<u64>,
    pub cost_ms: f64,
    /// Candidate evaluations of selection policies (thread-aware, memory-aware); absent when
    /// none were made, so results of other policies read exactly as before.
    #[serde(skip_serializing_if = "is_zero")]
    pub evaluations: u64,
    /// Decisions the engine refused (a policy bug if ever non-zero).
    pub rejected: u64,
    /// Per CPU: balancing attempts made while it had nothing to run (newly idle, or periodic
    /// on an idle CPU).
    pub idle_per_cpu: Vec<u64>,
    /// The same, summed over fast CPUs (speed > 1) and over the others.
    pub idle_fast: u64,
    pub idle_slow: u64,
}

/// What the run as a whole did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub processes: usize,
    pub makespan_ms: f64,
    pub mean_tat_ms: f64,
    pub median_tat_ms: f64,
    pub p95_tat_ms: f64,
    pub mean_response_ms: f64,
    pub mean_waiting_ms: f64,
    pub utilisation: f64,
    pub utilisation_per_cpu: Vec<f64>,
    pub migrations: u64,
    pub migrations_by_kind: Vec<(String, u64)>,
    pub migrations_by_level: Vec<u64>,
    /// Migrations between CPUs of different speeds.
    pub migrations_between_classes: u64,
    pub balance: BalanceSummary,
    pub memory_ms: f64,
    pub mean_remote_factor: f64,
    pub far_from_origin: usize,
    pub far_from_origin_pct: f64,
    /// Far-from-origin processes by the level of the node where they ran most (index 0 unused).
    pub far_by_level: Vec<usize>,
    /// Memory access levels of the machine (SLIT values), for reading the per-level vectors.
    pub mals: Vec<u32>,
    /// What the policy counted itself (`Policy::extra_metrics`), by name; absent when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub policy_metrics: Vec<(String, f64)>,
}

/// Everything a run produced.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunResult {
    pub processes: Vec<ProcResult>,
    pub summary: Summary,
    /// Running intervals, when `EngineConfig::record_trace` is set.
    pub trace: Vec<super::Slice>,
    /// Migrations, balancing attempts and runqueue lengths, when tracing.
    pub trace_events: super::TraceEvents,
    /// Events the engine processed (for benchmarks).
    pub events: u64,
    /// Per application with a structure (`Workload::apps`); absent for other workloads.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub apps: Vec<AppResult>,
}

/// What an experiment's worker reads of a run (`RunResult::summary_json`): the summary, and the
/// applications when the workload has any. Borrowed, so nothing is copied to serialise it.
#[derive(Serialize)]
struct SummaryOnly<'a> {
    summary: &'a Summary,
    #[serde(skip_serializing_if = "<[AppResult]>::is_empty")]
    apps: &'a [AppResult],
}

impl RunResult {
    /// `{"summary": {...}, "apps": [...]}` as JSON text: the run's summary and, for a workload
    /// with applications, their results (`"apps"` absent otherwise) — the same values, written
    /// the same way, as in the full result, without the per-process results, the trace and its
    /// events. An experiment reads only these, for thousands of runs.
    pub fn summary_json(&self) -> String {
        let view = SummaryOnly {
            summary: &self.summary,
            apps: &self.apps,
        };
        serde_json::to_string(&view).expect("serialisable")
    }
}

/// What one application (a structured thread group) experienced.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AppResult {
    pub tgid: usize,
    pub name: String,
    pub threads: usize,
    pub arrival_ms: f64,
    /// When its last thread completed.
    pub completion_ms: f64,
    /// Completion of the last thread − arrival of the first.
    pub turnaround_ms: f64,
    /// CPU time of its threads.
    pub cpu_ms: f64,
    /// Time its threads spent blocked at its barriers and queues.
    pub sync_wait_ms: f64,
    /// Time-weighted share of its threads' accesses that went to another node.
    pub remote_share: f64,
    /// `(node, ms)`: CPU time of its threads per node, every node listed (the histogram of
    /// where its threads ran).
    pub cpu_ms_by_node: Vec<(usize, f64)>,
    /// Threads by the node each ran on most.
    pub threads_by_node: Vec<usize>,
    /// `(bin start ms, remote share)` per [`APP_BIN_NS`] bin in which it ran.
    pub remote_share_timeline: Vec<(f64, f64)>,
}

/// Width of the time bins of an application's remote-share timeline.
pub const APP_BIN_NS: u64 = 10_000_000;

/// Adds a running interval `[from, to)` with a constant remote share to per-bin sums.
pub(super) fn bin_remote_share(bins: &mut Vec<(f64, f64)>, from: u64, to: u64, share: f64) {
    let mut t = from;
    while t < to {
        let bin = (t / APP_BIN_NS) as usize;
        let end = ((bin as u64 + 1) * APP_BIN_NS).min(to);
        if bins.len() <= bin {
            bins.resize(bin + 1, (0.0, 0.0));
        }
        let ns = (end - t) as f64;
        bins[bin].0 += ns;
        bins[bin].1 += share * ns;
        t = end;
    }
}

/// `f` averaged over `procs` weighted by their CPU time (`empty` when none ran).
fn cpu_weighted(procs: &[ProcResult], f: fn(&ProcResult) -> f64, empty: f64) -> f64 {
    let total: f64 = procs.iter().map(|p| p.cpu_ms).sum();
    if total > 0.0 {
        procs.iter().map(|p| f(p) * p.cpu_ms).sum::<f64>() / total
    } else {
        empty
    }
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

fn ms(ns: u64) -> f64 {
    ns as f64 / MS
}

/// Names of the migration kinds, in the order of `migrations_by_kind`.
pub fn migration_kind_names() -> Vec<&'static str> {
    MigrationKind::ALL.iter().map(|k| k.name()).collect()
}

pub(super) fn collect(mut s: State<'_>) -> RunResult {
    let trace = std::mem::take(&mut s.trace);
    let trace_events = std::mem::take(&mut s.trace_events);
    // Nothing below reads the thread groups' state: freed before the results are built, so a
    // run's peak memory is not its state and its results at once (a million processes: 0.3 GB).
    drop(std::mem::take(&mut s.w.groups));
    let events = s.events_processed;
    let s = &s;
    let (m, procs, workload) = (s.w.machine, &s.w.procs, s.w.workload);
    let nlev = s.mals.len();
    // The kinds reported: `affinity` only for a workload with affinities.
    let kinds = if s.affine {
        MigrationKind::ALL.len()
    } else {
        MigrationKind::CLASSIC
    };
    let processes: Vec<ProcResult> = procs
        .iter()
        .enumerate()
        .map(|(pid, p)| {
            let w = &workload.processes[pid];
            let completion = p.completion_ns.expect("every process completed");
            let first = p.first_run_ns.expect("every process ran");
            let cpu_ns: u64 = p.run_ns_by_node.iter().map(|(_, ns)| ns).sum();
            let origin_cpu = p.origin_cpu.expect("ran");
            let origin_node = m.cpu_node(origin_cpu);
            // Ties go to the origin node, then to the lowest node id.
            let most_node = p
                .run_ns_by_node
                .iter()
                .map(|&(k, ns)| (k as usize, ns))
                .max_by_key(|&(k, ns)| (ns, k == origin_node, std::cmp::Reverse(k)))
                .map_or(origin_node, |(k, _)| k);
            let d = m.distance(origin_node, most_node);
            let tat = completion - w.arrival_ns;
            ProcResult {
                pid,
                tgid: w.tgid as usize,
                kind: if w.kind == crate::workload::Kind::Cpu {
                    "cpu"
                } else {
                    "io"
                },
                demand_ms: ms(w.demand_ns),
                arrival_ms: ms(w.arrival_ns),
                first_run_ms: ms(first),
                completion_ms: ms(completion),
                turnaround_ms: ms(tat),
                response_ms: ms(first - w.arrival_ns),
                waiting_ms: ms(tat.saturating_sub(cpu_ns + p.io_wait_ns + p.sync_wait_ns)),
                cpu_ms: ms(cpu_ns),
                fast_cpu_ms: ms(p.run_ns_fast),
                slow_cpu_ms: ms(p.run_ns_slow),
                refill_ms: ms(p.refill_ns),
                io_wait_ms: ms(p.io_wait_ns),
                work_ms: p.work_done / MS,
                memory_ms: p.mem_time_ns / MS,
                remote_factor: if cpu_ns > 0 {
                    p.remote_weighted_ns / cpu_ns as f64
                } else {
                    1.0
                },
                remote_share: if cpu_ns > 0 {
                    p.remote_share_ns / cpu_ns as f64
                } else {
                    0.0
                },
                sync_wait_ms: ms(p.sync_wait_ns),
                origin_cpu,
                origin_node,
                most_node,
                most_level: s.mals.binary_search(&d).expect("a table distance"),
                migrations: p.migrations_by_kind.iter().sum(),
                migrations_by_kind: p.migrations_by_kind[..kinds].iter().copied().collect(),
                migrations_by_level: p.migrations_by_level.clone(),
                class_migrations: p.class_migrations,
                cpu_ms_by_node: p
                    .run_ns_by_node
                    .iter()
                    .map(|&(k, ns)| (k as usize, ms(ns)))
                    .collect(),
            }
        })
        .collect();
    let n = processes.len();
    let mut tats: Vec<f64> = processes.iter().map(|p| p.turnaround_ms).collect();
    tats.sort_unstable_by(f64::total_cmp); // equal keys are equal values
    let mean = |f: &dyn Fn(&ProcResult) -> f64| processes.iter().map(f).sum::<f64>() / n as f64;
    let median = if n % 2 == 1 {
        tats[n / 2]
    } else {
        (tats[n / 2 - 1] + tats[n / 2]) / 2.0
    };
    let p95 = tats[((0.95 * n as f64).ceil() as usize).clamp(1, n) - 1];
    let makespan_ns = procs
        .iter()
        .filter_map(|p| p.completion_ns)
        .max()
        .unwrap_or(0);
    let first_arrival = workload
        .processes
        .iter()
        .map(|p| p.arrival_ns)
        .min()
        .unwrap_or(0);
    let span = (makespan_ns - first_arrival).max(1) as f64;
    let utilisation_per_cpu: Vec<f64> = s.w.cpus.iter().map(|c| c.busy_ns as f64 / span).collect();
    let mut by_kind = vec![0u64; MigrationKind::ALL.len()];
    let mut by_level = vec![0u64; nlev];
    for p in &processes {
        for (k, v) in p.migrations_by_kind.iter().enumerate() {
            by_kind[k] += u64::from(*v);
        }
        for (l, v) in p.migrations_by_level.iter().enumerate() {
            by_level[l] += u64::from(*v);
        }
    }
    let far: Vec<&ProcResult> = processes
        .iter()
        .filter(|p| p.most_node != p.origin_node)
        .collect();
    let mut far_by_level = vec![0usize; nlev];
    for p in &far {
        far_by_level[p.most_level] += 1;
    }
    let pad = |v: &Vec<u64>| {
        let mut v = v.clone();
        v.resize(v.len().max(nlev), 0);
        v
    };
    let st = &s.stats;
    let summary = Summary {
        processes: n,
        makespan_ms: ms(makespan_ns),
        mean_tat_ms: mean(&|p| p.turnaround_ms),
        median_tat_ms: median,
        p95_tat_ms: p95,
        mean_response_ms: mean(&|p| p.response_ms),
        mean_waiting_ms: mean(&|p| p.waiting_ms),
        utilisation: utilisation_per_cpu.iter().sum::<f64>() / utilisation_per_cpu.len() as f64,
        utilisation_per_cpu,
        migrations: by_kind.iter().sum(),
        migrations_by_kind: MigrationKind::ALL[..kinds]
            .iter()
            .zip(&by_kind)
            .map(|(k, v)| (k.name().to_string(), *v))
            .collect(),
        migrations_by_level: by_level,
        migrations_between_classes: processes
            .iter()
            .map(|p| u64::from(p.class_migrations))
            .sum(),
        balance: BalanceSummary {
            periodic: pad(&st.invocations[0]),
            newidle: pad(&st.invocations[1]),
            active: pad(&st.invocations[2]),
            moved_periodic: pad(&st.moved[0]),
            moved_newidle: pad(&st.moved[1]),
            moved_active: pad(&st.moved[2]),
            other: pad(&st.invocations[3]),
            moved_other: pad(&st.moved[3]),
            cost_ms: ms(st.cost_ns),
            evaluations: st.evaluations,
            rejected: st.rejected,
            idle_per_cpu: st.idle_attempts.clone(),
            idle_fast: (0..m.cpus())
                .filter(|&c| m.speed(c) > 1.0)
                .map(|c| st.idle_attempts[c])
                .sum(),
            idle_slow: (0..m.cpus())
                .filter(|&c| m.speed(c) <= 1.0)
                .map(|c| st.idle_attempts[c])
                .sum(),
        },
        memory_ms: processes.iter().map(|p| p.memory_ms).sum(),
        mean_remote_factor: cpu_weighted(&processes, |p| p.remote_factor, 1.0),
        far_from_origin: far.len(),
        far_from_origin_pct: 100.0 * far.len() as f64 / n as f64,
        far_by_level,
        mals: s.mals.clone(),
        policy_metrics: Vec::new(),
    };
    let apps = app_results(s, &processes);
    RunResult {
        processes,
        summary,
        trace,
        trace_events,
        events,
        apps,
    }
}

/// Per application: completion of its last thread, where its threads ran, its remote share.
fn app_results(s: &State<'_>, processes: &[ProcResult]) -> Vec<AppResult> {
    let nodes = s.w.machine.nodes();
    s.w.workload
        .apps
        .iter()
        .zip(&s.app_bins)
        .map(|(app, bins)| {
            let first = app.tgid as usize;
            let threads = &processes[first..first + app.plans.len()];
            let arrival = threads
                .iter()
                .map(|p| p.arrival_ms)
                .fold(f64::INFINITY, f64::min);
            let completion = threads.iter().map(|p| p.completion_ms).fold(0.0, f64::max);
            let cpu_ms: f64 = threads.iter().map(|p| p.cpu_ms).sum();
            let mut by_node = vec![0.0; nodes];
            let mut threads_by_node = vec![0usize; nodes];
            for p in threads {
                for &(k, t) in &p.cpu_ms_by_node {
                    by_node[k] += t;
                }
                threads_by_node[p.most_node] += 1;
            }
            AppResult {
                tgid: first,
                name: app.name.clone(),
                threads: threads.len(),
                arrival_ms: arrival,
                completion_ms: completion,
                turnaround_ms: completion - arrival,
                cpu_ms,
                sync_wait_ms: threads.iter().map(|p| p.sync_wait_ms).sum(),
                remote_share: cpu_weighted(threads, |p| p.remote_share, 0.0),
                cpu_ms_by_node: by_node.into_iter().enumerate().collect(),
                threads_by_node,
                remote_share_timeline: bins
                    .iter()
                    .enumerate()
                    .filter(|(_, (ns, _))| *ns > 0.0)
                    .map(|(b, (ns, w))| (ms(b as u64 * APP_BIN_NS), w / ns))
                    .collect(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use crate::config::EngineConfig;
    use crate::domains::{BuildOptions, Builder};
    use crate::workload::WorkloadSpec;

    fn run(spec: &str) -> super::RunResult {
        let path = format!(
            "{}/../../python/numasim/data/machines/mehta-m3.toml",
            env!("CARGO_MANIFEST_DIR")
        );
        let m = crate::machine::file::read(std::path::Path::new(&path)).unwrap();
        let w = WorkloadSpec::parse("test", spec)
            .and_then(|s| s.generate("test", 7, m.node_cpu_lists()))
            .unwrap();
        let d = Builder::Multilevel.build(&m, &BuildOptions::default());
        crate::run_policy(&m, &d, &w, "linux26", &EngineConfig::default()).unwrap()
    }

    /// The summary-only text holds exactly the full result's summary (and applications), so
    /// an experiment's rows read from either are the same.
    #[test]
    fn summary_json_is_the_full_results_summary() {
        for (spec, has_apps) in [
            ("n=40,kind=mixed,exec=100,arrival=random", false),
            ("app=canneal:4+x264:3", true),
        ] {
            let r = run(spec);
            let full: Value = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
            let short: Value = serde_json::from_str(&r.summary_json()).unwrap();
            assert_eq!(short["summary"], full["summary"], "{spec}");
            assert_eq!(short.get("apps"), full.get("apps"), "{spec}");
            assert_eq!(short.get("apps").is_some(), has_apps, "{spec}");
            let keys: Vec<&String> = short.as_object().unwrap().keys().collect();
            assert_eq!(keys.len(), 1 + usize::from(has_apps), "{spec}: {keys:?}");
        }
    }
}
