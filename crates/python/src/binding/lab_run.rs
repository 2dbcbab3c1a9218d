//! The lab's loops: `compare` and `bench` are the one pipeline (crates/core/src/share/) run once per
//! path and size, here in Rust. The source is described once per array and handed to each path's
//! handoff ([`Handoff::prepare_described`], then [`Handoff::convert_prepared`]); Python supplies
//! only the callables that know the adapters: a path's route and prediction (`route_for`), the
//! `auto` of the array's device, the link a move crosses, and, for a sweep, the source arrays.
//! A path that does not apply or fails is a row with its reason, never an exception; Ctrl-C
//! stops a sweep with the points measured so far. The loops themselves are the core's
//! (crates/core/src/share/lab.rs), run here over [`PyPathLab`].

use pyo3::exceptions::PyKeyboardInterrupt;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::errors::{GpushareError, PathNotApplicableError, PyGpushareErr};
use super::lab::{Benchmark, Comparison};
use super::plan::{Described, PredictStep, PyFramework, PyHost, PyRoute, policy};
use super::types::{ShareResult, TensorInfo};
use crate::explain::PredictedOutcome;
use crate::render::lab::{BenchInput, BenchmarkReport, ComparisonInput, ComparisonReport, PathRun, size_label};
use crate::report::{TensorReport, Verdict};
use crate::share::{Framework, Handoff, Options};
use crate::stats::Timing;

/// Why a path failed, in the words of the error the core made (`reason`, `fix`); a foreign
/// exception as gpushare knows it, else as its type and message.
fn reason_of(py: Python<'_>, e: &PyErr) -> (String, Option<String>) {
    let value = e.value(py);
    let attribute = |name: &str| value.getattr(name).ok().filter(|v| !v.is_none());
    if e.is_instance_of::<GpushareError>(py) {
        let reason = attribute("reason").filter(|r| r.is_truthy().unwrap_or(false)).unwrap_or_else(|| value.clone().into_any());
        let fix = attribute("fix").and_then(|f| f.str().ok()).map(|f| f.to_string());
        return (reason.str().map(|r| r.to_string()).unwrap_or_default(), fix);
    }
    let type_name = value.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "Exception".into());
    let text = format!("{type_name}: {}", value.str().map(|s| s.to_string()).unwrap_or_default());
    match crate::explain::explain_failure(&text) {
        Some((reason, fix)) => (reason.to_string(), Some(fix.to_string())),
        None => (text, None),
    }
}

/// The reason and fix of the failure the rules predicted for the handoff that raised `e`, if they did.
fn rules_refusal(py: Python<'_>, e: &PyErr) -> Option<(String, Option<String>)> {
    let predicted = e.value(py).getattr("predicted").ok()?.cast_into::<super::explain::Prediction>().ok()?;
    let p = predicted.get();
    (p.verdict == crate::report::Verdict::Failed).then(|| p.reason.clone()).flatten().map(|r| (r, p.fix.clone()))
}

/// The row of a path that failed with `e`; `Err` for Ctrl-C, which stops the lab instead.
fn failed_run(py: Python<'_>, path: &str, e: PyErr) -> PyResult<PathRun> {
    if e.is_instance_of::<PyKeyboardInterrupt>(py) {
        return Err(e);
    }
    let mut run = PathRun::new(path);
    run.applicable = !e.is_instance_of::<PathNotApplicableError>(py);
    (run.reason, run.fix) = {
        let (reason, fix) = reason_of(py, &e);
        (Some(reason), fix)
    };
    if !run.applicable && let Some((reason, fix)) = rules_refusal(py, &e) {
        // A path that does not apply, as the prediction rules say it (the sentence `advise`
        // gives for the same path), where they foresaw it; the route's own words otherwise.
        (run.reason, run.fix) = (Some(reason), fix);
    }
    Ok(run)
}

