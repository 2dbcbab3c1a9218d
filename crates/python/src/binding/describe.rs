//! Reading arrays without a call into their framework's Python: a DLPack capsule read in place,
//! the DLPack C exchange API, a versioned capsule, or raw fields (attributes,
//! `__cuda_array_interface__`); each with the CUDA driver's attributes of the data pointer. Which
//! of these describes an adapter's arrays the adapter declares (binding/declared.rs).

use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyCapsuleMethods, PyDict};

use super::errors::to_pyerr;
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
    crate::trace::mark("describe: the report", crate::trace::Kind::Own);
    report.cuda = crate::cuda::allocation_report(report.data_ptr);
    crate::trace::mark("describe: the driver's attributes", crate::trace::Kind::Driver);
}

/// The layout of `obj` by its type's DLPack C exchange API (`api` is the
/// `__dlpack_c_exchange_api__` capsule of `type(obj)`, DLPack 1.3): a direct C call that fills a
/// DLTensor on our stack, about 20 times cheaper than `__dlpack__`, with no capsule and no ownership
/// transfer; nothing is kept after return. It carries no flags: what gpushare's own copies read.
pub fn exchange_api_layout(py: Python<'_>, obj: &Bound<'_, PyAny>, api: &Bound<'_, PyAny>) -> PyResult<Layout> {
    let table = exchange_api_table(api)?;
    let version = (table.header.version.major, table.header.version.minor);
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

/// The DLPack C exchange API's table in `api`, checked for a major version we read.
fn exchange_api_table(api: &Bound<'_, PyAny>) -> PyResult<&'static dlpark::ffi::DLPackExchangeAPI> {
    let cap = api.cast::<PyCapsule>().map_err(|_| to_pyerr(Error::DLPack("expected a dlpack_exchange_api capsule".into())))?;
    let table = cap.pointer_checked(Some(c"dlpack_exchange_api"))?;
    // SAFETY: a capsule named "dlpack_exchange_api" holds a DLPackExchangeAPI that lives for the
    // whole process (DLPack 1.3); we only read its header and function pointers.
    let table = unsafe { &*table.as_ptr().cast::<dlpark::ffi::DLPackExchangeAPI>() };
    let version = (table.header.version.major, table.header.version.minor);
    if version.0 != 1 {
        return Err(to_pyerr(Error::DLPack(format!("unsupported DLPack exchange API version {version:?}"))));
    }
    Ok(table)
}

/// The layout of `obj` by its type's DLPack C exchange API with the producer's flags: a
/// `DLManagedTensorVersioned` made by one C call, read, and released at once through its
/// deleter. The bare DLTensor of [`exchange_api_layout`] carries no READ_ONLY flag, and a
/// read-only view (cuda.core's StridedMemoryView of a read-only NumPy array) would read as
/// writable; the managed tensor says so, for a few tens of nanoseconds more.
pub fn exchange_api_versioned_layout(py: Python<'_>, obj: &Bound<'_, PyAny>, api: &Bound<'_, PyAny>) -> PyResult<Layout> {
    let table = exchange_api_table(api)?;
    let export = table
        .managed_tensor_from_py_object_no_sync
        .ok_or_else(|| to_pyerr(Error::DLPack("the exchange API has no managed_tensor_from_py_object_no_sync".into())))?;
    let mut managed: *mut dlpark::ffi::DLManagedTensorVersioned = std::ptr::null_mut();
    // SAFETY: `obj` is of the type the table came from (the caller looked it up on type(obj)) and
    // we hold the GIL; on success `managed` is an owned tensor we release below.
    let rc = unsafe { export(obj.as_ptr().cast(), &mut managed) };
    if rc != 0 || managed.is_null() {
        return Err(PyErr::take(py).unwrap_or_else(|| to_pyerr(Error::DLPack("the producer could not describe the tensor".into()))));
    }
    // SAFETY: a non-null DLManagedTensorVersioned the producer just made, read before its deleter
    // runs; the deleter is called once, as DLPack asks of the tensor's owner.
    unsafe {
        let layout = read_versioned(managed.cast());
        if let Some(deleter) = (*managed).deleter {
            deleter(managed);
        }
        layout.map_err(to_pyerr)
    }
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

/// The report of an array whose device is named in DLPack's own words (`cpu`, `cuda:0`), with the
/// CUDA attributes; `immutable` for a framework whose arrays cannot be written.
pub fn report_in_dlpack_words(layout: Layout, framework: &str, immutable: bool) -> TensorReport {
    let words = if layout.device_type == crate::dlpack::DEVICE_CPU {
        std::borrow::Cow::Borrowed("cpu")
    } else {
        std::borrow::Cow::Owned(format!("{}:{}", crate::dlpack::device_type_name(layout.device_type), layout.device_id))
    };
    let mut report = TensorReport::from_owned_layout(layout, framework, &words, immutable);
    attach_cuda(&mut report);
    report
}

/// The layout of `obj.__dlpack__(max_version=(1, 0))`: what an adapter that declares
/// `describe_by = "capsule"` says its `inspect` reads, without the calls into Python around it.
pub fn versioned_capsule_layout(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<Layout> {
    static KWARGS: pyo3::sync::PyOnceLock<Py<PyDict>> = pyo3::sync::PyOnceLock::new();
    let kwargs = KWARGS.get_or_try_init(py, || -> PyResult<Py<PyDict>> {
        let kwargs = PyDict::new(py);
        kwargs.set_item("max_version", (1u32, 0u32))?;
        Ok(kwargs.unbind())
    })?;
    let capsule = obj.call_method(pyo3::intern!(py, "__dlpack__"), (), Some(kwargs.bind(py)))?;
    layout_from_capsule(&capsule)
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
    let mut report = TensorReport::from_owned_layout(layout, f.framework, f.device, f.immutable);
    attach_cuda(&mut report);
    Ok(report)
}
