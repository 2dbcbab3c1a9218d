//! `PathRow`: one path's row of a `Comparison`, or one point of a `Benchmark` (its `size` set),
//! the core's `PathRow` (crates/core/src/render/lab/rows.rs) read by attribute: `row.timing` is a
//! `Timing`, `row.target` a `TensorInfo`, as on a `ShareResult`. A row of a handoff to a worker
//! process is the same `PathRow`: its `worker` names the process, `source` and `target` are its
//! two sides by memory identity (`ProcessSide`), and `mechanism`, `nbytes`, `bytes_per_handoff`,
//! `segment` and `link` say how it went. Key access (`row["timing"]["median"]`) reads the row's
//! JSON form, for code written against the dicts rows once were.

use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::advice::PyPrediction;
use super::forms::{keyed_methods, to_py};
use super::tensor_info::TensorInfo;
use super::process_rows::{PyProcessSide, PyWorkerInfo};
use super::types::PyTiming;
use crate::render::lab::{BenchPoint, PathRow};

#[pyclass(module = "gpushare", frozen, name = "PathRow")]
pub struct PyPathRow {
    row: PathRow,
    /// The point's array size in a sweep; `None` for a row of a comparison.
    size: Option<u64>,
}

impl PyPathRow {
    pub fn row(row: &PathRow) -> PyPathRow {
        PyPathRow { row: row.clone(), size: None }
    }
    pub fn point(point: &BenchPoint) -> PyPathRow {
        PyPathRow { row: point.row.clone(), size: Some(point.size) }
    }

    /// The JSON form as a dict: the row's fields, a point's `size` first.
    fn dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let fields = to_py(py, &self.row)?.cast_into::<PyDict>()?;
        let Some(size) = self.size else { return Ok(fields) };
        let dict = PyDict::new(py);
        dict.set_item("size", size)?;
        dict.update(fields.as_mapping())?;
        Ok(dict)
    }
}

#[pymethods]
impl PyPathRow {
    #[getter]
    fn path(&self) -> &str {
        &self.row.path
    }
    /// `"shared"`, `"copied"` or `"failed"` (a path that cannot run here is failed and not `applicable`).
    #[getter]
    fn verdict(&self) -> super::vocabulary::PyVerdict {
        super::vocabulary::PyVerdict(self.row.verdict)
    }
    #[getter]
    fn applicable(&self) -> bool {
        self.row.applicable
    }
    /// Whether this is the path `auto` picks.
    #[getter]
    fn auto(&self) -> bool {
        self.row.auto
    }
    #[getter]
    fn reason(&self) -> Option<&str> {
        self.row.reason.as_deref()
    }
    #[getter]
    fn fix(&self) -> Option<&str> {
        self.row.fix.as_deref()
    }
    #[getter]
    fn bytes_moved(&self) -> u64 {
        self.row.bytes_moved
    }
    /// Host wall time per handoff; None for a path that did not run.
    #[getter]
    fn timing(&self) -> Option<PyTiming> {
        self.row.timing.clone().map(|timing| PyTiming { timing })
    }
    /// Device time per handoff (CUDA events), where measured.
    #[getter]
    fn device_timing(&self) -> Option<PyTiming> {
        self.row.device_timing.clone().map(|timing| PyTiming { timing })
    }
    /// Bytes moved per second at the median time; None when nothing was copied or it failed.
    #[getter]
    fn bandwidth(&self) -> Option<f64> {
        self.row.bandwidth
    }
    #[getter]
    fn fastest(&self) -> bool {
        self.row.fastest
    }
    #[getter]
    fn tied(&self) -> bool {
        self.row.tied
    }
    #[getter]
    fn comparable(&self) -> bool {
        self.row.comparable
    }
    #[getter]
    fn warning(&self) -> Option<&str> {
        self.row.warning.as_deref()
    }
    #[getter]
    fn notes(&self) -> Vec<String> {
        self.row.notes.clone()
    }
    /// The converted array's description (a `TensorInfo`), or for a handoff to a worker its
    /// worker's side (a `ProcessSide`); None for a path that failed.
    #[getter]
    fn target<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        match &self.row.worker {
            Some(w) => w.target.as_ref().map(|t| Bound::new(py, PyProcessSide::target(t)).map(Bound::into_any)).transpose(),
            None => self.row.target.clone().map(|report| Bound::new(py, TensorInfo { report }).map(Bound::into_any)).transpose(),
        }
    }
    /// A handoff to a worker: the parent's side, by memory identity; None within this process
    /// (the comparison's `source` describes the array).
    #[getter]
    fn source(&self) -> Option<PyProcessSide> {
        self.row.worker.as_ref().map(|w| PyProcessSide::source(&w.source))
    }
    /// A handoff to a worker: the process that held the array (None within this process).
    #[getter]
    fn worker(&self) -> Option<PyWorkerInfo> {
        self.row.worker.as_ref().map(|_| PyWorkerInfo::of(std::iter::once(&self.row)))
    }
    /// A handoff to a worker: how the path handed the memory over, in words.
    #[getter]
    fn mechanism(&self) -> Option<&str> {
        self.row.worker.as_ref().map(|w| w.mechanism.as_str())
    }
    /// A handoff to a worker: the bytes of the source array.
    #[getter]
    fn nbytes(&self) -> Option<u64> {
        self.row.worker.as_ref().map(|w| w.nbytes)
    }
    /// A handoff to a worker: the bytes each timed handoff after the first moves (a send copies
    /// every time, a staged segment only once).
    #[getter]
    fn bytes_per_handoff(&self) -> Option<u64> {
        self.row.worker.as_ref().map(|w| w.bytes_per_handoff)
    }
    /// The shared segment handed over (``name``, ``offset``), for a path that hands one.
    #[getter]
    fn segment<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.row.worker.as_ref().and_then(|w| w.segment.as_ref()).map(|s| to_py(py, s)).transpose()
    }
    /// The network link of a handoff to a worker on another host, as a dict.
    #[getter]
    fn link<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.row.worker.as_ref().and_then(|w| w.link.as_ref()).map(|l| to_py(py, l)).transpose()
    }
    /// What the cost model predicted before the path ran; None where the machine is not calibrated.
    #[getter]
    fn predicted(&self) -> Option<PyPrediction> {
        self.row.predicted.clone().map(|inner| PyPrediction { inner })
    }
    #[getter]
    fn misses_prediction(&self) -> bool {
        self.row.misses_prediction
    }
    /// How the handoff was ordered against the producer's queued work, in words.
    #[getter]
    fn ordering(&self) -> Option<&str> {
        self.row.ordering.as_deref()
    }
    /// The array's size in bytes at this point of a sweep; None for a row of a comparison.
    #[getter]
    fn size(&self) -> Option<u64> {
        self.size
    }

    fn __repr__(&self) -> String {
        let time = match &self.row.timing {
            Some(t) => format!(", median={}", crate::render::units::time(t.median)),
            None => String::new(),
        };
        let size = self.size.map(|s| format!("size={s}, ")).unwrap_or_default();
        format!("PathRow({size}path='{}', verdict='{}'{time})", self.row.path, self.row.verdict.as_str())
    }
}

// A point's JSON form has its `size` first.
keyed_methods!(PyPathRow);
