//! `gpushare.SharedBuffer` and the transfer-path lab's bindings. Conversions only: the memory and
//! its copies are in `crate::shared`, the tables and the plot in `crate::render::{lab, plot}`.
//!
//! A SharedBuffer exports itself through `__dlpack__` with dlpark's `DlpackExporter`: a fresh
//! managed-tensor header per call whose manager context holds an `Arc` of the allocation, so every
//! framework that imported it keeps the memory alive, and the last one to let go frees it. A
//! consumer that asks with no `max_version` (TensorFlow's capsule route, older libraries) gets a
//! legacy capsule, anyone asking for DLPack ≥ 1.0 a versioned one.

use std::ffi::c_void;
use std::sync::Arc;

use dlpark::ffi::{DLDataType, DLDataTypeCode, DLDevice, DLDeviceType, DLManagedTensor, DLManagedTensorVersioned};
use dlpark::metadata::Dynamic;
use dlpark::python::{CudaStreamRequest, DlpackExporter, ExportRequest, export_dlpack};
use dlpark::{DlpackFlags, Managed, ManagedTensorBase};
use pyo3::exceptions::{PyAttributeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use super::describe::{layout_from_capsule, layout_of_source};
use super::errors::{interruptible, to_pyerr};
use crate::dlpack::{DType, compact_strides, is_c_contiguous};
use crate::shared::{self, Allocation, Device, Method};

/// A dtype given as a name (`"float32"`), a NumPy dtype or scalar type, or a torch dtype.
fn dtype_arg(obj: &Bound<'_, PyAny>) -> PyResult<DType> {
    let name: String = if let Ok(s) = obj.extract::<String>() {
        s
    } else if let Ok(s) = obj.getattr("name").and_then(|n| n.extract::<String>()) {
        s // numpy.dtype
    } else if let Ok(s) = obj.getattr("__name__").and_then(|n| n.extract::<String>()) {
        s // numpy.float32 and friends
    } else {
        obj.str()?.to_string() // torch.float32 → "torch.float32"
    };
    shared::parse_dtype(&name).map_err(to_pyerr)
}

fn shape_arg(obj: &Bound<'_, PyAny>) -> PyResult<Vec<i64>> {
    if let Ok(n) = obj.extract::<i64>() {
        return Ok(vec![n]);
    }
    obj.extract::<Vec<i64>>()
        .map_err(|_| PyTypeError::new_err("shape must be an int or a sequence of ints"))
}

fn device_arg(obj: &Bound<'_, PyAny>) -> PyResult<Device> {
    if let Ok(n) = obj.extract::<i32>() {
        return if n >= 0 { Ok(Device::Cuda(n)) } else { Err(PyValueError::new_err("a device ordinal is >= 0")) };
    }
    let text = obj.str()?.to_string(); // also torch.device("cuda:0")
    Device::parse(&text).map_err(to_pyerr)
}

/// Memory owned by gpushare — 256-byte-aligned host memory or CUDA device memory — handed to any
/// number of frameworks at once through DLPack, all of them viewing the same bytes.
///
/// ``SharedBuffer(shape, dtype="float32", device="cpu")`` allocates zeroed memory; ``device`` is
/// ``"cpu"``, ``"cuda"`` or ``"cuda:N"``. ``buf.to("torch")``, ``buf.to("jax")``, ``buf.to("tf")``
/// … give each framework a view; writes through one are seen by all. The memory is freed when the
/// buffer and every view of it are gone, in whatever order.
#[pyclass(module = "gpushare", frozen, name = "SharedBuffer")]
pub struct PySharedBuffer {
    alloc: Arc<Allocation>,
    shape: Vec<i64>,
    /// In elements.
    strides: Vec<i64>,
    /// Bytes from the start of the allocation to element 0.
    offset: u64,
    dtype: DType,
    /// Bytes spanned by the view.
    nbytes: u64,
}

/// What a move copies: an array's extent (`[start, end)` in bytes) and its view of it, strides
/// in elements.
pub(crate) struct Extent {
    pub span: (u64, u64),
    pub data_ptr: u64,
    pub shape: Vec<i64>,
    pub strides: Vec<i64>,
    pub dtype: DType,
}

impl PySharedBuffer {
    fn dl_device(&self) -> DLDevice {
        let (device_type, device_id) = self.alloc.device().dlpack();
        DLDevice { device_type: DLDeviceType(device_type), device_id }
    }

    fn data_addr(&self) -> u64 {
        self.alloc.ptr() + self.offset
    }

    fn numel(&self) -> i64 {
        self.shape.iter().product()
    }

    /// A fresh managed-tensor header whose context holds the allocation.
    fn managed<M: ManagedTensorBase>(&self) -> PyResult<Managed<M>> {
        let mut init = Dynamic::new(self.shape.clone(), self.strides.clone())
            .initialize_as::<M>(Arc::clone(&self.alloc))
            .map_err(|e| PyValueError::new_err(format!("cannot build the DLPack header: {e}")))?;
        // The element address goes into `data` with byte_offset 0, as PyTorch exports: some
        // consumers (XLA) refuse a non-zero byte_offset.
        init.set_data(self.data_addr() as usize as *mut c_void)
            .set_dtype(DLDataType { code: DLDataTypeCode(self.dtype.code), bits: self.dtype.bits, lanes: self.dtype.lanes })
            .set_device(self.dl_device())
            .set_byte_offset(0);
        // SAFETY: data points into the allocation that the header's context keeps alive; shape and
        // strides were copied into the header by the metadata builder (explicit strides); no flags
        // are set, and the memory is writable.
        Ok(unsafe { init.finish() })
    }

    /// A move of `extent` from `from` to `to` by `method`, queued on `stream`: the extent's bytes
    /// copied as they lie, the array's view of them (shape, strides, offset) kept. The GIL is
    /// released; Ctrl-C stops a staged copy between chunks.
    ///
    /// # Safety
    /// `extent` is an array on `from` that the caller keeps alive for this call; the copy is
    /// queued on its stream, which orders it after the array's writes.
    pub(crate) unsafe fn moved(py: Python<'_>, extent: Extent, from: Device, to: Device, method: Method, stream: u64) -> PyResult<PySharedBuffer> {
        let (start, end) = extent.span;
        let (alloc, _report) = interruptible(py, to_pyerr, move |keep_going| unsafe {
            shared::copy_to(start, (end - start) as usize, from, to, method, stream, keep_going)
        })?;
        let (shape, strides, dtype) = (extent.shape, extent.strides, extent.dtype);
        Ok(PySharedBuffer { alloc, shape, strides, offset: extent.data_ptr - start, dtype, nbytes: end - start })
    }

    fn from_layout(alloc: Arc<Allocation>, layout: &crate::dlpack::Layout, offset: u64) -> PySharedBuffer {
        PySharedBuffer {
            alloc,
            shape: layout.shape.clone(),
            strides: layout.strides.clone(),
            offset,
            dtype: layout.dtype,
            nbytes: layout.span_end - layout.span_start,
        }
    }
}

impl DlpackExporter for PySharedBuffer {
    fn device(&self) -> DLDevice {
        self.dl_device()
    }

    fn flags(&self) -> DlpackFlags {
        DlpackFlags::empty()
    }

    /// On the GPU a copy still queued on another stream is waited for before the consumer reads.
    fn prepare_export(&self, py: Python<'_>, request: &ExportRequest<'_>) -> PyResult<()> {
        if let Device::Cuda(_) = self.alloc.device() {
            let consumer = match request.cuda_stream()? {
                CudaStreamRequest::Omitted => None,
                CudaStreamRequest::NoSync => Some(shared::UNKNOWN_STREAM),
                CudaStreamRequest::LegacyDefault => Some(0),
                CudaStreamRequest::PerThreadDefault => Some(2),
                CudaStreamRequest::Pointer(p) => Some(p as u64),
            };
            let alloc = Arc::clone(&self.alloc);
            interruptible(py, to_pyerr, move |keep_going| alloc.ready_for(consumer, keep_going))?;
        }
        Ok(())
    }

    fn export_legacy(&self, _py: Python<'_>) -> PyResult<Managed<DLManagedTensor>> {
        self.managed()
    }

    fn export_versioned(&self, _py: Python<'_>) -> PyResult<Managed<DLManagedTensorVersioned>> {
        self.managed()
    }
}

#[pymethods]
impl PySharedBuffer {
    #[new]
    #[pyo3(signature = (shape, dtype = None, device = None))]
    fn new(
        py: Python<'_>,
        shape: &Bound<'_, PyAny>,
        dtype: Option<&Bound<'_, PyAny>>,
        device: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PySharedBuffer> {
        let shape = shape_arg(shape)?;
        let dtype = match dtype {
            Some(d) if !d.is_none() => dtype_arg(d)?,
            _ => shared::parse_dtype("float32").map_err(to_pyerr)?,
        };
        let device = match device {
            Some(d) if !d.is_none() => device_arg(d)?,
            _ => Device::Cpu,
        };
        let nbytes = shared::compact_nbytes(&shape, dtype.itemsize()).map_err(to_pyerr)?;
        let alloc = py.detach(|| Allocation::new(device, nbytes, true)).map_err(to_pyerr)?;
        let strides = compact_strides(&shape);
        Ok(PySharedBuffer { alloc, shape, strides, offset: 0, dtype, nbytes: nbytes as u64 })
    }

    /// The array-API export: a DLPack capsule viewing this memory (legacy without `max_version`,
    /// versioned for `max_version >= (1, 0)`). `copy=True` and other devices are refused: a
    /// SharedBuffer is only ever shared.
    #[pyo3(signature = (*, stream = None, max_version = None, dl_device = None, copy = None))]
    fn __dlpack__<'py>(
        &self,
        py: Python<'py>,
        stream: Option<Bound<'py, PyAny>>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(u32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Py<PyAny>> {
        let stream = stream.filter(|s| !s.is_none());
        export_dlpack(self, py, ExportRequest::parse(stream.as_ref(), max_version, dl_device, copy)?)
    }

    fn __dlpack_device__(&self) -> (u32, i32) {
        self.alloc.device().dlpack()
    }

    /// `__cuda_array_interface__` (version 3) for CUDA buffers, for Numba and CuPy.
    #[getter]
    fn __cuda_array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        if self.alloc.device() == Device::Cpu {
            return Err(PyAttributeError::new_err("a host SharedBuffer has no __cuda_array_interface__"));
        }
        let kind = match self.dtype.code {
            0 => 'i',
            1 => 'u',
            2 => 'f',
            5 => 'c',
            6 => 'b',
            _ => {
                return Err(PyAttributeError::new_err(format!(
                    "__cuda_array_interface__ has no type string for {}",
                    self.dtype.name()
                )));
            }
        };
        let d = PyDict::new(py);
        d.set_item("shape", PyTuple::new(py, &self.shape)?)?;
        d.set_item("typestr", format!("{}{kind}{}", if self.dtype.itemsize() == 1 { '|' } else { '<' }, self.dtype.itemsize()))?;
        d.set_item("data", (self.data_addr(), false))?;
        d.set_item("version", 3)?;
        if is_c_contiguous(&self.shape, &self.strides) {
            d.set_item("strides", py.None())?;
        } else {
            let item = self.dtype.itemsize() as i64;
            d.set_item("strides", PyTuple::new(py, self.strides.iter().map(|s| s * item))?)?;
        }
        // CAI: 1 is the legacy default stream; 0 is not allowed.
        let stream = self.alloc.pending_for_unknown_reader().map_err(to_pyerr)?.map(|s| if s == 0 { 1 } else { s });
        d.set_item("stream", stream)?;
        Ok(d)
    }

    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.shape)
    }

    /// Strides in elements.
    #[getter]
    fn strides<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.strides)
    }

    #[getter]
    fn dtype(&self) -> String {
        self.dtype.name()
    }

    /// `"cpu"` or `"cuda:N"`.
    #[getter]
    fn device(&self) -> String {
        self.alloc.device().name()
    }

    #[getter]
    fn dlpack_device(&self) -> (u32, i32) {
        self.alloc.device().dlpack()
    }

    /// Bytes the buffer spans.
    #[getter]
    fn nbytes(&self) -> u64 {
        self.nbytes
    }

    /// Address of element 0.
    #[getter]
    fn data_ptr(&self) -> u64 {
        self.data_addr()
    }

    #[getter]
    fn itemsize(&self) -> u64 {
        self.dtype.itemsize()
    }

    /// Number of elements.
    #[getter]
    fn size(&self) -> i64 {
        self.numel()
    }

    #[getter]
    fn ndim(&self) -> usize {
        self.shape.len()
    }

    /// Bytes of the whole allocation this buffer views.
    #[getter]
    fn allocation_nbytes(&self) -> usize {
        self.alloc.len()
    }

    /// A view of this memory in `framework` ("torch", "jax", "tf", "numpy", "cupy", "numba"): the
    /// framework's own import, which its adapter (Python) knows, through `gpushare.lab.buffer_to`.
    fn to<'py>(slf: &Bound<'py, Self>, framework: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        slf.py().import("gpushare.lab")?.getattr("buffer_to")?.call1((slf, framework))
    }

    fn __len__(&self) -> PyResult<usize> {
        self.shape
            .first()
            .map(|n| *n as usize)
            .ok_or_else(|| PyTypeError::new_err("len() of a 0-d SharedBuffer"))
    }

    fn __repr__(&self) -> String {
        let shape: Vec<String> = self.shape.iter().map(i64::to_string).collect();
        let shape = if shape.len() == 1 { format!("({},)", shape[0]) } else { format!("({})", shape.join(", ")) };
        format!(
            "SharedBuffer(shape={shape}, dtype={}, device={}, nbytes={}, data_ptr={:#x})",
            self.dtype.name(),
            self.alloc.device().name(),
            self.nbytes,
            self.data_addr()
        )
    }

    /// A new buffer holding a copy of the tensor a DLPack capsule describes (read, not consumed;
    /// or the array itself where its type has the DLPack C exchange API, which describes it in one
    /// C call without the stream handshake of `__dlpack__`),
    /// made by `method`: `"copy"` (device-to-device on the GPU, queued on `stream`; memcpy on the
    /// host), `"pinned"` (staged through page-locked host memory, waited for) or `"p2p"` (a peer
    /// copy to another GPU). `device` (`"cuda:1"`): where the copy goes; the source's own device
    /// when None. On the source's device the copy is compact (C-contiguous): broadcast, reversed
    /// and other strided layouts are gathered into row-major order, so every target accepts it. A
    /// move to another device copies the tensor's extent as it is, strides kept. The GIL is
    /// released; Ctrl-C stops a host copy between chunks.
    #[staticmethod]
    #[pyo3(signature = (capsule, method = "copy", stream = None, device = None))]
    fn _copy_of(
        py: Python<'_>,
        capsule: &Bound<'_, PyAny>,
        method: &str,
        stream: Option<u64>,
        device: Option<&str>,
    ) -> PyResult<PySharedBuffer> {
        let layout = layout_of_source(py, capsule)?;
        let source = Device::from_dlpack(layout.device_type, layout.device_id).map_err(to_pyerr)?;
        let to = match device {
            Some(name) => Device::parse(name).map_err(to_pyerr)?,
            None => source,
        };
        let method = Method::parse(method).map_err(to_pyerr)?;
        let stream = stream.unwrap_or(0);
        if to != source {
            let extent = Extent {
                span: (layout.span_start, layout.span_end),
                data_ptr: layout.data_ptr,
                shape: layout.shape,
                strides: layout.strides,
                dtype: layout.dtype,
            };
            // SAFETY: the extent is the tensor the capsule describes; the capsule, borrowed for
            // this call, keeps the producer's memory alive until the move is done (moves are
            // waited for).
            return unsafe { PySharedBuffer::moved(py, extent, source, to, method, stream) };
        }
        let (shape, strides) = (layout.shape.clone(), layout.strides.clone());
        let (data, span_start, span_len, itemsize) =
            (layout.data_ptr, layout.span_start, (layout.span_end - layout.span_start) as usize, layout.dtype.itemsize());
        // SAFETY: the layout is the tensor the capsule describes; the capsule, borrowed for this
        // call, keeps the producer's memory alive until the copy is queued (GPU; the source's stream
        // orders it before later writes) or done (host, pinned).
        let (alloc, _report) = interruptible(py, to_pyerr, move |keep_going| unsafe {
            let strided = shared::StridedSource { data, span_start, span_len, shape: &shape, strides: &strides, itemsize };
            shared::compact_copy_of(&strided, source, method, stream, keep_going)
        })?;
        let nbytes = alloc.len() as u64;
        let strides = compact_strides(&layout.shape);
        Ok(PySharedBuffer { alloc, shape: layout.shape, strides, offset: 0, dtype: layout.dtype, nbytes })
    }

    /// The SharedBuffer whose memory the tensor of a DLPack capsule views, with that tensor's
    /// layout, or None when gpushare does not own the memory.
    #[staticmethod]
    fn _of(capsule: &Bound<'_, PyAny>) -> PyResult<Option<PySharedBuffer>> {
        let layout = layout_from_capsule(capsule)?;
        let nbytes = layout.span_end - layout.span_start;
        if nbytes == 0 {
            return Ok(None);
        }
        let Some(alloc) = shared::owner_of(layout.span_start, nbytes) else { return Ok(None) };
        let device = Device::from_dlpack(layout.device_type, layout.device_id).ok();
        if device != Some(alloc.device()) {
            return Ok(None);
        }
        let offset = layout.data_ptr - alloc.ptr();
        Ok(Some(PySharedBuffer::from_layout(alloc, &layout, offset)))
    }
}

