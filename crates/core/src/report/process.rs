//! The results of handoffs to another process (python/gpushare/processes/__init__.py): one handoff
//! is a share (`gpushare.share`) with its worker part. Every process path for one array and a sweep
//! over sizes × process paths are the comparison and the sweep of every handoff
//! (`gpushare.comparison`, `gpushare.benchmark`), their rows with their worker part.
//!
//! Each handoff is the [`crate::render::lab::PathRow`] of every handoff with its
//! [`crate::report::process::WorkerHandoff`] part, made by the core's one pipeline over the worker's
//! transport (crates/core/src/share/process.rs). The published schemas are generated from these
//! types; the tests below read real-shaped rows back through them, so the two cannot drift.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ShareReport, TensorReport, Verdict};
use crate::render::lab::PathRow;
use crate::stats::Timing;
#[cfg(test)]
use super::envelope;

/// What the row of a handoff to a worker process says beyond a row within this process (its
/// [`PathRow::worker`]): how the path handed the memory over, what each handoff moves, and both
/// sides, each described by memory identity in its own process (a pointer means nothing in another).
///
/// The row itself is the [`PathRow`] of every handoff: its verdict, reason, bytes moved, timing
/// (the first call apart, as `first_call`), prediction and marks read as any other row's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkerHandoff {
    /// How the path hands the memory over, in words.
    pub mechanism: String,
    /// Bytes of the source array.
    pub nbytes: u64,
    /// Bytes each timed handoff after the first moves (0 where only the first call copies: a staged
    /// segment); the row's bandwidth is of these.
    pub bytes_per_handoff: u64,
    /// The parent's side.
    pub source: ProcessSource,
    /// The worker's side; `None` for a path that did not run.
    pub target: Option<ProcessTarget>,
    /// The POSIX shared-memory segment of the `shm` path (absent on other paths).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment: Option<Segment>,
    /// The network link of a handoff to a worker on another host (path `remote`): the engine, the
    /// transport the engine says carried the bytes, and both ends (absent on other paths).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<RemoteLink>,
}

impl ShareReport {
    /// A handoff to a worker as the share it is: the row's path, verdict, reason, notes, timing and
    /// cost prediction, with `source` and `target` as gpushare describes each array in its own
    /// process and the row's worker part (the memory identities the verdict was judged by). `None`
    /// for a row that did not reach a worker (a path that did not apply or failed).
    pub fn of_worker(row: &PathRow, source: TensorReport, target: TensorReport) -> Option<ShareReport> {
        let timing = row.timing.clone()?;
        let worker = row.worker.clone().filter(|w| w.target.is_some())?;
        Some(ShareReport {
            name: None,
            path: row.path.clone(),
            source,
            target,
            verdict: row.verdict,
            reason: row.reason.clone(),
            notes: row.notes.clone(),
            timing,
            shares_origin: None,
            predicted: None,
            memory: None,
            streams: None,
            worker: Some(worker),
            predicted_time: row.predicted.clone(),
        })
    }
}

/// What one handoff to a worker measured, before it is a row.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerRun {
    /// The process path: `ipc`, `torch_mp`, `shm`, `nccl`, `nccl_socket`, `gloo` or `remote`.
    pub path: String,
    /// "shared" only when both sides' memory identities name the same physical memory.
    pub verdict: Verdict,
    /// Why it copied or failed; `None` when shared.
    pub reason: Option<String>,
    /// False when the path does not apply to this array or target (a "failed" row saying why).
    pub applicable: bool,
    /// Bytes copied in all by the handoff (0 when shared).
    pub bytes_moved: u64,
    /// `None` for a failed path.
    pub timing: Option<Timing>,
    pub notes: Vec<String>,
    /// What the cost model of this machine predicted for the handoff before it ran (where the
    /// machine is calibrated for this path, framework and place).
    pub predicted: Option<crate::advice::model::Prediction>,
    pub worker: WorkerHandoff,
}

