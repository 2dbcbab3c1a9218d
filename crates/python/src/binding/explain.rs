//! Predictions before a conversion: `Prediction` and `Predictor` over `crate::explain::predict`.

use pyo3::IntoPyObjectExt;
use pyo3::exceptions::{PyIndexError, PyValueError};
use pyo3::prelude::*;
use pyo3::pyclass::CompareOp;
use pyo3::types::{PyDict, PyTuple};

use super::types::TensorInfo;
use crate::explain::{self, FrameworkFacts, LiveFact, PredictedOutcome, Settings, TargetFacts};
use crate::report::{TensorReport, Verdict};

/// What a handoff is predicted to do: ``(verdict, reason, fix, expected_error)``.
///
/// ``verdict`` is ``"shared"``, ``"copied"`` or ``"failed"``; ``reason`` why it copies or fails (or a
/// note on a share, e.g. a writable view of read-only memory); ``fix`` for a failure;
/// ``expected_error`` the words the framework is expected to use in its error message. Behaves as a
/// 4-tuple (indexing, unpacking, equality with tuples).
#[pyclass(module = "gpushare", frozen, name = "Prediction", sequence)]
#[derive(Debug, Clone, PartialEq)]
pub struct Prediction {
    pub verdict: Verdict,
    pub reason: Option<String>,
    pub fix: Option<String>,
    pub expected_error: Option<String>,
}

impl Prediction {
    pub fn from_outcome(o: PredictedOutcome) -> Prediction {
        let verdict = o.verdict();
        match o {
            PredictedOutcome::Shared { note } => Prediction { verdict, reason: note, fix: None, expected_error: None },
            PredictedOutcome::Copied { reason } => {
                Prediction { verdict, reason: Some(reason), fix: None, expected_error: None }
            }
            PredictedOutcome::Failed { reason, expected_error, fix } => {
                Prediction { verdict, reason: Some(reason), fix: Some(fix), expected_error }
            }
        }
    }

    /// The core's form, for the pipeline.
    pub fn to_outcome(&self) -> PredictedOutcome {
        let reason = self.reason.clone().unwrap_or_default();
        match self.verdict {
            Verdict::Shared => PredictedOutcome::Shared { note: self.reason.clone() },
            Verdict::Copied => PredictedOutcome::Copied { reason },
            Verdict::Failed => PredictedOutcome::Failed {
                reason,
                expected_error: self.expected_error.clone(),
                fix: self.fix.clone().unwrap_or_default(),
            },
        }
    }

    /// What a ShareResult keeps of it.
    pub fn summary(&self) -> crate::report::Prediction {
        crate::report::Prediction { verdict: self.verdict, reason: self.reason.clone() }
    }

    fn as_tuple<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(
            py,
            [
                super::vocabulary::PyVerdict(self.verdict).into_bound_py_any(py)?,
                self.reason.as_deref().into_bound_py_any(py)?,
                self.fix.as_deref().into_bound_py_any(py)?,
                self.expected_error.as_deref().into_bound_py_any(py)?,
            ],
        )
    }
}

/// A Prediction, or any sequence whose items are ``(verdict, reason[, fix[, expected_error]])``.
pub fn prediction_from_py(obj: &Bound<'_, PyAny>) -> PyResult<Prediction> {
    if let Ok(p) = obj.cast::<Prediction>() {
        return Ok(p.get().clone());
    }
    let len = obj.len()?;
    let item = |i: usize| -> PyResult<Option<String>> { if i < len { obj.get_item(i)?.extract() } else { Ok(None) } };
    let verdict = obj.get_item(0)?.extract::<super::vocabulary::PyVerdict>()?.0;
    Ok(Prediction { verdict, reason: item(1)?, fix: item(2)?, expected_error: item(3)? })
}

