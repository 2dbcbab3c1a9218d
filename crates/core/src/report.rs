//! The result data model: what gpushare reports about a tensor and about one handoff.
//! Serialised as the `application/vnd.gpushare+json` payload, so field names are part of the contract.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::dlpack::{Layout, device_type_name};
use crate::stats::Timing;

/// The results of handoffs to another process (python/gpushare/processes/__init__.py).
pub mod process;

/// Version of the JSON schema of every kind; a kind's version changes with any incompatible change
/// of its fields (a field added where none was written before, and absent where it does not apply,
/// is compatible: a share's `worker` part).
pub const SCHEMA_VERSION: u32 = 1;

/// The envelope's `schema` string of a kind: `gpushare.share/1`.
pub fn schema_id(kind: &str) -> String {
    format!("gpushare.{kind}/{SCHEMA_VERSION}")
}
pub const MIME_TYPE: &str = "application/vnd.gpushare+json";

/// What one array is, as its framework and its DLPack export describe it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
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
    /// The CUDA driver's pointer attributes of the memory (its allocation's range, identity and
    /// context); `None` without CUDA or for host memory it does not know. Shared, not copied, by
    /// the reports of arrays in one allocation: a share describes its target from its source's.
    // An object whose keys are the driver's attribute names (and `device_name`, `device_uuid`).
    #[schemars(with = "Option<serde_json::Map<String, serde_json::Value>>")]
    pub cuda: Option<std::sync::Arc<serde_json::Value>>,
}

impl TensorReport {
    pub fn from_layout(layout: &Layout, framework: &str, device: &str, immutable: bool) -> TensorReport {
        TensorReport::with_dims(layout, layout.shape.clone(), layout.strides.clone(), framework, device, immutable)
    }

    /// [`TensorReport::from_layout`] of a layout read for this report alone: its shape and strides
    /// are moved, not copied (two allocations fewer for each array a share describes).
    pub fn from_owned_layout(mut layout: Layout, framework: &str, device: &str, immutable: bool) -> TensorReport {
        let (shape, strides) = (std::mem::take(&mut layout.shape), std::mem::take(&mut layout.strides));
        TensorReport::with_dims(&layout, shape, strides, framework, device, immutable)
    }

