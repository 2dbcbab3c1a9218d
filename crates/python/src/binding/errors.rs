//! gpushare's one exception hierarchy, created here and re-exported by `gpushare.exceptions`, and
//! the one conversion of the core's one error ([`gpushare_core::Error`]) into it: every gpushare
//! exception the binding raises, and every one Python code raises (through [`gpushare_error`]),
//! is made by the one conversion below, from [`PyGpushareErr`].
//!
//! GpushareError
//! ├── UnknownFrameworkError      a framework name gpushare does not know (with a suggestion)
//! ├── FrameworkNotInstalledError the framework is known but cannot be imported here
//! ├── NotAnArrayError            the object is not an array of the named or any known framework
//! ├── DLPackError                a DLPack capsule that cannot be read
//! ├── CudaError                  the CUDA driver refused a call
//! ├── WorkerError                a worker process died, was killed, timed out or was stopped
//! └── ConversionError            a handoff that failed
//!     ├── UnsafeInputError       refused before calling the framework (it would crash or mis-read)
//!     └── PathNotApplicableError the transfer path does not apply to this pair
//!
//! Every one carries `.reason`, `.fix`, `.framework_error` and `.predicted` (see the conversion).

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyKeyboardInterrupt, PyMemoryError, PyValueError};
use pyo3::prelude::*;

use crate::cuda::CudaError as CoreCudaError;
use crate::share::{Foreign, Stage};
use gpushare_core::Error;

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

/// Runs `f` without the GIL, giving it a `keep_waiting` callback that re-attaches to run Python's
/// signal handlers (the core calls it every 50 ms or so while it waits). If a handler raised
/// (Ctrl-C → KeyboardInterrupt), that exception is what the caller gets; otherwise `f`'s error,
/// converted by `to_pyerr` (usually [`to_pyerr`], the one conversion).
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
    m.add_function(wrap_pyfunction!(gpushare_error, m)?)?;
    Ok(())
}

/// `inspect`, explained as a share's failure is, to `gpushare._native.share`.
pub fn register_share(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(inspect_explained, m)?)
}

/// The core's error on its way to Python. The orphan rule forbids `From<Error> for PyErr` in this
/// crate (neither type is ours), so, as polars does with `PyPolarsErr`, the binding wraps it:
/// `.map_err(PyGpushareErr::from)?` turns any of the core's errors (`Error`, `CudaError`, `SharedError`,
/// `DlpackError`) into gpushare's exception, as does [`to_pyerr`].
#[derive(Debug)]
pub struct PyGpushareErr(pub Error);

impl<E: Into<Error>> From<E> for PyGpushareErr {
    fn from(error: E) -> Self {
        PyGpushareErr(error.into())
    }
}

/// Any of the core's errors as gpushare's exception: `.map_err(to_pyerr)`.
pub fn to_pyerr(error: impl Into<Error>) -> PyErr {
    PyErr::from(PyGpushareErr(error.into()))
}

/// The one conversion of the core's errors into gpushare's exceptions (polars' `PyPolarsErr`
/// model). Every gpushare exception carries, in one form, `reason` (why; the message itself where
/// there is nothing more to say), `fix` (or None), `framework_error` (the framework's own words, or
/// None) and `predicted` (the prediction, or None), and a framework's own exception as
/// `__cause__`. A `CudaError` also carries the CUDA `kind` ("unavailable", "driver", "no_context",
/// "invalid_argument", "internal") and the driver's `code` (or None). Bad arguments are Python's
/// `ValueError`, a host out of memory `MemoryError`, and Ctrl-C stays `KeyboardInterrupt`.
impl From<PyGpushareErr> for PyErr {
    fn from(PyGpushareErr(error): PyGpushareErr) -> PyErr {
        Python::attach(|py| {
            let predicted = error.predicted().cloned();
            let message = error.to_string();
            let mut reason = None;
            let mut fix = None;
            let mut framework_error = None;
            let mut origin = None;
            let mut cuda = None;
            let err = match error {
                Error::UnknownFramework(m) => UnknownFrameworkError::new_err(m),
                Error::FrameworkNotInstalled(m) => FrameworkNotInstalledError::new_err(m),
                Error::NotAnArray(m) => NotAnArrayError::new_err(m),
                Error::DLPack(m) => DLPackError::new_err(m),
                Error::Cuda(CoreCudaError::Interrupted) => return PyKeyboardInterrupt::new_err(message),
                Error::Cuda(e) => {
                    cuda = Some((cuda_kind(&e), e.driver_code()));
                    CudaError::new_err(message.clone())
                }
                Error::Worker(m) => WorkerError::new_err(m),
                Error::Other(m) => GpushareError::new_err(m),
                Error::Usage(m) => return PyValueError::new_err(m),
                Error::OutOfHostMemory(m) => return PyMemoryError::new_err(m),
                Error::UnsafeInput { reason: r, fix: f, framework_error: text, .. } => {
                    (reason, fix, framework_error) = (Some(r), Some(f), text);
                    UnsafeInputError::new_err(message.clone())
                }
                Error::PathNotApplicable { reason: r, fix: f, framework_error: text, .. } => {
                    (reason, fix, framework_error) = (r, f, text);
                    PathNotApplicableError::new_err(message.clone())
                }
                Error::Conversion { reason: r, fix: f, framework_error: text, origin: o, .. } => {
                    (reason, fix, framework_error, origin) = (Some(r), f, text, o);
                    ConversionError::new_err(message.clone())
                }
                Error::Framework { text, origin: o } => {
                    (reason, framework_error, origin) = (Some(text.clone()), Some(text), o);
                    ConversionError::new_err(message.clone())
                }
                // Raised by gpushare's own code (an adapter): the same exception, with the prediction.
                Error::Raised { origin, .. } => return with_prediction(py, foreign(origin), predicted),
                Error::Interrupted(origin) => return foreign(origin),
            };
            let value = err.value(py);
            // Setting attributes on a fresh exception instance cannot fail short of memory
            // exhaustion; the message carries the reason and the fix either way.
            let _ = value.setattr("reason", reason.unwrap_or(message));
            let _ = value.setattr("fix", fix);
            let _ = value.setattr("framework_error", framework_error);
            if let Some((kind, code)) = cuda {
                let _ = value.setattr("kind", kind);
                let _ = value.setattr("code", code);
            }
            if let Some(origin) = origin {
                err.set_cause(py, Some(foreign(origin)));
            }
            with_prediction(py, err, predicted)
        })
    }
}

