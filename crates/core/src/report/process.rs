//! The results of handoffs to another process (python/gpushare/processes/__init__.py): one handoff
//! (`gpushare.process-share/2`), every process path for one array (`gpushare.process-comparison/2`)
//! and a sweep over sizes × process paths (`gpushare.process-bench/2`).
//!
//! The Python side owns the worker processes and hands each row over as Python objects, which the
//! binding reads into these types ([`from_value`]); a key or value that does not fit is refused,
//! so the published schemas (generated from these types) cannot drift from what gpushare writes.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Verdict;
use crate::stats::Timing;
#[cfg(test)]
use super::envelope;

/// One handoff of an array to a worker process, by one process path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProcessShareReport {
    /// The process path: `ipc`, `torch_mp`, `shm`, `nccl`, `nccl_socket`, `gloo` or `remote`.
    pub path: String,
    /// How the path hands the memory over, in words.
    pub mechanism: String,
    /// "shared" only when both sides' memory identities name the same physical memory.
    pub verdict: Verdict,
    /// Why it copied or failed; `None` when shared.
    pub reason: Option<String>,
    /// False when the path does not apply to this array or target (a "failed" row saying why).
    pub applicable: bool,
    /// Bytes of the source array.
    pub nbytes: u64,
    /// Bytes copied in all by the handoff (0 when shared).
    pub bytes_moved: u64,
    /// Bytes each timed handoff after the first moves (0 where only the first call copies).
    pub bytes_per_handoff: u64,
    /// Wall-clock seconds of the handoffs, measured where they are made (the parent, or NCCL's
    /// sender): the samples are the handoffs after the first, whose one-off costs are timed apart
    /// (`first_call`). `None` for a failed path.
    pub timing: Option<Timing>,
    pub source: ProcessSource,
    /// The worker's side; `None` for a failed path.
    pub target: Option<ProcessTarget>,
    pub notes: Vec<String>,
    /// The POSIX shared-memory segment of the `shm` path (absent on other paths).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment: Option<Segment>,
    /// What the cost model of this machine predicted for the handoff before it ran (absent where
    /// the machine is not calibrated for this path, framework and place).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted: Option<crate::advice::model::Prediction>,
    /// The network link of a handoff to a worker on another host (path `remote`): the engine, the
    /// transport the engine says carried the bytes, and both ends (absent on other paths).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<RemoteLink>,
}

/// The link a handoff to a worker on another host went over.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RemoteLink {
    /// The torch.distributed backend: `gloo` (host tensors) or `nccl` (device tensors).
    pub engine: String,
    /// What carried the bytes, in the engine's words where it says them: `NET/Socket`, `NET/IB`,
    /// `P2P`, `SHM` (NCCL's channel lines), `TCP over IFACE` (gloo).
    pub transport: String,
    /// False when the engine took a same-host shortcut (P2P, SHM) instead of the network.
    pub network: bool,
    /// The caller's end.
    pub local: LinkEnd,
    /// The worker's end.
    pub remote: LinkEnd,
    /// The engine's own lines the transport was read from (NCCL's `Channel … via …`).
    pub evidence: Vec<String>,
}

/// One end of a link: its host name, the interface its engine used, and that interface's address.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LinkEnd {
    pub host: Option<String>,
    pub interface: Option<String>,
    pub address: Option<String>,
}

/// The parent's side of a handoff.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProcessSource {
    pub pid: u32,
    pub framework: String,
    /// What memory the source array lies in; `None` when unknown (no address, a failed path).
    pub identity: Option<MemoryIdentity>,
    /// The CUDA context the array's memory belongs to; `None` for host memory.
    pub context: Option<ProcessContext>,
}

/// The worker's side of a handoff.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProcessTarget {
    /// `None` when the worker is no longer running.
    pub pid: Option<u32>,
    /// The worker array's framework (its module's top-level name).
    pub framework: Option<String>,
    pub identity: Option<MemoryIdentity>,
    pub context: Option<ProcessContext>,
}

/// The identity of the memory an array lies in, asked in the process that holds it: two sides
/// share when their identities name the same memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum MemoryIdentity {
    Host(HostIdentity),
    Cuda(CudaIdentity),
}

/// Host memory: the file behind the mapping (`/proc/self/maps`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HostIdentity {
    /// The mapped file (`/dev/shm/NAME` for a segment), `""` for anonymous memory, `None` when the
    /// address is in no mapping.
    pub file: Option<String>,
    /// The file was unlinked after it was mapped.
    pub unlinked: bool,
    pub mapping: HostMapping,
    /// The file's device (`major:minor`).
    pub dev: Option<String>,
    /// 0 for anonymous memory.
    pub inode: u64,
    /// Offset of the address in the file.
    pub offset: Option<u64>,
    pub address: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum HostMapping {
    Shared,
    Private,
    Unknown,
}

