//! Memory gpushare owns: device buffers in the primary context, page-locked host buffers, and an
//! allocation in a private (non-primary) context for demonstrations.

use cudarc::driver::sys;

use super::context::{ContextScope, RetainedPrimary, create_own_context, ctx_from_handle, device_handle, handle_of_ctx, pop_current};
use super::error::{CudaError, Result, check, guarded, quietly};

/// Device memory from `cuMemAlloc` in device `ordinal`'s primary context (the context every
/// framework uses, so any of them can work on it), freed on drop in that context.
///
/// A zero-byte buffer allocates nothing and has address 0, as frameworks' empty tensors do.
pub struct DeviceBuffer {
    ptr: u64,
    len: usize,
    ordinal: i32,
    // Declared last: released after `drop` has freed the memory in it.
    primary: RetainedPrimary,
}

impl DeviceBuffer {
    pub fn new(ordinal: i32, len: usize) -> Result<Self> {
        guarded(|| {
            let primary = RetainedPrimary::retain(ordinal)?;
            let mut ptr: sys::CUdeviceptr = 0;
            if len > 0 {
                let _scope = primary.enter()?;
                // SAFETY: the primary context is current; writes one CUdeviceptr.
                check("cuMemAlloc_v2", unsafe { sys::cuMemAlloc_v2(&mut ptr, len) })?;
            }
            Ok(DeviceBuffer { ptr, len, ordinal, primary })
        })
    }

    pub fn ptr(&self) -> u64 {
        self.ptr
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn ordinal(&self) -> i32 {
        self.ordinal
    }

    /// The context the memory was allocated in (the device's primary context).
    pub fn context(&self) -> u64 {
        self.primary.handle()
    }

    /// Sets every byte to zero and waits until that is done. (A memset of device memory returns
    /// before the GPU has done it, on the context's legacy default stream; non-blocking streams of
    /// other frameworks would not wait for it, so this waits before returning.)
    pub fn zero(&self) -> Result<()> {
        if self.len == 0 {
            return Ok(());
        }
        guarded(|| {
            let _scope = self.primary.enter()?;
            // SAFETY: [ptr, ptr + len) is this buffer's allocation.
            check("cuMemsetD8_v2", unsafe { sys::cuMemsetD8_v2(self.ptr, 0, self.len) })?;
            // SAFETY: the null stream of the current (primary) context.
            check("cuStreamSynchronize", unsafe { sys::cuStreamSynchronize(std::ptr::null_mut()) })
        })
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        if self.ptr == 0 {
            return;
        }
        let (ptr, primary) = (self.ptr, &self.primary);
        quietly(|| {
            let _scope = primary.enter()?;
            // SAFETY: frees the allocation made in `new`, in its context. cuMemFree waits for work
            // still using it, so copies in flight finish first.
            check("cuMemFree_v2", unsafe { sys::cuMemFree_v2(ptr) })
        });
    }
}

impl std::fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceBuffer")
            .field("ptr", &format_args!("{:#x}", self.ptr))
            .field("len", &self.len)
            .field("ordinal", &self.ordinal)
            .finish()
    }
}

/// Page-locked ("pinned") host memory from `cuMemHostAlloc`, freed on drop. Portable: usable for
/// DMA from every context. The staging buffer of the `pinned` transfer path.
pub struct PinnedHostBuffer {
    ptr: *mut u8,
    len: usize,
    primary: RetainedPrimary,
}

// SAFETY: the buffer exclusively owns its allocation; shared access only hands out `&[u8]`, and
// the unsafe copy functions that let the GPU write to it put the aliasing rules on their caller.
unsafe impl Send for PinnedHostBuffer {}
// SAFETY: as above.
unsafe impl Sync for PinnedHostBuffer {}

impl PinnedHostBuffer {
    /// `len` bytes of page-locked memory, allocated with device `ordinal`'s primary context current
    /// (the driver needs a context to pin; PORTABLE makes the memory pinned for all of them).
    pub fn new(ordinal: i32, len: usize) -> Result<Self> {
        if len == 0 {
            return Err(CudaError::InvalidArgument("a page-locked buffer needs at least one byte".to_owned()));
        }
        guarded(|| {
            let primary = RetainedPrimary::retain(ordinal)?;
            let scope = primary.enter()?;
            let mut ptr: *mut std::ffi::c_void = std::ptr::null_mut();
            // SAFETY: a context is current; writes one pointer.
            check("cuMemHostAlloc", unsafe { sys::cuMemHostAlloc(&mut ptr, len, sys::CU_MEMHOSTALLOC_PORTABLE) })?;
            drop(scope);
            Ok(PinnedHostBuffer { ptr: ptr.cast::<u8>(), len, primary })
        })
    }