#[pymethods]
impl Prediction {
    #[new]
    #[pyo3(signature = (verdict, reason=None, fix=None, expected_error=None))]
    fn new(verdict: super::vocabulary::PyVerdict, reason: Option<String>, fix: Option<String>, expected_error: Option<String>) -> Self {
        Prediction { verdict: verdict.0, reason, fix, expected_error }
    }
    #[getter]
    fn verdict(&self) -> super::vocabulary::PyVerdict {
        super::vocabulary::PyVerdict(self.verdict)
    }
    #[getter]
    fn reason(&self) -> Option<&str> {
        self.reason.as_deref()
    }
    #[getter]
    fn fix(&self) -> Option<&str> {
        self.fix.as_deref()
    }
    #[getter]
    fn expected_error(&self) -> Option<&str> {
        self.expected_error.as_deref()
    }
    fn __len__(&self) -> usize {
        4
    }
    /// By position, as the 4-tuple it is, or by field name (``p["verdict"]``), as the dict a
    /// share's prediction once was.
    fn __getitem__<'py>(&self, py: Python<'py>, key: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        if let Ok(name) = key.cast::<pyo3::types::PyString>() {
            let index = ["verdict", "reason", "fix", "expected_error"].iter().position(|field| name == *field);
            return match index {
                Some(i) => self.__getitem__(py, &i.into_bound_py_any(py)?),
                None => Err(pyo3::exceptions::PyKeyError::new_err(name.clone().unbind())),
            };
        }
        let index: isize = key.extract()?;
        let i = if index < 0 { index + 4 } else { index };
        match i {
            0 => super::vocabulary::PyVerdict(self.verdict).into_bound_py_any(py),
            1 => self.reason.as_deref().into_bound_py_any(py),
            2 => self.fix.as_deref().into_bound_py_any(py),
            3 => self.expected_error.as_deref().into_bound_py_any(py),
            _ => Err(PyIndexError::new_err("Prediction index out of range")),
        }
    }
    /// A field by name, or ``default``: as ``dict.get`` on the dict a share's prediction once was.
    #[pyo3(signature = (key, default=None))]
    fn get<'py>(&self, py: Python<'py>, key: &Bound<'py, PyAny>, default: Option<Bound<'py, PyAny>>) -> PyResult<Option<Bound<'py, PyAny>>> {
        match self.__getitem__(py, key) {
            Ok(value) => Ok(Some(value)),
            Err(e) if e.is_instance_of::<pyo3::exceptions::PyKeyError>(py) => Ok(default),
            Err(e) => Err(e),
        }
    }
    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(self.as_tuple(py)?.try_iter()?.into_any())
    }
    fn __richcmp__<'py>(&self, py: Python<'py>, other: &Bound<'py, PyAny>, op: CompareOp) -> PyResult<Bound<'py, PyAny>> {
        let mine = self.as_tuple(py)?;
        let theirs = match other.cast::<Prediction>() {
            Ok(p) => p.get().as_tuple(py)?.into_any(),
            Err(_) => other.clone(),
        };
        mine.rich_compare(theirs, op)
    }
    fn __hash__(&self, py: Python<'_>) -> PyResult<isize> {
        self.as_tuple(py)?.hash()
    }
    fn __repr__(&self) -> String {
        format!(
            "Prediction(verdict={:?}, reason={}, fix={})",
            self.verdict.as_str(),
            self.reason.as_deref().map_or("None".into(), |r| format!("{r:?}")),
            self.fix.as_deref().map_or("None".into(), |r| format!("{r:?}")),
        )
    }
}

/// The facts of one framework that can change at run time, as its adapter's functions that read
/// them (`Adapter.rule_facts`): asked at a prediction only where a rule of that handoff reads them
/// ([`explain::rule_reads`]).
#[derive(Default)]
struct LiveReaders {
    keeps_64_bit: Option<Py<PyAny>>,
    current_device: Option<Py<PyAny>>,
    has_current_context: Option<Py<PyAny>>,
}

/// The names `Adapter.rule_facts` may use: the fields of the core's `FrameworkFacts`.
const FACT_NAMES: &str =
    "keeps_64_bit, per_thread_default_stream, current_device, has_current_context, dlpack_takes_device";

