//! Streams, events, device-time measurement, asynchronous copies and page-locked staging.

use std::time::{Duration, Instant};

use cudarc::driver::sys;
use serde::Serialize;

use super::context::{ContextScope, RetainedPrimary, active_primary_handle};
use super::error::{CudaError, Result, check, guarded, quietly};
use super::memory::PinnedHostBuffer;
use super::pointer::{PointerAttributes, check_device_range};
use super::status::has_symbol;

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
fn query(call: &'static str, rc: sys::CUresult) -> Result<bool> {
    if rc == sys::CUresult::CUDA_ERROR_NOT_READY {
        return Ok(false);
    }
    check(call, rc).map(|()| true)
}

/// Waits for `done` by polling: yields for the first 2 ms (short waits keep their latency), then
/// sleeps with growing pauses up to 1 ms, and asks `keep_waiting` every 50 ms.
fn poll_until(mut done: impl FnMut() -> Result<bool>, keep_waiting: &mut dyn FnMut() -> bool) -> Result<()> {
    const SPIN: Duration = Duration::from_millis(2);
    const ASK_EVERY: Duration = Duration::from_millis(50);
    const LONGEST_PAUSE: Duration = Duration::from_millis(1);
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
        if started.elapsed() < SPIN {
            std::thread::yield_now();
        } else {
            std::thread::sleep(pause);
            pause = (pause * 2).min(LONGEST_PAUSE);
        }
    }
}

/// Blocks until all work queued on `stream` has finished.
pub fn synchronize_stream(stream: &Stream) -> Result<()> {
    stream.synchronize()
}

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

/// Queues a device-to-device copy of `bytes` bytes on `stream` (any devices: with unified
/// addressing the driver routes a copy between devices itself).
///
/// # Safety
/// `[src, src+bytes)` and `[dst, dst+bytes)` must be live device memory that no other work touches
/// until the copy has finished; they must not overlap. [`copy_dtod_checked`] checks the ranges.
pub unsafe fn copy_dtod(dst: u64, src: u64, bytes: usize, stream: &Stream) -> Result<()> {
    if bytes == 0 {
        return Ok(());
    }
    guarded(|| {
        let _scope = stream.enter()?;
        // SAFETY: the caller's contract.
        check("cuMemcpyDtoDAsync_v2", unsafe { sys::cuMemcpyDtoDAsync_v2(dst, src, bytes, stream.raw()) })
    })
}

/// [`copy_dtod`] after asking the driver that both ranges are device memory inside one allocation
/// each, and that they do not overlap. What the Python layer calls with user-given addresses.
pub fn copy_dtod_checked(dst: u64, src: u64, bytes: usize, stream: &Stream) -> Result<()> {
    if bytes == 0 {
        return Ok(());
    }
    check_copy_ranges(src, dst, bytes as u64)?;
    // SAFETY: both ranges are device memory inside their allocations and disjoint (checked above);
    // keeping them alive and untouched until the copy finishes is the caller's stream discipline.
    unsafe { copy_dtod(dst, src, bytes, stream) }
}

/// Both ranges device memory inside one allocation each, and disjoint; returns the source's attributes.
fn check_copy_ranges(src: u64, dst: u64, bytes: u64) -> Result<PointerAttributes> {
    let source = check_device_range(src, bytes, "source")?;
    check_device_range(dst, bytes, "destination")?;
    let overlap = src < dst.saturating_add(bytes) && dst < src.saturating_add(bytes);
    if overlap {
        return Err(CudaError::InvalidArgument(format!(
            "source [{src:#x}, +{bytes}) and destination [{dst:#x}, +{bytes}) overlap"
        )));
    }
    Ok(source)
}

/// Queues a device-to-host copy on `stream`. Asynchronous only if `dst` is page-locked.
///
/// # Safety
/// `[src, src+bytes)` must be live device memory and `[dst, dst+bytes)` writable host memory that
/// nothing reads or frees until the copy has finished (synchronise `stream` first).
pub unsafe fn copy_dtoh_async(dst: *mut u8, src: u64, bytes: usize, stream: &Stream) -> Result<()> {
    if bytes == 0 {
        return Ok(());
    }
    let dst_addr = dst as usize;
    guarded(|| {
        let _scope = stream.enter()?;
        // SAFETY: the caller's contract.
        check("cuMemcpyDtoHAsync_v2", unsafe {
            sys::cuMemcpyDtoHAsync_v2(dst_addr as *mut std::ffi::c_void, src, bytes, stream.raw())
        })
    })
}