    pub fn as_ptr(&self) -> *const u8 {
        self.ptr
    }

    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr
    }

    /// Host address as an integer (for reports).
    pub fn addr(&self) -> u64 {
        self.ptr as usize as u64
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes. Must not be read while a copy into the buffer is in flight (the unsafe copy
    /// functions make their caller wait before touching the buffer).
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` is a live allocation of `len` bytes owned by self.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and `&mut self` makes the access exclusive on the host side.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for PinnedHostBuffer {
    fn drop(&mut self) {
        let (ptr, primary) = (self.ptr, &self.primary);
        quietly(|| {
            let _scope = primary.enter()?;
            // SAFETY: frees the allocation made in `new`.
            check("cuMemFreeHost", unsafe { sys::cuMemFreeHost(ptr.cast()) })
        });
    }
}

impl std::fmt::Debug for PinnedHostBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PinnedHostBuffer").field("ptr", &self.ptr).field("len", &self.len).finish()
    }
}

/// Device memory allocated in a context of its own (`cuCtxCreate`), not the primary context.
///
/// For demonstrations: this is what memory from a library that creates its own context looks like
/// (`pointer_attributes` reports its context, and `context_is_primary == Some(false)`). The context
/// is made, used for the allocation and popped again, so the calling thread's current context is
/// unchanged; drop frees the memory and destroys the context.
pub struct PrivateContextAllocation {
    ctx: u64,
    ptr: u64,
    len: usize,
    ordinal: i32,
}

impl PrivateContextAllocation {
    pub fn new(ordinal: i32, len: usize) -> Result<Self> {
        if len == 0 {
            return Err(CudaError::InvalidArgument("a private-context allocation needs at least one byte".to_owned()));
        }
        guarded(|| {
            let device = device_handle(ordinal)?;
            let ctx = create_own_context(device)?;
            // cuCtxCreate made the new context current (pushed it); allocate in it, then pop it so
            // the thread's current context is what it was.
            let mut ptr: sys::CUdeviceptr = 0;
            // SAFETY: the new context is current; writes one CUdeviceptr.
            let allocated = check("cuMemAlloc_v2", unsafe { sys::cuMemAlloc_v2(&mut ptr, len) });
            let popped_ok = pop_current();
            let made = PrivateContextAllocation { ctx: handle_of_ctx(ctx), ptr, len, ordinal };
            match (allocated, popped_ok) {
                (Ok(()), Ok(())) => Ok(made),
                // Dropping `made` frees what was allocated and destroys the context.
                (Err(e), _) | (_, Err(e)) => Err(e),
            }
        })
    }

    pub fn ptr(&self) -> u64 {
        self.ptr
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn ordinal(&self) -> i32 {
        self.ordinal
    }

    /// The private context's handle (differs from the primary context's).
    pub fn context(&self) -> u64 {
        self.ctx
    }
}

impl Drop for PrivateContextAllocation {
    fn drop(&mut self) {
        let (ctx, ptr) = (ctx_from_handle(self.ctx), self.ptr);
        if ptr != 0 {
            quietly(|| {
                let _scope = ContextScope::enter(ctx)?;
                // SAFETY: frees the allocation made in `new`, in its own context.
                check("cuMemFree_v2", unsafe { sys::cuMemFree_v2(ptr) })
            });
        }
        // SAFETY: destroys the context created in `new`; it is not current on any thread we know
        // of (we popped it), and nothing else has its handle unless a caller used `context()`.
        quietly(|| check("cuCtxDestroy_v2", unsafe { sys::cuCtxDestroy_v2(ctx) }));
    }
}

impl std::fmt::Debug for PrivateContextAllocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrivateContextAllocation")
            .field("ctx", &format_args!("{:#x}", self.ctx))
            .field("ptr", &format_args!("{:#x}", self.ptr))
            .field("len", &self.len)
            .finish()
    }
}
