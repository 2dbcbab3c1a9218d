//! The result classes: `Timing`, `ShareResult`, and the table renderer of several results.

use std::sync::Mutex;

use pyo3::exceptions::PyTypeError;
use pyo3::IntoPyObjectExt;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::forms::Forms;

use super::frames::shares_frame;
use super::forms::{envelope_json, to_py};
use super::process_rows::PyProcessSide;
pub use super::tensor_info::TensorInfo;
use crate::explain;
use crate::render;
use crate::render::lab::PathRow;
use crate::report::{ShareReport, TensorReport, Verdict};
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
    /// A handoff to a worker process: the first handoff, with its one-off costs (a process group's
    /// set-up, a segment's copy), timed apart from the samples; None in this process.
    #[getter]
    fn first_call(&self) -> Option<f64> {
        self.timing.first_call
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

impl PyTiming {
    fn dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, pyo3::types::PyDict>> {
        Ok(to_py(py, &self.timing)?.cast_into::<pyo3::types::PyDict>()?)
    }
}

// Key access over the JSON form, as a handoff's timing to a worker read when it was a dict.
super::forms::keyed_methods!(PyTiming);

/// The outcome of one handoff: the converted `value`, source and target, the verdict (`"shared"`
/// only when the target's bytes lie inside the source's memory), the reason for a copy, the path
/// and the timing. A handoff to a worker process is a `ShareResult` too: its `worker` names the
/// process, its `value` is the worker's array, and both sides are described by the identity of the
/// memory they lie in (the pointer means nothing across processes).
#[pyclass(module = "gpushare", frozen, weakref, name = "ShareResult")]
pub struct ShareResult {
    handed: Handed,
}

/// Where the handoff put the array. The share within this process is the large and the common
/// one: boxing it would cost every share an allocation, so it is not.
#[allow(clippy::large_enum_variant)]
enum Handed {
    /// In this process, judged by pointer identity.
    Here(Here),
    /// In a worker process, judged by the memory identity each side reports. Behind a lock: the
    /// caller still adds notes (what it did around the handoff) and releases the worker's array.
    Worker(Mutex<WorkerHandoff>),
}

struct Here {
    value: Py<PyAny>,
    /// The source's and target's `TensorInfo`, made from the report on first access (or the ones
    /// the constructor was given): a share whose result is never asked for them paid a Python
    /// object, and a copy of the report, for each.
    source: pyo3::sync::PyOnceLock<Py<TensorInfo>>,
    target: pyo3::sync::PyOnceLock<Py<TensorInfo>>,
    /// Made on first access: most results are never asked for their timing object, and creating it
    /// eagerly cost every share a Python allocation.
    timing: pyo3::sync::PyOnceLock<Py<PyTiming>>,
    report: ShareReport,
}

/// A handoff to a worker process: its row (as every comparison's and sweep's), the share it is
/// (its JSON form: both arrays described, each in its own process, and the row's worker part), the
/// worker's array (`remote`), the parent's array over the shared memory (`local`: the source, or a
/// segment's view) and what releases the latter.
struct WorkerHandoff {
    report: PathRow,
    share: ShareReport,
    remote: Py<PyAny>,
    local: Py<PyAny>,
    cleanup: Vec<Py<PyAny>>,
}

/// The JSON form's data: a share's report, within this process or (copied from under its lock)
/// to a worker.
#[derive(serde::Serialize)]
#[serde(untagged)]
pub enum ShareData<'a> {
    Here(&'a ShareReport),
    Worker(Box<ShareReport>),
}

fn not_a_process_handoff(what: &str) -> PyErr {
    PyTypeError::new_err(format!("{what} is for a handoff to a worker process; this share ran within this process"))
}

impl ShareResult {
    /// The source and target frameworks and the note of the read-only warning, if one is owed.
    pub(crate) fn readonly_parts(&self) -> Option<(&str, &str, &str)> {
        let report = self.share_report()?;
        let note = Self::readonly_note(report)?;
        Some((&report.source.framework, &report.target.framework, note))
    }
    /// The read-only warning's words: the pair (`jax → torch`), then the note.
    pub(crate) fn readonly_text(source: &str, target: &str, note: &str) -> String {
        format!("{}: {note}", gpushare_core::route::label(source, target))
    }
    /// The note that the target can write to memory the source holds read-only, if any.
    fn readonly_note(report: &ShareReport) -> Option<&str> {
        report.notes.iter().map(String::as_str).find(|n| n.contains("read-only"))
    }

    fn lock(handoff: &Mutex<WorkerHandoff>) -> std::sync::MutexGuard<'_, WorkerHandoff> {
        // A panic while the lock was held left nothing half-written that matters: read on.
        handoff.lock().unwrap_or_else(|e| e.into_inner())
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
        let judgement = explain::judge_handoff(crate::paths::PathKind::Share, &path, explain::Sides::Here { source: src, target: dst });
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
            worker: None,
            predicted_time: None,
            streams,
        };
        let result = ShareResult::from_outcome(value, report);
        result.keep_source(py, source);
        if let Handed::Here(here) = &result.handed {
            let _ = here.target.set(py, target);
        }
        result
    }

    /// `source` as this result's `TensorInfo` of its source (which its report describes).
    pub fn keep_source(&self, py: Python<'_>, source: Py<TensorInfo>) {
        if let Handed::Here(here) = &self.handed {
            let _ = here.source.set(py, source);
        }
    }

    /// The result of a share the pipeline ran and judged.
    pub fn from_outcome(value: Py<PyAny>, report: ShareReport) -> ShareResult {
        ShareResult {
            handed: Handed::Here(Here {
                value,
                source: pyo3::sync::PyOnceLock::new(),
                target: pyo3::sync::PyOnceLock::new(),
                timing: pyo3::sync::PyOnceLock::new(),
                report,
            }),
        }
    }

    /// The result of a handoff to a worker process (binding/process_route.rs): `described` the
    /// source and the worker's array as gpushare describes each in its own process, `remote` the
    /// worker's array, `local` the parent's array over the shared memory, `cleanup` what releases
    /// the latter. `None` for a row that did not reach the worker (no handoff to hold).
    pub fn from_worker(
        report: PathRow,
        described: (TensorReport, TensorReport),
        remote: Py<PyAny>,
        local: Py<PyAny>,
        cleanup: Vec<Py<PyAny>>,
    ) -> Option<ShareResult> {
        let share = ShareReport::of_worker(&report, described.0, described.1)?;
        Some(ShareResult { handed: Handed::Worker(Mutex::new(WorkerHandoff { report, share, remote, local, cleanup })) })
    }

    /// The report of a handoff to a worker process, or None for a share within this process.
    pub fn process_report(&self) -> Option<PathRow> {
        match &self.handed {
            Handed::Here(_) => None,
            Handed::Worker(w) => Some(Self::lock(w).report.clone()),
        }
    }

    /// The share's report, within this process or to a worker (a copy: a worker's takes notes).
    pub fn as_share(&self) -> ShareReport {
        match &self.handed {
            Handed::Here(here) => here.report.clone(),
            Handed::Worker(w) => Self::lock(w).share.clone(),
        }
    }

    /// The in-process share's report, or None for a handoff to a worker.
    pub fn share_report(&self) -> Option<&ShareReport> {
        match &self.handed {
            Handed::Here(here) => Some(&here.report),
            Handed::Worker(_) => None,
        }
    }

    /// `f` of the verdict, reason, notes and path, which both kinds of handoff report.
    fn common<R>(&self, f: impl FnOnce(Verdict, Option<&str>, &[String], &str) -> R) -> R {
        match &self.handed {
            Handed::Here(here) => {
                let r = &here.report;
                f(r.verdict, r.reason.as_deref(), &r.notes, &r.path)
            }
            Handed::Worker(w) => {
                let w = Self::lock(w);
                let r = &w.report;
                f(r.verdict, r.reason.as_deref(), &r.notes, &r.path)
            }
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

    /// The converted array; for a handoff to a worker process, the worker's array (a handle).
    #[getter]
    fn value(&self, py: Python<'_>) -> Py<PyAny> {
        match &self.handed {
            Handed::Here(here) => here.value.clone_ref(py),
            Handed::Worker(w) => Self::lock(w).remote.clone_ref(py),
        }
    }
    /// The source's `TensorInfo`; for a handoff to a worker, the parent's side (pid, framework, the
    /// identity of the memory and its CUDA context).
    #[getter]
    fn source<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match &self.handed {
            Handed::Here(here) => {
                let info = here.source.get_or_try_init(py, || Py::new(py, TensorInfo { report: here.report.source.clone() }))?;
                Ok(info.bind(py).clone().into_any())
            }
            Handed::Worker(w) => match &Self::lock(w).report.worker {
                Some(side) => Ok(Bound::new(py, PyProcessSide::source(&side.source))?.into_any()),
                None => Ok(py.None().into_bound(py)),
            },
        }
    }
    /// The target's `TensorInfo`; for a handoff to a worker, the worker's side (None for a path
    /// that failed).
    #[getter]
    fn target<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match &self.handed {
            Handed::Here(here) => {
                let info = here.target.get_or_try_init(py, || Py::new(py, TensorInfo { report: here.report.target.clone() }))?;
                Ok(info.bind(py).clone().into_any())
            }
            Handed::Worker(w) => {
                Self::lock(w).report.worker.as_ref().and_then(|side| side.target.as_ref()).map(PyProcessSide::target).into_bound_py_any(py)
            }
        }
    }
    /// The `Timing`; for a handoff to a worker, its first call, median, minimum and samples (None
    /// for a path that failed).
    #[getter]
    fn timing<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match &self.handed {
            Handed::Here(here) => {
                let timing = here.timing.get_or_try_init(py, || Py::new(py, PyTiming { timing: here.report.timing.clone() }))?;
                Ok(timing.bind(py).clone().into_any())
            }
            Handed::Worker(w) => Self::lock(w).report.timing.clone().map(|timing| PyTiming { timing }).into_bound_py_any(py),
        }
    }
    #[getter]
    fn verdict(&self) -> super::vocabulary::PyVerdict {
        self.common(|verdict, _, _, _| super::vocabulary::PyVerdict(verdict))
    }
    #[getter]
    fn shared(&self) -> bool {
        self.common(|verdict, _, _, _| verdict == Verdict::Shared)
    }
    #[getter]
    fn reason(&self) -> Option<String> {
        self.common(|_, reason, _, _| reason.map(str::to_owned))
    }
    #[getter]
    fn notes(&self) -> Vec<String> {
        self.common(|_, _, notes, _| notes.to_vec())
    }
    #[getter]
    fn path(&self) -> String {
        self.common(|_, _, _, path| path.to_owned())
    }
    /// The worker process that holds the array (`pid`, `host`: None on this host, `framework`),
    /// or None for a share within this process.
    #[getter]
    fn worker<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let Handed::Worker(w) = &self.handed else { return Ok(None) };
        let w = Self::lock(w);
        Ok(Some(Bound::new(py, super::process_rows::PyWorkerInfo::of(std::iter::once(&w.report)))?.into_any()))
    }
    /// The worker's array (the same as `value`), or None for a share within this process.
    #[getter]
    fn remote(&self, py: Python<'_>) -> Py<PyAny> {
        match &self.handed {
            Handed::Here(_) => py.None(),
            Handed::Worker(w) => Self::lock(w).remote.clone_ref(py),
        }
    }
    #[setter]
    fn set_remote(&self, remote: Py<PyAny>) -> PyResult<()> {
        match &self.handed {
            Handed::Here(_) => Err(not_a_process_handoff("remote")),
            Handed::Worker(w) => {
                Self::lock(w).remote = remote;
                Ok(())
            }
        }
    }
    /// The parent's array over the memory the worker shares (the source itself, or for `shm` the
    /// segment's view), or None for a share within this process.
    #[getter]
    fn local(&self, py: Python<'_>) -> Py<PyAny> {
        match &self.handed {
            Handed::Here(_) => py.None(),
            Handed::Worker(w) => Self::lock(w).local.clone_ref(py),
        }
    }
    /// The handoff's row, as a dict: for a handoff to a worker, its row in a comparison of the
    /// process paths (bytes moved, bandwidth, the worker part); within this process, the JSON
    /// form's data.
    #[getter]
    fn row<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match &self.handed {
            Handed::Here(here) => to_py(py, &here.report),
            Handed::Worker(w) => to_py(py, &Self::lock(w).report),
        }
    }
    /// A handoff to a worker reads every key of its row as an attribute, its worker part's
    /// too (`r.bytes_moved`, `r.mechanism`, `r.segment["name"]`: a segment and a link are dicts).
    fn __getattr__<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
        let missing = || pyo3::exceptions::PyAttributeError::new_err(format!("'ShareResult' object has no attribute '{name}'"));
        if matches!(self.handed, Handed::Here(_)) || name.starts_with('_') {
            return Err(missing());
        }
        let row = self.row(py)?;
        if let Ok(v) = row.get_item(name) {
            return Ok(v);
        }
        row.get_item("worker").and_then(|w| w.get_item(name)).map_err(|_| missing())
    }
    /// Adds a note to a handoff to a worker (what the caller did around it).
    fn add_note(&self, note: String) -> PyResult<()> {
        match &self.handed {
            Handed::Here(_) => Err(not_a_process_handoff("add_note()")),
            Handed::Worker(w) => {
                let mut w = Self::lock(w);
                w.share.notes.push(note.clone());
                w.report.notes.push(note);
                Ok(())
            }
        }
    }
    /// Releases what the parent keeps for a handoff to a worker (a segment), not the worker's array.
    fn _release_local(&self, py: Python<'_>) -> PyResult<()> {
        let Handed::Worker(w) = &self.handed else { return Ok(()) };
        // Taken out before calling back into Python: a callback may reach this result again.
        let cleanup = std::mem::take(&mut Self::lock(w).cleanup);
        for f in cleanup.into_iter().rev() {
            let _ = f.bind(py).call0();
        }
        Ok(())
    }
    /// Releases the worker's array and what the parent keeps for it (a segment, a handle). A share
    /// within this process holds nothing outside it: nothing to do.
    fn release(&self, py: Python<'_>) -> PyResult<()> {
        let Handed::Worker(w) = &self.handed else { return Ok(()) };
        let remote = Self::lock(w).remote.clone_ref(py);
        if !remote.is_none(py)
            && let Err(e) = remote.bind(py).call_method0("release")
        {
            let worker_error = py.import("gpushare.exceptions")?.getattr("WorkerError")?;
            if !e.is_instance(py, &worker_error) {
                return Err(e);
            }
        }
        self._release_local(py)
    }
    /// Whether `share` owes its caller a warning: the target can write to memory the source holds
    /// read-only, or a copy changed the dtype (whose values `share` then checks). One question on
    /// every share, where the warnings' words are made only when one is due.
    #[getter]
    pub(crate) fn owes_warning(&self) -> bool {
        match &self.handed {
            Handed::Here(here) => {
                let r = &here.report;
                Self::readonly_note(r).is_some() || (r.verdict != Verdict::Shared && r.source.dtype != r.target.dtype)
            }
            Handed::Worker(_) => false,
        }
    }
    /// The warning that the target can write to memory the source holds read-only, in the words
    /// `share` gives its GpushareWarning (the pair, then the note), if any.
    #[getter]
    pub(crate) fn readonly_warning(&self) -> Option<String> {
        let (source, target, note) = self.readonly_parts()?;
        Some(Self::readonly_text(source, target, note))
    }
    /// The pair in words (`jax → torch`), for the warnings a share owes its caller, without
    /// making the two TensorInfo objects (every move and every copy asks).
    #[getter]
    fn pair(&self) -> String {
        match &self.handed {
            Handed::Here(here) => gpushare_core::route::label(&here.report.source.framework, &here.report.target.framework),
            Handed::Worker(w) => {
                let w = Self::lock(w);
                let side = w.report.worker.as_ref();
                let target = side.and_then(|s| s.target.as_ref()).and_then(|t| t.framework.as_deref()).unwrap_or("?");
                gpushare_core::route::label(side.map_or("?", |s| s.source.framework.as_str()), target)
            }
        }
    }
    /// Whether the target's dtype differs from the source's (a copy that converted: JAX without
    /// x64 narrows 64-bit types), which `share` then checks for lost values.
    #[getter]
    pub(crate) fn dtype_changed(&self) -> bool {
        self.share_report().is_some_and(|r| r.source.dtype != r.target.dtype)
    }
    #[getter]
    fn name(&self) -> Option<&str> {
        self.share_report()?.name.as_deref()
    }
    #[getter]
    fn shares_origin(&self) -> Option<bool> {
        self.share_report()?.shares_origin
    }
    /// What was predicted before the handoff ran: a ``Prediction`` (its verdict and reason) for a
    /// share within this process; the cost model's ``CostPrediction`` (time and stated error) for
    /// a handoff to a worker; or None. Both also read by key (``r.prediction["verdict"]``).
    #[getter]
    fn prediction<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        match &self.handed {
            Handed::Here(here) => here
                .report
                .predicted
                .as_ref()
                .map(|p| {
                    let typed = super::explain::Prediction { verdict: p.verdict, reason: p.reason.clone(), fix: None, expected_error: None };
                    Bound::new(py, typed).map(Bound::into_any)
                })
                .transpose(),
            Handed::Worker(w) => Self::lock(w)
                .report
                .predicted
                .clone()
                .map(|inner| Bound::new(py, super::advice::PyPrediction { inner }).map(Bound::into_any))
                .transpose(),
        }
    }
    /// True when what happened differs from the prediction.
    #[getter]
    fn unexpected(&self) -> bool {
        self.share_report().is_some_and(ShareReport::unexpected)
    }
    /// The CUDA memory ledger of this handoff, or None.
    #[getter]
    fn memory<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.share_report().and_then(|r| r.memory.as_ref()).map(|m| to_py(py, m)).transpose()
    }
    /// Producer/consumer streams of the handoff, or None (CPU).
    #[getter]
    fn streams<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.share_report().and_then(|r| r.streams.as_ref()).map(|s| to_py(py, s)).transpose()
    }

    /// One tidy row: identifying columns first, raw seconds and bytes, integer counts.
    fn to_pandas<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match &self.handed {
            Handed::Here(here) => shares_frame(py, std::slice::from_ref(&here.report)),
            Handed::Worker(w) => {
                let (share, row) = {
                    let w = Self::lock(w);
                    (w.share.clone(), w.report.clone())
                };
                super::frames::worker_share_frame(py, &share, &row)
            }
        }
    }
}

