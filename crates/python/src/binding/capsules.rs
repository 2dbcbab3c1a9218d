//! Legacy capsules made by gpushare for consumers that take nothing else (TensorFlow): a versioned
//! capsule forwarded as a legacy one, and a capsule over memory a Python object keeps alive
//! (a Numba device array, which has no DLPack export). The tensors are built by
//! `crate::dlpack::legacy`; this file only wraps them in capsules with DLPack's naming contract.

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyCapsuleMethods};

use super::errors::to_pyerr;
use gpushare_core::Error;
use crate::dlpack::legacy::{self, Described};
use dlpark::ffi::{DLManagedTensor, DLManagedTensorVersioned};

const LEGACY: &std::ffi::CStr = c"dltensor";
const VERSIONED: &std::ffi::CStr = c"dltensor_versioned";
const USED_VERSIONED: &std::ffi::CStr = c"used_dltensor_versioned";

/// Deletes a tensor whose capsule was never consumed; a consumer renames the capsule
/// (`"used_dltensor"`) when it takes the tensor over, and then deletes it itself.
unsafe extern "C" fn delete_unconsumed(capsule: *mut ffi::PyObject) {
    // SAFETY: called by Python with the capsule being destroyed; IsValid sets no error.
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, LEGACY.as_ptr()) == 1 {
            let managed = ffi::PyCapsule_GetPointer(capsule, LEGACY.as_ptr()).cast::<DLManagedTensor>();
            if let Some(deleter) = (*managed).deleter {
                deleter(managed);
            }
        }
    }
}

/// A `"dltensor"` capsule owning `managed`; on failure the tensor is deleted.
fn into_capsule(py: Python<'_>, managed: *mut DLManagedTensor) -> PyResult<Bound<'_, PyAny>> {
    // SAFETY: `managed` is a valid tensor we own; the capsule takes it over.
    let capsule = unsafe { ffi::PyCapsule_New(managed.cast(), LEGACY.as_ptr(), Some(delete_unconsumed)) };
    if capsule.is_null() {
        // SAFETY: not handed to anyone: deleted here, once.
        unsafe {
            if let Some(deleter) = (*managed).deleter {
                deleter(managed);
            }
        }
        return Err(PyErr::fetch(py));
    }
    // SAFETY: a new reference, just made.
    Ok(unsafe { Bound::from_owned_ptr(py, capsule) })
}

/// `capsule` as a legacy `"dltensor"` capsule: itself when it is one; a versioned capsule is
/// consumed (renamed `"used_dltensor_versioned"`) and its tensor forwarded, with no copy. The
/// versioned tensor's flags are not carried (a legacy tensor has none).
#[pyfunction]
pub fn legacy_capsule<'py>(py: Python<'py>, capsule: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let cap = capsule
        .cast::<PyCapsule>()
        .map_err(|_| to_pyerr(Error::DLPack("expected a DLPack capsule".into())))?;
    if cap.is_valid_checked(Some(LEGACY)) {
        return Ok(capsule.clone());
    }
    if !cap.is_valid_checked(Some(VERSIONED)) {
        // Reuses the reader's words for consumed and foreign capsules.
        super::describe::layout_from_capsule(capsule)?;
        return Err(to_pyerr(Error::DLPack("not a DLPack capsule".into())));
    }
    let versioned = cap.pointer_checked(Some(VERSIONED))?.as_ptr().cast::<DLManagedTensorVersioned>();
    // SAFETY: renaming a live capsule we hold; from now on its destructor leaves the tensor alone.
    if unsafe { ffi::PyCapsule_SetName(capsule.as_ptr(), USED_VERSIONED.as_ptr()) } != 0 {
        return Err(PyErr::fetch(py));
    }
    // SAFETY: a valid versioned tensor, unconsumed until the rename above, now ours.
    into_capsule(py, unsafe { legacy::legacy_of_versioned(versioned) })
}

/// A legacy capsule over `data_ptr` (shape, strides in elements, dtype code and bits, DLPack
/// device) that keeps `owner` alive until the consumer deletes the tensor.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn capsule_over<'py>(
    py: Python<'py>,
    owner: Py<PyAny>,
    data_ptr: u64,
    shape: Vec<i64>,
    strides: Vec<i64>,
    dtype_code: u8,
    bits: u8,
    device_type: u32,
    device_id: i32,
) -> PyResult<Bound<'py, PyAny>> {
    let described = Described { data: data_ptr, device_type, device_id, dtype_code, bits, shape, strides };
    // The consumer may delete the tensor on any thread, with or without the GIL, and after the
    // interpreter is gone: the owner is released under the GIL while Python lives, else leaked.
    let release: legacy::Release = Box::new(move || {
        // SAFETY: Py_IsInitialized may be called at any time.
        if unsafe { ffi::Py_IsInitialized() } != 0 {
            Python::attach(|_py| drop(owner));
        } else {
            std::mem::forget(owner);
        }
    });
    let managed = legacy::borrowed(described, release)
        .ok_or_else(|| to_pyerr(Error::DLPack("shape and strides differ in length".into())))?;
    into_capsule(py, managed)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(legacy_capsule, m)?)?;
    m.add_function(wrap_pyfunction!(capsule_over, m)?)?;
    Ok(())
}
