//! What crosses the seam of a handoff to another process, typed as the core's structs
//! (crates/core/src/report/process.rs): `ProcessRow` (one process path's row of a `Comparison`, or
//! one point of a `Benchmark`, its `size` set; its timing is the `Timing` of every handoff, the
//! first call apart), `ProcessSide` (one side of a
//! handoff, described by memory identity) and `WorkerInfo` (the process a result's `worker`
//! names). Each reads by attribute; key access (`row["timing"]["median"]`) reads its JSON form, for
//! code written against the dicts these once were. A memory identity, a context, a segment and a
//! network link stay dicts: each is a tagged description (host or CUDA memory, an engine's link)
//! whose keys depend on its kind.

use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde::Serialize;

use super::advice::PyPrediction;
use super::forms::{keyed_methods, to_py};
use super::vocabulary::PyVerdict;
use crate::report::process::{ProcessBenchPoint, ProcessContext, ProcessShareReport, ProcessSource, ProcessTarget};

fn dict_of<'py, T: Serialize + ?Sized>(py: Python<'py>, value: &T) -> PyResult<Bound<'py, PyDict>> {
    Ok(to_py(py, value)?.cast_into::<PyDict>()?)
}

/// A value's dict form, or None.
fn optional_dict<'py, T: Serialize>(py: Python<'py>, value: Option<&T>) -> PyResult<Option<Bound<'py, PyAny>>> {
    value.map(|v| to_py(py, v)).transpose()
}

/// One side of a handoff to another process, described by memory identity in its own process.
enum Side {
    Source(ProcessSource),
    Target(ProcessTarget),
}

/// One side of a handoff to another process: the process, its framework, and the memory the
/// array lies in (``identity``: an IPC handle and offset, a segment and offset, an inode), which
/// means the same in both processes where a pointer would not.
#[pyclass(module = "gpushare", frozen, name = "ProcessSide")]
pub struct PyProcessSide {
    side: Side,
}

impl PyProcessSide {
    pub fn source(source: &ProcessSource) -> PyProcessSide {
        PyProcessSide { side: Side::Source(source.clone()) }
    }
    pub fn target(target: &ProcessTarget) -> PyProcessSide {
        PyProcessSide { side: Side::Target(target.clone()) }
    }
    fn dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        match &self.side {
            Side::Source(s) => dict_of(py, s),
            Side::Target(t) => dict_of(py, t),
        }
    }
    fn context_of(&self) -> Option<&ProcessContext> {
        match &self.side {
            Side::Source(s) => s.context.as_ref(),
            Side::Target(t) => t.context.as_ref(),
        }
    }
}

#[pymethods]
impl PyProcessSide {
    /// The process id; None for a worker that never held the array.
    #[getter]
    fn pid(&self) -> Option<u32> {
        match &self.side {
            Side::Source(s) => Some(s.pid),
            Side::Target(t) => t.pid,
        }
    }
    #[getter]
    fn framework(&self) -> Option<&str> {
        match &self.side {
            Side::Source(s) => Some(s.framework.as_str()),
            Side::Target(t) => t.framework.as_deref(),
        }
    }
    /// The memory the array lies in, as a dict whose ``kind`` says which (``host`` or ``cuda``).
    #[getter]
    fn identity<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let identity = match &self.side {
            Side::Source(s) => s.identity.as_ref(),
            Side::Target(t) => t.identity.as_ref(),
        };
        optional_dict(py, identity)
    }
    /// The CUDA context the array's memory was read in, as a dict; None in host memory.
    #[getter]
    fn context<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        optional_dict(py, self.context_of())
    }
    fn __repr__(&self) -> String {
        let pid = self.pid().map_or("None".to_string(), |p| p.to_string());
        format!("ProcessSide(pid={pid}, framework={:?})", self.framework().unwrap_or("None"))
    }
}

keyed_methods!(PyProcessSide);

/// One process path's row of a comparison across processes, or one point of such a sweep (its
/// ``size`` set): the core's process-share row, read by attribute.
#[pyclass(module = "gpushare", frozen, name = "ProcessRow")]
pub struct PyProcessRow {
    report: ProcessShareReport,
    size: Option<u64>,
}

impl PyProcessRow {
    pub fn row(report: &ProcessShareReport) -> PyProcessRow {
        PyProcessRow { report: report.clone(), size: None }
    }
    pub fn point(point: &ProcessBenchPoint) -> PyProcessRow {
        PyProcessRow { report: point.handoff.clone(), size: Some(point.size) }
    }
    /// The JSON form: the row's fields, a point's `size` last (as the sweep's JSON has it).
    fn dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let fields = dict_of(py, &self.report)?;
        if let Some(size) = self.size {
            fields.set_item("size", size)?;
        }
        Ok(fields)
    }
}