impl Forms for ShareResult {
    type Data<'a> = ShareData<'a>;
    fn kind(&self) -> &'static str {
        "share"
    }
    fn data(&self) -> ShareData<'_> {
        match &self.handed {
            Handed::Here(here) => ShareData::Here(&here.report),
            Handed::Worker(w) => ShareData::Worker(Box::new(Self::lock(w).share.clone())),
        }
    }
    // A handoff to a worker shows its row, as in a comparison of the process paths: the mechanism,
    // the bytes each handoff moves and both sides by memory identity.
    fn text(&self) -> String {
        match &self.handed {
            Handed::Here(here) => render::share_table_text(std::slice::from_ref(&here.report)),
            Handed::Worker(w) => crate::render::process::rows_text(std::slice::from_ref(&Self::lock(w).report)),
        }
    }
    fn html(&self) -> String {
        match &self.handed {
            Handed::Here(here) => render::share_table_html(std::slice::from_ref(&here.report)),
            Handed::Worker(w) => crate::render::process::rows_html(std::slice::from_ref(&Self::lock(w).report)),
        }
    }
}

super::forms::forms_methods!(ShareResult);

fn reports_of(results: &Bound<'_, PyAny>) -> PyResult<Vec<ShareReport>> {
    let mut out = Vec::new();
    for item in results.try_iter()? {
        let item = item?;
        let r = item.cast::<ShareResult>().map_err(|_| PyTypeError::new_err("expected ShareResult items"))?;
        out.push(r.get().as_share());
    }
    Ok(out)
}

fn mimebundle<'py>(py: Python<'py>, reports: &[ShareReport]) -> PyResult<Bound<'py, PyDict>> {
    super::forms::mime_bundle(py, "shares", reports, render::share_table_text(reports), render::share_table_html(reports))
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
/// `benchmark`, `advice`), generated from the Rust types; the same text is shipped in
/// `gpushare/schemas/`.
#[pyfunction]
pub fn json_schema<'py>(py: Python<'py>, kind: &str) -> PyResult<Bound<'py, PyAny>> {
    let schema = crate::schema::schema_for(kind).ok_or_else(|| {
        pyo3::exceptions::PyValueError::new_err(format!(
            "unknown result kind {kind:?}: use one of {}",
            crate::schema::KINDS.join(", ")
        ))
    })?;
    to_py(py, &schema)
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
