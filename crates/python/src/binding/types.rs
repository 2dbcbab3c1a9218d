//! The result classes: `TensorInfo`, `Timing`, `ShareResult`, and the table renderer.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyCapsuleMethods, PyDict};

use super::errors::to_pyerr;
use super::frames::shares_frame;
use super::json::json_to_py;
use crate::dlpack::{Layout, read_legacy, read_versioned};
use gpushare_core::Error;
use crate::explain;
use crate::render;
use crate::report::{MIME_TYPE, ShareReport, TensorReport, Verdict, envelope_text};
use crate::stats::Timing;

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

/// `json.loads(text)`: the Python objects of a report written as text by its own type (see
/// [`envelope_text`]), json's C parser making them.
fn loads<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
    static LOADS: pyo3::sync::PyOnceLock<Py<PyAny>> = pyo3::sync::PyOnceLock::new();
    LOADS.get_or_try_init(py, || py.import("json")?.getattr("loads").map(Bound::unbind))?.bind(py).call1((text,))
}

/// The JSON form's `data` as a dict, with the envelope's `schema` key added, so a `to_dict()` still
/// says which schema (`gpushare.<kind>/<N>`) it follows.
fn dict_with_schema<'py, T: serde::Serialize + ?Sized>(py: Python<'py>, kind: &str, data: &T) -> PyResult<Bound<'py, PyAny>> {
    let envelope = loads(py, &envelope_text(kind, data).map_err(json_error)?)?;
    let dict = envelope.get_item("data")?;
    dict.set_item("schema", envelope.get_item("schema")?)?;
    Ok(dict)
}

fn json_error(e: serde_json::Error) -> PyErr {
    PyTypeError::new_err(e.to_string())
}

/// Fills `report.cuda` with the driver's attributes of the data pointer when a driver is present:
/// memory type (device, page-locked or pageable host, managed), ordinal, owning context and
/// whether it is primary, allocation range and buffer id. Without CUDA it stays `None` ("n/a").
fn attach_cuda(report: &mut TensorReport) {
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
    /// Pointer attributes given by the caller (tests replay a GPU run's); otherwise the driver is asked.
    pub cuda: Option<serde_json::Value>,
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
    report.cuda = f.cuda.map(std::sync::Arc::new);
    attach_cuda(&mut report);
    Ok(report)
}


/// What one array is: framework, dtype, shape, strides (elements), devices, address and extent.
#[pyclass(module = "gpushare", frozen, name = "TensorInfo")]
pub struct TensorInfo {
    pub report: TensorReport,
}

#[pymethods]
impl TensorInfo {
    /// Reads a DLPack capsule (legacy or versioned) without consuming it.
    #[staticmethod]
    #[pyo3(signature = (capsule, framework, device, immutable=false, cuda_json=None))]
    fn from_capsule(
        capsule: &Bound<'_, PyAny>,
        framework: &str,
        device: &str,
        immutable: bool,
        cuda_json: Option<&str>,
    ) -> PyResult<TensorInfo> {
        let layout = layout_from_capsule(capsule)?;
        let mut report = TensorReport::from_layout(&layout, framework, device, immutable);
        if let Some(text) = cuda_json {
            report.cuda = Some(std::sync::Arc::new(serde_json::from_str(text).map_err(|e| PyTypeError::new_err(e.to_string()))?));
        }
        attach_cuda(&mut report);
        Ok(TensorInfo { report })
    }

