//! `SharePlan`: one share, run in Rust; `PyFramework` and `PyRoute`, the core's `Framework` and
//! `Route` over the Python adapters (the lab's loop, binding/lab_run.rs, uses them too).
//!
//! `gpushare.share` works out once per (array type, target, path) who the adapters are, how to
//! convert and how to predict; the plan then runs every later share of that kind. Keeping the steps
//! between the framework calls in Rust is what keeps gpushare's cost per share to a few
//! microseconds: the same steps in Python cost about as much as JAX's own import.
//! Everything framework-specific stays in the Python adapters, which the plan calls back.

use super::vocabulary::PyPathKind;
use std::collections::BTreeMap;
use std::sync::Mutex;

use pyo3::exceptions::PyValueError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyString};

use super::errors::{PyGpushareErr, share_error};
use super::explain::{Predictor, prediction_from_py};
use super::own_copy::OwnCopy;
use super::declared::Declared;
use super::types::{ShareResult, TensorInfo};
use crate::explain::PredictedOutcome;
use crate::report::{StreamRequest, TensorReport};
use crate::share::timing::{self, Repeat, TimingPolicy};
use crate::share::{Framework, Handoff, Host, Options, Route, ShareError};
use crate::trace::Kind::Own;

use crate::dlpack::{DEVICE_CPU as DL_CPU, DEVICE_CUDA as DL_CUDA, DEVICE_CUDA_HOST as DL_CUDA_HOST};

/// A description in the pipeline: the report itself, which the result takes over. Its
/// `TensorInfo` is made only when Python asks the result for it (`ShareResult.source`): a share
/// whose result is never asked pays no Python object and no copy of the report for it.
pub struct Described(pub TensorReport);

impl AsRef<TensorReport> for Described {
    fn as_ref(&self) -> &TensorReport {
        &self.0
    }
}

impl From<Described> for TensorReport {
    fn from(described: Described) -> TensorReport {
        described.0
    }
}

/// The core's `Framework` over a Python adapter (`gpushare.adapters.Adapter`): tokenizers'
/// `CustomNormalizer { inner: PyObject }` pattern.
pub struct PyFramework {
    adapter: Py<PyAny>,
    name: String,
    /// How the adapter says its arrays are described, and which flags its `check_source` reads.
    declared: Py<Declared>,
    /// Whether the adapter overrides `check_source`: skipped otherwise.
    checks_source: bool,
    /// Whether the adapter overrides `current_stream`.
    has_streams: bool,
    /// The adapter's `import_settles_later`.
    settles_later: bool,
    /// The adapter's `views_gpushare_buffers`.
    views_own_buffers: bool,
    /// The adapter's `queues_host_work`.
    queues_host_work: bool,
    /// The adapter's `copy_by_producer`.
    copy_by_producer: bool,
}

