//! The Python side of an external policy (`numasim_core::policy::external`): marshalling only.
//! Each callback takes the interpreter, hands the Python adapter (`numasim.policy`) a
//! [`RawView`] of the instant, and reads its answer back as numbers; the core checks them.
//! A view is valid only during its callback: afterwards every read raises.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use numasim_core::interface::{BalanceKind, CpuColumns, Pid, TaskColumns, View};
use numasim_core::machine::CpuId;
use numasim_core::policy::external::{Callbacks, Decision, Failure, Gate, Hooks, Why};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

/// The view of one callback, as the Python adapter reads it. It holds the address of the
/// engine's view, valid while the callback runs; `alive` is cleared when it returns.
#[pyclass(frozen, module = "numasim._core")]
pub struct RawView {
    view: ViewPtr,
    alive: AtomicBool,
}

/// The engine's view, read only while the callback that made it runs: the engine waits for
/// that callback, and the interpreter serialises the threads that could read it meanwhile.
struct ViewPtr(*const View<'static>);

// SAFETY: see `ViewPtr`: read only while `alive`, when the view's thread waits for the reader.
unsafe impl Send for ViewPtr {}
unsafe impl Sync for ViewPtr {}

impl RawView {
    fn get(&self) -> PyResult<&View<'static>> {
        if !self.alive.load(Ordering::Acquire) {
            return Err(PyRuntimeError::new_err(
                "this view belongs to a callback that has returned: read what you need while \
                 it runs (keep copies, not the view)",
            ));
        }
        // SAFETY: `alive` is true only while the callback that made this view runs, and the
        // engine's view outlives that call (`with_view`).
        Ok(unsafe { &*self.view.0 })
    }
}

fn i64_bytes<'py>(py: Python<'py>, v: &[i64]) -> Bound<'py, PyBytes> {
    PyBytes::new_with(py, v.len() * 8, |buf| {
        for (chunk, x) in buf.chunks_exact_mut(8).zip(v) {
            chunk.copy_from_slice(&x.to_ne_bytes());
        }
        Ok(())
    })
    .expect("fills")
}

fn f64_bytes<'py>(py: Python<'py>, v: &[f64]) -> Bound<'py, PyBytes> {
    PyBytes::new_with(py, v.len() * 8, |buf| {
        for (chunk, x) in buf.chunks_exact_mut(8).zip(v) {
            chunk.copy_from_slice(&x.to_ne_bytes());
        }
        Ok(())
    })
    .expect("fills")
}

fn bool_bytes<'py>(py: Python<'py>, v: &[bool]) -> Bound<'py, PyBytes> {
    let bytes: Vec<u8> = v.iter().map(|&b| u8::from(b)).collect();
    PyBytes::new(py, &bytes)
}

#[pymethods]
impl RawView {
    /// Simulated time, ns.
    #[getter]
    fn now(&self) -> PyResult<u64> {
        Ok(self.get()?.now)
    }

    /// The run's seed (a digest of its workload).
    #[getter]
    fn run_seed(&self) -> PyResult<u64> {
        Ok(self.get()?.run_seed())
    }