/// The CUDA layer's word for what went wrong, as `CudaError.kind`.
fn cuda_kind(error: &CoreCudaError) -> &'static str {
    match error {
        CoreCudaError::Unavailable(_) => "unavailable",
        CoreCudaError::Driver { .. } => "driver",
        CoreCudaError::NoContext(_) => "no_context",
        CoreCudaError::InvalidArgument(_) => "invalid_argument",
        CoreCudaError::Interrupted => "interrupted",
        CoreCudaError::Internal(_) => "internal",
    }
}

/// `err` with `predicted` set where it is one of gpushare's exceptions: the prediction when there
/// is one, else None, except that an adapter's own error that no prediction reached keeps what it had.
fn with_prediction(py: Python<'_>, err: PyErr, predicted: Option<crate::explain::PredictedOutcome>) -> PyErr {
    let value = err.value(py);
    if !value.is_instance_of::<GpushareError>() {
        return err;
    }
    // A refusal gpushare's own check made before calling any framework (an adapter's source
    // check in a route) carries its own prediction, a failure by construction: the rules' guess for
    // the conversion it never reached would contradict it.
    let foreseen = value
        .getattr("predicted")
        .ok()
        .and_then(|p| p.cast_into::<super::explain::Prediction>().ok())
        .is_some_and(|p| p.get().verdict == crate::report::Verdict::Failed);
    if foreseen {
        return err;
    }
    match predicted.map(|p| Py::new(py, super::explain::Prediction::from_outcome(p))).transpose() {
        Ok(Some(p)) => {
            let _ = value.setattr("predicted", p);
        }
        Ok(None) if value.hasattr("predicted").unwrap_or(false) => {}
        Ok(None) => {
            let _ = value.setattr("predicted", py.None());
        }
        Err(e) => return e,
    }
    err
}

/// A Python exception carried through the core, back as itself.
fn foreign(origin: Foreign) -> PyErr {
    match origin.downcast::<PyErr>() {
        Ok(err) => *err,
        Err(other) => ConversionError::new_err(other.to_string()),
    }
}

/// A Python exception raised inside a pipeline step, classified for the core: gpushare's own
/// errors pass through (gaining the prediction), Ctrl-C and other non-`Exception`s pass through
/// untouched, and a framework's exception is explained.
pub fn share_error(py: Python<'_>, err: PyErr) -> Error {
    if err.is_instance_of::<GpushareError>(py) {
        Error::Raised { origin: Box::new(err), predicted: None }
    } else if !err.is_instance_of::<PyException>(py) {
        Error::Interrupted(Box::new(err))
    } else {
        let value = err.value(py);
        let kind = value.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "Exception".into());
        let text = value.str().map(|s| s.to_string()).unwrap_or_default();
        Error::Framework { text: format!("{kind}: {text}"), origin: Some(Box::new(err)) }
    }
}

/// The gpushare exception of kind `kind` ("conversion", "unsafe_input", "path_not_applicable",
/// "not_an_array", "unknown_framework", "framework_not_installed", "dlpack", "cuda", "no_cuda",
/// "worker", "gpushare"), for Python code to raise: made by the one conversion, so it reads as the
/// core's own. With `reason`, `message` names who refused and the text is the one form
/// "{message}: {reason}. Fix: {fix}"; without, `message` is the whole text.
#[pyfunction]
#[pyo3(signature = (kind, message, *, reason=None, fix=None, framework_error=None))]
pub fn gpushare_error<'py>(
    py: Python<'py>,
    kind: &str,
    message: String,
    reason: Option<String>,
    fix: Option<String>,
    framework_error: Option<String>,
) -> PyResult<Bound<'py, PyAny>> {
    let refusal = gpushare_core::error::Refusal { subject: message, reason, fix, framework_error };
    let error = Error::from_kind(kind, refusal).map_err(PyValueError::new_err)?;
    Ok(to_pyerr(error).into_value(py).into_bound(py).into_any())
}

/// `adapter.inspect(obj)`, its failure explained as every share's is (a framework's exception
/// becomes a ConversionError naming the inspection, with its reason and fix; gpushare's own and
/// Ctrl-C pass through).
#[pyfunction]
pub fn inspect_explained<'py>(py: Python<'py>, adapter: &Bound<'py, PyAny>, obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    adapter.call_method1("inspect", (obj,)).map_err(|err| {
        let name = adapter.getattr("name").and_then(|n| n.extract::<String>()).unwrap_or_default();
        // No target: an inspection of the array alone ("" names none).
        to_pyerr(share_error(py, err).explain(Stage::Inspect, &name, "", "inspect", None))
    })
}