impl PyFramework {
    pub fn new(adapter: &Bound<'_, PyAny>) -> PyResult<PyFramework> {
        let py = adapter.py();
        let name: String = adapter.getattr(intern!(py, "name"))?.extract()?;
        let base = py.import("gpushare.adapters")?.getattr("Adapter")?;
        let overrides = |method: &Bound<'_, PyString>| -> PyResult<bool> {
            Ok(!adapter.get_type().getattr(method)?.is(&base.getattr(method)?))
        };
        Ok(PyFramework {
            declared: Declared::of(adapter)?,
            checks_source: overrides(intern!(py, "check_source"))?,
            has_streams: overrides(intern!(py, "current_stream"))?,
            settles_later: adapter.getattr(intern!(py, "import_settles_later"))?.is_truthy()?,
            views_own_buffers: adapter.getattr(intern!(py, "views_gpushare_buffers"))?.is_truthy()?,
            queues_host_work: adapter.getattr(intern!(py, "queues_host_work"))?.is_truthy()?,
            copy_by_producer: adapter.getattr(intern!(py, "copy_by_producer"))?.is_truthy()?,
            adapter: adapter.clone().unbind(),
            name,
        })
    }

    fn call(&self, py: Python<'_>, method: &Bound<'_, PyString>, array: &Py<PyAny>) -> crate::share::Result<Py<PyAny>> {
        self.adapter.bind(py).call_method1(method, (array.bind(py),)).map(Bound::unbind).map_err(|e| share_error(py, e))
    }

    /// The description of `obj`: the route its adapter declares where it applies, else the
    /// adapter's `inspect`, which says why in a sentence where the array cannot be described.
    pub fn describe_py(&self, py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<Py<TensorInfo>> {
        match self.declared.get().describe(py, obj, self.adapter.bind(py))? {
            Some(report) => Py::new(py, TensorInfo { report }),
            None => self.inspect(py, obj),
        }
    }

    /// [`PyFramework::describe_py`] as the report alone, for the pipeline.
    pub fn describe_report(&self, py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<TensorReport> {
        match self.declared.get().describe(py, obj, self.adapter.bind(py))? {
            Some(report) => Ok(report),
            None => Ok(self.inspect(py, obj)?.get().report.clone()),
        }
    }

    fn inspect(&self, py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<Py<TensorInfo>> {
        let info = self.adapter.bind(py).call_method1(intern!(py, "inspect"), (obj,))?;
        Ok(info.cast_into::<TensorInfo>()?.unbind())
    }
}

impl Framework for PyFramework {
    type Array = Py<PyAny>;
    type Info = Described;

    fn name(&self) -> &str {
        &self.name
    }

    fn describe(&self, array: &Py<PyAny>) -> crate::share::Result<Described> {
        Python::attach(|py| self.describe_report(py, array.bind(py)).map(Described).map_err(|e| share_error(py, e)))
    }

    fn check_source(&self, array: &Py<PyAny>, target: &str, path: &str) -> crate::share::Result<()> {
        if !self.checks_source {
            return Ok(());
        }
        Python::attach(|py| {
            // The flags the adapter says its check_source looks at, read here without a call into
            // Python: an array with none of them set needs no second look.
            let declared = self.declared.get();
            if declared.has_source_flags() && declared.source_flags_clear(py, array.bind(py)) {
                return Ok(());
            }
            self.adapter
                .bind(py)
                .call_method1(intern!(py, "check_source"), (array.bind(py), target, path))
                .map(drop)
                .map_err(|e| share_error(py, e))
        })
    }

    fn synchronize(&self, array: &Py<PyAny>) -> crate::share::Result<()> {
        Python::attach(|py| self.call(py, intern!(py, "synchronize"), array).map(drop))
    }

    fn import_settles_later(&self) -> bool {
        self.settles_later
    }

    fn views_gpushare_buffers(&self) -> bool {
        self.views_own_buffers
    }

    fn queues_host_work(&self) -> bool {
        self.queues_host_work
    }

    fn copy_by_producer(&self) -> bool {
        self.copy_by_producer
    }

    fn current_stream(&self, array: &Py<PyAny>) -> crate::share::Result<Option<u64>> {
        if !self.has_streams {
            return Ok(None);
        }
        Python::attach(|py| {
            let stream = self.call(py, intern!(py, "current_stream"), array)?;
            stream.extract::<Option<u64>>(py).map_err(|e| share_error(py, e))
        })
    }
}

/// A transfer path: the conversion function the Python side built for the pair.
pub struct PyRoute {
    path: String,
    kind: crate::paths::PathKind,
    convert: Py<PyAny>,
    /// The route's `ordering` attribute (paths.py `_ordered`), read once.
    ordering: Option<String>,
    /// `convert.take_notes`, where the route says what it did around the framework's call (a
    /// route guarded for the current device: `gpushare.devices`).
    notes: Option<Py<PyAny>>,
    /// The route inside that guard (`DeviceGuarded.convert`): called directly while the source's
    /// device is current, which the driver answers in two calls where the guard's Python costs
    /// microseconds (the framework's own current-device query among them).
    unguarded: Option<Py<PyAny>>,
    /// Whether the guarded route ran since the notes were last taken: only it writes notes, so
    /// `take_notes` (a call into Python) is skipped when it did not.
    guard_ran: std::sync::atomic::AtomicBool,
    /// Whether the route inside the guard has `take_notes` of its own: then notes are always taken.
    inner_notes: bool,
    /// Why `auto` took this route, where the result must say (the last note of every share).
    chosen_why: Option<String>,
    /// gpushare's own copy to another device, run from the pipeline's description of the source
    /// where the route runs unguarded (binding/own_copy.rs).
    own_copy: Option<OwnCopy>,
}

impl PyRoute {
    pub fn new(py: Python<'_>, path: String, convert: Py<PyAny>) -> PyRoute {
        // A route `auto` chose for a reason the result must give (paths.py `ChosenRoute`): the reason is
        // read once and the route inside is called directly. Through the wrapper every share paid a
        // Python call and a second one for its notes, more than the legacy capsule `auto` took for
        // its speed saves (numpy→torch on a CPU).
        let chosen = py.import("gpushare.paths").and_then(|m| m.getattr("ChosenRoute")).ok();
        let (convert, chosen_why) = match chosen {
            Some(chosen) if convert.bind(py).is_instance(&chosen).unwrap_or(false) => {
                let wrapper = convert.bind(py);
                match (wrapper.getattr(intern!(py, "convert")), wrapper.getattr(intern!(py, "why")).and_then(|w| w.extract::<String>())) {
                    (Ok(inner), Ok(why)) => (inner.unbind(), Some(why)),
                    _ => (convert, None),
                }
            }
            _ => (convert, None),
        };
        let bound = convert.bind(py);
        let guard = py.import("gpushare.devices").and_then(|m| m.getattr("DeviceGuarded")).ok();
        let unguarded = match guard {
            Some(guard) if bound.is_instance(&guard).unwrap_or(false) => bound.getattr(intern!(py, "convert")).ok().map(Bound::unbind),
            _ => None,
        };
        // An inner route that keeps notes of its own (Warp's import: it started Warp's runtime) is asked every time.
        let inner_notes = unguarded.as_ref().is_some_and(|u| u.bind(py).hasattr("take_notes").unwrap_or(false));
        let own_copy = OwnCopy::of(py, unguarded.as_ref().map_or(bound, |u| u.bind(py)));
        PyRoute {
            ordering: bound.getattr(intern!(py, "ordering")).ok().and_then(|o| o.extract().ok()),
            notes: bound.getattr("take_notes").ok().map(Bound::unbind),
            guard_ran: std::sync::atomic::AtomicBool::new(inner_notes),
            inner_notes,
            chosen_why,
            own_copy,
            unguarded,
            path,
            kind: crate::paths::PathKind::Share,
            convert,
        }
    }

    /// The route as a path of `kind` in the path table (a move's `dlpack` copies by design).
    pub fn with_kind(self, kind: crate::paths::PathKind) -> PyRoute {
        PyRoute { kind, ..self }
    }
}

impl Route<Py<PyAny>> for PyRoute {
    fn path(&self) -> &str {
        &self.path
    }

    fn kind(&self) -> crate::paths::PathKind {
        self.kind
    }

    fn take_notes(&self) -> Vec<String> {
        let mut notes = self.route_notes();
        notes.extend(self.chosen_why.iter().cloned());
        notes
    }

    fn convert(&self, array: &Py<PyAny>) -> crate::share::Result<Py<PyAny>> {
        self.guard_ran.store(true, std::sync::atomic::Ordering::Relaxed);
        Python::attach(|py| self.convert.bind(py).call1((array.bind(py),)).map(Bound::unbind).map_err(|e| share_error(py, e)))
    }

    fn convert_described(&self, array: &Py<PyAny>, source: &TensorReport) -> crate::share::Result<Py<PyAny>> {
        let convert = self.conversion_for(source);
        // The own copy runs from the description where the guard would do nothing (a guarded
        // route makes the source's device current for the framework's stream query).
        let guarded = self.unguarded.is_some() && std::ptr::eq(convert, &self.convert);
        Python::attach(|py| {
            let array = array.bind(py);
            if let (Some(own), false) = (&self.own_copy, guarded)
                && let Some(done) = own.convert(py, array, source)
            {
                return done.map_err(|e| share_error(py, e));
            }
            convert.bind(py).call1((array,)).map(Bound::unbind).map_err(|e| share_error(py, e))
        })
    }

    fn ordering(&self) -> Option<&str> {
        self.ordering.as_deref()
    }

    fn convert_recorded(&self, array: &Py<PyAny>, source: &TensorReport) -> crate::share::Result<(Py<PyAny>, Vec<StreamRequest>)> {
        if self.path != "dlpack" {
            return Ok((self.convert_described(array, source)?, Vec::new()));
        }
        let convert = self.conversion_for(source);
        Python::attach(|py| {
            let recorder = Py::new(py, StreamRecorder { obj: array.clone_ref(py), requests: Mutex::new(Vec::new()) })
                .map_err(|e| share_error(py, e))?;
            let value = convert.bind(py).call1((recorder.bind(py),)).map_err(|e| share_error(py, e))?;
            let requests = recorder.get().requests.lock().map(|r| r.clone()).unwrap_or_default();
            Ok((value.unbind(), requests))
        })
    }
}

impl PyRoute {
    /// What the route itself says it did (its `take_notes`), where it may have said something.
    fn route_notes(&self) -> Vec<String> {
        let Some(take) = &self.notes else { return Vec::new() };
        if self.unguarded.is_some() && !self.guard_ran.swap(false, std::sync::atomic::Ordering::Relaxed) && !self.inner_notes {
            return Vec::new();
        }
        // Advisory: a note that cannot be read is left out, never a failed share.
        Python::attach(|py| take.call0(py).and_then(|n| n.extract(py)).unwrap_or_default())
    }

    /// The conversion to call for an array that `source` describes: the route without its
    /// current-device guard where the guard would do nothing, else the guarded route (and then
    /// the route's notes are read).
    fn conversion_for(&self, source: &TensorReport) -> &Py<PyAny> {
        let (device_type, ordinal) = source.dlpack_device;
        match &self.unguarded {
            // Host memory (pageable or page-locked) has no device to make current: the guard does
            // nothing there. For device memory the current device is asked before every call: a
            // conversion may itself change it (JAX's backends start on first use and make the last
            // GPU current).
            Some(inner)
                if matches!(device_type, DL_CPU | DL_CUDA_HOST)
                    || (device_type == DL_CUDA && crate::cuda::current_device() == Some(ordinal)) =>
            {
                inner
            }
            _ => {
                self.guard_ran.store(true, std::sync::atomic::Ordering::Relaxed);
                &self.convert
            }
        }
    }
}

/// Stands in for the source during one observed handoff and records what the consumer asked its
/// `__dlpack__` for: the stream argument is how DLPack orders work between frameworks.
#[pyclass(module = "gpushare", frozen, name = "StreamRecorder")]
pub struct StreamRecorder {
    obj: Py<PyAny>,
    requests: Mutex<Vec<StreamRequest>>,
}

#[pymethods]
impl StreamRecorder {
    #[pyo3(signature = (**kwargs))]
    fn __dlpack__<'py>(&self, py: Python<'py>, kwargs: Option<&Bound<'py, PyDict>>) -> PyResult<Bound<'py, PyAny>> {
        let mut request = StreamRequest::default();
        if let Some(kw) = kwargs {
            // A stream that is not an integer (a framework's stream object) reads as None.
            request.stream = kw.get_item("stream")?.and_then(|s| s.extract::<i64>().ok());
            request.max_version = kw.get_item("max_version")?.and_then(|v| v.extract::<(u32, u32)>().ok());
        }
        if let Ok(mut r) = self.requests.lock() {
            r.push(request);
        }
        self.obj.bind(py).call_method(intern!(py, "__dlpack__"), (), kwargs)
    }

    fn __dlpack_device__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.obj.bind(py).call_method0(intern!(py, "__dlpack_device__"))
    }

    /// Everything else is the source's: a route may ask the array for its device (the current-
    /// device guard of gpushare.devices calls `get_device()` or reads `.device`) before exporting.
    fn __getattr__<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
        self.obj.bind(py).getattr(name)
    }
}

