//! What a CUDA context costs in device memory, as the driver sees it.
//!
//! A context reserves device memory of its own when it is created (its local-memory and printf
//! buffers, the driver's bookkeeping): memory that no framework's allocator counts. The only
//! measure is the driver's free-memory figure before and after. `cuMemGetInfo` needs a current
//! context, and asking through the primary context would activate it (itself a context whose cost
//! is worth measuring), so [`MemoryMeter`] reads through a context of gpushare's own, made once,
//! pushed only for the call and popped again: the thread's current context and every framework's
//! context stay as they were, and the meter's own cost is the same before and after each reading.

use cudarc::driver::sys;
use serde::Serialize;

use super::context::{ContextScope, create_own_context, ctx_from_handle, device_handle, handle_of_ctx, pop_current};
use super::device::{MemInfo, query_mem_info};
use super::error::{Result, check, guarded, quietly};

/// Reads device `ordinal`'s free memory through a context of its own; destroys it on drop.
pub struct MemoryMeter {
    ctx: u64,
    ordinal: i32,
}

/// The driver's free memory before and after one step, and after undoing it where it was undone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct MemoryStep {
    pub free_before: u64,
    pub free_after: u64,
    pub total: u64,
}

impl MemoryStep {
    /// Bytes the step took from the device (negative: it gave some back).
    pub fn taken(&self) -> i64 {
        self.free_before as i64 - self.free_after as i64
    }
}

impl MemoryMeter {
    /// Creates the meter's context (which costs what any context costs, once).
    pub fn new(ordinal: i32) -> Result<Self> {
        guarded(|| {
            let device = device_handle(ordinal)?;
            let ctx = create_own_context(device)?;
            let meter = MemoryMeter { ctx: handle_of_ctx(ctx), ordinal };
            // Dropping `meter` on an error destroys the context.
            pop_current()?;
            Ok(meter)
        })
    }

    pub fn ordinal(&self) -> i32 {
        self.ordinal
    }

    /// The meter's own context (never the primary one; never left current).
    pub fn context(&self) -> u64 {
        self.ctx
    }

    /// Free and total memory of the device, every process and context counted.
    pub fn read(&self) -> Result<MemInfo> {
        guarded(|| {
            let _scope = ContextScope::enter(ctx_from_handle(self.ctx))?;
            query_mem_info()
        })
    }

    /// What one more context of its own costs on this device: the free memory before
    /// `cuCtxCreate` and after it (the context is destroyed again, and the thread left as it was).
    pub fn fresh_context_cost(&self) -> Result<MemoryStep> {
        guarded(|| {
            let before = self.read()?;
            let ctx = create_own_context(device_handle(self.ordinal)?)?;
            let popped = pop_current();
            let after = self.read();
            // SAFETY: destroys the context just created; it is on no thread's stack (popped above).
            quietly(|| check("cuCtxDestroy_v2", unsafe { sys::cuCtxDestroy_v2(ctx) }));
            popped?;
            let after = after?;
            Ok(MemoryStep { free_before: before.free, free_after: after.free, total: before.total })
        })
    }
}

impl Drop for MemoryMeter {
    fn drop(&mut self) {
        let ctx = ctx_from_handle(self.ctx);
        // SAFETY: destroys the meter's context, made in `new` and current on no thread (it is only
        // pushed for a reading and popped again).
        quietly(|| check("cuCtxDestroy_v2", unsafe { sys::cuCtxDestroy_v2(ctx) }));
    }
}

impl std::fmt::Debug for MemoryMeter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryMeter").field("ctx", &format_args!("{:#x}", self.ctx)).field("ordinal", &self.ordinal).finish()
    }
}
