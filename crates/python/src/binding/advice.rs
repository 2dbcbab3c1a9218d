//! The cost model and `advise` (`crate::advice`) as Python objects. `gpushare.advice`
//! runs the calibration sweep and caches the model; everything that fits, predicts, decides and
//! renders is the core's.

use super::vocabulary::{PyPathKind, PyVerdict};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use super::forms::from_py;
use super::forms::to_py;
use crate::advice::advise::{Advice, AdviceRow, SizeRange};
use crate::advice::model::{CostKey, CostModel, Observation, Ordering, Prediction};
use crate::advice::producer::{self, Producer, WaitFacts};
use crate::render::advice as render;


fn ordering(name: &str) -> PyResult<Ordering> {
    Ok(match name {
        "device_event" => Ordering::DeviceEvent,
        "host_synchronise" => Ordering::HostSynchronise,
        "producer_wait" => Ordering::ProducerWait,
        "none" => Ordering::None,
        "unordered" => Ordering::Unordered,
        "consumer_orders" => Ordering::ConsumerOrders,
        _ => {
            return Err(PyValueError::new_err(format!(
                "unknown ordering {name:?}: device_event, host_synchronise, producer_wait or none"
            )));
        }
    })
}

/// How the handoff by `path` of `kind` is ordered against the producer's queued work, from `place`
/// (`cpu`, `cuda:N`, …) into a target that takes DLPack objects or not (`target_takes_objects`:
/// TensorFlow takes capsules alone, and gpushare waits before it): ``(name, words, ordered)``,
/// the `ordering` `predict` takes, the words a table gives per row, and whether the consumer is
/// guaranteed to read finished values (`crate::auto::orders_finished_values`).
#[pyfunction]
#[pyo3(signature = (kind, path, place, target_takes_objects = true, cai_orders = true))]
fn path_ordering(kind: PyPathKind, path: &str, place: &str, target_takes_objects: bool, cai_orders: bool) -> (String, String, bool) {
    let o = producer::ordering_of(kind.0, path, place.starts_with("cuda"), target_takes_objects, cai_orders);
    let name = serde_json::to_value(o).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
    (name, o.describe().to_string(), o != Ordering::Unordered)
}

/// Whether the host waits for all of the producer's queued work before the handoff by `path` of
/// `kind` from `place` (`cuda:0`, `cuda:0->cuda:1`, `cuda:0->cpu`, `cuda:0->process`) returns
/// (`crate::advice::producer::host_waits`): such a path costs at least that work when the producer
/// is busy. ``import_waits``: the target's DLPack import waits on the host (the adapter says).
#[pyfunction]
#[pyo3(signature = (kind, path, place, target_takes_objects = true, import_waits = false))]
fn path_waits(kind: PyPathKind, path: &str, place: &str, target_takes_objects: bool, import_waits: bool) -> bool {
    let facts = WaitFacts {
        on_device: place.starts_with("cuda"),
        target_takes_objects,
        target_import_waits: import_waits,
        to_host: place.ends_with("->cpu"),
    };
    producer::host_waits(kind.0, path, &facts)
}

/// Whether the CUDA stream ``stream`` (a raw handle; 0, 1, 2: the default streams of device
/// ``ordinal``) has work queued that has not finished (``cuStreamQuery``): True busy, False idle,
/// None where the driver cannot say (no CUDA). Asks, never waits: about a microsecond.
#[pyfunction]
#[pyo3(signature = (stream, ordinal = 0))]
#[pyo3(name = "stream_busy")]
fn cuda_stream_busy(stream: u64, ordinal: i32) -> Option<bool> {
    crate::cuda::Stream::external(stream, ordinal).is_done().ok().map(|done| !done)
}

/// A predicted time, with what it rests on.
#[pyclass(module = "gpushare", name = "CostPrediction", frozen)]
#[derive(Clone)]
pub struct PyPrediction {
    pub inner: Prediction,
}