/// The interpreter around the pipeline: Ctrl-C, the garbage collector, the allocators' figures.
pub struct PyHost {
    /// `gpushare.ledger.allocator_memory(ordinal)`, or None.
    pub allocators: Option<Py<PyAny>>,
}

static GC: PyOnceLock<(Py<PyAny>, Py<PyAny>, Py<PyAny>)> = PyOnceLock::new();

fn gc(py: Python<'_>) -> Option<&(Py<PyAny>, Py<PyAny>, Py<PyAny>)> {
    GC.get_or_try_init(py, || -> PyResult<_> {
        let gc = py.import("gc")?;
        Ok((gc.getattr("isenabled")?.unbind(), gc.getattr("disable")?.unbind(), gc.getattr("enable")?.unbind()))
    })
    .ok()
}

impl Host for PyHost {
    fn check_interrupt(&self) -> crate::share::Result<()> {
        Python::attach(|py| py.check_signals().map_err(|e| ShareError::Interrupted(Box::new(e))))
    }

    fn pause_collector(&self) -> bool {
        Python::attach(|py| {
            let Some((enabled, disable, _)) = gc(py) else { return false };
            let was = enabled.call0(py).and_then(|v| v.is_truthy(py)).unwrap_or(false);
            was && disable.call0(py).is_ok()
        })
    }