/// An adapter's `rule_facts()` (name → value, or a function of no arguments for a fact that can
/// change), as the core's typed `FrameworkFacts` and the readers of the facts that can change.
fn facts_from_py(declared: Option<&Bound<'_, PyDict>>) -> PyResult<(FrameworkFacts, LiveReaders)> {
    let (mut facts, mut live) = (FrameworkFacts::default(), LiveReaders::default());
    let Some(declared) = declared else { return Ok((facts, live)) };
    for (name, value) in declared.iter() {
        let name: String = name.extract()?;
        let reader = value.is_callable().then(|| value.clone().unbind());
        match (name.as_str(), reader) {
            ("keeps_64_bit", Some(read)) => live.keeps_64_bit = Some(read),
            ("keeps_64_bit", None) => facts.keeps_64_bit = value.extract()?,
            ("per_thread_default_stream", None) => facts.per_thread_default_stream = value.extract()?,
            ("current_device", Some(read)) => live.current_device = Some(read),
            ("current_device", None) => facts.current_device = value.extract()?,
            ("has_current_context", Some(read)) => live.has_current_context = Some(read),
            ("has_current_context", None) => facts.has_current_context = value.extract()?,
            ("dlpack_takes_device", None) => facts.dlpack_takes_device = value.extract()?,
            (fixed @ ("per_thread_default_stream" | "dlpack_takes_device"), Some(_)) => {
                return Err(PyValueError::new_err(format!(
                    "rule fact {fixed:?} is read once, when the framework is imported: give a bool, not a function"
                )));
            }
            (other, _) => {
                return Err(PyValueError::new_err(format!("unknown rule fact {other:?}: the facts are {FACT_NAMES}")));
            }
        }
    }
    Ok((facts, live))
}

/// Predicts handoffs of one (source framework, target framework, path): the facts that do not
/// change within a process (names, versions, the adapters' constant facts) are given once; the
/// ones that can (JAX's x64 flag, PyTorch's current device, PyCUDA's current context) are read
/// through the adapters' functions, only where a rule reads them.
#[pyclass(module = "gpushare", frozen, name = "Predictor")]
pub struct Predictor {
    facts: TargetFacts,
    target_live: LiveReaders,
    source_live: LiveReaders,
    /// A move's last prediction (`share(x, to, device=…)` in a loop predicts each kind of move once).
    move_memo: explain::MoveMemo,
    /// `decide`'s answers per kind of array: a plan of `auto` asks on every share.
    decided: explain::DecisionMemo,
    /// The facts with the live settings read last, and those settings ([`Predictor::with_live`]).
    with_last_live: std::sync::Mutex<Option<(Live, std::sync::Arc<TargetFacts>)>>,
}

impl Predictor {
    pub fn predict(&self, py: Python<'_>, source: &TensorReport) -> PyResult<Prediction> {
        let facts = self.facts_for(py, source, false)?;
        Ok(Prediction::from_outcome(self.move_memo.predict(source, &facts)))
    }

    /// Whether this predictor resolves `auto` within the source's device: then the path that runs
    /// is decided per array ([`Predictor::auto_for`]), by the one `auto` its prediction reads:
    /// where the array lies, its dtype and layout, its size and the producer's state can each
    /// change it.
    pub fn resolves_auto(&self) -> bool {
        self.facts.path == "auto" && self.facts.destination.is_none()
    }

    /// Whether `auto`'s pick for arrays like `source` depends on the producer's state
    /// ([`explain::auto_follows_producer`]): only then is its stream asked.
    pub fn follows_producer(&self, source: &TensorReport) -> bool {
        explain::auto_follows_producer(source, &self.facts)
    }

    /// THE `auto` for the array `source` describes (`explain::auto_for_array`), from the same facts,
    /// live settings included, that its prediction reads: the path the plan runs is the one predicted.
    pub fn auto_for(&self, py: Python<'_>, source: &TensorReport, busy: bool) -> PyResult<explain::ArrayAuto> {
        let facts = self.facts_for(py, source, busy)?;
        Ok(explain::auto_for_array(source, &facts))
    }

    /// THE `auto` for the array `source` describes and the prediction for the path it takes, from
    /// one reading of the facts (the live settings are asked once a share, not once for each).
    pub fn decide(&self, py: Python<'_>, source: &TensorReport, busy: bool) -> PyResult<std::sync::Arc<explain::Decision>> {
        let facts = self.facts_for(py, source, busy)?;
        Ok(self.decided.decide(source, &facts, || explain::Decision {
            chosen: explain::auto_for_array(source, &facts),
            predicted: self.move_memo.predict(source, &facts),
        }))
    }