    #[getter]
    fn framework(&self) -> &str {
        &self.report.framework
    }
    #[getter]
    fn dtype(&self) -> &str {
        &self.report.dtype
    }
    #[getter]
    fn shape(&self) -> Vec<i64> {
        self.report.shape.clone()
    }
    #[getter]
    fn strides(&self) -> Vec<i64> {
        self.report.strides.clone()
    }
    #[getter]
    fn device(&self) -> &str {
        &self.report.device
    }
    #[getter]
    fn dlpack_device(&self) -> (u32, i32) {
        self.report.dlpack_device
    }
    #[getter]
    fn data_ptr(&self) -> u64 {
        self.report.data_ptr
    }
    #[getter]
    fn byte_offset(&self) -> u64 {
        self.report.byte_offset
    }
    #[getter]
    fn nbytes(&self) -> u64 {
        self.report.nbytes
    }
    #[getter]
    fn span(&self) -> (u64, u64) {
        self.report.span
    }
    #[getter]
    fn contiguous(&self) -> bool {
        self.report.contiguous
    }
    #[getter]
    fn alignment(&self) -> u64 {
        self.report.alignment
    }
    #[getter]
    fn readonly(&self) -> bool {
        self.report.readonly
    }
    #[getter]
    fn dlpack_version(&self) -> Option<(u32, u32)> {
        self.report.dlpack_version
    }
    /// The CUDA driver's pointer attributes as a dict, or None without CUDA.
    #[getter]
    fn cuda<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.report.cuda.as_ref().map(|c| json_to_py(py, c)).transpose()
    }

    /// The JSON form's `data` as a dict, with its `schema` (`gpushare.tensor/1`).
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        dict_with_schema(py, "tensor", &self.report)
    }
    fn to_json(&self) -> PyResult<String> {
        envelope_text("tensor", &self.report).map_err(json_error)
    }
    fn __repr__(&self) -> String {
        render::tensor_text(&self.report)
    }
    fn _repr_html_(&self) -> String {
        render::tensor_html(&self.report)
    }
    #[pyo3(signature = (include=None, exclude=None))]
    fn _repr_mimebundle_<'py>(
        &self,
        py: Python<'py>,
        include: Option<Bound<'py, PyAny>>,
        exclude: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let _ = (include, exclude);
        let d = PyDict::new(py);
        d.set_item("text/plain", self.__repr__())?;
        d.set_item("text/html", self._repr_html_())?;
        d.set_item(MIME_TYPE, json_to_py(py, &serde_json::from_str::<serde_json::Value>(&self.to_json()?).unwrap_or_default())?)?;
        Ok(d)
    }

    /// Raises UnsafeInputError when the target framework must not be handed this tensor.
    #[pyo3(signature = (target, path="dlpack"))]
    fn refuse_for(&self, target: &str, path: &str) -> PyResult<()> {
        match explain::refuse(&self.report, target, path) {
            None => Ok(()),
            Some(r) => Err(to_pyerr(Error::UnsafeInput {
                subject: format!("{} → {}", self.report.framework, target),
                reason: r.reason,
                fix: r.fix,
                framework_error: None,
                predicted: None,
            })),
        }
    }
}

/// A TensorInfo from raw fields, for producers without DLPack (`__cuda_array_interface__`).
#[pyfunction]
#[pyo3(signature = (framework, device, ptr, shape, strides, code, bits, device_type, device_id, readonly, cuda_json=None, immutable=false))]
#[allow(clippy::too_many_arguments)]
pub fn tensor_info_from_fields(
    framework: &str,
    device: &str,
    ptr: u64,
    shape: Vec<i64>,
    strides: Option<Vec<i64>>,
    code: u8,
    bits: u8,
    device_type: u32,
    device_id: i32,
    readonly: bool,
    cuda_json: Option<&str>,
    immutable: bool,
) -> PyResult<TensorInfo> {
    let cuda = cuda_json.map(serde_json::from_str).transpose().map_err(|e| PyTypeError::new_err(e.to_string()))?;
    let report = report_from_fields(Fields {
        framework,
        device,
        ptr,
        shape,
        strides,
        code,
        bits,
        device_type,
        device_id,
        readonly,
        immutable,
        cuda,
    })?;
    Ok(TensorInfo { report })
}

/// Repeated timings of one operation: raw samples in seconds and their summary.
#[pyclass(module = "gpushare", frozen, name = "Timing")]
pub struct PyTiming {
    pub timing: Timing,
}