    fn resume_collector(&self) {
        Python::attach(|py| {
            if let Some((_, _, enable)) = gc(py) {
                let _ = enable.call0(py);
            }
        })
    }

    fn allocator_memory(&self, ordinal: i32) -> BTreeMap<String, BTreeMap<String, i64>> {
        let Some(probe) = &self.allocators else { return BTreeMap::new() };
        // The ledger is advisory: a probe that fails gives no figures, never a failed share.
        Python::attach(|py| probe.call1(py, (ordinal,)).and_then(|m| m.extract(py)).unwrap_or_default())
    }
}

/// The prediction step: the Rust rules (`Predictor`), or any callable (tests stand in wrong rules).
pub enum PredictStep {
    Native(Py<Predictor>),
    Callable(Py<PyAny>),
}

impl PredictStep {
    /// The step for `predictor`: the Rust rules, any other callable, or None (no prediction).
    pub fn of(predictor: Option<Bound<'_, PyAny>>) -> Option<PredictStep> {
        predictor.filter(|p| !p.is_none()).map(|p| match p.cast::<Predictor>() {
            Ok(native) => PredictStep::Native(native.clone().unbind()),
            Err(_) => PredictStep::Callable(p.unbind()),
        })
    }

    pub fn predict(&self, py: Python<'_>, source: &TensorReport) -> PyResult<Option<PredictedOutcome>> {
        match self {
            PredictStep::Native(p) => Ok(Some(p.get().predict(py, source)?.to_outcome())),
            PredictStep::Callable(f) => {
                let info = Py::new(py, TensorInfo { report: source.clone() })?;
                let p = f.call1(py, (info,))?;
                if p.is_none(py) { Ok(None) } else { Ok(Some(prediction_from_py(p.bind(py))?.to_outcome())) }
            }
        }
    }
}