/// Device memory: the CUDA allocation the address lies in, as this process sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CudaIdentity {
    pub address: u64,
    pub device: Option<i32>,
    /// The owning context's handle.
    pub context: Option<u64>,
    pub context_is_primary: Option<bool>,
    /// The allocation's base address and size (`cuMemGetAddressRange`).
    pub base: Option<u64>,
    pub size: Option<u64>,
    /// Offset of the address in the allocation.
    pub offset: Option<u64>,
    pub memory_type: Option<String>,
    /// The allocation's CUDA IPC handle, hex (the source side; torch's handle on `torch_mp`).
    pub handle: Option<String>,
    /// Why legacy IPC cannot export the allocation, when it cannot.
    pub ipc_refusal: Option<String>,
    /// The worker side: the IPC handle it opened, hex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opened_handle: Option<String>,
    /// The worker side of `ipc`: where the opened allocation is mapped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mapped_base: Option<u64>,
    /// The source side of `torch_mp`: the driver's IPC handle, kept beside torch's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_handle: Option<String>,
}

/// The CUDA context of an array's memory, in the process that holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProcessContext {
    pub context: Option<u64>,
    pub primary: Option<bool>,
    pub device: Option<i32>,
    pub pid: u32,
}

/// The `shm` path's segment: its name and the array's offset in it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Segment {
    pub name: String,
    pub offset: u64,
}

/// Every process path tried on one array.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProcessComparisonReport {
    /// The array's framework.
    pub source_framework: String,
    /// The framework asked for; `None` when none was (each path's worker keeps its own).
    pub target_framework: Option<String>,
    pub dtype: String,
    pub shape: Vec<u64>,
    /// Where the array lies: `cpu`, `cuda:0`.
    pub device: String,
    /// One per path, in the order tried.
    pub rows: Vec<ProcessShareReport>,
}

/// A sweep over sizes × process paths.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProcessBenchReport {
    pub source_framework: String,
    pub target_framework: String,
    pub dtype: String,
    /// Where the source arrays were made: `cpu`, `cuda:0`.
    pub device: String,
    /// Bytes per source array, in sweep order.
    pub sizes: Vec<u64>,
    /// One per size × path.
    pub points: Vec<ProcessBenchPoint>,
    /// The sweep was stopped (Ctrl-C) before it ended: `points` holds what was measured.
    pub interrupted: bool,
    /// Timed handoffs per point after the first.
    pub repeat: u64,
}

/// One size × path of a process sweep: the handoff, and the size it was made at.
// Flattened, so a point is a process-share with `size` added; `deny_unknown_fields` does not
// work through `flatten`, so [`from_value`] compares the round trip with its input instead (the
// schema still says no other key: `schemars(deny_unknown_fields)` only touches the schema).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ProcessBenchPoint {
    #[serde(flatten)]
    pub handoff: ProcessShareReport,
    /// Bytes of the source array of this point.
    pub size: u64,
}

impl ProcessShareReport {
    /// Bytes per second of the handoffs after the first, where each moves bytes (a shared mapping
    /// moves none: a bandwidth would mean nothing).
    pub fn bandwidth(&self) -> Option<f64> {
        let median = self.timing.as_ref()?.median;
        (self.bytes_per_handoff > 0 && median > 0.0).then(|| self.bytes_per_handoff as f64 / median)
    }

    /// Whether the measured median lies further from the prediction than the model's stated error.
    pub fn misses_prediction(&self) -> bool {
        match (&self.predicted, self.timing.as_ref().map(|t| t.median)) {
            (Some(p), Some(median)) => p.misses(median),
            _ => false,
        }
    }

    /// The outcome of this path as the flat columns of a `to_pandas()` row, after the columns
    /// that identify the array: raw seconds and bytes; identities and notes stay in `to_dict()`.
    pub fn tidy_outcome(&self) -> Vec<(&'static str, Value)> {
        let timing = self.timing.as_ref();
        let identity_kind = |i: Option<&MemoryIdentity>| match i {
            Some(MemoryIdentity::Host(_)) => Value::from("host"),
            Some(MemoryIdentity::Cuda(_)) => Value::from("cuda"),
            None => Value::Null,
        };
        let target = self.target.as_ref();
        vec![
            ("path", self.path.clone().into()),
            ("verdict", self.verdict.as_str().into()),
            ("applicable", self.applicable.into()),
            ("bytes_moved", self.bytes_moved.into()),
            ("bytes_per_handoff", self.bytes_per_handoff.into()),
            ("first_call_s", timing.and_then(|t| t.first_call).into()),
            ("median_s", timing.map(|t| t.median).into()),
            ("min_s", timing.map(|t| t.min).into()),
            ("repeats", timing.map(|t| t.repeats() as u64).into()),
            ("bandwidth_Bps", self.bandwidth().into()),
            ("predicted_s", self.predicted.as_ref().map(|p| p.seconds).into()),
            ("misses_prediction", self.misses_prediction().into()),
            ("source_pid", self.source.pid.into()),
            ("target_pid", target.and_then(|t| t.pid).into()),
            ("source_memory", identity_kind(self.source.identity.as_ref())),
            ("target_memory", identity_kind(target.and_then(|t| t.identity.as_ref()))),
            ("mechanism", self.mechanism.clone().into()),
            ("reason", self.reason.clone().into()),
        ]
    }
}

