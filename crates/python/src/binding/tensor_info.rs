//! `TensorInfo`: what one array is, as Python reads it (attributes, text, HTML, JSON, `to_dict`).

use pyo3::prelude::*;

use super::describe::{Fields, attach_cuda, layout_from_capsule, report_from_fields};
use super::errors::to_pyerr;
use super::forms::to_py;
use crate::explain;
use crate::render;
use crate::report::TensorReport;
use gpushare_core::Error;

/// What one array is: framework, dtype, shape, strides (elements), devices, address and extent.
#[pyclass(module = "gpushare", frozen, name = "TensorInfo")]
pub struct TensorInfo {
    pub report: TensorReport,
}

#[pymethods]
impl TensorInfo {
    /// Reads a DLPack capsule (legacy or versioned) without consuming it.
    #[staticmethod]
    #[pyo3(signature = (capsule, framework, device, immutable=false))]
    fn from_capsule(capsule: &Bound<'_, PyAny>, framework: &str, device: &str, immutable: bool) -> PyResult<TensorInfo> {
        let layout = layout_from_capsule(capsule)?;
        let mut report = TensorReport::from_owned_layout(layout, framework, device, immutable);
        attach_cuda(&mut report);
        Ok(TensorInfo { report })
    }

    #[getter]
    fn framework(&self) -> &str {
        &self.report.framework
    }
    #[getter]
    fn dtype(&self) -> &str {
        &self.report.dtype
    }
    #[getter]
    fn shape(&self) -> Vec<i64> {
        self.report.shape.clone()
    }
    #[getter]
    fn strides(&self) -> Vec<i64> {
        self.report.strides.clone()
    }
    #[getter]
    fn device(&self) -> &str {
        &self.report.device
    }
    #[getter]
    fn dlpack_device(&self) -> (u32, i32) {
        self.report.dlpack_device
    }
    #[getter]
    fn data_ptr(&self) -> u64 {
        self.report.data_ptr
    }
    #[getter]
    fn byte_offset(&self) -> u64 {
        self.report.byte_offset
    }
    /// The bytes its strided extent spans (``span``'s length).
    #[getter]
    fn nbytes(&self) -> u64 {
        self.report.nbytes
    }
    /// The bytes of its elements, what a compact copy of it holds and what a copy's cost is
    /// priced by: every third float32 of ten holds 16 bytes and spans 40.
    #[getter]
    fn payload_bytes(&self) -> u64 {
        self.report.payload_bytes()
    }
    #[getter]
    fn span(&self) -> (u64, u64) {
        self.report.span
    }
    #[getter]
    fn contiguous(&self) -> bool {
        self.report.contiguous
    }
    #[getter]
    fn alignment(&self) -> u64 {
        self.report.alignment
    }
    #[getter]
    fn readonly(&self) -> bool {
        self.report.readonly
    }
    #[getter]
    fn dlpack_version(&self) -> Option<(u32, u32)> {
        self.report.dlpack_version
    }
    /// The CUDA driver's pointer attributes as a dict, or None without CUDA.
    #[getter]
    fn cuda<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.report.cuda.as_ref().map(|c| to_py(py, c)).transpose()
    }

    /// Raises UnsafeInputError when the target framework must not be handed this tensor.
    #[pyo3(signature = (target, path="dlpack"))]
    fn refuse_for(&self, target: &str, path: &str) -> PyResult<()> {
        match explain::refuse(&self.report, target, path) {
            None => Ok(()),
            Some(r) => Err(to_pyerr(Error::UnsafeInput {
                subject: gpushare_core::route::label(&self.report.framework, target),
                reason: r.reason,
                fix: r.fix,
                framework_error: None,
                predicted: None,
            })),
        }
    }
}

super::forms::result_forms!(TensorInfo {
    kind: "tensor",
    data: report: TensorReport,
    text: |r| render::tensor_text(r),
    html: |r| render::tensor_html(r),
});

/// A TensorInfo from raw fields, for producers without DLPack (`__cuda_array_interface__`).
#[pyfunction]
#[pyo3(signature = (framework, device, ptr, shape, strides, code, bits, device_type, device_id, readonly, immutable=false))]
#[allow(clippy::too_many_arguments)]
pub fn tensor_info_from_fields(
    framework: &str,
    device: &str,
    ptr: u64,
    shape: Vec<i64>,
    strides: Option<Vec<i64>>,
    code: u8,
    bits: u8,
    device_type: u32,
    device_id: i32,
    readonly: bool,
    immutable: bool,
) -> PyResult<TensorInfo> {
    let report = report_from_fields(Fields {
        framework,
        device,
        ptr,
        shape,
        strides,
        code,
        bits,
        device_type,
        device_id,
        readonly,
        immutable,
    })?;
    Ok(TensorInfo { report })
}
