//! CUDA IPC: hand device memory to another process so that it maps the *same physical allocation*.
//!
//! Legacy IPC (`cuIpcGetMemHandle` / `cuIpcOpenMemHandle`) works on whole allocations made by
//! `cuMemAlloc` (and `cudaMalloc`, which caching allocators such as PyTorch's and CuPy's carve
//! tensors out of). A tensor is therefore exported as the handle of the allocation it lies in
//! (`cuMemGetAddressRange`) plus its offset, as `torch.multiprocessing` does. The other process maps
//! the allocation at an address of its own, in its own context: raw pointers of the two sides are
//! unrelated, and the identity to compare is (handle, offset), or the allocation's size and the
//! offset within it.
//!
//! Memory that legacy IPC cannot export gets a predicted refusal ([`ipc_refusal`]) before the driver
//! is asked: stream-ordered pool allocations (`cudaMallocAsync`; they need `cuMemPoolExportPointer`
//! on a pool created with an IPC handle type) and VMM allocations (`cuMemCreate`/`cuMemMap`, which is
//! what PyTorch's expandable segments and XLA use; they need a shareable fd handle,
//! `cuMemExportToShareableHandle`).

use cudarc::driver::sys;
use serde::Serialize;

use super::context::RetainedPrimary;
use super::error::{CudaError, Result, check, guarded, quietly};
use super::pointer::{MemoryType, PointerAttributes, pointer_attributes};
use super::status::has_symbol;

/// Size of a `CUipcMemHandle` in bytes.
pub const IPC_HANDLE_BYTES: usize = 64;

const IPC_SYMBOLS: &[&str] = &[
    "cuIpcGetMemHandle",
    "cuIpcOpenMemHandle_v2",
    "cuIpcCloseMemHandle",
    "cuMemGetAddressRange_v2",
];

/// What the exporting process sends: the allocation's handle and where the array lies in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IpcExport {
    /// The 64 bytes of `CUipcMemHandle`, for the allocation (not the array).
    pub handle: Vec<u8>,
    /// Start and size of the allocation in the exporting process.
    pub base: u64,
    pub size: u64,
    /// The array's offset in bytes from `base`.
    pub offset: u64,
    pub nbytes: u64,
    pub ordinal: i32,
    /// The context that owns the allocation in the exporting process.
    pub context: u64,
    pub buffer_id: u64,
}

/// Why legacy CUDA IPC cannot export the memory at this address, or `None` when it can. Decided from
/// the driver's pointer attributes alone, so the refusal is predicted and explained rather than
/// discovered as a driver error code.
pub fn ipc_refusal(attrs: &PointerAttributes) -> Option<String> {
    match attrs.memory_type {
        MemoryType::Device => {}
        MemoryType::Managed => {
            return Some(
                "managed (unified) memory cannot be exported by CUDA IPC: cuIpcGetMemHandle accepts only \
                 cuMemAlloc allocations"
                    .into(),
            );
        }
        MemoryType::Host => {
            return Some(
                "page-locked host memory is not exported by CUDA IPC; share it as host memory (shared \
                 memory segment or torch.multiprocessing)"
                    .into(),
            );
        }
        other => {
            return Some(format!(
                "CUDA IPC exports device memory; this address is {other} memory"
            ));
        }
    }
    if attrs.mempool != 0 {
        return Some(
            "the memory comes from a stream-ordered pool (cudaMallocAsync / cuMemAllocFromPoolAsync): legacy \
             IPC cannot export it; it needs cuMemPoolExportPointer on a pool created with an IPC handle type \
             (PyTorch: use the default caching allocator instead of backend:cudaMallocAsync)"
                .into(),
        );
    }
    if attrs.context == 0 {
        return Some(
            "the memory belongs to the device, not to a context: a VMM allocation (cuMemCreate/cuMemMap, e.g. \
             PyTorch expandable_segments or XLA), which legacy IPC cannot export; it needs a shareable fd \
             handle (cuMemExportToShareableHandle), the route torch.multiprocessing takes for expandable \
             segments"
                .into(),
        );
    }
    None
}

