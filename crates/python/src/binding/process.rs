//! Handoffs to another process (python/gpushare/processes/__init__.py keeps the worker transport): run by
//! the core's pipeline over each path's transport (process_route.rs), whether a path applies and
//! their verdict by the core's rules, their timing by the core's one timing loop (process_timing.rs),
//! and their results the classes of every handoff (`ShareResult`, `Comparison`, `Benchmark`, whose
//! `worker` names the process), read from Python objects by pyo3 (no JSON text).

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use serde::Serialize;

use super::forms::from_py;
use super::forms::to_py;
use super::lab::{Benchmark, Comparison};
use super::types::ShareResult;
use crate::render::lab::PathRow;
use crate::report::process::{
    MemoryIdentity, ProcessBenchReport, ProcessComparisonReport, TIDY_DTYPES, WorkerHandoff, tidy_outcome,
    from_value,
};

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

fn frame<'py>(py: Python<'py>, rows: Vec<Bound<'py, PyDict>>) -> PyResult<Bound<'py, PyAny>> {
    super::frames::tidy_frame(py, PyList::new(py, rows)?, None, &TIDY_DTYPES)
}

/// One tidy row: the identifying columns, then the path's outcome.
fn tidy<'py>(py: Python<'py>, ids: Vec<(&str, Bound<'py, PyAny>)>, row: &PathRow) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (k, v) in ids {
        d.set_item(k, v)?;
    }
    for (k, v) in tidy_outcome(row) {
        d.set_item(k, to_py(py, &v)?)?;
    }
    // The tables' vocabulary: a path that cannot run here is "not applicable", never "failed".
    d.set_item("verdict", crate::render::State::of(row.verdict, row.applicable).word())?;
    Ok(d)
}

/// The worker's part of a row of a handoff to a worker.
fn worker(row: &PathRow) -> Option<&WorkerHandoff> {
    row.worker.as_ref()
}

/// The framework the worker's array is in, where the path ran.
fn worker_framework(row: &PathRow) -> Option<String> {
    worker(row).and_then(|w| w.target.as_ref()).and_then(|t| t.framework.clone())
}

fn read<T: Serialize + for<'de> serde::Deserialize<'de>>(kind: &str, data: &Bound<'_, PyAny>) -> PyResult<T> {
    from_value(kind, &from_py::<serde_json::Value>(data)?).map_err(PyValueError::new_err)
}

/// A tidy frame of handoffs to a worker: the source's framework, the worker's, and the bytes, then
/// each path's outcome.
pub(crate) fn handoffs_frame<'py>(py: Python<'py>, reports: &[PathRow]) -> PyResult<Bound<'py, PyAny>> {
    let rows = reports
        .iter()
        .map(|row| {
            let ids = vec![
                ("source_framework", worker(row).map(|w| w.source.framework.clone()).into_pyobject(py)?.into_any()),
                ("target_framework", worker_framework(row).into_pyobject(py)?.into_any()),
                ("nbytes", worker(row).map(|w| w.nbytes).into_pyobject(py)?.into_any()),
            ];
            tidy(py, ids, row)
        })
        .collect::<PyResult<Vec<_>>>()?;
    frame(py, rows)
}

/// Every process path tried on one array as a tidy frame: the array's framework, dtype, shape,
/// device and bytes on every row.
pub(crate) fn comparison_frame<'py>(py: Python<'py>, r: &ProcessComparisonReport) -> PyResult<Bound<'py, PyAny>> {
    let rows = r
        .rows
        .iter()
        .map(|row| {
            // Asked for none: the framework the worker's array is in, where the path ran.
            let target = r.target_framework.clone().or_else(|| worker_framework(row));
            let ids = vec![
                ("source_framework", r.source_framework.clone().into_pyobject(py)?.into_any()),
                ("target_framework", target.into_pyobject(py)?.into_any()),
                ("dtype", r.dtype.clone().into_pyobject(py)?.into_any()),
                ("shape", PyTuple::new(py, &r.shape)?.into_any()),
                ("device", r.device.clone().into_pyobject(py)?.into_any()),
                ("nbytes", worker(row).map(|w| w.nbytes).into_pyobject(py)?.into_any()),
            ];
            tidy(py, ids, row)
        })
        .collect::<PyResult<Vec<_>>>()?;
    frame(py, rows)
}

/// A sweep over sizes × process paths as a tidy frame: the sweep's frameworks, dtype and device
/// on every row.
pub(crate) fn bench_frame<'py>(py: Python<'py>, r: &ProcessBenchReport) -> PyResult<Bound<'py, PyAny>> {
    let rows = r
        .points
        .iter()
        .map(|p| {
            let ids = vec![
                ("source_framework", r.source_framework.clone().into_pyobject(py)?.into_any()),
                ("target_framework", r.target_framework.clone().into_pyobject(py)?.into_any()),
                ("dtype", r.dtype.clone().into_pyobject(py)?.into_any()),
                ("device", r.device.clone().into_pyobject(py)?.into_any()),
                ("size", p.size.into_pyobject(py)?.into_any()),
                ("nbytes", worker(&p.row).map(|w| w.nbytes).into_pyobject(py)?.into_any()),
            ];
            tidy(py, ids, &p.row)
        })
        .collect::<PyResult<Vec<_>>>()?;
    frame(py, rows)
}

/// The typed result of kind ``kind`` (``process-share``: a ShareResult, ``process-comparison``: a
/// Comparison, ``process-bench``: a Benchmark) from its data as Python objects: a ValueError
/// names the key or value that does not fit the Rust types the published schemas are generated from.
#[pyfunction]
#[pyo3(name = "report")]
fn process_report<'py>(py: Python<'py>, kind: &str, data: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    Ok(match kind {
        "process-share" => Bound::new(py, ShareResult::from_worker(read(kind, data)?, py.None(), py.None(), Vec::new()))?.into_any(),
        "process-comparison" => Bound::new(py, Comparison::across(read(kind, data)?, PyDict::new(py).unbind()))?.into_any(),
        "process-bench" => Bound::new(py, Benchmark::across(read(kind, data)?))?.into_any(),
        other => {
            return Err(PyValueError::new_err(format!(
                "unknown process result kind {other:?}: use one of {}",
                crate::report::process::PROCESS_KINDS.join(", ")
            )));
        }
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(process_report, m)?)?;
    m.add_function(wrap_pyfunction!(process_refusal, m)?)?;
    m.add_function(wrap_pyfunction!(same_memory, m)?)?;
    super::process_timing::register(m)?;
    super::process_route::register(m)?;
    super::process_tables::register(m)?;
    super::process_rows::register(m)
}
