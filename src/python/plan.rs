//! `SharePlan`: one share, run in Rust, and the describing routes that do not need `__dlpack__`.
//!
//! `gpushare.share` works out once per (array type, target, path) who the adapters are, how to
//! convert and how to predict; the plan then runs every later share of that kind. Keeping the steps
//! between the framework calls in Rust is what keeps gpushare's cost per share to a few
//! microseconds (issue 2's budget): the same steps in Python cost about as much as JAX's own import.
//! Everything framework-specific stays in the Python adapters, which the plan calls back.

use std::time::Instant;

use pyo3::exceptions::{PyAttributeError, PyRuntimeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyString, PyTuple};

use super::errors::{UnsafeInputError, with_fix};
use super::explain::{Prediction, Predictor, prediction_from_py};
use super::types::{Fields, ShareResult, TensorInfo, exchange_api_report, report_from_fields};
use crate::explain;
use crate::report::TensorReport;
use crate::stats::Timing;

/// PyTorch's route: the DLPack C exchange API of the tensor's type, one C call with no capsule.
/// `None` where it does not apply (no exchange API in this PyTorch, or a tensor that requires grad,
/// which only a detached capsule describes: the adapter's route).
fn torch_report(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<Option<TensorReport>> {
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
fn jax_report(py: Python<'_>, obj: &Bound<'_, PyAny>, adapter: &Bound<'_, PyAny>) -> PyResult<Option<TensorReport>> {
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
        cuda: None,
    })
    .map(Some)
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

/// How the plan describes one side's arrays.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Route {
    Torch,
    Jax,
    /// `adapter.inspect(obj)`.
    Adapter,
}

impl Route {
    fn of(name: &str) -> Route {
        match name {
            "torch" => Route::Torch,
            "jax" => Route::Jax,
            _ => Route::Adapter,
        }
    }
}

/// The prediction step: the Rust predictor, or any callable (tests stand in wrong rules).
enum PredictStep {
    Native(Py<Predictor>),
    Callable(Py<PyAny>),
}

/// One kind of share, planned: source and target adapters, the resolved path and its conversion,
/// the predictor, and two callbacks: ``on_error(stage, exception, prediction)`` returns the exception
/// to raise (stage ``"inspect"`` before the prediction, ``"refuse"`` or ``"convert"`` after), and
/// ``observe(source, target, obj, convert, path, source_info)`` returns the memory ledger and stream
/// report of one handoff of device memory as JSON texts.
#[pyclass(module = "gpushare", frozen, name = "SharePlan")]
pub struct SharePlan {
    source: Py<PyAny>,
    target: Py<PyAny>,
    source_route: Route,
    target_route: Route,
    target_name: String,
    check_source: bool,
    path: String,
    convert: Py<PyAny>,
    predict: Option<PredictStep>,
    on_error: Py<PyAny>,
    observe: Py<PyAny>,
}

impl SharePlan {
    /// The exception `on_error` makes of `err` at `stage`.
    fn fail(&self, py: Python<'_>, stage: &str, err: PyErr, predicted: Option<&Prediction>) -> PyErr {
        let predicted = match predicted.map(|p| Py::new(py, p.clone())).transpose() {
            Ok(p) => p,
            Err(e) => return e,
        };
        match self.on_error.call1(py, (stage, err.into_value(py), predicted)) {
            Ok(exc) => PyErr::from_value(exc.into_bound(py)),
            Err(e) => e,
        }
    }

    /// The description of `obj`, and whether the plan's own route made it (else the adapter's).
    fn describe(
        &self,
        py: Python<'_>,
        route: Route,
        adapter: &Py<PyAny>,
        obj: &Bound<'_, PyAny>,
    ) -> PyResult<(Py<TensorInfo>, bool)> {
        let fast = match route {
            Route::Torch => torch_report(py, obj)?,
            Route::Jax => jax_report(py, obj, adapter.bind(py))?,
            Route::Adapter => None,
        };
        match fast {
            Some(report) => Ok((Py::new(py, TensorInfo { report })?, true)),
            None => {
                let info = adapter.bind(py).call_method1(intern!(py, "inspect"), (obj,))?;
                Ok((info.cast_into::<TensorInfo>()?.unbind(), false))
            }
        }
    }

    fn predict(&self, py: Python<'_>, info: &Py<TensorInfo>) -> PyResult<Option<Prediction>> {
        match &self.predict {
            None => Ok(None),
            Some(PredictStep::Native(p)) => p.get().predict(py, &info.get().report).map(Some),
            Some(PredictStep::Callable(f)) => {
                let p = f.call1(py, (info.clone_ref(py),))?;
                if p.is_none(py) { Ok(None) } else { prediction_from_py(p.bind(py)).map(Some) }
            }
        }
    }
}

fn parse_json(text: Option<String>) -> PyResult<Option<serde_json::Value>> {
    text.map(|t| serde_json::from_str(&t).map_err(|e| pyo3::exceptions::PyTypeError::new_err(e.to_string())))
        .transpose()
}