/// What every path of one lab call shares: the two frameworks, the callables Python supplies and
/// the timing policy.
struct Lab<'py> {
    source: PyFramework,
    target: PyFramework,
    /// `route_for(path, is_auto, already_there, described)` → `(convert, predictor, check_source,
    /// kind)`; `described`: the array's `TensorInfo`, or None.
    route_for: Bound<'py, PyAny>,
    /// `link_for(source_ordinal, path)` → the link a move crosses (`gpushare.topology.link_for`), or None.
    link_for: Option<Bound<'py, PyAny>>,
    /// `predict_for(path, nbytes, dlpack_device, shares)` → `(CostPrediction or None, ordering in words)`:
    /// what the cost model said before the path ran (`gpushare.advice.lab_predictor`).
    predict_for: Option<Bound<'py, PyAny>>,
    options: Options,
    host: PyHost,
}

impl<'py> Lab<'py> {
    #[allow(clippy::too_many_arguments)]
    fn new(
        source: &Bound<'py, PyAny>,
        target: &Bound<'py, PyAny>,
        route_for: Bound<'py, PyAny>,
        link_for: Option<Bound<'py, PyAny>>,
        predict_for: Option<Bound<'py, PyAny>>,
        repeat: usize,
        number: Option<u64>,
        warmup: usize,
        min_sample_time: f64,
    ) -> PyResult<Lab<'py>> {
        // At least one warm-up: it also finds the paths that do not apply before timing them.
        let timing = policy(Some(repeat), number, warmup.max(1), None, Some(min_sample_time), true)?;
        Ok(Lab {
            source: PyFramework::new(source)?,
            target: PyFramework::new(target)?,
            route_for,
            link_for: link_for.filter(|l| !l.is_none()),
            predict_for: predict_for.filter(|p| !p.is_none()),
            options: Options { timing, ..Options::default() },
            host: PyHost { allocators: None },
        })
    }

    fn warmup(&self) -> u64 {
        self.options.timing.warmup as u64
    }

    /// Measures one path: the share pipeline with the lab's timing policy, from `described`
    /// (`None`: the path's handoff describes the array itself and explains why it cannot).
    /// `Err` only for Ctrl-C.
    fn try_path(
        &self,
        obj: &Py<PyAny>,
        described: Option<&Py<TensorInfo>>,
        path: &str,
        is_auto: bool,
        already_there: bool,
    ) -> PyResult<(PathRun, Option<ShareResult>)> {
        let py = self.route_for.py();
        // The description goes along where the loop has it: a path that does not apply is then
        // refused in the prediction rules' words, the sentence `advise` gives for it.
        let planned = self.route_for.call1((path, is_auto, already_there, described)).and_then(|plan| {
            let (convert, predictor, check_source, kind): (Py<PyAny>, Option<Bound<'py, PyAny>>, bool, super::vocabulary::PyPathKind) =
                plan.extract()?;
            let kind = kind.0;
            Ok((PyRoute::new(py, path.to_string(), convert).with_kind(kind), PredictStep::of(predictor), check_source))
        });
        let (route, predict, check_source) = match planned {
            Ok(planned) => planned,
            Err(e) => return Ok((failed_run(py, path, e)?, None)),
        };
        let predictor = |source: &TensorReport| -> crate::share::Result<Option<PredictedOutcome>> {
            match &predict {
                None => Ok(None),
                Some(step) => Python::attach(|py| step.predict(py, source).map_err(|e| super::errors::share_error(py, e))),
            }
        };
        let handoff = Handoff { source: &self.source, target: &self.target, route: &route, predictor: Some(&predictor), check_source };
        // What the cost model predicts is asked before the row runs (the host's speed it scales the
        // fixed cost by is measured then), from the source's description alone. A failure of the
        // model's call is gpushare's own: raised after the row, as before.
        let (mut cost_prediction, mut predict_failure) = (None, None);
        let outcome = (|| {
            let source = match described {
                Some(info) => Described(info.get().report.clone()),
                None => handoff.describe(obj)?,
            };
            let (source, predicted) = handoff.prepare_described(obj, source)?;
            if let Some(predict_for) = &self.predict_for {
                let report: &TensorReport = source.as_ref();
                // The rules' verdict for this array: a fit measured with another verdict does not
                // price it (a copy's line for a handoff that shares).
                let shares = match predicted.as_ref().map(|p| p.verdict()) {
                    Some(Verdict::Shared) => Some(true),
                    Some(Verdict::Copied) => Some(false),
                    _ => None,
                };
                match predict_for
                    .call1((path, report.payload_bytes(), report.dlpack_device, shares))
                    .and_then(|p| p.extract::<(Option<Py<super::advice::PyPrediction>>, Option<String>)>())
                {
                    Ok(p) => cost_prediction = Some(p),
                    Err(e) => predict_failure = Some(e),
                }
            }
            handoff.convert_prepared(&self.host, obj, source, predicted, &self.options)
        })();
        if let Some(e) = predict_failure {
            return Err(e);
        }
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(e) => return Ok((failed_run(py, path, PyErr::from(PyGpushareErr::from(e)))?, None)),
        };
        let report = &outcome.report;
        let mut run = PathRun::new(path);
        run.verdict = report.verdict;
        run.reason = report.reason.clone();
        run.samples = report.timing.samples.clone();
        run.loops = report.timing.loops;
        run.device_samples = report.timing.device_samples.clone();
        // A copy writes the target's bytes: the elements, not the span of a strided source (every
        // third float32 of ten spans 40 bytes and copies 16), and the target's dtype where the
        // copy converted it.
        run.bytes_moved = if report.verdict == Verdict::Shared { 0 } else { report.target.nbytes };
        run.target = Some(report.target.clone());
        run.notes = report.notes.clone();
        if let Some(link_for) = &self.link_for {
            note_link(&mut run, &report.source, link_for)?;
        }
        if let Some((predicted, ordering)) = cost_prediction {
            run.predicted = predicted.map(|p| p.get().inner.clone());
            run.ordering = ordering;
        }
        let result = ShareResult::from_outcome(outcome.value, outcome.report);
        // Every path's result names the one description of the source the lab made.
        if let Some(info) = described {
            result.keep_source(py, info.clone_ref(py));
        }
        Ok((run, Some(result)))
    }
}

