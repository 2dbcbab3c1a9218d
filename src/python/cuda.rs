//! The CUDA layer for Python: report functions that answer `None`/`[]` without CUDA, and the
//! transfer primitives of the `pinned` and `copy` paths. Conversions only; the logic is in
//! `crate::cuda`.
//!
//! Report functions (`cuda_driver_status`, `cuda_pointer_attributes`, `cuda_devices`, ...) treat a
//! missing driver as an answer, not an error. Everything that allocates or copies raises
//! `gpushare.exceptions.CudaError` (with `.kind` and `.code`) instead. Calls that can block release the
//! GIL; waits for the GPU honour Ctrl-C.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use pyo3::exceptions::PyKeyboardInterrupt;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use serde::Serialize;

use super::errors::{CudaError as PyCudaError, interruptible};
use super::json::json_to_py;
use crate::cuda::{self, ContextPolicy, CudaError, Stream};

/// `CudaError` → `gpushare.exceptions.CudaError`, with `kind` ("unavailable", "driver",
/// "no_context", "invalid_argument", "internal") and `code` (the driver's `CUresult`, or None)
/// attributes. An interrupted wait becomes `KeyboardInterrupt`, as Ctrl-C anywhere else does.
pub fn to_pyerr(error: CudaError) -> PyErr {
    let kind = match &error {
        CudaError::Unavailable(_) => "unavailable",
        CudaError::Driver { .. } => "driver",
        CudaError::NoContext(_) => "no_context",
        CudaError::InvalidArgument(_) => "invalid_argument",
        CudaError::Interrupted => return PyKeyboardInterrupt::new_err(error.to_string()),
        CudaError::Internal(_) => "internal",
    };
    let err = PyCudaError::new_err(error.to_string());
    Python::attach(|py| {
        let value = err.value(py);
        // Setting attributes on a fresh exception cannot fail short of memory exhaustion; the
        // message carries everything anyway.
        let _ = value.setattr("kind", kind);
        let _ = value.setattr("code", error.driver_code());
    });
    err
}

/// Serialised data → Python objects (dicts, lists, ints, floats, str, bool, None), with the field
/// names of the JSON report.
fn to_py<'py, T: Serialize>(py: Python<'py>, value: &T) -> PyResult<Bound<'py, PyAny>> {
    let json = serde_json::to_value(value).map_err(|e| PyCudaError::new_err(format!("cannot convert: {e}")))?;
    json_to_py(py, &json)
}

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
    Err(PyCudaError::new_err(
        "stream must be an int handle, a torch.cuda.Stream (.cuda_stream) or a cupy Stream (.ptr)",
    ))
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

// ---------------------------------------------------------------------------------------------
// Reports: a missing driver is an answer.

/// The CUDA driver's state: `available`, `state`, `version` (13000), `version_string` ("13.0"),
/// `device_count`, `reason` (why not, or None), `visible_devices` (how CUDA_VISIBLE_DEVICES reads).
/// The first call probes the driver (`cuInit`).
#[pyfunction]
fn cuda_driver_status(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let status = py.detach(cuda::driver_status);
    let dict = PyDict::new(py);
    dict.set_item("available", status.is_available())?;
    dict.set_item("state", if status.is_available() { "available" } else { "unavailable" })?;
    dict.set_item(
        "version",
        match status {
            cuda::DriverStatus::Available { version, .. } => Some(*version),
            cuda::DriverStatus::Unavailable { .. } => None,
        },
    )?;
    dict.set_item("version_string", status.version_string())?;
    dict.set_item("device_count", status.device_count())?;
    dict.set_item("reason", status.reason())?;
    dict.set_item("visible_devices", to_py(py, &cuda::visible_devices())?)?;
    Ok(dict)
}

/// How CUDA reads `CUDA_VISIBLE_DEVICES` (no driver call): `raw`, `entries`, `ignored`, `hides_all`.
#[pyfunction]
fn cuda_visible_devices(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    to_py(py, &cuda::visible_devices())
}

