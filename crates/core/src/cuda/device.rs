//! Devices: names, UUIDs, capabilities, memory, peer access.

use std::ffi::c_char;

use cudarc::driver::sys;
use serde::Serialize;

use super::context::{
    PrimaryContextState, RetainedPrimary, active_primary_handle, current_ctx_device, current_ctx_raw, device_handle,
    primary_state_of,
};
use super::error::{CudaError, Result, check, guarded};
use super::status::{driver_status, has_symbol, visible_devices};

/// One visible CUDA device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeviceInfo {
    /// CUDA ordinal (what `cuda:N`, `GPU:N` and `CudaDevice(id=N)` count), after `CUDA_VISIBLE_DEVICES`.
    pub ordinal: i32,
    pub name: String,
    /// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi prints it.
    pub uuid: String,
    /// "0000:19:00.0"; `None` if the driver would not say.
    pub pci_bus_id: Option<String>,
    /// (major, minor): (9, 0) for H100/H200.
    pub compute_capability: (i32, i32),
    pub multiprocessor_count: i32,
    pub total_memory: u64,
    /// Free device memory; `None` when no context is active on the device, because asking would
    /// create one (see [`ContextPolicy`]).
    pub free_memory: Option<u64>,
    pub primary_context: PrimaryContextState,
    /// What `CUDA_VISIBLE_DEVICES` maps this ordinal to (a physical index or a UUID); `None` when unset.
    pub visible_as: Option<String>,
    /// The device supports stream-ordered pools (`cudaMallocAsync`), whose memory has no owning context.
    pub memory_pools_supported: bool,
}

/// Formats the 16 bytes of a `CUuuid` the way nvidia-smi and `CUDA_VISIBLE_DEVICES` write it.
/// (MIG instances are printed with "MIG-" by nvidia-smi; the bytes alone do not say which.)
pub fn format_uuid(bytes: &[u8; 16]) -> String {
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("GPU-{}-{}-{}-{}-{}", &hex[0..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..32])
}

