//! The forms every result shows itself in: text, HTML, the JSON envelope, a dict, and the MIME
//! bundle a notebook renders. A result class names, in one [`result_forms!`], its schema's name, its
//! data, its text and its HTML; the macro gives it [`Forms`] and the five Python methods, so no
//! class writes them again and every result reads alike (`to_pandas()`, whose columns differ by
//! result, stays with each class).

use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// `value` as the Python objects its JSON form reads as, `json.loads` of its text without the text:
/// dicts in the order the JSON writes their keys, a float JSON cannot write (NaN, ∞) as None, a map's
/// keys as strings, a unit variant as its name, a number kept exactly (an int of any size). The
/// value's JSON value is made first (that is where those rules live) and pythonize builds the objects.
pub(crate) fn to_py<'py, T: Serialize + ?Sized>(py: Python<'py>, value: &T) -> PyResult<Bound<'py, PyAny>> {
    let value = serde_json::to_value(value).map_err(|e| pyo3::exceptions::PyTypeError::new_err(e.to_string()))?;
    pythonize::pythonize(py, &value).map_err(PyErr::from)
}

/// A Python value built of dicts, lists, str, numbers, bool and None (what a worker replies, the
/// machine key a cost model is made for) read into a core type; ValueError naming what does not fit.
pub(crate) fn from_py<T: DeserializeOwned>(obj: &Bound<'_, PyAny>) -> PyResult<T> {
    pythonize::depythonize(obj).map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))
}

/// The JSON form's `data` as a dict with the envelope's `schema` (`gpushare.<kind>/<N>`) added as
/// its last key, so a `to_dict()` still says which schema it follows.
fn dict_with_schema<'py, T: Serialize + ?Sized>(py: Python<'py>, kind: &str, data: &T) -> PyResult<Bound<'py, PyAny>> {
    let dict = to_py(py, data)?;
    dict.set_item("schema", crate::schema::schema_id(kind))?;
    Ok(dict)
}

/// What every result hands Jupyter: its text, its HTML and its JSON envelope (`{"data": …,
/// "schema": …}`), so a notebook front end picks the richest form it can show and a reader of the
/// saved file gets the data.
pub(crate) fn mime_bundle<'py, T: Serialize + ?Sized>(
    py: Python<'py>,
    kind: &str,
    data: &T,
    text: String,
    html: String,
) -> PyResult<Bound<'py, PyDict>> {
    let envelope = PyDict::new(py);
    envelope.set_item("data", to_py(py, data)?)?;
    envelope.set_item("schema", crate::schema::schema_id(kind))?;
    let d = PyDict::new(py);
    d.set_item("text/plain", text)?;
    d.set_item("text/html", html)?;
    d.set_item(crate::report::MIME_TYPE, envelope)?;
    Ok(d)
}

/// The `application/vnd.gpushare+json` payload as JSON text, for `to_json()`: the one place a
/// result is written as text, for users who save or send it.
pub(crate) fn envelope_json<T: Serialize + ?Sized>(kind: &str, data: &T) -> PyResult<String> {
    crate::report::envelope_text(kind, data).map_err(|e| pyo3::exceptions::PyTypeError::new_err(e.to_string()))
}

pub(crate) trait Forms {
    /// The data the JSON form holds: a borrow of the result's report, or, for a result whose
    /// report can still take notes (a handoff to a worker), a copy taken under its lock.
    type Data<'a>: Serialize
    where
        Self: 'a;
    /// The schema's name: the JSON form is `{"schema": "gpushare.<KIND>/1", "data": …}`. A handoff
    /// to a worker process is a share, a comparison or a sweep of the paths to a worker a comparison
    /// or a sweep (each with its worker part).
    fn kind(&self) -> &'static str;
    fn data(&self) -> Self::Data<'_>;
    fn text(&self) -> String;
    fn html(&self) -> String;

    /// The JSON form's `data` as a dict, with its `schema` kept as a key.
    fn dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        dict_with_schema(py, self.kind(), &self.data())
    }
    /// The `application/vnd.gpushare+json` payload as JSON text.
    fn json(&self) -> PyResult<String> {
        envelope_json(self.kind(), &self.data())
    }
    /// Text, HTML and the JSON payload, for Jupyter's display.
    fn mime_bundle<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        mime_bundle(py, self.kind(), &self.data(), self.text(), self.html())
    }
}

