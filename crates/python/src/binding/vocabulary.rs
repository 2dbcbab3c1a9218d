//! The core's words as Python's `str` enums (python/gpushare/vocabulary.py): a verdict as
//! `gpushare.Verdict`, a path's kind as `gpushare.PathKind`. They cross the seam typed, both ways,
//! and still read as their words: a member is a `str`, so Python code may hand over either the
//! member or its word, and an unknown word is a `ValueError` naming the known ones.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

use crate::paths::PathKind;
use crate::report::Verdict;

/// A word of the vocabulary: its Python enum's name, its members' names and its words.
trait Word: Copy + Sized + 'static {
    /// The enum's name in `gpushare.vocabulary`.
    const CLASS: &'static str;
    /// What the word is, for an error: "verdict", "path kind".
    const WHAT: &'static str;
    const ALL: &'static [Self];
    fn class_cell() -> &'static PyOnceLock<Py<PyAny>>;
    fn word(self) -> &'static str;
    fn member(self) -> &'static str;
}

impl Word for Verdict {
    const CLASS: &'static str = "Verdict";
    const WHAT: &'static str = "verdict";
    const ALL: &'static [Verdict] = &[Verdict::Shared, Verdict::Copied, Verdict::Failed];
    fn class_cell() -> &'static PyOnceLock<Py<PyAny>> {
        static CLASS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
        &CLASS
    }
    fn word(self) -> &'static str {
        self.as_str()
    }
    fn member(self) -> &'static str {
        match self {
            Verdict::Shared => "SHARED",
            Verdict::Copied => "COPIED",
            Verdict::Failed => "FAILED",
        }
    }
}

impl Word for PathKind {
    const CLASS: &'static str = "PathKind";
    const WHAT: &'static str = "path kind";
    const ALL: &'static [PathKind] = &[PathKind::Share, PathKind::Move, PathKind::Process];
    fn class_cell() -> &'static PyOnceLock<Py<PyAny>> {
        static CLASS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
        &CLASS
    }
    fn word(self) -> &'static str {
        self.name()
    }
    fn member(self) -> &'static str {
        match self {
            PathKind::Share => "SHARE",
            PathKind::Move => "MOVE",
            PathKind::Process => "PROCESS",
        }
    }
}

/// The Python member of `word` (its enum looked up once per process).
fn to_member<'py, W: Word>(py: Python<'py>, word: W) -> PyResult<Bound<'py, PyAny>> {
    let class = W::class_cell().get_or_try_init(py, || -> PyResult<Py<PyAny>> {
        Ok(py.import("gpushare.vocabulary")?.getattr(W::CLASS)?.unbind())
    })?;
    class.bind(py).getattr(W::member(word))
}

/// The word a member (or a plain string) names; a `ValueError` naming the known words otherwise.
fn from_text<W: Word>(obj: Borrowed<'_, '_, PyAny>) -> PyResult<W> {
    let text: std::borrow::Cow<'_, str> = obj.extract()?;
    W::ALL.iter().copied().find(|w| w.word() == text).ok_or_else(|| {
        let known: Vec<&str> = W::ALL.iter().map(|w| w.word()).collect();
        PyValueError::new_err(format!("unknown {} {text:?}: one of {}", W::WHAT, known.join(", ")))
    })
}

/// A verdict crossing the seam: to Python as its `gpushare.Verdict` member.
pub struct PyVerdict(pub Verdict);

impl<'py> IntoPyObject<'py> for PyVerdict {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_member(py, self.0)
    }
}

impl FromPyObject<'_, '_> for PyVerdict {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, '_, PyAny>) -> PyResult<Self> {
        from_text(obj).map(PyVerdict)
    }
}

/// A path's kind crossing the seam: to Python as its `gpushare.PathKind` member, from Python as
/// a member or its word (`"share"`, `"move"`, `"process"`).
#[derive(Debug, Clone, Copy)]
pub struct PyPathKind(pub PathKind);

impl<'py> IntoPyObject<'py> for PyPathKind {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_member(py, self.0)
    }
}

impl FromPyObject<'_, '_> for PyPathKind {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, '_, PyAny>) -> PyResult<Self> {
        from_text(obj).map(PyPathKind)
    }
}
