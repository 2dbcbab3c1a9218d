//! Can a kernel running in one context of a device read and write memory another context of the
//! same device allocated? PyCUDA's `pycuda.autoinit` allocates in a context of its own, while
//! PyTorch, TensorFlow, JAX and CuPy run their kernels in the device's primary context; a pointer
//! handed between them is the same number either way, so whether the bytes are really shared is a
//! question for the driver, answered here by trying it.
//!
//! [`cross_context_access`] allocates in a context of its own, writes a pattern there, and from the
//! primary context launches gpushare's gather kernel to read it (and then to write it), and queues a
//! copy from it, checking every byte. **A kernel that faults leaves the primary context unusable for
//! the rest of the process** (CUDA errors from a fault are sticky): call this in a process of its own
//! (`gpushare.context_access` does).

use cudarc::driver::sys;
use serde::Serialize;

use super::context::{ContextScope, ctx_from_handle};
use super::copy::{copy_dtod, copy_dtoh_async, copy_htod_async};
use super::error::{CudaError, Result, check, guarded};
use super::gather::gather_strided;
use super::memory::{DeviceBuffer, PrivateContextAllocation};
use super::stream::Stream;

/// What one kind of access did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AccessOutcome {
    /// `"exact"` (every byte as expected), `"wrong bytes"`, `"failed"` (the driver refused, or the
    /// kernel faulted) or `"not tried"` (an earlier access failed and may have poisoned the context).
    pub outcome: &'static str,
    /// The driver's error, the first differing byte, or why it was not tried.
    pub detail: String,
}

impl AccessOutcome {
    pub fn is_exact(&self) -> bool {
        self.outcome == "exact"
    }

    fn judged(result: Result<Vec<u8>>, expected: &[u8]) -> Self {
        match result {
            Ok(bytes) if bytes == expected => AccessOutcome { outcome: "exact", detail: format!("{} bytes as expected", bytes.len()) },
            Ok(bytes) => {
                let at = bytes.iter().zip(expected).position(|(a, b)| a != b).unwrap_or(bytes.len().min(expected.len()));
                AccessOutcome { outcome: "wrong bytes", detail: format!("byte {at} differs (of {})", expected.len()) }
            }
            Err(e) => AccessOutcome { outcome: "failed", detail: e.to_string() },
        }
    }

    fn not_tried(why: &str) -> Self {
        AccessOutcome { outcome: "not tried", detail: why.to_owned() }
    }
}

/// The answer of [`cross_context_access`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CrossContextAccess {
    pub ordinal: i32,
    /// The context of its own that allocated the memory (as `pycuda.autoinit`'s does).
    pub memory_context: u64,
    /// The device's primary context, in which the kernels and the copy ran (as frameworks' do).
    pub kernel_context: u64,
    pub bytes: u64,
    /// A kernel in the primary context reads the other context's memory.
    pub kernel_read: AccessOutcome,
    /// A kernel in the primary context writes it (read back in the memory's own context).
    pub kernel_write: AccessOutcome,
    /// A copy queued in the primary context (`cuMemcpyDtoDAsync`) reads it.
    pub copy_read: AccessOutcome,
}

impl CrossContextAccess {
    /// Memory of the other context is read and written exactly by the primary context's kernels.
    pub fn kernels_share(&self) -> bool {
        self.kernel_read.is_exact() && self.kernel_write.is_exact()
    }
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u32).wrapping_mul(37).wrapping_add(u32::from(seed)) as u8).collect()
}

/// Copies between the host and memory of `ctx`, with `ctx` current (synchronous calls).
fn upload_in(ctx: u64, dst: u64, data: &[u8]) -> Result<()> {
    let _scope = ContextScope::enter(ctx_from_handle(ctx))?;
    // SAFETY: `dst` is an allocation of at least data.len() bytes in `ctx`; synchronous copy.
    check("cuMemcpyHtoD_v2", unsafe { sys::cuMemcpyHtoD_v2(dst, data.as_ptr().cast(), data.len()) })
}

fn download_in(ctx: u64, src: u64, len: usize) -> Result<Vec<u8>> {
    let _scope = ContextScope::enter(ctx_from_handle(ctx))?;
    let mut out = vec![0u8; len];
    // SAFETY: `src` is an allocation of at least `len` bytes in `ctx`; synchronous copy into `out`.
    check("cuMemcpyDtoH_v2", unsafe { sys::cuMemcpyDtoH_v2(out.as_mut_ptr().cast(), src, len) })?;
    Ok(out)
}

