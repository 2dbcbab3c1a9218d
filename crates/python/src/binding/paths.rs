//! The path table and the one `auto` (`crate::paths`), for the Python side: `path_table()` and
//! `Pair`, the two adapters' declared facts, whose `auto(...)`, `size_breaks(...)` and
//! `ranges(...)` ask it.

use super::vocabulary::PyPathKind;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::auto::{self, AutoFacts};
use crate::paths::{self, Endpoints, PathSpec, Place};

fn spec_dict<'py>(py: Python<'py>, p: &PathSpec, kind: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("name", p.name)?;
    d.set_item("kind", kind)?;
    d.set_item("description", p.description)?;
    d.set_item("copies_by_design", p.copies_by_design)?;
    d.set_item("colour", p.colour)?;
    d.set_item("modelled", p.modelled)?;
    d.set_item("applies", p.applies)?;
    Ok(d)
}

/// Every path, in table order: dicts with ``name``, ``kind`` (a ``gpushare.PathKind``),
/// ``description``, ``copies_by_design`` (the reason a copy gives, or None), ``colour``,
/// ``modelled`` (the prediction rules model it) and ``applies`` (when, in words); ``auto`` last,
/// of kind ``any``.
#[pyfunction]
fn path_table(py: Python<'_>) -> PyResult<Vec<Bound<'_, PyDict>>> {
    let mut rows = paths::PATHS.iter().map(|p| spec_dict(py, p, PyPathKind(p.kind).into_pyobject(py)?)).collect::<PyResult<Vec<_>>>()?;
    rows.push(spec_dict(py, &paths::AUTO, pyo3::types::PyString::new(py, "any").into_any())?);
    Ok(rows)
}

/// What two adapters declare that `auto` decides from, read once into one typed object
/// (``Pair.of(source_adapter, target_adapter)``): every question put to `auto` takes it, where
/// the functions before took the same nine facts as loose arguments.
#[pyclass(module = "gpushare", frozen, name = "Pair", eq)]
#[derive(Clone, Debug, PartialEq)]
pub struct PyPair {
    source: String,
    target: String,
    pub endpoints: Endpoints,
    source_shares_host: bool,
}

/// What `auto` reads of one handoff besides the two frameworks: where the array lies and where it
/// goes, whether to another process, the cost model with the array's size, the producer's state
/// and whether the array is read-only. One typed object, so `Pair.auto`, `Pair.size_breaks` and
/// `Pair.ranges` take the same question in one form.
#[pyclass(module = "gpushare._native.paths", name = "HandoffFacts", frozen)]
pub struct PyHandoffFacts {
    source: (u32, i32),
    destination: Option<(u32, i32)>,
    peer_access: Option<bool>,
    across: bool,
    model: Option<Py<super::advice::PyCostModel>>,
    nbytes: Option<u64>,
    producer_busy: bool,
    source_readonly: Option<bool>,
    host_shared: bool,
}

#[pymethods]
impl PyHandoffFacts {
    /// ``source``: where the array lies (DLPack's ``(device_type, device_id)``); ``destination``:
    /// where it is moved (``device=``), None to stay; ``peer_access``: whether two GPUs reach each
    /// other (None: the driver is asked); ``across``: to another process; ``model`` (a
    /// ``CostModel``, with ``nbytes`` where known): among the calibrated paths with the rules'
    /// choice's verdict, the one it predicts fastest; ``producer_busy``: the producer's stream has
    /// queued work; ``source_readonly``: whether the array is read-only, where known;
    /// ``host_shared``: its host memory already lies in memory another process can map (asked of
    /// the adapter, ``host_memory_shared``), so the source framework's transport moves nothing.
    #[new]
    #[pyo3(signature = (source, destination=None, *, peer_access=None, across=false, model=None, nbytes=None,
                        producer_busy=false, source_readonly=None, host_shared=false))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        source: (u32, i32),
        destination: Option<(u32, i32)>,
        peer_access: Option<bool>,
        across: bool,
        model: Option<Py<super::advice::PyCostModel>>,
        nbytes: Option<u64>,
        producer_busy: bool,
        source_readonly: Option<bool>,
        host_shared: bool,
    ) -> Self {
        Self { source, destination, peer_access, across, model, nbytes, producer_busy, source_readonly, host_shared }
    }

    fn __repr__(&self) -> String {
        format!(
            "HandoffFacts(source={:?}, destination={:?}, across={}, model={}, nbytes={:?}, producer_busy={}, source_readonly={:?}, host_shared={})",
            self.source,
            self.destination,
            self.across,
            self.model.is_some(),
            self.nbytes,
            self.producer_busy,
            self.source_readonly,
            self.host_shared
        )
    }
}

