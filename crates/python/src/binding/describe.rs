//! How arrays are described without a call into their framework's Python: a DLPack capsule read
//! in place, the DLPack C exchange API (PyTorch), a versioned capsule (`describes_by_capsule`),
//! JAX's attributes, or raw fields (`__cuda_array_interface__`); each with the CUDA driver's
//! attributes of the data pointer.

use pyo3::exceptions::{PyAttributeError, PyRuntimeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyCapsule, PyCapsuleMethods, PyDict, PyString, PyTuple};

use super::errors::to_pyerr;
use super::tensor_info::TensorInfo;
use crate::dlpack::{Layout, read_legacy, read_versioned};
use gpushare_core::Error;
use crate::report::TensorReport;

/// Reads a DLPack capsule without consuming it: the name is left as it was, so the capsule's own
/// destructor still calls the producer's deleter and nothing leaks.
pub fn layout_from_capsule(capsule: &Bound<'_, PyAny>) -> PyResult<Layout> {
    let cap = capsule
        .cast::<PyCapsule>()
        .map_err(|_| to_pyerr(Error::DLPack(format!("expected a DLPack capsule, got {}", type_name(capsule)))))?;
    let result = if cap.is_valid_checked(Some(c"dltensor_versioned")) {
        let ptr = cap.pointer_checked(Some(c"dltensor_versioned"))?;
        // SAFETY: a capsule named "dltensor_versioned" holds a DLManagedTensorVersioned by the
        // DLPack contract, alive as long as the capsule, which we borrow for this call.
        unsafe { read_versioned(ptr.as_ptr().cast()) }
    } else if cap.is_valid_checked(Some(c"dltensor")) {
        let ptr = cap.pointer_checked(Some(c"dltensor"))?;
        // SAFETY: as above, for the legacy DLManagedTensor.
        unsafe { read_legacy(ptr.as_ptr().cast()) }
    } else {
        let name = cap.name().ok().flatten().map(|n| unsafe { n.as_cstr() }.to_string_lossy().into_owned());
        return Err(match name.as_deref() {
            Some(n) if n.starts_with("used_") => {
                to_pyerr(Error::DLPack("this DLPack capsule has already been consumed (each capsule can be imported once)".into()))
            }
            other => to_pyerr(Error::DLPack(format!("not a DLPack capsule (capsule name {other:?})"))),
        });
    };
    result.map_err(to_pyerr)
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into())
}

/// Fills `report.cuda` with the driver's attributes of the data pointer when a driver is present:
/// memory type (device, page-locked or pageable host, managed), ordinal, owning context and
/// whether it is primary, allocation range and buffer id. Without CUDA it stays `None` ("n/a").
pub fn attach_cuda(report: &mut TensorReport) {
    if report.cuda.is_some() || report.data_ptr == 0 {
        return;
    }
    // Device memory means CUDA is in use anyway; for host memory, ask only if the driver was
    // already probed: probing runs cuInit, after which forked children cannot use CUDA.
    let on_device = matches!(report.dlpack_device.0, 2 | 3 | 13);
    let status = if on_device { Some(crate::cuda::driver_status()) } else { crate::cuda::driver_status_if_probed() };
    if !matches!(status, Some(crate::cuda::DriverStatus::Available { .. })) {
        return;
    }
    // Inside a share, what the source's allocation already said answers for a target inside it.
    if let Some(known) = crate::cuda::known_attributes(report.data_ptr, report.dlpack_device.1) {
        report.cuda = Some(known);
        return;
    }
    report.cuda = crate::cuda::allocation_report(report.data_ptr);
}

/// Describes `obj` through its type's DLPack C exchange API (`api` is the
/// `__dlpack_c_exchange_api__` capsule of `type(obj)`, DLPack 1.3; PyTorch ships it): a direct C
/// call that fills a DLTensor on our stack, about 20 times cheaper than `__dlpack__`, with no
/// capsule and no ownership transfer; nothing is kept after return. The device is named as
/// PyTorch names it (`cpu`, `cuda:0`); the CUDA driver's attributes are attached.
pub fn exchange_api_report(
    py: Python<'_>,
    obj: &Bound<'_, PyAny>,
    api: &Bound<'_, PyAny>,
    framework: &str,
) -> PyResult<TensorReport> {
    let layout = exchange_api_layout(py, obj, api)?;
    Ok(report_in_dlpack_words(&layout, framework))
}

