//! `numasim._core`: thin PyO3 bindings of `numasim-core`. No logic lives here: every function
//! converts arguments, calls the core, and converts the result or the error
//! (`numasim_core::InputError` → `numasim._core.InputError`, a `ValueError`).
//!
//! Runs release the interpreter and take it back each time the engine asks its watch
//! (`numasim_core::engine::watch`), to run Python's signal handlers: Ctrl-C raises
//! `KeyboardInterrupt` out of a run within milliseconds, and the run is dropped.

mod external;

use std::ops::ControlFlow;
use std::path::Path;

use numasim_core::assumptions::{Assumptions, Registry};
use numasim_core::config::EngineConfig;
use numasim_core::domains::{BuildOptions, Builder};
use numasim_core::engine::{Outcome, Paced, Progress, Watch};
use numasim_core::machine::{file, sysfs};
use numasim_core::trace::{self, RunEvents, Window};
use numasim_core::workload::WorkloadSpec;
use numasim_core::InputError as CoreInputError;
use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

// The module path must be importable (`numasim._core`, not `_core`) so that the exception
// pickles: an input error raised in an experiment worker crosses the process pool.
create_exception!(
    numasim._core,
    InputError,
    PyValueError,
    "Bad user input: the message names the file, the place in it and the problem."
);

create_exception!(
    numasim._core,
    PolicyError,
    InputError,
    "A policy written in Python raised or answered wrongly: the message names the hook, the \
     simulated time and the CPU; an exception the policy raised is its __cause__."
);

fn input_err(e: CoreInputError) -> PyErr {
    InputError::new_err(e.to_string())
}

fn wrap(r: numasim_core::Result<numasim_core::Machine>) -> PyResult<Machine> {
    r.map(|inner| Machine { inner }).map_err(input_err)
}

/// A NUMA machine: nodes, CPUs, speeds and a validated SLIT distance table.
#[pyclass(frozen, module = "numasim._core")]
struct Machine {
    inner: numasim_core::Machine,
}

#[pymethods]
impl Machine {
    /// Reads a TOML machine file.
    #[staticmethod]
    fn from_toml_file(path: &str) -> PyResult<Self> {
        wrap(file::read(Path::new(path)))
    }

    /// Parses machine-file text (TOML); `base_dir` resolves a relative `distance_file`.
    #[staticmethod]
    #[pyo3(signature = (text, origin, base_dir=None))]
    fn from_toml_str(text: &str, origin: &str, base_dir: Option<&str>) -> PyResult<Self> {
        wrap(file::parse(origin, text, base_dir.map(Path::new)))
    }

    /// Parses a machine file given as JSON of the TOML structure (used for YAML files).
    #[staticmethod]
    #[pyo3(signature = (text, origin, base_dir=None))]
    fn from_json_str(text: &str, origin: &str, base_dir: Option<&str>) -> PyResult<Self> {
        wrap(file::parse_json(origin, text, base_dir.map(Path::new)))
    }

