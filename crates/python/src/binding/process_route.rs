//! `PyProcessRoute`: the core's `ProcessRoute` (crates/core/src/share/process.rs) over a Python
//! transport of python/gpushare/processes/routes.py, as `PyRoute` (plan.rs) is the share `Route`
//! over the adapters' conversion. The transport moves the array and talks to the worker; the core
//! refuses, times, judges and builds the typed row; this file only carries values across.
//!
//! The transport's interface: `path`; `facts()` → `(framework, to, targets, library, on_device,
//! source_device, worker_device)`; `library_unavailable()`, `nccl_unavailable()`, `ipc_refusal()`
//! → a reason or None; `set_up()` → seconds for the first call; `hand_over()` → the worker's
//! reply; `release(reply)`; optionally `timed_by_worker(repeat)` → `(reply, [seconds, …])`;
//! `sides(reply)` → `((framework, nbytes, identity, context), (pid, framework, identity,
//! context))`; `staged()` → `(segment name, offset, bytes copied into it)` or None; `detail` (a
//! string or None); `notes(reply)` → strings; `link` (a dict or None: the network link of a remote
//! handoff); `described(reply)` → `(source, the worker's array)`, each a `TensorInfo`'s dict form;
//! `result(reply)` → `(remote, local, cleanup)`.

use pyo3::intern;
use pyo3::prelude::*;
use serde::de::DeserializeOwned;

use super::errors::to_pyerr;
use super::forms::from_py;
use super::types::ShareResult;
use crate::share::Error;
use crate::report::TensorReport;
use crate::report::process::{ProcessTarget, RemoteLink, Segment};
use crate::share::process::{ProcessRoute, RouteFacts, SourceSide, Staging};

/// A Python exception raised by the transport goes back to Python as itself (a WorkerError, a
/// refusal with its reason and fix, Ctrl-C): the core carries it untouched.
fn carried(e: PyErr) -> Error {
    Error::Interrupted(Box::new(e))
}

/// A value of the transport's (an identity, a context: dicts) read into the core's type; `None` stays `None`.
fn typed<T: DeserializeOwned>(value: &Bound<'_, PyAny>) -> PyResult<Option<T>> {
    if value.is_none() {
        return Ok(None);
    }
    from_py(value).map(Some)
}

/// The core's process route over one Python transport.
pub struct PyProcessRoute<'py> {
    transport: Bound<'py, PyAny>,
    path: String,
}

impl<'py> PyProcessRoute<'py> {
    pub fn new(transport: Bound<'py, PyAny>) -> PyResult<Self> {
        let path = transport.getattr(intern!(transport.py(), "path"))?.extract()?;
        Ok(PyProcessRoute { transport, path })
    }

    fn call0(&self, name: &str) -> crate::share::Result<Bound<'py, PyAny>> {
        self.transport.call_method0(name).map_err(carried)
    }

    fn reason(&self, name: &str) -> crate::share::Result<Option<String>> {
        self.call0(name)?.extract().map_err(carried)
    }

    fn sides_py(&self, reply: &Bound<'py, PyAny>) -> PyResult<(SourceSide, ProcessTarget)> {
        type Side<'a> = (Bound<'a, PyAny>, Bound<'a, PyAny>, Bound<'a, PyAny>, Bound<'a, PyAny>);
        let (source, target): (Side<'py>, Side<'py>) = self.transport.call_method1(intern!(reply.py(), "sides"), (reply,))?.extract()?;
        let source = SourceSide { framework: source.0.extract()?, nbytes: source.1.extract()?, identity: typed(&source.2)?, context: typed(&source.3)? };
        let target = ProcessTarget { pid: target.0.extract()?, framework: target.1.extract()?, identity: typed(&target.2)?, context: typed(&target.3)? };
        Ok((source, target))
    }
}

impl<'py> ProcessRoute for PyProcessRoute<'py> {
    type Reply = Bound<'py, PyAny>;

    fn path(&self) -> &str {
        &self.path
    }

    fn facts(&mut self) -> crate::share::Result<RouteFacts> {
        let facts = self.call0("facts")?;
        let (framework, to, targets, library, on_device, source_device, worker_device, strided) =
            facts.extract().map_err(carried)?;
        Ok(RouteFacts { framework, to, targets, library, on_device, source_device, worker_device, strided })
    }

    fn library_unavailable(&mut self) -> crate::share::Result<Option<String>> {
        self.reason("library_unavailable")
    }

    fn nccl_unavailable(&mut self) -> crate::share::Result<Option<String>> {
        self.reason("nccl_unavailable")
    }

    fn ipc_refusal(&mut self) -> crate::share::Result<Option<String>> {
        self.reason("ipc_refusal")
    }

    fn set_up(&mut self) -> crate::share::Result<f64> {
        self.call0("set_up")?.extract().map_err(carried)
    }

