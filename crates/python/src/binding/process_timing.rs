//! The timing of handoffs to another process: the core's one timing loop over the worker
//! transport's "do one handoff" callable, and the core's statistics of what it measured.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use super::json::json_to_py;
use crate::report::process::ProcessTiming;
use crate::share::timing::{self, Sampler, TimingPolicy};

fn value_error(e: impl ToString) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// One handoff per sample: the last handoff's result is released (untimed) before the next
/// handoff (timed) takes its place.
struct HandoffSampler<'py> {
    handoff: Bound<'py, PyAny>,
    release: Option<Bound<'py, PyAny>>,
    last: Option<Bound<'py, PyAny>>,
    error: Option<PyErr>,
}

impl Sampler for HandoffSampler<'_> {
    fn sample(&mut self, n: u64, _device_clock: bool) -> crate::share::Result<(f64, Option<f64>)> {
        let mut seconds = 0.0;
        for _ in 0..n {
            if let (Some(release), Some(last)) = (&self.release, self.last.take())
                && let Err(e) = release.call1((last,))
            {
                return Err(self.keep(e));
            }
            let t0 = std::time::Instant::now();
            match self.handoff.call0() {
                Ok(v) => self.last = Some(v),
                Err(e) => return Err(self.keep(e)),
            }
            seconds += t0.elapsed().as_secs_f64();
        }
        Ok((seconds, None))
    }
}

impl HandoffSampler<'_> {
    /// The Python exception goes back to Python as itself (a WorkerError, Ctrl-C).
    fn keep(&mut self, e: PyErr) -> crate::share::ShareError {
        let text = e.to_string();
        self.error = Some(e);
        crate::share::ShareError::Usage(text)
    }
}

fn timing_of(first_call: f64, mut samples: Vec<f64>) -> ProcessTiming {
    if samples.is_empty() {
        samples.push(first_call);
    }
    samples.sort_by(f64::total_cmp);
    let t = crate::stats::Timing::from_samples(samples.clone(), 1);
    ProcessTiming { first_call, median: Some(t.median), min: Some(t.min), repeats: samples.len() as u64, samples }
}

fn timing_dict<'py>(py: Python<'py>, t: &ProcessTiming) -> PyResult<Bound<'py, PyAny>> {
    json_to_py(py, &serde_json::to_value(t).map_err(value_error)?)
}

/// Times the handoffs of a process path with the core's timing loop: `handoff()` once (the first
/// call, with its one-off costs, plus `first_extra` seconds measured before it), then `repeat`
/// samples of one handoff each, `release(last)` untimed before each. Returns the last handoff's
/// result and the timing (first call, median, min, sorted samples, repeats).
#[pyfunction]
#[pyo3(signature = (handoff, release, repeat, first_extra=0.0))]
fn measure_handoffs<'py>(
    py: Python<'py>,
    handoff: Bound<'py, PyAny>,
    release: Bound<'py, PyAny>,
    repeat: usize,
    first_extra: f64,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    let mut sampler = HandoffSampler { handoff, release: Some(release), last: None, error: None };
    let run = |policy: TimingPolicy, sampler: &mut HandoffSampler<'py>| {
        timing::measure(&policy, sampler).map_err(|e| sampler.error.take().unwrap_or_else(|| value_error(e)))
    };
    let first = run(TimingPolicy::once(), &mut sampler)?.samples[0];
    let samples = if repeat > 0 {
        let mut policy = TimingPolicy::fixed(repeat, 1, 0);
        policy.pause_collector = false; // a handoff waits on a pipe: the collector is not what is timed
        run(policy, &mut sampler)?.samples
    } else {
        Vec::new()
    };
    let last = sampler.last.take().unwrap_or_else(|| py.None().into_bound(py));
    Ok((last, timing_dict(py, &timing_of(first + first_extra, samples))?))
}

/// `(result, seconds)` of one call of `call()`, by the core's clock: the one-off costs of a path
/// (a process group, a segment's copy) that its first call reports.
#[pyfunction]
fn timed_call<'py>(call: Bound<'py, PyAny>) -> PyResult<(Bound<'py, PyAny>, f64)> {
    let mut sampler = HandoffSampler { handoff: call, release: None, last: None, error: None };
    let m = timing::measure(&TimingPolicy::once(), &mut sampler)
        .map_err(|e| sampler.error.take().unwrap_or_else(|| value_error(e)))?;
    Ok((sampler.last.take().expect("one call was made"), m.samples[0]))
}

/// The timing of handoffs timed elsewhere (NCCL's, on the sending worker): first call, median,
/// min, sorted samples, repeats, by the core's statistics.
#[pyfunction]
fn handoff_timing<'py>(py: Python<'py>, first_call: f64, samples: Vec<f64>) -> PyResult<Bound<'py, PyAny>> {
    timing_dict(py, &timing_of(first_call, samples))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(measure_handoffs, m)?)?;
    m.add_function(wrap_pyfunction!(timed_call, m)?)?;
    m.add_function(wrap_pyfunction!(handoff_timing, m)?)?;
    Ok(())
}
