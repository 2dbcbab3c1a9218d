//! What a handoff to another process adds to the seam, typed as the core's structs
//! (crates/core/src/report/process.rs): `ProcessSide` (one side of a handoff, described by memory
//! identity) and `WorkerInfo` (the process a result's `worker` names). Its rows are the `PathRow`s
//! of every handoff (rows.rs). Each reads by attribute; key access (`side["identity"]`) reads its
//! JSON form, for code written against the dicts these once were. A memory identity, a context, a segment and a
//! network link stay dicts: each is a tagged description (host or CUDA memory, an engine's link)
//! whose keys depend on its kind.

use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde::Serialize;

use super::forms::{keyed_methods, to_py};
use crate::render::lab::PathRow;
use crate::report::process::{ProcessContext, ProcessSource, ProcessTarget};

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
    /// From the first of `rows` that reached the worker.
    pub fn of<'a>(rows: impl Iterator<Item = &'a PathRow>) -> PyWorkerInfo {
        let mut sides = rows.filter_map(|r| r.worker.as_ref());
        let reached = sides.find(|w| w.target.as_ref().is_some_and(|t| t.pid.is_some()));
        let target = reached.and_then(|w| w.target.as_ref());
        PyWorkerInfo {
            pid: target.and_then(|t| t.pid),
            host: reached.and_then(|w| w.link.as_ref()).and_then(|l| l.remote.host.clone()),
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
    m.add_class::<PyProcessSide>()?;
    m.add_class::<PyWorkerInfo>()
}
