//! The process tables built from typed results (python/gpushare/process_tables.py runs the paths):
//! a path that does not apply or fails is the core's failed row, and a comparison or a sweep is
//! made of the handoffs' own reports, with no row passed as a dict on the way.

use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::process::{PyProcessBenchmark, PyProcessComparison, PyProcessShareResult};
use crate::report::process::{ProcessBenchPoint, ProcessBenchReport, ProcessComparisonReport};
use crate::share::process::failed_report;

/// The result of process path ``path`` that does not apply to the array (``applicable=False``,
/// ``reason`` the refusal's) or that failed while it ran (``reason`` the error's words).
#[pyfunction]
#[pyo3(signature = (path, framework, nbytes, reason, applicable=true))]
#[pyo3(name = "failure")]
fn process_failure(py: Python<'_>, path: &str, framework: &str, nbytes: u64, reason: String, applicable: bool) -> PyProcessShareResult {
    PyProcessShareResult::from_report(failed_report(path, framework, nbytes, reason, applicable), py.None(), py.None(), Vec::new())
}

/// Every process path tried on one array, from each path's result, in the order tried.
/// ``results``: the kept handoffs (path → result).
#[pyfunction]
#[pyo3(signature = (source_framework, target_framework, dtype, shape, device, rows, results=None))]
#[allow(clippy::too_many_arguments)]
#[pyo3(name = "comparison")]
fn process_comparison(
    py: Python<'_>,
    source_framework: String,
    target_framework: Option<String>,
    dtype: String,
    shape: Vec<u64>,
    device: String,
    rows: Vec<PyRef<'_, PyProcessShareResult>>,
    results: Option<Py<PyAny>>,
) -> PyProcessComparison {
    let rows = rows.iter().map(|r| r.report().clone()).collect();
    let report = ProcessComparisonReport { source_framework, target_framework, dtype, shape, device, rows };
    PyProcessComparison::from_report(report, results.unwrap_or_else(|| PyDict::new(py).into_any().unbind()))
}

/// A sweep over sizes × process paths, from each point's size and result.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(name = "bench")]
fn process_bench(
    source_framework: String,
    target_framework: String,
    dtype: String,
    device: String,
    sizes: Vec<u64>,
    points: Vec<(u64, PyRef<'_, PyProcessShareResult>)>,
    interrupted: bool,
    repeat: u64,
) -> PyProcessBenchmark {
    let points = points.iter().map(|(size, r)| ProcessBenchPoint { handoff: r.report().clone(), size: *size }).collect();
    PyProcessBenchmark::from_report(ProcessBenchReport { source_framework, target_framework, dtype, device, sizes, points, interrupted, repeat })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(process_failure, m)?)?;
    m.add_function(wrap_pyfunction!(process_comparison, m)?)?;
    m.add_function(wrap_pyfunction!(process_bench, m)?)
}