impl PyPair {
    /// `auto`'s facts of a handoff of `facts` between this pair. Between two GPUs the driver is
    /// asked whether they reach each other, unless `peer_access` says.
    fn facts<'a>(&'a self, py: Python<'_>, facts: &PyHandoffFacts, model: Option<&'a crate::advice::model::CostModel>) -> AutoFacts<'a> {
        let (source, destination) = (Place::of_dlpack(facts.source), facts.destination.map(Place::of_dlpack));
        let peer_access = match (facts.peer_access, source, destination) {
            (Some(known), ..) => Some(known),
            (None, Place::Device(a), Some(Place::Device(b))) if a != b => {
                py.detach(|| crate::cuda::peer_link(a, b)).ok().map(|link| link.can_access)
            }
            _ => None,
        };
        AutoFacts {
            endpoints: self.endpoints,
            source,
            destination,
            peer_access,
            target_name: &self.target,
            across_processes: facts.across,
            source_shares_host_across: self.source_shares_host,
            source_host_shared: facts.host_shared,
            model,
            source_name: &self.source,
            nbytes: facts.nbytes,
            producer_busy: facts.producer_busy,
            source_readonly: facts.source_readonly,
        }
    }
}

#[pymethods]
impl PyPair {
    /// Facts given one by one (a stand-in pair, or a test's): the defaults are a source with
    /// ``__dlpack__`` and a target that takes objects and capsules and addresses device memory.
    #[new]
    #[pyo3(signature = (source="", target="", *, exports_dlpack=true, accepts_objects=true, accepts_capsules=true,
                        addresses_device=true, import_waits=false, cai_unordered=false, capsule_refuses_readonly=false,
                        shares_host_across=false))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        source: &str,
        target: &str,
        exports_dlpack: bool,
        accepts_objects: bool,
        accepts_capsules: bool,
        addresses_device: bool,
        import_waits: bool,
        cai_unordered: bool,
        capsule_refuses_readonly: bool,
        shares_host_across: bool,
    ) -> PyPair {
        PyPair {
            source: source.into(),
            target: target.into(),
            endpoints: Endpoints {
                source_exports_dlpack: exports_dlpack,
                target_accepts_objects: accepts_objects,
                target_accepts_capsules: accepts_capsules,
                target_addresses_device: addresses_device,
                target_import_waits: import_waits,
                target_cai_unordered: cai_unordered,
                source_capsule_refuses_readonly: capsule_refuses_readonly,
            },
            source_shares_host: shares_host_across,
        }
    }

    /// What adapters ``src`` and ``dst`` declare (``exports_dlpack``, ``accepts_objects``,
    /// ``accepts_capsules``, ``addresses_device``, ``dlpack_import_waits``, ``cai_import_orders``,
    /// ``legacy_capsule_refuses_readonly``, ``shares_host_memory_across_processes``).
    #[staticmethod]
    fn of(src: &Bound<'_, PyAny>, dst: &Bound<'_, PyAny>) -> PyResult<PyPair> {
        let flag = |adapter: &Bound<'_, PyAny>, name: &str| -> PyResult<bool> { adapter.getattr(name)?.is_truthy() };
        Ok(PyPair {
            source: src.getattr("name")?.extract()?,
            target: dst.getattr("name")?.extract()?,
            endpoints: Endpoints {
                source_exports_dlpack: flag(src, "exports_dlpack")?,
                target_accepts_objects: flag(dst, "accepts_objects")?,
                target_accepts_capsules: flag(dst, "accepts_capsules")?,
                target_addresses_device: flag(dst, "addresses_device")?,
                target_import_waits: flag(dst, "dlpack_import_waits")?,
                target_cai_unordered: !flag(dst, "cai_import_orders")?,
                source_capsule_refuses_readonly: flag(src, "legacy_capsule_refuses_readonly")?,
            },
            source_shares_host: flag(src, "shares_host_memory_across_processes")?,
        })
    }

    #[getter]
    fn source(&self) -> &str {
        &self.source
    }

    #[getter]
    fn target(&self) -> &str {
        &self.target
    }

    /// ``(source exports __dlpack__, target takes objects, target takes capsules, target can
    /// address device memory)``.
    #[getter]
    fn endpoints(&self) -> (bool, bool, bool, bool) {
        let e = &self.endpoints;
        (e.source_exports_dlpack, e.target_accepts_objects, e.target_accepts_capsules, e.target_addresses_device)
    }

    /// ``(path, kind, why)``: THE ``auto`` for a handoff of ``facts`` (a ``HandoffFacts``):
    /// handed over where the array lies, moved to its destination (``device=``), or to another
    /// process (``across``).
    fn auto(&self, py: Python<'_>, facts: PyRef<'_, PyHandoffFacts>) -> (&'static str, PyPathKind, Option<String>) {
        let model = facts.model.as_ref().map(|m| m.bind(py).borrow());
        let choice = auto::resolve_auto(&self.facts(py, &facts, model.as_ref().map(|m| &m.inner)));
        (choice.path, PyPathKind(choice.kind), choice.why)
    }

    /// The sizes, in bytes, at which ``auto``'s choice for ``facts`` may change (sorted; empty:
    /// the same path at every size; ``facts.nbytes`` is not read). The model decides once per range
    /// between them.
    fn size_breaks(&self, py: Python<'_>, facts: PyRef<'_, PyHandoffFacts>) -> Vec<u64> {
        let model = facts.model.as_ref().map(|m| m.bind(py).borrow());
        auto::auto_size_breaks(&self.facts(py, &facts, model.as_ref().map(|m| &m.inner)))
    }

    /// ``(from, below or None, path, close or None)``: ``auto``'s path for each range of sizes
    /// (the ranges of ``size_breaks``, neighbours with the same path and close second joined), and
    /// where another path is predicted within the model's error of it there, that path.
    fn ranges(&self, py: Python<'_>, facts: PyRef<'_, PyHandoffFacts>) -> Vec<(u64, Option<u64>, &'static str, Option<&'static str>)> {
        let model = facts.model.as_ref().map(|m| m.bind(py).borrow());
        auto::auto_ranges(&self.facts(py, &facts, model.as_ref().map(|m| &m.inner))).into_iter().map(|r| (r.from, r.below, r.path, r.close)).collect()
    }

    fn __repr__(&self) -> String {
        format!("Pair({:?} -> {:?}, {:?})", self.source, self.target, self.endpoints)
    }
}

