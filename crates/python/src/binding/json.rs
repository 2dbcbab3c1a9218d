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

/// The value of a Python object built of dicts, lists, tuples, ints, floats, str, bool and None,
/// read by pyo3 directly (no JSON text): how the process results reach their Rust types. Another
/// object becomes its number (`__index__`, `__float__`) or its `str()`, as `json.dumps(default=str)` did.
pub fn py_to_json(obj: &Bound<'_, PyAny>) -> PyResult<Value> {
    use pyo3::types::{PyFloat, PyInt, PyTuple};
    if obj.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if obj.is_instance_of::<PyInt>() || (obj.hasattr("__index__")? && !obj.is_instance_of::<PyFloat>()) {
        if let Ok(u) = obj.extract::<u64>() {
            return Ok(u.into());
        }
        if let Ok(i) = obj.extract::<i64>() {
            return Ok(i.into());
        }
        // Past 64 bits: kept exactly (arbitrary_precision), as Python's int has it.
        let text = obj.call_method0("__index__")?.str()?.to_string();
        return serde_json::from_str(&text).map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()));
    }
    if obj.is_instance_of::<PyFloat>() || obj.hasattr("__float__")? && !obj.is_instance_of::<PyString>() {
        let f: f64 = obj.extract()?;
        return Ok(serde_json::Number::from_f64(f).map(Value::Number).unwrap_or(Value::Null));
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Value::String(s.to_string_lossy().into_owned()));
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        let mut map = serde_json::Map::with_capacity(d.len());
        for (k, v) in d.iter() {
            map.insert(k.str()?.to_string(), py_to_json(&v)?);
        }
        return Ok(Value::Object(map));
    }
    if obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>() {
        return obj.try_iter()?.map(|item| py_to_json(&item?)).collect::<PyResult<Vec<_>>>().map(Value::Array);
    }
    Ok(Value::String(obj.str()?.to_string()))
}