/// Queues a host-to-device copy on `stream`. Asynchronous only if `src` is page-locked.
///
/// # Safety
/// `[src, src+bytes)` must be readable host memory that stays unchanged and alive, and
/// `[dst, dst+bytes)` live device memory, until the copy has finished.
pub unsafe fn copy_htod_async(dst: u64, src: *const u8, bytes: usize, stream: &Stream) -> Result<()> {
    if bytes == 0 {
        return Ok(());
    }
    let src_addr = src as usize;
    guarded(|| {
        let _scope = stream.enter()?;
        // SAFETY: the caller's contract.
        check("cuMemcpyHtoDAsync_v2", unsafe {
            sys::cuMemcpyHtoDAsync_v2(dst, src_addr as *const std::ffi::c_void, bytes, stream.raw())
        })
    })
}

/// How a staged copy is cut: `chunks` pieces of at most `chunk_bytes`, alternating between two
/// halves of the page-locked buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct StagePlan {
    pub bytes: u64,
    pub chunk_bytes: u64,
    pub chunks: u64,
}

/// Cuts `bytes` into chunks of at most `chunk` bytes that fit twice into `pinned_len` bytes.
/// Chunks of 4 KiB or more are rounded down to whole 4 KiB pages, so both halves start page-aligned.
pub fn plan_staging(bytes: u64, chunk: u64, pinned_len: u64) -> Result<StagePlan> {
    if chunk == 0 {
        return Err(CudaError::InvalidArgument("the staging chunk must be at least one byte".to_owned()));
    }
    let mut slot = chunk.min(pinned_len / 2);
    if slot == 0 {
        return Err(CudaError::InvalidArgument(format!(
            "a page-locked buffer of {pinned_len} bytes cannot hold two chunks"
        )));
    }
    if slot >= 4096 {
        slot -= slot % 4096;
    }
    Ok(StagePlan { bytes, chunk_bytes: slot, chunks: bytes.div_ceil(slot) })
}

/// The second stream and the four ordering events of a double-buffered staged copy.
struct StagingGear {
    /// Host-to-device leg; the caller's stream carries the device-to-host leg.
    h2d_stream: Stream,
    /// Recorded on the caller's stream after the D→H copy into half `k`.
    d2h_done: [Event; 2],
    /// Recorded on `h2d_stream` after the H→D copy out of half `k`.
    h2d_done: [Event; 2],
}

impl StagingGear {
    /// The D→H leg runs on device `from` (the caller's stream), the H→D leg on device `to`: each
    /// event lives in the context of the stream it is recorded on, as `cuEventRecord` requires.
    /// Between two devices each copy engine then reads or writes its own memory over the host link.
    fn new(from: i32, to: i32) -> Result<StagingGear> {
        Ok(StagingGear {
            h2d_stream: Stream::new(to)?,
            d2h_done: [Event::new(from, false)?, Event::new(from, false)?],
            h2d_done: [Event::new(to, false)?, Event::new(to, false)?],
        })
    }
}

