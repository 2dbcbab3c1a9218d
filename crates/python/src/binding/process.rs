//! Handoffs to another process (python/gpushare/processes.py keeps the worker transport): run by
//! the core's pipeline over each path's transport (process_route.rs), whether a path applies and
//! their verdict by the core's rules, their timing by the core's one timing loop (process_timing.rs),
//! and their results as typed reports (`ProcessShareResult`, `ProcessComparison`, `ProcessBenchmark`) with
//! text, HTML, JSON and `to_pandas`, built from Python objects by pyo3 (no JSON text).

use pyo3::exceptions::{PyKeyError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use serde::Serialize;

use super::from_python::py_to_json;
use super::json::{json_to_py, to_py};
use crate::report::process::{
    MemoryIdentity, ProcessBenchReport, ProcessComparisonReport, ProcessShareReport, Segment, TIDY_DTYPES,
    from_value,
};
use crate::render::process as render;

fn value_error(e: impl ToString) -> PyErr {
    PyValueError::new_err(e.to_string())
}

fn identity(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Option<MemoryIdentity>> {
    match obj.filter(|o| !o.is_none()) {
        None => Ok(None),
        Some(o) => serde_json::from_value(py_to_json(o)?).map(Some).map_err(value_error),
    }
}

/// Whether two memory identities (each asked in its own process) name the same physical memory,
/// and why: the core's judge (crates/core/src/explain/identity.rs).
#[pyfunction]
#[pyo3(signature = (a, b))]
fn same_memory(a: Option<Bound<'_, PyAny>>, b: Option<Bound<'_, PyAny>>) -> PyResult<(bool, String)> {
    Ok(crate::explain::same_memory(identity(a.as_ref())?.as_ref(), identity(b.as_ref())?.as_ref()))
}

/// `(verdict, reason)` of a handoff by process path `path`: the core's identity judge; `segment`
/// (`{"name", "offset"}`) is the segment a private source was copied into first.
#[pyfunction]
#[pyo3(signature = (path, source, target, segment=None))]
fn judge_handoff(
    path: &str,
    source: Option<Bound<'_, PyAny>>,
    target: Option<Bound<'_, PyAny>>,
    segment: Option<Bound<'_, PyAny>>,
) -> PyResult<(&'static str, Option<String>)> {
    let segment: Option<Segment> = match segment.filter(|s| !s.is_none()) {
        Some(s) => Some(serde_json::from_value(py_to_json(&s)?).map_err(value_error)?),
        None => None,
    };
    let (verdict, reason) =
        crate::explain::judge_handoff(path, identity(source.as_ref())?.as_ref(), identity(target.as_ref())?.as_ref(), segment.as_ref());
    Ok((verdict.as_str(), reason))
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

fn data_dict<'py, T: Serialize>(py: Python<'py>, data: &T) -> PyResult<Bound<'py, PyAny>> {
    to_py(py, data)
}

fn record<'py>(py: Python<'py>, value: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    py.import("gpushare.records")?.getattr("wrap")?.call1((value,))
}

fn frame<'py>(py: Python<'py>, rows: Vec<Bound<'py, PyDict>>) -> PyResult<Bound<'py, PyAny>> {
    let pandas = py.import("pandas").map_err(|_| {
        pyo3::exceptions::PyImportError::new_err("to_pandas() needs pandas: pip install 'gpushare-dlpack[pandas]'")
    })?;
    let frame = pandas.getattr("DataFrame")?.call1((PyList::new(py, rows)?,))?;
    let columns: Vec<String> = frame.getattr("columns")?.extract()?;
    let dtypes = PyDict::new(py);
    for (column, dtype) in TIDY_DTYPES {
        if columns.iter().any(|c| c == column) {
            dtypes.set_item(column, dtype)?;
        }
    }
    // Text missing as None, as every gpushare frame has it (gpushare.records.normalise_frame).
    let frame = frame.call_method1("astype", (dtypes,))?;
    py.import("gpushare.records")?.getattr("normalise_frame")?.call1((frame,))
}

/// One tidy row: the identifying columns, then the path's outcome.
fn tidy<'py>(py: Python<'py>, ids: Vec<(&str, Bound<'py, PyAny>)>, row: &ProcessShareReport) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (k, v) in ids {
        d.set_item(k, v)?;
    }
    for (k, v) in row.tidy_outcome() {
        d.set_item(k, json_to_py(py, &v)?)?;
    }
    // The tables' vocabulary: a path that cannot run here is "not applicable", never "failed".
    d.set_item("verdict", crate::render::State::of(row.verdict, row.applicable).word())?;
    Ok(d)
}

fn read<T: Serialize + for<'de> serde::Deserialize<'de>>(kind: &str, data: &Bound<'_, PyAny>) -> PyResult<T> {
    from_value(kind, &py_to_json(data)?).map_err(PyValueError::new_err)
}