    /// Reads a machine back from its JSON object (`to_json`, as a saved run carries it).
    #[staticmethod]
    fn from_info_json(text: &str, origin: &str) -> PyResult<Self> {
        let value: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| input_err(CoreInputError::new(origin, e.to_string())))?;
        wrap(file::from_info(origin, &value))
    }

    /// Reads a plain distance-matrix file (sysfs rows or `numactl --hardware`).
    #[staticmethod]
    #[pyo3(signature = (path, cpus_per_node=None, option="--cpus-per-node"))]
    fn from_matrix_file(path: &str, cpus_per_node: Option<usize>, option: &str) -> PyResult<Self> {
        wrap(file::read_matrix(Path::new(path), cpus_per_node, option))
    }

    /// Reads the host from `ROOT/sys/devices/system/node`.
    #[staticmethod]
    #[pyo3(signature = (root="/"))]
    fn from_sysfs(root: &str) -> PyResult<Self> {
        wrap(sysfs::read(Path::new(root)))
    }

    #[getter]
    fn name(&self) -> String {
        self.inner.name.clone()
    }

    #[getter]
    fn description(&self) -> String {
        self.inner.description.clone()
    }

    #[getter]
    fn source(&self) -> String {
        self.inner.source.clone()
    }

    #[getter]
    fn nodes(&self) -> usize {
        self.inner.nodes()
    }

    #[getter]
    fn cpus(&self) -> usize {
        self.inner.cpus()
    }

    /// CPU ids of `node`.
    fn node_cpus(&self, node: usize) -> PyResult<Vec<usize>> {
        if node >= self.inner.nodes() {
            return Err(PyValueError::new_err(format!("no node {node}")));
        }
        Ok(self.inner.node_cpus(node).to_vec())
    }

    /// Speed factor per CPU.
    #[getter]
    fn speeds(&self) -> Vec<f64> {
        (0..self.inner.cpus())
            .map(|c| self.inner.speed(c))
            .collect()
    }

    /// The distance table as rows.
    #[getter]
    fn distances(&self) -> Vec<Vec<u32>> {
        self.inner.distance_table().rows()
    }

    /// Memory access levels: the sorted distinct distances.
    #[getter]
    fn mals(&self) -> Vec<u32> {
        self.inner.mals()
    }

    /// Non-fatal remarks about the input (e.g. an asymmetric table).
    #[getter]
    fn warnings(&self) -> Vec<String> {
        self.inner.warnings().to_vec()
    }

    /// The machine as JSON text.
    fn to_json(&self) -> String {
        self.inner.info().to_string()
    }

    /// The hierarchy built by `builder`, as JSON text in the shape of `numasim topology --json`'s `"domains"`.
    fn domains_json(&self, py: Python<'_>, builder: &str) -> PyResult<String> {
        let b: Builder = builder.parse().map_err(input_err)?;
        let inner = &self.inner;
        Ok(py.detach(|| b.build(inner, &BuildOptions::default()).to_json_string()))
    }

    /// The distinct hierarchies built by `builder` with their CPUs, each shown by its first
    /// CPU's levels with flags and 2.6/modern extra parameters (what `topology` prints).
    fn domains_shown_json(&self, py: Python<'_>, builder: &str) -> PyResult<String> {
        let b: Builder = builder.parse().map_err(input_err)?;
        let inner = &self.inner;
        Ok(py.detach(|| {
            b.build(inner, &BuildOptions::default())
                .shown_json_string(inner)
        }))
    }
}

/// A workload: processes in pid order.
#[pyclass(frozen, module = "numasim._core")]
struct Workload {
    inner: numasim_core::workload::Workload,
}

#[pymethods]
impl Workload {
    /// Generates a workload from a spec (`n=300,kind=cpu,...`) for `machine` with `seed`,
    /// under the modelling assumptions `assume` (a setting; the `load` reading of a load level).
    #[staticmethod]
    #[pyo3(signature = (machine, spec, seed, origin="--workload", assume=""))]
    fn generate(
        machine: &Machine,
        spec: &str,
        seed: u64,
        origin: &str,
        assume: &str,
    ) -> PyResult<Self> {
        let m = &machine.inner;
        let load_level = Assumptions::parse("--assume", assume)
            .map_err(input_err)?
            .load;
        let w = WorkloadSpec::parse(origin, spec)
            .and_then(|s| {
                WorkloadSpec { load_level, ..s }.generate(origin, seed, m.node_cpu_lists())
            })
            .map_err(input_err)?;
        Ok(Self { inner: w })
    }

    /// Reads CSV text (one row per process).
    #[staticmethod]
    fn from_csv(text: &str, origin: &str) -> PyResult<Self> {
        numasim_core::workload::Workload::from_csv(origin, text)
            .map(|inner| Self { inner })
            .map_err(input_err)
    }

    /// Reads JSON text (`{"processes": [...]}`).
    #[staticmethod]
    fn from_json(text: &str, origin: &str) -> PyResult<Self> {
        numasim_core::workload::Workload::from_json(origin, text)
            .map(|inner| Self { inner })
            .map_err(input_err)
    }

    /// Checks the workload against a machine (pids, demands, spawn CPUs, ...).
    fn validate(&self, machine: &Machine, origin: &str) -> PyResult<()> {
        self.inner
            .validate(origin, machine.inner.cpus())
            .map_err(input_err)
    }

    fn to_csv(&self) -> PyResult<String> {
        self.inner.to_csv().map_err(input_err)
    }

    fn to_json(&self) -> String {
        self.inner.to_json()
    }

    fn __len__(&self) -> usize {
        self.inner.processes.len()
    }
}