impl PathRow {
    /// The row of a handoff to a worker: the columns every row has, with the bandwidth of the bytes
    /// each handoff after the first moves (a shared mapping moves none: a bandwidth would mean
    /// nothing), and the worker's side of it.
    pub fn of_worker(run: WorkerRun) -> PathRow {
        let timing = run.timing.filter(|_| run.verdict != Verdict::Failed);
        let bandwidth = timing
            .as_ref()
            .filter(|t| run.worker.bytes_per_handoff > 0 && t.median > 0.0)
            .map(|t| run.worker.bytes_per_handoff as f64 / t.median);
        let misses_prediction = match (&run.predicted, &timing) {
            (Some(p), Some(t)) => p.misses(t.median),
            _ => false,
        };
        PathRow {
            path: run.path,
            verdict: run.verdict,
            applicable: run.applicable,
            auto: false,
            reason: run.reason,
            fix: None,
            bytes_moved: run.bytes_moved,
            warning: timing.as_ref().and_then(Timing::noise_warning),
            timing,
            device_timing: None,
            bandwidth,
            fastest: false,
            tied: false,
            comparable: true,
            notes: run.notes,
            target: None,
            predicted: run.predicted,
            misses_prediction,
            ordering: None,
            worker: Some(run.worker),
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    /// A value of type `T` read from its JSON value: refused, with where, when a key or value does
    /// not fit its type or would not come back out of it as it went in (the published schemas are
    /// generated from these types: what they let through, the types write back).
    fn from_value<T: Serialize + for<'de> Deserialize<'de>>(input: &Value) -> Result<T, String> {
        let typed: T = serde_json::from_value(input.clone()).map_err(|e| format!("the data does not fit its schema: {e}"))?;
        let back = serde_json::to_value(&typed).map_err(|e| e.to_string())?;
        if let Some(at) = difference(input, &back, "data") {
            return Err(format!("the data does not fit its schema: {at} is not in the Rust type (or changed on the way through it)"));
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

    /// A handoff's row read from JSON text through its type, as written back.
    fn normalize(data: &str) -> Result<Value, String> {
        let input: Value = serde_json::from_str(data).map_err(|e| format!("invalid row JSON: {e}"))?;
        serde_json::to_value(from_value::<PathRow>(&input)?).map_err(|e| e.to_string())
    }

    /// A row of the old flat shape as the row of every handoff: the worker's part under `worker`,
    /// the columns every row has beside it.
    fn as_row(flat: Value) -> Value {
        let mut flat = flat.as_object().unwrap().clone();
        let mut worker = serde_json::Map::new();
        for key in ["mechanism", "nbytes", "bytes_per_handoff", "source", "target", "segment", "link"] {
            if let Some(v) = flat.remove(key) {
                worker.insert(key.into(), v);
            }
        }
        for (key, value) in [("auto", json!(false)), ("fix", Value::Null), ("device_timing", Value::Null),
                             ("bandwidth", Value::Null), ("fastest", json!(false)), ("tied", json!(false)),
                             ("comparable", json!(true)), ("warning", Value::Null), ("target", Value::Null),
                             ("predicted", Value::Null), ("misses_prediction", json!(false)), ("ordering", Value::Null)] {
            flat.entry(key).or_insert(value);
        }
        flat.insert("worker".into(), Value::Object(worker));
        Value::Object(flat)
    }

    fn failed_row() -> Value {
        as_row(json!({"path": "ipc", "mechanism": "CUDA IPC", "verdict": "failed", "reason": "no CUDA",
               "applicable": false, "nbytes": 32, "bytes_moved": 0, "bytes_per_handoff": 0, "timing": null,
               "source": {"pid": 7, "framework": "numpy", "identity": null, "context": null},
               "target": null, "notes": []}))
    }

    fn shm_row() -> Value {
        let host = |address: u64| json!({"kind": "host", "file": "/dev/shm/psm_1", "unlinked": false,
            "mapping": "shared", "dev": "00:1b", "inode": 364, "offset": 0, "address": address});
        as_row(json!({"path": "shm", "mechanism": "POSIX shared memory", "verdict": "shared", "reason": null,
               "applicable": true, "nbytes": 32, "bytes_moved": 32, "bytes_per_handoff": 0,
               "timing": serde_json::to_value(crate::share::process::process_timing(0.002, vec![9e-05, 8.5e-05, 0.001])).unwrap(),
               "source": {"pid": 7, "framework": "numpy", "identity": host(140136054239232), "context": null},
               "target": {"pid": 8, "framework": "numpy", "identity": host(139894009286656), "context": null},
               "notes": ["copied once into segment psm_1"], "segment": {"name": "psm_1", "offset": 0}}))
    }

    fn cuda_row() -> Value {
        let mut row = shm_row();
        row["path"] = json!("ipc");
        let w = &mut row["worker"];
        w.as_object_mut().unwrap().remove("segment");
        w["source"]["identity"] = json!({"kind": "cuda", "address": 1024, "device": 0, "context": 99,
            "context_is_primary": true, "base": 0, "size": 2097152, "offset": 1024, "memory_type": "device",
            "handle": "ab01", "ipc_refusal": null});
        w["target"]["identity"] = json!({"kind": "cuda", "address": 5120, "device": 0, "context": 77,
            "context_is_primary": true, "base": 4096, "size": 2097152, "offset": 1024, "memory_type": "device",
            "handle": null, "ipc_refusal": null, "opened_handle": "ab01", "mapped_base": 4096});
        w["source"]["context"] = json!({"context": 99, "primary": true, "device": 0, "pid": 7});
        w["target"]["context"] = json!({"context": 77, "primary": true, "device": 0, "pid": 8});
        row
    }

    #[test]
    fn real_shaped_rows_pass_through_unchanged() {
        for row in [failed_row(), shm_row(), cuda_row()] {
            let out = normalize(&row.to_string()).unwrap();
            assert_eq!(difference(&row, &out, "data"), None);
            assert_eq!(difference(&out, &row, "data"), None);
        }
        // A comparison or a sweep of process paths is the comparison or sweep of every handoff,
        // its rows with their worker part.
        let rows: Vec<PathRow> = [failed_row(), shm_row(), cuda_row()].iter().map(|r| serde_json::from_value(r.clone()).unwrap()).collect();
        let c = crate::render::lab::ComparisonReport::of_rows(tensor(), "numpy".into(), rows, 3, 0);
        let out = c.to_json();
        assert_eq!(out["schema"], "gpushare.comparison/1");
        assert_eq!(out["data"]["rows"].as_array().unwrap().len(), 3);
        assert_eq!(out["data"]["rows"][1]["worker"]["segment"]["name"], "psm_1");
    }

    #[test]
    fn a_key_the_types_do_not_know_is_refused_with_where_it_is() {
        let mut row = shm_row();
        row["worker"]["source"]["identity"]["colour"] = json!("blue");
        let err = normalize(&row.to_string()).unwrap_err();
        assert!(err.contains("colour"), "{err}");
    }

    #[test]
    fn wrong_types_and_missing_keys_are_refused() {
        let mut row = failed_row();
        row["verdict"] = json!("maybe");
        assert!(normalize(&row.to_string()).unwrap_err().contains("maybe"));
        let mut row = failed_row();
        row["worker"].as_object_mut().unwrap().remove("nbytes");
        assert!(normalize(&row.to_string()).unwrap_err().contains("nbytes"));
        let mut row = shm_row();
        row["worker"]["source"]["identity"]["kind"] = json!("disk");
        assert!(normalize(&row.to_string()).is_err());
        assert!(normalize("{").unwrap_err().contains("invalid"));
    }

    #[test]
    fn a_handoff_to_a_worker_is_a_share_with_its_worker_part() {
        let row: PathRow = serde_json::from_value(shm_row()).unwrap();
        let mut target = tensor();
        target.framework = "numpy".into();
        target.data_ptr = 139894009286656;
        let share = ShareReport::of_worker(&row, tensor(), target).unwrap();
        assert_eq!((share.verdict, share.path.as_str()), (Verdict::Shared, "shm"));
        assert_eq!(share.timing.first_call, row.timing.as_ref().unwrap().first_call);
        let out = envelope("share", serde_json::to_value(&share).unwrap());
        assert_eq!(out["schema"], "gpushare.share/1");
        assert_eq!(out["data"]["worker"]["segment"]["name"], "psm_1");
        assert_eq!(out["data"]["worker"]["target"]["pid"], 8);
        assert_eq!(out["data"]["target"]["framework"], "numpy");
        assert_eq!(out["data"]["notes"][0], "copied once into segment psm_1");
        assert!(out["data"].get("predicted_time").is_none(), "no cost model, no predicted time");
        let back: ShareReport = from_value(&out["data"]).unwrap();
        assert_eq!(back, share);
        // A row that did not reach a worker is no share.
        let failed: PathRow = serde_json::from_value(failed_row()).unwrap();
        assert!(ShareReport::of_worker(&failed, tensor(), tensor()).is_none());
    }

    /// A worker's row of `path` whose handoffs after the first took `samples` seconds.
    fn timed(path: &str, samples: Vec<f64>) -> PathRow {
        let mut row = crate::share::process::failed_report(path, "torch", 4096, String::new(), true);
        row.verdict = Verdict::Shared;
        row.reason = None;
        row.timing = Some(crate::share::process::process_timing(1e-3, samples));
        row
    }

    /// The array a comparison of process paths was made of.
    fn tensor() -> crate::report::TensorReport {
        serde_json::from_value(json!({
            "framework": "torch", "dtype": "float32", "shape": [1024], "strides": [1], "device": "cpu",
            "dlpack_device": [1, 0], "dlpack_device_name": "cpu:0", "data_ptr": 4096, "byte_offset": 0,
            "nbytes": 4096, "span": [4096, 8192], "contiguous": true, "alignment": 256, "readonly": false,
            "dlpack_version": [1, 0], "cuda": null
        }))
        .unwrap()
    }

    #[test]
    fn process_rows_are_ranked_as_every_comparisons_rows() {
        use crate::render::lab::{BenchPoint, BenchmarkReport, ComparisonReport};
        // Clearly apart: the faster is starred and named the fastest, the other not.
        let c = ComparisonReport::of_rows(tensor(), "torch".into(),
            vec![timed("shm", vec![1e-4, 1.1e-4, 1.2e-4]), timed("ipc", vec![1e-5, 1.1e-5, 1.2e-5])], 3, 0);
        assert_eq!(c.rows.iter().map(|r| (r.fastest, r.tied)).collect::<Vec<_>>(), [(false, false), (true, false)]);
        assert_eq!(c.fastest.as_deref(), Some("ipc"));
        // Within each other's spread: a tie, no star.
        let c = ComparisonReport::of_rows(tensor(), "torch".into(),
            vec![timed("shm", vec![1e-5, 2e-5, 3e-5]), timed("gloo", vec![1.5e-5, 2.5e-5, 3.5e-5])], 3, 0);
        assert!(c.rows.iter().all(|r| r.tied && !r.fastest) && c.fastest.is_none());
        // A sweep is ranked size by size.
        let point = |size: u64, path: &str, t: f64| BenchPoint { size, row: timed(path, vec![t, t * 1.01, t * 1.02]) };
        let b = BenchmarkReport {
            source_framework: "torch".into(), target_framework: "torch".into(), dtype: "float32".into(), device: "cpu".into(),
            sizes: vec![1, 2], paths: vec!["shm".into(), "gloo".into()], interrupted: false, repeat: 3, warmup: 5,
            points: vec![point(1, "shm", 1e-5), point(1, "gloo", 1e-4), point(2, "shm", 1e-3), point(2, "gloo", 1e-4)],
        }
        .marked();
        let starred: Vec<(u64, &str)> = b.points.iter().filter(|p| p.row.fastest).map(|p| (p.size, p.row.path.as_str())).collect();
        assert_eq!(starred, [(1, "shm"), (2, "gloo")]);
    }

    #[test]
    fn a_comparison_to_a_worker_reads_as_every_comparison() {
        use crate::render::lab::ComparisonReport;
        let rows: Vec<PathRow> = [failed_row(), shm_row(), cuda_row()].iter().map(|r| serde_json::from_value(r.clone()).unwrap()).collect();
        let c = ComparisonReport::of_rows(tensor(), "numpy".into(), rows, 3, 0);
        let text = c.text();
        let lines: Vec<&str> = text.lines().collect();
        // The caption and columns of every comparison, the first call beside the times.
        assert_eq!(lines[0], "torch → numpy · float32 (1024,) on cpu:0 · 4.00 KiB", "{text}");
        for column in ["path", "verdict", "moved", "median (µs)", "min", "IQR", "GB/s", "first call"] {
            assert!(lines[1].contains(column), "{column} in {text}");
        }
        // The row that shared and the one that copied, each with its worker's details under it.
        let shm = lines.iter().position(|l| l.contains(" shm ")).expect("the shm row");
        assert!(lines[shm].contains("2000"), "its first call, 2 ms in µs: {text}");
        assert!(text.contains("mechanism: POSIX shared memory") && text.contains("worker side: pid 8: /dev/shm/psm_1 + 0"), "{text}");
        // The path that does not apply is the footnote's, not a row; no note speaks of `auto`'s rule within a process.
        assert!(text.contains("Not applicable here (not run): ipc (no CUDA)") && !text.contains("auto still shares"), "{text}");
        let html = c.html();
        assert!(html.contains("gpushare-comparison") && html.contains(">first call<") && html.contains("parent side:<wbr> pid 7"), "{html}");
    }
}
