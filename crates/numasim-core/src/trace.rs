//! Chrome/Perfetto trace-event JSON of a traced run (opens in ui.perfetto.dev and
//! chrome://tracing), and the rules every such trace keeps.
//!
//! ```text
//!   pid = node  "node 1"                     ts, dur in µs (engine time is ns)
//!   └─ tid = CPU "cpu 2 (speed 1)"
//!        X  [ pid 7 ][ pid 3    ]   [ pid 9 ]      a slice per running interval
//!        s ───────────────╮                         a flow per migration (source slice's end
//!   └─ tid = CPU "cpu 3"  ╰──► f [ pid 3 ]          → the destination's next slice)
//!        i ▾ balance L1 periodic (level, kind, moved, outcome)
//!   C  runqueue cpu 2: nr_running over time          a counter track per CPU
//!   M  process_name / thread_name / sort indexes     metadata names every track
//! ```
//!
//! 1. Metadata: each node a process track, each CPU a thread track of its node's process.
//! 2. Slices: every recorded running interval, clipped to the window, named "pid P", with the
//!    process's origin node and CPU and its time-weighted remote factor (per process).
//! 3. Flows: for each migration, the last slice of the process on the source CPU that ended by
//!    the migration and its first slice on the destination CPU from then on; the arrow leaves
//!    1 ns before the source slice ends and lands 1 ns after the destination slice starts, so
//!    each end lies inside its slice (the `f` binds to its enclosing slice, `"bp": "e"`). A
//!    migration with no earlier slice on the source (fork placement, a move before the
//!    process first ran there) or a slice shorter than 2 ns at either end has no arrow.
//!    Perfetto's JSON importer (`json_trace_parser_impl.cc`) binds `s` to the slice open on
//!    its thread and `f` with `bp: e` to the enclosing one, and reads only `process_name` and
//!    `thread_name` metadata (the sort indexes are for chrome://tracing).
//! 4. Instants: each balancing attempt on its CPU; machine-wide callbacks (no CPU) are left out.
//! 5. Counters: each CPU's runqueue length whenever it changes, on the CPU's node process
//!    (with the CPU as `tid`, which ties the counter to the right process in Perfetto); a
//!    window starts each counter at its value when the window opens.
//!
//! [`problems`] checks what numasim promises of a trace: every `X` has `ts` and `dur ≥ 0`,
//! slices on one thread never overlap, every flow has one start and one finish in order, and
//! metadata names every process and thread used.
//!
//! Known limits: the remote factor is the process's mean over the run, not per slice.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::engine::{RunResult, Slice, TraceEvents, MACHINE_WIDE};
use crate::error::{InputError, Result};
use crate::machine::{CpuId, Machine};

const NS_PER_US: f64 = 1_000.0;

/// Where a process came from, as its slices are labelled.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Origin {
    pub pid: usize,
    pub origin_node: usize,
    pub origin_cpu: usize,
    pub remote_factor: f64,
}

/// What a trace is made of: the processes' origins, the running intervals and the recorded
/// events. Reads the JSON of a [`RunResult`] (other fields are ignored), so a saved run is
/// its own input.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct RunEvents {
    pub processes: Vec<Origin>,
    pub trace: Vec<Slice>,
    pub trace_events: TraceEvents,
    /// The run's summary, where it names the machine's shape (a run's JSON has it): checked
    /// so that a run is never drawn on another machine than the one it ran on.
    #[serde(default)]
    pub summary: Option<MachineShape>,
}

/// What a run's summary says of its machine: a utilisation per CPU and the MALs.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct MachineShape {
    #[serde(default)]
    pub utilisation_per_cpu: Vec<f64>,
    #[serde(default)]
    pub mals: Vec<u32>,
}

impl RunEvents {
    /// The events of a traced run.
    pub fn of(r: &RunResult) -> Self {
        let processes = r
            .processes
            .iter()
            .map(|p| Origin {
                pid: p.pid,
                origin_node: p.origin_node,
                origin_cpu: p.origin_cpu,
                remote_factor: p.remote_factor,
            })
            .collect();
        Self {
            processes,
            trace: r.trace.clone(),
            trace_events: r.trace_events.clone(),
            summary: Some(MachineShape {
                utilisation_per_cpu: r.summary.utilisation_per_cpu.clone(),
                mals: r.summary.mals.clone(),
            }),
        }
    }

