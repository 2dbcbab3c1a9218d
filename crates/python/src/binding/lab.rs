//! The lab's results: `Comparison` (every path for one array, `gpushare.compare`, `%share x ->jax
//! --path all`) and `Benchmark` (sizes × paths, `gpushare.bench`, `%sharebench`), typed Rust
//! reports (crates/core/src/render/lab/) with text, HTML, JSON, `to_dict` and `to_pandas`. Rows
//! and points are `PathRow`s (binding/rows.rs), within a process and across processes alike (a
//! row to a worker has its `worker` part).

use pyo3::exceptions::PyKeyError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use super::forms::Forms;
use super::process_rows::PyWorkerInfo;
use super::rows::PyPathRow;
use crate::render::lab::{BenchmarkReport, ComparisonReport, PathRow};
use crate::render::plot;

/// Counts are integers in `to_pandas()` frames; "Int64" (nullable) where a failed row has none.
const INTEGER_COLUMNS: [(&str, &str); 6] = [
    ("size", "int64"),
    ("nbytes", "int64"),
    ("bytes_moved", "int64"),
    ("repeats", "Int64"),
    ("loops", "Int64"),
    ("extrapolated_from", "Int64"),
];
/// Measurements are floats, NaN where a failed row has none (binding/frames.rs: one convention).
const FLOAT_COLUMNS: [&str; 7] = ["median_s", "min_s", "iqr_s", "device_median_s", "bandwidth_Bps", "predicted_s", "tolerance"];

/// A row's measured columns, after the identifying ones `row` already holds: the same columns for
/// every row, and for a handoff to a worker its worker's columns after them.
pub(super) fn flat<'py>(row: &Bound<'py, PyDict>, r: &PathRow) -> PyResult<()> {
    let t = r.timing.as_ref();
    row.set_item("path", &r.path)?;
    // The tables' vocabulary (crate::render::State): a path that cannot run here is "not
    // applicable", never "failed"; `applicable` stays beside it for code that filters on it.
    row.set_item("verdict", r.state().word())?;
    row.set_item("applicable", r.applicable)?;
    row.set_item("auto", r.auto)?;
    row.set_item("fastest", r.fastest)?;
    row.set_item("bytes_moved", r.bytes_moved)?;
    row.set_item("median_s", t.map(|t| t.median))?;
    row.set_item("min_s", t.map(|t| t.min))?;
    row.set_item("iqr_s", t.map(|t| t.iqr))?;
    row.set_item("repeats", t.map(|t| t.samples.len()).filter(|n| *n > 0))?;
    row.set_item("loops", t.map(|t| t.loops))?;
    row.set_item("device_median_s", r.device_timing.as_ref().map(|d| d.median))?;
    row.set_item("bandwidth_Bps", r.bandwidth)?;
    prediction_columns(row, r.predicted.as_ref(), r.misses_prediction)?;
    // How the handoff is ordered against the producer's queued work (None in host memory).
    row.set_item("ordering", &r.ordering)?;
    row.set_item("reason", &r.reason)?;
    row.set_item("warning", &r.warning)?;
    if let Some(worker) = &r.worker {
        super::process::worker_columns(row, r, worker)?;
    }
    Ok(())
}

/// The cost model's prediction beside the measured columns, as the JSON's `predicted` holds it:
/// the time (None where the model gives no number: not calibrated, or not predictable within 2x,
/// which `unpredictable` says in words), its stated error, whether it was extrapolated and from
/// which calibrated size, and whether the measurement missed it.
pub(super) fn prediction_columns(row: &Bound<'_, PyDict>, p: Option<&crate::advice::model::Prediction>, misses: bool) -> PyResult<()> {
    let number = p.filter(|p| p.unpredictable.is_none());
    row.set_item("predicted_s", number.map(|p| p.seconds))?;
    row.set_item("tolerance", p.map(|p| p.tolerance))?;
    row.set_item("extrapolated", p.map(|p| p.extrapolated))?;
    row.set_item("extrapolated_from", p.and_then(|p| p.extrapolated_from))?;
    row.set_item("unpredictable", p.and_then(|p| p.unpredictable.as_deref()))?;
    row.set_item("misses_prediction", p.map(|_| misses))?;
    Ok(())
}

