//! The forms every result shows itself in: text, HTML, the JSON envelope, a dict, and the MIME
//! bundle a notebook renders. A result class names, in one [`result_forms!`], its schema's name, its
//! data, its text and its HTML; the macro gives it [`Forms`] and the five Python methods, so no
//! class writes them again and every result reads alike (`to_pandas()`, whose columns differ by
//! result, stays with each class).

use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde::Serialize;

pub(crate) trait Forms {
    /// The schema's name: the JSON form is `{"schema": "gpushare.<KIND>/1", "data": …}`.
    const KIND: &'static str;
    type Data: Serialize;
    fn data(&self) -> &Self::Data;
    fn text(&self) -> String;
    fn html(&self) -> String;

    /// The JSON form's `data` as a dict, with its `schema` kept as a key.
    fn dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        super::json::dict_with_schema(py, Self::KIND, self.data())
    }
    /// The `application/vnd.gpushare+json` payload as JSON text.
    fn json(&self) -> PyResult<String> {
        super::json::envelope_json(Self::KIND, self.data())
    }
    /// Text, HTML and the JSON payload, for Jupyter's display.
    fn mime_bundle<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        super::json::mime_bundle(py, Self::KIND, self.data(), self.text(), self.html())
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
            const KIND: &'static str = $kind;
            type Data = $data;
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
pub(crate) use result_forms;