    /// Reads a run's JSON (`origin` names it in errors) and checks it against the machine it
    /// ran on: every CPU exists, every slice belongs to a listed process and has `start ≤ end`.
    pub fn from_json(origin: &str, text: &str, m: &Machine) -> Result<Self> {
        let run: Self =
            serde_json::from_str(text).map_err(|e| InputError::new(origin, e.to_string()))?;
        // Every process with work runs at least once, so a traced run has slices: an empty
        // trace means the run was made without recording one, and drawing it would give an
        // empty timeline that looks like an idle machine.
        if run.trace.is_empty() && !run.processes.is_empty() {
            return Err(InputError::new(
                origin,
                "the run was made without recording its trace (simulate(..., trace=True), \
                 or numasim run with --trace/--out): there is nothing to draw",
            ));
        }
        if let Some(shape) = &run.summary {
            let (cpus, mals) = (shape.utilisation_per_cpu.len(), &shape.mals);
            if cpus > 0 && (cpus != m.cpus() || *mals != m.mals()) {
                return Err(InputError::new(
                    origin,
                    format!(
                        "the run was made on a machine of {cpus} CPUs with memory access levels \
                         {mals:?}, not on {} ({} CPUs, levels {:?}): give the machine it ran on",
                        m.name,
                        m.cpus(),
                        m.mals()
                    ),
                ));
            }
        }
        run.check(m).map_err(|(field, i, msg)| {
            InputError::new(origin, msg).at(format!("field {field}, entry {i}"))
        })?;
        Ok(run)
    }

    fn check(&self, m: &Machine) -> std::result::Result<(), (&'static str, usize, String)> {
        let cpus = m.cpus();
        let cpu_ok = |c: CpuId| {
            (c < cpus)
                .then_some(())
                .ok_or(format!("CPU {c}, but the machine has {cpus} CPUs"))
        };
        let pids: BTreeSet<usize> = self.processes.iter().map(|p| p.pid).collect();
        for (i, s) in self.trace.iter().enumerate() {
            let bad = |msg: String| ("trace", i, msg);
            cpu_ok(s.cpu).map_err(bad)?;
            if !pids.contains(&s.pid) {
                return Err(bad(format!("pid {} is not among the processes", s.pid)));
            }
            if s.end_ns < s.start_ns {
                return Err(bad(format!("ends at {} ns, before it starts", s.end_ns)));
            }
        }
        for (i, (_, _, from, to, _)) in self.trace_events.migrations.iter().enumerate() {
            cpu_ok(*from)
                .and(cpu_ok(*to))
                .map_err(|msg| ("trace_events.migrations", i, msg))?;
        }
        for (i, (_, cpu, ..)) in self.trace_events.balances.iter().enumerate() {
            if *cpu != MACHINE_WIDE {
                cpu_ok(*cpu).map_err(|msg| ("trace_events.balances", i, msg))?;
            }
        }
        for (i, (_, cpu, _)) in self.trace_events.runqueue.iter().enumerate() {
            cpu_ok(*cpu).map_err(|msg| ("trace_events.runqueue", i, msg))?;
        }
        Ok(())
    }
}

/// A part of the run, `[start_ns, end_ns]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub start_ns: u64,
    pub end_ns: u64,
}

impl Window {
    /// The whole run.
    pub const ALL: Window = Window {
        start_ns: 0,
        end_ns: u64::MAX,
    };

    fn contains(&self, t: u64) -> bool {
        (self.start_ns..=self.end_ns).contains(&t)
    }
}

/// One trace event; absent fields are left out of the JSON.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Event {
    pub ph: &'static str,
    pub name: Cow<'static, str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cat: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<u64>,
    /// Scope of an instant (`"t"`: its thread).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub s: Option<&'static str>,
    /// Binding point of a flow's end (`"e"`: the enclosing slice).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bp: Option<&'static str>,
    pub pid: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tid: Option<CpuId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ts: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dur: Option<f64>,
    #[serde(skip_serializing_if = "Args::is_none")]
    pub args: Args,
}