fn download(buffer: &DeviceBuffer, stream: &Stream) -> Result<Vec<u8>> {
    let mut out = vec![0u8; buffer.len()];
    // SAFETY: `out` holds len bytes and outlives the synchronise below.
    unsafe { copy_dtoh_async(out.as_mut_ptr(), buffer.ptr(), buffer.len(), stream) }?;
    stream.synchronize()?;
    Ok(out)
}

/// A kernel of gpushare's own in the primary context copies `bytes` bytes from `src` to `dst`
/// (4-byte units), and waits for it.
fn kernel_copy(dst: u64, src: u64, bytes: usize, stream: &Stream) -> Result<()> {
    let units = (bytes / 4) as u64;
    // SAFETY: both are live allocations of `bytes` bytes (the caller's), disjoint; we wait below.
    unsafe { gather_strided(dst, src, 4, &[units], &[4], stream) }?;
    stream.synchronize()
}

/// Tries it on device `ordinal` with `bytes` bytes (a positive multiple of 4). See the module's
/// warning: a fault poisons this process's primary context.
pub fn cross_context_access(ordinal: i32, bytes: usize) -> Result<CrossContextAccess> {
    if bytes == 0 || !bytes.is_multiple_of(4) {
        return Err(CudaError::InvalidArgument(format!("the probe needs a positive multiple of 4 bytes, not {bytes}")));
    }
    guarded(|| {
        let own = PrivateContextAllocation::new(ordinal, bytes)?;
        let stream = Stream::new(ordinal)?;
        let scratch = DeviceBuffer::new(ordinal, bytes)?;
        let first = pattern(bytes, 7);
        upload_in(own.context(), own.ptr(), &first)?;

        let kernel_read =
            AccessOutcome::judged(kernel_copy(scratch.ptr(), own.ptr(), bytes, &stream).and_then(|()| download(&scratch, &stream)), &first);
        let poisoned = "an earlier access failed: after a fault the primary context is unusable";
        let (kernel_write, copy_read) = if kernel_read.outcome == "failed" {
            (AccessOutcome::not_tried(poisoned), AccessOutcome::not_tried(poisoned))
        } else {
            let second = pattern(bytes, 101);
            // SAFETY: `scratch` holds `bytes` bytes; we wait before `second` could go.
            let written = unsafe { copy_htod_async(scratch.ptr(), second.as_ptr(), bytes, &stream) }
                .and_then(|()| stream.synchronize())
                .and_then(|()| kernel_copy(own.ptr(), scratch.ptr(), bytes, &stream))
                .and_then(|()| download_in(own.context(), own.ptr(), bytes));
            let kernel_write = AccessOutcome::judged(written, &second);
            let copy_read = if kernel_write.outcome == "failed" {
                AccessOutcome::not_tried(poisoned)
            } else {
                let reference = download_in(own.context(), own.ptr(), bytes)?;
                let copied = scratch
                    .zero()
                    // SAFETY: two live allocations of `bytes` bytes, disjoint; we wait below.
                    .and_then(|()| unsafe { copy_dtod(scratch.ptr(), own.ptr(), bytes, &stream) })
                    .and_then(|()| download(&scratch, &stream));
                AccessOutcome::judged(copied, &reference)
            };
            (kernel_write, copy_read)
        };
        Ok(CrossContextAccess {
            ordinal,
            memory_context: own.context(),
            kernel_context: scratch.context(),
            bytes: bytes as u64,
            kernel_read,
            kernel_write,
            copy_read,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_name_the_first_wrong_byte_or_the_drivers_error() {
        let expected = pattern(64, 7);
        assert_eq!(AccessOutcome::judged(Ok(expected.clone()), &expected).outcome, "exact");
        let mut wrong = expected.clone();
        wrong[13] ^= 0xff;
        let judged = AccessOutcome::judged(Ok(wrong), &expected);
        assert_eq!((judged.outcome, judged.detail.as_str()), ("wrong bytes", "byte 13 differs (of 64)"));
        let fault = CudaError::Driver {
            call: "cuStreamSynchronize",
            code: 700,
            name: "CUDA_ERROR_ILLEGAL_ADDRESS".into(),
            description: "an illegal memory access was encountered".into(),
        };
        let judged = AccessOutcome::judged(Err(fault), &expected);
        assert_eq!(judged.outcome, "failed");
        assert!(judged.detail.contains("CUDA_ERROR_ILLEGAL_ADDRESS (700)"), "{}", judged.detail);
        assert!(!judged.is_exact() && AccessOutcome::not_tried("x").outcome == "not tried");
    }

    #[test]
    fn the_probe_wants_whole_four_byte_units_before_it_asks_the_driver() {
        for bytes in [0, 3, 1025] {
            assert!(matches!(cross_context_access(0, bytes), Err(CudaError::InvalidArgument(_))), "{bytes}");
        }
    }
}
