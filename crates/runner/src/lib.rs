//! gpushare's runner: the Jupyter client (kernelspecs, launch, execute, notebooks over ZeroMQ) and the
//! `gpushare` command. It takes the path table, devices and a few units from the core and nothing
//! else; the Python binding links it so the console script runs the same code.

pub mod cli;
pub mod kernel;

// The core's modules under their old names, so `crate::paths` reads the same here as in the core.
pub(crate) use gpushare_core::{cuda, paths, render, route, shared};