/// One kind of share, planned: the source and target frameworks, the route, and the prediction.
/// `gpushare.share` makes one per (array type, target, path); `compare` and `bench` one per path.
/// ``allocators(ordinal)`` returns the imported frameworks' allocator figures for the memory ledger.
#[pyclass(module = "gpushare", frozen, name = "SharePlan")]
pub struct SharePlan {
    source: PyFramework,
    target: PyFramework,
    route: PyRoute,
    predict: Option<PredictStep>,
    check_source: bool,
    host: PyHost,
    /// For `auto` within the array's device: ``route_for(path)`` → ``(convert, check_source)``, the
    /// route of another path, for an array whose own `auto` (`Predictor::auto_for`, the one the
    /// prediction reads) is not the path this plan was made with. `None`: the route always runs.
    route_for: Option<Py<PyAny>>,
    /// The routes `route_for` built, by path and the note their shares carry (why `auto` took the
    /// path for such arrays), made once each.
    others: Mutex<Vec<(String, Option<String>, std::sync::Arc<(PyRoute, bool)>)>>,
    /// For `auto` of a move (`device=`): the path is decided for each array, in the core, from
    /// where it lies and its size, and the route and prediction are those of the path that runs.
    moving: Option<MovePlan>,
}

/// `auto` of a move decided per array: the planner's moves' `auto` for the destination, and
/// ``route_for(path, already_there)`` → ``(convert, check_source, predictor)``, the route of each
/// path it takes (``already_there``: the array lies at the destination), made once each.
struct MovePlan {
    auto: super::paths::MoveAuto,
    route_for: Py<PyAny>,
    routes: Mutex<Vec<(&'static str, bool, std::sync::Arc<MoveRoute>)>>,
}

/// ``SharePlan(move_auto=(planner, destination, route_for))``.
type MoveAutoArgument<'py> = (PyRef<'py, super::paths::PyPlanner>, (u32, i32), Py<PyAny>);

struct MoveRoute {
    route: PyRoute,
    check_source: bool,
    predict: Option<PredictStep>,
}

