//! CUDA streams: gpushare's own (non-blocking, destroyed on drop) and the frameworks' (by raw
//! handle), entering a stream's context, and waiting for one, blocking or polled so that Ctrl-C can
//! stop the wait.

use std::time::{Duration, Instant};

use cudarc::driver::sys;

use super::context::{ContextScope, RetainedPrimary, active_primary_handle};
use super::error::{CudaError, Result, check, guarded, quietly};

/// A CUDA stream: one gpushare created (non-blocking, destroyed on drop) or one somebody else owns,
/// given by its raw handle (e.g. `torch.cuda.current_stream().cuda_stream`, or CuPy's `.ptr`).
///
/// Work is issued with the stream's context current: the context the stream was created in
/// (`cuStreamGetCtx`) for a real handle, device `ordinal`'s primary context for the special handles
/// 0 (legacy default stream), 1 (`CU_STREAM_LEGACY`) and 2 (`CU_STREAM_PER_THREAD`), which mean
/// "the default stream of the current context".
pub struct Stream {
    handle: u64,
    ordinal: i32,
    owner: Option<RetainedPrimary>,
}

impl Stream {
    /// The legacy default stream ("stream 0"): synchronises with every blocking stream of the context.
    pub const LEGACY_DEFAULT: u64 = 0;
    /// `CU_STREAM_PER_THREAD`: the per-thread default stream.
    pub const PER_THREAD: u64 = 2;

    /// A new non-blocking stream in device `ordinal`'s primary context. Non-blocking: it does not
    /// wait for the legacy default stream, so it orders only against what it is told to wait for.
    pub fn new(ordinal: i32) -> Result<Stream> {
        guarded(|| {
            let primary = RetainedPrimary::retain(ordinal)?;
            let scope = primary.enter()?;
            let mut stream: sys::CUstream = std::ptr::null_mut();
            // SAFETY: a context is current; writes one CUstream.
            check("cuStreamCreate", unsafe {
                sys::cuStreamCreate(&mut stream, sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32)
            })?;
            drop(scope);
            Ok(Stream { handle: stream as usize as u64, ordinal, owner: Some(primary) })
        })
    }

    /// A stream owned elsewhere, by its handle; `ordinal` is the device it works on (used for the
    /// special handles 0, 1 and 2). Not destroyed on drop; its owner must keep it alive meanwhile.
    pub fn external(handle: u64, ordinal: i32) -> Stream {
        Stream { handle, ordinal, owner: None }
    }

    pub fn handle(&self) -> u64 {
        self.handle
    }

    pub fn ordinal(&self) -> i32 {
        self.ordinal
    }

    /// gpushare created it (and destroys it on drop).
    pub fn is_owned(&self) -> bool {
        self.owner.is_some()
    }

    pub(crate) fn raw(&self) -> sys::CUstream {
        self.handle as usize as sys::CUstream
    }

    /// Makes the stream's context current on this thread until the returned scope is dropped.
    pub(crate) fn enter(&self) -> Result<StreamScope> {
        if let Some(primary) = &self.owner {
            return Ok(StreamScope { _scope: primary.enter()?, _primary: None });
        }
        if self.handle > Self::PER_THREAD {
            let mut ctx: sys::CUcontext = std::ptr::null_mut();
            // SAFETY: the handle is a live stream (the caller's promise for external streams);
            // writes one CUcontext.
            check("cuStreamGetCtx", unsafe { sys::cuStreamGetCtx(self.raw(), &mut ctx) })?;
            return Ok(StreamScope { _scope: ContextScope::enter(ctx)?, _primary: None });
        }
        let primary = RetainedPrimary::retain(self.ordinal)?;
        Ok(StreamScope { _scope: primary.enter()?, _primary: Some(primary) })
    }

    /// A default-stream handle of a device whose primary context is inactive: nothing can be
    /// queued there, and entering it would create the context just to find that out.
    fn is_idle_default_stream(&self) -> Result<bool> {
        Ok(self.owner.is_none() && self.handle <= Self::PER_THREAD && active_primary_handle(self.ordinal)?.is_none())
    }

    /// Has all work queued on the stream finished?
    pub fn is_done(&self) -> Result<bool> {
        guarded(|| {
            if self.is_idle_default_stream()? {
                return Ok(true);
            }
            let _scope = self.enter()?;
            // SAFETY: queries a live stream in its context.
            query("cuStreamQuery", unsafe { sys::cuStreamQuery(self.raw()) })
        })
    }

