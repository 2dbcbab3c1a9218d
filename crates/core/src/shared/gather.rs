//! Compact copies of strided arrays (broadcast, reversed, transposed views): what the copy and pinned
//! paths hand over, gathered on the host here or on the GPU by the CUDA layer's kernel.

use std::sync::Arc;

use super::{Allocation, COPY_CHUNK_BYTES, CopyReport, Device, Method, Result, SharedError, compact_nbytes, copy_of};
use crate::cuda::{self, Stream};

/// A strided array as a DLPack producer described it, for [`compact_copy_of`].
#[derive(Debug, Clone, Copy)]
pub struct StridedSource<'a> {
    /// Address of element (0, 0, …).
    pub data: u64,
    /// Lowest byte the layout reaches, and how many bytes from there to one past the highest.
    pub span_start: u64,
    pub span_len: usize,
    pub shape: &'a [i64],
    /// In elements; zero (broadcast) and negative (reversed) strides included.
    pub strides: &'a [i64],
    pub itemsize: u64,
}

/// How a strided array is read into a compact one: units of `unit` bytes, the dimensions in units
/// (outermost first) with their byte strides, dimensions of one dropped and neighbours that step
/// through memory as one dimension merged, so that the copy loops as little as it can.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatherPlan {
    /// 1, 2, 4 or 8: the widest that divides the item size, the source address and every stride,
    /// so that every unit read is aligned.
    pub unit: u64,
    pub shape: Vec<u64>,
    pub byte_strides: Vec<i64>,
}

impl GatherPlan {
    pub fn units(&self) -> u64 {
        self.shape.iter().product()
    }
}

/// The [`GatherPlan`] of a source. `shape` must be valid (non-negative, its bytes fit in memory).
pub fn gather_plan(data: u64, shape: &[i64], strides: &[i64], itemsize: u64) -> Result<GatherPlan> {
    let overflow = || SharedError::BadShape(format!("strides {strides:?} of itemsize {itemsize} overflow 64 bits"));
    let mut dims: Vec<(u64, i64)> = Vec::with_capacity(shape.len() + 1);
    for (&size, &stride) in shape.iter().zip(strides) {
        if size != 1 {
            let bytes = stride.checked_mul(itemsize as i64).ok_or_else(overflow)?;
            dims.push((size as u64, bytes));
        }
    }
    let mut unit = 8u64;
    while unit > 1
        && (!itemsize.is_multiple_of(unit) || !data.is_multiple_of(unit) || dims.iter().any(|&(_, st)| !st.unsigned_abs().is_multiple_of(unit)))
    {
        unit /= 2;
    }
    if itemsize / unit > 1 {
        dims.push((itemsize / unit, unit as i64));
    }
    let mut merged: Vec<(u64, i64)> = Vec::with_capacity(dims.len());
    for (size, stride) in dims {
        match merged.last_mut() {
            // The outer dimension steps exactly over the whole inner one: one dimension in memory.
            Some((outer, outer_stride)) if Some(*outer_stride) == stride.checked_mul(size as i64) => {
                *outer *= size;
                *outer_stride = stride;
            }
            _ => merged.push((size, stride)),
        }
    }
    if merged.is_empty() {
        merged.push((1, unit as i64)); // a single unit (0-d, or every dimension of size one)
    }
    Ok(GatherPlan { unit, shape: merged.iter().map(|d| d.0).collect(), byte_strides: merged.iter().map(|d| d.1).collect() })
}

/// Copies the strided array at `src` that `plan` describes into the compact array at `dst`, on the
/// host, asking `keep_going` after every [`COPY_CHUNK_BYTES`] written. Contiguous innermost runs
/// are copied whole. Returns the number of chunks.
///
/// # Safety
/// Every byte the plan reaches from `src` must be readable, `[dst, dst + plan.units() * plan.unit)`
/// writable, and the two must not overlap, for the whole call.
pub unsafe fn gather_host(dst: u64, src: u64, plan: &GatherPlan, keep_going: &mut dyn FnMut() -> bool) -> Result<u64> {
    let n = plan.shape.len();
    let contiguous_inner = n > 0 && plan.byte_strides[n - 1] == plan.unit as i64;
    let (outer_shape, outer_strides, run) = if contiguous_inner {
        (&plan.shape[..n - 1], &plan.byte_strides[..n - 1], plan.shape[n - 1] * plan.unit)
    } else {
        (&plan.shape[..], &plan.byte_strides[..], plan.unit)
    };
    if outer_shape.contains(&0) || run == 0 {
        return Ok(0);
    }
    let runs: u64 = outer_shape.iter().product();
    let mut index = vec![0u64; outer_shape.len()];
    let mut offset: i64 = 0;
    let mut out = dst;
    let (mut written, mut chunks) = (0u64, 1u64);
    for _ in 0..runs {
        let from = (src as i64).wrapping_add(offset) as usize;
        let to = out as usize;
        // SAFETY: the caller's contract: `from` is an address the layout reaches, `to` lies in the
        // destination; units are read and written unaligned, so no alignment is assumed.
        unsafe {
            match run {
                1 => *(to as *mut u8) = *(from as *const u8),
                2 => std::ptr::write_unaligned(to as *mut u16, std::ptr::read_unaligned(from as *const u16)),
                4 => std::ptr::write_unaligned(to as *mut u32, std::ptr::read_unaligned(from as *const u32)),
                8 => std::ptr::write_unaligned(to as *mut u64, std::ptr::read_unaligned(from as *const u64)),
                _ => std::ptr::copy_nonoverlapping(from as *const u8, to as *mut u8, run as usize),
            }
        }
        out += run;
        written += run;
        if written >= COPY_CHUNK_BYTES as u64 {
            if !keep_going() {
                return Err(SharedError::Interrupted);
            }
            written = 0;
            chunks += 1;
        }
        // Next index, last dimension fastest; the offset follows without multiplying.
        for d in (0..index.len()).rev() {
            index[d] += 1;
            offset = offset.wrapping_add(outer_strides[d]);
            if index[d] < outer_shape[d] {
                break;
            }
            offset = offset.wrapping_sub(outer_strides[d].wrapping_mul(outer_shape[d] as i64));
            index[d] = 0;
        }
    }
    Ok(chunks)
}