fn require_ipc_symbols() -> Result<()> {
    match IPC_SYMBOLS.iter().find(|s| !has_symbol(s)) {
        Some(missing) => Err(CudaError::Unavailable(format!("libcuda lacks {missing}: CUDA IPC is not available"))),
        None => Ok(()),
    }
}

fn address_range(ptr: u64) -> Result<(u64, u64)> {
    let mut base: sys::CUdeviceptr = 0;
    let mut size: usize = 0;
    // SAFETY: writes one CUdeviceptr and one size_t; a context of the device is current.
    check("cuMemGetAddressRange_v2", unsafe { sys::cuMemGetAddressRange_v2(&mut base, &mut size, ptr) })?;
    Ok((base, size as u64))
}

/// Exports the allocation `[ptr, ptr + nbytes)` lies in. Refuses, with the reason of
/// [`ipc_refusal`], memory legacy IPC cannot export.
pub fn ipc_export(ptr: u64, nbytes: u64) -> Result<IpcExport> {
    guarded(|| {
        require_ipc_symbols()?;
        let attrs = pointer_attributes(ptr)?;
        if let Some(reason) = ipc_refusal(&attrs) {
            return Err(CudaError::InvalidArgument(reason));
        }
        let primary = RetainedPrimary::retain(attrs.device_ordinal)?;
        let _scope = primary.enter()?;
        let (base, size) = address_range(ptr)?;
        let offset = ptr - base;
        if offset + nbytes > size {
            return Err(CudaError::InvalidArgument(format!(
                "[{ptr:#x}, +{nbytes}) runs past its allocation [{base:#x}, +{size})"
            )));
        }
        let mut handle = sys::CUipcMemHandle_st { reserved: [0; IPC_HANDLE_BYTES] };
        // SAFETY: `base` is the start of a cuMemAlloc allocation (checked above); writes one handle.
        check("cuIpcGetMemHandle", unsafe { sys::cuIpcGetMemHandle(&mut handle, base) })?;
        Ok(IpcExport {
            handle: handle.reserved.iter().map(|&b| b as u8).collect(),
            base,
            size,
            offset,
            nbytes,
            ordinal: attrs.device_ordinal,
            context: attrs.context,
            buffer_id: attrs.buffer_id,
        })
    })
}

/// An allocation of another process, mapped into this one by `cuIpcOpenMemHandle` in the device's
/// primary context; unmapped (`cuIpcCloseMemHandle`) on drop. The exporting process must keep the
/// allocation alive until then.
pub struct IpcMapping {
    base: u64,
    size: u64,
    offset: u64,
    nbytes: u64,
    ordinal: i32,
    // Declared last: released after `drop` has unmapped the memory in it.
    primary: RetainedPrimary,
}

impl IpcMapping {
    /// Maps the allocation behind `handle` on device `ordinal`; the array is at `offset` in it.
    pub fn open(handle: &[u8], ordinal: i32, offset: u64, nbytes: u64) -> Result<Self> {
        if handle.len() != IPC_HANDLE_BYTES {
            return Err(CudaError::InvalidArgument(format!(
                "a CUDA IPC handle has {IPC_HANDLE_BYTES} bytes, got {}",
                handle.len()
            )));
        }
        guarded(|| {
            require_ipc_symbols()?;
            let primary = RetainedPrimary::retain(ordinal)?;
            let _scope = primary.enter()?;
            let mut raw = sys::CUipcMemHandle_st { reserved: [0; IPC_HANDLE_BYTES] };
            for (slot, byte) in raw.reserved.iter_mut().zip(handle) {
                *slot = *byte as _;
            }
            let mut base: sys::CUdeviceptr = 0;
            // SAFETY: writes one CUdeviceptr. Lazy peer access: the allocation may live on another
            // device than `ordinal` (then mapped over peer access when first touched).
            check("cuIpcOpenMemHandle_v2", unsafe {
                sys::cuIpcOpenMemHandle_v2(
                    &mut base,
                    raw,
                    sys::CUipcMem_flags_enum::CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS as u32,
                )
            })?;
            let size = match address_range(base) {
                Ok((_, size)) => size,
                Err(e) => {
                    // SAFETY: unmaps what was just mapped.
                    quietly(|| check("cuIpcCloseMemHandle", unsafe { sys::cuIpcCloseMemHandle(base) }));
                    return Err(e);
                }
            };
            drop(_scope);
            let mapping = IpcMapping { base, size, offset, nbytes, ordinal, primary };
            if offset + nbytes > size {
                return Err(CudaError::InvalidArgument(format!(
                    "the array [+{offset}, +{nbytes}) runs past the mapped allocation of {size} bytes"
                )));
            }
            Ok(mapping)
        })
    }

