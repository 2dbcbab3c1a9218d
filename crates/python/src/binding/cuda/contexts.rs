//! What contexts cost and whether they share memory: the driver's answers behind
//! `gpushare.context_costs` (a meter of free device memory that needs no framework's context) and
//! `gpushare.context_access` (a kernel of the primary context on another context's memory, tried in
//! a process of its own).

use std::sync::Mutex;

use pyo3::prelude::*;

use super::{lock, to_py};
use crate::binding::errors::to_pyerr;
use crate::cuda::{self, CudaError};

/// Reads device `ordinal`'s free memory through a CUDA context of gpushare's own, pushed only for
/// each reading: the thread's current context and the primary context stay as they are (nothing is
/// activated). The meter's context costs device memory once, at creation, like any context.
#[pyclass(module = "gpushare", frozen, name = "MemoryMeter")]
pub struct PyMemoryMeter {
    inner: Mutex<Option<cuda::MemoryMeter>>,
    ordinal: i32,
    context: u64,
}

impl PyMemoryMeter {
    fn with<T>(&self, py: Python<'_>, f: impl FnOnce(&cuda::MemoryMeter) -> cuda::Result<T> + Send) -> PyResult<T>
    where
        T: Send,
    {
        let guard = lock(&self.inner);
        let Some(meter) = guard.as_ref() else {
            return Err(to_pyerr(CudaError::InvalidArgument("this MemoryMeter has been closed (close() was called)".into())));
        };
        py.detach(|| f(meter)).map_err(to_pyerr)
    }
}

#[pymethods]
impl PyMemoryMeter {
    #[new]
    #[pyo3(signature = (ordinal = 0))]
    fn new(py: Python<'_>, ordinal: i32) -> PyResult<Self> {
        let meter = py.detach(|| cuda::MemoryMeter::new(ordinal)).map_err(to_pyerr)?;
        Ok(PyMemoryMeter { ordinal, context: meter.context(), inner: Mutex::new(Some(meter)) })
    }

    #[getter]
    fn ordinal(&self) -> i32 {
        self.ordinal
    }

    /// The meter's own context (never the primary one, never left current).
    #[getter]
    fn context(&self) -> u64 {
        self.context
    }

    /// `(free, total)` bytes of the device now, every process and context counted.
    fn read(&self, py: Python<'_>) -> PyResult<(u64, u64)> {
        self.with(py, |m| m.read().map(|info| (info.free, info.total)))
    }

    /// What one more context of its own costs here: `{free_before, free_after, total}` around a
    /// `cuCtxCreate` (destroyed again at once).
    fn fresh_context_cost<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let step = self.with(py, |m| m.fresh_context_cost())?;
        to_py(py, &step)
    }

    #[getter]
    fn closed(&self) -> bool {
        lock(&self.inner).is_none()
    }

    /// Destroys the meter's context now. Idempotent.
    fn close(&self, py: Python<'_>) {
        let meter = lock(&self.inner).take();
        py.detach(move || drop(meter));
    }

    fn __repr__(&self) -> String {
        let state = if self.closed() { ", closed" } else { "" };
        format!("MemoryMeter(ordinal={}, context={:#x}{state})", self.ordinal, self.context)
    }
}

/// A kernel of gpushare's own, in device `ordinal`'s primary context, reads and then writes `nbytes`
/// bytes that a context of its own allocated, and a copy in the primary context reads them:
/// `{ordinal, memory_context, kernel_context, bytes, kernel_read, kernel_write, copy_read}`, each
/// access `{outcome: "exact" | "wrong bytes" | "failed" | "not tried", detail}`. A kernel that
/// faults leaves this process's primary context unusable: `gpushare.context_access` calls it in a
/// child process.
#[pyfunction]
#[pyo3(signature = (ordinal = 0, nbytes = 1 << 20))]
#[pyo3(name = "cross_context_access")]
fn cuda_cross_context_access(py: Python<'_>, ordinal: i32, nbytes: usize) -> PyResult<Bound<'_, PyAny>> {
    let answer = py.detach(|| cuda::cross_context_access(ordinal, nbytes)).map_err(to_pyerr)?;
    to_py(py, &answer)
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyMemoryMeter>()?;
    m.add_function(wrap_pyfunction!(cuda_cross_context_access, m)?)?;
    Ok(())
}
