//! Asynchronous copies queued on a stream: device to device (raw, or with both ranges checked with
//! the driver first), device to host and host to device.

use cudarc::driver::sys;

use super::error::{CudaError, Result, check, guarded};
use super::pointer::{PointerAttributes, check_device_range};
use super::stream::Stream;

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
pub(super) fn check_copy_ranges(src: u64, dst: u64, bytes: u64) -> Result<PointerAttributes> {
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