/// The default engine configuration under the modelling assumptions `assume` (canonical text).
fn engine_config(record_trace: bool, assume: &str) -> PyResult<EngineConfig> {
    Ok(EngineConfig {
        record_trace,
        assumptions: Assumptions::parse("assumptions", assume).map_err(input_err)?,
        ..EngineConfig::default()
    })
}

/// The watch of a run made from Python (paced: every 20 ms of wall-clock time, `PACE_MS`): it
/// takes the interpreter back, runs the signal handlers and calls `on_progress(now_ns, done,
/// processes, last_arrival_ns)` if given. An exception from either stops the run; it is kept
/// here and raised once the interpreter is back.
struct PyWatch<'a> {
    on_progress: Option<&'a Py<PyAny>>,
    raised: Option<PyErr>,
}

impl<'a> PyWatch<'a> {
    fn new(on_progress: Option<&'a Py<PyAny>>) -> Paced<Self> {
        Paced::new(Self {
            on_progress,
            raised: None,
        })
    }

    /// The outcome's result, the exception that stopped the run, or the core's error.
    fn finish<T>(
        watch: Paced<Self>,
        outcome: numasim_core::Result<Outcome>,
        f: impl FnOnce(numasim_core::engine::RunResult) -> T,
    ) -> PyResult<T> {
        match outcome.map_err(input_err)? {
            Outcome::Finished(r) => Ok(f(*r)),
            Outcome::Stopped(_) => Err(watch.inner.raised.expect("stopped by an exception")),
        }
    }
}

impl Watch for PyWatch<'_> {
    fn check(&mut self, p: &Progress) -> ControlFlow<()> {
        let asked = Python::attach(|py| {
            py.check_signals()?;
            if let Some(f) = self.on_progress {
                f.call1(py, (p.now_ns, p.done, p.processes, p.last_arrival_ns))?;
            }
            Ok(())
        });
        asked.map_or_else(
            |e| {
                self.raised = Some(e);
                ControlFlow::Break(())
            },
            ControlFlow::Continue,
        )
    }
}

/// Runs `w` under `policy` (a setting), or under the external policy `adapter` over the base
/// `policy` when given (`numasim.policy`), watched by `watch`. Called without the interpreter.
#[allow(clippy::too_many_arguments)] // a run's inputs
fn run_any(
    py: Python<'_>,
    m: &numasim_core::Machine,
    d: &numasim_core::Domains,
    w: &numasim_core::workload::Workload,
    policy: &str,
    adapter: Option<Py<PyAny>>,
    config: &EngineConfig,
    watch: &mut Paced<PyWatch<'_>>,
) -> PyResult<numasim_core::Result<Outcome>> {
    let Some(adapter) = adapter else {
        return Ok(py.detach(|| numasim_core::run_policy_watched(m, d, w, policy, config, watch)));
    };
    let label: String = adapter.getattr(py, "label")?.extract(py)?;
    let (cb, hooks) = external::PyCallbacks::new(py, adapter)?;
    let raised = cb.raised.clone();
    let outcome = py.detach(|| {
        numasim_core::run_external_watched(
            m,
            d,
            w,
            policy,
            Box::new(cb),
            hooks,
            &label,
            config,
            watch,
        )
    });
    if let Err(e) = &outcome {
        let kept = raised.lock().expect("not poisoned").take();
        if let Some(cause) = kept {
            // Ctrl-C (or any exception that is no Exception) inside the policy goes on as itself.
            if !cause.is_instance_of::<pyo3::exceptions::PyException>(py) {
                return Err(cause);
            }
            let err = PolicyError::new_err(e.to_string());
            err.set_cause(py, Some(cause));
            return Err(err);
        }
        if e.origin.starts_with("policy ") {
            return Err(PolicyError::new_err(e.to_string()));
        }
    }
    Ok(outcome)
}

/// Runs `workload` on `machine` with `policy` over `builder` domains; the result as JSON text.
/// `on_progress(now_ns, done, processes, last_arrival_ns)` is called every few milliseconds.
#[pyfunction]
#[pyo3(signature = (machine, workload, policy, builder, record_trace=false, assume="", on_progress=None, external=None))]
#[allow(clippy::too_many_arguments)] // the Python signature, keyword arguments with defaults
fn simulate(
    py: Python<'_>,
    machine: &Machine,
    workload: &Workload,
    policy: &str,
    builder: &str,
    record_trace: bool,
    assume: &str,
    on_progress: Option<Py<PyAny>>,
    external: Option<Py<PyAny>>,
) -> PyResult<String> {
    let b: Builder = builder.parse().map_err(input_err)?;
    let (m, w) = (&machine.inner, &workload.inner);
    let config = engine_config(record_trace, assume)?;
    let mut watch = PyWatch::new(on_progress.as_ref());
    let domains = py.detach(|| b.build(m, &BuildOptions::default()));
    let outcome = run_any(py, m, &domains, w, policy, external, &config, &mut watch)?;
    PyWatch::finish(watch, outcome, |r| {
        serde_json::to_string(&r).expect("serialisable")
    })
}

