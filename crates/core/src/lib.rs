//! gpushare: the Rust core of a notebook extension that shows what really happens when arrays move
//! between array frameworks through DLPack.
//!
//! Everything here is plain Rust with cargo tests: no pyo3, no tokio, no zeromq. The Python binding
//! (crates/python) and the runner (crates/runner, the Jupyter client and the CLI) build on it.

// `Error` carries the explanation users read (reason, fix, prediction, the framework's
// words) and a failed share is the cold path: boxing it to shrink every `Result` buys nothing.
#![allow(clippy::result_large_err)]

pub mod advice;
pub mod auto;
pub mod cuda;
pub mod dlpack;
pub mod error;
pub mod explain;
pub mod paths;
pub mod planner;
pub mod render;
pub mod report;
pub mod route;
pub mod schema;
pub mod share;
pub mod shared;
pub mod stats;
pub mod trace;

pub use error::{Error, Result};