#[pymethods]
impl PyTiming {
    #[new]
    #[pyo3(signature = (samples, loops=1, device_median=None))]
    fn new(samples: Vec<f64>, loops: u64, device_median: Option<f64>) -> PyTiming {
        let mut timing = Timing::from_samples(samples, loops);
        timing.device_median = device_median;
        PyTiming { timing }
    }
    #[getter]
    fn median(&self) -> f64 {
        self.timing.median
    }
    #[getter]
    fn min(&self) -> f64 {
        self.timing.min
    }
    #[getter]
    fn max(&self) -> f64 {
        self.timing.max
    }
    #[getter]
    fn mean(&self) -> f64 {
        self.timing.mean
    }
    #[getter]
    fn iqr(&self) -> f64 {
        self.timing.iqr
    }
    #[getter]
    fn repeats(&self) -> usize {
        self.timing.repeats()
    }
    #[getter]
    fn loops(&self) -> u64 {
        self.timing.loops
    }
    #[getter]
    fn samples(&self) -> Vec<f64> {
        self.timing.samples.clone()
    }
    #[getter]
    fn device_median(&self) -> Option<f64> {
        self.timing.device_median
    }
    /// Device seconds per loop of each sample (CUDA events), or None.
    #[getter]
    fn device_samples(&self) -> Option<Vec<f64>> {
        self.timing.device_samples.clone()
    }
    /// Untimed runs before the samples.
    #[getter]
    fn warmup(&self) -> u64 {
        self.timing.warmup
    }
    /// True for one call timed once: there is no median or minimum to speak of.
    #[getter]
    fn single(&self) -> bool {
        self.timing.is_single()
    }
    /// A warning text when the spread makes the median untrustworthy, else None.
    #[getter]
    fn warning(&self) -> Option<String> {
        self.timing.noise_warning()
    }
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        json_to_py(py, &serde_json::to_value(&self.timing).map_err(|e| PyTypeError::new_err(e.to_string()))?)
    }
    fn __repr__(&self) -> String {
        let t = &self.timing;
        if t.is_single() {
            return format!("{} (1 sample: one call, timed once)", render::units::time(t.median));
        }
        format!(
            "{} median, {} min, IQR {} ({} repeats, {} loop{} each)",
            render::units::time(t.median),
            render::units::time(t.min),
            render::units::time(t.iqr),
            t.repeats(),
            t.loops,
            if t.loops == 1 { "" } else { "s" }
        )
    }
}

/// The outcome of one handoff: the converted `value`, source and target `TensorInfo`, the verdict
/// (`"shared"` only when the target's bytes lie inside the source's memory), the reason for a copy,
/// the path and the timing.
#[pyclass(module = "gpushare", frozen, name = "ShareResult")]
pub struct ShareResult {
    value: Py<PyAny>,
    source: Py<TensorInfo>,
    target: Py<TensorInfo>,
    /// Made on first access: most results are never asked for their timing object, and creating it
    /// eagerly cost every share a Python allocation.
    timing: pyo3::sync::PyOnceLock<Py<PyTiming>>,
    pub report: ShareReport,
}

impl ShareResult {
    /// Judges the handoff from the two descriptions and assembles the result.
    #[allow(clippy::too_many_arguments)]
    pub fn build(
        value: Py<PyAny>,
        source: Py<TensorInfo>,
        target: Py<TensorInfo>,
        path: String,
        timing: Timing,
        name: Option<String>,
        origin: Option<Py<TensorInfo>>,
        notes: Vec<String>,
        predicted: Option<crate::report::Prediction>,
        memory: Option<crate::report::MemoryLedger>,
        streams: Option<crate::report::StreamReport>,
    ) -> ShareResult {
        let (src, dst) = (&source.get().report, &target.get().report);
        let judgement = explain::judge_path(src, dst, &path);
        let shares_origin = origin.map(|o| explain::judge(&o.get().report, dst).verdict == Verdict::Shared);
        let mut all_notes = judgement.notes;
        all_notes.extend(notes);
        let report = ShareReport {
            name,
            path,
            source: src.clone(),
            target: dst.clone(),
            verdict: judgement.verdict,
            reason: judgement.reason,
            notes: all_notes,
            timing,
            shares_origin,
            predicted,
            memory,
            streams,
        };
        ShareResult { value, source, target, timing: pyo3::sync::PyOnceLock::new(), report }
    }

    /// The result of a share the pipeline ran and judged.
    pub fn from_outcome(
        value: Py<PyAny>,
        source: Py<TensorInfo>,
        target: Py<TensorInfo>,
        report: ShareReport,
    ) -> ShareResult {
        ShareResult { value, source, target, timing: pyo3::sync::PyOnceLock::new(), report }
    }
}

