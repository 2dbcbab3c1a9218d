//! The transfer primitives of the `copy` and `pinned` paths for Python: waiting for a stream or a
//! context, a checked device-to-device copy, staging through page-locked memory (a function and the
//! reusable `PinnedStager`), and device-time measurement (`EventTimer`). Without CUDA these raise
//! CudaError; waits honour Ctrl-C.

use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::binding::errors::interruptible;
use crate::binding::errors::to_pyerr;
use super::{lock, ordinal_of, stream_handle, to_py};
use crate::cuda::{self, Stream};

/// Waits for all work queued on `stream` (int handle or framework stream; 0 = legacy default
/// stream of device `ordinal`). Ctrl-C interrupts the wait.
#[pyfunction]
#[pyo3(signature = (stream = None, ordinal = 0))]
#[pyo3(name = "synchronize")]
fn cuda_synchronize(py: Python<'_>, stream: Option<&Bound<'_, PyAny>>, ordinal: i32) -> PyResult<()> {
    let stream = Stream::external(stream_handle(stream)?, ordinal);
    interruptible(py, to_pyerr, |keep_waiting| stream.wait_interruptibly(keep_waiting))
}

/// Waits for all work in device `ordinal`'s primary context (every framework's streams).
#[pyfunction]
#[pyo3(signature = (ordinal = 0))]
#[pyo3(name = "synchronize_context")]
fn cuda_synchronize_context(py: Python<'_>, ordinal: i32) -> PyResult<()> {
    py.detach(|| cuda::synchronize_context(ordinal)).map_err(to_pyerr)
}

/// Queues a device-to-device copy of `nbytes` from `src` to `dst` on `stream` (after checking with
/// the driver that both ranges are device memory inside their allocations and disjoint). With
/// `synchronize=True` waits for it. `ordinal` defaults to the source's device.
#[pyfunction]
#[pyo3(signature = (dst, src, nbytes, stream = None, ordinal = None, synchronize = false))]
fn copy_dtod(
    py: Python<'_>,
    dst: u64,
    src: u64,
    nbytes: usize,
    stream: Option<&Bound<'_, PyAny>>,
    ordinal: Option<i32>,
    synchronize: bool,
) -> PyResult<()> {
    let handle = stream_handle(stream)?;
    interruptible(py, to_pyerr, move |keep_waiting| {
        let ordinal = match ordinal {
            Some(o) => o,
            None => ordinal_of(src)?,
        };
        let stream = Stream::external(handle, ordinal);
        cuda::copy_dtod_checked(dst, src, nbytes, &stream)?;
        if synchronize { stream.wait_interruptibly(keep_waiting) } else { Ok(()) }
    })
}

/// One cached stager per (device, chunk size) for `stage_through_pinned`: page-locking 16 MiB costs
/// milliseconds, which would dwarf the copy being measured if paid on every call.
fn cached_stager(ordinal: i32, chunk_bytes: usize) -> cuda::Result<Arc<Mutex<cuda::PinnedStager>>> {
    type Cache = Vec<((i32, usize), Arc<Mutex<cuda::PinnedStager>>)>;
    static STAGERS: Mutex<Cache> = Mutex::new(Vec::new());
    let mut cache = lock(&STAGERS);
    if let Some((_, stager)) = cache.iter().find(|(key, _)| *key == (ordinal, chunk_bytes)) {
        return Ok(Arc::clone(stager));
    }
    let stager = Arc::new(Mutex::new(cuda::PinnedStager::new(ordinal, chunk_bytes)?));
    cache.push(((ordinal, chunk_bytes), Arc::clone(&stager)));
    Ok(stager)
}

fn stage_report<'py>(py: Python<'py>, report: &cuda::StageReport, wall_seconds: f64) -> PyResult<Bound<'py, PyAny>> {
    let value = to_py(py, report)?;
    value.set_item("wall_seconds", wall_seconds)?;
    Ok(value)
}

/// Copies `nbytes` from device address `src` to device address `dst` through page-locked host
/// memory, double-buffered (D→H of one chunk overlaps H→D of the previous), and waits. Returns
/// `{bytes, chunk_bytes, chunks, device_seconds, wall_seconds}`. Ordered after the work already
/// queued on `stream`; work queued on it afterwards sees `dst` complete.
#[pyfunction]
#[pyo3(signature = (src, dst, nbytes, stream = None, chunk_bytes = cuda::PinnedStager::DEFAULT_CHUNK_BYTES))]
fn stage_through_pinned<'py>(
    py: Python<'py>,
    src: u64,
    dst: u64,
    nbytes: usize,
    stream: Option<&Bound<'py, PyAny>>,
    chunk_bytes: usize,
) -> PyResult<Bound<'py, PyAny>> {
    let handle = stream_handle(stream)?;
    let started = std::time::Instant::now();
    let report = interruptible(py, to_pyerr, move |keep_waiting| {
        let ordinal = ordinal_of(src)?;
        let stager = cached_stager(ordinal, chunk_bytes)?;
        let mut stager = lock(&stager);
        stager.stage(src, dst, nbytes, &Stream::external(handle, ordinal), keep_waiting)
    })?;
    stage_report(py, &report, started.elapsed().as_secs_f64())
}