/// The driver's attributes of an address (`memory_type`, `device_ordinal`, `context`,
/// `context_is_primary`, `range_start`, `range_size`, `buffer_id`, `is_managed`, `mempool`, ...),
/// or None without CUDA. Pageable host memory answers with `memory_type == "pageable_host"`.
#[pyfunction]
pub fn cuda_pointer_attributes(py: Python<'_>, ptr: u64) -> PyResult<Option<Bound<'_, PyAny>>> {
    match or_none(cuda::pointer_attributes(ptr))? {
        Some(attributes) => Ok(Some(to_py(py, &attributes)?)),
        None => Ok(None),
    }
}

/// Whether `[b_ptr, b_ptr + b_nbytes)` lies in the CUDA allocation of `a_ptr` (same buffer id, or
/// inside its range). None without CUDA; False for pageable host memory (the driver cannot say).
#[pyfunction]
fn cuda_same_allocation(a_ptr: u64, b_ptr: u64, b_nbytes: u64) -> PyResult<Option<bool>> {
    let answer = (|| {
        let a = cuda::pointer_attributes(a_ptr)?;
        let b = cuda::pointer_attributes(b_ptr)?;
        Ok(cuda::same_allocation_as(&a, &b, b_nbytes))
    })();
    or_none(answer)
}

/// Every visible device as a dict (`ordinal`, `name`, `uuid`, `pci_bus_id`, `compute_capability`,
/// `multiprocessor_count`, `total_memory`, `free_memory` (None when no context is active there),
/// `primary_context` {active, flags, handle}, `visible_as`, `memory_pools_supported`); [] without CUDA.
/// Creates no context.
#[pyfunction]
fn cuda_devices(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    let devices = or_none(py.detach(cuda::devices))?.unwrap_or_default();
    to_py(py, &devices)
}

/// `(free, total)` bytes of device `ordinal`, or None without CUDA or, unless `create_context`,
/// when no context is active on the device (asking would create one).
#[pyfunction]
#[pyo3(signature = (ordinal = 0, create_context = false))]
fn cuda_mem_info(py: Python<'_>, ordinal: i32, create_context: bool) -> PyResult<Option<(u64, u64)>> {
    let policy = if create_context { ContextPolicy::RetainPrimary } else { ContextPolicy::ExistingOnly };
    match py.detach(|| cuda::mem_info(ordinal, policy)) {
        Ok(info) => Ok(Some((info.free, info.total))),
        Err(CudaError::Unavailable(_) | CudaError::NoContext(_)) => Ok(None),
        Err(e) => Err(to_pyerr(e)),
    }
}

/// `matrix[i][j]`: device i can access device j's memory; [] without CUDA.
#[pyfunction]
fn cuda_peer_matrix(py: Python<'_>) -> PyResult<Vec<Vec<bool>>> {
    Ok(or_none(py.detach(cuda::peer_access_matrix))?.unwrap_or_default())
}

/// The driver's facts about device `a` reaching device `b`'s memory (`from`, `to`, `can_access`,
/// `performance_rank`, `native_atomics`, `cuda_array_access`); None without CUDA. Creates no context.
#[pyfunction]
fn cuda_peer_link(py: Python<'_>, a: i32, b: i32) -> PyResult<Option<Bound<'_, PyAny>>> {
    match or_none(cuda::peer_link(a, b))? {
        Some(link) => Ok(Some(to_py(py, &link)?)),
        None => Ok(None),
    }
}

/// Enables access from device `a`'s primary context to device `b`'s memory after checking
/// `cuDeviceCanAccessPeer`; returns whether this call enabled it (False: already on).
#[pyfunction]
fn cuda_enable_peer_access(py: Python<'_>, a: i32, b: i32) -> PyResult<bool> {
    py.detach(|| cuda::enable_peer_access(a, b)).map_err(to_pyerr)
}

/// The context current on the calling thread (`handle`, `device`, `is_primary`, `flags`), or None
/// (no CUDA, or no context current on this thread).
#[pyfunction]
fn cuda_current_context(py: Python<'_>) -> PyResult<Option<Bound<'_, PyAny>>> {
    match or_none(cuda::current_context())?.flatten() {
        Some(info) => Ok(Some(to_py(py, &info)?)),
        None => Ok(None),
    }
}

/// Device `ordinal`'s primary context (`active`, `flags`, `handle`) without activating it; None
/// without CUDA.
#[pyfunction]
#[pyo3(signature = (ordinal = 0))]
fn cuda_primary_context(py: Python<'_>, ordinal: i32) -> PyResult<Option<Bound<'_, PyAny>>> {
    match or_none(cuda::primary_context_state(ordinal))? {
        Some(state) => Ok(Some(to_py(py, &state)?)),
        None => Ok(None),
    }
}

// ---------------------------------------------------------------------------------------------
// Primitives: these raise CudaError without CUDA.

/// Waits for all work queued on `stream` (int handle or framework stream; 0 = legacy default
/// stream of device `ordinal`). Ctrl-C interrupts the wait.
#[pyfunction]
#[pyo3(signature = (stream = None, ordinal = 0))]
fn cuda_synchronize(py: Python<'_>, stream: Option<&Bound<'_, PyAny>>, ordinal: i32) -> PyResult<()> {
    let stream = Stream::external(stream_handle(stream)?, ordinal);
    interruptible(py, to_pyerr, |keep_waiting| stream.wait_interruptibly(keep_waiting))
}

/// Waits for all work in device `ordinal`'s primary context (every framework's streams).
#[pyfunction]
#[pyo3(signature = (ordinal = 0))]
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
                Ok(buffer)
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

/// Adds the CUDA functions and classes to `gpushare._native`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(cuda_driver_status, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_visible_devices, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_pointer_attributes, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_same_allocation, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_devices, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_mem_info, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_peer_matrix, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_peer_link, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_enable_peer_access, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_current_context, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_primary_context, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_synchronize, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_synchronize_context, m)?)?;
    m.add_function(wrap_pyfunction!(copy_dtod, m)?)?;
    m.add_function(wrap_pyfunction!(stage_through_pinned, m)?)?;
    m.add_class::<PyPinnedStager>()?;
    m.add_class::<PyEventTimer>()?;
    m.add_class::<PyDeviceAllocation>()?;
    m.add_class::<PyPrivateContextAllocation>()?;
    Ok(())
}