    /// `(node, nr_running, current, idle, load, load_1, load_2, speed)` as bytes: i64 but
    /// idle (u8) and speed (f64).
    fn cpu_columns<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let mut c = CpuColumns::default();
        self.get()?.fill_cpu_columns(&mut c);
        PyTuple::new(
            py,
            [
                i64_bytes(py, &c.node),
                i64_bytes(py, &c.nr_running),
                i64_bytes(py, &c.current),
                bool_bytes(py, &c.idle),
                i64_bytes(py, &c.load),
                i64_bytes(py, &c.load_1),
                i64_bytes(py, &c.load_2),
                f64_bytes(py, &c.speed),
            ],
        )
    }

    /// `(pid, cpu, node, tgid, running, cpu_ns, load, origin_cpu, origin_node)` as bytes: i64
    /// but running (u8) and load (f64).
    fn task_columns<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let mut t = TaskColumns::default();
        self.get()?.fill_task_columns(&mut t);
        PyTuple::new(
            py,
            [
                i64_bytes(py, &t.pid),
                i64_bytes(py, &t.cpu),
                i64_bytes(py, &t.node),
                i64_bytes(py, &t.tgid),
                bool_bytes(py, &t.running),
                i64_bytes(py, &t.cpu_ns),
                f64_bytes(py, &t.load),
                i64_bytes(py, &t.origin_cpu),
                i64_bytes(py, &t.origin_node),
            ],
        )
    }

    /// The queued (runnable, not running) pids of `cpu`, front first.
    fn queued(&self, cpu: usize) -> PyResult<Vec<usize>> {
        let v = self.get()?;
        check_cpu(v, cpu)?;
        Ok(v.queued(cpu).collect())
    }

    fn find_busiest(&self, cpu: usize, level: usize) -> PyResult<Option<usize>> {
        let v = self.get()?;
        check_cpu(v, cpu)?;
        Ok(v.find_busiest(cpu, level))
    }

    fn idlest_cpu(&self, node: usize) -> PyResult<Option<usize>> {
        Ok(self.get()?.idlest_cpu(node))
    }

    fn pages_by_node(&self, tgid: usize) -> PyResult<Vec<f64>> {
        Ok(self.get()?.pages_by_node(tgid))
    }

    /// The machine's distance table (rows by node).
    fn distances(&self) -> PyResult<Vec<Vec<u32>>> {
        Ok(self.get()?.machine.distance_table().rows())
    }

    /// The CPUs of each level of `cpu`'s hierarchy, lowest first: `[(name, span, [group
    /// spans])]`.
    #[allow(clippy::type_complexity)] // the Python shape
    fn levels(&self, cpu: usize) -> PyResult<Vec<(String, Vec<usize>, Vec<Vec<usize>>)>> {
        let v = self.get()?;
        check_cpu(v, cpu)?;
        Ok(v.domains.cpus[cpu]
            .iter()
            .map(|l| {
                let groups = l.groups.iter().map(|g| g.span.iter().collect()).collect();
                (l.name.clone(), l.span.iter().collect(), groups)
            })
            .collect())
    }

    /// The pid's thread group (its tgid).
    fn tgid(&self, pid: usize) -> PyResult<usize> {
        let v = self.get()?;
        if pid >= v.proc_count() {
            return Err(PyRuntimeError::new_err(format!("no process {pid}")));
        }
        Ok(v.proc(pid).tgid)
    }
}

fn check_cpu(v: &View<'_>, cpu: usize) -> PyResult<()> {
    if cpu >= v.machine.cpus() {
        return Err(PyRuntimeError::new_err(format!(
            "no CPU {cpu}: the machine has CPUs 0 to {}",
            v.machine.cpus() - 1
        )));
    }
    Ok(())
}

/// The adapter's callbacks, with the exception that stopped the run kept for the caller.
pub struct PyCallbacks {
    adapter: Py<PyAny>,
    pub raised: Arc<Mutex<Option<PyErr>>>,
}

impl PyCallbacks {
    /// The callbacks of `adapter` and the hooks it overrides (its `hooks()`: `(period_ns or
    /// None, gate or None, place, metrics)`).
    pub fn new(py: Python<'_>, adapter: Py<PyAny>) -> PyResult<(Self, Hooks)> {
        let (period_ns, gate, place, metrics): (Option<u64>, Option<String>, bool, bool) =
            adapter.call_method0(py, "hooks")?.extract(py)?;
        let balance_cpu = gate
            .map(|g| Gate::parse("balance_cpu_when", &g))
            .transpose()
            .map_err(crate::input_err)?;
        let hooks = Hooks {
            period_ns,
            balance_cpu,
            place,
            metrics,
        };
        let cb = Self {
            adapter,
            raised: Arc::new(Mutex::new(None)),
        };
        Ok((cb, hooks))
    }