#[pymethods]
impl PyPrediction {
    #[getter]
    fn seconds(&self) -> f64 {
        self.inner.seconds
    }
    #[getter]
    fn fixed(&self) -> f64 {
        self.inner.fixed
    }
    #[getter]
    fn bandwidth(&self) -> Option<f64> {
        self.inner.bandwidth
    }
    /// Bytes per second this array is predicted to move at (its bytes over the predicted time,
    /// less any wait for queued work); ``bandwidth`` is the line's per-byte term.
    #[getter]
    fn rate(&self) -> Option<f64> {
        self.inner.rate
    }
    #[getter]
    fn bound(&self) -> &str {
        &self.inner.bound
    }
    #[getter]
    fn tolerance(&self) -> f64 {
        self.inner.tolerance
    }
    #[getter]
    fn extrapolated(&self) -> bool {
        self.inner.extrapolated
    }
    /// The calibrated size an extrapolated prediction is carried on from (None: inside the sweep).
    #[getter]
    fn extrapolated_from(&self) -> Option<u64> {
        self.inner.extrapolated_from
    }
    /// Why this prediction gives no number to hold the path to (its stated error reaches 100 %),
    /// in words; None where ``seconds`` is predicted within ``tolerance``.
    #[getter]
    fn unpredictable(&self) -> Option<&str> {
        self.inner.unpredictable.as_deref()
    }
    #[getter]
    fn waits_for_queue(&self) -> f64 {
        self.inner.waits_for_queue
    }
    /// Seconds added for making the array's device current for the handoff and the previous one
    /// current again after (0: no switch, or none measured).
    #[getter]
    fn device_switch(&self) -> f64 {
        self.inner.device_switch
    }
    /// How much slower than at calibration the host ran when this was predicted (the fixed cost
    /// is scaled by it); None where the host's speed was not measured.
    #[getter]
    fn host_slowdown(&self) -> Option<f64> {
        self.inner.host_slowdown
    }
    /// Whether ``measured`` seconds lie further from this prediction than the model's stated error.
    fn misses(&self, measured: f64) -> bool {
        self.inner.misses(measured)
    }
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.inner)
    }
    /// A field of the JSON form by name, for code written against the dict a table's row held.
    fn __getitem__<'py>(&self, py: Python<'py>, key: &str) -> PyResult<Bound<'py, PyAny>> {
        self.to_dict(py)?.get_item(key)
    }
    fn __repr__(&self) -> String {
        if let Some(words) = &self.inner.unpredictable {
            return format!("no prediction ({words})");
        }
        let from = match self.inner.extrapolated_from {
            Some(from) => format!(", extrapolated from {}", crate::render::units::bytes(from)),
            None => String::new(),
        };
        format!(
            "{} predicted ({} ±{:.0}%{from})",
            crate::render::units::time(self.inner.seconds),
            self.inner.bound,
            self.inner.tolerance * 100.0,
        )
    }
}

/// The cost model of this machine: each calibrated path's ``fixed + bytes / bandwidth``.
#[pyclass(module = "gpushare", name = "CostModel")]
pub struct PyCostModel {
    pub(crate) inner: CostModel,
}

fn key(kind: PyPathKind, path: &str, source: &str, target: &str, place: &str) -> CostKey {
    CostKey { kind: kind.0, path: path.into(), source: source.into(), target: target.into(), place: place.into() }
}

#[pymethods]
impl PyCostModel {
    /// An empty model for the machine ``machine`` describes (devices, driver, versions).
    #[new]
    #[pyo3(signature = (machine, created = 0.0))]
    fn new(machine: &Bound<'_, PyAny>, created: f64) -> PyResult<Self> {
        Ok(PyCostModel { inner: CostModel::new(from_py::<serde_json::Value>(machine)?, created) })
    }

    /// The model as its cache file holds it; ValueError when the text is not a model, or holds a
    /// number or verdict no calibration makes (``CostModel::problem`` in the core).
    #[staticmethod]
    fn from_json(text: &str) -> PyResult<Self> {
        let inner: CostModel =
            serde_json::from_str(text).map_err(|e| PyValueError::new_err(format!("not a gpushare cost model: {e}")))?;
        match inner.problem() {
            Some(why) => Err(PyValueError::new_err(format!("not a usable gpushare cost model: {why}"))),
            None => Ok(PyCostModel { inner }),
        }
    }

    /// The text of its cache file.
    fn to_json(&self) -> PyResult<String> {
        serde_json::to_string(&self.inner).map_err(|e| PyValueError::new_err(e.to_string()))
    }

