//! Page-locked staging, the `pinned` transfer path: a device-to-device copy through a double-buffered
//! page-locked host buffer, so that the device-to-host leg of one chunk overlaps the host-to-device
//! leg of the one before; on one device or between two ([`PinnedStager::between`]).

use cudarc::driver::sys;
use serde::Serialize;

use super::copy::check_copy_ranges;
use super::error::{CudaError, Result, check, guarded, quietly};
use super::event::{Event, EventTimer};
use super::memory::PinnedHostBuffer;
use super::stream::Stream;

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
