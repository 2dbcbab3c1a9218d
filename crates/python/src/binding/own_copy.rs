//! gpushare's own copy to another device (`p2p`, `pinned` with `device=`), run from the pipeline's
//! description of the source.
//!
//! The Python route (`gpushare.paths.OwnCopy`) reads the array's layout again before it copies:
//! torch's DLPack C exchange call and the driver's pointer attributes, which the pipeline has just
//! read to describe the source. Everything a copy between devices needs is in that description
//! (the extent, the device, the dtype, shape and strides for the buffer), so the route here copies
//! from it, asking Python only for the source's current stream and the target's import. Before
//! the copy is queued, that is the host work `share(device=)` adds to the core's peer copy. A
//! description that does not fit (the array is on the target device already, a
//! dtype the buffer cannot name) takes the Python route, which says what is wrong in its words.

use pyo3::intern;
use pyo3::prelude::*;

use super::shared::{Extent, PySharedBuffer};
use crate::dlpack::DEVICE_CUDA as DL_CUDA;
use crate::report::TensorReport;
use crate::shared::{self, Device, Method};

/// What the Python `OwnCopy` holds, read once when the plan is made.
pub struct OwnCopy {
    method: Method,
    to: Device,
    /// The target framework's import of a SharedBuffer (DLPack, capsule or interface).
    importer: Py<PyAny>,
    /// The source adapter's `current_stream`: the copy is queued on it, after the source's work.
    stream_of: Py<PyAny>,
}

impl OwnCopy {
    /// The own copy `route` is, or None for any other route (or one whose words do not parse).
    pub fn of(py: Python<'_>, route: &Bound<'_, PyAny>) -> Option<OwnCopy> {
        let class = py.import("gpushare.paths").and_then(|m| m.getattr("OwnCopy")).ok()?;
        if !route.is_instance(&class).unwrap_or(false) {
            return None;
        }
        let method: String = route.getattr(intern!(py, "method")).ok()?.extract().ok()?;
        let target: String = route.getattr(intern!(py, "target")).ok()?.extract().ok()?;
        Some(OwnCopy {
            method: Method::parse(&method).ok()?,
            to: Device::parse(&target).ok()?,
            importer: route.getattr(intern!(py, "importer")).ok()?.unbind(),
            stream_of: route.getattr(intern!(py, "stream_of")).ok()?.unbind(),
        })
    }

    /// The copy of the array `source` describes, imported by the target; None where the
    /// description does not fit this way (the caller then runs the Python route).
    pub fn convert(&self, py: Python<'_>, array: &Bound<'_, PyAny>, source: &TensorReport) -> Option<PyResult<Py<PyAny>>> {
        let (device_type, ordinal) = source.dlpack_device;
        if device_type != DL_CUDA || ordinal < 0 {
            return None;
        }
        let from = Device::Cuda(ordinal);
        let (start, end) = source.span;
        if from == self.to || end < start || source.data_ptr < start {
            return None;
        }
        let dtype = shared::parse_dtype(&source.dtype).ok()?;
        let extent = Extent { span: (start, end), data_ptr: source.data_ptr, shape: source.shape.clone(), strides: source.strides.clone(), dtype };
        Some(self.copy(py, array, extent, from))
    }

    fn copy(&self, py: Python<'_>, array: &Bound<'_, PyAny>, extent: Extent, from: Device) -> PyResult<Py<PyAny>> {
        let stream: Option<u64> = self.stream_of.bind(py).call1((array,))?.extract()?;
        // SAFETY: the extent is the array the pipeline described, which it holds (and so keeps
        // alive) for this call; the copy is queued on the source's stream, which orders it after
        // the source's writes and before the producer's allocator reuses the memory.
        let buffer = unsafe { PySharedBuffer::moved(py, extent, from, self.to, self.method, stream.unwrap_or(0))? };
        Ok(self.importer.bind(py).call1((Py::new(py, buffer)?,))?.unbind())
    }
}