    /// Blocks until all work queued on the stream has finished.
    pub fn synchronize(&self) -> Result<()> {
        guarded(|| {
            if self.is_idle_default_stream()? {
                return Ok(());
            }
            let _scope = self.enter()?;
            // SAFETY: synchronises a live stream in its context.
            check("cuStreamSynchronize", unsafe { sys::cuStreamSynchronize(self.raw()) })
        })
    }

    /// Waits like [`Stream::synchronize`] but polls, asking `keep_waiting` every 50 ms whether to go on
    /// (the Python layer checks for Ctrl-C there). On `false` returns [`CudaError::Interrupted`];
    /// the queued work still runs to completion on the GPU.
    pub fn wait_interruptibly(&self, keep_waiting: &mut dyn FnMut() -> bool) -> Result<()> {
        poll_until(|| self.is_done(), keep_waiting)
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if let Some(primary) = &self.owner {
            let stream = self.raw();
            quietly(|| {
                let _scope = primary.enter()?;
                // SAFETY: destroys the stream created in `new`. Work still queued completes first;
                // the driver releases the stream afterwards.
                check("cuStreamDestroy_v2", unsafe { sys::cuStreamDestroy_v2(stream) })
            });
        }
    }
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stream")
            .field("handle", &format_args!("{:#x}", self.handle))
            .field("ordinal", &self.ordinal)
            .field("owned", &self.is_owned())
            .finish()
    }
}

/// The context of a stream made current; restores the previous one when dropped (scope first, then
/// the primary-context reference, by field order).
pub(crate) struct StreamScope {
    _scope: ContextScope,
    _primary: Option<RetainedPrimary>,
}

/// `cuStreamQuery`/`cuEventQuery` → finished? (`CUDA_ERROR_NOT_READY` is "not yet", not an error).
pub(super) fn query(call: &'static str, rc: sys::CUresult) -> Result<bool> {
    if rc == sys::CUresult::CUDA_ERROR_NOT_READY {
        return Ok(false);
    }
    check(call, rc).map(|()| true)
}

/// Waits for `done` by polling: yields for the first 2 ms (short waits keep their latency), then
/// sleeps with growing pauses, and asks `keep_waiting` every 50 ms. A pause never exceeds
/// [`POLL_OVERSHOOT`] of the time waited so far (nor 1 ms), so a finished copy is noticed within
/// about 3 % of its own duration: with pauses that grew to 1 ms regardless, a 6 ms staged copy was
/// noticed up to 1 ms late, which read as a fifth of the host link's bandwidth lost.
pub(super) fn poll_until(mut done: impl FnMut() -> Result<bool>, keep_waiting: &mut dyn FnMut() -> bool) -> Result<()> {
    const SPIN: Duration = Duration::from_millis(2);
    const ASK_EVERY: Duration = Duration::from_millis(50);
    let started = Instant::now();
    let mut last_asked = started;
    let mut pause = Duration::from_micros(10);
    loop {
        if done()? {
            return Ok(());
        }
        if last_asked.elapsed() >= ASK_EVERY {
            if !keep_waiting() {
                return Err(CudaError::Interrupted);
            }
            last_asked = Instant::now();
        }
        let waited = started.elapsed();
        if waited < SPIN {
            std::thread::yield_now();
        } else {
            std::thread::sleep(pause);
            pause = next_pause(pause, started.elapsed());
        }
    }
}

/// The longest pause between two polls, however long the wait.
const LONGEST_POLL_PAUSE: Duration = Duration::from_millis(1);

/// The largest share of the time already waited that one more pause may add ([`poll_until`]).
pub(super) const POLL_OVERSHOOT: u32 = 32;

/// The pause after `pause`, having waited `waited`: doubled, at most 1 ms and at most
/// `waited / POLL_OVERSHOOT`, at least 10 µs.
pub(super) fn next_pause(pause: Duration, waited: Duration) -> Duration {
    (pause * 2).min(LONGEST_POLL_PAUSE).min(waited / POLL_OVERSHOOT).max(Duration::from_micros(10))
}

/// Blocks until all work queued on `stream` has finished.
pub fn synchronize_stream(stream: &Stream) -> Result<()> {
    stream.synchronize()
}