/// The layout of `obj` by its type's DLPack C exchange API (see [`exchange_api_report`]).
pub fn exchange_api_layout(py: Python<'_>, obj: &Bound<'_, PyAny>, api: &Bound<'_, PyAny>) -> PyResult<Layout> {
    let cap = api.cast::<PyCapsule>().map_err(|_| to_pyerr(Error::DLPack("expected a dlpack_exchange_api capsule".into())))?;
    let table = cap.pointer_checked(Some(c"dlpack_exchange_api"))?;
    // SAFETY: a capsule named "dlpack_exchange_api" holds a DLPackExchangeAPI that lives for the
    // whole process (DLPack 1.3); we only read its header and one function pointer.
    let table = unsafe { &*table.as_ptr().cast::<dlpark::ffi::DLPackExchangeAPI>() };
    let version = (table.header.version.major, table.header.version.minor);
    if version.0 != 1 {
        return Err(to_pyerr(Error::DLPack(format!("unsupported DLPack exchange API version {version:?}"))));
    }
    let fill = table
        .dltensor_from_py_object_no_sync
        .ok_or_else(|| to_pyerr(Error::DLPack("the exchange API has no dltensor_from_py_object_no_sync".into())))?;
    // SAFETY: DLTensor is plain old data; all-zero is a valid (empty) value the producer overwrites.
    let mut tensor: dlpark::ffi::DLTensor = unsafe { std::mem::zeroed() };
    // SAFETY: `obj` is of the type the table came from (the caller looked it up on type(obj)),
    // we hold the GIL, and `tensor` outlives the call.
    let rc = unsafe { fill(obj.as_ptr().cast(), &mut tensor) };
    if rc != 0 {
        return Err(PyErr::take(py).unwrap_or_else(|| to_pyerr(Error::DLPack("the producer could not describe the tensor".into()))));
    }
    // SAFETY: on success the producer filled shape/strides valid until we return to Python.
    unsafe { crate::dlpack::read_tensor(&tensor, 0, Some(version)) }
        .map_err(to_pyerr)
}

/// The layout of a DLPack capsule, or of an array whose type has the DLPack C exchange API (one C
/// call, no capsule): what gpushare's own copies read their source from.
pub fn layout_of_source(py: Python<'_>, source: &Bound<'_, PyAny>) -> PyResult<Layout> {
    if source.is_instance_of::<PyCapsule>() {
        return layout_from_capsule(source);
    }
    match source.get_type().getattr(pyo3::intern!(py, "__dlpack_c_exchange_api__")) {
        Ok(api) => exchange_api_layout(py, source, &api),
        Err(_) => Err(to_pyerr(Error::DLPack(format!(
            "expected a DLPack capsule or an array whose type has the DLPack C exchange API, got {}",
            type_name(source)
        )))),
    }
}

/// The report of a mutable array whose device is named in DLPack's own words (`cpu`, `cuda:0`),
/// with the CUDA attributes.
fn report_in_dlpack_words(layout: &Layout, framework: &str) -> TensorReport {
    let words = if layout.device_type == crate::dlpack::DEVICE_CPU {
        std::borrow::Cow::Borrowed("cpu")
    } else {
        std::borrow::Cow::Owned(format!("{}:{}", crate::dlpack::device_type_name(layout.device_type), layout.device_id))
    };
    let mut report = TensorReport::from_layout(layout, framework, &words, false);
    attach_cuda(&mut report);
    report
}

/// `obj.__dlpack__(max_version=(1, 0))` read into a report, for a framework whose adapter says its
/// arrays are described by that capsule alone (`describes_by_capsule`): what the adapter's
/// `inspect` would do, without the calls into Python around it.
pub fn versioned_capsule_report(py: Python<'_>, obj: &Bound<'_, PyAny>, framework: &str) -> PyResult<TensorReport> {
    static KWARGS: pyo3::sync::PyOnceLock<Py<PyDict>> = pyo3::sync::PyOnceLock::new();
    let kwargs = KWARGS.get_or_try_init(py, || -> PyResult<Py<PyDict>> {
        let kwargs = PyDict::new(py);
        kwargs.set_item("max_version", (1u32, 0u32))?;
        Ok(kwargs.unbind())
    })?;
    let capsule = obj.call_method(pyo3::intern!(py, "__dlpack__"), (), Some(kwargs.bind(py)))?;
    let layout = layout_from_capsule(&capsule)?;
    // Host and CUDA device memory only: the adapter names other kinds (managed memory) itself.
    if !matches!(layout.device_type, crate::dlpack::DEVICE_CPU | crate::dlpack::DEVICE_CUDA) {
        return Err(to_pyerr(Error::DLPack("described by the adapter".into())));
    }
    Ok(report_in_dlpack_words(&layout, framework))
}

/// The fields of an array described without DLPack (attributes, `__cuda_array_interface__`).
pub struct Fields<'a> {
    pub framework: &'a str,
    pub device: &'a str,
    pub ptr: u64,
    pub shape: Vec<i64>,
    /// In elements; `None` for row-major.
    pub strides: Option<Vec<i64>>,
    pub code: u8,
    pub bits: u8,
    pub device_type: u32,
    pub device_id: i32,
    pub readonly: bool,
    pub immutable: bool,
}

