//! The CUDA driver, asked directly: pointer attributes, contexts, devices and their memory, streams,
//! events, page-locked staging, and allocations of gpushare's own.
//!
//! Frameworks each report memory in their own words; this layer gives the driver's answer, which is
//! the same for all of them: which device and context own an address, which allocation it lies in,
//! whether two arrays share one.
//!
//! **No CUDA is a normal state.** libcuda is loaded at run time through cudarc (`dynamic-loading`).
//! [`driver_status`] decides once whether the driver is usable and, if not, why ("libcuda not
//! found", "CUDA_VISIBLE_DEVICES=\"\" hides every device", "cuInit failed: …"). Every other function
//! asks it first and returns [`CudaError::Unavailable`] with that reason. Nothing here panics
//! without CUDA: cudarc panics on a missing library or symbol, so the library is probed with
//! `is_culib_present()` and every entry point is looked up before the first call; any panic that
//! still happened would be caught at the function boundary.
//!
//! **Contexts.** Frameworks share each device's primary context; so does this layer. Anything that
//! needs a current context pushes the right one and pops it afterwards, leaving the thread's current
//! context as it found it. Report functions never create a context (they say "n/a" instead);
//! allocations, streams and events retain the primary context (activating it if nobody had).
//! [`PrivateContextAllocation`], [`MemoryMeter`] and [`cross_context_access`] create separate
//! contexts, on purpose: to show what memory of another context looks like, to read free memory
//! without activating the primary context, and to try a kernel on another context's memory.
//!
//! **When to call.** Probing calls `cuInit`, after which a forked child process cannot use CUDA;
//! call these functions when a CUDA answer is wanted, not at import time.
//!
//! Driver enum outputs (memory type, ...) are read as integers, never as Rust enums, so an unknown
//! code from a newer driver is reported as `Unknown(n)` rather than being undefined behaviour.

mod context;
mod context_cost;
mod copy;
mod cross_context;
mod device;
mod error;
mod event;
mod ipc;
mod gather;
mod memory;
mod pointer;
mod staging;
mod status;
mod stream;

#[cfg(test)]
mod tests;

pub use context::{ContextInfo, PrimaryContextState, current_context, current_device, primary_context_state, synchronize_context, synchronize_if_current};
pub use device::{
    ContextPolicy, DeviceInfo, MemInfo, PeerLink, device_info, devices, enable_peer_access, format_uuid, mem_info, peer_access_matrix,
    peer_link,
};
pub use error::{CudaError, Result};
pub use ipc::{IPC_HANDLE_BYTES, IpcExport, IpcMapping, ipc_export, ipc_refusal};
pub use gather::{GATHER_MAX_DIMS, gather_ptx, gather_strided};
pub use memory::{DeviceBuffer, PinnedHostBuffer, PrivateContextAllocation};
pub use pointer::{
    MemoryType, PointerAttributes, allocation_report, check_device_range, device_of, known_attributes, label_primary, pointer_attributes,
    pointer_attributes_unlabelled, same_allocation, same_allocation_as, with_known_allocation,
};
pub use status::{
    DISABLE_ENV, DriverStatus, VisibleDevices, driver_status, driver_status_if_probed, format_driver_version, parse_visible_devices,
    require_driver, visible_devices, visible_devices_env,
};
pub use context_cost::{MemoryMeter, MemoryStep};
pub use cross_context::{AccessOutcome, CrossContextAccess, cross_context_access};
pub use copy::{copy_dtod, copy_dtod_checked, copy_dtoh_async, copy_htod_async};
pub use event::{EventTimer, order_after};
pub use staging::{PinnedStager, StagePlan, StageReport, plan_staging, stage_through_pinned};
pub use stream::{Stream, synchronize_stream};