/// A machine's scheduling domains built once, for many runs on that machine (an experiment's
/// worker runs thousands); `simulate_summary` takes them.
#[pyclass(frozen, module = "numasim._core")]
struct Domains {
    inner: numasim_core::Domains,
    /// The machine they were built for: runs on any other machine are refused.
    machine: Py<Machine>,
}

#[pymethods]
impl Domains {
    /// Builds `builder`'s domains for `machine`.
    #[staticmethod]
    fn build(py: Python<'_>, machine: Bound<'_, Machine>, builder: &str) -> PyResult<Self> {
        let b: Builder = builder.parse().map_err(input_err)?;
        let inner = {
            let m = &machine.get().inner;
            py.detach(|| b.build(m, &BuildOptions::default()))
        };
        Ok(Self {
            inner,
            machine: machine.unbind(),
        })
    }

    #[getter]
    fn builder(&self) -> &'static str {
        self.inner.builder.name()
    }
}

/// Runs `workload` on `machine` over prebuilt `domains` with `policy`; only the summary (and
/// the applications, when the workload has any) as JSON text: what an experiment reads.
#[pyfunction]
#[pyo3(signature = (machine, domains, workload, policy, assume="", external=None))]
fn simulate_summary(
    py: Python<'_>,
    machine: &Bound<'_, Machine>,
    domains: &Domains,
    workload: &Workload,
    policy: &str,
    assume: &str,
    external: Option<Py<PyAny>>,
) -> PyResult<String> {
    if !domains.machine.bind(py).is(machine) {
        return Err(PyValueError::new_err(
            "domains were built for another machine object (Domains.build(machine, builder))",
        ));
    }
    let (m, d, w) = (&machine.get().inner, &domains.inner, &workload.inner);
    let config = engine_config(false, assume)?;
    let mut watch = PyWatch::new(None);
    let outcome = run_any(py, m, d, w, policy, external, &config, &mut watch)?;
    PyWatch::finish(watch, outcome, |r| r.summary_json())
}

/// The Perfetto trace-event JSON (text) of a traced run given as its JSON text (`simulate`'s
/// result or a saved run), restricted to `[start_ms, end_ms]` when given.
#[pyfunction]
#[pyo3(signature = (machine, run_json, origin, start_ms=None, end_ms=None))]
fn chrome_trace(
    py: Python<'_>,
    machine: &Machine,
    run_json: &str,
    origin: &str,
    start_ms: Option<f64>,
    end_ms: Option<f64>,
) -> PyResult<String> {
    let ns = |ms: f64| (ms * 1e6).round() as u64;
    let window = Window {
        start_ns: start_ms.map_or(0, ns),
        end_ns: end_ms.map_or(u64::MAX, ns),
    };
    let m = &machine.inner;
    py.detach(|| {
        let run = RunEvents::from_json(origin, run_json, m)?;
        Ok(trace::chrome_trace(m, &run, window).to_json())
    })
    .map_err(input_err)
}

/// Per CPU, the busy fraction of each of `bins` equal intervals of `[0, end_ms]` of a traced
/// run given as its JSON text.
#[pyfunction]
fn utilisation_timeline(
    py: Python<'_>,
    machine: &Machine,
    run_json: &str,
    origin: &str,
    end_ms: f64,
    bins: usize,
) -> PyResult<Vec<Vec<f64>>> {
    let m = &machine.inner;
    py.detach(|| {
        let run = RunEvents::from_json(origin, run_json, m)?;
        let end_ns = (end_ms * 1e6).round() as u64;
        Ok(trace::utilisation_timeline(
            &run.trace,
            m.cpus(),
            end_ns,
            bins,
        ))
    })
    .map_err(input_err)
}