/// Allocations alive now: SharedBuffers and every tensor exported from one (pooled buffers waiting
/// for reuse are not counted). For tests that check memory outlives every consumer, and no longer.
#[pyfunction]
fn shared_buffers_alive() -> usize {
    shared::buffers_alive()
}

/// `(buffers, bytes)` kept for reuse by the `copy` and `pinned` paths.
#[pyfunction]
fn shared_pool_usage() -> (usize, usize) {
    shared::pool_usage()
}

/// ``(on_host, ordinal)`` of a device name: ``cpu``/``cpu:0`` → ``(True, 0)``, ``cuda:1``/``gpu:1`` →
/// ``(False, 1)``, ``cuda``/``gpu`` → ``(False, 0)``. The one parser of device names (the core's);
/// a name it does not know raises ``ValueError`` saying which names it knows.
#[pyfunction]
fn parse_device(name: &str) -> PyResult<(bool, i32)> {
    match Device::parse(name) {
        Ok(Device::Cpu) => Ok((true, 0)),
        Ok(Device::Cuda(n)) => Ok((false, n)),
        Err(e) => Err(PyValueError::new_err(e.to_string())),
    }
}

/// The name gpushare writes for a device, ``(True, 0)`` → ``cpu``, ``(False, 1)`` → ``cuda:1``: the
/// core's one formatter of device names.
#[pyfunction]
fn device_name(on_host: bool, ordinal: i32) -> String {
    if on_host { Device::Cpu } else { Device::Cuda(ordinal) }.name()
}