    /// Where the allocation is mapped in this process (unrelated to the exporter's address).
    pub fn base(&self) -> u64 {
        self.base
    }

    /// The array's address in this process: `base + offset`.
    pub fn ptr(&self) -> u64 {
        self.base + self.offset
    }

    /// Size of the mapped allocation (the same allocation, so the same size as the exporter's).
    pub fn size(&self) -> u64 {
        self.size
    }

    pub fn offset(&self) -> u64 {
        self.offset
    }

    pub fn nbytes(&self) -> u64 {
        self.nbytes
    }

    pub fn ordinal(&self) -> i32 {
        self.ordinal
    }

    /// The context the mapping was made in: this process's primary context of the device.
    pub fn context(&self) -> u64 {
        self.primary.handle()
    }
}

impl Drop for IpcMapping {
    fn drop(&mut self) {
        let (base, primary) = (self.base, &self.primary);
        quietly(|| {
            let _scope = primary.enter()?;
            // SAFETY: unmaps the mapping made in `open`, in its context.
            check("cuIpcCloseMemHandle", unsafe { sys::cuIpcCloseMemHandle(base) })
        });
    }
}

impl std::fmt::Debug for IpcMapping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IpcMapping")
            .field("base", &format_args!("{:#x}", self.base))
            .field("size", &self.size)
            .field("offset", &self.offset)
            .field("ordinal", &self.ordinal)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(memory_type: MemoryType, context: u64, mempool: u64) -> PointerAttributes {
        PointerAttributes {
            ptr: 0x7f00_0000_1000,
            memory_type,
            memory_type_code: 2,
            device_ordinal: 0,
            context,
            context_is_primary: Some(context != 0),
            range_start: 0x7f00_0000_0000,
            range_size: 1 << 21,
            buffer_id: 7,
            is_managed: memory_type == MemoryType::Managed,
            mempool,
        }
    }

    #[test]
    fn cumemalloc_memory_is_exportable() {
        assert_eq!(ipc_refusal(&attrs(MemoryType::Device, 0xabc, 0)), None);
    }

    #[test]
    fn pool_memory_is_refused_with_the_route_that_works() {
        let why = ipc_refusal(&attrs(MemoryType::Device, 0, 0x55)).unwrap();
        assert!(why.contains("stream-ordered pool"), "{why}");
        assert!(why.contains("cuMemPoolExportPointer"), "{why}");
    }

    #[test]
    fn vmm_memory_is_refused_with_the_fd_route() {
        let why = ipc_refusal(&attrs(MemoryType::Device, 0, 0)).unwrap();
        assert!(why.contains("VMM"), "{why}");
        assert!(why.contains("fd"), "{why}");
    }

    #[test]
    fn host_and_managed_memory_are_refused() {
        assert!(ipc_refusal(&attrs(MemoryType::Host, 0xabc, 0)).unwrap().contains("host"));
        assert!(ipc_refusal(&attrs(MemoryType::Managed, 0xabc, 0)).unwrap().contains("managed"));
        assert!(ipc_refusal(&attrs(MemoryType::Pageable, 0, 0)).unwrap().contains("pageable_host"));
    }

    #[test]
    fn a_short_handle_is_refused_before_the_driver_is_asked() {
        let err = IpcMapping::open(&[0u8; 10], 0, 0, 4).unwrap_err();
        assert!(matches!(err, CudaError::InvalidArgument(_)), "{err:?}");
    }

    #[test]
    fn without_cuda_export_says_why() {
        if crate::cuda::require_driver().is_ok() {
            return; // covered by the GPU tests (tests/test_processes_gpu.py)
        }
        assert!(ipc_export(0x1000, 4).unwrap_err().is_unavailable());
        assert!(IpcMapping::open(&[0u8; 64], 0, 0, 4).unwrap_err().is_unavailable());
    }
}