/// A tidy frame: one row per measured path, the identifying columns first.
pub(super) fn frame<'py>(py: Python<'py>, rows: Bound<'py, PyList>) -> PyResult<Bound<'py, PyAny>> {
    let dtypes: Vec<(&str, &str)> = INTEGER_COLUMNS
        .into_iter()
        .chain(FLOAT_COLUMNS.map(|c| (c, "float64")))
        .chain(super::process::WORKER_COLUMN_DTYPES)
        .collect();
    super::frames::tidy_frame(py, rows, None, &dtypes)
}

/// Every transfer path for one array. ``rows`` (one PathRow per path, process paths too: ``row.verdict``,
/// ``row.timing.median``), ``paths`` (path → row: ``c.paths["host"].timing.median``), ``results``
/// (path → ShareResult of the paths that worked, with ``.value``), ``values``, ``fastest``,
/// ``to_dict()``, ``to_json()``, ``to_pandas()``. A comparison of the paths to a worker process
/// has one row per process path and its ``worker`` says so.
#[pyclass(module = "gpushare", frozen, name = "Comparison")]
pub struct Comparison {
    pub report: ComparisonReport,
    results: Py<PyDict>,
}

impl Comparison {
    /// `results`: path → ShareResult of the paths that worked (within a process) or were kept (to
    /// a worker: binding/process_tables.rs).
    pub fn new(report: ComparisonReport, results: Py<PyDict>) -> Comparison {
        Comparison { report, results }
    }
}

#[pymethods]
impl Comparison {
    /// One `PathRow` per path, in the order measured (a process path's to a worker has its `worker` part).
    #[getter]
    fn rows<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(PyList::new(py, self.report.rows.iter().map(PyPathRow::row))?.into_any())
    }
    /// Path → its row, in the order measured.
    #[getter]
    fn paths<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let by_path = PyDict::new(py);
        for row in self.rows(py)?.try_iter()? {
            let row = row?;
            by_path.set_item(row.getattr("path")?, row)?;
        }
        Ok(by_path)
    }
    /// Path → ShareResult, for the paths that worked (within a process) or were kept (to a worker).
    #[getter]
    fn results(&self, py: Python<'_>) -> Py<PyDict> {
        self.results.clone_ref(py)
    }
    /// Path → the converted array (the worker's array, to a worker), for the paths in ``results``.
    #[getter]
    fn values<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let values = PyDict::new(py);
        for (path, result) in self.results.bind(py).iter() {
            values.set_item(path, result.getattr("value")?)?;
        }
        Ok(values)
    }
    /// The fastest path that worked, faster than the others beyond the measured spread, or None
    /// (to a worker: by the handoffs after the first; each path's first call is its ``first_call``).
    #[getter]
    fn fastest(&self) -> Option<&str> {
        self.report.fastest.as_deref()
    }
    /// What identifies the comparison: the array's framework, dtype, shape and device, and the
    /// framework asked for.
    #[getter]
    fn source<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        let r = &self.report;
        d.set_item("source_framework", &r.source.framework)?;
        d.set_item("target_framework", &r.target_framework)?;
        d.set_item("dtype", &r.source.dtype)?;
        d.set_item("shape", r.source.shape.clone())?;
        d.set_item("device", &r.source.device)?;
        Ok(d)
    }
    /// The worker process the paths handed the array to (``pid``, ``host``: None on this host,
    /// ``framework``), as ``ShareResult.worker``; None for a comparison within this process.
    #[getter]
    fn worker<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        if !self.report.to_worker() {
            return Ok(None);
        }
        Ok(Some(Bound::new(py, PyWorkerInfo::of(self.report.rows.iter()))?.into_any()))
    }
    fn __getitem__<'py>(&self, py: Python<'py>, path: &str) -> PyResult<Bound<'py, PyAny>> {
        let at = self.report.rows.iter().position(|r| r.path == path);
        match at {
            Some(i) => self.rows(py)?.get_item(i),
            None => Err(PyKeyError::new_err(path.to_string())),
        }
    }
    /// One row per path; the source (frameworks, dtype, shape, device, bytes) on every row.
    fn to_pandas<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let report = &self.report;
        let s = &report.source;
        let rows = PyList::empty(py);
        for r in &report.rows {
            let row = PyDict::new(py);
            row.set_item("source_framework", &s.framework)?;
            row.set_item("target_framework", &report.target_framework)?;
            row.set_item("dtype", &s.dtype)?;
            row.set_item("shape", PyTuple::new(py, &s.shape)?)?;
            row.set_item("device", &s.device)?;
            row.set_item("nbytes", s.nbytes)?;
            flat(&row, r)?;
            rows.append(row)?;
        }
        frame(py, rows)
    }
}