    fn with_dims(layout: &Layout, shape: Vec<i64>, strides: Vec<i64>, framework: &str, device: &str, immutable: bool) -> TensorReport {
        TensorReport {
            framework: framework.to_string(),
            dtype: layout.dtype.name(),
            shape,
            strides,
            device: device.to_string(),
            dlpack_device: (layout.device_type, layout.device_id),
            dlpack_device_name: device_name(layout.device_type, layout.device_id),
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

    /// The bytes of the array's elements, what a compact copy of it holds, where `nbytes` is the
    /// memory its strided extent spans: every third float32 of ten holds 16 bytes and spans 40.
    /// Saturated: a broadcast view can have a shape whose bytes overflow 64 bits (the rules refuse
    /// it by name).
    pub fn payload_bytes(&self) -> u64 {
        let numel = self.shape.iter().fold(1u64, |n, d| n.saturating_mul(*d as u64));
        if numel == 0 { 0 } else { numel.saturating_mul(self.itemsize()) }
    }

    /// The bytes of one element: the span holds that many bytes for each element its extent spans.
    fn itemsize(&self) -> u64 {
        let extent = self
            .shape
            .iter()
            .zip(&self.strides)
            .fold(1u64, |e, (n, s)| e.saturating_add((*n as u64).saturating_sub(1).saturating_mul(s.unsigned_abs())));
        self.nbytes / extent
    }

    /// A 1-d array like this one (its dtype, place, flags and the stride of its last dimension)
    /// holding `bytes` of elements (rounded down to whole elements, at least one): what a sweep
    /// decides `auto` for at each of its sizes from the description of one small array of its kind.
    pub fn resized(&self, bytes: u64) -> TensorReport {
        let itemsize = self.itemsize().max(1);
        let elements = (bytes / itemsize).max(1);
        let stride = self.strides.last().copied().filter(|s| *s != 0).unwrap_or(1);
        let spanned = (elements - 1).saturating_mul(stride.unsigned_abs()).saturating_add(1).saturating_mul(itemsize);
        TensorReport {
            shape: vec![elements as i64],
            strides: vec![stride],
            nbytes: spanned,
            span: (self.data_ptr, self.data_ptr.saturating_add(spanned)),
            contiguous: stride == 1,
            ..self.clone()
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
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

    /// The verdict of its word (`shared`, `copied`, `failed`); `None` for any other.
    pub fn parse(word: &str) -> Option<Verdict> {
        [Verdict::Shared, Verdict::Copied, Verdict::Failed].into_iter().find(|v| v.as_str() == word)
    }
}

/// One handoff from a source array to a target framework.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
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
    pub memory: Option<MemoryLedger>,
    /// Producer and consumer streams of the DLPack handoff and whether a wait was inserted.
    pub streams: Option<StreamReport>,
    /// A handoff to a worker process: how the path handed the memory over, the bytes each handoff
    /// moves and both sides by memory identity, which the verdict is judged by (`source` and
    /// `target` above are each described in its own process: their addresses are in two address
    /// spaces). Absent within this process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<process::WorkerHandoff>,
    /// What the cost model of this machine predicted the handoff would take, before it ran (a
    /// handoff to a worker, where the machine is calibrated for its path). Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_time: Option<crate::advice::model::Prediction>,
}

/// Device memory at one moment: the driver's free and total bytes and each framework allocator's
/// figures in its own terms (torch: allocated/reserved; JAX: bytes_in_use; …).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MemorySnapshot {
    pub ordinal: i32,
    pub driver_free: Option<u64>,
    pub driver_total: Option<u64>,
    pub frameworks: BTreeMap<String, BTreeMap<String, i64>>,
}

impl MemorySnapshot {
    pub fn driver_used(&self) -> Option<i64> {
        Some(self.driver_total? as i64 - self.driver_free? as i64)
    }
}

/// What one handoff cost in device memory: `after - before` of the driver's used bytes and of
/// every allocator figure present both times. Positive means more memory held afterwards.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MemoryLedger {
    pub ordinal: i32,
    pub driver_used: Option<i64>,
    pub frameworks: BTreeMap<String, BTreeMap<String, i64>>,
    pub seconds: f64,
    /// One line: `driver +64 MiB; torch allocated +64 MiB`, or `no change`.
    pub summary: String,
}

impl MemoryLedger {
    pub fn between(before: &MemorySnapshot, after: &MemorySnapshot, seconds: f64) -> MemoryLedger {
        let driver_used = before.driver_used().zip(after.driver_used()).map(|(b, a)| a - b);
        let mut frameworks = BTreeMap::new();
        for (name, figures) in &after.frameworks {
            let Some(earlier) = before.frameworks.get(name) else { continue };
            let diff: BTreeMap<String, i64> =
                figures.iter().filter_map(|(k, v)| earlier.get(k).map(|e| (k.clone(), v - e))).collect();
            frameworks.insert(name.clone(), diff);
        }
        let mut parts = Vec::new();
        if let Some(d) = driver_used {
            parts.push(format!("driver {}", crate::render::units::signed_bytes(d)));
        }
        for (name, figures) in &frameworks {
            let changed: Vec<String> =
                figures.iter().filter(|(_, v)| **v != 0).map(|(k, v)| format!("{k} {}", crate::render::units::signed_bytes(*v))).collect();
            if !changed.is_empty() {
                parts.push(format!("{name} {}", changed.join(", ")));
            }
        }
        let summary = if parts.is_empty() { "no change".to_string() } else { parts.join("; ") };
        MemoryLedger { ordinal: after.ordinal, driver_used, frameworks, seconds, summary }
    }
}

/// What a consumer asked the producer's `__dlpack__` for during a handoff.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamRequest {
    /// The `stream` argument: `None` when the consumer passed none (or `None`).
    pub stream: Option<i64>,
    pub max_version: Option<(u32, u32)>,
}

/// How the two sides' work was ordered in a handoff of device memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StreamReport {
    pub path: String,
    pub producer_stream: Option<u64>,
    pub consumer_stream: Option<i64>,
    pub max_version: Option<(u32, u32)>,
    /// What ordered them, in words.
    pub wait: String,
}

impl StreamReport {
    /// The ordering of a handoff by `path`, from the producer's current stream and what the
    /// consumer asked `__dlpack__` for (the last request: consumers may probe first).
    pub fn of(path: &str, producer_stream: Option<u64>, requests: &[StreamRequest]) -> StreamReport {
        let last = requests.last();
        let (consumer_stream, max_version) = match last {
            Some(r) if path == "dlpack" => (r.stream, r.max_version),
            _ => (None, None),
        };
        let wait = match last.filter(|_| path == "dlpack") {
            None => "none: this route carries no stream; gpushare synchronised the source first".to_string(),
            Some(StreamRequest { stream: None, .. }) => {
                "producer synchronises with the legacy default stream (stream=None)".to_string()
            }
            Some(StreamRequest { stream: Some(-1), .. }) => {
                "none: the consumer asked for no synchronisation (stream=-1)".to_string()
            }
            Some(StreamRequest { stream: Some(s), .. }) if producer_stream == Some(*s as u64) => {
                "none: producer and consumer use the same stream".to_string()
            }
            Some(StreamRequest { stream: Some(s), .. }) => match producer_stream {
                Some(p) => format!("producer makes stream {s} wait on its stream {p} (event)"),
                None => format!("producer makes stream {s} wait on its stream None (event)"),
            },
        };
        StreamReport { path: path.to_string(), producer_stream, consumer_stream, max_version, wait }
    }