/// Adds to a move's row which link it crossed and its bandwidth against that link's limit.
fn note_link(run: &mut PathRun, source: &TensorReport, link_for: &Bound<'_, PyAny>) -> PyResult<()> {
    if run.samples.is_empty() || run.bytes_moved == 0 {
        return Ok(());
    }
    let (kind, ordinal) = source.dlpack_device;
    // Host memory (pageable or page-locked) lies on no device.
    let ordinal = if matches!(kind, 1 | 3) { None } else { Some(ordinal) };
    let link = link_for.call1((ordinal, &run.path))?;
    if link.is_none() {
        return Ok(());
    }
    // The samples are seconds per call already: the row's own median (THE median, of
    // crates/core/src/stats.rs, which the table's bandwidth divides by), not divided by the loops again.
    let per = Timing::from_samples(run.samples.clone(), run.loops.max(1)).median;
    let rate = if per > 0.0 { run.bytes_moved as f64 / per } else { 0.0 };
    let get = |key: &str| link.call_method1("get", (key,));
    let mut text = format!("link: {}", get("name")?.str()?);
    let limit: Option<f64> = get("limit_Bps")?.extract()?;
    if let Some(limit) = limit.filter(|l| *l != 0.0) {
        // Three significant figures, as the table's GB/s column: a small copy is not "0.0 GB/s, 0%".
        let figures = |v: f64| crate::render::units::sig_figs(v, 3);
        text.push_str(&format!(
            "; {} GB/s is {}% of its {} GB/s per direction ({})",
            figures(rate / 1e9),
            figures(rate / limit * 100.0),
            figures(limit / 1e9),
            get("limit_source")?.str()?
        ));
    }
    run.notes.push(text);
    Ok(())
}

/// The core's [`crate::share::lab::PathLab`] over the lab's frameworks and the callables Python
/// supplies: a sweep's arrays (`make_source(size, shared)`), the path `auto` takes for one of them
/// (`auto_for(dlpack_device, nbytes, info)`) and the progress bar (`set_postfix_str`, `update`).
struct PyPathLab<'a, 'py> {
    lab: &'a Lab<'py>,
    already_there: bool,
    make_source: Option<&'a Bound<'py, PyAny>>,
    auto_for: Option<&'a Bound<'py, PyAny>>,
    progress: Option<&'a Bound<'py, PyAny>>,
}