/// One handoff to another process. ``verdict`` is "shared" only when the worker's array lies in
/// the same physical memory (same identity on both sides), else "copied"; ``source`` and
/// ``target`` show each side's identity; ``local`` is the parent's array over the shared memory
/// (the source itself, or for ``shm`` the segment's view); ``remote`` the worker's array. Every
/// key of the JSON form reads as an attribute (``r.timing.median``).
#[pyclass(module = "gpushare._native.processes", name = "ProcessShareResult", weakref)]
pub struct PyProcessShareResult {
    report: ProcessShareReport,
    #[pyo3(get, set)]
    remote: Py<PyAny>,
    #[pyo3(get, set)]
    local: Py<PyAny>,
    cleanup: Vec<Py<PyAny>>,
}

impl PyProcessShareResult {
    /// The result of a handoff the core's pipeline ran (binding/process_route.rs).
    pub fn from_report(report: ProcessShareReport, remote: Py<PyAny>, local: Py<PyAny>, cleanup: Vec<Py<PyAny>>) -> Self {
        Self { report, remote, local, cleanup }
    }

    pub fn report(&self) -> &ProcessShareReport {
        &self.report
    }
}

#[pymethods]
impl PyProcessShareResult {
    #[new]
    #[pyo3(signature = (row, remote=None, local=None, cleanup=None))]
    fn new(py: Python<'_>, row: &Bound<'_, PyAny>, remote: Option<Py<PyAny>>, local: Option<Py<PyAny>>, cleanup: Option<Vec<Py<PyAny>>>) -> PyResult<Self> {
        Ok(Self {
            report: read("process-share", row)?,
            remote: remote.unwrap_or_else(|| py.None()),
            local: local.unwrap_or_else(|| py.None()),
            cleanup: cleanup.unwrap_or_default(),
        })
    }

    /// The JSON form's data, as a dict (without its schema key).
    #[getter]
    fn row<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        data_dict(py, &self.report)
    }

    #[getter]
    fn shared(&self) -> bool {
        self.report.verdict == crate::report::Verdict::Shared
    }

    fn __getattr__<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
        let row = self.row(py)?;
        match row.get_item(name) {
            Ok(v) => record(py, &v),
            Err(_) => Err(pyo3::exceptions::PyAttributeError::new_err(name.to_string())),
        }
    }

    /// Adds a note to the report (what the caller did around the handoff).
    fn add_note(&mut self, note: String) {
        self.report.notes.push(note);
    }

    /// The same report with no array attached: what a table keeps of a handoff it released, so
    /// that the parent's view of a segment goes with the handoff, not with the table.
    fn _report_only(&self, py: Python<'_>) -> Self {
        Self::from_report(self.report.clone(), py.None(), py.None(), Vec::new())
    }

    /// Releases what the parent keeps for the handoff (a segment), not the worker's array.
    fn _release_local(slf: &Bound<'_, Self>) {
        // Taken out before calling back into Python: a callback may reach this result again.
        let cleanup = std::mem::take(&mut slf.borrow_mut().cleanup);
        for f in cleanup.into_iter().rev() {
            let _ = f.bind(slf.py()).call0();
        }
    }

    /// Releases the worker's array and what the parent keeps for it (a segment, a handle).
    fn release(slf: &Bound<'_, Self>) -> PyResult<()> {
        let py = slf.py();
        let remote = slf.borrow().remote.clone_ref(py);
        if !remote.is_none(py)
            && let Err(e) = remote.bind(py).call_method0("release")
        {
            let worker_error = py.import("gpushare.exceptions")?.getattr("WorkerError")?;
            if !e.is_instance(py, &worker_error) {
                return Err(e);
            }
        }
        Self::_release_local(slf);
        Ok(())
    }
}

super::forms::result_forms!(PyProcessShareResult {
    kind: "process-share",
    data: report: ProcessShareReport,
    text: |r| render::rows_text(std::slice::from_ref(r)),
    html: |r| render::rows_html(std::slice::from_ref(r)),
});

/// One row per process path: path, mechanism, verdict, bytes moved, time, first-call cost, and
/// the identity of the memory on each side. ``source`` identifies the array (source_framework,
/// target_framework, dtype, shape, device); ``results`` the kept handoffs (``keep=True``).
#[pyclass(module = "gpushare._native.processes", name = "ProcessComparison")]
pub struct PyProcessComparison {
    report: ProcessComparisonReport,
    #[pyo3(get, set)]
    results: Py<PyAny>,
}

impl PyProcessComparison {
    pub fn from_report(report: ProcessComparisonReport, results: Py<PyAny>) -> Self {
        Self { report, results }
    }
}

#[pymethods]
impl PyProcessComparison {
    /// ``data``: the identifying keys and ``rows`` (dicts, or ProcessShareResult's rows).
    #[new]
    #[pyo3(signature = (data, results=None))]
    fn new(py: Python<'_>, data: &Bound<'_, PyAny>, results: Option<Py<PyAny>>) -> PyResult<Self> {
        Ok(Self {
            report: read("process-comparison", data)?,
            results: results.unwrap_or_else(|| PyDict::new(py).into_any().unbind()),
        })
    }