/// The dtypes of a process frame's columns: counts are integers ("Int64", nullable, where a
/// failed path has none), seconds and rates floats (NaN where a failed path has none).
pub const TIDY_DTYPES: [(&str, &str); 12] = [
    ("size", "int64"),
    ("nbytes", "int64"),
    ("bytes_moved", "int64"),
    ("bytes_per_handoff", "int64"),
    ("repeats", "Int64"),
    ("source_pid", "int64"),
    ("target_pid", "Int64"),
    ("first_call_s", "float64"),
    ("median_s", "float64"),
    ("min_s", "float64"),
    ("bandwidth_Bps", "float64"),
    ("predicted_s", "float64"),
];

/// The process result kinds, as the envelope names them (`gpushare.<kind>/1`).
pub const PROCESS_KINDS: [&str; 3] = ["process-share", "process-comparison", "process-bench"];

/// A process result of kind `kind` read from the value the binding built from Python objects
/// (dicts, lists, numbers; no JSON text): refused, with where, when a key or value does not fit
/// its type or would not come back out of it as it went in.
pub fn from_value<T: Serialize + for<'de> Deserialize<'de>>(kind: &str, input: &Value) -> Result<T, String> {
    let typed: T = serde_json::from_value(input.clone()).map_err(|e| format!("{kind} data does not fit its schema: {e}"))?;
    let back = serde_json::to_value(&typed).map_err(|e| e.to_string())?;
    if let Some(at) = difference(input, &back, "data") {
        return Err(format!("{kind} data does not fit its schema: {at} is not in the Rust type (or changed on the way through it)"));
    }
    Ok(typed)
}

