//! `PathRow`: one path's row of a `Comparison`, or one point of a `Benchmark` (its `size` set),
//! the core's `PathRow` (crates/core/src/render/lab/rows.rs) read by attribute: `row.timing` is a
//! `Timing`, `row.target` a `TensorInfo`, as on a `ShareResult`. Key access (`row["timing"]
//! ["median"]`) reads the row's JSON form, for code written against the dicts rows once were.

use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::advice::PyPrediction;
use super::forms::{keyed_methods, to_py};
use super::tensor_info::TensorInfo;
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
    /// The converted array's description; None for a path that failed.
    #[getter]
    fn target(&self) -> Option<TensorInfo> {
        self.row.target.clone().map(|report| TensorInfo { report })
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