/// A result class's [`Forms`] and its Python methods (`to_dict`, `to_json`, `__repr__`,
/// `_repr_html_` and `_repr_mimebundle_`), from what differs by class: its schema's name, the field
/// holding its data, and how that data renders as text and as HTML.
///
/// ```ignore
/// result_forms!(ShareResult {
///     kind: "share",
///     data: report: ShareReport,
///     text: |r| render::share_table_text(std::slice::from_ref(r)),
///     html: |r| render::share_table_html(std::slice::from_ref(r)),
/// });
/// ```
macro_rules! result_forms {
    ($class:ty { kind: $kind:literal, data: $field:ident: $data:ty, text: $text:expr, html: $html:expr $(,)? }) => {
        impl $crate::binding::forms::Forms for $class {
            type Data<'a> = &'a $data;
            fn kind(&self) -> &'static str {
                $kind
            }
            fn data(&self) -> &$data {
                &self.$field
            }
            fn text(&self) -> String {
                let render: fn(&$data) -> String = $text;
                render(&self.$field)
            }
            fn html(&self) -> String {
                let render: fn(&$data) -> String = $html;
                render(&self.$field)
            }
        }

        $crate::binding::forms::forms_methods!($class);
    };
}
pub(crate) use result_forms;

/// The five Python methods of a class that implements [`Forms`] itself (a result that is either a
/// handoff within this process or one to a worker, whose kind and data differ by which).
macro_rules! forms_methods {
    ($class:ty) => {
        #[pyo3::pymethods]
        impl $class {
            /// The JSON form's ``data`` as a dict, with its ``schema`` kept as a key.
            fn to_dict<'py>(&self, py: pyo3::Python<'py>) -> pyo3::PyResult<pyo3::Bound<'py, pyo3::PyAny>> {
                $crate::binding::forms::Forms::dict(self, py)
            }
            /// The ``application/vnd.gpushare+json`` payload: ``{"schema": "gpushare.<kind>/1", "data": …}``.
            fn to_json(&self) -> pyo3::PyResult<String> {
                $crate::binding::forms::Forms::json(self)
            }
            fn __repr__(&self) -> String {
                $crate::binding::forms::Forms::text(self)
            }
            fn _repr_html_(&self) -> String {
                $crate::binding::forms::Forms::html(self)
            }
            #[pyo3(signature = (include=None, exclude=None))]
            fn _repr_mimebundle_<'py>(
                &self,
                py: pyo3::Python<'py>,
                include: Option<pyo3::Bound<'py, pyo3::PyAny>>,
                exclude: Option<pyo3::Bound<'py, pyo3::PyAny>>,
            ) -> pyo3::PyResult<pyo3::Bound<'py, pyo3::types::PyDict>> {
                let _ = (include, exclude);
                $crate::binding::forms::Forms::mime_bundle(self, py)
            }
        }
    };
}
pub(crate) use forms_methods;

/// Key access over a row's JSON form, for code written against the dicts rows once were: ``to_dict``,
/// ``[]``, ``get``, ``keys`` and ``in``, each reading the class's own `dict(py)` (the JSON form as a
/// dict).
macro_rules! keyed_methods {
    ($class:ty) => {
        #[pyo3::pymethods]
        impl $class {
            /// The JSON form as a dict.
            fn to_dict<'py>(&self, py: pyo3::Python<'py>) -> pyo3::PyResult<pyo3::Bound<'py, pyo3::types::PyDict>> {
                self.dict(py)
            }
            fn __getitem__<'py>(&self, py: pyo3::Python<'py>, key: &str) -> pyo3::PyResult<pyo3::Bound<'py, pyo3::PyAny>> {
                use pyo3::types::PyDictMethods;
                self.dict(py)?.get_item(key)?.ok_or_else(|| pyo3::exceptions::PyKeyError::new_err(key.to_string()))
            }
            #[pyo3(signature = (key, default=None))]
            fn get<'py>(
                &self,
                py: pyo3::Python<'py>,
                key: &str,
                default: Option<pyo3::Bound<'py, pyo3::PyAny>>,
            ) -> pyo3::PyResult<Option<pyo3::Bound<'py, pyo3::PyAny>>> {
                use pyo3::types::PyDictMethods;
                Ok(self.dict(py)?.get_item(key)?.or(default))
            }
            fn keys<'py>(&self, py: pyo3::Python<'py>) -> pyo3::PyResult<pyo3::Bound<'py, pyo3::PyAny>> {
                use pyo3::types::PyAnyMethods;
                self.dict(py)?.call_method0("keys")
            }
            fn __contains__(&self, py: pyo3::Python<'_>, key: &str) -> pyo3::PyResult<bool> {
                use pyo3::types::PyDictMethods;
                self.dict(py)?.contains(key)
            }
        }
    };
}
pub(crate) use keyed_methods;
