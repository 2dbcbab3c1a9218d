//! The path table and the one `auto` (`crate::paths`), for the Python side: `path_table()` and
//! `resolve_auto(...)`, and the sizes at which its choice may change, `auto_size_breaks(...)`.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::paths::{self, AutoFacts, Endpoints, PathKind, PathSpec, Place};

fn spec_dict<'py>(py: Python<'py>, p: &PathSpec, kind: &str) -> PyResult<Bound<'py, PyDict>> {
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

/// Every path, in table order: dicts with ``name``, ``kind`` (``share``, ``move``, ``process``),
/// ``description``, ``copies_by_design`` (the reason a copy gives, or None), ``colour``,
/// ``modelled`` (the prediction rules model it) and ``applies`` (when, in words); ``auto`` last,
/// of kind ``any``.
#[pyfunction]
fn path_table(py: Python<'_>) -> PyResult<Vec<Bound<'_, PyDict>>> {
    let mut rows = paths::PATHS.iter().map(|p| spec_dict(py, p, p.kind.name())).collect::<PyResult<Vec<_>>>()?;
    rows.push(spec_dict(py, &paths::AUTO, "any")?);
    Ok(rows)
}

/// ``(path, kind, why)``: THE ``auto`` for a handoff. ``endpoints`` are the adapters' facts
/// ``(source exports __dlpack__, target takes objects, target takes capsules, target can address
/// device memory)``; ``source`` where the array lies and ``destination`` where it is asked to go
/// (``device=``; None: where it lies), each as DLPack's ``(device_type, device_id)``. Between two
/// GPUs the driver is asked whether they reach each other, unless ``peer_access`` says.
/// ``across``: to another process (``across=``): a process path.
/// ``model`` (a ``CostModel``, with ``source`` the source framework's name and ``nbytes`` where
/// known): among the calibrated paths with the rules' choice's verdict, the one it predicts fastest.
/// ``producer_busy``: the producer's stream has queued work (``gpushare.advice.producer_state``), and
/// ``import_waits``: the target's DLPack import waits on the host for it (the adapter's
/// ``dlpack_import_waits``): with the model, a path ordered on the device is preferred.
#[pyfunction]
#[pyo3(signature = (endpoints, source, destination=None, target="", peer_access=None, across=false, model=None, source_name="", nbytes=None, producer_busy=false, import_waits=false, source_shares_host=false, cai_unordered=false, capsule_refuses_readonly=false, source_readonly=None))]
#[allow(clippy::too_many_arguments)]
fn resolve_auto(
    py: Python<'_>,
    endpoints: (bool, bool, bool, bool),
    source: (u32, i32),
    destination: Option<(u32, i32)>,
    target: &str,
    peer_access: Option<bool>,
    across: bool,
    model: Option<PyRef<'_, super::advice::PyCostModel>>,
    source_name: &str,
    nbytes: Option<u64>,
    producer_busy: bool,
    import_waits: bool,
    source_shares_host: bool,
    cai_unordered: bool,
    capsule_refuses_readonly: bool,
    source_readonly: Option<bool>,
) -> PyResult<(&'static str, &'static str, Option<String>)> {
    let facts = auto_facts(
        py, endpoints, source, destination, target, peer_access, across, model.as_ref().map(|m| &m.inner), source_name, nbytes,
        producer_busy, import_waits, source_shares_host, cai_unordered, capsule_refuses_readonly, source_readonly,
    );
    let choice = paths::resolve_auto(&facts);
    Ok((choice.path, choice.kind.name(), choice.why))
}

/// The sizes, in bytes, at which ``resolve_auto``'s choice for the same facts may change (sorted;
/// empty: the same path at every size). The model decides once per range between them, so a
/// caller that keeps a plan per kind of array keeps one per range (``bisect_right``).
#[pyfunction]
#[pyo3(signature = (endpoints, source, destination=None, target="", peer_access=None, across=false, model=None, source_name="", producer_busy=false, import_waits=false, source_shares_host=false, cai_unordered=false, capsule_refuses_readonly=false, source_readonly=None))]
#[allow(clippy::too_many_arguments)]
fn auto_size_breaks(
    py: Python<'_>,
    endpoints: (bool, bool, bool, bool),
    source: (u32, i32),
    destination: Option<(u32, i32)>,
    target: &str,
    peer_access: Option<bool>,
    across: bool,
    model: Option<PyRef<'_, super::advice::PyCostModel>>,
    source_name: &str,
    producer_busy: bool,
    import_waits: bool,
    source_shares_host: bool,
    cai_unordered: bool,
    capsule_refuses_readonly: bool,
    source_readonly: Option<bool>,
) -> Vec<u64> {
    let facts = auto_facts(
        py, endpoints, source, destination, target, peer_access, across, model.as_ref().map(|m| &m.inner), source_name, None,
        producer_busy, import_waits, source_shares_host, cai_unordered, capsule_refuses_readonly, source_readonly,
    );
    paths::auto_size_breaks(&facts)
}

/// ``(from, below or None, path, close or None)``: THE ``auto``'s path for each range of sizes of
/// these facts (the ranges of ``auto_size_breaks``, neighbours with the same path and close second
/// joined), and where another path is predicted within the model's error of it there, that path.
#[pyfunction]
#[pyo3(signature = (endpoints, source, destination=None, target="", peer_access=None, across=false, model=None, source_name="", producer_busy=false, import_waits=false, source_shares_host=false, cai_unordered=false, capsule_refuses_readonly=false, source_readonly=None))]
#[allow(clippy::too_many_arguments)]
fn auto_ranges(
    py: Python<'_>,
    endpoints: (bool, bool, bool, bool),
    source: (u32, i32),
    destination: Option<(u32, i32)>,
    target: &str,
    peer_access: Option<bool>,
    across: bool,
    model: Option<PyRef<'_, super::advice::PyCostModel>>,
    source_name: &str,
    producer_busy: bool,
    import_waits: bool,
    source_shares_host: bool,
    cai_unordered: bool,
    capsule_refuses_readonly: bool,
    source_readonly: Option<bool>,
) -> Vec<(u64, Option<u64>, &'static str, Option<&'static str>)> {
    let facts = auto_facts(
        py, endpoints, source, destination, target, peer_access, across, model.as_ref().map(|m| &m.inner), source_name, None,
        producer_busy, import_waits, source_shares_host, cai_unordered, capsule_refuses_readonly, source_readonly,
    );
    paths::auto_ranges(&facts).into_iter().map(|r| (r.from, r.below, r.path, r.close)).collect()
}

/// The facts `auto` decides from, as the functions above take them. Between two GPUs the
/// driver is asked whether they reach each other, unless ``peer_access`` says.
#[allow(clippy::too_many_arguments)]
fn auto_facts<'a>(
    py: Python<'_>,
    endpoints: (bool, bool, bool, bool),
    source: (u32, i32),
    destination: Option<(u32, i32)>,
    target: &'a str,
    peer_access: Option<bool>,
    across: bool,
    model: Option<&'a crate::advice::model::CostModel>,
    source_name: &'a str,
    nbytes: Option<u64>,
    producer_busy: bool,
    import_waits: bool,
    source_shares_host: bool,
    cai_unordered: bool,
    capsule_refuses_readonly: bool,
    source_readonly: Option<bool>,
) -> AutoFacts<'a> {
    let (source, destination) = (Place::of_dlpack(source), destination.map(Place::of_dlpack));
    let peer_access = match (peer_access, source, destination) {
        (Some(known), ..) => Some(known),
        (None, Place::Device(a), Some(Place::Device(b))) if a != b => {
            py.detach(|| crate::cuda::peer_link(a, b)).ok().map(|link| link.can_access)
        }
        _ => None,
    };
    AutoFacts {
        endpoints: Endpoints {
            target_import_waits: import_waits,
            target_cai_unordered: cai_unordered,
            source_capsule_refuses_readonly: capsule_refuses_readonly,
            ..endpoints_of(endpoints)
        },
        source,
        destination,
        peer_access,
        target_name: target,
        across_processes: across,
        source_shares_host_across: source_shares_host,
        model,
        source_name,
        nbytes,
        producer_busy,
        source_readonly,
    }
}