impl SharePlan {
    pub(crate) fn handoff_run(&self, obj: Py<PyAny>, options: &Options) -> PyResult<ShareResult> {
        let predictor = |source: &TensorReport| -> crate::share::Result<Option<PredictedOutcome>> {
            match &self.predict {
                None => Ok(None),
                Some(step) => Python::attach(|py| step.predict(py, source).map_err(|e| share_error(py, e))),
            }
        };
        let handoff = Handoff {
            source: &self.source,
            target: &self.target,
            route: &self.route,
            predictor: Some(&predictor),
            check_source: self.check_source,
        };
        crate::trace::mark("start", Own);
        let outcome = match self.per_array_auto() {
            None if self.moving.is_some() => (|| {
                options.timing.validate().map_err(crate::share::Error::Usage)?;
                let source = handoff.describe(&obj)?;
                crate::trace::mark("describe the source", Own);
                let chosen = self.move_route(&obj, source.as_ref())?;
                crate::trace::mark("plan: auto for this array", Own);
                let predict = |described: &TensorReport| -> crate::share::Result<Option<PredictedOutcome>> {
                    match &chosen.predict {
                        None => Ok(None),
                        Some(step) => Python::attach(|py| step.predict(py, described).map_err(|e| share_error(py, e))),
                    }
                };
                let handoff = Handoff { route: &chosen.route, check_source: chosen.check_source, predictor: Some(&predict), ..handoff };
                let (source, predicted) = handoff.prepare_described(&obj, source)?;
                handoff.convert_prepared(&self.host, &obj, source, predicted, options)
            })(),
            None => handoff.run(&self.host, &obj, options),
            Some(auto) => (|| {
                options.timing.validate().map_err(crate::share::Error::Usage)?;
                let source = handoff.describe(&obj)?;
                crate::trace::mark("describe the source", Own);
                let predictor = auto.get();
                // The producer's stream is asked (the driver's cuStreamQuery, which never waits)
                // only where its state changes `auto`'s pick for arrays like this one.
                let busy = predictor.follows_producer(source.as_ref()) && {
                    let busy = self.producer_busy(&obj, source.as_ref())?;
                    crate::trace::mark("plan: the producer's state", crate::trace::Kind::Driver);
                    busy
                };
                let decision = Python::attach(|py| predictor.decide(py, source.as_ref(), busy).map_err(|e| share_error(py, e)))
                    .map_err(|e| e.explain(crate::share::Stage::Inspect, self.source.name(), self.target.name(), "auto", None))?;
                crate::trace::mark("plan: auto for this array, and its prediction", Own);
                // The prediction, made with the same facts, is of the path `auto` takes for this
                // array in this state: the handoff's predict step hands it over.
                let chosen = &decision.chosen;
                let known = |_: &TensorReport| -> crate::share::Result<Option<PredictedOutcome>> { Ok(Some(decision.predicted.clone())) };
                let handoff = Handoff { predictor: Some(&known), ..handoff };
                if chosen.path == self.route.path && chosen.why == self.route.chosen_why {
                    let (source, predicted) = handoff.prepare_described(&obj, source)?;
                    return handoff.convert_prepared(&self.host, &obj, source, predicted, options);
                }
                // This array's own `auto` differs from the plan's (where it lies, its dtype, layout
                // or size, or the producer's state change it), or carries its own words: the path
                // predicted is the path that runs.
                let other = Python::attach(|py| self.other_route(py, chosen.path, chosen.why.as_deref()))
                    .map_err(|e| Python::attach(|py| share_error(py, e)))?;
                let (route, check_source) = &*other;
                let handoff = Handoff { route, check_source: *check_source, ..handoff };
                let (source, predicted) = handoff.prepare_described(&obj, source)?;
                handoff.convert_prepared(&self.host, &obj, source, predicted, options)
            })(),
        }
        .map_err(PyGpushareErr::from)?;
        // What the pipeline's closures held goes here (a prediction, a route's handle).
        crate::trace::mark("the pipeline's end", Own);
        let result = ShareResult::from_outcome(outcome.value, outcome.report);
        crate::trace::mark("the result object", Own);
        Ok(result)
    }