#[pymethods]
impl PyProcessRow {
    #[getter]
    fn path(&self) -> &str {
        &self.report.path
    }
    /// How the path hands the array over, in words.
    #[getter]
    fn mechanism(&self) -> &str {
        &self.report.mechanism
    }
    #[getter]
    fn verdict(&self) -> PyVerdict {
        PyVerdict(self.report.verdict)
    }
    #[getter]
    fn reason(&self) -> Option<&str> {
        self.report.reason.as_deref()
    }
    /// False for a path that does not apply here (nothing crossed).
    #[getter]
    fn applicable(&self) -> bool {
        self.report.applicable
    }
    #[getter]
    fn nbytes(&self) -> u64 {
        self.report.nbytes
    }
    #[getter]
    fn bytes_moved(&self) -> u64 {
        self.report.bytes_moved
    }
    /// Bytes each timed handoff after the first moves (a send copies every time, a staged
    /// segment only once).
    #[getter]
    fn bytes_per_handoff(&self) -> u64 {
        self.report.bytes_per_handoff
    }
    /// Bytes per second of the handoffs after the first, where each moves bytes.
    #[getter]
    fn bandwidth(&self) -> Option<f64> {
        self.report.bandwidth()
    }
    /// None for a path that did not run.
    #[getter]
    fn timing(&self) -> Option<super::types::PyTiming> {
        self.report.timing.clone().map(|timing| super::types::PyTiming { timing })
    }
    #[getter]
    fn source(&self) -> PyProcessSide {
        PyProcessSide::source(&self.report.source)
    }
    /// The worker's side; None for a path that did not run.
    #[getter]
    fn target(&self) -> Option<PyProcessSide> {
        self.report.target.as_ref().map(PyProcessSide::target)
    }
    #[getter]
    fn notes(&self) -> Vec<String> {
        self.report.notes.clone()
    }
    /// The shared segment handed over (``name``, ``offset``), for a path that hands one.
    #[getter]
    fn segment<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        optional_dict(py, self.report.segment.as_ref())
    }
    /// The network link of a handoff to a worker on another host, as a dict.
    #[getter]
    fn link<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        optional_dict(py, self.report.link.as_ref())
    }
    /// What the cost model predicted before the handoff ran; None where not calibrated.
    #[getter]
    fn predicted(&self) -> Option<PyPrediction> {
        self.report.predicted.clone().map(|inner| PyPrediction { inner })
    }
    /// The array's size in bytes at this point of a sweep; None for a row of a comparison.
    #[getter]
    fn size(&self) -> Option<u64> {
        self.size
    }
    fn __repr__(&self) -> String {
        let time = match self.report.timing.as_ref().map(|t| t.median) {
            Some(median) => format!(", median={}", crate::render::units::time(median)),
            None => String::new(),
        };
        let size = self.size.map(|s| format!("size={s}, ")).unwrap_or_default();
        format!("ProcessRow({size}path='{}', verdict='{}'{time})", self.report.path, self.report.verdict.as_str())
    }
}

keyed_methods!(PyProcessRow);

/// The worker process that held the arrays of a result's handoffs: its ``pid`` and ``framework``
/// (None where no handoff reached it) and ``host`` (None on this host).
#[pyclass(module = "gpushare", frozen, name = "WorkerInfo")]
#[derive(Serialize)]
pub struct PyWorkerInfo {
    pid: Option<u32>,
    host: Option<String>,
    framework: Option<String>,
}

impl PyWorkerInfo {
    /// From the first of `reports` that reached the worker.
    pub fn of<'a>(mut reports: impl Iterator<Item = &'a ProcessShareReport>) -> PyWorkerInfo {
        let reached = reports.find(|r| r.target.as_ref().is_some_and(|t| t.pid.is_some()));
        let target = reached.and_then(|r| r.target.as_ref());
        PyWorkerInfo {
            pid: target.and_then(|t| t.pid),
            host: reached.and_then(|r| r.link.as_ref()).and_then(|l| l.remote.host.clone()),
            framework: target.and_then(|t| t.framework.clone()),
        }
    }
    fn dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        dict_of(py, self)
    }
}

#[pymethods]
impl PyWorkerInfo {
    #[getter]
    fn pid(&self) -> Option<u32> {
        self.pid
    }
    #[getter]
    fn host(&self) -> Option<&str> {
        self.host.as_deref()
    }
    #[getter]
    fn framework(&self) -> Option<&str> {
        self.framework.as_deref()
    }
    fn __repr__(&self) -> String {
        let text = |v: Option<&str>| v.map_or("None".to_string(), |v| format!("'{v}'"));
        let pid = self.pid.map_or("None".to_string(), |p| p.to_string());
        format!("WorkerInfo(pid={pid}, host={}, framework={})", text(self.host.as_deref()), text(self.framework.as_deref()))
    }
}

keyed_methods!(PyWorkerInfo);

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyProcessRow>()?;
    m.add_class::<PyProcessSide>()?;
    m.add_class::<PyWorkerInfo>()
}
