//! The timing of handoffs to another process from Python: the core's one timing loop
//! (crates/core/src/share/process.rs, `time_handoffs`) over a "do one handoff" callable. The
//! process paths themselves are timed by the core's pipeline (process_route.rs); these serve the
//! worker's own loops (the NCCL sender times its acknowledged sends) and one-off costs.

use pyo3::prelude::*;

use super::errors::to_pyerr;
use super::forms::to_py;
use crate::share::Error;
use crate::share::process::{Handoffs, time_handoffs};

/// Python callables as the loop's handoff and release; an exception goes back as itself.
struct PyHandoffs<'py> {
    handoff: Bound<'py, PyAny>,
    release: Option<Bound<'py, PyAny>>,
}

impl<'py> Handoffs for PyHandoffs<'py> {
    type Reply = Bound<'py, PyAny>;

    fn hand_over(&mut self) -> crate::share::Result<Bound<'py, PyAny>> {
        self.handoff.call0().map_err(|e| Error::Interrupted(Box::new(e)))
    }

    fn release(&mut self, reply: Bound<'py, PyAny>) -> crate::share::Result<()> {
        match &self.release {
            Some(release) => release.call1((reply,)).map(drop).map_err(|e| Error::Interrupted(Box::new(e))),
            None => Ok(()),
        }
    }
}

/// Times the handoffs of a process path with the core's timing loop: `handoff()` once (the first
/// call, with its one-off costs, plus `first_extra` seconds measured before it), then `repeat`
/// samples of one handoff each, `release(last)` untimed before each. Returns the last handoff's
/// result and the timing (the `Timing` of every handoff: samples in the order made, the first call
/// apart).
#[pyfunction]
#[pyo3(signature = (handoff, release, repeat, first_extra=0.0))]
fn measure_handoffs<'py>(
    py: Python<'py>,
    handoff: Bound<'py, PyAny>,
    release: Bound<'py, PyAny>,
    repeat: usize,
    first_extra: f64,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    let (last, timing) = time_handoffs(&mut PyHandoffs { handoff, release: Some(release) }, repeat, first_extra).map_err(to_pyerr)?;
    Ok((last, to_py(py, &timing)?))
}

/// `(result, seconds)` of one call of `call()`, by the core's clock: the one-off costs of a path
/// (a process group, a segment's copy) that its first call reports.
#[pyfunction]
fn timed_call<'py>(call: Bound<'py, PyAny>) -> PyResult<(Bound<'py, PyAny>, f64)> {
    let (result, timing) = time_handoffs(&mut PyHandoffs { handoff: call, release: None }, 0, 0.0).map_err(to_pyerr)?;
    Ok((result, timing.first_call.unwrap_or(timing.median)))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(measure_handoffs, m)?)?;
    m.add_function(wrap_pyfunction!(timed_call, m)?)?;
    Ok(())
}
