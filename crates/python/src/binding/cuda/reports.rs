//! The report functions: what the driver says about itself, devices, addresses, peers and contexts.
//! A missing driver is an answer here (`None` or `[]`), not an error; nothing creates a context
//! unless asked to.

use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::binding::errors::to_pyerr;
use super::{or_none, to_py};
use crate::cuda::{self, ContextPolicy, CudaError};

/// The CUDA driver's state: `available`, `state`, `version` (13000), `version_string` ("13.0"),
/// `device_count`, `reason` (why not, or None), `visible_devices` (how CUDA_VISIBLE_DEVICES reads).
/// The first call probes the driver (`cuInit`).
#[pyfunction]
#[pyo3(name = "driver_status")]
fn cuda_driver_status(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let status = py.detach(cuda::driver_status);
    let dict = PyDict::new(py);
    dict.set_item("available", status.is_available())?;
    dict.set_item("state", if status.is_available() { "available" } else { "unavailable" })?;
    dict.set_item(
        "version",
        match status {
            cuda::DriverStatus::Available { version, .. } => Some(*version),
            cuda::DriverStatus::Unavailable { .. } => None,
        },
    )?;
    dict.set_item("version_string", status.version_string())?;
    dict.set_item("device_count", status.device_count())?;
    dict.set_item("reason", status.reason())?;
    dict.set_item("visible_devices", to_py(py, &cuda::visible_devices())?)?;
    Ok(dict)
}

/// How CUDA reads `CUDA_VISIBLE_DEVICES` (no driver call): `raw`, `entries`, `ignored`, `hides_all`.
#[pyfunction]
#[pyo3(name = "visible_devices")]
fn cuda_visible_devices(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    to_py(py, &cuda::visible_devices())
}

