//! Is the CUDA driver usable here, and which devices does `CUDA_VISIBLE_DEVICES` let us see?

use std::panic::catch_unwind;
use std::sync::OnceLock;

use cudarc::driver::sys;
use serde::Serialize;

use super::error::{CudaError, Result, describe, panic_message};

/// Set to anything but "" or "0" to make gpushare behave as if there were no CUDA driver (tests of
/// the no-CUDA paths on a GPU machine; users who must not touch the GPU from a notebook).
pub const DISABLE_ENV: &str = "GPUSHARE_DISABLE_CUDA";

/// The state of the CUDA driver for this process, decided once (see [`driver_status`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum DriverStatus {
    /// `version` is `cuDriverGetVersion` (13000 = CUDA 13.0); `device_count` counts visible devices.
    Available {
        version: i32,
        device_count: i32,
    },
    Unavailable {
        reason: String,
    },
}

impl DriverStatus {
    pub fn is_available(&self) -> bool {
        matches!(self, DriverStatus::Available { .. })
    }

    /// The version as people write it ("13.0"), `None` without a driver.
    pub fn version_string(&self) -> Option<String> {
        match self {
            DriverStatus::Available { version, .. } => Some(format_driver_version(*version)),
            DriverStatus::Unavailable { .. } => None,
        }
    }

    pub fn reason(&self) -> Option<&str> {
        match self {
            DriverStatus::Available { .. } => None,
            DriverStatus::Unavailable { reason } => Some(reason),
        }
    }

    pub fn device_count(&self) -> i32 {
        match self {
            DriverStatus::Available { device_count, .. } => *device_count,
            DriverStatus::Unavailable { .. } => 0,
        }
    }
}

/// 12080 → "12.8", 13000 → "13.0" (the encoding is 1000 × major + 10 × minor).
pub fn format_driver_version(version: i32) -> String {
    format!("{}.{}", version / 1000, (version % 1000) / 10)
}

/// Every driver entry point the layer calls unconditionally. All exist in CUDA 12 drivers; looking
/// them up before the first call turns cudarc's "Missing symbol" panic into a reason.
/// (`cuCtxCreate`, `cuEventElapsedTime` and `cuDeviceGetUuid` have versioned variants; they are
/// chosen at the call.)
const REQUIRED_SYMBOLS: &[&str] = &[
    "cuInit",
    "cuDriverGetVersion",
    "cuGetErrorString",
    "cuDeviceGetCount",
    "cuDeviceGet",
    "cuDeviceGetName",
    "cuDeviceGetAttribute",
    "cuDeviceTotalMem_v2",
    "cuDeviceGetPCIBusId",
    "cuDeviceCanAccessPeer",
    "cuDevicePrimaryCtxGetState",
    "cuDevicePrimaryCtxRetain",
    "cuDevicePrimaryCtxRelease_v2",
    "cuCtxGetCurrent",
    "cuCtxPushCurrent_v2",
    "cuCtxPopCurrent_v2",
    "cuCtxGetDevice",
    "cuCtxGetFlags",
    "cuCtxSynchronize",
    "cuCtxDestroy_v2",
    "cuPointerGetAttributes",
    "cuMemGetInfo_v2",
    "cuMemAlloc_v2",
    "cuMemFree_v2",
    "cuMemsetD8_v2",
    "cuMemHostAlloc",
    "cuMemFreeHost",
    "cuMemcpyDtoDAsync_v2",
    "cuMemcpyDtoHAsync_v2",
    "cuMemcpyHtoDAsync_v2",
    "cuStreamCreate",
    "cuStreamDestroy_v2",
    "cuStreamGetCtx",
    "cuStreamQuery",
    "cuStreamSynchronize",
    "cuStreamWaitEvent",
    "cuEventCreate",
    "cuEventRecord",
    "cuEventQuery",
    "cuEventSynchronize",
    "cuEventDestroy_v2",
    "cuModuleLoadData",
    "cuModuleGetFunction",
    "cuLaunchKernel",
];

/// Whether libcuda exports `name`. Only meaningful once the library was found.
pub(crate) fn has_symbol(name: &str) -> bool {
    // SAFETY: callers reach this only after `is_culib_present()` returned true, so `culib()` loads
    // instead of panicking; a symbol lookup runs no library code.
    unsafe { sys::culib().get::<unsafe extern "C" fn()>(name).is_ok() }
}

static STATUS: OnceLock<DriverStatus> = OnceLock::new();

/// The cached driver state if something already asked for it, without probing (no `cuInit`).
pub fn driver_status_if_probed() -> Option<&'static DriverStatus> {
    STATUS.get()
}

/// The driver's state, probed once per process and cached.
///
/// Probing calls `cuInit`, which must not happen behind the user's back: a process that has called
/// `cuInit` cannot use CUDA in children it forks afterwards (DataLoader workers, multiprocessing
/// "fork"). So nothing calls this at import or `%load_ext` time, only when a CUDA answer is asked for.
pub fn driver_status() -> &'static DriverStatus {
    STATUS.get_or_init(|| match catch_unwind(probe_driver) {
        Ok(status) => status,
        Err(payload) => DriverStatus::Unavailable {
            reason: format!("probing the CUDA driver failed: {}", panic_message(payload.as_ref())),
        },
    })
}

/// `Ok` when the driver is usable, else [`CudaError::Unavailable`] with the reason.
pub fn require_driver() -> Result<()> {
    match driver_status() {
        DriverStatus::Available { .. } => Ok(()),
        DriverStatus::Unavailable { reason } => Err(CudaError::Unavailable(reason.clone())),
    }
}

