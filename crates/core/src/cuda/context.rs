//! Contexts: which one is current, which is a device's primary context, and scoped switching.
//!
//! Every framework gpushare talks to (PyTorch, CuPy, JAX/XLA, TensorFlow, Numba) works in the
//! device's *primary* context, so device pointers are valid across frameworks in one process. This
//! layer follows suit: it never creates a context except in [`super::PrivateContextAllocation`],
//! whose purpose is to show what a non-primary context looks like.
//!
//! Handles are carried as `u64` (the pointer value of `CUcontext`) so that data structs are plain,
//! `Send`, serialisable and comparable with the integers Python libraries print.

use std::marker::PhantomData;

use cudarc::driver::sys;
use serde::Serialize;

use super::error::{CudaError, Result, check, guarded, quietly};
use super::status::{driver_status, has_symbol};

pub(crate) fn ctx_from_handle(handle: u64) -> sys::CUcontext {
    handle as usize as sys::CUcontext
}

pub(crate) fn handle_of_ctx(ctx: sys::CUcontext) -> u64 {
    ctx as usize as u64
}

/// The driver's device handle for a CUDA ordinal, with a readable error for a bad ordinal.
pub(crate) fn device_handle(ordinal: i32) -> Result<sys::CUdevice> {
    let count = driver_status().device_count();
    if ordinal < 0 || ordinal >= count {
        let plural = if count == 1 { "" } else { "s" };
        return Err(CudaError::InvalidArgument(format!(
            "no CUDA device {ordinal}: {count} device{plural} visible (ordinals count the devices CUDA_VISIBLE_DEVICES leaves)"
        )));
    }
    let mut dev: sys::CUdevice = 0;
    // SAFETY: writes one CUdevice.
    check("cuDeviceGet", unsafe { sys::cuDeviceGet(&mut dev, ordinal) })?;
    Ok(dev)
}

/// Creates a context of its own on `device` (`cuCtxCreate`, default flags, as PyCUDA's
/// `make_context` does): it is pushed, current on this thread, until the caller pops it; the caller
/// destroys it.
pub(crate) fn create_own_context(device: sys::CUdevice) -> Result<sys::CUcontext> {
    let mut ctx: sys::CUcontext = std::ptr::null_mut();
    // cuCtxCreate_v2 is the CUDA 12 entry point; drivers keep it for older binaries. Should one lack
    // it, _v4 with no create-params is the same call.
    if has_symbol("cuCtxCreate_v2") {
        // SAFETY: writes one CUcontext; flags 0 = default scheduling.
        check("cuCtxCreate_v2", unsafe { sys::cuCtxCreate_v2(&mut ctx, 0, device) })?;
    } else {
        // SAFETY: as above; the params pointer may be null.
        check("cuCtxCreate_v4", unsafe { sys::cuCtxCreate_v4(&mut ctx, std::ptr::null_mut(), 0, device) })?;
    }
    Ok(ctx)
}

/// Pops the context on top of this thread's stack (the one [`create_own_context`] pushed).
pub(crate) fn pop_current() -> Result<()> {
    let mut popped: sys::CUcontext = std::ptr::null_mut();
    // SAFETY: writes one CUcontext.
    check("cuCtxPopCurrent_v2", unsafe { sys::cuCtxPopCurrent_v2(&mut popped) })
}

/// One reference on a device's primary context, released on drop.
///
/// Retaining activates the primary context if nobody had (which costs device memory), so this is
/// used only where a context is needed anyway: allocations, streams, events, copies. Holding the
/// reference keeps the context alive even if every framework releases theirs.
pub(crate) struct RetainedPrimary {
    device: sys::CUdevice,
    ctx: u64,
}

impl RetainedPrimary {
    pub(crate) fn retain(ordinal: i32) -> Result<Self> {
        let device = device_handle(ordinal)?;
        let mut ctx: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: `device` came from cuDeviceGet; writes one CUcontext.
        check("cuDevicePrimaryCtxRetain", unsafe { sys::cuDevicePrimaryCtxRetain(&mut ctx, device) })?;
        Ok(RetainedPrimary { device, ctx: handle_of_ctx(ctx) })
    }

    pub(crate) fn ctx(&self) -> sys::CUcontext {
        ctx_from_handle(self.ctx)
    }

    pub(crate) fn handle(&self) -> u64 {
        self.ctx
    }

    /// Makes the primary context current on this thread until the scope ends.
    pub(crate) fn enter(&self) -> Result<ContextScope> {
        ContextScope::enter(self.ctx())
    }
}

impl Drop for RetainedPrimary {
    fn drop(&mut self) {
        let device = self.device;
        // SAFETY: balances the retain in `retain`.
        quietly(|| check("cuDevicePrimaryCtxRelease_v2", unsafe { sys::cuDevicePrimaryCtxRelease_v2(device) }));
    }
}

/// `ctx` is current on this thread while the scope lives; dropping it restores whatever was current
/// before (push/pop, so a framework's current context on this thread is left exactly as it was).
/// Not `Send`: the context stack belongs to the thread.
pub(crate) struct ContextScope {
    _thread_bound: PhantomData<*const ()>,
}

impl ContextScope {
    pub(crate) fn enter(ctx: sys::CUcontext) -> Result<Self> {
        // SAFETY: pushing a context handle onto this thread's stack; popped in Drop.
        check("cuCtxPushCurrent_v2", unsafe { sys::cuCtxPushCurrent_v2(ctx) })?;
        Ok(ContextScope { _thread_bound: PhantomData })
    }
}