/// The `args` of an event, by kind of event.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Args {
    Name {
        name: String,
    },
    SortIndex {
        sort_index: usize,
    },
    Run {
        pid: usize,
        origin_node: usize,
        origin_cpu: usize,
        remote_factor: f64,
    },
    Migration {
        kind: Cow<'static, str>,
    },
    Balance {
        level: usize,
        kind: Cow<'static, str>,
        moved: usize,
        outcome: Cow<'static, str>,
    },
    Counter {
        nr_running: usize,
    },
    None {},
}

impl Args {
    fn is_none(&self) -> bool {
        matches!(self, Args::None {})
    }
}

/// A whole trace: `{"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Trace {
    pub trace_events: Vec<Event>,
    pub display_time_unit: &'static str,
    pub other_data: BTreeMap<&'static str, String>,
}

impl Trace {
    /// The trace as JSON text (what Perfetto opens).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a trace serialises")
    }

    /// The trace as a JSON value (for [`problems`] and tests).
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).expect("a trace serialises")
    }
}

impl Event {
    fn new(ph: &'static str, name: impl Into<Cow<'static, str>>, pid: usize, args: Args) -> Self {
        Self {
            ph,
            name: name.into(),
            cat: None,
            id: None,
            s: None,
            bp: None,
            pid,
            tid: None,
            ts: None,
            dur: None,
            args,
        }
    }

    fn on(mut self, cpu: CpuId) -> Self {
        self.tid = Some(cpu);
        self
    }

    fn at(mut self, ns: u64) -> Self {
        self.ts = Some(ns as f64 / NS_PER_US);
        self
    }

    fn cat(mut self, cat: &'static str) -> Self {
        self.cat = Some(cat);
        self
    }
}