/// What a trace (JSON text) breaks of the rules numasim promises; empty when it keeps them.
#[pyfunction]
fn trace_problems(trace_json: &str) -> PyResult<Vec<String>> {
    let value: serde_json::Value = serde_json::from_str(trace_json)
        .map_err(|e| input_err(CoreInputError::new("trace", e.to_string())))?;
    Ok(trace::problems(&value))
}

/// Times one benchmark scenario; the result as JSON text.
#[pyfunction]
fn bench_run(
    py: Python<'_>,
    machine: &Machine,
    spec: &str,
    seed: u64,
    policy: &str,
    builder: &str,
) -> PyResult<String> {
    let b: Builder = builder.parse().map_err(input_err)?;
    let m = &machine.inner;
    let mut watch = PyWatch::new(None);
    let r = py.detach(|| numasim_core::bench::run(m, spec, seed, policy, b, Some(&mut watch)));
    match r.map_err(input_err)? {
        Some(r) => Ok(serde_json::to_string(&r).expect("serialisable")),
        None => Err(watch.inner.raised.expect("stopped by an exception")),
    }
}

/// The balancing policies: `(name, description, reference, default domain builder)`.
#[pyfunction]
fn policies() -> Vec<(&'static str, &'static str, &'static str, &'static str)> {
    numasim_core::policy::POLICIES
        .iter()
        .map(|p| (p.name, p.description, p.reference, p.default_domains))
        .collect()
}

/// Checks a policy setting `name[:key=value,...]`; returns its registered name.
#[pyfunction]
fn check_policy(origin: &str, spec: &str) -> PyResult<String> {
    numasim_core::policy::validate(origin, spec).map_err(input_err)?;
    Ok(numasim_core::policy::base_name(spec).to_string())
}

/// Names of the migration kinds, in the order of `migrations_by_kind`.
/// The modelling-assumption registry (data/assumptions.toml) as JSON text.
#[pyfunction]
fn assumptions_registry() -> String {
    serde_json::to_string(Registry::get()).expect("serialisable")
}

/// The resolved setting of `setting` (`paper`, `kernel26,slice=work`, ...) as `[(name, value)]`
/// in registry order; errors name `origin`.
#[pyfunction]
fn resolve_assumptions(origin: &str, setting: &str) -> PyResult<Vec<(&'static str, String)>> {
    Ok(Assumptions::parse(origin, setting)
        .map_err(input_err)?
        .pairs())
}

/// The application profiles (data/apps.toml) as JSON text: `[{name, description, model, ...,
/// sources}]` in file order.
#[pyfunction]
fn apps_registry() -> String {
    serde_json::to_string(numasim_core::apps::profiles()).expect("serialisable")
}

#[pyfunction]
fn migration_kinds() -> Vec<&'static str> {
    numasim_core::engine::metrics::migration_kind_names()
}

/// The domain builders: `(name, description, reference)`.
#[pyfunction]
fn builders() -> Vec<(&'static str, &'static str, &'static str)> {
    Builder::ALL
        .iter()
        .map(|b| (b.name(), b.description(), b.reference()))
        .collect()
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Machine>()?;
    m.add_class::<Workload>()?;
    m.add_function(wrap_pyfunction!(builders, m)?)?;
    m.add_class::<Domains>()?;
    m.add_function(wrap_pyfunction!(simulate, m)?)?;
    m.add_function(wrap_pyfunction!(simulate_summary, m)?)?;
    m.add_function(wrap_pyfunction!(policies, m)?)?;
    m.add_function(wrap_pyfunction!(check_policy, m)?)?;
    m.add_function(wrap_pyfunction!(bench_run, m)?)?;
    m.add_function(wrap_pyfunction!(migration_kinds, m)?)?;
    m.add_function(wrap_pyfunction!(assumptions_registry, m)?)?;
    m.add_function(wrap_pyfunction!(apps_registry, m)?)?;
    m.add_function(wrap_pyfunction!(resolve_assumptions, m)?)?;
    m.add_function(wrap_pyfunction!(chrome_trace, m)?)?;
    m.add_function(wrap_pyfunction!(trace_problems, m)?)?;
    m.add_function(wrap_pyfunction!(utilisation_timeline, m)?)?;
    m.add("InputError", m.py().get_type::<InputError>())?;
    m.add("PolicyError", m.py().get_type::<PolicyError>())?;
    m.add_class::<external::RawView>()?;
    Ok(())
}