impl Drop for ContextScope {
    fn drop(&mut self) {
        let mut popped: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: pops the context pushed in `enter`; writes one CUcontext.
        quietly(|| check("cuCtxPopCurrent_v2", unsafe { sys::cuCtxPopCurrent_v2(&mut popped) }));
    }
}

/// The context current on this thread, if any (no context needed to ask).
pub(crate) fn current_ctx_raw() -> Result<Option<sys::CUcontext>> {
    let mut ctx: sys::CUcontext = std::ptr::null_mut();
    // SAFETY: writes one CUcontext.
    check("cuCtxGetCurrent", unsafe { sys::cuCtxGetCurrent(&mut ctx) })?;
    Ok(if ctx.is_null() { None } else { Some(ctx) })
}

/// The ordinal of the device of the current context. `CUdevice` values are the ordinals
/// (cuDeviceGet(i) returns i), so the handle is reported as the ordinal.
pub(crate) fn current_ctx_device() -> Result<i32> {
    let mut dev: sys::CUdevice = 0;
    // SAFETY: a context is current (callers check); writes one CUdevice.
    check("cuCtxGetDevice", unsafe { sys::cuCtxGetDevice(&mut dev) })?;
    Ok(dev)
}

/// A device's primary context as the driver reports it, without activating it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PrimaryContextState {
    /// Someone (a framework, or gpushare) holds it: it exists and uses device memory.
    pub active: bool,
    /// `CU_CTX_*` flags (scheduling policy, ...). TF/XLA warn when theirs differ from these.
    pub flags: u32,
    /// The context handle while active (the value frameworks' pointers report as their context).
    pub handle: Option<u64>,
}

pub(crate) fn primary_state_of(device: sys::CUdevice) -> Result<(bool, u32)> {
    let mut flags: u32 = 0;
    let mut active: i32 = 0;
    // SAFETY: writes one unsigned int and one int.
    check("cuDevicePrimaryCtxGetState", unsafe { sys::cuDevicePrimaryCtxGetState(device, &mut flags, &mut active) })?;
    Ok((active != 0, flags))
}

/// The primary context handle of `ordinal` if it is active; `None` when inactive. Never activates it:
/// an active primary context is retained (refcount +1) and released at once, which cannot create or
/// destroy anything.
pub(crate) fn active_primary_handle(ordinal: i32) -> Result<Option<u64>> {
    let device = device_handle(ordinal)?;
    let (active, _) = primary_state_of(device)?;
    if !active {
        return Ok(None);
    }
    Ok(Some(RetainedPrimary::retain(ordinal)?.handle()))
}

/// The state of device `ordinal`'s primary context.
pub fn primary_context_state(ordinal: i32) -> Result<PrimaryContextState> {
    guarded(|| {
        let device = device_handle(ordinal)?;
        let (active, flags) = primary_state_of(device)?;
        let handle = if active { active_primary_handle(ordinal)? } else { None };
        Ok(PrimaryContextState { active, flags, handle })
    })
}

/// The context current on the calling thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ContextInfo {
    pub handle: u64,
    /// CUDA ordinal of its device.
    pub device: i32,
    /// It is its device's primary context (the one every framework shares).
    pub is_primary: bool,
    /// `CU_CTX_*` flags of the context.
    pub flags: u32,
}

/// The context current on the calling thread, `None` when there is none (a thread on which no
/// framework has done CUDA work yet). PyTorch sets the primary context current on the threads it
/// uses; JAX/XLA does its work on its own threads, so the notebook thread may show none.
pub fn current_context() -> Result<Option<ContextInfo>> {
    guarded(|| {
        let Some(ctx) = current_ctx_raw()? else { return Ok(None) };
        let device = current_ctx_device()?;
        let mut flags: u32 = 0;
        // SAFETY: `ctx` is current; writes one unsigned int.
        check("cuCtxGetFlags", unsafe { sys::cuCtxGetFlags(&mut flags) })?;
        let handle = handle_of_ctx(ctx);
        let is_primary = active_primary_handle(device)? == Some(handle);
        Ok(Some(ContextInfo { handle, device, is_primary, flags }))
    })
}

/// The ordinal of the device whose context is current on this thread; `None` without a driver or
/// a current context. Two driver calls and no allocation: cheap enough to ask before every handoff
/// (the device a framework exports from is its current one, which follows the current context).
pub fn current_device() -> Option<i32> {
    guarded(|| match current_ctx_raw()? {
        Some(_) => current_ctx_device().map(Some),
        None => Ok(None),
    })
    .ok()
    .flatten()
}

/// Waits for all work in the context `handle` where it is the one current on this thread: one
/// question and the wait. `false`, having waited for nothing, where another context (or none) is
/// current. For a context known alive (the one an array's memory lives in, while it lives).
pub fn synchronize_if_current(handle: u64) -> Result<bool> {
    guarded(|| match current_ctx_raw()? {
        Some(ctx) if handle_of_ctx(ctx) == handle => {
            // SAFETY: the context is current.
            check("cuCtxSynchronize", unsafe { sys::cuCtxSynchronize() })?;
            Ok(true)
        }
        _ => Ok(false),
    })
}

/// Waits for all work in device `ordinal`'s primary context (every framework's streams on it).
/// Does nothing to a device whose primary context is inactive (there is no work to wait for).
pub fn synchronize_context(ordinal: i32) -> Result<()> {
    guarded(|| {
        if active_primary_handle(ordinal)?.is_none() {
            return Ok(());
        }
        let primary = RetainedPrimary::retain(ordinal)?;
        let _scope = primary.enter()?;
        // SAFETY: the primary context is current.
        check("cuCtxSynchronize", unsafe { sys::cuCtxSynchronize() })
    })
}
