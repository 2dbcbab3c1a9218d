//! `to_pandas()`: every result's tidy frame is made here, with one missing-value convention.
//!
//! - An attribute that has no value (the time of a path that failed) is None on the result.
//! - In a frame, a measurement (seconds, bytes per second) is a float column, missing as NaN.
//! - A count (bytes, repeats, loops, sizes, pids) is an integer column: `int64`, or pandas' nullable
//!   `Int64` (missing as `<NA>`) where a failed row has none.
//! - Text is missing as None, in a column of Python objects. pandas 3 would otherwise infer its
//!   `str` dtype, missing as NaN, for some frames and not others.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use super::forms::to_py;
use crate::render::lab::PathRow;
use crate::report::ShareReport;

/// The tidy columns of a handoff's row that hold seconds: floats, NaN where there is none.
const SHARE_FLOAT_COLUMNS: [&str; 4] = ["median_s", "min_s", "iqr_s", "device_median_s"];

/// A tidy frame of `rows` (dicts): `columns` in that order where given (an empty frame keeps
/// them), each column in `dtypes` cast to its dtype where the frame has it, text as objects with
/// None where missing.
pub(crate) fn tidy_frame<'py>(
    py: Python<'py>,
    rows: Bound<'py, PyList>,
    columns: Option<&[&str]>,
    dtypes: &[(&str, &str)],
) -> PyResult<Bound<'py, PyAny>> {
    let pandas = py.import("pandas").map_err(|_| {
        pyo3::exceptions::PyImportError::new_err("to_pandas() needs pandas: pip install 'gpushare-dlpack[pandas]'")
    })?;
    let kwargs = PyDict::new(py);
    if let Some(columns) = columns {
        kwargs.set_item("columns", columns.to_vec())?;
    }
    let frame = pandas.getattr("DataFrame")?.call((rows,), Some(&kwargs))?;
    let present = frame.getattr("columns")?;
    let cast = PyDict::new(py);
    for (column, dtype) in dtypes {
        if present.contains(*column)? {
            cast.set_item(*column, *dtype)?;
        }
    }
    let frame = frame.call_method1("astype", (&cast,))?;
    let object = py.import("builtins")?.getattr("object")?;
    // The text columns, replaced in one `assign`: a column set from native code one by one
    // (`frame[c] = …`) reads to pandas 3 as chained assignment, and it warns.
    let text = PyDict::new(py);
    for column in frame.getattr("columns")?.try_iter()? {
        let column = column?;
        if cast.contains(&column)? {
            continue;
        }
        let values = frame.get_item(&column)?;
        let dtype = values.getattr(intern!(py, "dtype"))?;
        if dtype.eq(&object)? || matches!(dtype.str()?.to_string().as_str(), "str" | "string") {
            let values = values.call_method1("astype", (&object,))?;
            text.set_item(&column, values.call_method1("where", (values.call_method0("notna")?, py.None()))?)?;
        }
    }
    let frame = if text.is_empty() { frame } else { frame.call_method("assign", (), Some(&text))? };
    Ok(frame)
}

/// A tidy frame of handoffs: one row each, the identifying columns first, counts as integers,
/// seconds as floats.
pub(crate) fn shares_frame<'py>(py: Python<'py>, reports: &[ShareReport]) -> PyResult<Bound<'py, PyAny>> {
    let rows = PyList::empty(py);
    for report in reports {
        rows.append(share_row(py, report)?)?;
    }
    tidy_frame(py, rows, Some(&crate::report::TIDY_COLUMNS), &share_dtypes())
}

/// The frame of one handoff to a worker: a share's columns, then the worker's (what each handoff
/// moves, the first call, each side's process and memory, the mechanism: binding/process.rs).
pub(crate) fn worker_share_frame<'py>(py: Python<'py>, share: &ShareReport, row: &PathRow) -> PyResult<Bound<'py, PyAny>> {
    let columns = share_row(py, share)?;
    if let Some(worker) = &row.worker {
        super::process::worker_columns(&columns, row, worker)?;
    }
    let mut dtypes = share_dtypes();
    dtypes.extend(super::process::WORKER_COLUMN_DTYPES);
    tidy_frame(py, PyList::new(py, [columns])?, None, &dtypes)
}

fn share_row<'py>(py: Python<'py>, report: &ShareReport) -> PyResult<Bound<'py, PyDict>> {
    let row = PyDict::new(py);
    for (column, value) in report.tidy_row() {
        row.set_item(column, to_py(py, &value)?)?;
    }
    Ok(row)
}

fn share_dtypes() -> Vec<(&'static str, &'static str)> {
    crate::report::TIDY_INTEGER_COLUMNS
        .iter()
        .map(|c| (*c, "int64"))
        .chain(SHARE_FLOAT_COLUMNS.iter().map(|c| (*c, "float64")))
        .collect()
}