/// A new allocation holding a **compact** (C-contiguous) copy of `source`, made by `method`: a
/// broadcast view becomes its full array, a reversed one its values in order, so that every target
/// accepts the copy (TensorFlow and JAX take compact layouts only, PyTorch no negative strides).
/// A contiguous source is copied as one block ([`copy_of`]); any other is gathered: on the host
/// here, on the GPU by gpushare's kernel ([`cuda::gather_strided`]), queued on `stream` like
/// [`copy_of`]'s copies. `Pinned` gathers on the device first, then stages the compact result.
///
/// # Safety
/// `source` must describe live memory of `device` (as a DLPack producer described it) that stays
/// alive and unchanged until the copy has finished.
pub unsafe fn compact_copy_of(
    source: &StridedSource<'_>,
    device: Device,
    method: Method,
    stream: u64,
    keep_going: &mut dyn FnMut() -> bool,
) -> Result<(Arc<Allocation>, CopyReport)> {
    let len = compact_nbytes(source.shape, source.itemsize)?;
    if crate::dlpack::is_c_contiguous(source.shape, source.strides) || (device, method) == (Device::Cpu, Method::Pinned) {
        // SAFETY: the caller's contract; a C-contiguous array is the `len` bytes from its element 0
        // (and the host+pinned case is refused before memory is read).
        return unsafe { copy_of(source.data, len, device, method, stream, keep_going) };
    }
    let plan = gather_plan(source.data, source.shape, source.strides, source.itemsize)?;
    match (device, method) {
        (Device::Cpu, _) => {
            let allocation = Allocation::pooled(Device::Cpu, len, stream)?;
            // SAFETY: the caller's contract for the source; the destination is fresh and `len` long.
            let chunks = unsafe { gather_host(allocation.ptr(), source.data, &plan, keep_going) }?;
            Ok((allocation, CopyReport { bytes: len as u64, device_seconds: None, chunks, complete: true }))
        }
        (Device::Cuda(ordinal), Method::Copy) => {
            if plan.shape.len() > cuda::GATHER_MAX_DIMS {
                return Err(SharedError::NotApplicable(format!(
                    "this layout has {} dimensions that cannot be merged; gpushare's GPU gather takes at most {}: make it contiguous first",
                    plan.shape.len(),
                    cuda::GATHER_MAX_DIMS
                )));
            }
            cuda::check_device_range(source.span_start, source.span_len as u64, "source")?;
            let allocation = Allocation::pooled(Device::Cuda(ordinal), len, stream)?;
            // SAFETY: the source lies in one device allocation (checked above) and stays alive (the
            // caller's contract); the destination is fresh, `len` = units x unit bytes long.
            unsafe {
                cuda::gather_strided(
                    allocation.ptr(),
                    source.data,
                    plan.unit,
                    &plan.shape,
                    &plan.byte_strides,
                    &Stream::external(stream, ordinal),
                )
            }?;
            allocation.note_write(stream);
            Ok((allocation, CopyReport { bytes: len as u64, device_seconds: None, chunks: 1, complete: false }))
        }
        (Device::Cuda(_), Method::Pinned) => {
            // SAFETY: the caller's contract.
            let (compact, _) = unsafe { compact_copy_of(source, device, Method::Copy, stream, keep_going) }?;
            // Staged on the same stream, so after the gather; the stager waits, so `compact` may go.
            // SAFETY: `compact` is a live device allocation of `len` bytes.
            unsafe { copy_of(compact.ptr(), len, device, Method::Pinned, stream, keep_going) }
        }
        (Device::Cuda(_), Method::P2p) => Err(SharedError::NotApplicable(
            "p2p copies between two GPUs: name the target device (device='cuda:N'); on the source's own device use path='copy'".into(),
        )),
    }
}