/// The planner of one cost model (or of the rules alone, without one): what `auto` decided with
/// it is kept here and dropped with it (``gpushare.model_cache.planner()``; a new calibration makes
/// a new planner, so nothing needs clearing). It keeps the moves' `auto`
/// (`crate::planner::MoveAutos`), and holds the share plans and predictors made under its model
/// (``plans``, ``predictors``: the adapters' Python routes and facts, keyed by the Python side).
#[pyclass(module = "gpushare._native.paths", name = "Planner", frozen)]
pub struct PyPlanner {
    model: Option<Py<super::advice::PyCostModel>>,
    /// Shared with the move plans made under this model (binding/plan.rs), which decide a move's
    /// `auto` per array from it without holding the planner (whose `plans` hold them).
    moves: std::sync::Arc<crate::planner::MoveAutos>,
    plans: Py<PyDict>,
    predictors: Py<PyDict>,
}

#[pymethods]
impl PyPlanner {
    #[new]
    #[pyo3(signature = (model=None))]
    fn new(py: Python<'_>, model: Option<Py<super::advice::PyCostModel>>) -> Self {
        Self {
            model,
            moves: std::sync::Arc::default(),
            plans: PyDict::new(py).unbind(),
            predictors: PyDict::new(py).unbind(),
        }
    }