    /// Calls `method` with a view of `view` and `args`, the view killed when it returns; an
    /// exception is kept.
    fn with_view<T>(
        &self,
        view: &View<'_>,
        method: &str,
        args: impl for<'a> FnOnce(Python<'a>, Bound<'a, RawView>) -> PyResult<Bound<'a, PyTuple>>,
        read: impl FnOnce(&Bound<'_, PyAny>) -> Result<T, Failure>,
    ) -> Result<T, Failure> {
        Python::attach(|py| {
            let raw = RawView {
                // The engine's view lives as long as this call; the address is cleared from
                // use (`alive`) before the call returns.
                view: ViewPtr(std::ptr::from_ref(view).cast::<View<'static>>()),
                alive: AtomicBool::new(true),
            };
            let raw = Bound::new(py, raw).map_err(|e| self.keep(e))?;
            let called =
                args(py, raw.clone()).and_then(|a| self.adapter.call_method1(py, method, a));
            raw.get().alive.store(false, Ordering::Release);
            let answer = called.map_err(|e| self.keep(e))?;
            read(answer.bind(py))
        })
    }

    fn keep(&self, e: PyErr) -> Failure {
        let mut slot = self.raised.lock().expect("not poisoned");
        if slot.is_none() {
            *slot = Some(e);
        }
        Failure::Raised
    }
}

/// The decisions of an answer: a list of `(pid, cpu)` and `(tgid, from_node, to_node, share)`
/// tuples (the adapter turns None and its own types into that).
fn decisions(answer: &Bound<'_, PyAny>, out: &mut Vec<Decision>) -> Result<(), Failure> {
    let items: Vec<Bound<'_, PyAny>> = answer
        .extract()
        .map_err(|_| Failure::Type(format!("the answer is {}, not a list", type_name(answer))))?;
    for (i, item) in items.iter().enumerate() {
        let bad = || {
            Failure::Type(format!(
                "answer item {i} is {} {}, not Move(pid, cpu) or Pages(tgid, from_node, \
                 to_node, share)",
                type_name(item),
                item.repr()
                    .map_or_else(|_| "?".to_owned(), |r| r.to_string())
            ))
        };
        let Ok(t) = item.cast::<PyTuple>() else {
            return Err(bad());
        };
        match t.len() {
            2 => {
                let (pid, cpu): (i64, i64) = t.extract().map_err(|_| bad())?;
                out.push(Decision::Move { pid, cpu });
            }
            4 => {
                let (tgid, from_node, to_node, share): (i64, i64, i64, f64) =
                    t.extract().map_err(|_| bad())?;
                out.push(Decision::Pages {
                    tgid,
                    from_node,
                    to_node,
                    share,
                });
            }
            _ => return Err(bad()),
        }
    }
    Ok(())
}

fn type_name(x: &Bound<'_, PyAny>) -> String {
    x.get_type()
        .name()
        .map_or_else(|_| "?".to_owned(), |n| n.to_string())
}

impl Callbacks for PyCallbacks {
    fn setup(&mut self, view: &View<'_>) -> Result<(), Failure> {
        self.with_view(
            view,
            "setup",
            |py, raw| PyTuple::new(py, [raw.into_any()]),
            |_| Ok(()),
        )
    }

    fn balance(&mut self, view: &View<'_>, out: &mut Vec<Decision>) -> Result<(), Failure> {
        self.with_view(
            view,
            "balance",
            |py, raw| PyTuple::new(py, [raw.into_any()]),
            |a| decisions(a, out),
        )
    }

    fn balance_cpu(
        &mut self,
        view: &View<'_>,
        cpu: CpuId,
        level: usize,
        kind: BalanceKind,
        out: &mut Vec<Decision>,
    ) -> Result<(), Failure> {
        let kind = match kind {
            BalanceKind::Periodic => "periodic",
            BalanceKind::NewIdle => "newidle",
        };
        self.with_view(
            view,
            "balance_cpu",
            |py, raw| (raw, cpu, level, kind).into_pyobject(py),
            |a| decisions(a, out),
        )
    }

    fn place(
        &mut self,
        view: &View<'_>,
        pid: Pid,
        cpu: CpuId,
        why: Why,
    ) -> Result<Option<i64>, Failure> {
        self.with_view(
            view,
            "place",
            |py, raw| (raw, pid, cpu, why.name()).into_pyobject(py),
            |a| {
                a.extract::<Option<i64>>().map_err(|_| {
                    Failure::Type(format!(
                        "place returned {} {}, not a CPU number or None",
                        type_name(a),
                        a.repr().map_or_else(|_| "?".to_owned(), |r| r.to_string())
                    ))
                })
            },
        )
    }

    fn metrics(&self) -> Result<Vec<(String, f64)>, Failure> {
        Python::attach(|py| {
            let answer = self
                .adapter
                .call_method0(py, "metrics")
                .map_err(|e| self.keep(e))?;
            answer.extract(py).map_err(|_| {
                Failure::Type("metrics() must return a dict of names to numbers".to_owned())
            })
        })
    }
}