/// The driver's attributes of an address (`memory_type`, `device_ordinal`, `context`,
/// `context_is_primary`, `range_start`, `range_size`, `buffer_id`, `is_managed`, `mempool`, ...),
/// or None without CUDA. Pageable host memory answers with `memory_type == "pageable_host"`.
#[pyfunction]
#[pyo3(name = "pointer_attributes")]
pub fn cuda_pointer_attributes(py: Python<'_>, ptr: u64) -> PyResult<Option<Bound<'_, PyAny>>> {
    match or_none(cuda::pointer_attributes(ptr))? {
        Some(attributes) => Ok(Some(to_py(py, &attributes)?)),
        None => Ok(None),
    }
}

/// The ordinal of the CUDA device whose memory `ptr` is in, or None (host memory, an address the
/// driver does not know, no CUDA). One driver call and no dict: an adapter that names a target's
/// device from its memory asks it on every share (Numba's own answer, its current device, costs
/// several microseconds of its context machinery and names the device current now, not the array's).
#[pyfunction]
#[pyo3(name = "pointer_device")]
fn cuda_pointer_device(ptr: u64) -> PyResult<Option<i32>> {
    let attributes = or_none(cuda::pointer_attributes_unlabelled(ptr))?;
    Ok(attributes.filter(|a| a.memory_type == cuda::MemoryType::Device && a.device_ordinal >= 0).map(|a| a.device_ordinal))
}

/// Whether `[b_ptr, b_ptr + b_nbytes)` lies in the CUDA allocation of `a_ptr` (same buffer id, or
/// inside its range). None without CUDA; False for pageable host memory (the driver cannot say).
#[pyfunction]
#[pyo3(name = "same_allocation")]
fn cuda_same_allocation(a_ptr: u64, b_ptr: u64, b_nbytes: u64) -> PyResult<Option<bool>> {
    let answer = (|| {
        let a = cuda::pointer_attributes(a_ptr)?;
        let b = cuda::pointer_attributes(b_ptr)?;
        Ok(cuda::same_allocation_as(&a, &b, b_nbytes))
    })();
    or_none(answer)
}

/// Every visible device as a dict (`ordinal`, `name`, `uuid`, `pci_bus_id`, `compute_capability`,
/// `multiprocessor_count`, `total_memory`, `free_memory` (None when no context is active there),
/// `primary_context` {active, flags, handle}, `visible_as`, `memory_pools_supported`); [] without CUDA.
/// Creates no context.
#[pyfunction]
#[pyo3(name = "devices")]
fn cuda_devices(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    let devices = or_none(py.detach(cuda::devices))?.unwrap_or_default();
    to_py(py, &devices)
}

/// `(free, total)` bytes of device `ordinal`, or None without CUDA or, unless `create_context`,
/// when no context is active on the device (asking would create one).
#[pyfunction]
#[pyo3(signature = (ordinal = 0, create_context = false))]
#[pyo3(name = "mem_info")]
fn cuda_mem_info(py: Python<'_>, ordinal: i32, create_context: bool) -> PyResult<Option<(u64, u64)>> {
    let policy = if create_context { ContextPolicy::RetainPrimary } else { ContextPolicy::ExistingOnly };
    match py.detach(|| cuda::mem_info(ordinal, policy)) {
        Ok(info) => Ok(Some((info.free, info.total))),
        Err(CudaError::Unavailable(_) | CudaError::NoContext(_)) => Ok(None),
        Err(e) => Err(to_pyerr(e)),
    }
}

/// `matrix[i][j]`: device i can access device j's memory; [] without CUDA.
#[pyfunction]
#[pyo3(name = "peer_matrix")]
fn cuda_peer_matrix(py: Python<'_>) -> PyResult<Vec<Vec<bool>>> {
    Ok(or_none(py.detach(cuda::peer_access_matrix))?.unwrap_or_default())
}

/// The driver's facts about device `a` reaching device `b`'s memory (`from`, `to`, `can_access`,
/// `performance_rank`, `native_atomics`, `cuda_array_access`); None without CUDA. Creates no context.
#[pyfunction]
#[pyo3(name = "peer_link")]
fn cuda_peer_link(py: Python<'_>, a: i32, b: i32) -> PyResult<Option<Bound<'_, PyAny>>> {
    match or_none(cuda::peer_link(a, b))? {
        Some(link) => Ok(Some(to_py(py, &link)?)),
        None => Ok(None),
    }
}

/// Enables access from device `a`'s primary context to device `b`'s memory after checking
/// `cuDeviceCanAccessPeer`; returns whether this call enabled it (False: already on).
#[pyfunction]
#[pyo3(name = "enable_peer_access")]
fn cuda_enable_peer_access(py: Python<'_>, a: i32, b: i32) -> PyResult<bool> {
    py.detach(|| cuda::enable_peer_access(a, b)).map_err(to_pyerr)
}

/// The context current on the calling thread (`handle`, `device`, `is_primary`, `flags`), or None
/// (no CUDA, or no context current on this thread).
#[pyfunction]
#[pyo3(name = "current_context")]
fn cuda_current_context(py: Python<'_>) -> PyResult<Option<Bound<'_, PyAny>>> {
    match or_none(cuda::current_context())?.flatten() {
        Some(info) => Ok(Some(to_py(py, &info)?)),
        None => Ok(None),
    }
}

/// Device `ordinal`'s primary context (`active`, `flags`, `handle`) without activating it; None
/// without CUDA.
#[pyfunction]
#[pyo3(signature = (ordinal = 0))]
#[pyo3(name = "primary_context")]
fn cuda_primary_context(py: Python<'_>, ordinal: i32) -> PyResult<Option<Bound<'_, PyAny>>> {
    match or_none(cuda::primary_context_state(ordinal))? {
        Some(state) => Ok(Some(to_py(py, &state)?)),
        None => Ok(None),
    }
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(cuda_driver_status, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_visible_devices, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_pointer_attributes, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_pointer_device, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_same_allocation, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_devices, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_mem_info, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_peer_matrix, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_peer_link, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_enable_peer_access, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_current_context, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_primary_context, m)?)?;
    Ok(())
}
