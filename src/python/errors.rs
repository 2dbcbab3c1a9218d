//! gpushare's one exception hierarchy, created here and re-exported by `gpushare.exceptions`.
//!
//! GpushareError
//! ├── UnknownFrameworkError      a framework name gpushare does not know (with a suggestion)
//! ├── FrameworkNotInstalledError the framework is known but cannot be imported here
//! ├── NotAnArrayError            the object is not an array of the named or any known framework
//! ├── DLPackError                a DLPack capsule that cannot be read
//! ├── CudaError                  the CUDA driver refused a call
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
    m.add("ConversionError", py.get_type::<ConversionError>())?;
    m.add("UnsafeInputError", py.get_type::<UnsafeInputError>())?;
    m.add("PathNotApplicableError", py.get_type::<PathNotApplicableError>())?;
    Ok(())
}