    /// Whether the producer's stream of `obj` (described by `source`) has work queued: the
    /// driver's `cuStreamQuery`, which does not wait. Not busy where nobody can say (a framework
    /// without a current stream, such as JAX; no CUDA driver): nothing is assumed.
    fn producer_busy(&self, obj: &Py<PyAny>, source: &TensorReport) -> crate::share::Result<bool> {
        let Some(handle) = self.source.current_stream(obj)? else { return Ok(false) };
        // The default streams (0, 1, 2) are the current context's: the array's device says which.
        let ordinal = if handle <= 2 { source.dlpack_device.1 } else { 0 };
        Ok(crate::cuda::Stream::external(handle, ordinal).is_done().is_ok_and(|done| !done))
    }

    /// The route of the path THE `auto` moves `obj` (described by `source`) by, made once per path
    /// and whether the array already lies at the destination.
    fn move_route(&self, obj: &Py<PyAny>, source: &TensorReport) -> crate::share::Result<std::sync::Arc<MoveRoute>> {
        let moving = self.moving.as_ref().expect("asked only of a move plan");
        let here = crate::paths::Place::of_dlpack(source.dlpack_device) == crate::paths::Place::of_dlpack(moving.auto.destination);
        let nbytes = moving.auto.weighs_sizes().then_some(source.payload_bytes());
        let path = Python::attach(|py| {
            moving.auto.path(
                py,
                self.source.adapter.bind(py),
                self.target.adapter.bind(py),
                source.dlpack_device,
                nbytes,
                || self.producer_busy(obj, source),
                |e| share_error(py, e),
            )
        })?;
        if let Ok(routes) = moving.routes.lock()
            && let Some((.., route)) = routes.iter().find(|(p, h, _)| *p == path && *h == here)
        {
            return Ok(route.clone());
        }
        let made = Python::attach(|py| -> PyResult<MoveRoute> {
            let (convert, check_source, predictor): (Py<PyAny>, bool, Option<Bound<'_, PyAny>>) =
                moving.route_for.bind(py).call1((path, here))?.extract()?;
            let route = PyRoute::new(py, path.to_string(), convert).with_kind(crate::paths::PathKind::Move);
            Ok(MoveRoute { route, check_source, predict: PredictStep::of(predictor) })
        })
        .map_err(|e| Python::attach(|py| share_error(py, e)))?;
        let made = std::sync::Arc::new(made);
        if let Ok(mut routes) = moving.routes.lock() {
            routes.push((path, here, made.clone()));
        }
        Ok(made)
    }

    /// The predictor that decides `auto` per array, where this plan follows it.
    fn per_array_auto(&self) -> Option<&Py<Predictor>> {
        match (&self.route_for, &self.predict) {
            (Some(_), Some(PredictStep::Native(p))) if p.get().resolves_auto() => Some(p),
            _ => None,
        }
    }

    /// The route of `path` (made by `route_for` once), with `why` as the note every share by it
    /// carries.
    fn other_route(&self, py: Python<'_>, path: &str, why: Option<&str>) -> PyResult<std::sync::Arc<(PyRoute, bool)>> {
        if let Ok(others) = self.others.lock()
            && let Some((.., route)) = others.iter().find(|(p, w, _)| p == path && w.as_deref() == why)
        {
            return Ok(route.clone());
        }
        let route_for = self.route_for.as_ref().expect("asked only where per_array_auto found it");
        let (convert, check_source): (Py<PyAny>, bool) = route_for.call1(py, (path,))?.extract(py)?;
        let mut route = PyRoute::new(py, path.to_string(), convert);
        if why.is_some() {
            route.chosen_why = why.map(str::to_string);
        }
        let made = std::sync::Arc::new((route, check_source));
        if let Ok(mut others) = self.others.lock() {
            others.push((path.to_string(), why.map(str::to_string), made.clone()));
        }
        Ok(made)
    }
}

/// The timing policy that keyword arguments describe (see `SharePlan.run`).
pub fn policy(
    repeat: Option<usize>,
    number: Option<u64>,
    warmup: usize,
    budget: Option<f64>,
    min_sample_time: Option<f64>,
    pause_collector: bool,
) -> PyResult<TimingPolicy> {
    let mut policy = match budget {
        Some(budget) => TimingPolicy::within(budget),
        None if repeat.unwrap_or(1) == 1 && number == Some(1) && warmup == 0 => TimingPolicy::once(),
        None => TimingPolicy {
            warmup,
            number,
            repeat: Repeat::Exactly(repeat.unwrap_or(1)),
            min_sample_time: min_sample_time.unwrap_or(0.01),
            max_overhead: timing::MAX_OVERHEAD,
            pause_collector,
        },
    };
    if budget.is_some() {
        policy.warmup = warmup.max(policy.warmup);
        if let Some(r) = repeat {
            policy.repeat = Repeat::Exactly(r);
        }
        if number.is_some() {
            policy.number = number;
        }
        if let Some(m) = min_sample_time {
            policy.min_sample_time = m;
        }
        policy.pause_collector = pause_collector;
    }
    policy.validate().map_err(PyValueError::new_err)?;
    Ok(policy)
}

#[pymethods]
impl SharePlan {
    #[new]
    /// ``kind``: the path's kind in the path table (``share``, ``move``): a move's ``dlpack`` copies by design.
    /// ``route_for``: for a plan of ``auto`` within the array's device, ``route_for(path)`` →
    /// ``(convert, check_source)`` builds another path's route, taken for an array whose own
    /// ``auto`` (the path its prediction is made for) is another path.
    /// ``move_auto``: for a plan of ``auto`` with ``device=``, ``(planner, destination,
    /// route_for)``: the move's path is decided for each array by the planner's ``move_auto`` for
    /// ``destination`` (DLPack's ``(device_type, id)``), and ``route_for(path, already_there)`` →
    /// ``(convert, check_source, predictor)`` builds the route of each path taken.
    #[pyo3(signature = (source, target, path, convert, predictor=None, allocators=None, check_source=true, kind=PyPathKind(crate::paths::PathKind::Share), route_for=None,
                        move_auto=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        source: &Bound<'_, PyAny>,
        target: &Bound<'_, PyAny>,
        path: String,
        convert: Py<PyAny>,
        predictor: Option<&Bound<'_, PyAny>>,
        allocators: Option<Py<PyAny>>,
        check_source: bool,
        kind: PyPathKind,
        route_for: Option<Py<PyAny>>,
        move_auto: Option<MoveAutoArgument<'_>>,
    ) -> PyResult<SharePlan> {
        let kind = kind.0;
        let predict = PredictStep::of(predictor.cloned());
        Ok(SharePlan {
            source: PyFramework::new(source)?,
            target: PyFramework::new(target)?,
            route: PyRoute::new(source.py(), path, convert).with_kind(kind),
            predict,
            check_source,
            host: PyHost { allocators: allocators.filter(|a| !a.is_none(source.py())) },
            route_for: route_for.filter(|r| !r.is_none(source.py())),
            others: Mutex::new(Vec::new()),
            moving: move_auto.map(|(planner, destination, route_for)| MovePlan {
                auto: planner.move_auto_to(source.py(), destination),
                route_for,
                routes: Mutex::new(Vec::new()),
            }),
        })
    }