    /// The facts a prediction for `source` reads: the adapters' live settings asked where a rule of
    /// this handoff reads them, and whether the producer is `busy`.
    fn facts_for<'s>(&'s self, py: Python<'_>, source: &TensorReport, busy: bool) -> PyResult<Facts<'s>> {
        let mut live = Live::of(&self.facts.settings);
        live.busy |= busy;
        if let Some(read) = &self.target_live.keeps_64_bit
            && explain::rule_reads(LiveFact::Keeps64Bit, source)
            && framework_setting(read.bind(py))?
        {
            live.keeps_64_bit = Some(true);
        }
        if let Some(read) = &self.target_live.has_current_context
            && explain::rule_reads(LiveFact::HasCurrentContext, source)
            && !framework_setting(read.bind(py))?
        {
            live.has_current_context = Some(false);
        }
        if let Some(read) = &self.source_live.current_device
            && explain::rule_reads(LiveFact::CurrentDevice, source)
        {
            // The framework's current device follows the context current on this thread, which the
            // driver answers without a call into Python; the framework is asked only when no
            // context is current (its own default then).
            live.source_device = match crate::cuda::current_device() {
                Some(ordinal) => Some(ordinal),
                None => read.bind(py).call0()?.extract()?,
            };
        }
        if let Some(read) = &self.target_live.current_device
            && explain::rule_reads(LiveFact::CurrentDevice, source)
        {
            // The target's current device, where a rule reads it (CuPy's `__cuda_array_interface__`
            // import copies memory of another device to it): the driver's current context, as above.
            live.target_device = match crate::cuda::current_device() {
                Some(ordinal) => Some(ordinal),
                None => read.bind(py).call0()?.extract()?,
            };
        }
        if self.facts.path == "pinned" {
            live.cuda_available = Some(matches!(crate::cuda::driver_status(), crate::cuda::DriverStatus::Available { .. }));
        }
        Ok(self.with_live(live))
    }

    /// The facts with `live` settings: the constant ones where nothing differs from them, else the
    /// copy made for the settings read last. A share reads the same settings share after share (a
    /// PyTorch source on its current device); copying the facts for each (four strings and the
    /// memos' handles) was a share's cost on a GPU.
    fn with_live(&self, live: Live) -> Facts<'_> {
        if live == Live::of(&self.facts.settings) {
            return Facts::Constant(&self.facts);
        }
        let mut last = self.with_last_live.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((read, facts)) = &*last
            && *read == live
        {
            return Facts::Live(std::sync::Arc::clone(facts));
        }
        let mut facts = self.facts.clone();
        let settings = &mut facts.settings;
        settings.target.keeps_64_bit = live.keeps_64_bit;
        settings.target.has_current_context = live.has_current_context;
        settings.source.current_device = live.source_device;
        settings.target.current_device = live.target_device;
        settings.cuda_available = live.cuda_available;
        settings.producer_busy = live.busy;
        let facts = std::sync::Arc::new(facts);
        *last = Some((live, std::sync::Arc::clone(&facts)));
        Facts::Live(facts)
    }
}

/// The settings [`Predictor::facts_for`] reads for one share, where a rule reads them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Live {
    keeps_64_bit: Option<bool>,
    has_current_context: Option<bool>,
    source_device: Option<i32>,
    target_device: Option<i32>,
    cuda_available: Option<bool>,
    busy: bool,
}

impl Live {
    /// What `settings` hold of the live settings.
    fn of(settings: &Settings) -> Live {
        Live {
            keeps_64_bit: settings.target.keeps_64_bit,
            has_current_context: settings.target.has_current_context,
            source_device: settings.source.current_device,
            target_device: settings.target.current_device,
            cuda_available: settings.cuda_available,
            busy: settings.producer_busy,
        }
    }
}

/// The facts of one prediction: the predictor's own, or a copy with the settings read live.
enum Facts<'a> {
    Constant(&'a TargetFacts),
    Live(std::sync::Arc<TargetFacts>),
}

impl std::ops::Deref for Facts<'_> {
    type Target = TargetFacts;
    fn deref(&self) -> &TargetFacts {
        match self {
            Facts::Constant(facts) => facts,
            Facts::Live(facts) => facts,
        }
    }
}