/// A report from raw fields, checked as a DLPack tensor would be, with the CUDA attributes.
pub fn report_from_fields(f: Fields<'_>) -> PyResult<TensorReport> {
    let explicit_strides = f.strides.is_some();
    let strides = f.strides.unwrap_or_else(|| crate::dlpack::compact_strides(&f.shape));
    if strides.len() != f.shape.len() {
        return Err(to_pyerr(Error::DLPack("strides and shape differ in length".into())));
    }
    let layout = crate::dlpack::layout_from_parts(crate::dlpack::LayoutParts {
        dtype: crate::dlpack::DType { code: f.code, bits: f.bits, lanes: 1 },
        shape: f.shape,
        strides,
        explicit_strides,
        device_type: f.device_type,
        device_id: f.device_id,
        base_ptr: f.ptr,
        byte_offset: 0,
        flags: if f.readonly { 1 } else { 0 },
        version: None,
    })
    .map_err(|e| to_pyerr(Error::DLPack(format!("invalid array description: {e}"))))?;
    let mut report = TensorReport::from_layout(&layout, f.framework, f.device, f.immutable);
    attach_cuda(&mut report);
    Ok(report)
}

/// PyTorch's route: the DLPack C exchange API of the tensor's type, one C call with no capsule.
/// `None` where it does not apply (no exchange API in this PyTorch, or a tensor that requires grad,
/// which only a detached capsule describes: the adapter's route).
pub fn torch_report(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<Option<TensorReport>> {
    let api = match obj.get_type().getattr(intern!(py, "__dlpack_c_exchange_api__")) {
        Ok(api) => api,
        Err(e) if e.is_instance_of::<PyAttributeError>(py) => return Ok(None),
        Err(e) => return Err(e),
    };
    if obj.getattr(intern!(py, "requires_grad"))?.is_truthy()? {
        return Ok(None);
    }
    exchange_api_report(py, obj, &api, "torch").map(Some)
}

// What JAX's attribute route has already worked out, keyed by Python objects that compare by value.
static JAX_DEVICES: PyOnceLock<Py<PyDict>> = PyOnceLock::new();
static JAX_LAYOUTS: PyOnceLock<Py<PyDict>> = PyOnceLock::new();
static JAX_DTYPES: PyOnceLock<Py<PyDict>> = PyOnceLock::new();

fn cache<'py>(py: Python<'py>, cell: &'static PyOnceLock<Py<PyDict>>) -> &'py Bound<'py, PyDict> {
    cell.get_or_init(py, || PyDict::new(py).unbind()).bind(py)
}

/// `cache[key]`, or `adapter.method(arg)` stored there.
fn cached<'py>(
    cell: &'static PyOnceLock<Py<PyDict>>,
    key: &Bound<'py, PyAny>,
    adapter: &Bound<'py, PyAny>,
    method: &Bound<'py, PyString>,
    arg: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let dict = cache(key.py(), cell);
    if let Some(value) = dict.get_item(key)? {
        return Ok(value);
    }
    let value = adapter.call_method1(method, (arg,))?;
    dict.set_item(key, &value)?;
    Ok(value)
}

/// JAX's route: JAX exports only legacy capsules and `__dlpack__` costs ~3 µs, but the same facts
/// are attributes of the array: the buffer address, shape, dtype and the layout's major-to-minor
/// order. What needs JAX's own knowledge (which platforms, which layouts and dtypes this route
/// describes) the adapter answers once per device, layout and dtype. `None` for anything unusual
/// (sharded arrays, tiled or sub-byte layouts, other platforms, extended dtypes): the DLPack route.
/// Checked against the DLPack route in tests/test_share.py.
pub fn jax_report(py: Python<'_>, obj: &Bound<'_, PyAny>, adapter: &Bound<'_, PyAny>) -> PyResult<Option<TensorReport>> {
    match jax_attributes(py, obj, adapter) {
        Err(e)
            if e.is_instance_of::<PyAttributeError>(py)
                || e.is_instance_of::<PyRuntimeError>(py)
                || e.is_instance_of::<PyValueError>(py) =>
        {
            Ok(None)
        }
        other => other,
    }
}

