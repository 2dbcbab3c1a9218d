//! The result classes: `Timing`, `ShareResult`, and the table renderer of several results.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::frames::shares_frame;
use super::json::{envelope_json, json_to_py, to_py};
pub use super::tensor_info::TensorInfo;
use crate::explain;
use crate::render;
use crate::report::{ShareReport, Verdict};
use crate::stats::Timing;

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
    /// Host seconds in handoffs that are not samples (warm-up runs, the runs that chose the
    /// loop count): with ``samples × loops``, every handoff the measurement made.
    #[getter]
    fn untimed(&self) -> f64 {
        self.timing.untimed
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
        to_py(py, &self.timing)
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
    /// The source's and target's `TensorInfo`, made from the report on first access (or the ones
    /// the constructor was given): a share whose result is never asked for them paid a Python
    /// object, and a copy of the report, for each.
    source: pyo3::sync::PyOnceLock<Py<TensorInfo>>,
    target: pyo3::sync::PyOnceLock<Py<TensorInfo>>,
    /// Made on first access: most results are never asked for their timing object, and creating it
    /// eagerly cost every share a Python allocation.
    timing: pyo3::sync::PyOnceLock<Py<PyTiming>>,
    pub report: ShareReport,
}

impl ShareResult {
    /// The note that the target can write to memory the source holds read-only, if any.
    fn readonly_note(&self) -> Option<&str> {
        self.report.notes.iter().map(String::as_str).find(|n| n.contains("read-only"))
    }

    /// Judges the handoff from the two descriptions and assembles the result.
    #[allow(clippy::too_many_arguments)]
    pub fn build(
        py: Python<'_>,
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
        let result = ShareResult::from_outcome(value, report);
        result.keep_source(py, source);
        let _ = result.target.set(py, target);
        result
    }

    /// `source` as this result's `TensorInfo` of its source (which its report describes).
    pub fn keep_source(&self, py: Python<'_>, source: Py<TensorInfo>) {
        let _ = self.source.set(py, source);
    }

    /// The result of a share the pipeline ran and judged.
    pub fn from_outcome(value: Py<PyAny>, report: ShareReport) -> ShareResult {
        ShareResult {
            value,
            source: pyo3::sync::PyOnceLock::new(),
            target: pyo3::sync::PyOnceLock::new(),
            timing: pyo3::sync::PyOnceLock::new(),
            report,
        }
    }
}

#[pymethods]
impl ShareResult {
    #[new]
    #[pyo3(signature = (value, source, target, path, samples, loops=1, name=None, origin=None, notes=None,
                        predicted=None, device_samples=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
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
        device_samples: Option<Vec<f64>>,
    ) -> PyResult<ShareResult> {
        let mut timing = Timing::from_samples(samples, loops);
        if let Some(device) = device_samples {
            timing.device_median = Some(Timing::from_samples(device, loops).median);
        }
        // Any sequence whose first two items are (verdict, reason): a Prediction carries more.
        let predicted = predicted.map(|p| super::explain::prediction_from_py(&p)).transpose()?;
        Ok(ShareResult::build(
            py,
            value,
            source,
            target,
            path,
            timing,
            name,
            origin,
            notes.unwrap_or_default(),
            predicted.map(|p| p.summary()),
            None,
            None,
        ))
    }

    #[getter]
    fn value(&self, py: Python<'_>) -> Py<PyAny> {
        self.value.clone_ref(py)
    }
    #[getter]
    fn source(&self, py: Python<'_>) -> PyResult<Py<TensorInfo>> {
        let info = self.source.get_or_try_init(py, || Py::new(py, TensorInfo { report: self.report.source.clone() }))?;
        Ok(info.clone_ref(py))
    }
    #[getter]
    fn target(&self, py: Python<'_>) -> PyResult<Py<TensorInfo>> {
        let info = self.target.get_or_try_init(py, || Py::new(py, TensorInfo { report: self.report.target.clone() }))?;
        Ok(info.clone_ref(py))
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
    /// Whether `share` owes its caller a warning: the target can write to memory the source holds
    /// read-only, or a copy changed the dtype (whose values `share` then checks). One question on
    /// every share, where the warnings' words are made only when one is due.
    #[getter]
    fn owes_warning(&self) -> bool {
        self.readonly_note().is_some() || (self.report.verdict != Verdict::Shared && self.dtype_changed())
    }
    /// The warning that the target can write to memory the source holds read-only, in the words
    /// `share` gives its GpushareWarning (the pair, then the note), if any.
    #[getter]
    fn readonly_warning(&self) -> Option<String> {
        self.readonly_note().map(|note| format!("{}: {note}", self.pair()))
    }
    /// The pair in words (`jax → torch`), for the warnings a share owes its caller, without
    /// making the two TensorInfo objects (every move and every copy asks).
    #[getter]
    fn pair(&self) -> String {
        gpushare_core::route::label(&self.report.source.framework, &self.report.target.framework)
    }
    /// Whether the target's dtype differs from the source's (a copy that converted: JAX without
    /// x64 narrows 64-bit types), which `share` then checks for lost values.
    #[getter]
    fn dtype_changed(&self) -> bool {
        self.report.source.dtype != self.report.target.dtype
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
        to_py(py, p).map(Some)
    }
    /// True when what happened differs from the prediction.
    #[getter]
    fn unexpected(&self) -> bool {
        self.report.unexpected()
    }
    /// The CUDA memory ledger of this handoff, or None.
    #[getter]
    fn memory<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.report.memory.as_ref().map(|m| to_py(py, m)).transpose()
    }
    /// Producer/consumer streams of the handoff, or None (CPU).
    #[getter]
    fn streams<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.report.streams.as_ref().map(|s| to_py(py, s)).transpose()
    }

    /// One tidy row: identifying columns first, raw seconds and bytes, integer counts.
    fn to_pandas<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        shares_frame(py, std::slice::from_ref(&self.report))
    }
}

super::forms::result_forms!(ShareResult {
    kind: "share",
    data: report: ShareReport,
    text: |r| render::share_table_text(std::slice::from_ref(r)),
    html: |r| render::share_table_html(std::slice::from_ref(r)),
});

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
    super::json::mime_bundle(py, "shares", reports, render::share_table_text(reports), render::share_table_html(reports))
}

/// Renders a sequence of ShareResult as one table: `fmt` is "text" or "html".
#[pyfunction]
pub fn render_shares(results: &Bound<'_, PyAny>, fmt: &str) -> PyResult<String> {
    let reports = reports_of(results)?;
    match fmt {
        "text" => Ok(render::share_table_text(&reports)),
        "html" => Ok(render::share_table_html(&reports)),
        "json" => envelope_json("shares", &reports),
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