impl<'py> crate::share::lab::PathLab for PyPathLab<'_, 'py> {
    type Source = SourceArray;
    type Kept = ShareResult;
    type MakeError = PyErr;
    type Error = PyErr;

    fn try_path(&mut self, source: &SourceArray, path: &str, is_auto: bool) -> PyResult<(PathRun, Option<ShareResult>)> {
        self.lab.try_path(&source.0, source.1.as_ref(), path, is_auto, self.already_there)
    }
    fn make_source(&mut self, size: u64, shared: bool) -> PyResult<PyResult<SourceArray>> {
        let make = self.make_source.ok_or_else(|| pyo3::exceptions::PyTypeError::new_err("this lab makes no arrays"))?;
        let py = make.py();
        match make.call1((size, shared)) {
            Ok(obj) => Ok(Ok((obj.clone().unbind(), self.lab.source.describe_py(py, &obj).ok()))),
            Err(e) if e.is_instance_of::<PyKeyboardInterrupt>(py) => Err(e),
            Err(e) => Ok(Err(e)),
        }
    }
    fn unmade(&mut self, path: &str, why: &PyErr) -> PyResult<PathRun> {
        let py = self.lab.route_for.py();
        failed_run(py, path, why.clone_ref(py))
    }
    fn auto_for(&mut self, source: &SourceArray) -> PyResult<Option<String>> {
        let (Some(auto_for), Some(info)) = (self.auto_for, source.1.as_ref()) else { return Ok(None) };
        let report = &info.get().report;
        let (chosen, _): (String, bool) = auto_for.call1((report.dlpack_device, report.payload_bytes(), info.bind(auto_for.py())))?.extract()?;
        Ok(Some(chosen))
    }
    fn measuring(&mut self, size: u64, path: &str) -> PyResult<()> {
        match self.progress {
            Some(progress) => progress.call_method1("set_postfix_str", (format!("{} {path}", size_label(size)),)).map(drop),
            None => Ok(()),
        }
    }
    fn measured(&mut self) -> PyResult<()> {
        match self.progress {
            Some(progress) => progress.call_method1("update", (1,)).map(drop),
            None => Ok(()),
        }
    }
    fn interrupted(error: &PyErr) -> bool {
        Python::attach(|py| error.is_instance_of::<PyKeyboardInterrupt>(py))
    }
}

/// Frees the device buffers the `copy` and `pinned` paths kept while the lab ran.
fn empty_cache(py: Python<'_>) {
    py.detach(crate::shared::clear_pool);
}

/// `compare`: every path in `paths` ("auto" among them stands for the path `auto` takes) for
/// `obj`, handed from adapter `source` to adapter `target`. The array is described once;
/// `auto_for(dlpack_device, nbytes, info)` answers `(auto's path, already_there)` for it.
#[pyfunction]
#[pyo3(signature = (obj, source, target, paths, auto_for, route_for, *, repeat, number, warmup, min_sample_time, link_for=None, predict_for=None))]
#[allow(clippy::too_many_arguments)]
pub fn compare_paths<'py>(
    py: Python<'py>,
    obj: Py<PyAny>,
    source: &Bound<'py, PyAny>,
    target: &Bound<'py, PyAny>,
    paths: Vec<String>,
    auto_for: &Bound<'py, PyAny>,
    route_for: Bound<'py, PyAny>,
    repeat: usize,
    number: Option<u64>,
    warmup: usize,
    min_sample_time: f64,
    link_for: Option<Bound<'py, PyAny>>,
    predict_for: Option<Bound<'py, PyAny>>,
) -> PyResult<Comparison> {
    let lab = Lab::new(source, target, route_for, link_for, predict_for, repeat, number, warmup, min_sample_time)?;
    let info = match lab.source.describe_py(py, obj.bind(py)) {
        Ok(info) => info,
        // What `gpushare.inspect` says of an array it cannot describe, as compare always said.
        Err(_) => py.import("gpushare.api")?.getattr("inspect")?.call1((&obj,))?.cast_into::<TensorInfo>()?.unbind(),
    };
    let report = &info.get().report;
    let (auto, already_there): (String, bool) = auto_for.call1((report.dlpack_device, report.payload_bytes(), &info))?.extract()?;
    let mut path_lab = PyPathLab { lab: &lab, already_there, make_source: None, auto_for: None, progress: None };
    let measured = crate::share::lab::compare(&mut path_lab, &(obj.clone_ref(py), Some(info.clone_ref(py))), &paths, &auto);
    empty_cache(py);
    let compared = measured?;
    let results = PyDict::new(py);
    for (path, result) in compared.kept {
        results.set_item(path, Py::new(py, result)?)?;
    }
    let runs = compared.runs;
    let report = ComparisonReport::from_input(ComparisonInput {
        source: info.get().report.clone(),
        target_framework: lab.target.name().to_string(),
        runs,
        repeat: repeat as u64,
        warmup: lab.warmup(),
    });
    Ok(Comparison::new(report, results.unbind()))
}