    /// The share plans made under this model (``gpushare.api``: keyed by the array's type, the
    /// target and what was asked), each deciding `auto` per array in the core.
    #[getter]
    fn plans(&self, py: Python<'_>) -> Py<PyDict> {
        self.plans.clone_ref(py)
    }

    /// The predictors made under this model (``gpushare.verdicts``: keyed by pair, path and
    /// versions): an `auto` predictor predicts the path this model takes.
    #[getter]
    fn predictors(&self, py: Python<'_>) -> Py<PyDict> {
        self.predictors.clone_ref(py)
    }

    /// The common share, ``share(x, to)`` or ``share(x, to, device=...)`` with ``auto`` and one
    /// timed conversion, by the plan made for arrays of ``x``'s type (and that device) when one
    /// has run: its result, or None where no such plan is made yet (``gpushare.api.share`` then
    /// makes it). One call from Python: the lookup and the run are the core's.
    #[pyo3(signature = (obj, to, device=None, name=None, origin=None, observe=false))]
    #[allow(clippy::too_many_arguments)]
    pub fn share_planned(
        &self,
        py: Python<'_>,
        obj: Bound<'_, PyAny>,
        to: Bound<'_, PyAny>,
        device: Option<Bound<'_, PyAny>>,
        name: Option<String>,
        origin: Option<Py<super::tensor_info::TensorInfo>>,
        observe: bool,
    ) -> PyResult<Option<super::types::ShareResult>> {
        let key = match device {
            None => pyo3::types::PyTuple::new(py, [obj.get_type().into_any(), to])?,
            Some(device) => pyo3::types::PyTuple::new(py, [obj.get_type().into_any(), to, device])?,
        };
        // A name that cannot be a key (unhashable) has no plan: `share` says what is wrong with it.
        let Ok(Some(plan)) = self.plans.bind(py).get_item(key) else { return Ok(None) };
        let Ok(plan) = plan.cast::<super::plan::SharePlan>() else { return Ok(None) };
        let options = crate::share::Options {
            timing: crate::share::timing::TimingPolicy::once(),
            observe,
            name,
            origin: origin.map(|o| o.get().report.clone()),
        };
        plan.get().handoff_run(obj.unbind(), &options).map(Some)
    }

    /// The cost model this planner plans with; None: the rules alone.
    #[getter]
    fn model(&self, py: Python<'_>) -> Option<Py<super::advice::PyCostModel>> {
        self.model.as_ref().map(|m| m.clone_ref(py))
    }

    /// THE ``auto``'s path to move an array of adapter ``src`` lying on ``source`` (DLPack's
    /// ``(device_type, id)``) to ``destination``, handed to adapter ``dst``; ``nbytes``: its size,
    /// where known. Worked out once per kind of move and range of sizes (the driver is asked how the
    /// two GPUs are linked then); ``producer_busy()`` is called only where an idle and a busy
    /// producer get different paths (with a model: a peer copy waits on the host for the
    /// producer's queue, the framework's own move is queued after it).
    #[pyo3(signature = (src, dst, source, destination, nbytes, producer_busy))]
    #[allow(clippy::too_many_arguments)]
    fn move_auto(
        &self,
        py: Python<'_>,
        src: &Bound<'_, PyAny>,
        dst: &Bound<'_, PyAny>,
        source: (u32, i32),
        destination: (u32, i32),
        nbytes: Option<u64>,
        producer_busy: &Bound<'_, PyAny>,
    ) -> PyResult<&'static str> {
        let moving = MoveAuto { moves: self.moves.clone(), model: self.model.as_ref().map(|m| m.clone_ref(py)), destination };
        moving.path(py, src, dst, source, nbytes, || producer_busy.call0()?.is_truthy(), |e| e)
    }

    fn __repr__(&self) -> String {
        format!("Planner(model={})", if self.model.is_some() { "calibrated" } else { "None: the rules alone" })
    }
}