/// The first place where `b` (the round trip) lost or changed something of `a` (the input).
/// A null and an absent key are the same (optional keys are written only when set); numbers
/// compare by value (Python writes `1e-05` where Rust writes `1e-5`).
fn difference(a: &Value, b: &Value, at: &str) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (key, value) in x {
                let other = y.get(key).unwrap_or(&Value::Null);
                if let Some(d) = difference(value, other, &format!("{at}.{key}")) {
                    return Some(d);
                }
            }
            y.iter().find(|(k, v)| !v.is_null() && !x.contains_key(*k)).map(|(k, _)| format!("{at}.{k}"))
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            x.iter().zip(y).enumerate().find_map(|(i, (p, q))| difference(p, q, &format!("{at}[{i}]")))
        }
        (Value::Number(x), Value::Number(y)) => {
            let same = match (x.as_u64(), y.as_u64(), x.as_i64(), y.as_i64()) {
                (Some(p), Some(q), _, _) => p == q,
                (_, _, Some(p), Some(q)) => p == q,
                _ => x.as_f64() == y.as_f64(),
            };
            (!same).then(|| at.to_string())
        }
        _ => (a != b).then(|| at.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The envelope of a process result of `kind` read from JSON text through its type.
    fn normalize(kind: &str, data: &str) -> Result<Value, String> {
        let input: Value = serde_json::from_str(data).map_err(|e| format!("invalid {kind} JSON: {e}"))?;
        let typed = match kind {
            "process-share" => serde_json::to_value(from_value::<ProcessShareReport>(kind, &input)?),
            "process-comparison" => serde_json::to_value(from_value::<ProcessComparisonReport>(kind, &input)?),
            "process-bench" => serde_json::to_value(from_value::<ProcessBenchReport>(kind, &input)?),
            other => return Err(format!("unknown process result kind {other:?}: use one of {}", PROCESS_KINDS.join(", "))),
        };
        Ok(envelope(kind, typed.map_err(|e| e.to_string())?))
    }

    fn failed_row() -> Value {
        json!({"path": "ipc", "mechanism": "CUDA IPC", "verdict": "failed", "reason": "no CUDA",
               "applicable": false, "nbytes": 32, "bytes_moved": 0, "bytes_per_handoff": 0, "timing": null,
               "source": {"pid": 7, "framework": "numpy", "identity": null, "context": null},
               "target": null, "notes": []})
    }

    fn shm_row() -> Value {
        let host = |address: u64| json!({"kind": "host", "file": "/dev/shm/psm_1", "unlinked": false,
            "mapping": "shared", "dev": "00:1b", "inode": 364, "offset": 0, "address": address});
        json!({"path": "shm", "mechanism": "POSIX shared memory", "verdict": "shared", "reason": null,
               "applicable": true, "nbytes": 32, "bytes_moved": 32, "bytes_per_handoff": 0,
               "timing": serde_json::to_value(crate::share::process::process_timing(0.002, vec![9e-05, 8.5e-05, 0.001])).unwrap(),
               "source": {"pid": 7, "framework": "numpy", "identity": host(140136054239232), "context": null},
               "target": {"pid": 8, "framework": "numpy", "identity": host(139894009286656), "context": null},
               "notes": ["copied once into segment psm_1"], "segment": {"name": "psm_1", "offset": 0}})
    }

    fn cuda_row() -> Value {
        let mut row = shm_row();
        row["path"] = json!("ipc");
        row.as_object_mut().unwrap().remove("segment");
        row["source"]["identity"] = json!({"kind": "cuda", "address": 1024, "device": 0, "context": 99,
            "context_is_primary": true, "base": 0, "size": 2097152, "offset": 1024, "memory_type": "device",
            "handle": "ab01", "ipc_refusal": null});
        row["target"]["identity"] = json!({"kind": "cuda", "address": 5120, "device": 0, "context": 77,
            "context_is_primary": true, "base": 4096, "size": 2097152, "offset": 1024, "memory_type": "device",
            "handle": null, "ipc_refusal": null, "opened_handle": "ab01", "mapped_base": 4096});
        row["source"]["context"] = json!({"context": 99, "primary": true, "device": 0, "pid": 7});
        row["target"]["context"] = json!({"context": 77, "primary": true, "device": 0, "pid": 8});
        row
    }

    #[test]
    fn real_shaped_rows_pass_through_unchanged() {
        for row in [failed_row(), shm_row(), cuda_row()] {
            let out = normalize("process-share", &row.to_string()).unwrap();
            assert_eq!(out["schema"], "gpushare.process-share/2");
            assert_eq!(difference(&row, &out["data"], "data"), None);
            assert_eq!(difference(&out["data"], &row, "data"), None);
        }
        let comparison = json!({"source_framework": "numpy", "target_framework": null, "dtype": "float64",
            "shape": [4], "device": "cpu", "rows": [failed_row(), shm_row(), cuda_row()]});
        let out = normalize("process-comparison", &comparison.to_string()).unwrap();
        assert_eq!(out["data"]["rows"].as_array().unwrap().len(), 3);
        let mut point = shm_row();
        point["size"] = json!(4096);
        let bench = json!({"source_framework": "numpy", "target_framework": "numpy", "dtype": "float32",
            "device": "cpu", "sizes": [4096], "points": [point], "interrupted": false, "repeat": 3});
        let out = normalize("process-bench", &bench.to_string()).unwrap();
        assert_eq!(out["data"]["points"][0]["size"], 4096);
        assert_eq!(out["data"]["points"][0]["segment"]["name"], "psm_1");
    }

    #[test]
    fn a_key_the_types_do_not_know_is_refused_with_where_it_is() {
        let mut row = shm_row();
        row["source"]["identity"]["colour"] = json!("blue");
        let err = normalize("process-share", &row.to_string()).unwrap_err();
        assert!(err.contains("colour"), "{err}");
        // Inside a flattened bench point too, where serde cannot deny it.
        let mut point = failed_row();
        point["size"] = json!(4096);
        point["surprise"] = json!(1);
        let bench = json!({"source_framework": "numpy", "target_framework": "numpy", "dtype": "float32",
            "device": "cpu", "sizes": [4096], "points": [point], "interrupted": false, "repeat": 3});
        let err = normalize("process-bench", &bench.to_string()).unwrap_err();
        assert!(err.contains("data.points[0].surprise"), "{err}");
    }

    #[test]
    fn wrong_types_and_missing_keys_are_refused() {
        let mut row = failed_row();
        row["verdict"] = json!("maybe");
        assert!(normalize("process-share", &row.to_string()).unwrap_err().contains("maybe"));
        let mut row = failed_row();
        row.as_object_mut().unwrap().remove("nbytes");
        assert!(normalize("process-share", &row.to_string()).unwrap_err().contains("nbytes"));
        let mut row = shm_row();
        row["source"]["identity"]["kind"] = json!("disk");
        assert!(normalize("process-share", &row.to_string()).is_err());
        assert!(normalize("process-nothing", "{}").unwrap_err().contains("process-share, process-comparison"));
        assert!(normalize("process-share", "{").unwrap_err().contains("invalid"));
    }
}