/// Queues the double-buffered copy. Chunk `i` goes device → half `i % 2` of `host` on `stream`,
/// then half → device on the gear's second stream, so the D→H of chunk `i+1` overlaps the H→D of
/// chunk `i`. Events order it: a half is refilled only after its previous H→D has read it, and
/// each H→D starts only after its D→H. The D→H leg runs on the caller's stream, so it starts after
/// whatever the caller queued before (the source is ready); at the end the caller's stream waits
/// for the last H→D, so what the caller queues next sees the destination complete.
///
/// # Safety
/// As [`stage_through_pinned`]; `host` must hold `2 * plan.chunk_bytes` bytes.
unsafe fn enqueue_staged(
    src: u64,
    dst: u64,
    plan: &StagePlan,
    host: *mut u8,
    stream: &Stream,
    gear: &StagingGear,
) -> Result<()> {
    if plan.chunks == 0 {
        return Ok(());
    }
    let _scope = stream.enter()?;
    let (caller, h2d) = (stream.raw(), gear.h2d_stream.raw());
    let cross = gear.h2d_stream.ordinal() != stream.ordinal();
    let mut offset = 0u64;
    for i in 0..plan.chunks {
        let k = (i % 2) as usize;
        let n = plan.chunk_bytes.min(plan.bytes - offset);
        // SAFETY (all calls below): the handles are live; `half` points into `host`, which holds two
        // chunks; the device ranges are the caller's contract.
        let half = unsafe { host.add(k * plan.chunk_bytes as usize) };
        check("cuStreamWaitEvent", unsafe { sys::cuStreamWaitEvent(caller, gear.h2d_done[k].raw(), 0) })?;
        check("cuMemcpyDtoHAsync_v2", unsafe {
            sys::cuMemcpyDtoHAsync_v2(half.cast(), src + offset, n as usize, caller)
        })?;
        check("cuEventRecord", unsafe { sys::cuEventRecord(gear.d2h_done[k].raw(), caller) })?;
        {
            // The H→D stream may be another device's: its calls run with its own context current.
            let _h2d_scope = if cross { Some(gear.h2d_stream.enter()?) } else { None };
            check("cuStreamWaitEvent", unsafe { sys::cuStreamWaitEvent(h2d, gear.d2h_done[k].raw(), 0) })?;
            check("cuMemcpyHtoDAsync_v2", unsafe {
                sys::cuMemcpyHtoDAsync_v2(dst + offset, half.cast_const().cast(), n as usize, h2d)
            })?;
            check("cuEventRecord", unsafe { sys::cuEventRecord(gear.h2d_done[k].raw(), h2d) })?;
        }
        offset += n;
    }
    let last = ((plan.chunks - 1) % 2) as usize;
    // SAFETY: live handles.
    check("cuStreamWaitEvent", unsafe { sys::cuStreamWaitEvent(caller, gear.h2d_done[last].raw(), 0) })
}

/// Queues a device-to-device copy through page-locked host memory, in chunks of at most `chunk`
/// bytes, double-buffered in `pinned` so D→H and H→D overlap (see [`PinnedStager`] for the
/// reusable, checked form). Returns once queued; work queued later on `stream` sees `dst` complete.
///
/// # Safety
/// `[src_dev, +bytes)` and `[dst_dev, +bytes)` must be live, disjoint device memory, untouched by
/// other work until `stream` has finished this copy; `pinned` must not be read, written or dropped
/// before then either (synchronise `stream` first). `stream` must belong to the primary context of
/// `stream.ordinal()` (torch's and CuPy's streams do).
pub unsafe fn stage_through_pinned(
    src_dev: u64,
    dst_dev: u64,
    bytes: usize,
    chunk: usize,
    pinned: &PinnedHostBuffer,
    stream: &Stream,
) -> Result<StagePlan> {
    let plan = plan_staging(bytes as u64, chunk as u64, pinned.len() as u64)?;
    guarded(|| {
        // Dropped right after queueing: the driver releases a stream or event with pending work only
        // once that work is done.
        let gear = StagingGear::new(stream.ordinal(), stream.ordinal())?;
        // SAFETY: the caller's contract; the plan fits two chunks into `pinned`. The device only
        // writes into `pinned`; no Rust reference to its bytes exists here.
        unsafe { enqueue_staged(src_dev, dst_dev, &plan, pinned.as_ptr().cast_mut(), stream, &gear) }?;
        Ok(plan)
    })
}

/// What a [`PinnedStager::stage`] did and how long the GPU took.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct StageReport {
    pub bytes: u64,
    pub chunk_bytes: u64,
    pub chunks: u64,
    /// Device time from the first D→H to the last H→D, by events on the caller's stream.
    pub device_seconds: f64,
}

/// The `pinned` transfer path, ready to reuse: a page-locked buffer of two chunks, a second stream
/// and the ordering events, all for device `ordinal`. One staged copy at a time (`&mut self`).
pub struct PinnedStager {
    ordinal: i32,
    chunk_bytes: usize,
    gear: StagingGear,
    timer: EventTimer,
    // Declared last: freed after the streams and events that use it.
    pinned: PinnedHostBuffer,
}

impl PinnedStager {
    /// 8 MiB chunks (a 16 MiB page-locked buffer): large enough for full PCIe/C2C bandwidth per
    /// copy, small enough that the two legs overlap for most of a large transfer.
    pub const DEFAULT_CHUNK_BYTES: usize = 8 << 20;

    pub fn new(ordinal: i32, chunk_bytes: usize) -> Result<PinnedStager> {
        Self::between(ordinal, ordinal, chunk_bytes)
    }

