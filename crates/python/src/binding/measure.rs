//! `gpushare.timing.measure`: the core's timing loop over any Python callable.

use pyo3::exceptions::PyValueError;
use pyo3::intern;
use pyo3::prelude::*;

use super::errors::PyGpushareErr;
use super::plan::PyHost;
use crate::share::Host;
use crate::share::ShareError;
use crate::share::timing::{self, Repeat, TimingPolicy};

/// `gpushare.timing.measure`'s samples: `fn(arg)` calls, `synchronize(value)` at the sample
/// edges, and an optional device clock with `start()`, `stop()` and `seconds()`.
struct CallSampler<'py> {
    call: Bound<'py, PyAny>,
    arg: Bound<'py, PyAny>,
    synchronize: Option<Bound<'py, PyAny>>,
    clock: Option<Bound<'py, PyAny>>,
    value: Option<Bound<'py, PyAny>>,
    host: PyHost,
}

impl crate::share::Sampler for CallSampler<'_> {
    fn sample(&mut self, n: u64, device_clock: bool) -> crate::share::Result<(f64, Option<f64>)> {
        let py = self.call.py();
        let fail = |e: PyErr| ShareError::Raised { origin: Box::new(e), predicted: None };
        let none = py.None().into_bound(py);
        if let Some(sync) = &self.synchronize {
            sync.call1((self.value.as_ref().unwrap_or(&none),)).map_err(fail)?;
        }
        self.value = None;
        let clock = self.clock.as_ref().filter(|_| device_clock);
        if let Some(c) = clock {
            c.call_method0(intern!(py, "start")).map_err(fail)?;
        }
        let t0 = std::time::Instant::now();
        for i in 0..n {
            let value = self.call.call1((&self.arg,)).map_err(fail)?;
            if i + 1 == n {
                self.value = Some(value);
            }
        }
        if let Some(c) = clock {
            c.call_method0(intern!(py, "stop")).map_err(fail)?;
        }
        if let Some(sync) = &self.synchronize {
            sync.call1((self.value.as_ref().unwrap_or(&none),)).map_err(fail)?;
        }
        let host = t0.elapsed().as_secs_f64();
        let device = match clock {
            Some(c) => Some(c.call_method0(intern!(py, "seconds")).and_then(|s| s.extract::<f64>()).map_err(fail)?),
            None => None,
        };
        py.check_signals().map_err(fail)?;
        Ok((host, device))
    }

    fn warm(&mut self) -> crate::share::Result<()> {
        let fail = |e: PyErr| ShareError::Raised { origin: Box::new(e), predicted: None };
        // The last result goes before the next call, here as in the samples.
        self.value = None;
        let value = self.call.call1((&self.arg,)).map_err(fail)?;
        if let Some(sync) = &self.synchronize {
            sync.call1((&value,)).map_err(fail)?;
        }
        self.value = Some(value);
        Ok(())
    }

    fn pause_collector(&mut self) -> bool {
        self.host.pause_collector()
    }

    fn resume_collector(&mut self) {
        self.host.resume_collector()
    }
}

/// The timing loop of the core over any callable: ``(samples, device_samples, number, warmup,
/// last value)``, seconds per call. ``gpushare.timing.measure`` is this.
#[pyfunction]
#[pyo3(signature = (call, arg, synchronize=None, repeat=7, number=None, warmup=1, min_sample_time=0.01,
                    max_overhead=timing::MAX_OVERHEAD, disable_gc=true, device_clock=None))]
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
pub fn measure<'py>(
    call: Bound<'py, PyAny>,
    arg: Bound<'py, PyAny>,
    synchronize: Option<Bound<'py, PyAny>>,
    repeat: usize,
    number: Option<u64>,
    warmup: usize,
    min_sample_time: f64,
    max_overhead: f64,
    disable_gc: bool,
    device_clock: Option<Bound<'py, PyAny>>,
) -> PyResult<(Vec<f64>, Option<Vec<f64>>, u64, usize, Option<Bound<'py, PyAny>>)> {
    let policy = TimingPolicy {
        warmup,
        number,
        repeat: Repeat::Exactly(repeat),
        min_sample_time,
        max_overhead,
        pause_collector: disable_gc,
    };
    policy.validate().map_err(PyValueError::new_err)?;
    let mut sampler = CallSampler { call, arg, synchronize, clock: device_clock, value: None, host: PyHost { allocators: None } };
    let m = timing::measure(&policy, &mut sampler).map_err(PyGpushareErr::from)?;
    Ok((m.samples, m.device_samples, m.number, m.warmup, sampler.value.take()))
}
