//! Handoffs to another process (python/gpushare/processes/__init__.py keeps the worker transport): run by
//! the core's pipeline over each path's transport (process_route.rs), whether a path applies and
//! their verdict by the core's rules, their timing by the core's one timing loop (process_timing.rs),
//! and their results the classes of every handoff (`ShareResult`, `Comparison`, `Benchmark`, whose
//! `worker` names the process), read from Python objects by pyo3 (no JSON text).

use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::forms::from_py;
use crate::render::lab::PathRow;
use crate::report::process::{MemoryIdentity, WorkerHandoff};

fn identity(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Option<MemoryIdentity>> {
    match obj.filter(|o| !o.is_none()) {
        None => Ok(None),
        Some(o) => from_py(o).map(Some),
    }
}

/// Whether two memory identities (each asked in its own process) name the same physical memory,
/// and why: the core's comparison (crates/core/src/explain/identity.rs), which its one judge reads.
#[pyfunction]
#[pyo3(signature = (a, b))]
fn same_memory(a: Option<Bound<'_, PyAny>>, b: Option<Bound<'_, PyAny>>) -> PyResult<(bool, String)> {
    Ok(crate::explain::same_memory(identity(a.as_ref())?.as_ref(), identity(b.as_ref())?.as_ref()))
}

/// The costly facts of a process path's refusal, asked of Python callables (each returning a
/// reason or None) only when a rule reaches them.
struct PyProbe<'py> {
    library_unavailable: Bound<'py, PyAny>,
    nccl_unavailable: Bound<'py, PyAny>,
    ipc_refusal: Bound<'py, PyAny>,
    error: Option<PyErr>,
}

impl PyProbe<'_> {
    fn ask(&mut self, which: usize) -> Option<String> {
        let call = [&self.library_unavailable, &self.nccl_unavailable, &self.ipc_refusal][which];
        match call.call0().and_then(|v| v.extract::<Option<String>>()) {
            Ok(reason) => reason,
            Err(e) => {
                self.error.get_or_insert(e);
                None
            }
        }
    }
}

impl crate::explain::ProcessProbe for PyProbe<'_> {
    fn library_unavailable(&mut self) -> Option<String> {
        self.ask(0)
    }
    fn nccl_unavailable(&mut self) -> Option<String> {
        self.ask(1)
    }
    fn ipc_refusal(&mut self) -> Option<String> {
        self.ask(2)
    }
}

/// Why process path ``path`` does not apply (the core's rule, crates/core/src/explain/process.rs),
/// or None. ``targets``: the frameworks the worker can hold for this path; ``library``: the
/// framework whose library implements it; the three callables give the costly facts on demand.
#[pyfunction]
#[pyo3(signature = (path, framework, to, targets, library, on_device, source_device, worker_device,
                    library_unavailable, nccl_unavailable, ipc_refusal, strided=false))]
#[allow(clippy::too_many_arguments)]
#[pyo3(name = "refusal")]
fn process_refusal<'py>(
    path: &str,
    framework: &str,
    to: Option<&str>,
    targets: Vec<String>,
    library: Option<&str>,
    on_device: bool,
    source_device: Option<i64>,
    worker_device: Option<i64>,
    library_unavailable: Bound<'py, PyAny>,
    nccl_unavailable: Bound<'py, PyAny>,
    ipc_refusal: Bound<'py, PyAny>,
    strided: bool,
) -> PyResult<Option<String>> {
    let facts = crate::explain::ProcessFacts {
        path,
        framework,
        to,
        targets: &targets,
        library,
        on_device,
        source_device,
        worker_device,
        strided,
    };
    let mut probe = PyProbe { library_unavailable, nccl_unavailable, ipc_refusal, error: None };
    let refusal = crate::explain::refuse_process(&facts, &mut probe);
    match probe.error {
        Some(e) => Err(e),
        None => Ok(refusal),
    }
}

/// The dtypes of [`worker_columns`]' counts and seconds, in every frame that has them. A path that
/// did not run has no worker's pid and no first call.
pub(super) const WORKER_COLUMN_DTYPES: [(&str, &str); 4] =
    [("bytes_per_handoff", "int64"), ("source_pid", "int64"), ("target_pid", "Int64"), ("first_call_s", "float64")];

/// The columns of a row to a worker after those every row has: what each handoff after the first
/// moves, the first call (with the path's one-off set-up) apart, each side's process and the kind of
/// memory it holds there, and how the path hands it over. Identities stay in `to_dict()`.
pub(super) fn worker_columns(row: &Bound<'_, PyDict>, r: &PathRow, w: &WorkerHandoff) -> PyResult<()> {
    let target = w.target.as_ref();
    let kind = |i: Option<&MemoryIdentity>| {
        i.map(|i| match i {
            MemoryIdentity::Host(_) => "host",
            MemoryIdentity::Cuda(_) => "cuda",
        })
    };
    row.set_item("bytes_per_handoff", w.bytes_per_handoff)?;
    row.set_item("first_call_s", r.timing.as_ref().and_then(|t| t.first_call))?;
    row.set_item("source_pid", w.source.pid)?;
    row.set_item("target_pid", target.and_then(|t| t.pid))?;
    row.set_item("source_memory", kind(w.source.identity.as_ref()))?;
    row.set_item("target_memory", kind(target.and_then(|t| t.identity.as_ref())))?;
    row.set_item("mechanism", &w.mechanism)?;
    Ok(())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(process_refusal, m)?)?;
    m.add_function(wrap_pyfunction!(same_memory, m)?)?;
    super::process_timing::register(m)?;
    super::process_route::register(m)?;
    super::process_tables::register(m)?;
    super::process_rows::register(m)
}