/// A framework's live setting (JAX's x64 flag, a current context), read for a prediction: the
/// stage trace counts the read as the framework's, not gpushare's.
fn framework_setting(read: &Bound<'_, PyAny>) -> PyResult<bool> {
    crate::trace::mark("predict", crate::trace::Kind::Own);
    let set = read.call0()?.is_truthy();
    crate::trace::mark("predict: the framework's settings", crate::trace::Kind::Framework);
    set
}

#[pymethods]
impl Predictor {
    /// ``version`` and ``source_version`` are the frameworks' ``__version__`` ("" when unknown: the
    /// newest behaviour is assumed). ``target_facts`` and ``source_facts``: what the two adapters'
    /// ``rule_facts()`` declare (``keeps_64_bit``, ``per_thread_default_stream``, ``current_device``,
    /// ``has_current_context``: each a value, or a function of no arguments for a fact that can change).
    /// ``pair``: what the two adapters declare that ``auto`` decides from (``Pair.of(src, dst)``);
    /// None: the rules' own word on the two frameworks. With it, `auto` decided here never takes,
    /// on a GPU, a path that would read the producer's values before its queue wrote them.
    /// ``destination``: a move's (``device=``) as DLPack's ``(device_type, id)``; None: a handoff.
    /// ``model``: the ``CostModel`` ``auto`` consults, so ``auto`` is predicted as the path it takes.
    #[new]
    #[pyo3(signature = (target, version, path, source_version="", target_facts=None, source_facts=None, *, pair, destination=None, model=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        target: &str,
        version: &str,
        path: &str,
        source_version: &str,
        target_facts: Option<&Bound<'_, PyDict>>,
        source_facts: Option<&Bound<'_, PyDict>>,
        pair: PyRef<'_, super::paths::PyPair>,
        destination: Option<(u32, i32)>,
        model: Option<PyRef<'_, super::advice::PyCostModel>>,
    ) -> PyResult<Predictor> {
        let (target_known, target_live) = facts_from_py(target_facts)?;
        let (source_known, source_live) = facts_from_py(source_facts)?;
        let facts = TargetFacts {
            framework: target.to_string(),
            version: version.to_string(),
            path: path.to_string(),
            settings: Settings {
                target: target_known,
                source: source_known,
                source_version: source_version.to_string(),
                ..Default::default()
            },
            endpoints: pair.endpoints,
            destination: destination.map(crate::paths::Place::of_dlpack),
            auto_model: model.map(|m| std::sync::Arc::new(m.inner.clone())),
            auto_memo: Default::default(),
        };
        Ok(Predictor { facts, target_live, source_live, move_memo: Default::default(), decided: Default::default(), with_last_live: Default::default() })
    }

    /// The prediction for handing the array ``source`` describes to the target.
    fn __call__(&self, py: Python<'_>, source: &Bound<'_, TensorInfo>) -> PyResult<Prediction> {
        self.predict(py, &source.get().report)
    }

    /// The path ``auto`` takes for the array ``source`` describes (the path a share of it runs, and
    /// the one predicted); the predictor's own path where it is not ``auto``. ``nbytes``: decide as
    /// for a 1-d array of that many bytes of elements, of the same dtype and stride (a sweep's
    /// other sizes).
    #[pyo3(signature = (source, nbytes=None))]
    fn chosen_path(&self, py: Python<'_>, source: &Bound<'_, TensorInfo>, nbytes: Option<u64>) -> PyResult<String> {
        if self.facts.path != "auto" || self.facts.destination.is_some() {
            return Ok(self.facts.path.clone());
        }
        let report = &source.get().report;
        Ok(match nbytes {
            Some(n) if n != report.payload_bytes() => self.auto_for(py, &report.resized(n), false)?.path,
            _ => self.auto_for(py, report, false)?.path,
        }
        .to_string())
    }

    /// Whether ``auto``'s pick for arrays like the one ``source`` describes changes when the
    /// producer's stream has work queued (a share then asks the driver); False for any other path.
    #[pyo3(name = "follows_producer")]
    fn py_follows_producer(&self, source: &Bound<'_, TensorInfo>) -> bool {
        self.follows_producer(&source.get().report)
    }

    fn __repr__(&self) -> String {
        format!("Predictor(target={:?}, version={:?}, path={:?})", self.facts.framework, self.facts.version, self.facts.path)
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Prediction>()?;
    m.add_class::<Predictor>()?;
    Ok(())
}
