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
    scratch: Arc<Mutex<Scratch>>,
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

/// A column set in one buffer: each 8-byte column in turn (i64 or f64, native byte order),
/// then each one-byte column (bool as 0/1), every column `rows` long. Python makes a NumPy
/// view of a column the first time it is read (`numasim.policy.view.Columns`): one object and
/// one copy a set, whatever the number of columns.
fn column_bytes<'py>(
    py: Python<'py>,
    rows: usize,
    wide: &[Wide<'_>],
    narrow: &[&[bool]],
) -> Bound<'py, PyBytes> {
    let len = rows * (8 * wide.len() + narrow.len());
    PyBytes::new_with(py, len, |buf| {
        let (mut wide_part, mut narrow_part) = buf.split_at_mut(rows * 8 * wide.len());
        for col in wide {
            let (this, rest) = wide_part.split_at_mut(rows * 8);
            let chunks = this.chunks_exact_mut(8);
            match col {
                Wide::I(v) => chunks
                    .zip(*v)
                    .for_each(|(c, x)| c.copy_from_slice(&x.to_ne_bytes())),
                Wide::F(v) => chunks
                    .zip(*v)
                    .for_each(|(c, x)| c.copy_from_slice(&x.to_ne_bytes())),
            }
            wide_part = rest;
        }
        for col in narrow {
            let (this, rest) = narrow_part.split_at_mut(rows);
            this.iter_mut()
                .zip(*col)
                .for_each(|(b, &x)| *b = u8::from(x));
            narrow_part = rest;
        }
        Ok(())
    })
    .expect("fills")
}

/// An 8-byte column.
enum Wide<'a> {
    I(&'a [i64]),
    F(&'a [f64]),
}

/// The column sets of a run's callbacks, refilled at each read: no allocation once grown.
#[derive(Default)]
struct Scratch {
    cpus: CpuColumns,
    tasks: TaskColumns,
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

    /// The CPU columns in one buffer (`column_bytes`): node, nr_running, current, load,
    /// load_1, load_2 (i64), speed (f64), then idle (bool).
    fn cpu_columns<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let view = self.get()?;
        let mut scratch = self.scratch.lock().expect("not poisoned");
        let c = &mut scratch.cpus;
        view.fill_cpu_columns(c);
        let wide = [
            Wide::I(&c.node),
            Wide::I(&c.nr_running),
            Wide::I(&c.current),
            Wide::I(&c.load),
            Wide::I(&c.load_1),
            Wide::I(&c.load_2),
            Wide::F(&c.speed),
        ];
        Ok(column_bytes(py, c.node.len(), &wide, &[&c.idle]))
    }

    /// The task columns in one buffer (`column_bytes`): pid, cpu, node, tgid, cpu_ns,
    /// origin_cpu, origin_node (i64), load (f64), then running (bool).
    fn task_columns<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let view = self.get()?;
        let mut scratch = self.scratch.lock().expect("not poisoned");
        let t = &mut scratch.tasks;
        view.fill_task_columns(t);
        let wide = [
            Wide::I(&t.pid),
            Wide::I(&t.cpu),
            Wide::I(&t.node),
            Wide::I(&t.tgid),
            Wide::I(&t.cpu_ns),
            Wide::I(&t.origin_cpu),
            Wide::I(&t.origin_node),
            Wide::F(&t.load),
        ];
        Ok(column_bytes(py, t.pid.len(), &wide, &[&t.running]))
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
    scratch: Arc<Mutex<Scratch>>,
}

impl PyCallbacks {
    /// The callbacks of `adapter` and the hooks it overrides (its `hooks()`: `(period_ns or
    /// None, gate or None, place, metrics, rank)`).
    pub fn new(py: Python<'_>, adapter: Py<PyAny>) -> PyResult<(Self, Hooks)> {
        #[allow(clippy::type_complexity)] // the Python shape
        let (period_ns, gate, place, metrics, rank): (
            Option<u64>,
            Option<String>,
            bool,
            bool,
            bool,
        ) = adapter.call_method0(py, "hooks")?.extract(py)?;
        let balance_cpu = gate
            .map(|g| Gate::parse("balance_cpu_when", &g))
            .transpose()
            .map_err(crate::input_err)?;
        let hooks = Hooks {
            period_ns,
            balance_cpu,
            place,
            metrics,
            rank,
        };
        let cb = Self {
            adapter,
            raised: Arc::new(Mutex::new(None)),
            scratch: Arc::default(),
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
                scratch: Arc::clone(&self.scratch),
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

    fn rank(
        &mut self,
        view: &View<'_>,
        this_cpu: CpuId,
        busiest: CpuId,
        candidates: &[Pid],
        out: &mut Vec<i64>,
    ) -> Result<(), Failure> {
        self.with_view(
            view,
            "rank",
            |py, raw| (raw, this_cpu, busiest, candidates.to_vec()).into_pyobject(py),
            |a| {
                let ranks: Vec<i64> = a.extract().map_err(|_| {
                    Failure::Type(format!(
                        "rank returned {} {}, not one integer per task",
                        type_name(a),
                        a.repr().map_or_else(|_| "?".to_owned(), |r| r.to_string())
                    ))
                })?;
                out.extend(ranks);
                Ok(())
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