    /// Fits ``points`` (``(bytes, seconds)``, at least three sizes) for one path; False when they
    /// cannot be fitted.
    /// ``shares``: whether the path shared the source's memory at every size of the sweep.
    /// ``host_speeds``: the host's speed measured with each point (``gpushare.advice.host_speed``),
    /// which the fit takes out of the fixed cost and ``predict`` puts back.
    /// ``ceiling``: bytes per second of the slowest resource the path's copy crosses at the
    /// largest size measured (``gpushare.ceilings().bound(...)``): past the sweep the fit costs no
    /// less per byte than that.
    #[pyo3(signature = (kind, path, source, target, place, points, shares = None, host_speeds = None, ceiling = None))]
    #[allow(clippy::too_many_arguments)]
    fn add(
        &mut self,
        kind: PyPathKind,
        path: &str,
        source: &str,
        target: &str,
        place: &str,
        points: Vec<(u64, f64)>,
        shares: Option<bool>,
        host_speeds: Option<Vec<f64>>,
        ceiling: Option<f64>,
    ) -> bool {
        let points = points.into_iter().map(|(bytes, seconds)| Observation { bytes, seconds }).collect();
        let key = key(kind, path, source, target, place);
        let added = self.inner.add_measured(&key, points, host_speeds, shares);
        if added {
            self.inner.set_ceiling(&key, ceiling);
        }
        added
    }

    /// The predicted time of one path for ``nbytes``, or None where it is not calibrated.
    /// ``ordering`` (see ``path_ordering``) and ``queued`` (seconds of the producer's queued work)
    /// add the wait of a host-side synchronise. ``host_speed``: the host's speed now
    /// (``gpushare.advice.host_speed()``), which scales the fixed cost; None: as calibrated.
    /// ``shares``: whether the rules predict this array is shared (None: not known, or a failure);
    /// where the calibration's arrays had another verdict, the prediction gives no number and says
    /// why (``Prediction.unpredictable``). ``switches_device``: another device than the array's is
    /// current, so the handoff makes the array's current and the other one again after; the time
    /// the calibration measured for that (``set_device_switch``) is added.
    #[pyo3(signature = (kind, path, source, target, place, nbytes, ordering = "none", queued = 0.0, host_speed = None, shares = None, switches_device = false))]
    #[allow(clippy::too_many_arguments)]
    fn predict(
        &self,
        kind: PyPathKind,
        path: &str,
        source: &str,
        target: &str,
        place: &str,
        nbytes: u64,
        ordering: &str,
        queued: f64,
        host_speed: Option<f64>,
        shares: Option<bool>,
        switches_device: bool,
    ) -> PyResult<Option<PyPrediction>> {
        let ordering = self::ordering(ordering)?;
        let key = key(kind, path, source, target, place);
        let prediction = self.inner.predict_for_array(&key, nbytes, ordering, queued, host_speed, shares);
        Ok(prediction.map(|p| PyPrediction {
            inner: if switches_device { self.inner.with_device_switch(p, source, place, host_speed) } else { p },
        }))
    }

    /// Records ``seconds`` as what a handoff from ``source`` of an array at ``place`` (``cuda:0``)
    /// adds where another device is current, measured with the host running at ``host_speed``
    /// (``gpushare.advice.host_speed()``); False, and nothing kept, for a time no switch takes.
    #[pyo3(signature = (source, place, seconds, host_speed = None))]
    fn set_device_switch(&mut self, source: &str, place: &str, seconds: f64, host_speed: Option<f64>) -> bool {
        self.inner.set_device_switch(source, place, seconds, host_speed)
    }

    /// The seconds recorded by ``set_device_switch``, at ``host_speed`` (None: as measured);
    /// None where none was measured.
    #[pyo3(signature = (source, place, host_speed = None))]
    fn device_switch(&self, source: &str, place: &str, host_speed: Option<f64>) -> Option<f64> {
        self.inner.device_switch(source, place, host_speed)
    }

    /// What changed since the model was made (``None``: it is current for ``machine``).
    fn stale_against(&self, machine: &Bound<'_, PyAny>) -> PyResult<Option<String>> {
        Ok(self.inner.stale_against(&from_py::<serde_json::Value>(machine)?))
    }

    /// The fits too uncertain to recommend from (stated error 100 % or more), each
    /// ``(label, why)``: a busy machine or a drifting path.
    fn uncertain(&self) -> Vec<(String, String)> {
        self.inner.uncertain()
    }

