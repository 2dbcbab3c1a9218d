//! Device memory as Python objects, for tests and demonstrations of what gpushare reports:
//! `DeviceAllocation` (in the device's primary context, as frameworks allocate) and
//! `PrivateContextAllocation` (in a context of its own, as some libraries allocate).

use std::sync::Mutex;

use pyo3::prelude::*;

use crate::binding::errors::to_pyerr;
use super::lock;
use crate::cuda::{self, CudaError};

/// Device memory owned by gpushare: `nbytes` bytes from `cuMemAlloc` in device `ordinal`'s primary
/// context (usable by every framework), freed when the object goes away or at `close()`.
#[pyclass(module = "gpushare", frozen, name = "DeviceAllocation")]
pub struct PyDeviceAllocation {
    inner: Mutex<Option<cuda::DeviceBuffer>>,
    ptr: u64,
    nbytes: usize,
    ordinal: i32,
    context: u64,
}

fn closed_error(what: &str) -> PyErr {
    to_pyerr(CudaError::InvalidArgument(format!("this {what} has been freed (close() was called)")))
}

#[pymethods]
impl PyDeviceAllocation {
    #[new]
    #[pyo3(signature = (nbytes, ordinal = 0, zero = false))]
    fn new(py: Python<'_>, nbytes: usize, ordinal: i32, zero: bool) -> PyResult<Self> {
        let buffer = py
            .detach(|| {
                let buffer = cuda::DeviceBuffer::new(ordinal, nbytes)?;
                if zero {
                    buffer.zero()?;
                }
                Ok::<_, CudaError>(buffer)
            })
            .map_err(to_pyerr)?;
        Ok(PyDeviceAllocation {
            ptr: buffer.ptr(),
            nbytes,
            ordinal,
            context: buffer.context(),
            inner: Mutex::new(Some(buffer)),
        })
    }

    /// Device address (0 for zero bytes).
    #[getter]
    fn ptr(&self) -> PyResult<u64> {
        if self.closed() { Err(closed_error("DeviceAllocation")) } else { Ok(self.ptr) }
    }

    #[getter]
    fn nbytes(&self) -> usize {
        self.nbytes
    }

    #[getter]
    fn ordinal(&self) -> i32 {
        self.ordinal
    }

    /// The context the memory belongs to (the device's primary context).
    #[getter]
    fn context(&self) -> u64 {
        self.context
    }

    #[getter]
    fn closed(&self) -> bool {
        lock(&self.inner).is_none()
    }

    /// Frees the memory now (waits for work still using it). Idempotent.
    fn close(&self, py: Python<'_>) {
        let buffer = lock(&self.inner).take();
        py.detach(move || drop(buffer));
    }

    fn __repr__(&self) -> String {
        let state = if self.closed() { ", closed" } else { "" };
        format!("DeviceAllocation(ptr={:#x}, nbytes={}, ordinal={}{state})", self.ptr, self.nbytes, self.ordinal)
    }
}

/// Device memory in a CUDA context of its own (not the primary context): what memory of a library
/// that creates its own context looks like. The thread's current context is left unchanged; the
/// memory is freed and the context destroyed when the object goes away or at `close()`.
#[pyclass(module = "gpushare", frozen, name = "PrivateContextAllocation")]
pub struct PyPrivateContextAllocation {
    inner: Mutex<Option<cuda::PrivateContextAllocation>>,
    ptr: u64,
    nbytes: usize,
    ordinal: i32,
    context: u64,
}

#[pymethods]
impl PyPrivateContextAllocation {
    #[new]
    #[pyo3(signature = (nbytes, ordinal = 0))]
    fn new(py: Python<'_>, nbytes: usize, ordinal: i32) -> PyResult<Self> {
        let allocation = py.detach(|| cuda::PrivateContextAllocation::new(ordinal, nbytes)).map_err(to_pyerr)?;
        Ok(PyPrivateContextAllocation {
            ptr: allocation.ptr(),
            nbytes,
            ordinal,
            context: allocation.context(),
            inner: Mutex::new(Some(allocation)),
        })
    }

    #[getter]
    fn ptr(&self) -> PyResult<u64> {
        if self.closed() { Err(closed_error("PrivateContextAllocation")) } else { Ok(self.ptr) }
    }

    #[getter]
    fn nbytes(&self) -> usize {
        self.nbytes
    }

    #[getter]
    fn ordinal(&self) -> i32 {
        self.ordinal
    }

    /// The private context's handle (differs from the device's primary context).
    #[getter]
    fn context(&self) -> u64 {
        self.context
    }

    #[getter]
    fn closed(&self) -> bool {
        lock(&self.inner).is_none()
    }

    /// Frees the memory and destroys the context now. Idempotent.
    fn close(&self, py: Python<'_>) {
        let allocation = lock(&self.inner).take();
        py.detach(move || drop(allocation));
    }

    fn __repr__(&self) -> String {
        let state = if self.closed() { ", closed" } else { "" };
        format!(
            "PrivateContextAllocation(ptr={:#x}, nbytes={}, ordinal={}, context={:#x}{state})",
            self.ptr, self.nbytes, self.ordinal, self.context
        )
    }
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyDeviceAllocation>()?;
    m.add_class::<PyPrivateContextAllocation>()?;
    Ok(())
}
