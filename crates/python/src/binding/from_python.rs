//! Python objects as a `serde_json::Value`, read by pyo3 directly (no JSON text): how the rows the
//! process transport hands over reach their Rust types (crates/core/src/report/process.rs), and the
//! machine key a cost model is made for, which the Python layer gathers.

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::Value;

/// The value of a Python object built of dicts, lists, tuples, ints, floats, str, bool and None,
/// read by pyo3 directly (no JSON text): how the process results reach their Rust types. Another
/// object becomes its number (`__index__`, `__float__`) or its `str()`, as `json.dumps(default=str)` did.
pub fn py_to_json(obj: &Bound<'_, PyAny>) -> PyResult<Value> {
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