    /// The route's own account of the ordering, where it has one, in place of what the stream
    /// argument alone would say.
    pub fn ordered_by(mut self, ordering: Option<&str>) -> StreamReport {
        if let Some(words) = ordering {
            self.wait = words.to_string();
        }
        self
    }
}

/// The columns of [`ShareReport::tidy_row`], in order: what identifies the handoff first.
pub const TIDY_COLUMNS: [&str; 24] = [
    "name", "source_framework", "target_framework", "path", "verdict", "dtype", "shape",
    "source_device", "target_device", "source_dlpack_device", "target_dlpack_device", "nbytes",
    "source_data_ptr", "target_data_ptr", "median_s", "min_s", "iqr_s", "repeats", "loops",
    "device_median_s", "shares_origin", "predicted", "unexpected", "reason",
];

/// The [`TIDY_COLUMNS`] that hold counts: integers, never floats.
pub const TIDY_INTEGER_COLUMNS: [&str; 5] = ["nbytes", "source_data_ptr", "target_data_ptr", "repeats", "loops"];

impl ShareReport {
    /// One row of a tidy table (`to_pandas()`): one handoff, one value per cell, raw seconds and
    /// bytes, counts as integers; the nested JSON (CUDA attributes, ledger, streams) stays in
    /// `to_dict()`.
    pub fn tidy_row(&self) -> Vec<(&'static str, serde_json::Value)> {
        use serde_json::Value;
        let t = &self.timing;
        let seconds = |x: f64| if x.is_finite() { Value::from(x) } else { Value::Null };
        let values: [Value; 24] = [
            self.name.clone().into(),
            self.source.framework.clone().into(),
            self.target.framework.clone().into(),
            self.path.clone().into(),
            self.verdict.as_str().into(),
            self.source.dtype.clone().into(),
            self.source.shape.clone().into(),
            self.source.device.clone().into(),
            self.target.device.clone().into(),
            self.source.dlpack_device_name.clone().into(),
            self.target.dlpack_device_name.clone().into(),
            self.source.nbytes.into(),
            self.source.data_ptr.into(),
            self.target.data_ptr.into(),
            seconds(t.median),
            seconds(t.min),
            seconds(t.iqr),
            (t.repeats() as u64).into(),
            t.loops.into(),
            t.device_median.map_or(Value::Null, seconds),
            self.shares_origin.into(),
            self.predicted.as_ref().map(|p| p.verdict.as_str()).into(),
            self.unexpected().into(),
            self.reason.clone().into(),
        ];
        TIDY_COLUMNS.into_iter().zip(values).collect()
    }

    /// True when the outcome differs from the prediction: shown, never hidden.
    pub fn unexpected(&self) -> bool {
        self.predicted.as_ref().is_some_and(|p| p.verdict != self.verdict)
    }
}

/// A verdict predicted from the source's layout, the target framework and its settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Prediction {
    pub verdict: Verdict,
    pub reason: Option<String>,
}

/// The JSON envelope every gpushare result uses.
pub fn envelope(kind: &str, payload: serde_json::Value) -> serde_json::Value {
    serde_json::json!({ "schema": schema_id(kind), "data": payload })
}

/// The envelope of [`envelope`], written straight to text from the payload's own type: building a
/// `serde_json::Value` of a share report first (numbers kept exactly, `arbitrary_precision`)
/// costs about eight times writing its text, and a table's mime bundle did it on every display.
pub fn envelope_text<T: Serialize + ?Sized>(kind: &str, data: &T) -> serde_json::Result<String> {
    #[derive(Serialize)]
    struct Envelope<'a, T: Serialize + ?Sized> {
        data: &'a T,
        schema: String,
    }
    serde_json::to_string(&Envelope { data, schema: schema_id(kind) })
}

/// `cpu:0`, `cuda:1`: DLPack's device in words. The common ones without the formatting machinery:
/// every share describes two arrays.
fn device_name(device_type: u32, device_id: i32) -> String {
    const CUDA: [&str; 8] = ["cuda:0", "cuda:1", "cuda:2", "cuda:3", "cuda:4", "cuda:5", "cuda:6", "cuda:7"];
    match (device_type, device_id) {
        (1, 0) => "cpu:0".to_string(),
        (2, id @ 0..=7) => CUDA[id as usize].to_string(),
        _ => format!("{}:{}", device_type_name(device_type), device_id),
    }
}
