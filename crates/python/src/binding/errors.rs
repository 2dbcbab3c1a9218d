//! gpushare's one exception hierarchy, created here and re-exported by `gpushare.exceptions`.
//!
//! GpushareError
//! ├── UnknownFrameworkError      a framework name gpushare does not know (with a suggestion)
//! ├── FrameworkNotInstalledError the framework is known but cannot be imported here
//! ├── NotAnArrayError            the object is not an array of the named or any known framework
//! ├── DLPackError                a DLPack capsule that cannot be read
//! ├── CudaError                  the CUDA driver refused a call
//! ├── WorkerError                a worker process died, was killed, timed out or was stopped
//! └── ConversionError            a handoff that failed; `.reason`, `.fix`, `.framework_error`
//!     ├── UnsafeInputError       refused before calling the framework (it would crash or mis-read)
//!     └── PathNotApplicableError the transfer path does not apply to this pair

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(gpushare.exceptions, GpushareError, PyException, "Base class of every gpushare error.");
create_exception!(gpushare.exceptions, UnknownFrameworkError, GpushareError, "A framework name gpushare does not know.");
create_exception!(gpushare.exceptions, FrameworkNotInstalledError, GpushareError, "The framework is known but not importable here.");
create_exception!(gpushare.exceptions, NotAnArrayError, GpushareError, "The object is not an array of a known framework.");
create_exception!(gpushare.exceptions, DLPackError, GpushareError, "A DLPack capsule that cannot be read.");
create_exception!(gpushare.exceptions, CudaError, GpushareError, "The CUDA driver refused a call.");
create_exception!(gpushare.exceptions, WorkerError, GpushareError, "A worker process that died, was killed, timed out or was stopped.");
create_exception!(gpushare.exceptions, ConversionError, GpushareError, "A conversion that failed.");
create_exception!(gpushare.exceptions, UnsafeInputError, ConversionError, "Refused before calling the framework.");
create_exception!(gpushare.exceptions, PathNotApplicableError, ConversionError, "The path does not apply to this pair.");

/// An exception instance with `reason` and `fix` attributes, so notebooks and tests can read them.
pub fn with_fix<E: pyo3::PyTypeInfo>(py: Python<'_>, message: String, reason: &str, fix: &str) -> PyErr {
    let err = PyErr::new::<E, _>(message);
    let value = err.value(py);
    // Setting attributes on a fresh exception instance cannot fail short of memory exhaustion;
    // if it did, the message still carries the reason and the fix.
    let _ = value.setattr("reason", reason);
    let _ = value.setattr("fix", fix);
    err
}