    /// One record per path, read by attribute (``row.timing.median``; gpushare.records).
    #[getter]
    fn rows<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        record(py, &data_dict(py, &self.report.rows)?)
    }

    /// Path → its row: ``c.paths["shm"].timing.median``.
    #[getter]
    fn paths<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (row, rec) in self.report.rows.iter().zip(self.rows(py)?.try_iter()?) {
            d.set_item(&row.path, rec?)?;
        }
        Ok(d)
    }

    fn __getitem__<'py>(&self, py: Python<'py>, path: &str) -> PyResult<Bound<'py, PyAny>> {
        match self.report.rows.iter().position(|r| r.path == path) {
            Some(i) => self.rows(py)?.get_item(i),
            None => Err(PyKeyError::new_err(path.to_string())),
        }
    }

    /// What identifies the comparison: the array's framework, dtype, shape and device, and the
    /// framework asked for.
    #[getter]
    fn source<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let r = &self.report;
        let d = PyDict::new(py);
        d.set_item("source_framework", &r.source_framework)?;
        d.set_item("target_framework", &r.target_framework)?;
        d.set_item("dtype", &r.dtype)?;
        d.set_item("shape", r.shape.clone())?;
        d.set_item("device", &r.device)?;
        Ok(d.into_any())
    }

    /// One row per path, the array's framework, dtype, shape, device and bytes on every row.
    fn to_pandas<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let r = &self.report;
        let rows = r
            .rows
            .iter()
            .map(|row| {
                // Asked for none: the framework the worker's array is in, where the path ran.
                let target = r.target_framework.clone().or_else(|| row.target.as_ref().and_then(|t| t.framework.clone()));
                let ids = vec![
                    ("source_framework", r.source_framework.clone().into_pyobject(py)?.into_any()),
                    ("target_framework", target.into_pyobject(py)?.into_any()),
                    ("dtype", r.dtype.clone().into_pyobject(py)?.into_any()),
                    ("shape", PyTuple::new(py, &r.shape)?.into_any()),
                    ("device", r.device.clone().into_pyobject(py)?.into_any()),
                    ("nbytes", row.nbytes.into_pyobject(py)?.into_any()),
                ];
                tidy(py, ids, row)
            })
            .collect::<PyResult<Vec<_>>>()?;
        frame(py, rows)
    }
}

super::forms::result_forms!(PyProcessComparison {
    kind: "process-comparison",
    data: report: ProcessComparisonReport,
    text: |r| render::rows_text(&r.rows),
    html: |r| render::rows_html(&r.rows),
});

/// Sizes × process paths: ``points`` (one per size and path, with verdict and timing).
#[pyclass(module = "gpushare._native.processes", name = "ProcessBenchmark")]
pub struct PyProcessBenchmark {
    report: ProcessBenchReport,
}

impl PyProcessBenchmark {
    pub fn from_report(report: ProcessBenchReport) -> Self {
        Self { report }
    }
}

#[pymethods]
impl PyProcessBenchmark {
    #[new]
    fn new(data: &Bound<'_, PyAny>) -> PyResult<Self> {
        Ok(Self { report: read("process-bench", data)? })
    }

    /// The sweep was stopped (Ctrl-C) before it ended: ``points`` holds what was measured.
    #[getter]
    fn interrupted(&self) -> bool {
        self.report.interrupted
    }

    /// The JSON form's data, as a dict (without its schema key).
    #[getter]
    fn data<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        data_dict(py, &self.report)
    }

    /// One record per size × path, read by attribute (``p.size``, ``p.timing.median``).
    #[getter]
    fn points<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        record(py, &data_dict(py, &self.report.points)?)
    }

    /// One row per size × path, the sweep's frameworks, dtype and device on every row.
    fn to_pandas<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let r = &self.report;
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
                    ("nbytes", p.handoff.nbytes.into_pyobject(py)?.into_any()),
                ];
                tidy(py, ids, &p.handoff)
            })
            .collect::<PyResult<Vec<_>>>()?;
        frame(py, rows)
    }
}

super::forms::result_forms!(PyProcessBenchmark {
    kind: "process-bench",
    data: report: ProcessBenchReport,
    text: |r| render::bench_text(r),
    html: |r| render::bench_html(r),
});

/// The typed result of kind ``kind`` (``process-share``, ``process-comparison``,
/// ``process-bench``) from its data as Python objects: a ValueError names the key or value that
/// does not fit the Rust types the published schemas are generated from.
#[pyfunction]
#[pyo3(name = "report")]
fn process_report<'py>(py: Python<'py>, kind: &str, data: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    Ok(match kind {
        "process-share" => Bound::new(py, PyProcessShareResult::new(py, data, None, None, None)?)?.into_any(),
        "process-comparison" => Bound::new(py, PyProcessComparison::new(py, data, None)?)?.into_any(),
        "process-bench" => Bound::new(py, PyProcessBenchmark::new(data)?)?.into_any(),
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
    m.add_class::<PyProcessShareResult>()?;
    m.add_class::<PyProcessComparison>()?;
    m.add_class::<PyProcessBenchmark>()?;
    m.add_function(wrap_pyfunction!(same_memory, m)?)?;
    m.add_function(wrap_pyfunction!(judge_handoff, m)?)?;
    super::process_timing::register(m)?;
    super::process_route::register(m)?;
    super::process_tables::register(m)?;
    Ok(())
}