/// The `pinned` path as an object: a page-locked buffer of two chunks, a second stream and the
/// ordering events for device `ordinal`, reused across copies.
#[pyclass(module = "gpushare", frozen, name = "PinnedStager")]
pub struct PyPinnedStager {
    inner: Mutex<cuda::PinnedStager>,
    ordinal: i32,
    chunk_bytes: usize,
    pinned_ptr: u64,
    pinned_nbytes: usize,
}

#[pymethods]
impl PyPinnedStager {
    #[new]
    #[pyo3(signature = (chunk_bytes = cuda::PinnedStager::DEFAULT_CHUNK_BYTES, ordinal = 0))]
    fn new(py: Python<'_>, chunk_bytes: usize, ordinal: i32) -> PyResult<Self> {
        let stager = py.detach(|| cuda::PinnedStager::new(ordinal, chunk_bytes)).map_err(to_pyerr)?;
        Ok(PyPinnedStager {
            ordinal,
            chunk_bytes: stager.chunk_bytes(),
            pinned_ptr: stager.pinned_addr(),
            pinned_nbytes: stager.pinned_len(),
            inner: Mutex::new(stager),
        })
    }

    /// Copies and waits; returns `{bytes, chunk_bytes, chunks, device_seconds, wall_seconds}`.
    #[pyo3(signature = (src, dst, nbytes, stream = None))]
    fn stage<'py>(
        &self,
        py: Python<'py>,
        src: u64,
        dst: u64,
        nbytes: usize,
        stream: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let handle = stream_handle(stream)?;
        let (ordinal, inner) = (self.ordinal, &self.inner);
        let started = std::time::Instant::now();
        let report = interruptible(py, to_pyerr, move |keep_waiting| {
            lock(inner).stage(src, dst, nbytes, &Stream::external(handle, ordinal), keep_waiting)
        })?;
        stage_report(py, &report, started.elapsed().as_secs_f64())
    }

    #[getter]
    fn ordinal(&self) -> i32 {
        self.ordinal
    }

    #[getter]
    fn chunk_bytes(&self) -> usize {
        self.chunk_bytes
    }

    /// Host address of the page-locked buffer.
    #[getter]
    fn pinned_ptr(&self) -> u64 {
        self.pinned_ptr
    }

    #[getter]
    fn pinned_nbytes(&self) -> usize {
        self.pinned_nbytes
    }

    fn __repr__(&self) -> String {
        format!(
            "PinnedStager(ordinal={}, chunk_bytes={}, pinned_ptr={:#x}, pinned_nbytes={})",
            self.ordinal, self.chunk_bytes, self.pinned_ptr, self.pinned_nbytes
        )
    }
}

/// Device time between `start()` and `stop()` on a stream, by CUDA events: host overheads and
/// Python are not counted. Also a context manager: `with EventTimer(stream=s) as t: ...`, then
/// `t.elapsed_ms()`.
#[pyclass(module = "gpushare", frozen, name = "EventTimer")]
pub struct PyEventTimer {
    inner: Mutex<cuda::EventTimer>,
    ordinal: i32,
    stream: u64,
}

#[pymethods]
impl PyEventTimer {
    #[new]
    #[pyo3(signature = (ordinal = 0, stream = None))]
    fn new(py: Python<'_>, ordinal: i32, stream: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let stream = stream_handle(stream)?;
        let timer = py.detach(|| cuda::EventTimer::new(ordinal)).map_err(to_pyerr)?;
        Ok(PyEventTimer { inner: Mutex::new(timer), ordinal, stream })
    }

    /// Records the start event on `stream` (default: the timer's stream).
    #[pyo3(signature = (stream = None))]
    fn start(&self, stream: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let handle = match stream {
            Some(_) => stream_handle(stream)?,
            None => self.stream,
        };
        lock(&self.inner).start(&Stream::external(handle, self.ordinal)).map_err(to_pyerr)
    }

    /// Records the stop event on `stream` (default: the timer's stream).
    #[pyo3(signature = (stream = None))]
    fn stop(&self, stream: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let handle = match stream {
            Some(_) => stream_handle(stream)?,
            None => self.stream,
        };
        lock(&self.inner).stop(&Stream::external(handle, self.ordinal)).map_err(to_pyerr)
    }

    /// Milliseconds of device time between start and stop; waits for the stop event (Ctrl-C stops
    /// the wait).
    fn elapsed_ms(&self, py: Python<'_>) -> PyResult<f64> {
        let inner = &self.inner;
        interruptible(py, to_pyerr, move |keep_waiting| lock(inner).elapsed_ms_interruptibly(keep_waiting))
    }

    /// `elapsed_ms() / 1000`.
    fn elapsed_seconds(&self, py: Python<'_>) -> PyResult<f64> {
        Ok(self.elapsed_ms(py)? / 1e3)
    }

    fn __enter__(slf: Bound<'_, Self>) -> PyResult<Bound<'_, Self>> {
        slf.get().start(None)?;
        Ok(slf)
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, _exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        self.stop(None)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!("EventTimer(ordinal={}, stream={:#x})", self.ordinal, self.stream)
    }
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(cuda_synchronize, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_synchronize_context, m)?)?;
    m.add_function(wrap_pyfunction!(copy_dtod, m)?)?;
    m.add_function(wrap_pyfunction!(stage_through_pinned, m)?)?;
    m.add_class::<PyPinnedStager>()?;
    m.add_class::<PyEventTimer>()?;
    Ok(())
}
