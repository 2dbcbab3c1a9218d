//! Copies of a contiguous source into a new allocation: the `copy`, `pinned` and `p2p` paths, on the
//! host in interruptible chunks, on one GPU queued on the source's stream, between GPUs by peer copy
//! or through page-locked staging.

use std::sync::{Arc, Mutex};

use super::{Allocation, COPY_CHUNK_BYTES, Device, Result, SharedError, lock};
use crate::cuda::{self, CudaError, PinnedStager, Stream};

/// How a source gets into gpushare's memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// `cuMemcpyDtoDAsync` on the source's stream (GPU), `memcpy` in chunks (CPU).
    Copy,
    /// Device → page-locked host → device, double-buffered by the CUDA layer's [`PinnedStager`].
    Pinned,
    /// A peer copy from one GPU into memory gpushare allocates on another, after checking and
    /// enabling peer access (NVLink or PCIe P2P); the copy engine reads or writes the peer directly.
    P2p,
}

impl Method {
    pub fn parse(name: &str) -> Result<Method> {
        match name {
            "copy" => Ok(Method::Copy),
            "pinned" => Ok(Method::Pinned),
            "p2p" => Ok(Method::P2p),
            other => Err(SharedError::NotApplicable(format!("unknown copy method {other:?}: copy, pinned or p2p"))),
        }
    }
}

/// What a copy did.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct CopyReport {
    pub bytes: u64,
    /// Device time of a staged copy (events on the caller's stream); `None` for queued copies.
    pub device_seconds: Option<f64>,
    /// Host chunks or staging chunks.
    pub chunks: u64,
    /// The copy finished before returning (`false`: queued on the stream).
    pub complete: bool,
}

/// Copies `len` bytes of host memory from `src` to `dst` in chunks of [`COPY_CHUNK_BYTES`], asking
/// `keep_going` between chunks. Returns the number of chunks.
///
/// # Safety
/// `[src, src+len)` must be readable and `[dst, dst+len)` writable for the whole call, and the two
/// must not overlap.
pub unsafe fn copy_host_chunked(dst: u64, src: u64, len: usize, keep_going: &mut dyn FnMut() -> bool) -> Result<u64> {
    let mut offset = 0usize;
    let mut chunks = 0u64;
    while offset < len {
        if chunks > 0 && !keep_going() {
            return Err(SharedError::Interrupted);
        }
        let n = COPY_CHUNK_BYTES.min(len - offset);
        // SAFETY: the caller's contract; offset + n <= len.
        unsafe {
            std::ptr::copy_nonoverlapping(
                (src as usize + offset) as *const u8,
                (dst as usize + offset) as *mut u8,
                n,
            );
        }
        offset += n;
        chunks += 1;
    }
    Ok(chunks)
}

fn stager_for(from: i32, to: i32) -> Result<Arc<Mutex<PinnedStager>>> {
    type Stagers = Vec<((i32, i32), Arc<Mutex<PinnedStager>>)>;
    static STAGERS: Mutex<Stagers> = Mutex::new(Vec::new());
    let mut stagers = lock(&STAGERS);
    if let Some((_, s)) = stagers.iter().find(|(o, _)| *o == (from, to)) {
        return Ok(Arc::clone(s));
    }
    let stager = Arc::new(Mutex::new(PinnedStager::between(from, to, PinnedStager::DEFAULT_CHUNK_BYTES)?));
    stagers.push(((from, to), Arc::clone(&stager)));
    Ok(stager)
}

/// Peer access enabled both ways between two devices, once per pair and process.
fn ensure_peer_access(a: i32, b: i32) -> Result<()> {
    static ENABLED: Mutex<Vec<(i32, i32)>> = Mutex::new(Vec::new());
    let mut enabled = lock(&ENABLED);
    if enabled.contains(&(a, b)) {
        return Ok(());
    }
    cuda::enable_peer_access(a, b).map_err(|e| match e {
        CudaError::InvalidArgument(why) => SharedError::NotApplicable(format!("p2p: {why}; use path='pinned'")),
        other => SharedError::Cuda(other),
    })?;
    cuda::enable_peer_access(b, a).map_err(SharedError::Cuda)?;
    enabled.push((a, b));
    enabled.push((b, a));
    Ok(())
}

fn interrupted_or(e: CudaError) -> SharedError {
    match e {
        CudaError::Interrupted => SharedError::Interrupted,
        other => SharedError::Cuda(other),
    }
}

/// A new allocation holding a copy of the `len` bytes at `src` on `device`, made by `method`. On
/// the GPU the copy is ordered after the work queued on `stream` (the source framework's current
/// stream); a `Copy` is left queued there (the allocation remembers it), a `Pinned` copy is waited for.
///
/// # Safety
/// `[src, src+len)` must be live memory of `device` (as a DLPack producer described it) that stays
/// alive and unchanged until the copy has finished.
pub unsafe fn copy_of(
    src: u64,
    len: usize,
    device: Device,
    method: Method,
    stream: u64,
    keep_going: &mut dyn FnMut() -> bool,
) -> Result<(Arc<Allocation>, CopyReport)> {
    // SAFETY: the caller's contract.
    unsafe { copy_to(src, len, device, device, method, stream, keep_going) }
}