/// The trace of a traced run on `m`, restricted to `window`.
pub fn chrome_trace(m: &Machine, run: &RunEvents, window: Window) -> Trace {
    let mut events = Vec::new();
    for n in 0..m.nodes() {
        let name = format!("node {n}");
        events.push(Event::new("M", "process_name", n, Args::Name { name }));
        events.push(Event::new(
            "M",
            "process_sort_index",
            n,
            Args::SortIndex { sort_index: n },
        ));
    }
    for c in 0..m.cpus() {
        let (node, name) = (m.cpu_node(c), format!("cpu {c} (speed {})", m.speed(c)));
        events.push(Event::new("M", "thread_name", node, Args::Name { name }).on(c));
        let index = Args::SortIndex { sort_index: c };
        events.push(Event::new("M", "thread_sort_index", node, index).on(c));
    }

    let origins: BTreeMap<usize, &Origin> = run.processes.iter().map(|p| (p.pid, p)).collect();
    let mut slices_of: BTreeMap<(usize, CpuId), Vec<(u64, u64)>> = BTreeMap::new();
    for s in &run.trace {
        slices_of
            .entry((s.pid, s.cpu))
            .or_default()
            .push((s.start_ns, s.end_ns));
        let (start, end) = (s.start_ns.max(window.start_ns), s.end_ns.min(window.end_ns));
        if end <= start {
            continue;
        }
        let p = origins[&s.pid];
        let args = Args::Run {
            pid: s.pid,
            origin_node: p.origin_node,
            origin_cpu: p.origin_cpu,
            remote_factor: (p.remote_factor * 1e4).round() / 1e4,
        };
        let mut e = Event::new("X", format!("pid {}", s.pid), m.cpu_node(s.cpu), args);
        e.dur = Some((end - start) as f64 / NS_PER_US);
        events.push(e.cat("run").on(s.cpu).at(start));
    }
    for v in slices_of.values_mut() {
        v.sort_unstable();
    }

    let mut flow_id = 0u64;
    for (t, pid, src, dst, kind) in &run.trace_events.migrations {
        let (t, pid) = (*t, *pid);
        let none = Vec::new();
        let before = slices_of.get(&(pid, *src)).unwrap_or(&none);
        let after = slices_of.get(&(pid, *dst)).unwrap_or(&none);
        // Slices of one process on one CPU do not overlap, so ends are sorted like starts.
        let last_end = before[..before.partition_point(|&(_, e)| e <= t)].last();
        let next_start = after.get(after.partition_point(|&(s, _)| s < t));
        let (Some(&(from_start, end)), Some(&(start, to_end))) = (last_end, next_start) else {
            continue;
        };
        // 1 ns inside each slice, so that a viewer binds each end to its slice whatever the
        // order it gives events at equal times.
        let (t0, t1) = (end - 1, start + 1);
        if t0 < from_start || t1 >= to_end {
            continue;
        }
        if t0 < window.start_ns || t1 > window.end_ns {
            continue;
        }
        flow_id += 1;
        let name = format!("migrate pid {pid}");
        let mut from = Event::new(
            "s",
            name.clone(),
            m.cpu_node(*src),
            Args::Migration { kind: kind.clone() },
        );
        from.id = Some(flow_id);
        events.push(from.cat("migration").on(*src).at(t0));
        let mut to = Event::new("f", name, m.cpu_node(*dst), Args::None {});
        (to.id, to.bp) = (Some(flow_id), Some("e"));
        events.push(to.cat("migration").on(*dst).at(t1));
    }

    for (t, cpu, level, kind, moved) in &run.trace_events.balances {
        if !window.contains(*t) || *cpu >= m.cpus() {
            continue;
        }
        let outcome: Cow<'static, str> = match moved {
            0 => "nothing moved".into(),
            1 => "moved 1 task".into(),
            n => format!("moved {n} tasks").into(),
        };
        let name = format!("balance L{level} {kind}");
        let args = Args::Balance {
            level: *level,
            kind: kind.clone(),
            moved: *moved,
            outcome,
        };
        let mut e = Event::new("i", name, m.cpu_node(*cpu), args).cat("balance");
        e.s = Some("t");
        events.push(e.on(*cpu).at(*t));
    }

    let counter = |t: u64, cpu: CpuId, n: usize| {
        let name = format!("runqueue cpu {cpu}");
        Event::new("C", name, m.cpu_node(cpu), Args::Counter { nr_running: n })
            .on(cpu)
            .at(t)
    };
    let mut opening: BTreeMap<CpuId, usize> = BTreeMap::new();
    for &(t, cpu, n) in &run.trace_events.runqueue {
        if t < window.start_ns {
            opening.insert(cpu, n);
        }
    }
    if window.start_ns > 0 {
        events.extend(
            opening
                .iter()
                .map(|(&c, &n)| counter(window.start_ns, c, n)),
        );
    }
    for &(t, cpu, n) in &run.trace_events.runqueue {
        if window.contains(t) {
            events.push(counter(t, cpu, n));
        }
    }
    let other_data = BTreeMap::from([
        ("generator", "numasim".to_string()),
        ("machine", m.name.clone()),
    ]);
    Trace {
        trace_events: events,
        display_time_unit: "ms",
        other_data,
    }
}

/// Per CPU, the busy fraction of each of `bins` equal intervals of `[0, end_ns]`: the
/// utilisation timeline of a run report. Slices of one CPU do not overlap, so a bin's busy
/// time is the sum of its overlaps with them.
pub fn utilisation_timeline(
    slices: &[Slice],
    cpus: usize,
    end_ns: u64,
    bins: usize,
) -> Vec<Vec<f64>> {
    let mut busy = vec![vec![0.0; bins]; cpus];
    if end_ns == 0 || bins == 0 {
        return busy;
    }
    let width = end_ns as f64 / bins as f64;
    for s in slices.iter().filter(|s| s.cpu < cpus) {
        let (start, end) = (s.start_ns as f64, s.end_ns.min(end_ns) as f64);
        let first = ((start / width) as usize).min(bins - 1);
        for (b, cell) in busy[s.cpu].iter_mut().enumerate().skip(first) {
            let (lo, hi) = (b as f64 * width, (b + 1) as f64 * width);
            if lo >= end {
                break;
            }
            *cell += (end.min(hi) - start.max(lo)).max(0.0);
        }
    }
    for row in &mut busy {
        for cell in row.iter_mut() {
            *cell = (*cell / width).min(1.0);
        }
    }
    busy
}