#[pymethods]
impl ShareResult {
    #[new]
    #[pyo3(signature = (value, source, target, path, samples, loops=1, name=None, origin=None, notes=None,
                        predicted=None, memory_json=None, streams_json=None, device_samples=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        value: Py<PyAny>,
        source: Py<TensorInfo>,
        target: Py<TensorInfo>,
        path: String,
        samples: Vec<f64>,
        loops: u64,
        name: Option<String>,
        origin: Option<Py<TensorInfo>>,
        notes: Option<Vec<String>>,
        predicted: Option<Bound<'_, PyAny>>,
        memory_json: Option<&str>,
        streams_json: Option<&str>,
        device_samples: Option<Vec<f64>>,
    ) -> PyResult<ShareResult> {
        let mut timing = Timing::from_samples(samples, loops);
        if let Some(device) = device_samples {
            timing.device_median = Some(Timing::from_samples(device, loops).median);
        }
        // Any sequence whose first two items are (verdict, reason): a Prediction carries more.
        let predicted = predicted.map(|p| super::explain::prediction_from_py(&p)).transpose()?;
        fn parse<T: serde::de::DeserializeOwned>(text: Option<&str>) -> PyResult<Option<T>> {
            text.map(|t| serde_json::from_str(t).map_err(|e| PyTypeError::new_err(e.to_string()))).transpose()
        }
        Ok(ShareResult::build(
            value,
            source,
            target,
            path,
            timing,
            name,
            origin,
            notes.unwrap_or_default(),
            predicted.map(|p| p.summary()),
            parse(memory_json)?,
            parse(streams_json)?,
        ))
    }

    #[getter]
    fn value(&self, py: Python<'_>) -> Py<PyAny> {
        self.value.clone_ref(py)
    }
    #[getter]
    fn source(&self, py: Python<'_>) -> Py<TensorInfo> {
        self.source.clone_ref(py)
    }
    #[getter]
    fn target(&self, py: Python<'_>) -> Py<TensorInfo> {
        self.target.clone_ref(py)
    }
    #[getter]
    fn timing(&self, py: Python<'_>) -> PyResult<Py<PyTiming>> {
        let timing = self.timing.get_or_try_init(py, || Py::new(py, PyTiming { timing: self.report.timing.clone() }))?;
        Ok(timing.clone_ref(py))
    }
    #[getter]
    fn verdict(&self) -> &'static str {
        self.report.verdict.as_str()
    }
    #[getter]
    fn shared(&self) -> bool {
        self.report.verdict == Verdict::Shared
    }
    #[getter]
    fn reason(&self) -> Option<&str> {
        self.report.reason.as_deref()
    }
    #[getter]
    fn notes(&self) -> Vec<String> {
        self.report.notes.clone()
    }
    /// The note that the target can write to memory the source holds read-only, if any: `share`
    /// turns it into a GpushareWarning (one call instead of copying every note to Python).
    #[getter]
    fn readonly_warning(&self) -> Option<&str> {
        self.report.notes.iter().map(String::as_str).find(|n| n.contains("read-only"))
    }
    #[getter]
    fn path(&self) -> &str {
        &self.report.path
    }
    #[getter]
    fn name(&self) -> Option<&str> {
        self.report.name.as_deref()
    }
    #[getter]
    fn shares_origin(&self) -> Option<bool> {
        self.report.shares_origin
    }
    /// `{"verdict", "reason"}` predicted before converting, or None.
    #[getter]
    fn prediction<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let Some(p) = &self.report.predicted else { return Ok(None) };
        Some(json_to_py(py, &serde_json::to_value(p).map_err(|e| PyTypeError::new_err(e.to_string()))?)).transpose()
    }
    /// True when what happened differs from the prediction.
    #[getter]
    fn unexpected(&self) -> bool {
        self.report.unexpected()
    }
    /// The CUDA memory ledger of this handoff, or None.
    #[getter]
    fn memory<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let value = self.report.memory.as_ref().map(serde_json::to_value).transpose().map_err(|e| PyTypeError::new_err(e.to_string()))?;
        value.map(|m| json_to_py(py, &m)).transpose()
    }
    /// Producer/consumer streams of the handoff, or None (CPU).
    #[getter]
    fn streams<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let value = self.report.streams.as_ref().map(serde_json::to_value).transpose().map_err(|e| PyTypeError::new_err(e.to_string()))?;
        value.map(|m| json_to_py(py, &m)).transpose()
    }

    /// The JSON form's `data` as a dict, with its `schema` (`gpushare.share/1`).
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        dict_with_schema(py, "share", &self.report)
    }
    fn to_json(&self) -> PyResult<String> {
        envelope_text("share", &self.report).map_err(json_error)
    }
    /// One tidy row: identifying columns first, raw seconds and bytes, integer counts.
    fn to_pandas<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        shares_frame(py, std::slice::from_ref(&self.report))
    }
    fn __repr__(&self) -> String {
        render::share_table_text(std::slice::from_ref(&self.report))
    }
    fn _repr_html_(&self) -> String {
        render::share_table_html(std::slice::from_ref(&self.report))
    }
    #[pyo3(signature = (include=None, exclude=None))]
    fn _repr_mimebundle_<'py>(
        &self,
        py: Python<'py>,
        include: Option<Bound<'py, PyAny>>,
        exclude: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let _ = (include, exclude);
        let d = PyDict::new(py);
        d.set_item("text/plain", self.__repr__())?;
        d.set_item("text/html", self._repr_html_())?;
        d.set_item(MIME_TYPE, loads(py, &envelope_text("share", &self.report).map_err(json_error)?)?)?;
        Ok(d)
    }
}

