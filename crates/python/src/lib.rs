//! gpushare's Python binding, built by maturin as `gpushare._native`: pyo3 at the boundary only.
//! Everything it converts and renders lives in the core (crates/core); the `gpushare` console
//! script runs the runner's command (crates/runner).

// A failed share is the cold path; its error carries what users read (see the core's lib.rs).
#![allow(clippy::result_large_err)]

// The core's modules under their own names, so `crate::share` reads here as it does in the core.
use gpushare_core::{advice, auto, cuda, dlpack, explain, paths, planner, render, report, schema, share, shared, stats, trace};

mod binding;
