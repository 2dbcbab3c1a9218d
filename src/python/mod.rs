//! pyo3 boundary
