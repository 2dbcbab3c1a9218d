//! Memory gpushare owns and hands to every framework at once: the storage of `gpushare.SharedBuffer`
//! and the destination of the `copy` and `pinned` transfer paths.
//!
//! An [`Allocation`] is either 256-byte-aligned host memory (DLPack asks for 256-byte alignment;
//! JAX and TensorFlow copy host memory that is less aligned than they want, so anything less would
//! turn "shared" into "copied") or device memory from the CUDA layer's
//! [`DeviceBuffer`](crate::cuda::DeviceBuffer). It lives in an `Arc`: the Python object holds one
//! reference and every exported DLPack tensor holds another in its manager context, so the memory
//! goes away only when the last framework lets go.
//!
//! **Streams.** A device allocation remembers the stream that last wrote it without waiting
//! (`pending`) and the streams that were handed it (`users`). An export to a consumer on another
//! stream waits for the pending write first ([`Allocation::ready_for`]); a pooled buffer used again
//! by a writer on another stream waits for its earlier users ([`take_pooled`](pool::take_pooled)).
//!
//! **Pool.** The `copy` and `pinned` paths allocate a destination per conversion. `cuMemAlloc` and
//! `cuMemFree` (which waits for the whole device) would cost more than copying a few hundred MiB,
//! so their buffers go back to a small pool ([`POOL_MAX_BYTES`]) when the last consumer lets go, the
//! way PyTorch's caching allocator keeps `clone()` cheap; host buffers are pooled too (fresh pages
//! cost a page fault each, more than the copy into them). Buffers a user made with
//! `SharedBuffer(...)` are never pooled: they are freed when the last consumer lets go.

mod allocation;
mod copy;
mod gather;
mod names;
mod pool;

#[cfg(test)]
mod tests;

use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::cuda::CudaError;

pub use allocation::{Allocation, HostMemory, StreamLedger, buffers_alive, normalize_stream, owner_of};
pub use copy::{CopyReport, Method, copy_host_chunked, copy_of, copy_to};
pub use gather::{GatherPlan, StridedSource, compact_copy_of, gather_host, gather_plan};
pub use names::{Device, compact_nbytes, parse_dtype};
pub use pool::{clear_pool, pool_usage};

/// Alignment of host allocations: what DLPack recommends and the most any framework asks for.
pub const HOST_ALIGNMENT: usize = 256;
/// Host copies are cut into chunks of this size; between chunks the caller is asked whether to go
/// on (Ctrl-C in a notebook stops a multi-GiB copy within milliseconds).
pub const COPY_CHUNK_BYTES: usize = 64 << 20;
/// Most bytes the pool of the `copy`/`pinned` paths keeps for reuse.
pub const POOL_MAX_BYTES: usize = 4 << 30;
/// Most buffers the pool keeps.
pub const POOL_MAX_ENTRIES: usize = 16;
/// A stream that gpushare cannot name (a consumer that asked for no synchronisation, or one that
/// reads through `__cuda_array_interface__`): reusing memory it saw waits for the whole device.
pub const UNKNOWN_STREAM: u64 = u64::MAX;

/// Why a SharedBuffer could not be made, filled or exported.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SharedError {
    #[error("unknown device {0:?}: use cpu (or cpu:0), cuda, cuda:N, gpu or gpu:N")]
    BadDevice(String),
    #[error("unknown device {0:?}: the host is one device, cpu (or cpu:0)")]
    NoSuchHost(String),
    #[error("unknown dtype {0:?}: use a name like float32, int64, bfloat16, bool, complex64")]
    BadDtype(String),
    #[error("{0}")]
    BadShape(String),
    #[error("cannot allocate {0} bytes of host memory")]
    OutOfHostMemory(usize),
    #[error("{0}")]
    NotApplicable(String),
    #[error("interrupted")]
    Interrupted,
    #[error(transparent)]
    Cuda(#[from] CudaError),
}

pub type Result<T, E = SharedError> = std::result::Result<T, E>;

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these locks leaves plain data that is still consistent.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
