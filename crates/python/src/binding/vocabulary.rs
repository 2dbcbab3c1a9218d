//! The core's verdict as Python's `gpushare.Verdict` (python/gpushare/vocabulary.py), a `str` enum:
//! a result's verdict crosses the seam typed, and still reads as its word.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

use crate::report::Verdict;

/// `gpushare.vocabulary.Verdict`, looked up once.
static VERDICT: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// A verdict handed to Python: the `gpushare.Verdict` member of its word.
pub struct PyVerdict(pub Verdict);

impl<'py> IntoPyObject<'py> for PyVerdict {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let class = VERDICT.get_or_try_init(py, || -> PyResult<Py<PyAny>> {
            Ok(py.import("gpushare.vocabulary")?.getattr("Verdict")?.unbind())
        })?;
        let member = match self.0 {
            Verdict::Shared => "SHARED",
            Verdict::Copied => "COPIED",
            Verdict::Failed => "FAILED",
        };
        class.bind(py).getattr(member)
    }
}
