//! The ceilings of this machine's resources (`crate::advice::ceilings`): which resources a path's copy crosses,
//! and the GPU resources' ceilings measured with the CUDA driver. `gpushare.machine_ceilings` caches them.

use super::vocabulary::PyPathKind;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use super::errors::to_pyerr;
use crate::advice::ceilings::{measure, parse_key, resources};
use crate::paths::Place;

fn place(ordinal: Option<i32>) -> Place {
    ordinal.map_or(Place::Host, Place::Device)
}

/// `(key, words)` of each resource a copy by `path` of `kind` crosses, from `source` to `target`
/// (CUDA ordinals; None: host memory).
#[pyfunction]
#[pyo3(signature = (kind, path, source, target))]
fn copy_resources(kind: PyPathKind, path: &str, source: Option<i32>, target: Option<i32>) -> Vec<(String, String)> {
    resources(kind.0, path, place(source), place(target)).into_iter().map(|r| (r.key(), r.describe())).collect()
}

/// The ceiling of GPU resource `key` for copies of `nbytes`, in bytes per second: the best of
/// `repeats` copies by the CUDA driver, timed by CUDA events.
#[pyfunction]
#[pyo3(signature = (key, nbytes, repeats = 5))]
fn measure_ceiling(py: Python<'_>, key: &str, nbytes: usize, repeats: usize) -> PyResult<f64> {
    let resource = parse_key(key).ok_or_else(|| PyValueError::new_err(format!("unknown resource {key:?}")))?;
    py.detach(move || measure(resource, nbytes, repeats)).map_err(to_pyerr)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(copy_resources, m)?)?;
    m.add_function(wrap_pyfunction!(measure_ceiling, m)?)?;
    Ok(())
}