fn c_buffer_to_string(buffer: &[c_char]) -> String {
    let bytes: Vec<u8> = buffer.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

fn attribute(device: sys::CUdevice, attribute: sys::CUdevice_attribute) -> Result<i32> {
    let mut value = 0i32;
    // SAFETY: writes one int; `device` came from cuDeviceGet.
    check("cuDeviceGetAttribute", unsafe { sys::cuDeviceGetAttribute(&mut value, attribute, device) })?;
    Ok(value)
}

fn device_uuid(device: sys::CUdevice) -> Result<String> {
    let mut uuid = sys::CUuuid { bytes: [0; 16] };
    // _v2 reports MIG instance UUIDs; the plain call (older drivers) the parent GPU's.
    if has_symbol("cuDeviceGetUuid_v2") {
        // SAFETY: writes one 16-byte CUuuid.
        check("cuDeviceGetUuid_v2", unsafe { sys::cuDeviceGetUuid_v2(&mut uuid, device) })?;
    } else {
        // SAFETY: as above.
        check("cuDeviceGetUuid", unsafe { sys::cuDeviceGetUuid(&mut uuid, device) })?;
    }
    Ok(format_uuid(&uuid.bytes.map(|c| c as u8)))
}

/// Everything the driver says about device `ordinal`. Creates no context.
pub fn device_info(ordinal: i32) -> Result<DeviceInfo> {
    guarded(|| device_info_inner(ordinal))
}

fn device_info_inner(ordinal: i32) -> Result<DeviceInfo> {
    use sys::CUdevice_attribute as A;
    let device = device_handle(ordinal)?;
    let mut name = [0 as c_char; 256];
    // SAFETY: the driver writes at most `len` bytes, NUL-terminated.
    check("cuDeviceGetName", unsafe { sys::cuDeviceGetName(name.as_mut_ptr(), name.len() as i32, device) })?;
    let mut bus = [0 as c_char; 32];
    // SAFETY: as above; the id is 13 characters ("0000:19:00.0").
    let pci_bus_id = (unsafe { sys::cuDeviceGetPCIBusId(bus.as_mut_ptr(), bus.len() as i32, device) }
        == sys::CUresult::CUDA_SUCCESS)
        .then(|| c_buffer_to_string(&bus));
    let mut total: usize = 0;
    // SAFETY: writes one size_t.
    check("cuDeviceTotalMem_v2", unsafe { sys::cuDeviceTotalMem_v2(&mut total, device) })?;
    let (active, flags) = primary_state_of(device)?;
    let handle = if active { active_primary_handle(ordinal)? } else { None };
    let free_memory = match mem_info_inner(ordinal, ContextPolicy::ExistingOnly) {
        Ok(info) => Some(info.free),
        // A report must not fail for want of a number that needs a context.
        Err(_) => None,
    };
    Ok(DeviceInfo {
        ordinal,
        name: c_buffer_to_string(&name),
        uuid: device_uuid(device)?,
        pci_bus_id,
        compute_capability: (
            attribute(device, A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            attribute(device, A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        ),
        multiprocessor_count: attribute(device, A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
        total_memory: total as u64,
        free_memory,
        primary_context: PrimaryContextState { active, flags, handle },
        visible_as: visible_devices().physical_for(ordinal).map(str::to_owned),
        memory_pools_supported: attribute(device, A::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED).unwrap_or(0) != 0,
    })
}

/// Every visible device, in ordinal order. Creates no context.
pub fn devices() -> Result<Vec<DeviceInfo>> {
    guarded(|| (0..driver_status().device_count()).map(device_info_inner).collect())
}

/// `matrix[i][j]`: device `i` can map device `j`'s memory (`cuDeviceCanAccessPeer`; whether a
/// framework has *enabled* that access is per context and not shown). The diagonal is true.
pub fn peer_access_matrix() -> Result<Vec<Vec<bool>>> {
    guarded(|| {
        let count = driver_status().device_count();
        let handles = (0..count).map(device_handle).collect::<Result<Vec<_>>>()?;
        let mut matrix = vec![vec![false; handles.len()]; handles.len()];
        for (i, &a) in handles.iter().enumerate() {
            for (j, &b) in handles.iter().enumerate() {
                matrix[i][j] = if i == j {
                    true
                } else {
                    let mut can = 0i32;
                    // SAFETY: writes one int; both handles came from cuDeviceGet.
                    check("cuDeviceCanAccessPeer", unsafe { sys::cuDeviceCanAccessPeer(&mut can, a, b) })?;
                    can != 0
                };
            }
        }
        Ok(matrix)
    })
}

/// Free and total device memory, in bytes, device-wide (every process and context).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct MemInfo {
    pub free: u64,
    pub total: u64,
}

impl MemInfo {
    pub fn used(&self) -> u64 {
        self.total.saturating_sub(self.free)
    }
}

/// May [`mem_info`] create a context to answer?
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContextPolicy {
    /// Only use a context that exists (current on this thread, or the device's active primary
    /// context); fail with [`CudaError::NoContext`] otherwise. For reports and the memory ledger.
    ExistingOnly,
    /// Retain the primary context, activating it if needed (hundreds of MiB, and its default flags
    /// become the ones frameworks find), and release it afterwards.
    RetainPrimary,
}

/// Free and total memory of device `ordinal` (`cuMemGetInfo`, which needs a current context: the
/// thread's own if it is on this device, else the primary context pushed for the call and popped).
pub fn mem_info(ordinal: i32, policy: ContextPolicy) -> Result<MemInfo> {
    guarded(|| mem_info_inner(ordinal, policy))
}

pub(crate) fn query_mem_info() -> Result<MemInfo> {
    let (mut free, mut total) = (0usize, 0usize);
    // SAFETY: a context is current (callers make sure); writes two size_t.
    check("cuMemGetInfo_v2", unsafe { sys::cuMemGetInfo_v2(&mut free, &mut total) })?;
    Ok(MemInfo { free: free as u64, total: total as u64 })
}

fn mem_info_inner(ordinal: i32, policy: ContextPolicy) -> Result<MemInfo> {
    device_handle(ordinal)?;
    if current_ctx_raw()?.is_some() && current_ctx_device()? == ordinal {
        return query_mem_info();
    }
    if policy == ContextPolicy::ExistingOnly && active_primary_handle(ordinal)?.is_none() {
        return Err(CudaError::NoContext(format!(
            "no context is active on CUDA device {ordinal}: asking for its free memory would create one"
        )));
    }
    let primary = RetainedPrimary::retain(ordinal)?;
    let _scope = primary.enter()?;
    query_mem_info()
}

/// What the driver says about device `from` reaching device `to`'s memory
/// (`cuDeviceGetP2PAttribute`): the facts `%gpuinfo` shows per pair and the `p2p` path checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PeerLink {
    pub from: i32,
    pub to: i32,
    /// `cuDeviceCanAccessPeer`: `from` can map `to`'s memory once access is enabled.
    pub can_access: bool,
    /// `CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK`: relative performance of the link (0 is best).
    pub performance_rank: i32,
    /// `CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED`: atomics over the link are native (NVLink).
    pub native_atomics: bool,
    /// `CU_DEVICE_P2P_ATTRIBUTE_CUDA_ARRAY_ACCESS_SUPPORTED`.
    pub cuda_array_access: bool,
}

/// The link from device `from` to device `to` (two different ordinals). Creates no context.
pub fn peer_link(from: i32, to: i32) -> Result<PeerLink> {
    guarded(|| {
        if from == to {
            return Err(CudaError::InvalidArgument(format!("a peer link joins two devices; both are {from}")));
        }
        let (a, b) = (device_handle(from)?, device_handle(to)?);
        let mut can = 0i32;
        // SAFETY: writes one int; both handles came from cuDeviceGet.
        check("cuDeviceCanAccessPeer", unsafe { sys::cuDeviceCanAccessPeer(&mut can, a, b) })?;
        let attribute = |attr: sys::CUdevice_P2PAttribute| -> Result<i32> {
            let mut value = 0i32;
            // SAFETY: writes one int; both handles came from cuDeviceGet.
            check("cuDeviceGetP2PAttribute", unsafe { sys::cuDeviceGetP2PAttribute(&mut value, attr, a, b) })?;
            Ok(value)
        };
        use sys::CUdevice_P2PAttribute as P;
        Ok(PeerLink {
            from,
            to,
            can_access: can != 0,
            performance_rank: attribute(P::CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK)?,
            native_atomics: attribute(P::CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED)? != 0,
            cuda_array_access: attribute(P::CU_DEVICE_P2P_ATTRIBUTE_CUDA_ARRAY_ACCESS_SUPPORTED)? != 0,
        })
    })
}

/// `CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED`: a framework (torch's `.to`, CuPy) enabled it first.
const PEER_ACCESS_ALREADY_ENABLED: u32 = 704;

/// The primary contexts peer access was enabled between ([`enable_peer_access`]), held so that it lasts.
static PEER_CONTEXTS: std::sync::Mutex<Vec<RetainedPrimary>> = std::sync::Mutex::new(Vec::new());

/// Lets device `from`'s primary context access device `to`'s memory (`cuCtxEnablePeerAccess`),
/// after checking `cuDeviceCanAccessPeer`. Returns whether this call enabled it (`false`: it was
/// already on, e.g. enabled by PyTorch). Without it a copy between the two is staged by the driver
/// through the host at a tenth of the NVLink speed.
pub fn enable_peer_access(from: i32, to: i32) -> Result<bool> {
    guarded(|| {
        let link = peer_link(from, to)?;
        if !link.can_access {
            return Err(CudaError::InvalidArgument(format!(
                "CUDA device {from} cannot access device {to}'s memory (cuDeviceCanAccessPeer is 0: no NVLink or PCIe peer path)"
            )));
        }
        let target = RetainedPrimary::retain(to)?;
        let source = RetainedPrimary::retain(from)?;
        let scope = source.enter()?;
        // SAFETY: `from`'s primary context is current and `target` holds `to`'s primary context.
        let enabled = match check("cuCtxEnablePeerAccess", unsafe { sys::cuCtxEnablePeerAccess(target.ctx(), 0) }) {
            Ok(()) => true,
            Err(e) if e.driver_code() == Some(PEER_ACCESS_ALREADY_ENABLED) => false,
            Err(e) => return Err(e),
        };
        drop(scope);
        // Peer access lives as long as both primary contexts do. If nobody else held one (a GPU no
        // framework had touched yet), releasing our references here would destroy it with the
        // access just enabled, and the next context on that device would copy through the host at
        // a tenth of the link's speed (37 against 377 GB/s on 2x H200). So the references are kept
        // for the life of the process, once per device pair.
        // One reference per context is enough; later calls drop theirs here.
        let mut held = PEER_CONTEXTS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for context in [source, target] {
            if !held.iter().any(|h| h.handle() == context.handle()) {
                held.push(context);
            }
        }
        Ok(enabled)
    })
}
