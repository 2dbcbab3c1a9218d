//! The result data model: what gpushare reports about a tensor and about one handoff.
//! Serialised as the `application/vnd.gpushare+json` payload, so field names are part of the contract.

use serde::{Deserialize, Serialize};

use crate::dlpack::{Layout, device_type_name};
use crate::stats::Timing;

/// Version of the JSON schema; bump on any incompatible change of the fields below.
pub const SCHEMA_VERSION: u32 = 1;
pub const MIME_TYPE: &str = "application/vnd.gpushare+json";

/// What one array is, as its framework and its DLPack export describe it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TensorReport {
    pub framework: String,
    pub dtype: String,
    pub shape: Vec<i64>,
    /// In elements.
    pub strides: Vec<i64>,
    /// The framework's own words: `cpu`, `cuda:0`, `/job:localhost/replica:0/task:0/device:CPU:0`, `TFRT_CPU_0`.
    pub device: String,
    /// DLPack `(device_type, device_id)`.
    pub dlpack_device: (u32, i32),
    pub dlpack_device_name: String,
    /// Address of the first element, `byte_offset` applied.
    pub data_ptr: u64,
    pub byte_offset: u64,
    /// Bytes spanned by the strided extent.
    pub nbytes: u64,
    /// `[start, end)` of the bytes the extent touches.
    pub span: (u64, u64),
    pub contiguous: bool,
    pub alignment: u64,
    /// Read-only per the DLPack flag, or because the framework's arrays are immutable (JAX, TF).
    pub readonly: bool,
    /// DLPack version of the capsule that was read, `None` for a legacy capsule.
    pub dlpack_version: Option<(u32, u32)>,
    /// The CUDA driver's pointer attributes; `None` without CUDA or for host memory it does not know.
    pub cuda: Option<serde_json::Value>,
}

impl TensorReport {
    pub fn from_layout(layout: &Layout, framework: &str, device: &str, immutable: bool) -> TensorReport {
        TensorReport {
            framework: framework.to_string(),
            dtype: layout.dtype.name(),
            shape: layout.shape.clone(),
            strides: layout.strides.clone(),
            device: device.to_string(),
            dlpack_device: (layout.device_type, layout.device_id),
            dlpack_device_name: format!("{}:{}", device_type_name(layout.device_type), layout.device_id),
            data_ptr: layout.data_ptr,
            byte_offset: layout.byte_offset,
            nbytes: layout.nbytes(),
            span: (layout.span_start, layout.span_end),
            contiguous: layout.contiguous,
            alignment: layout.alignment,
            readonly: layout.readonly || immutable,
            dlpack_version: layout.version,
            cuda: None,
        }
    }

    pub fn numel(&self) -> u64 {
        self.shape.iter().map(|d| *d as u64).product()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Shared,
    Copied,
    Failed,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Shared => "shared",
            Verdict::Copied => "copied",
            Verdict::Failed => "failed",
        }
    }
}

/// One handoff from a source array to a target framework.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShareReport {
    /// The variable name, when the handoff came from a magic.
    pub name: Option<String>,
    pub path: String,
    pub source: TensorReport,
    pub target: TensorReport,
    pub verdict: Verdict,
    /// Why it copied; `None` when shared.
    pub reason: Option<String>,
    /// Facts worth knowing that are not a copy reason (zero-size, writable view of read-only memory).
    pub notes: Vec<String>,
    pub timing: Timing,
    /// In a chain: whether this hop's target still shares the first source's memory.
    pub shares_origin: Option<bool>,
    /// What gpushare predicted before converting; `None` when no prediction was made.
    pub predicted: Option<Prediction>,
    /// The CUDA memory ledger: device memory in use before and after, per allocator where known.
    pub memory: Option<serde_json::Value>,
    /// Producer and consumer streams of the DLPack handoff and whether a wait was inserted.
    pub streams: Option<serde_json::Value>,
}

impl ShareReport {
    /// True when the outcome differs from the prediction: shown, never hidden.
    pub fn unexpected(&self) -> bool {
        self.predicted.as_ref().is_some_and(|p| p.verdict != self.verdict)
    }
}

/// A verdict predicted from the source's layout, the target framework and its settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    pub verdict: Verdict,
    pub reason: Option<String>,
}

/// The JSON envelope every gpushare result uses.
pub fn envelope(kind: &str, payload: serde_json::Value) -> serde_json::Value {
    serde_json::json!({ "schema": format!("gpushare.{kind}/{SCHEMA_VERSION}"), "data": payload })
}