/// Times are whole nanoseconds written as floating-point µs, so `ts + dur` of a slice may
/// exceed the next slice's `ts` by a few 1e-9 µs late in a long run; less than 0.1 ns is not
/// an overlap.
const TIME_SLACK_US: f64 = 1e-4;

/// Violations of the rules numasim promises of a trace (empty when it keeps them all):
/// every `X` has `ts` and `dur ≥ 0`; slices on one thread never overlap; every flow has one
/// `s` and one `f`, the `f` not before the `s`, and each lies inside a slice of its thread
/// (where a viewer binds it); metadata names every process and thread used.
pub fn problems(trace: &Value) -> Vec<String> {
    type Track = (String, String);
    let mut out = Vec::new();
    let Some(events) = trace.get("traceEvents").and_then(Value::as_array) else {
        return vec!["no traceEvents array".into()];
    };
    let field = |e: &Value, k: &str| e.get(k).cloned().unwrap_or(Value::Null).to_string();
    let ph_of = |e: &Value| {
        e.get("ph")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let (mut named_pids, mut named_tids) = (BTreeSet::new(), BTreeSet::new());
    for e in events.iter().filter(|e| ph_of(e) == "M") {
        match e.get("name").and_then(Value::as_str) {
            Some("process_name") => {
                named_pids.insert(field(e, "pid"));
            }
            Some("thread_name") => {
                named_tids.insert((field(e, "pid"), field(e, "tid")));
            }
            _ => {}
        }
    }
    let mut by_thread: BTreeMap<Track, Vec<(f64, f64)>> = BTreeMap::new();
    // Flow id → phase → (ts, track).
    let mut flows: BTreeMap<String, BTreeMap<String, (f64, Track)>> = BTreeMap::new();
    for e in events {
        let ph = ph_of(e);
        if ph == "M" {
            continue;
        }
        let track = (field(e, "pid"), field(e, "tid"));
        if !named_pids.contains(&track.0) {
            out.push(format!("{ph} event on unnamed process {}", track.0));
        }
        if "Xsfi".contains(ph.as_str()) && !named_tids.contains(&track) {
            out.push(format!(
                "{ph} event on unnamed thread {}/{}",
                track.0, track.1
            ));
        }
        let ts = e.get("ts").and_then(Value::as_f64);
        match ph.as_str() {
            "X" => match (ts, e.get("dur").and_then(Value::as_f64)) {
                (Some(ts), Some(dur)) if dur >= 0.0 => {
                    by_thread.entry(track).or_default().push((ts, ts + dur));
                }
                _ => out.push(format!("X without ts and dur >= 0: {e}")),
            },
            "s" | "f" => {
                let ends = flows.entry(field(e, "id")).or_default();
                if ends
                    .insert(ph.clone(), (ts.unwrap_or(f64::NAN), track))
                    .is_some()
                {
                    out.push(format!("flow {} has two '{ph}'", field(e, "id")));
                }
            }
            _ => {}
        }
    }
    for ((pid, tid), spans) in &mut by_thread {
        spans.sort_by(|a, b| a.partial_cmp(b).expect("finite times"));
        for w in spans.windows(2) {
            if w[1].0 < w[0].1 - TIME_SLACK_US {
                out.push(format!(
                    "overlapping slices on {pid}/{tid}: {}-{} and {}",
                    w[0].0, w[0].1, w[1].0
                ));
            }
        }
    }
    let inside = |t: f64, track: &Track| {
        let spans = by_thread.get(track).map_or(&[][..], Vec::as_slice);
        let i = spans.partition_point(|&(start, _)| start <= t);
        i > 0 && t < spans[i - 1].1
    };
    for (id, ends) in flows {
        match (ends.get("s"), ends.get("f")) {
            (Some(s), Some(f)) => {
                if f.0 < s.0 {
                    out.push(format!("flow {id} finishes before it starts"));
                }
                for (ph, (t, track)) in [("s", s), ("f", f)] {
                    if !inside(*t, track) {
                        out.push(format!(
                            "flow {id}: its '{ph}' at {t} is in no slice of its thread"
                        ));
                    }
                }
            }
            _ => out.push(format!(
                "flow {id} lacks an end: has {:?}",
                ends.keys().collect::<Vec<_>>()
            )),
        }
    }
    out
}