/// Bytes of a size as people write it (``"4KiB"``, ``"1.5 MB"``, ``"65536"``): the core's one parser
/// of sizes, which the command line reads them with too; ``ValueError`` saying how to write one.
#[pyfunction]
fn parse_size(text: &str) -> PyResult<u64> {
    crate::render::units::parse_size(text).map_err(PyValueError::new_err)
}

/// ``(source, targets)`` of a route: ``"torch->jax->tf"`` → ``("torch", ["jax", "tf"])``, ``"->jax"``
/// → ``(None, ["jax"])``, ``"torch→jax"`` as ``"torch->jax"``: the core's one parser of routes, which
/// the command line reads them with too; ``ValueError`` saying how to write one. The names are
/// not checked here (the adapters know which are frameworks).
#[pyfunction]
fn parse_route(text: &str) -> PyResult<(Option<String>, Vec<String>)> {
    let route = gpushare_core::route::Route::parse(text).map_err(PyValueError::new_err)?;
    Ok((route.source, route.targets))
}

/// A pair as gpushare writes it everywhere (``torch → jax``): the core's one formatter of routes,
/// which :func:`parse_route` reads back.
#[pyfunction]
fn route_label(source: &str, target: &str) -> String {
    gpushare_core::route::label(source, target)
}

/// Bytes in binary units as gpushare writes them everywhere (``4.00 KiB``, ``256 MiB``, ``512 B``);
/// ``signed=True`` writes a change (``+64 MiB``, ``-512 B``, ``±0 B``): the core's one formatter.
#[pyfunction]
#[pyo3(signature = (n, signed = false))]
fn format_bytes(n: i64, signed: bool) -> PyResult<String> {
    match (signed, u64::try_from(n)) {
        (true, _) => Ok(crate::render::units::signed_bytes(n)),
        (false, Ok(n)) => Ok(crate::render::units::bytes(n)),
        (false, Err(_)) => Err(PyValueError::new_err(format!("a size is not negative, got {n} bytes (signed=True writes a change)"))),
    }
}

