//! The process tables: the core's loops (crates/core/src/share/process_lab.rs) over a Python lab
//! (python/gpushare/processes/tables.py: the worker, `auto`, one path's handoff, a sweep's arrays).
//! A path that does not apply or fails is the core's failed row, and a comparison or a sweep is
//! made of the handoffs' own reports, with no row passed as a dict on the way.

use pyo3::exceptions::{PyException, PyKeyboardInterrupt};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::lab::{Benchmark, Comparison};
use super::tensor_info::TensorInfo;
use super::types::ShareResult;
use crate::render::lab::{BenchmarkReport, ComparisonReport};
use crate::share::process::failed_report;
use crate::share::process_lab::{self, ProcessLab, Tried, WARM_UP_HANDOFFS};

/// The core's [`ProcessLab`] over a Python object with `auto(obj)`, `try_path(obj, path, repeat)`
/// (a ShareResult; for a path that does not apply or failed, `(reason, applicable, nbytes)`) and
/// `make_source(size)`.
struct PyLab<'py> {
    lab: Bound<'py, PyAny>,
    /// The source's framework, for the row of a size whose array could not be made.
    framework: String,
}

impl<'py> ProcessLab for PyLab<'py> {
    type Source = Bound<'py, PyAny>;
    type Kept = Bound<'py, ShareResult>;
    type Error = PyErr;

    fn auto(&mut self, source: &Self::Source) -> PyResult<String> {
        self.lab.call_method1(intern!(self.lab.py(), "auto"), (source,))?.extract()
    }
    fn try_path(&mut self, source: &Self::Source, path: &str, repeat: usize) -> PyResult<Tried<Self::Kept>> {
        let result = self.lab.call_method1(intern!(self.lab.py(), "try_path"), (source, path, repeat))?;
        if let Ok((reason, applicable, nbytes)) = result.extract::<(String, bool, u64)>() {
            return Ok(Tried { report: failed_report(path, &self.framework, nbytes, reason, applicable), kept: None });
        }
        let result = result.cast_into::<ShareResult>()?;
        let report = worker_report(result.get())?;
        let worked = report.verdict != crate::report::Verdict::Failed;
        Ok(Tried { report, kept: worked.then_some(result) })
    }
    fn release(&mut self, kept: Self::Kept) -> PyResult<()> {
        // ShareResult.release: a worker that died holds nothing, and says so at the next handoff.
        kept.call_method0(intern!(kept.py(), "release")).map(drop)
    }
    fn make_source(&mut self, size: u64) -> PyResult<Result<Self::Source, String>> {
        match self.lab.call_method1(intern!(self.lab.py(), "make_source"), (size,)) {
            Ok(source) => Ok(Ok(source)),
            Err(e) if e.is_instance_of::<PyException>(self.lab.py()) => Ok(Err(e.value(self.lab.py()).to_string())),
            Err(e) => Err(e),
        }
    }
    fn failed(&self, path: &str, size: u64, reason: String) -> crate::render::lab::PathRow {
        failed_report(path, &self.framework, size, reason, true)
    }
    fn interrupted(error: &PyErr) -> bool {
        Python::attach(|py| error.is_instance_of::<PyKeyboardInterrupt>(py))
    }
}

/// The process report of a handoff to a worker; a TypeError for a share within this process.
fn worker_report(result: &ShareResult) -> PyResult<crate::render::lab::PathRow> {
    result
        .process_report()
        .ok_or_else(|| pyo3::exceptions::PyTypeError::new_err("expected the result of a handoff to a worker process"))
}

/// Every process path of ``names`` for ``source``, run by the core's loop over ``lab``:
/// ``described`` is ``(TensorInfo of source, the framework the worker holds it in)``. Unless ``keep``,
/// each path's worker array is released before the next path runs; with it, the handoffs that
/// worked are the comparison's ``results``.
#[pyfunction]
#[pyo3(name = "compare_paths")]
fn process_compare_paths<'py>(
    py: Python<'py>,
    lab: Bound<'py, PyAny>,
    source: Bound<'py, PyAny>,
    names: Vec<String>,
    repeat: usize,
    keep: bool,
    described: (PyRef<'py, TensorInfo>, String),
) -> PyResult<Comparison> {
    let (info, target_framework) = described;
    let report = info.report.clone();
    let mut lab = PyLab { lab, framework: report.framework.clone() };
    let process_lab::Compared { rows, kept } = process_lab::compare(&mut lab, &source, &names, repeat, keep)?;
    let results = PyDict::new(py);
    for (path, handoff) in kept {
        results.set_item(path, handoff)?;
    }
    // Timed handoffs after each path's first; a comparison warms nothing up (the first call is apart).
    let report = ComparisonReport::of_rows(report, target_framework, rows, repeat as u64, 0);
    Ok(Comparison::new(report, results.unbind()))
}

/// Sizes × process paths, run by the core's loop over ``lab`` (whose ``make_source(size)`` makes
/// each size's array): each path is warmed up on the first array before any point is timed, and
/// Ctrl-C ends the sweep with the points measured (``interrupted``).
#[pyfunction]
#[pyo3(name = "bench_paths")]
#[allow(clippy::too_many_arguments)]
fn process_bench_paths(
    lab: Bound<'_, PyAny>,
    sizes: Vec<u64>,
    names: Vec<String>,
    repeat: usize,
    source_framework: String,
    target_framework: String,
    dtype: String,
    device: String,
) -> PyResult<Benchmark> {
    let mut lab = PyLab { lab, framework: source_framework.clone() };
    let process_lab::Swept { points, interrupted } = process_lab::bench(&mut lab, &sizes, &names, repeat)?;
    // The columns: the paths asked for, then those `auto` resolved to, each once.
    let mut paths: Vec<String> = Vec::new();
    for path in names.into_iter().filter(|n| n != "auto").chain(points.iter().map(|p| p.row.path.clone())) {
        if !paths.contains(&path) {
            paths.push(path);
        }
    }
    let report = BenchmarkReport {
        source_framework,
        target_framework,
        dtype,
        device,
        sizes,
        paths,
        points,
        interrupted,
        repeat: repeat as u64,
        warmup: WARM_UP_HANDOFFS as u64,
    }
    .marked();
    Ok(Benchmark::new(report))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("WARM_UP_HANDOFFS", WARM_UP_HANDOFFS)?;
    m.add_function(wrap_pyfunction!(process_compare_paths, m)?)?;
    m.add_function(wrap_pyfunction!(process_bench_paths, m)?)?;
    Ok(())
}