    /// One line saying how many fits are too uncertain to recommend from and why; None when none is.
    fn uncertainty_line(&self) -> Option<String> {
        self.inner.uncertainty_line()
    }

    /// The sizes a calibration should measure next, each ``(kind, path, source, target, place,
    /// bytes)``: the middle of a gap between two calibrated sizes where a copying path's cost bends.
    fn refinements(&self) -> Vec<(PyPathKind, String, String, String, String, u64)> {
        self.inner
            .refinements()
            .into_iter()
            .map(|(k, bytes)| (PyPathKind(k.kind), k.path, k.source, k.target, k.place, bytes))
            .collect()
    }

    /// The calibrated paths: ``(kind, path, source, target, place)`` each.
    fn keys(&self) -> Vec<(PyPathKind, String, String, String, String)> {
        self.inner
            .fits
            .keys()
            .filter_map(|label| CostKey::parse(label))
            .map(|k| (PyPathKind(k.kind), k.path, k.source, k.target, k.place))
            .collect()
    }

    #[getter]
    fn machine<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.inner.machine)
    }
    #[getter]
    fn created(&self) -> f64 {
        self.inner.created
    }
    fn __len__(&self) -> usize {
        self.inner.fits.len()
    }
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.inner)
    }
    fn __repr__(&self) -> String {
        render::model_text(&self.inner)
    }
    fn _repr_html_(&self) -> String {
        render::model_html(&self.inner)
    }
}

/// What ``gpushare.advise`` answers: every applicable path's predicted verdict and time for one
/// array, and which to take, before anything is converted.
#[pyclass(module = "gpushare", name = "Advice", frozen)]
pub struct PyAdvice {
    inner: Advice,
}

fn row_from_dict(d: &Bound<'_, PyDict>) -> PyResult<AdviceRow> {
    let get = |name: &str| -> PyResult<Bound<'_, PyAny>> {
        d.get_item(name)?.ok_or_else(|| PyValueError::new_err(format!("an advice row needs {name:?}")))
    };
    let prediction = match d.get_item("prediction")? {
        Some(p) if !p.is_none() => Some(p.cast::<PyPrediction>()?.get().inner.clone()),
        _ => None,
    };
    Ok(AdviceRow {
        path: get("path")?.extract()?,
        kind: get("kind")?.extract::<PyPathKind>()?.0,
        verdict: get("verdict")?.extract::<PyVerdict>()?.0,
        reason: get("reason")?.extract()?,
        ordering: get("ordering")?.extract()?,
        ordered: d.get_item("ordered")?.map_or(Ok(true), |o| o.extract())?,
        waits: d.get_item("waits")?.map_or(Ok(false), |o| o.extract())?,
        prediction,
        moves_source: d.get_item("moves_source")?.map_or(Ok(false), |o| o.extract())?,
    })
}