fn jax_attributes(py: Python<'_>, obj: &Bound<'_, PyAny>, adapter: &Bound<'_, PyAny>) -> PyResult<Option<TensorReport>> {
    // A deleted array (`x.delete()`) still answers `sharding`, but reading its `_pjrt_layout`
    // segfaults: such arrays go to the adapter, which raises the way JAX's own calls do.
    match obj.call_method0(intern!(py, "is_deleted")) {
        Ok(deleted) if deleted.is_truthy()? => return Ok(None),
        Ok(_) => {}
        // Not a jax.Array method here (a stand-in with the same attributes): nothing was freed.
        Err(e) if e.is_instance_of::<PyAttributeError>(py) => {}
        Err(e) => return Err(e),
    }
    let device = obj.getattr(intern!(py, "sharding"))?.getattr(intern!(py, "_device"))?;
    let words = cached(&JAX_DEVICES, &device, adapter, intern!(py, "_describe_device"), &device)?;
    if words.is_none() {
        return Ok(None);
    }
    let words = words.cast::<PyTuple>()?;
    let (device_code, device_id): (u32, i32) = (words.get_item(1)?.extract()?, words.get_item(2)?.extract()?);
    // The PjRt layout behind `obj.format.layout` (which costs ~1.2 µs) is hashable and compares by
    // value ("{1,0}"); an array without one (or with None, which would stand for every layout) asks
    // the adapter every time.
    let order = match obj.getattr(intern!(py, "_pjrt_layout")) {
        Ok(layout) if !layout.is_none() => cached(&JAX_LAYOUTS, &layout, adapter, intern!(py, "_layout_order"), obj)?,
        Ok(_) => adapter.call_method1(intern!(py, "_layout_order"), (obj,))?,
        Err(e) if e.is_instance_of::<PyAttributeError>(py) => adapter.call_method1(intern!(py, "_layout_order"), (obj,))?,
        Err(e) => return Err(e),
    };
    if order.is_none() {
        return Ok(None);
    }
    let dtype = obj.getattr(intern!(py, "dtype"))?;
    let code_bits = cached(&JAX_DTYPES, &dtype, adapter, intern!(py, "_dtype_code_bits"), &dtype)?;
    let code_bits = code_bits.cast::<PyTuple>()?;
    if code_bits.is_empty() {
        return Ok(None);
    }
    let (code, bits): (u8, u8) = (code_bits.get_item(0)?.extract()?, code_bits.get_item(1)?.extract()?);
    let shape: Vec<i64> = obj.getattr(intern!(py, "shape"))?.extract()?;
    let major_to_minor: Vec<usize> = order.extract()?;
    // () is row-major, for which the core computes compact strides itself; anything else is a
    // permuted layout (a view of a transposed torch tensor, say).
    let strides = if major_to_minor.is_empty() {
        None
    } else {
        if major_to_minor.len() != shape.len() || major_to_minor.iter().any(|&d| d >= shape.len()) {
            return Ok(None);
        }
        let mut strides = vec![0i64; shape.len()];
        let mut step = 1i64;
        for &dim in major_to_minor.iter().rev() {
            strides[dim] = step;
            step = step.saturating_mul(shape[dim].max(1));
        }
        Some(strides)
    };
    settle_jax(py, obj)?;
    let ptr: u64 = obj.call_method0(intern!(py, "unsafe_buffer_pointer"))?.extract()?;
    let device_words = words.get_item(0)?;
    let device_words = device_words.cast::<PyString>()?.to_cow()?;
    report_from_fields(Fields {
        framework: "jax",
        device: &device_words,
        ptr,
        shape,
        strides,
        code,
        bits,
        device_type: device_code,
        device_id,
        readonly: false,
        immutable: true,
    })
    .map(Some)
}

/// Waits, with the GIL released, for a JAX array still being computed (JAX's narrowing of a
/// 64-bit import), before anything that reads its buffer. `unsafe_buffer_pointer()` (and
/// `__dlpack__`) wait for the buffer holding the GIL, while the computation's end can need the GIL:
/// it releases the PyTorch tensor it read, whose DLPack deleter takes the GIL. That deadlocked
/// `%share i ->jax` on an int64 tensor on CPU, about one run in three. An array that is ready (a
/// view of the source) costs one `is_ready()`. The adapter's DLPack route waits the same way.
fn settle_jax(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<()> {
    match obj.call_method0(intern!(py, "is_ready")) {
        Ok(ready) if !ready.is_truthy()? => obj.call_method0(intern!(py, "block_until_ready")).map(drop),
        Ok(_) => Ok(()),
        // Not a jax.Array method here (a stand-in with the same attributes): nothing to wait for.
        Err(e) if e.is_instance_of::<PyAttributeError>(py) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Describes a PyTorch tensor through the DLPack C exchange API; None where that route does not apply.
#[pyfunction]
pub fn inspect_torch(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<Option<TensorInfo>> {
    Ok(torch_report(py, obj)?.map(|report| TensorInfo { report }))
}

/// Describes a JAX array from its attributes; None where that route does not apply. ``adapter``
/// answers ``_describe_device(device)``, ``_layout_order(array)`` and ``_dtype_code_bits(dtype)``.
#[pyfunction]
pub fn inspect_jax(py: Python<'_>, obj: &Bound<'_, PyAny>, adapter: &Bound<'_, PyAny>) -> PyResult<Option<TensorInfo>> {
    Ok(jax_report(py, obj, adapter)?.map(|report| TensorInfo { report }))
}
