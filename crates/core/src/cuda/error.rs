//! The one error type of the CUDA layer, and the conversion of driver result codes into it.

use std::any::Any;
use std::ffi::{CStr, c_char};
use std::panic::{AssertUnwindSafe, catch_unwind};

use cudarc::driver::sys;

/// Why a CUDA call did not give an answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CudaError {
    /// No usable driver here (no libcuda, no visible device, `cuInit` refused, ...). A normal state
    /// for callers who only want a report: show the reason and "n/a".
    #[error("no CUDA: {0}")]
    Unavailable(String),
    /// The driver answered a call with an error code.
    #[error("{call} failed: {name} ({code}): {description}")]
    Driver { call: &'static str, code: u32, name: String, description: String },
    /// The question needs a context on the device and none is active; answering would create one
    /// (hundreds of MiB of device memory, and the context flags later frameworks then inherit).
    #[error("{0}")]
    NoContext(String),
    /// The caller asked for something that cannot work (bad ordinal, zero size, range outside its allocation, ...).
    #[error("{0}")]
    InvalidArgument(String),
    /// A wait was cut short because the caller asked to stop (Ctrl-C in a notebook).
    #[error("interrupted while waiting for the GPU")]
    Interrupted,
    /// The binding itself failed (a panic caught at the boundary). A bug in gpushare, not the user's doing.
    #[error("internal error in the CUDA layer: {0}")]
    Internal(String),
}

impl CudaError {
    pub fn is_unavailable(&self) -> bool {
        matches!(self, CudaError::Unavailable(_))
    }

    /// The driver's `CUresult` code, when the driver refused the call.
    pub fn driver_code(&self) -> Option<u32> {
        match self {
            CudaError::Driver { code, .. } => Some(*code),
            _ => None,
        }
    }
}

pub type Result<T, E = CudaError> = std::result::Result<T, E>;

/// `CUresult` → `Result`. `call` is the driver entry point, so messages say which call failed.
pub(crate) fn check(call: &'static str, result: sys::CUresult) -> Result<()> {
    if result == sys::CUresult::CUDA_SUCCESS {
        return Ok(());
    }
    Err(CudaError::Driver {
        call,
        code: result as u32,
        name: format!("{result:?}"),
        description: error_description(result).unwrap_or_else(|| "no description".to_owned()),
    })
}

/// "CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected", for reasons built outside [`check`].
pub(crate) fn describe(result: sys::CUresult) -> String {
    match error_description(result) {
        Some(d) => format!("{result:?}: {d}"),
        None => format!("{result:?}"),
    }
}

fn error_description(result: sys::CUresult) -> Option<String> {
    let mut text: *const c_char = std::ptr::null();
    // SAFETY: cuGetErrorString stores a pointer to a static NUL-terminated string or fails; it is
    // among the symbols `driver_status` found before any call is made.
    let rc = unsafe { sys::cuGetErrorString(result, &mut text) };
    if rc != sys::CUresult::CUDA_SUCCESS || text.is_null() {
        return None;
    }
    // SAFETY: non-null, NUL-terminated, static (driver-owned) per the call's contract.
    Some(unsafe { CStr::from_ptr(text) }.to_string_lossy().into_owned())
}

pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_owned()
    }
}

/// Runs `f` only when the driver is usable, and turns a panic inside it into an error.
///
/// cudarc panics on a missing library or symbol; `driver_status` checks both up front, so a panic
/// here would be a bug, but it must still never cross into Python (where a pyo3 PanicException is a
/// BaseException that `except Exception` does not catch) or abort a kernel.
pub(crate) fn guarded<T>(f: impl FnOnce() -> Result<T>) -> Result<T> {
    super::status::require_driver()?;
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(payload) => Err(CudaError::Internal(panic_message(payload.as_ref()))),
    }
}

/// For `Drop`: run a release call, ignore its error (there is nobody to report it to; at interpreter
/// shutdown the driver may already be deinitialised) and never let a panic out of a destructor.
pub(crate) fn quietly(f: impl FnOnce() -> Result<()>) {
    let _ = catch_unwind(AssertUnwindSafe(f));
}