#[pymethods]
impl PyAdvice {
    /// ``rows``: dicts with ``path``, ``kind``, ``verdict``, ``reason``, ``ordering`` and
    /// ``prediction`` (a prediction of ``CostModel.predict`` or None), ``waits`` (the host waits
    /// for the producer's queued work) and ``moves_source`` (the path moves the caller's array
    /// first, freeing the memory its views read: never recommended). ``rules_choice`` is the rules' ``auto``, which stands where
    /// nothing is calibrated. ``producer``: the state assumed, ``idle``, ``busy`` or ``unknown``.
    /// ``auto_by_size``: ``(from, below or None, path, close or None)`` per range of sizes where
    /// ``auto``'s path for this pair changes with size (``gpushare.auto.ranges``); ``close``:
    /// another path predicted within the model's error there.
    #[new]
    #[pyo3(signature = (source, target, nbytes, place, rows, rules_choice = None, queued = 0.0, model_note = None, producer = "idle", auto_by_size = Vec::new(), code = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        source: String,
        target: String,
        nbytes: u64,
        place: String,
        rows: Vec<Bound<'_, PyDict>>,
        rules_choice: Option<&str>,
        queued: f64,
        model_note: Option<String>,
        producer: &str,
        auto_by_size: Vec<(u64, Option<u64>, String, Option<String>)>,
        code: Option<(String, String)>,
    ) -> PyResult<Self> {
        let rows = rows.iter().map(row_from_dict).collect::<PyResult<Vec<_>>>()?;
        let producer = Producer::parse(producer)
            .ok_or_else(|| PyValueError::new_err(format!("unknown producer state {producer:?}: idle, busy or unknown")))?;
        let auto_by_size = auto_by_size.into_iter().map(|(from, below, path, close)| SizeRange { from, below, path, close }).collect();
        let advice = Advice {
            source,
            target,
            nbytes,
            place,
            rows,
            recommended: None,
            why: String::new(),
            queued,
            producer,
            model_note,
            auto_by_size,
            code: code.map(|(call, ordered_by)| crate::advice::advise::PlainCall { call, ordered_by }),
        };
        Ok(PyAdvice { inner: advice.decide(rules_choice) })
    }

    /// The path to take (None when no path applies).
    #[getter]
    fn recommended(&self) -> Option<&str> {
        self.inner.recommended.as_deref()
    }
    /// Why, in words.
    #[getter]
    fn why(&self) -> &str {
        &self.inner.why
    }
    /// The producer's state the predictions assumed: ``idle``, ``busy`` or ``unknown``.
    #[getter]
    fn producer(&self) -> &'static str {
        self.inner.producer.name()
    }
    /// The same, in words.
    #[getter]
    fn assumed(&self) -> String {
        self.inner.producer.describe(self.inner.queued)
    }
    /// A copying path predicted faster than the recommendation, which shares (or None).
    #[getter]
    fn faster_copy(&self) -> Option<&str> {
        self.inner.faster_copy().map(|r| r.path.as_str())
    }
    /// ``(call, ordered_by)``: the plain framework call that performs the recommended path without
    /// gpushare (``x`` the source array) and what keeps it ordered; None where none is declared.
    #[getter]
    fn code(&self) -> Option<(String, String)> {
        self.inner.code.as_ref().map(|c| (c.call.clone(), c.ordered_by.clone()))
    }
    /// The predicted seconds of ``path`` (None where it is not calibrated or not a row).
    fn predicted(&self, path: &str) -> Option<f64> {
        self.inner.rows.iter().find(|r| r.path == path)?.prediction.as_ref().map(|p| p.seconds)
    }
    #[getter]
    fn rows<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.inner.rows)
    }
    fn to_pandas<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let rows = PyList::empty(py);
        for r in &self.inner.rows {
            let d = PyDict::new(py);
            d.set_item("path", &r.path)?;
            d.set_item("kind", r.kind.name())?;
            // The tables' vocabulary: a path the rules say cannot run is "not applicable", not "failed".
            d.set_item("verdict", crate::render::State::predicted(r.verdict).word())?;
            d.set_item("reason", &r.reason)?;
            d.set_item("ordering", &r.ordering)?;
            d.set_item("ordered", r.ordered)?;
            d.set_item("waits", r.waits)?;
            d.set_item("producer", self.inner.producer.name())?;
            // As the comparison's and the benchmark's frames have them (nothing measured here).
            super::lab::prediction_columns(&d, r.prediction.as_ref(), false)?;
            d.set_item("misses_prediction", py.None())?;
            d.set_item("recommended", self.inner.recommended.as_deref() == Some(r.path.as_str()))?;
            rows.append(d)?;
        }
        super::frames::tidy_frame(py, rows, None, &[("predicted_s", "float64"), ("tolerance", "float64")])
    }
}

super::forms::result_forms!(PyAdvice {
    kind: "advice",
    data: inner: Advice,
    text: |r| render::advice_text(r),
    html: |r| render::advice_html(r),
});

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyCostModel>()?;
    m.add_class::<PyPrediction>()?;
    m.add_class::<PyAdvice>()?;
    // How a share's fixed cost follows the host's speed (the slowdown to this power).
    m.add("HOST_SPEED_EXPONENT", crate::advice::model::HOST_SPEED_EXPONENT)?;
    // The same for a share in host memory, whose fixed cost is all host work.
    m.add("HOST_MEMORY_SPEED_EXPONENT", crate::advice::model::HOST_MEMORY_SPEED_EXPONENT)?;
    Ok(())
}

/// How each path is ordered against the producer's queued work, to `gpushare._native.paths`.
pub fn register_paths(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(path_ordering, m)?)?;
    m.add_function(wrap_pyfunction!(path_waits, m)?)
}

/// Whether a producer's stream has queued work, to `gpushare._native.cuda`.
pub fn register_cuda(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(cuda_stream_busy, m)?)
}
