//! CUDA IPC for Python (the `ipc` path across processes): conversions only; the logic is in
//! `crate::cuda::ipc`.

use std::sync::Mutex;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use super::errors::to_pyerr;
use crate::cuda::{self, CudaError};

/// Exports the CUDA allocation `[ptr, ptr + nbytes)` lies in: a dict with `handle` (64 bytes),
/// `base`, `size`, `offset`, `nbytes`, `ordinal`, `context`, `buffer_id`. Memory legacy IPC cannot
/// export (stream-ordered pools, VMM) raises `CudaError` (kind "invalid_argument") with the reason.
#[pyfunction]
#[pyo3(name = "ipc_export")]
fn cuda_ipc_export(py: Python<'_>, ptr: u64, nbytes: u64) -> PyResult<Bound<'_, PyDict>> {
    let export = py.detach(|| cuda::ipc_export(ptr, nbytes)).map_err(to_pyerr)?;
    let d = PyDict::new(py);
    d.set_item("handle", PyBytes::new(py, &export.handle))?;
    d.set_item("base", export.base)?;
    d.set_item("size", export.size)?;
    d.set_item("offset", export.offset)?;
    d.set_item("nbytes", export.nbytes)?;
    d.set_item("ordinal", export.ordinal)?;
    d.set_item("context", export.context)?;
    d.set_item("buffer_id", export.buffer_id)?;
    Ok(d)
}

/// Why legacy CUDA IPC cannot export the memory at `ptr`, or None when it can (or without CUDA,
/// where nothing can be said).
#[pyfunction]
#[pyo3(name = "ipc_refusal")]
fn cuda_ipc_refusal(py: Python<'_>, ptr: u64) -> Option<String> {
    py.detach(|| cuda::pointer_attributes(ptr).ok().and_then(|a| cuda::ipc_refusal(&a)))
}

/// Another process's allocation mapped into this one (`cuIpcOpenMemHandle`), in this process's
/// primary context of the device; unmapped at `close()` or when the object goes away.
#[pyclass(module = "gpushare", frozen, name = "IpcMapping")]
pub struct PyIpcMapping {
    inner: Mutex<Option<cuda::IpcMapping>>,
    base: u64,
    ptr: u64,
    size: u64,
    offset: u64,
    nbytes: u64,
    ordinal: i32,
    context: u64,
}

#[pymethods]
impl PyIpcMapping {
    #[new]
    #[pyo3(signature = (handle, ordinal, offset, nbytes))]
    fn new(py: Python<'_>, handle: Vec<u8>, ordinal: i32, offset: u64, nbytes: u64) -> PyResult<Self> {
        let mapping = py.detach(|| cuda::IpcMapping::open(&handle, ordinal, offset, nbytes)).map_err(to_pyerr)?;
        Ok(PyIpcMapping {
            base: mapping.base(),
            ptr: mapping.ptr(),
            size: mapping.size(),
            offset: mapping.offset(),
            nbytes: mapping.nbytes(),
            ordinal: mapping.ordinal(),
            context: mapping.context(),
            inner: Mutex::new(Some(mapping)),
        })
    }

    /// Where the allocation is mapped in this process.
    #[getter]
    fn base(&self) -> u64 {
        self.base
    }

    /// The array's address here: `base + offset`.
    #[getter]
    fn ptr(&self) -> PyResult<u64> {
        if self.closed() {
            return Err(to_pyerr(CudaError::InvalidArgument("this IpcMapping has been closed".into())));
        }
        Ok(self.ptr)
    }

    /// Size of the mapped allocation.
    #[getter]
    fn size(&self) -> u64 {
        self.size
    }

    #[getter]
    fn offset(&self) -> u64 {
        self.offset
    }

    #[getter]
    fn nbytes(&self) -> u64 {
        self.nbytes
    }

    #[getter]
    fn ordinal(&self) -> i32 {
        self.ordinal
    }

    /// The context the mapping lives in (this process's primary context of the device).
    #[getter]
    fn context(&self) -> u64 {
        self.context
    }

    #[getter]
    fn closed(&self) -> bool {
        self.inner.lock().map(|g| g.is_none()).unwrap_or(true)
    }

    /// Unmaps the allocation now. Idempotent. Views made of it must be gone first.
    fn close(&self, py: Python<'_>) {
        let mapping = self.inner.lock().ok().and_then(|mut g| g.take());
        py.detach(move || drop(mapping));
    }

    fn __repr__(&self) -> String {
        let state = if self.closed() { ", closed" } else { "" };
        format!(
            "IpcMapping(base={:#x}, offset={}, nbytes={}, size={}, ordinal={}{state})",
            self.base, self.offset, self.nbytes, self.size, self.ordinal
        )
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(cuda_ipc_export, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_ipc_refusal, m)?)?;
    m.add_class::<PyIpcMapping>()?;
    Ok(())
}
