//! The stage trace of the core (crates/core/src/trace.rs) for Python: benchmarks/bench_core.py
//! and tools/stage_trace.py read where a share's time goes with it.

use pyo3::prelude::*;

/// Each stage of the shares this thread made since the last call, as ``(stage, kind, seconds)`` in
/// order (a share starts with ``start``; ``kind`` is whose work the stage was: ``own``,
/// ``framework``, ``driver``, ``conversion`` or ``wait``; ``seconds`` less the trace's own cost,
/// ``_stage_trace_cost()``), and a fresh start. ``on`` first starts or stops recording, which is
/// off until started.
#[pyfunction]
#[pyo3(signature = (on=None))]
fn _stage_trace(on: Option<bool>) -> Vec<(&'static str, &'static str, f64)> {
    if let Some(on) = on {
        crate::trace::enable(on);
    }
    crate::trace::take().into_iter().map(|(stage, kind, seconds)| (stage, kind.as_str(), seconds)).collect()
}

/// The trace's own cost per stage, in seconds, that ``_stage_trace`` takes off each stage: measured
/// on this thread when the trace was last switched on (0 before).
#[pyfunction]
fn _stage_trace_cost() -> f64 {
    crate::trace::mark_cost()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_stage_trace, m)?)?;
    m.add_function(wrap_pyfunction!(_stage_trace_cost, m)?)?;
    Ok(())
}