impl Forms for Comparison {
    type Data<'a> = &'a ComparisonReport;
    fn kind(&self) -> &'static str {
        "comparison"
    }
    fn data(&self) -> &ComparisonReport {
        &self.report
    }
    fn text(&self) -> String {
        self.report.text()
    }
    fn html(&self) -> String {
        self.report.html()
    }
}

super::forms::forms_methods!(Comparison);

/// A sweep over sizes × paths. ``points`` (one PathRow per size × path, across processes too: ``p.size``, ``p.path``,
/// ``p.timing.median``), ``interrupted``, ``svg``, ``plot()`` (matplotlib), ``to_dict()``,
/// ``to_json()``, ``to_pandas()``; shown as tables plus an SVG plot. A sweep of the paths to a
/// worker process has one point per size × process path and its ``worker`` says so.
#[pyclass(module = "gpushare", frozen, name = "Benchmark")]
pub struct Benchmark {
    pub report: BenchmarkReport,
}

impl Benchmark {
    /// A sweep within this process (binding/lab_run.rs) or to a worker (binding/process_tables.rs).
    pub fn new(report: BenchmarkReport) -> Benchmark {
        Benchmark { report }
    }
}

#[pymethods]
impl Benchmark {
    #[getter]
    fn points<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(PyList::new(py, self.report.points.iter().map(PyPathRow::point))?.into_any())
    }
    /// Ctrl-C stopped the sweep: the points are those measured before.
    #[getter]
    fn interrupted(&self) -> bool {
        self.report.interrupted
    }
    /// The worker process the paths handed the arrays to (``pid``, ``host``: None on this host,
    /// ``framework``), as ``ShareResult.worker``; None for a sweep within this process.
    #[getter]
    fn worker<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        if !self.report.points.iter().any(|p| p.row.worker.is_some()) {
            return Ok(None);
        }
        Ok(Some(Bound::new(py, PyWorkerInfo::of(self.report.points.iter().map(|p| &p.row)))?.into_any()))
    }
    /// The plot: time and bandwidth against size, one line per path.
    #[getter]
    fn svg(&self) -> PyResult<String> {
        Ok(plot::benchmark_svg(&self.report))
    }
    /// Time per handoff against size, one line per path that worked, drawn with matplotlib
    /// (imported only here) on ``ax`` or a new figure's axes, for restyling, time in µs/ms and sizes
    /// in KiB/MiB; returns the Figure (``fig.axes[0]`` to restyle).
    /// The notebook's built-in plot is :attr:`svg`.
    #[pyo3(signature = (ax=None))]
    fn plot<'py>(slf: &Bound<'py, Self>, ax: Option<Bound<'py, PyAny>>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        py.import("gpushare.bench_plot")?.getattr("plot_benchmark")?.call1((slf, ax))
    }
    /// One row per size × path, with the frameworks, dtype and device of the sweep on every row.
    fn to_pandas<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let b = &self.report;
        let rows = PyList::empty(py);
        for p in &b.points {
            let row = PyDict::new(py);
            row.set_item("source_framework", &b.source_framework)?;
            row.set_item("target_framework", &b.target_framework)?;
            row.set_item("dtype", &b.dtype)?;
            row.set_item("device", &b.device)?;
            row.set_item("size", p.size)?;
            flat(&row, &p.row)?;
            rows.append(row)?;
        }
        frame(py, rows)
    }
}

impl Forms for Benchmark {
    type Data<'a> = &'a BenchmarkReport;
    fn kind(&self) -> &'static str {
        "benchmark"
    }
    fn data(&self) -> &BenchmarkReport {
        &self.report
    }
    fn text(&self) -> String {
        self.report.text()
    }
    fn html(&self) -> String {
        self.report.html()
    }
}

super::forms::forms_methods!(Benchmark);

/// ``(colour, dash)`` a path is drawn with in every plot: the path table's colour and the SVG's
/// dash pattern (``"6 3"``: on, off, … in points; ``""``: solid), so ``Benchmark.plot()`` draws a
/// path as the notebook's plot does.
#[pyfunction]
fn plot_style(path: &str) -> (&'static str, &'static str) {
    (plot::colour(path), plot::stroke(path).0)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(plot_style, m)?)?;
    m.add_class::<Comparison>()?;
    m.add_class::<PyPathRow>()?;
    m.add_class::<Benchmark>()?;
    super::lab_run::register(m)
}