impl PyPlanner {
    /// The moves' `auto` of this planner's model, for arrays moved to `destination` (DLPack's
    /// ``(device_type, id)``): what a move plan keeps to decide it per array.
    pub fn move_auto_to(&self, py: Python<'_>, destination: (u32, i32)) -> MoveAuto {
        MoveAuto { moves: self.moves.clone(), model: self.model.as_ref().map(|m| m.clone_ref(py)), destination }
    }
}

/// THE `auto` of moves to one destination under one model: the planner's memo of it, shared.
pub struct MoveAuto {
    moves: std::sync::Arc<crate::planner::MoveAutos>,
    model: Option<Py<super::advice::PyCostModel>>,
    pub destination: (u32, i32),
}

impl MoveAuto {
    /// The path to move an array of adapter `src` lying on `source` (DLPack's ``(device_type,
    /// id)``) here, handed to adapter `dst`. Worked out once per kind of move and range of sizes
    /// (the driver is asked how the two GPUs are linked then); the size counts only with a model,
    /// and `producer_busy` is asked only where an idle and a busy producer get different paths (a
    /// peer copy waits on the host for the producer's queue, the framework's own move is queued
    /// after it). `py_err` turns an adapter's failing attribute into the caller's error.
    #[allow(clippy::too_many_arguments)]
    pub fn path<E>(
        &self,
        py: Python<'_>,
        src: &Bound<'_, PyAny>,
        dst: &Bound<'_, PyAny>,
        source: (u32, i32),
        nbytes: Option<u64>,
        producer_busy: impl FnOnce() -> Result<bool, E>,
        py_err: impl Fn(PyErr) -> E,
    ) -> Result<&'static str, E> {
        let name = |adapter: &Bound<'_, PyAny>| -> PyResult<String> { adapter.getattr("name")?.extract() };
        let key = crate::planner::MoveKey {
            source: name(src).map_err(&py_err)?,
            target: name(dst).map_err(&py_err)?,
            from: Place::of_dlpack(source),
            to: Place::of_dlpack(self.destination),
        };
        let model = self.model.as_ref().map(|m| m.bind(py).borrow());
        let handoff = PyHandoffFacts::new(source, Some(self.destination), None, false, None, nbytes, false, None, false);
        // The adapters' declarations are read only when this kind of move is new.
        let pair = std::cell::OnceCell::new();
        self.moves.try_path(
            &key,
            nbytes,
            || {
                if pair.get().is_none() {
                    let _ = pair.set(PyPair::of(src, dst).map_err(&py_err)?);
                }
                let pair: &PyPair = pair.get().expect("set above");
                Ok(pair.facts(py, &handoff, model.as_ref().map(|m| &m.inner)))
            },
            producer_busy,
        )
    }

    /// Whether this `auto` weighs sizes (it has a cost model): the rules alone decide at their
    /// reference size, and no array's size is asked for them.
    pub fn weighs_sizes(&self) -> bool {
        self.model.is_some()
    }
}

/// Why a path of ``kind`` copies whenever it copies, where it copies by design; None otherwise.
#[pyfunction]
fn copied_by_design(kind: PyPathKind, path: &str) -> Option<&'static str> {
    paths::copied_by_design(kind.0, path)
}

/// The paths of ``kind`` (``share``, ``move``, ``process``) a list names: each text holds names
/// separated by commas, ``auto`` among them, or ``all`` alone (or nothing) for every path of the
/// kind; checked, without repeats, in the order written. The core's one parser of path lists,
/// which the command line reads them with too; ``ValueError`` naming the known paths.
#[pyfunction]
fn parse_paths(kind: PyPathKind, texts: Vec<String>) -> PyResult<Vec<&'static str>> {
    paths::parse_list(kind.0, texts.iter().map(String::as_str)).map_err(PyValueError::new_err)
}

/// The one parser of path lists, to `gpushare._native.text`.
pub fn register_text(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(parse_paths, m)?)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(path_table, m)?)?;
    m.add_class::<PyPair>()?;
    m.add_class::<PyHandoffFacts>()?;
    m.add_class::<PyPlanner>()?;
    m.add_function(wrap_pyfunction!(copied_by_design, m)?)?;
    Ok(())
}