    fn hand_over(&mut self) -> crate::share::Result<Bound<'py, PyAny>> {
        self.transport.call_method0(intern!(self.transport.py(), "hand_over")).map_err(carried)
    }

    fn release(&mut self, reply: Bound<'py, PyAny>) -> crate::share::Result<()> {
        self.transport.call_method1(intern!(self.transport.py(), "release"), (reply,)).map(drop).map_err(carried)
    }

    fn hand_over_timed_by_worker(&mut self, repeat: usize) -> Option<crate::share::Result<(Bound<'py, PyAny>, Vec<f64>)>> {
        if !self.transport.hasattr("timed_by_worker").unwrap_or(false) {
            return None;
        }
        Some(self.transport.call_method1("timed_by_worker", (repeat,)).and_then(|r| r.extract()).map_err(carried))
    }

    fn sides(&mut self, reply: &Bound<'py, PyAny>) -> crate::share::Result<(SourceSide, ProcessTarget)> {
        self.sides_py(reply).map_err(carried)
    }

    fn staging(&mut self) -> crate::share::Result<Option<Staging>> {
        let staged: Option<(String, u64, u64)> = self.call0("staged")?.extract().map_err(carried)?;
        Ok(staged.map(|(name, offset, staged_bytes)| Staging { segment: Segment { name, offset }, staged_bytes }))
    }

    fn mechanism_detail(&mut self) -> crate::share::Result<Option<String>> {
        self.transport.getattr("detail").and_then(|d| d.extract()).map_err(carried)
    }

    fn notes(&mut self, reply: &Bound<'py, PyAny>) -> crate::share::Result<Vec<String>> {
        self.transport.call_method1("notes", (reply,)).and_then(|n| n.extract()).map_err(carried)
    }

    fn link(&mut self) -> crate::share::Result<Option<RemoteLink>> {
        match self.transport.getattr("link") {
            Ok(link) => typed(&link).map_err(carried),
            Err(_) => Ok(None),
        }
    }
}

/// Hands an array to a worker process through ``transport`` (a process path's transport of
/// gpushare.processes.routes) by the core's pipeline: refused where the path does not apply
/// (PathNotApplicableError), then ``repeat`` timed handoffs after the first, judged by memory
/// identity; the typed result, with the transport's remote array, local view and clean-up.
/// ``predicted``: the cost model's prediction for the handoff (``CostModel.predict``), asked
/// before it runs and kept in the row beside the measurement; ``auto``: the path is the one `auto`
/// took (the row says so, as any row of `auto`'s path does).
#[pyfunction]
#[pyo3(signature = (transport, repeat=1, predicted=None, auto=false))]
#[pyo3(name = "handoff")]
fn process_handoff<'py>(
    py: Python<'py>,
    transport: Bound<'py, PyAny>,
    repeat: usize,
    predicted: Option<PyRef<'py, super::advice::PyPrediction>>,
    auto: bool,
) -> PyResult<Bound<'py, ShareResult>> {
    let mut route = PyProcessRoute::new(transport.clone())?;
    let predicted = predicted.map(|p| p.inner.clone());
    let mut handed = crate::share::process::hand_to_worker(&mut route, repeat, predicted).map_err(to_pyerr)?;
    handed.report.auto = auto;
    // Described before `result`, which lets go of what a helper process received (nccl_socket).
    let described = described(&transport, &handed.reply);
    let (remote, local, cleanup): (Py<PyAny>, Py<PyAny>, Vec<Py<PyAny>>) =
        transport.call_method1(intern!(py, "result"), (&handed.reply,))?.extract()?;
    let described = match described {
        Ok(described) => described,
        Err(e) => {
            // The handoff that could not be reported leaves nothing behind: the worker's array
            // and what the parent kept for it are released as the result would release them.
            if !remote.is_none(py) {
                let _ = remote.bind(py).call_method0(intern!(py, "release"));
            }
            for release in cleanup.into_iter().rev() {
                let _ = release.bind(py).call0();
            }
            return Err(e);
        }
    };
    let result = ShareResult::from_worker(handed.report, described, remote, local, cleanup)
        .ok_or_else(|| pyo3::exceptions::PyRuntimeError::new_err("the handoff reached no worker"))?;
    Bound::new(py, result)
}

/// Both arrays of a handoff as gpushare describes each in its own process: the source here, the
/// worker's array in the worker (each `TensorInfo`'s dict form, the worker's back over the pipe).
fn described(transport: &Bound<'_, PyAny>, reply: &Bound<'_, PyAny>) -> PyResult<(TensorReport, TensorReport)> {
    let (source, target): (Bound<'_, PyAny>, Bound<'_, PyAny>) =
        transport.call_method1(intern!(transport.py(), "described"), (reply,))?.extract()?;
    Ok((from_py(&source)?, from_py(&target)?))
}

/// Why ``transport``'s path does not apply to its array and worker (predicted, before anything
/// runs), or None: the rule ``processes.handoff`` refuses by.
#[pyfunction]
#[pyo3(name = "route_refusal")]
fn process_route_refusal(transport: Bound<'_, PyAny>) -> PyResult<Option<String>> {
    crate::share::process::refusal(&mut PyProcessRoute::new(transport)?).map_err(to_pyerr)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(process_handoff, m)?)?;
    m.add_function(wrap_pyfunction!(process_route_refusal, m)?)
}