/// A sweep's source array and its description (`None`: each path's handoff describes it and says
/// why it cannot).
type SourceArray = (Py<PyAny>, Option<Py<TensorInfo>>);

/// `bench`: for each size, the arrays `make_source(size, shared)` makes (`shared`: the `shared`
/// path's, a SharedBuffer viewed by the source framework), each described once, handed through
/// every path; `autos` names the path `auto` takes at each size for an array like the sweep's,
/// and `auto_for(dlpack_device, nbytes, info)` (as `compare`'s) the path it takes for the array
/// the sweep made, which is the one marked (a share of that array takes it: JAX copies a NumPy
/// array that is not 64-byte aligned, so where the allocator placed it decides; with
/// `measure_auto`, a path it takes that the sweep does not hold is measured too). `progress` is a bar with `set_postfix_str` and
/// `update`. Ctrl-C stops the sweep: the result holds the points measured so far and says it was
/// interrupted.
#[pyfunction]
#[pyo3(signature = (source, target, sizes, paths, autos, already_there, make_source, route_for, progress, *,
                    dtype, device, repeat, number, warmup, min_sample_time, link_for=None, predict_for=None, auto_for=None,
                    measure_auto=false))]
#[allow(clippy::too_many_arguments)]
pub fn bench_paths<'py>(
    py: Python<'py>,
    source: &Bound<'py, PyAny>,
    target: &Bound<'py, PyAny>,
    sizes: Vec<u64>,
    paths: Vec<String>,
    autos: Vec<String>,
    already_there: bool,
    make_source: &Bound<'py, PyAny>,
    route_for: Bound<'py, PyAny>,
    progress: &Bound<'py, PyAny>,
    dtype: String,
    device: String,
    repeat: usize,
    number: Option<u64>,
    warmup: usize,
    min_sample_time: f64,
    link_for: Option<Bound<'py, PyAny>>,
    predict_for: Option<Bound<'py, PyAny>>,
    auto_for: Option<Bound<'py, PyAny>>,
    measure_auto: bool,
) -> PyResult<Benchmark> {
    if autos.len() != sizes.len() {
        return Err(pyo3::exceptions::PyValueError::new_err(format!("{} sizes but {} autos: one per size", sizes.len(), autos.len())));
    }
    let lab = Lab::new(source, target, route_for, link_for, predict_for, repeat, number, warmup, min_sample_time)?;
    let mut path_lab = PyPathLab {
        lab: &lab,
        already_there,
        make_source: Some(make_source),
        auto_for: auto_for.as_ref(),
        progress: Some(progress),
    };
    let plan = crate::share::lab::SweepPlan { sizes: &sizes, paths: &paths, autos: &autos, ask_auto: auto_for.is_some(), measure_auto };
    let swept = crate::share::lab::bench(&mut path_lab, &plan);
    empty_cache(py);
    let crate::share::lab::Swept { points, paths: measured_paths, interrupted } = swept?;
    let report = BenchmarkReport::from_input(BenchInput {
        source_framework: lab.source.name().to_string(),
        target_framework: lab.target.name().to_string(),
        dtype,
        device,
        sizes,
        paths: measured_paths,
        points,
        interrupted,
        repeat: repeat as u64,
        warmup: lab.warmup(),
    });
    Ok(Benchmark::new(report))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(compare_paths, m)?)?;
    m.add_function(wrap_pyfunction!(bench_paths, m)?)?;
    Ok(())
}