    /// A stager from device `from` (the source, the caller's stream) to device `to` (the
    /// destination, the stager's second stream): the `pinned` path of a move between GPUs.
    pub fn between(from: i32, to: i32, chunk_bytes: usize) -> Result<PinnedStager> {
        let ordinal = from;
        let plan = plan_staging(0, chunk_bytes as u64, (chunk_bytes as u64).saturating_mul(2))?;
        let chunk_bytes = plan.chunk_bytes as usize;
        let pinned_len = chunk_bytes
            .checked_mul(2)
            .ok_or_else(|| CudaError::InvalidArgument(format!("staging chunk of {chunk_bytes} bytes is too large")))?;
        Ok(PinnedStager {
            ordinal,
            chunk_bytes,
            gear: StagingGear::new(from, to)?,
            timer: EventTimer::new(ordinal)?,
            pinned: PinnedHostBuffer::new(ordinal, pinned_len)?,
        })
    }

    pub fn ordinal(&self) -> i32 {
        self.ordinal
    }

    pub fn chunk_bytes(&self) -> usize {
        self.chunk_bytes
    }

    /// Host address and size of the page-locked buffer (two chunks).
    pub fn pinned_addr(&self) -> u64 {
        self.pinned.addr()
    }

    pub fn pinned_len(&self) -> usize {
        self.pinned.len()
    }

    /// Queues a staged copy without checking or waiting.
    ///
    /// # Safety
    /// As [`stage_through_pinned`] for the device ranges and the stream; the stager's own buffer
    /// is protected by `&mut self` and by waiting for its second stream before it is freed.
    pub unsafe fn enqueue(&mut self, src: u64, dst: u64, bytes: usize, stream: &Stream) -> Result<StagePlan> {
        let plan = plan_staging(bytes as u64, self.chunk_bytes as u64, self.pinned.len() as u64)?;
        let host = self.pinned.as_mut_ptr();
        let gear = &self.gear;
        // SAFETY: the caller's contract; `host` holds two chunks.
        let queued = guarded(|| unsafe { enqueue_staged(src, dst, &plan, host, stream, gear) });
        if queued.is_err() {
            // Part of the copy may be queued without the H→D leg that the drop waits for: let it
            // finish now, so nothing can still be writing into the buffer when it is freed.
            quietly(|| stream.synchronize());
        }
        queued.map(|()| plan)
    }

    /// Copies `bytes` from device address `src` to device address `dst` through the page-locked
    /// buffer and waits for it, returning the device time. Both ranges are checked with the driver
    /// first (device memory, inside one allocation each, disjoint; the source on this stager's
    /// device). `keep_waiting` is asked every 50 ms while waiting (Ctrl-C).
    pub fn stage(
        &mut self,
        src: u64,
        dst: u64,
        bytes: usize,
        stream: &Stream,
        keep_waiting: &mut dyn FnMut() -> bool,
    ) -> Result<StageReport> {
        if bytes == 0 {
            return Ok(StageReport { bytes: 0, chunk_bytes: self.chunk_bytes as u64, chunks: 0, device_seconds: 0.0 });
        }
        let source = check_copy_ranges(src, dst, bytes as u64)?;
        if source.device_ordinal != self.ordinal {
            return Err(CudaError::InvalidArgument(format!(
                "the source is on CUDA device {}, this stager on device {}",
                source.device_ordinal, self.ordinal
            )));
        }
        self.timer.start(stream)?;
        // SAFETY: both ranges were checked to be device memory inside their allocations and
        // disjoint; this call waits below before returning, and the stager's buffer is ours.
        let plan = unsafe { self.enqueue(src, dst, bytes, stream) }?;
        self.timer.stop(stream)?;
        let ms = self.timer.elapsed_ms_interruptibly(keep_waiting)?;
        Ok(StageReport {
            bytes: plan.bytes,
            chunk_bytes: plan.chunk_bytes,
            chunks: plan.chunks,
            device_seconds: ms / 1e3,
        })
    }
}

impl Drop for PinnedStager {
    fn drop(&mut self) {
        // The H→D leg reads the page-locked buffer; it runs last in every chunk, so once the second
        // stream is idle nothing uses the buffer and it can be freed.
        let h2d = &self.gear.h2d_stream;
        quietly(|| h2d.synchronize());
    }
}

impl std::fmt::Debug for PinnedStager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PinnedStager")
            .field("ordinal", &self.ordinal)
            .field("chunk_bytes", &self.chunk_bytes)
            .field("pinned_len", &self.pinned.len())
            .finish()
    }
}