/// [`copy_of`] into a new allocation on device `to`: a move between GPUs (`p2p`, `pinned`), or a
/// copy on the source's own device (`to == device`). A `pinned` move is waited for before
/// returning; a `p2p` move is left running on the source's stream, and the allocation remembers it
/// (a consumer waits for it on its own device, a reader that names no stream on the host).
///
/// # Safety
/// As [`copy_of`].
pub unsafe fn copy_to(
    src: u64,
    len: usize,
    device: Device,
    to: Device,
    method: Method,
    stream: u64,
    keep_going: &mut dyn FnMut() -> bool,
) -> Result<(Arc<Allocation>, CopyReport)> {
    if to != device {
        return match (device, to, method) {
            (Device::Cuda(a), Device::Cuda(b), Method::P2p) => {
                ensure_peer_access(a, b)?;
                let allocation = Allocation::pooled_for(Device::Cuda(b), len, stream, a)?;
                if len > 0 {
                    let source = Stream::external(stream, a);
                    cuda::copy_dtod_checked(allocation.ptr(), src, len, &source)?;
                    // Left running: the consumer's import waits for it on its own device (an
                    // event, Allocation::ready_for), so the host describes, judges and reports
                    // while the bytes cross NVLink. Waiting here cost share(device=) its host work
                    // on top of the copy: 0.91 of the peer copy's bandwidth at 256 MiB (2x H200).
                    allocation.note_write_from(stream, a);
                    let _ = keep_going;
                }
                Ok((allocation, CopyReport { bytes: len as u64, device_seconds: None, chunks: 1, complete: len == 0 }))
            }
            (Device::Cuda(a), Device::Cuda(b), Method::Pinned) => {
                // The staging's legs start after the work queued on the source's stream, which waits
                // here for whoever last used the pooled memory on cuda:b.
                let allocation = Allocation::pooled_for(Device::Cuda(b), len, stream, a)?;
                let stager = stager_for(a, b)?;
                let report = lock(&stager)
                    .stage(src, allocation.ptr(), len, &Stream::external(stream, a), keep_going)
                    .map_err(interrupted_or)?;
                // Waited for: the source's stream is no user of cuda:b's memory (see the p2p arm).
                Ok((
                    allocation,
                    CopyReport { bytes: report.bytes, device_seconds: Some(report.device_seconds), chunks: report.chunks, complete: true },
                ))
            }
            (Device::Cuda(_), Device::Cuda(_), Method::Copy) => Err(SharedError::NotApplicable(format!(
                "copy stays on the source's device ({}); to move to {} use path='p2p' (peer copy) or 'pinned' (host staging)",
                device.name(),
                to.name()
            ))),
            _ => Err(SharedError::NotApplicable(format!(
                "gpushare's own copies move device memory between GPUs; {} → {} is a move for the frameworks' own paths \
                 (dlpack with dl_device, or the framework's .to/device_put)",
                device.name(),
                to.name()
            ))),
        };
    }
    match (device, method) {
        (_, Method::P2p) => Err(SharedError::NotApplicable(format!(
            "p2p copies between two GPUs and the target device is the source's own ({}): use path='copy', or pass device='cuda:N'",
            device.name()
        ))),
        (Device::Cpu, Method::Pinned) => Err(SharedError::NotApplicable(
            "pinned stages device memory through page-locked host memory; this array is already in host \
             memory (cpu): use path='copy'"
                .into(),
        )),
        (Device::Cpu, Method::Copy) => {
            let allocation = Allocation::pooled(Device::Cpu, len, stream)?;
            // SAFETY: the caller's contract for `src`; the destination is fresh and `len` long.
            let chunks = unsafe { copy_host_chunked(allocation.ptr(), src, len, keep_going) }?;
            Ok((allocation, CopyReport { bytes: len as u64, device_seconds: None, chunks, complete: true }))
        }
        (Device::Cuda(ordinal), Method::Copy) => {
            let allocation = Allocation::pooled(Device::Cuda(ordinal), len, stream)?;
            if len > 0 {
                cuda::copy_dtod_checked(allocation.ptr(), src, len, &Stream::external(stream, ordinal))?;
                allocation.note_write(stream);
            }
            Ok((allocation, CopyReport { bytes: len as u64, device_seconds: None, chunks: 1, complete: false }))
        }
        (Device::Cuda(ordinal), Method::Pinned) => {
            let allocation = Allocation::pooled(Device::Cuda(ordinal), len, stream)?;
            let stager = stager_for(ordinal, ordinal)?;
            let report = lock(&stager)
                .stage(src, allocation.ptr(), len, &Stream::external(stream, ordinal), keep_going)
                .map_err(|e| match e {
                    CudaError::Interrupted => SharedError::Interrupted,
                    other => SharedError::Cuda(other),
                })?;
            lock(&allocation.ledger).note_user(stream);
            Ok((
                allocation,
                CopyReport {
                    bytes: report.bytes,
                    device_seconds: Some(report.device_seconds),
                    chunks: report.chunks,
                    complete: true,
                },
            ))
        }
    }
}