/// A size as a label (a table's size column, a plot's tick): ``4 KiB``, ``1 MiB``, ``1.50 GiB``.
#[pyfunction]
fn size_label(n: u64) -> String {
    crate::render::units::size_label(n)
}

/// Frees the buffers the `copy` and `pinned` paths keep for reuse (waits for the device).
#[pyfunction]
fn shared_pool_clear(py: Python<'_>) {
    py.detach(shared::clear_pool);
}

/// Adds SharedBuffer and its pool's functions to `gpushare._native.share`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PySharedBuffer>()?;
    m.add_function(wrap_pyfunction!(shared_buffers_alive, m)?)?;
    m.add_function(wrap_pyfunction!(shared_pool_usage, m)?)?;
    m.add_function(wrap_pyfunction!(shared_pool_clear, m)?)?;
    Ok(())
}

/// Adds the one parser or formatter of each kind of word (devices, sizes, bytes, routes) to
/// `gpushare._native.text`.
pub fn register_text(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(parse_device, m)?)?;
    m.add_function(wrap_pyfunction!(device_name, m)?)?;
    m.add_function(wrap_pyfunction!(parse_size, m)?)?;
    m.add_function(wrap_pyfunction!(format_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(parse_route, m)?)?;
    m.add_function(wrap_pyfunction!(route_label, m)?)?;
    m.add_function(wrap_pyfunction!(size_label, m)?)?;
    // The arrows a route may be written with, for the magics to find which tokens a route spans.
    m.add("ARROWS", gpushare_core::route::ARROWS.to_vec())?;
    Ok(())
}
