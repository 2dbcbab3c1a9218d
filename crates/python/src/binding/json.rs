//! JSON values as Python objects: dicts, lists, ints, floats, str, bool and None, built directly
//! from a `serde_json::Value` the binding already holds (the CUDA reports of `crates/python/src/binding/cuda.rs`).
//! A report written by its own type goes the other way, as text through `json.loads`
//! (`crates/python/src/binding/types.rs`), which is faster than building its Value first.

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyList, PyString};
use serde_json::Value;

/// `value` as the Python object `json.loads` would give for its text, integers of any size
/// included (serde_json keeps numbers exactly, with `arbitrary_precision`).
pub fn json_to_py<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                u.into_pyobject(py)?.into_any()
            } else if let Some(i) = n.as_i64() {
                i.into_pyobject(py)?.into_any()
            } else {
                let text = n.to_string();
                if text.contains(['.', 'e', 'E']) {
                    n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any()
                } else {
                    // An integer past 64 bits: Python's int reads it exactly, as json.loads does.
                    py.get_type::<pyo3::types::PyInt>().call1((text,))?
                }
            }
        }
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(items) => {
            let items = items.iter().map(|item| json_to_py(py, item)).collect::<PyResult<Vec<_>>>()?;
            PyList::new(py, items)?.into_any()
        }
        Value::Object(map) => {
            let dict = PyDict::new(py);
            for (key, item) in map {
                dict.set_item(key, json_to_py(py, item)?)?;
            }
            dict.into_any()
        }
    })
}