#[pymethods]
impl SharePlan {
    #[new]
    #[pyo3(signature = (source, target, path, convert, predictor, on_error, observe, check_source=true))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        source: &Bound<'_, PyAny>,
        target: &Bound<'_, PyAny>,
        path: String,
        convert: Py<PyAny>,
        predictor: Option<&Bound<'_, PyAny>>,
        on_error: Py<PyAny>,
        observe: Py<PyAny>,
        check_source: bool,
    ) -> PyResult<SharePlan> {
        let py = source.py();
        let source_name: String = source.getattr(intern!(py, "name"))?.extract()?;
        let target_name: String = target.getattr(intern!(py, "name"))?.extract()?;
        let predict = predictor.map(|p| match p.cast::<Predictor>() {
            Ok(native) => PredictStep::Native(native.clone().unbind()),
            Err(_) => PredictStep::Callable(p.clone().unbind()),
        });
        Ok(SharePlan {
            source_route: Route::of(&source_name),
            target_route: Route::of(&target_name),
            source: source.clone().unbind(),
            target: target.clone().unbind(),
            target_name,
            check_source,
            path,
            convert,
            predict,
            on_error,
            observe,
        })
    }

    #[getter]
    fn path(&self) -> &str {
        &self.path
    }

    /// Shares ``obj``: describe it, check it, predict, refuse what would crash the target, convert
    /// ``repeat`` times ``number`` conversions (timed, synchronised at the sample edges for device
    /// memory), describe the result and judge it.
    #[pyo3(signature = (obj, repeat=1, number=1, name=None, origin=None))]
    fn run(
        &self,
        py: Python<'_>,
        obj: &Bound<'_, PyAny>,
        repeat: usize,
        number: usize,
        name: Option<String>,
        origin: Option<Py<TensorInfo>>,
    ) -> PyResult<ShareResult> {
        if repeat < 1 || number < 1 {
            return Err(PyValueError::new_err("repeat and number must be at least 1"));
        }
        let (source_info, fast) =
            self.describe(py, self.source_route, &self.source, obj).map_err(|e| self.fail(py, "inspect", e, None))?;
        // PyTorch's own route describes only tensors that do not require grad, which is all its
        // check_source checks; every other source asks its adapter (when it checks anything).
        let checked = fast && self.source_route == Route::Torch;
        if self.check_source && !checked {
            self.source.call_method1(py, intern!(py, "check_source"), (obj,)).map_err(|e| self.fail(py, "inspect", e, None))?;
        }
        let predicted = self.predict(py, &source_info).map_err(|e| self.fail(py, "inspect", e, None))?;
        let report = &source_info.get().report;
        // Crash-class inputs only: everything else the framework answers for itself.
        if let Some(r) = explain::refuse(report, &self.target_name) {
            let message = format!("{} → {}: {}. Fix: {}", report.framework, self.target_name, r.reason, r.fix);
            let err = with_fix::<UnsafeInputError>(py, message, &r.reason, &r.fix);
            return Err(self.fail(py, "refuse", err, predicted.as_ref()));
        }
        let on_device = report.dlpack_device.0 != 1;
        let convert_failed = |e: PyErr| self.fail(py, "convert", e, predicted.as_ref());
        let (mut memory, mut streams) = (None, None);
        if on_device {
            // One handoff outside the timing: it pays one-time costs, records the streams the
            // consumer asked for, and is the one the memory ledger measures.
            let observed = self
                .observe
                .call1(py, (&self.source, &self.target, obj, &self.convert, &self.path, source_info.clone_ref(py)))
                .map_err(convert_failed)?;
            let (m, s): (Option<String>, Option<String>) = observed.extract(py).map_err(convert_failed)?;
            memory = parse_json(m)?;
            streams = parse_json(s)?;
        }
        let convert = self.convert.bind(py);
        // Grown as it goes: reserving `repeat` up front would abort the process on `-r 10**12`.
        let mut samples = Vec::with_capacity(repeat.min(1024));
        let mut value = None;
        for _ in 0..repeat {
            if on_device {
                self.source.call_method1(py, intern!(py, "synchronize"), (obj,)).map_err(convert_failed)?;
            }
            let t0 = Instant::now();
            for _ in 0..number {
                value = Some(convert.call1((obj,)).map_err(convert_failed)?);
                // Ctrl-C between conversions, as a Python loop would allow (a flag test).
                py.check_signals()?;
            }
            let value = value.as_ref().expect("number >= 1");
            if on_device {
                self.target.call_method1(py, intern!(py, "synchronize"), (value,)).map_err(convert_failed)?;
            }
            samples.push(t0.elapsed().as_secs_f64() / number as f64);
        }
        let value = value.expect("repeat >= 1");
        let (target_info, _) = self.describe(py, self.target_route, &self.target, &value).map_err(convert_failed)?;
        Ok(ShareResult::build(
            value.unbind(),
            source_info,
            target_info,
            self.path.clone(),
            Timing::from_samples(samples, number as u64),
            name,
            origin,
            Vec::new(),
            predicted.map(|p| p.summary()),
            memory,
            streams,
        ))
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<SharePlan>()?;
    m.add_function(wrap_pyfunction!(inspect_torch, m)?)?;
    m.add_function(wrap_pyfunction!(inspect_jax, m)?)?;
    Ok(())
}