    #[getter]
    fn path(&self) -> &str {
        &self.route.path
    }

    /// Shares ``obj`` through the pipeline of the Rust core: describe, check, predict, refuse
    /// what would crash the target, convert under the timing policy, describe the result, judge.
    ///
    /// Timing: by default one conversion, reported as one sample. ``budget`` (seconds) times it the
    /// way ``%timeit`` does within that budget (a warm-up, then auto-ranged samples); otherwise
    /// ``repeat`` samples of ``number`` conversions (``None``: auto-ranged so a sample lasts
    /// ``min_sample_time``) after ``warmup`` runs. ``observe`` collects the memory ledger and the
    /// stream report of a handoff of device memory.
    #[pyo3(signature = (obj, repeat=None, number=Some(1), name=None, origin=None, *, warmup=0, budget=None,
                        min_sample_time=None, observe=false))]
    #[allow(clippy::too_many_arguments)]
    fn run(
        &self,
        obj: Py<PyAny>,
        repeat: Option<usize>,
        number: Option<u64>,
        name: Option<String>,
        origin: Option<Py<TensorInfo>>,
        warmup: usize,
        budget: Option<f64>,
        min_sample_time: Option<f64>,
        observe: bool,
    ) -> PyResult<ShareResult> {
        let timing = policy(repeat, number, warmup, budget, min_sample_time, true)?;
        let options = Options { timing, observe, name, origin: origin.map(|o| o.get().report.clone()) };
        self.handoff_run(obj, &options)
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<SharePlan>()?;
    m.add_class::<StreamRecorder>()?;
    m.add_function(wrap_pyfunction!(super::declared::describe_declared, m)?)?;
    Ok(())
}
