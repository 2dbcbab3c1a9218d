//! The CUDA layer for Python: report functions that answer `None`/`[]` without CUDA, and the
//! transfer primitives of the `pinned` and `copy` paths. Conversions only; the logic is in
//! `crate::cuda`.
//!
//! Report functions (`driver_status`, `pointer_attributes`, `devices`, ...) treat a
//! missing driver as an answer, not an error. Everything that allocates or copies raises
//! `gpushare.exceptions.CudaError` (with `.kind` and `.code`) instead. Calls that can block release the
//! GIL; waits for the GPU honour Ctrl-C.
//!
//! This module holds what every part shares (stream arguments, serialised reports; errors go
//! through the binding's one conversion, `errors::to_pyerr`); [`reports`], [`transfers`], [`allocations`] and [`contexts`] hold the functions and classes.

mod allocations;
mod contexts;
mod reports;
mod transfers;

use std::sync::{Mutex, MutexGuard, PoisonError};

use pyo3::prelude::*;

use super::errors::to_pyerr;
pub(super) use super::forms::to_py;
use crate::cuda::{self, CudaError};

/// A report answer: `Ok(Some(..))`, `Ok(None)` when there is no CUDA, the error otherwise.
fn or_none<T>(result: cuda::Result<T>) -> PyResult<Option<T>> {
    match result {
        Ok(value) => Ok(Some(value)),
        Err(CudaError::Unavailable(_)) => Ok(None),
        Err(e) => Err(to_pyerr(e)),
    }
}

/// A stream argument: an int handle (0 = the legacy default stream), a torch stream
/// (`.cuda_stream`), a CuPy stream (`.ptr`), or None for 0.
fn stream_handle(stream: Option<&Bound<'_, PyAny>>) -> PyResult<u64> {
    let Some(obj) = stream else { return Ok(0) };
    if obj.is_none() {
        return Ok(0);
    }
    if let Ok(handle) = obj.extract::<u64>() {
        return Ok(handle);
    }
    for attribute in ["cuda_stream", "ptr"] {
        if let Ok(value) = obj.getattr(attribute)
            && let Ok(handle) = value.extract::<u64>()
        {
            return Ok(handle);
        }
    }
    Err(to_pyerr(CudaError::InvalidArgument(
        "stream must be an int handle, a torch.cuda.Stream (.cuda_stream) or a cupy Stream (.ptr)".into(),
    )))
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock was caught as an error already; the value is still usable.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The device an address lives on, for calls that need an ordinal and were not given one.
fn ordinal_of(ptr: u64) -> cuda::Result<i32> {
    let attributes = cuda::pointer_attributes(ptr)?;
    if attributes.device_ordinal < 0 {
        return Err(CudaError::InvalidArgument(format!(
            "{ptr:#x} is {} memory, not on a CUDA device",
            attributes.memory_type
        )));
    }
    Ok(attributes.device_ordinal)
}

/// Adds the CUDA functions and classes to `gpushare._native.cuda`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    reports::register(m)?;
    transfers::register(m)?;
    contexts::register(m)?;
    allocations::register(m)
}