fn reports_of(results: &Bound<'_, PyAny>) -> PyResult<Vec<ShareReport>> {
    let mut out = Vec::new();
    for item in results.try_iter()? {
        let item = item?;
        let r = item.cast::<ShareResult>().map_err(|_| PyTypeError::new_err("expected ShareResult items"))?;
        out.push(r.get().report.clone());
    }
    Ok(out)
}

fn mimebundle<'py>(py: Python<'py>, reports: &[ShareReport]) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("text/plain", render::share_table_text(reports))?;
    d.set_item("text/html", render::share_table_html(reports))?;
    d.set_item(MIME_TYPE, loads(py, &envelope_text("shares", reports).map_err(json_error)?)?)?;
    Ok(d)
}

/// Renders a sequence of ShareResult as one table: `fmt` is "text" or "html".
#[pyfunction]
pub fn render_shares(results: &Bound<'_, PyAny>, fmt: &str) -> PyResult<String> {
    let reports = reports_of(results)?;
    match fmt {
        "text" => Ok(render::share_table_text(&reports)),
        "html" => Ok(render::share_table_html(&reports)),
        "json" => envelope_text("shares", &reports).map_err(json_error),
        other => Err(PyTypeError::new_err(format!("unknown format {other:?}: use text, html or json"))),
    }
}

/// A tidy pandas frame of a sequence of ShareResult (`ShareResults.to_pandas()`).
#[pyfunction]
pub fn shares_dataframe<'py>(py: Python<'py>, results: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    shares_frame(py, &reports_of(results)?)
}

/// The JSON Schema of a result kind's envelope (`tensor`, `share`, `shares`, `comparison`,
/// `benchmark`, `process-share`, `process-comparison`, `process-bench`), generated from the Rust types; the same text is shipped in `gpushare/schemas/`.
#[pyfunction]
pub fn json_schema<'py>(py: Python<'py>, kind: &str) -> PyResult<Bound<'py, PyAny>> {
    let schema = crate::schema::schema_for(kind).ok_or_else(|| {
        pyo3::exceptions::PyValueError::new_err(format!(
            "unknown result kind {kind:?}: use one of {}",
            crate::schema::KINDS.join(", ")
        ))
    })?;
    json_to_py(py, &schema)
}

/// `(reason, fix)` for a framework's error text when gpushare knows it, else None.
#[pyfunction]
pub fn explain_failure(error_text: &str) -> Option<(&'static str, &'static str)> {
    explain::explain_failure(error_text)
}

/// The mime bundle (text, HTML, gpushare JSON) for a sequence of ShareResult.
#[pyfunction]
pub fn shares_mimebundle<'py>(py: Python<'py>, results: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyDict>> {
    mimebundle(py, &reports_of(results)?)
}
