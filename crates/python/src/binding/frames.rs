//! `to_pandas()` of handoffs, with the one missing-value convention of every gpushare frame
//! (python/gpushare/records.py): counts are integers, measurements floats, and a measurement that
//! does not exist (the device time of a CPU handoff) is NaN in a float column, never None in an
//! object column.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use super::forms::to_py;
use crate::report::ShareReport;

/// The tidy columns that hold seconds: floats, NaN where there is none.
const FLOAT_COLUMNS: [&str; 4] = ["median_s", "min_s", "iqr_s", "device_median_s"];

/// A tidy frame of handoffs: one row each, the identifying columns first, counts as integers,
/// seconds as floats.
pub(crate) fn shares_frame<'py>(py: Python<'py>, reports: &[ShareReport]) -> PyResult<Bound<'py, PyAny>> {
    let pandas = py.import("pandas").map_err(|_| {
        pyo3::exceptions::PyImportError::new_err("to_pandas() needs pandas: pip install 'gpushare-dlpack[pandas]'")
    })?;
    let rows = PyList::empty(py);
    for report in reports {
        let row = PyDict::new(py);
        for (column, value) in report.tidy_row() {
            row.set_item(column, to_py(py, &value)?)?;
        }
        rows.append(row)?;
    }
    let kwargs = PyDict::new(py);
    kwargs.set_item("columns", crate::report::TIDY_COLUMNS.to_vec())?;
    let frame = pandas.getattr("DataFrame")?.call((rows,), Some(&kwargs))?;
    // An empty frame, or a column of Python ints, would otherwise come out as object or float; a
    // column of None (no device time on a CPU) as object.
    let dtypes = PyDict::new(py);
    for column in crate::report::TIDY_INTEGER_COLUMNS {
        dtypes.set_item(column, "int64")?;
    }
    for column in FLOAT_COLUMNS {
        dtypes.set_item(column, "float64")?;
    }
    // Text missing as None, as every gpushare frame has it (gpushare.records.normalise_frame).
    let frame = frame.call_method1("astype", (dtypes,))?;
    py.import("gpushare.records")?.getattr("normalise_frame")?.call1((frame,))
}