pub fn endpoints_of((exports, objects, capsules, device): (bool, bool, bool, bool)) -> Endpoints {
    Endpoints {
        source_exports_dlpack: exports,
        target_accepts_objects: objects,
        target_accepts_capsules: capsules,
        target_addresses_device: device,
        // Not among the four facts the explain binding passes: resolve_auto takes them on their own.
        target_import_waits: false,
        target_cai_unordered: false,
        source_capsule_refuses_readonly: false,
    }
}

/// The rules' own word on what a framework's DLPack import and export take (used for predictions
/// from names alone), as ``resolve_auto``'s ``endpoints``: the adapters must agree with it.
#[pyfunction]
fn known_endpoints(source: &str, target: &str) -> (bool, bool, bool, bool) {
    let e = crate::explain::known_endpoints(source, target);
    (e.source_exports_dlpack, e.target_accepts_objects, e.target_accepts_capsules, e.target_addresses_device)
}

/// Why a path of ``kind`` copies whenever it copies, where it copies by design; None otherwise.
#[pyfunction]
fn copied_by_design(kind: &str, path: &str) -> PyResult<Option<&'static str>> {
    let kind = PathKind::parse(kind).ok_or_else(|| PyValueError::new_err(format!("unknown path kind {kind:?}")))?;
    Ok(paths::copied_by_design(kind, path))
}

/// The paths of ``kind`` (``share``, ``move``, ``process``) a list names: each text holds names
/// separated by commas, ``auto`` among them, or ``all`` alone (or nothing) for every path of the
/// kind; checked, without repeats, in the order written. The core's one parser of path lists,
/// which the command line reads them with too; ``ValueError`` naming the known paths.
#[pyfunction]
fn parse_paths(kind: &str, texts: Vec<String>) -> PyResult<Vec<&'static str>> {
    let kind = PathKind::parse(kind).ok_or_else(|| PyValueError::new_err(format!("unknown path kind {kind:?}")))?;
    paths::parse_list(kind, texts.iter().map(String::as_str)).map_err(PyValueError::new_err)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(path_table, m)?)?;
    m.add_function(wrap_pyfunction!(parse_paths, m)?)?;
    m.add_function(wrap_pyfunction!(resolve_auto, m)?)?;
    m.add_function(wrap_pyfunction!(auto_size_breaks, m)?)?;
    m.add_function(wrap_pyfunction!(auto_ranges, m)?)?;
    m.add_function(wrap_pyfunction!(known_endpoints, m)?)?;
    m.add_function(wrap_pyfunction!(copied_by_design, m)?)?;
    Ok(())
}