/// Runs `f` without the GIL, giving it a `keep_waiting` callback that re-attaches to run Python's
/// signal handlers (the core calls it every 50 ms or so while it waits). If a handler raised
/// (Ctrl-C → KeyboardInterrupt), that exception is what the caller gets; otherwise `f`'s error,
/// converted by `to_pyerr`.
pub fn interruptible<T, E, F>(py: Python<'_>, to_pyerr: fn(E) -> PyErr, f: F) -> PyResult<T>
where
    T: Send,
    E: Send,
    F: FnOnce(&mut dyn FnMut() -> bool) -> Result<T, E> + Send,
{
    let mut raised: Option<PyErr> = None;
    let result = py.detach(|| {
        let mut keep_waiting = || {
            Python::attach(|py| match py.check_signals() {
                Ok(()) => true,
                Err(e) => {
                    raised = Some(e);
                    false
                }
            })
        };
        f(&mut keep_waiting)
    });
    match raised {
        Some(err) => Err(err),
        None => result.map_err(to_pyerr),
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("GpushareError", py.get_type::<GpushareError>())?;
    m.add("UnknownFrameworkError", py.get_type::<UnknownFrameworkError>())?;
    m.add("FrameworkNotInstalledError", py.get_type::<FrameworkNotInstalledError>())?;
    m.add("NotAnArrayError", py.get_type::<NotAnArrayError>())?;
    m.add("DLPackError", py.get_type::<DLPackError>())?;
    m.add("CudaError", py.get_type::<CudaError>())?;
    m.add("WorkerError", py.get_type::<WorkerError>())?;
    m.add("ConversionError", py.get_type::<ConversionError>())?;
    m.add("UnsafeInputError", py.get_type::<UnsafeInputError>())?;
    m.add("PathNotApplicableError", py.get_type::<PathNotApplicableError>())?;
    m.add_function(wrap_pyfunction!(conversion_error, m)?)?;
    Ok(())
}

/// The core's error on its way to Python. The orphan rule forbids `From<ShareError> for PyErr` in
/// this crate (neither type is ours), so, as polars does with `PyPolarsErr`, the binding wraps it:
/// `.map_err(PyShareError::from)?` or a function returning `Result<T, PyShareError>`.
#[derive(Debug)]
pub struct PyShareError(pub crate::share::ShareError);

impl From<crate::share::ShareError> for PyShareError {
    fn from(error: crate::share::ShareError) -> Self {
        PyShareError(error)
    }
}

/// The one conversion of the core's errors into gpushare's exceptions (polars' `PyPolarsErr`
/// model): each carries `reason`, `fix`, `framework_error` and `predicted` where it has them, and
/// a framework's own exception as `__cause__`.
impl From<PyShareError> for PyErr {
    fn from(PyShareError(error): PyShareError) -> PyErr {
        use crate::share::ShareError as E;
        Python::attach(|py| {
            let predicted = error.predicted().cloned();
            let (err, reason, fix, framework_error, origin) = match error {
                E::UnknownFramework(m) => (UnknownFrameworkError::new_err(m), None, None, None, None),
                E::FrameworkNotInstalled(m) => (FrameworkNotInstalledError::new_err(m), None, None, None, None),
                E::NotAnArray(m) => (NotAnArrayError::new_err(m), None, None, None, None),
                E::DLPack(m) => (DLPackError::new_err(m), None, None, None, None),
                E::Cuda(m) => (CudaError::new_err(m), None, None, None, None),
                E::Usage(m) => (pyo3::exceptions::PyValueError::new_err(m), None, None, None, None),
                ref e @ E::UnsafeInput { ref reason, ref fix, .. } => {
                    (UnsafeInputError::new_err(e.to_string()), Some(reason.clone()), Some(fix.clone()), None, None)
                }
                E::PathNotApplicable { message, .. } => (PathNotApplicableError::new_err(message), None, None, None, None),
                E::Conversion { message, reason, fix, framework_error, origin, .. } => {
                    (ConversionError::new_err(message), Some(reason), fix, Some(framework_error), origin)
                }
                E::Framework { text, origin } => (ConversionError::new_err(text.clone()), Some(text.clone()), None, Some(text), origin),
                // Raised by gpushare's own code (an adapter): the same exception, with the prediction.
                E::Raised { origin, .. } => (foreign(py, origin), None, None, None, None),
                E::Interrupted(origin) => return foreign(py, origin),
            };
            let value = err.value(py);
            // Setting attributes on an exception instance cannot fail short of memory exhaustion;
            // the message carries the reason and the fix either way.
            if let Some(reason) = reason {
                let _ = value.setattr("reason", reason);
                let _ = value.setattr("fix", fix);
            }
            if let Some(text) = framework_error {
                let _ = value.setattr("framework_error", text);
            }
            if value.is_instance_of::<GpushareError>() {
                let predicted = predicted.map(|p| Py::new(py, super::explain::Prediction::from_outcome(p))).transpose();
                match predicted {
                    Ok(Some(p)) => {
                        let _ = value.setattr("predicted", p);
                    }
                    // An adapter's own error that no prediction reached keeps what it had.
                    Ok(None) if value.hasattr("predicted").unwrap_or(false) => {}
                    Ok(None) => {
                        let _ = value.setattr("predicted", py.None());
                    }
                    Err(e) => return e,
                }
            }
            if let Some(origin) = origin {
                err.set_cause(py, Some(foreign(py, origin)));
            }
            err
        })
    }
}

/// A Python exception carried through the core, back as itself.
fn foreign(_py: Python<'_>, origin: crate::share::Foreign) -> PyErr {
    match origin.downcast::<PyErr>() {
        Ok(err) => *err,
        Err(other) => ConversionError::new_err(other.to_string()),
    }
}

/// A Python exception raised inside a pipeline step, classified for the core: gpushare's own
/// errors pass through (gaining the prediction), Ctrl-C and other non-`Exception`s pass through
/// untouched, and a framework's exception is explained.
pub fn share_error(py: Python<'_>, err: PyErr) -> crate::share::ShareError {
    use crate::share::ShareError as E;
    if err.is_instance_of::<GpushareError>(py) {
        E::Raised { origin: Box::new(err), predicted: None }
    } else if !err.is_instance_of::<pyo3::exceptions::PyException>(py) {
        E::Interrupted(Box::new(err))
    } else {
        let value = err.value(py);
        let kind = value.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "Exception".into());
        let text = value.str().map(|s| s.to_string()).unwrap_or_default();
        E::Framework { text: format!("{kind}: {text}"), origin: Some(Box::new(err)) }
    }
}

/// The exception gpushare raises for ``exc``, raised while handing an array of framework
/// ``source`` to ``target`` by ``path`` (``"inspect"``: while describing it): the same conversion
/// every share's failures go through.
#[pyfunction]
#[pyo3(signature = (source, target, path, exc, predicted=None))]
pub fn conversion_error<'py>(
    py: Python<'py>,
    source: &str,
    target: &str,
    path: &str,
    exc: Bound<'py, PyAny>,
    predicted: Option<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let predicted = predicted.filter(|p| !p.is_none()).map(|p| super::explain::prediction_from_py(&p)).transpose()?;
    let predicted = predicted.map(|p| p.to_outcome());
    let stage = if path == "inspect" { crate::share::Stage::Inspect } else { crate::share::Stage::Convert };
    let err = share_error(py, PyErr::from_value(exc)).explain(stage, source, target, path, predicted.as_ref());
    Ok(PyErr::from(PyShareError(err)).into_value(py).into_bound(py).into_any())
}
