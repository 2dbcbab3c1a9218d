//! Predictions before a conversion: `predict` over `crate::explain::predict`.

use pyo3::prelude::*;

use super::types::TensorInfo;
use crate::explain::{self, PredictedOutcome, Settings, TargetFacts};

#[allow(clippy::too_many_arguments)]
fn outcome(
    source: &Bound<'_, TensorInfo>,
    target: &str,
    version: &str,
    jax_x64: bool,
    path: &str,
    source_version: Option<String>,
    cupy_ptds: bool,
    source_current_device: Option<i32>,
    cuda_available: Option<bool>,
) -> PredictedOutcome {
    let facts = TargetFacts {
        framework: target.to_string(),
        version: version.to_string(),
        path: path.to_string(),
        settings: Settings {
            jax_x64,
            cupy_ptds,
            source_version: source_version.unwrap_or_default(),
            source_current_device,
            cuda_available,
        },
    };
    explain::predict(&source.get().report, &facts)
}

/// Predicts what handing ``source`` to framework ``target`` by ``path`` will do.
///
/// Returns ``(verdict, reason, fix, expected_error)``: verdict ``"shared"``, ``"copied"`` or
/// ``"failed"``; the reason for a copy or a failure (or a note on a share, e.g. a writable view of
/// read-only memory); the fix for a failure; the words the framework is expected to use in its error.
/// A tuple, not a dict, because ``share`` calls this on every conversion. ``version`` is the target framework's ``__version__`` ("" when unknown),
/// ``jax_x64`` the value of ``jax.config.jax_enable_x64``.
#[pyfunction]
#[pyo3(signature = (source, target, version, jax_x64, path, source_version=None, cupy_ptds=false, source_current_device=None, cuda_available=None))]
#[allow(clippy::too_many_arguments)]
fn predict(
    source: &Bound<'_, TensorInfo>,
    target: &str,
    version: &str,
    jax_x64: bool,
    path: &str,
    source_version: Option<String>,
    cupy_ptds: bool,
    source_current_device: Option<i32>,
    cuda_available: Option<bool>,
) -> (&'static str, Option<String>, Option<String>, Option<String>) {
    let o = outcome(source, target, version, jax_x64, path, source_version, cupy_ptds, source_current_device, cuda_available);
    (
        o.verdict().as_str(),
        o.reason().map(str::to_string),
        o.fix().map(str::to_string),
        o.expected_error().map(str::to_string),
    )
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(predict, m)?)?;
    Ok(())
}
