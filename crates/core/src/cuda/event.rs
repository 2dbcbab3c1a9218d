//! CUDA events: ordering between streams (the staged copy's legs) and device-time measurement
//! ([`EventTimer`]), so that host overheads and Python are not counted in a GPU timing.

use cudarc::driver::sys;

use super::context::RetainedPrimary;
use super::error::{CudaError, Result, check, guarded, quietly};
use super::status::has_symbol;
use super::stream::{Stream, poll_until, query};

/// A CUDA event in device `ordinal`'s primary context.
pub(crate) struct Event {
    handle: u64,
    primary: RetainedPrimary,
}

impl Event {
    /// `timing: false` makes a cheaper event for ordering only (`CU_EVENT_DISABLE_TIMING`).
    pub(crate) fn new(ordinal: i32, timing: bool) -> Result<Event> {
        let primary = RetainedPrimary::retain(ordinal)?;
        let scope = primary.enter()?;
        let flags = if timing {
            sys::CUevent_flags::CU_EVENT_DEFAULT as u32
        } else {
            sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32
        };
        let mut event: sys::CUevent = std::ptr::null_mut();
        // SAFETY: a context is current; writes one CUevent.
        check("cuEventCreate", unsafe { sys::cuEventCreate(&mut event, flags) })?;
        drop(scope);
        Ok(Event { handle: event as usize as u64, primary })
    }

    pub(crate) fn raw(&self) -> sys::CUevent {
        self.handle as usize as sys::CUevent
    }

    /// Records the event on `stream` (the stream's context must be the event's: the primary context).
    pub(crate) fn record(&self, stream: &Stream) -> Result<()> {
        let _scope = stream.enter()?;
        // SAFETY: both handles are live; the stream's context is current.
        check("cuEventRecord", unsafe { sys::cuEventRecord(self.raw(), stream.raw()) })
    }

    pub(crate) fn is_done(&self) -> Result<bool> {
        let _scope = self.primary.enter()?;
        // SAFETY: queries a live event.
        query("cuEventQuery", unsafe { sys::cuEventQuery(self.raw()) })
    }

    pub(crate) fn synchronize(&self) -> Result<()> {
        let _scope = self.primary.enter()?;
        // SAFETY: waits on a live event.
        check("cuEventSynchronize", unsafe { sys::cuEventSynchronize(self.raw()) })
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        let (event, primary) = (self.raw(), &self.primary);
        quietly(|| {
            let _scope = primary.enter()?;
            // SAFETY: destroys the event created in `new`; a pending record completes first.
            check("cuEventDestroy_v2", unsafe { sys::cuEventDestroy_v2(event) })
        });
    }
}

/// Makes `waiter` wait, on the device, for the work queued so far on `stream` (a stream of any
/// device): an event recorded there, no host wait. A stream with nothing queued is not waited for.
pub fn order_after(waiter: &Stream, stream: &Stream) -> Result<()> {
    guarded(|| {
        if stream.is_done()? {
            return Ok(());
        }
        let event = Event::new(stream.ordinal(), false)?;
        event.record(stream)?;
        let _scope = waiter.enter()?;
        // SAFETY: both handles are live; the waiter's context is current. The event may belong to
        // another device (cuStreamWaitEvent allows it) and is destroyed once it completes.
        check("cuStreamWaitEvent", unsafe { sys::cuStreamWaitEvent(waiter.raw(), event.raw(), 0) })
    })
}

/// Milliseconds between two completed events (resolution about half a microsecond).
fn elapsed_between(start: &Event, stop: &Event) -> Result<f64> {
    let mut ms: f32 = 0.0;
    let _scope = stop.primary.enter()?;
    // The v1 entry point is what CUDA 12 binaries call; drivers keep it. _v2 (12.8+) is the same call.
    let rc = if has_symbol("cuEventElapsedTime") {
        // SAFETY: both events are live and recorded; writes one float.
        unsafe { sys::cuEventElapsedTime(&mut ms, start.raw(), stop.raw()) }
    } else {
        // SAFETY: as above.
        unsafe { sys::cuEventElapsedTime_v2(&mut ms, start.raw(), stop.raw()) }
    };
    check("cuEventElapsedTime", rc)?;
    Ok(f64::from(ms))
}

/// Device time of the work queued on a stream between [`EventTimer::start`] and
/// [`EventTimer::stop`], measured by two events (so host overheads and Python are not counted).
pub struct EventTimer {
    start: Event,
    stop: Event,
    started: bool,
    stopped: bool,
}

impl std::fmt::Debug for EventTimer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventTimer").field("started", &self.started).field("stopped", &self.stopped).finish()
    }
}

impl EventTimer {
    pub fn new(ordinal: i32) -> Result<EventTimer> {
        guarded(|| {
            Ok(EventTimer {
                start: Event::new(ordinal, true)?,
                stop: Event::new(ordinal, true)?,
                started: false,
                stopped: false,
            })
        })
    }

    pub fn start(&mut self, stream: &Stream) -> Result<()> {
        guarded(|| self.start.record(stream))?;
        self.started = true;
        self.stopped = false;
        Ok(())
    }

    pub fn stop(&mut self, stream: &Stream) -> Result<()> {
        if !self.started {
            return Err(CudaError::InvalidArgument("EventTimer.stop before start".to_owned()));
        }
        guarded(|| self.stop.record(stream))?;
        self.stopped = true;
        Ok(())
    }

    fn require_stopped(&self) -> Result<()> {
        if self.started && self.stopped {
            Ok(())
        } else {
            Err(CudaError::InvalidArgument("EventTimer needs start and stop before elapsed".to_owned()))
        }
    }

    /// Milliseconds between start and stop; waits until the stop event has happened.
    pub fn elapsed_ms(&self) -> Result<f64> {
        self.require_stopped()?;
        guarded(|| {
            self.stop.synchronize()?;
            elapsed_between(&self.start, &self.stop)
        })
    }

    /// [`EventTimer::elapsed_ms`], polling and asking `keep_waiting` every 50 ms whether to go on.
    pub fn elapsed_ms_interruptibly(&self, keep_waiting: &mut dyn FnMut() -> bool) -> Result<f64> {
        self.require_stopped()?;
        guarded(|| {
            poll_until(|| self.stop.is_done(), keep_waiting)?;
            elapsed_between(&self.start, &self.stop)
        })
    }
}