fn probe_driver() -> DriverStatus {
    let unavailable = |reason: String| DriverStatus::Unavailable { reason };
    if let Ok(v) = std::env::var(DISABLE_ENV)
        && !v.is_empty()
        && v != "0"
    {
        return unavailable(format!("disabled by {DISABLE_ENV}={v}"));
    }
    // SAFETY: tries to dlopen the candidate names and closes them again; no CUDA code runs.
    if !unsafe { sys::is_culib_present() } {
        return unavailable(
            "libcuda not found (no NVIDIA driver on this machine, or not on the library path)".to_owned(),
        );
    }
    if let Some(missing) = REQUIRED_SYMBOLS.iter().find(|s| !has_symbol(s)) {
        return unavailable(format!(
            "libcuda lacks {missing}: the NVIDIA driver is too old (a CUDA 12 driver is needed)"
        ));
    }
    // SAFETY: symbol checked above; cuInit takes a flags word that must be 0.
    let rc = unsafe { sys::cuInit(0) };
    if rc != sys::CUresult::CUDA_SUCCESS {
        let visible = visible_devices();
        if rc == sys::CUresult::CUDA_ERROR_NO_DEVICE
            && let Some(raw) = visible.raw
        {
            return unavailable(format!("CUDA_VISIBLE_DEVICES={raw:?} hides every device"));
        }
        return unavailable(format!("cuInit failed: {}", describe(rc)));
    }
    let mut version = 0i32;
    // SAFETY: writes one int.
    let rc = unsafe { sys::cuDriverGetVersion(&mut version) };
    if rc != sys::CUresult::CUDA_SUCCESS {
        return unavailable(format!("cuDriverGetVersion failed: {}", describe(rc)));
    }
    let mut count = 0i32;
    // SAFETY: writes one int; cuInit succeeded.
    let rc = unsafe { sys::cuDeviceGetCount(&mut count) };
    if rc != sys::CUresult::CUDA_SUCCESS {
        return unavailable(format!("cuDeviceGetCount failed: {}", describe(rc)));
    }
    if count == 0 {
        return match visible_devices().raw {
            Some(raw) => unavailable(format!("CUDA_VISIBLE_DEVICES={raw:?} hides every device")),
            None => unavailable("the driver sees no CUDA device".to_owned()),
        };
    }
    DriverStatus::Available { version, device_count: count }
}

/// `CUDA_VISIBLE_DEVICES` as set in this process (`None` when unset). The driver reads it once, at
/// `cuInit`: changing it later in the process has no effect.
pub fn visible_devices_env() -> Option<String> {
    std::env::var("CUDA_VISIBLE_DEVICES").ok()
}

/// How CUDA reads `CUDA_VISIBLE_DEVICES`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VisibleDevices {
    /// The variable as set; `None` when unset (every device visible, ordinal = index in
    /// `CUDA_DEVICE_ORDER`, which defaults to fastest first, not nvidia-smi's PCI order).
    pub raw: Option<String>,
    /// The entries CUDA honours, in ordinal order: entry `i` is the device CUDA calls ordinal `i`
    /// (a physical index such as "2", or a "GPU-…"/"MIG-…" UUID).
    pub entries: Vec<String>,
    /// Entries from the first invalid one on: CUDA stops reading at an invalid entry and ignores the rest.
    pub ignored: Vec<String>,
    /// Set, but leaves no device visible ("", "-1", "none", ...).
    pub hides_all: bool,
}

impl VisibleDevices {
    /// What `CUDA_VISIBLE_DEVICES` maps CUDA ordinal `ordinal` to; `None` when the variable is unset.
    pub fn physical_for(&self, ordinal: i32) -> Option<&str> {
        usize::try_from(ordinal).ok().and_then(|i| self.entries.get(i)).map(String::as_str)
    }
}

pub fn visible_devices() -> VisibleDevices {
    parse_visible_devices(visible_devices_env().as_deref())
}

/// Parses a `CUDA_VISIBLE_DEVICES` value the way the CUDA driver does: a comma-separated list of
/// device indices or UUIDs (`GPU-…`, `MIG-…`); reading stops at the first entry that is neither, so
/// `"0,2,-1,1"` shows devices 0 and 2 only. (An index beyond the devices present also ends the list
/// in the driver; that needs the physical device count, which only the driver knows.)
pub fn parse_visible_devices(raw: Option<&str>) -> VisibleDevices {
    let Some(value) = raw else {
        return VisibleDevices { raw: None, entries: Vec::new(), ignored: Vec::new(), hides_all: false };
    };
    let mut entries = Vec::new();
    let mut ignored = Vec::new();
    if !value.trim().is_empty() {
        let mut stopped = false;
        for part in value.split(',') {
            let item = part.trim();
            if !stopped && is_valid_visible_entry(item) {
                entries.push(item.to_owned());
            } else {
                stopped = true;
                ignored.push(item.to_owned());
            }
        }
    }
    let hides_all = entries.is_empty();
    VisibleDevices { raw: Some(value.to_owned()), entries, ignored, hides_all }
}

fn is_valid_visible_entry(item: &str) -> bool {
    let is_index = !item.is_empty() && item.bytes().all(|b| b.is_ascii_digit());
    let is_uuid = (item.starts_with("GPU-") || item.starts_with("MIG-")) && item.len() > 4;
    is_index || is_uuid
}
