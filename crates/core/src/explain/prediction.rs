//! The prediction rules of dlpack-matrix.md §4: will the target share, copy or fail?

use super::refuse;
use super::{XLA_CPU_ALIGNMENT, XLA_GPU_PARAMETER_ALIGNMENT};
use crate::dlpack::has_zero_stride;
use super::auto::resolve_path;
use super::gaps::{device_gap, dtype_gap, itemsize_of, layout_gap, numpy_size_overflows, producer_or_path_gap};
use crate::auto::import_path;
use crate::paths::{Endpoints, Place};
use crate::report::{Prediction, TensorReport, Verdict};

/// What one framework's adapter says of its framework's state, which the rules read: the one
/// typed facts hook (`Adapter.rule_facts` in python/gpushare/adapters/base.py names these fields). A
/// fact an adapter does not name keeps its default: the framework has no such setting.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FrameworkFacts {
    /// As a target: whether its import keeps 64-bit dtypes where it would narrow them (JAX's
    /// `jax_enable_x64`; `None`: it has no such switch, or it is off).
    pub keeps_64_bit: Option<bool>,
    /// As a target: whether it asks producers for the per-thread default stream (`stream=2`: CuPy
    /// under `CUPY_CUDA_PER_THREAD_DEFAULT_STREAM`), which PyTorch refuses.
    pub per_thread_default_stream: bool,
    /// As a source: the CUDA device it exports from, where it exports only from its current one
    /// (PyTorch). As a target: the CUDA device its `__cuda_array_interface__` import places arrays
    /// on (CuPy's current device, to which it copies memory of another device). `None`: unknown or
    /// any device.
    pub current_device: Option<i32>,
    /// Whether the framework has a CUDA context current on this thread, where its calls need one of
    /// its own (PyCUDA keeps a context stack of its own: the driver's current context is not
    /// enough); `None`: it needs none, or the adapter does not say.
    pub has_current_context: Option<bool>,
    /// As a target: whether gpushare can pass a device to its `from_dlpack` (a move's `dlpack`
    /// path: `from_dlpack(x, device=…, copy=True)`); `Some(false)`: its import takes none, so that
    /// path cannot run; `None`: it takes one, or the adapter does not say.
    pub dlpack_takes_device: Option<bool>,
}

/// A fact of [`FrameworkFacts`] that can change at run time: the binding asks the adapter for it
/// (a call into Python) only where [`rule_reads`] says a rule of this handoff reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LiveFact {
    Keeps64Bit,
    CurrentDevice,
    HasCurrentContext,
}

/// Whether a rule reads `fact` when predicting a handoff of `source` (the target's facts for
/// `Keeps64Bit` and `HasCurrentContext`, the source's and the target's for `CurrentDevice`): only 64-bit dtypes
/// narrow, only a CUDA source has a current device that matters, and a context is needed by every
/// import that makes an array of the framework.
pub fn rule_reads(fact: LiveFact, source: &TensorReport) -> bool {
    match fact {
        LiveFact::Keeps64Bit => matches!(source.dtype.as_str(), "int64" | "uint64" | "float64" | "complex128"),
        LiveFact::CurrentDevice => source.dlpack_device.0 == 2,
        LiveFact::HasCurrentContext => true,
    }
}

/// Settings of the frameworks that change the outcome of a handoff.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    /// What the target's adapter says of its framework ([`FrameworkFacts`]).
    pub target: FrameworkFacts,
    /// What the source's adapter says of its framework.
    pub source: FrameworkFacts,
    /// The source framework's version ("" when unknown): NumPy before 2.1 exports legacy capsules only.
    pub source_version: String,
    /// Whether the CUDA driver is usable, when known (the `pinned` path needs it).
    pub cuda_available: Option<bool>,
    /// Whether the producer's stream has work queued (the driver's word, asked per share only
    /// where `auto`'s pick for the array depends on it: [`crate::explain::auto_follows_producer`]).
    /// Read by `auto` alone: the rules' prediction of a path is of the handoff itself.
    pub producer_busy: bool,
}

/// What gpushare knows about the target of a handoff.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TargetFacts {
    /// gpushare's framework name: `torch`, `jax`, `tf`, `numpy`, `cupy`, `numba`.
    pub framework: String,
    /// The target framework's `__version__` ("" when unknown: the newest behaviour is assumed).
    pub version: String,
    /// The transfer path (`dlpack`, `capsule`, `cai`, `host`, `pinned`, `copy`, or `auto`).
    pub path: String,
    pub settings: Settings,
    /// What the adapters declare about the two frameworks' DLPack import and export, which `auto`
    /// decides from (the binding reads them once per pair: `Pair.of`).
    pub endpoints: Endpoints,
    /// Where a move (`device=`) takes the array; `None`: a handoff where it lies.
    pub destination: Option<Place>,
    /// The cost model `auto` consults (the same one the route was chosen with), so `auto` is
    /// predicted as the path it takes.
    pub auto_model: Option<std::sync::Arc<crate::advice::model::CostModel>>,
    /// `auto`'s path with that model, per kind of source (asked on every share).
    pub auto_memo: super::auto::AutoMemo,
}

#[cfg(test)]
impl TargetFacts {
    /// A target for the rules' tests, as the adapters describe it when a torch array is handed to
    /// it ([`TargetFacts::between`] for another source).
    pub fn new(framework: &str, version: &str, path: &str) -> TargetFacts {
        TargetFacts::between("torch", framework, version, path)
    }

    /// A target for the rules' tests, with the facts the adapters of `source` and `framework`
    /// declare ([`super::fixtures::endpoints`]).
    pub fn between(source: &str, framework: &str, version: &str, path: &str) -> TargetFacts {
        TargetFacts {
            framework: framework.into(),
            version: version.into(),
            path: path.into(),
            endpoints: super::fixtures::endpoints(source, framework),
            ..Default::default()
        }
    }
}

/// What a handoff is predicted to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PredictedOutcome {
    /// The target will view the source's memory; `note` says what to watch for (a writable view
    /// of read-only memory).
    Shared { note: Option<String> },
    /// The target will hold a copy, for this reason.
    Copied { reason: String },
    /// The conversion will fail: why, the words the framework is expected to use (a substring of
    /// its error message; `None` where gpushare stops it first or the words are not known), and the fix.
    Failed { reason: String, expected_error: Option<String>, fix: String },
}

impl PredictedOutcome {
    pub fn verdict(&self) -> Verdict {
        match self {
            PredictedOutcome::Shared { .. } => Verdict::Shared,
            PredictedOutcome::Copied { .. } => Verdict::Copied,
            PredictedOutcome::Failed { .. } => Verdict::Failed,
        }
    }

    /// The reason for a copy or a failure, or the note on a share.
    pub fn reason(&self) -> Option<&str> {
        match self {
            PredictedOutcome::Shared { note } => note.as_deref(),
            PredictedOutcome::Copied { reason } | PredictedOutcome::Failed { reason, .. } => Some(reason),
        }
    }

    pub fn fix(&self) -> Option<&str> {
        match self {
            PredictedOutcome::Failed { fix, .. } => Some(fix),
            _ => None,
        }
    }

    pub fn expected_error(&self) -> Option<&str> {
        match self {
            PredictedOutcome::Failed { expected_error, .. } => expected_error.as_deref(),
            _ => None,
        }
    }

    /// The form stored on a [`crate::report::ShareReport`]: the prediction's words move into the
    /// report (copying them there and freeing them after the conversion cost a share time).
    pub fn into_prediction(self) -> Prediction {
        let verdict = self.verdict();
        let reason = match self {
            PredictedOutcome::Shared { note } => note,
            PredictedOutcome::Copied { reason } | PredictedOutcome::Failed { reason, .. } => Some(reason),
        };
        Prediction { verdict, reason }
    }
}

pub(super) fn fail(reason: impl Into<String>, expected: Option<&str>, fix: impl Into<String>) -> PredictedOutcome {
    PredictedOutcome::Failed { reason: reason.into(), expected_error: expected.map(str::to_string), fix: fix.into() }
}

/// `major.minor.patch` of a version string such as `2.15.0+cpu`, `0.10.2`, `2.21.0-rc1`; `None`
/// when it cannot be read (callers then assume the newest behaviour).
pub fn parse_version(version: &str) -> Option<(u64, u64, u64)> {
    let mut parts = version.trim().split(['.', '+', '-']).map(|p| {
        let digits: String = p.chars().take_while(char::is_ascii_digit).collect();
        digits.parse::<u64>().ok()
    });
    let major = parts.next()??;
    let minor = parts.next().flatten().unwrap_or(0);
    let patch = parts.next().flatten().unwrap_or(0);
    Some((major, minor, patch))
}

/// True unless the version is known to be older than `min` (unknown versions count as new).
pub(super) fn at_least(version: &str, min: (u64, u64, u64)) -> bool {
    parse_version(version).is_none_or(|v| v >= min)
}

/// Splits a dtype name into its base and lanes: `float4_e2m1fnx2` → (`float4_e2m1fn`, 2).
pub(super) fn base_and_lanes(dtype: &str) -> (&str, u32) {
    // The lanes suffix is the last `x` followed only by digits; "complex64" has none ("comple" is
    // not a dtype), "complex64x2" has one.
    if let Some(idx) = dtype.rfind('x') {
        let (base, lanes) = (&dtype[..idx], &dtype[idx + 1..]);
        if !base.is_empty()
            && base != "comple"
            && !lanes.is_empty()
            && lanes.bytes().all(|b| b.is_ascii_digit())
            && let Ok(lanes) = lanes.parse::<u32>()
        {
            return (base, lanes);
        }
    }
    (dtype, 1)
}

/// bool, signed and unsigned integers, IEEE floats and complex: what every framework imports.
pub(super) const STANDARD_DTYPES: &[&str] = &[
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32",
    "float64", "complex64", "complex128",
];
/// The `host` path (`gpushare.paths`): the source's values through NumPy on the host (`.cpu().numpy()`,
/// `np.asarray`, `.get()`), an explicit `np.array(copy=True)`, then the target's own constructor
/// (`torch.from_numpy`, `jax.device_put`, `tf.convert_to_tensor`, `cupy.asarray`). It always copies;
/// it fails only where NumPy cannot carry the dtype between the two frameworks.
fn predict_host(source: &TensorReport, target: &TargetFacts) -> PredictedOutcome {
    let (src, dst) = (source.framework.as_str(), target.framework.as_str());
    let (base, lanes) = base_and_lanes(&source.dtype);
    if !(lanes == 1 && STANDARD_DTYPES.contains(&base)) {
        // NumPy holds bfloat16 and float8 only as ml_dtypes arrays: torch neither makes nor takes
        // them, gpushare cannot inspect them (NumPy has no DLPack code for them); JAX and TF do.
        let blocked = if src == "torch" {
            Some(("torch.Tensor.numpy() has no NumPy dtype for it", Some("unsupported ScalarType")))
        } else if dst == "torch" {
            Some(("torch.from_numpy does not take ml_dtypes arrays", Some("can't convert np.ndarray")))
        } else if dst == "numpy" {
            Some(("NumPy holds it only as an ml_dtypes array, which has no DLPack code", Some("DLPack only supports")))
        } else if matches!(dst, "cupy" | "numba") {
            Some(("the target does not take ml_dtypes arrays", None))
        } else {
            None
        };
        if let Some((why, expected)) = blocked {
            return fail(
                format!("the host path carries {} through NumPy and {why}", source.dtype),
                expected,
                "cast to float32 first, or use path='dlpack'",
            );
        }
    }
    if let Some(f) = super::targets::host_failure(source, target) {
        return f;
    }
    // paddle.to_tensor reads a NumPy uint16 array as bfloat16 bits and refuses uint32/uint64: the
    // adapter refuses all three rather than change the values (Paddle 3.3).
    if dst == "paddle" && lanes == 1 && matches!(base, "uint16" | "uint32" | "uint64") {
        return fail(
            format!("paddle has no {} tensors (paddle.to_tensor reads uint16 as bfloat16 bits and refuses uint32/uint64)", source.dtype),
            None,
            "cast to a signed integer type first, e.g. x.astype(numpy.int64)",
        );
    }
    if source.numel() == 0 {
        return PredictedOutcome::Copied { reason: super::judgement::NOTHING_TO_SHARE.into() };
    }
    PredictedOutcome::Copied {
        reason: "path 'host' copies through NumPy on the host by design (the naive route, for comparison)".into(),
    }
}

/// The `copy` and `pinned` paths: gpushare copies the source into a compact (C-contiguous,
/// 256-byte aligned) SharedBuffer of the same dtype and shape, gathering broadcast, reversed and
/// strided views, then hands that buffer to the target by DLPack (a legacy capsule into
/// TensorFlow, `__cuda_array_interface__` into Numba). The target's device, dtype and layout rules
/// apply to the buffer; the producer is gpushare, which refuses nothing.
fn predict_staged(source: &TensorReport, target: &TargetFacts, path: &str) -> PredictedOutcome {
    if numpy_size_overflows(&source.shape, &source.dtype) {
        return fail(
            format!(
                "path '{path}' makes a compact copy, and shape {:?} of {} needs more than 2**63-1 bytes",
                source.shape, source.dtype
            ),
            None,
            "share a smaller view, or use path='dlpack' to share the broadcast view itself",
        );
    }
    let buffer = TensorReport {
        framework: "gpushare".into(),
        readonly: false,
        byte_offset: 0,
        strides: crate::dlpack::compact_strides(&source.shape),
        contiguous: true,
        alignment: 256,
        nbytes: source.numel().saturating_mul(itemsize_of(&source.dtype)),
        ..source.clone()
    };
    // gpushare's buffer exports DLPack: the target takes it as `auto`'s last step says.
    let import = import_path(&Endpoints { source_exports_dlpack: true, ..target.endpoints });
    let checks = [
        producer_or_path_gap(&buffer, target, import),
        device_gap(&buffer, target, import),
        dtype_gap(target, &buffer.dtype),
        layout_gap(&buffer, target, import),
        super::targets::import_failure(&buffer, target, import),
    ];
    if let Some(f) = checks.into_iter().flatten().next() {
        return f;
    }
    if source.numel() == 0 {
        return PredictedOutcome::Copied { reason: super::judgement::NOTHING_TO_SHARE.into() };
    }
    PredictedOutcome::Copied {
        reason: format!("path '{path}' copies the data into a gpushare SharedBuffer by design, then hands it over without a second copy"),
    }
}

/// CuPy's `cupy.asarray` of a `__cuda_array_interface__` whose memory lies on another device than
/// CuPy's current one copies it to the current device (CuPy's `array()`; seen on 2x H200: a JAX
/// array on cuda:1 by `cai` arrived on cuda:0, "device changed: cuda:1 → cuda:0", where
/// `cupy.from_dlpack` views it). gpushare makes the source's device current around the import for
/// the sources whose adapters say where their current device is (PyTorch, CuPy: `device_scope`);
/// from the others the import runs on CuPy's current device.
fn cupy_cai_device_copy(source: &TensorReport, target: &TargetFacts, path: &str) -> Option<PredictedOutcome> {
    if target.framework != "cupy" || path != "cai" || source.dlpack_device.0 != 2 || matches!(source.framework.as_str(), "torch" | "cupy") {
        return None;
    }
    let current = target.settings.target.current_device?;
    (current != source.dlpack_device.1).then(|| PredictedOutcome::Copied {
        reason: format!(
            "device changed: {} → cuda:{current}: CuPy's asarray of a __cuda_array_interface__ copies memory of another device to its current device (path='dlpack' views it)",
            source.dlpack_device_name
        ),
    })
}

/// Predicts what handing `source` to `target` will do, from the rules of dlpack-matrix.md §4.
///
/// Failures are checked first, because a framework that fails never gets to copy: the crash-class
/// refusal ([`refuse`]), then the path and the producer (rules 5–7: capsule generation, read-only
/// export, streams, device index), the device type (rule 4), the dtype (rule 9), and the layout
/// (rule 3; on the `cai` path only JAX checks it, and raises rather than copying). Then a zero-size
/// tensor is "copied", with nothing to share (rule 10: it has no memory for the target to view). Then the copies, in the order of §4:
/// JAX's x64 narrowing (rule 1), which fails instead on a GPU source that is not 16-byte aligned (the
/// narrowing is an XLA kernel, and XLA's GPU kernels check their inputs' alignment) and does not
/// happen at all on the `cai` path (jnp.asarray keeps the dtype); XLA CPU's 64-byte alignment
/// (rule 2); paths that copy by design. Whatever remains is shared, with notes: the target can write
/// to memory the source holds read-only (rule 6), a GPU array JAX shares but cannot compute with
/// (not 16-byte aligned), a 64-bit dtype JAX keeps with x64 off, a broadcast view Numba will
/// misdescribe.
pub fn predict(source: &TensorReport, target: &TargetFacts) -> PredictedOutcome {
    if let Some(destination) = target.destination {
        return super::moves::predict_move(source, target, destination);
    }
    let dst = target.framework.as_str();
    let path = resolve_path(source, target);

    if let Some(r) = refuse(source, dst, path) {
        // On the versions that no longer abort (2.15 raises "Storage size calculation overflowed"),
        // the refusal still predicts the right verdict: failed.
        return PredictedOutcome::Failed {
            reason: format!("{}; gpushare refuses it before calling {dst}", r.reason),
            expected_error: None,
            fix: r.fix,
        };
    }

    match path {
        "host" if target.path == "auto" && !matches!(source.dlpack_device.0, 1 | 3) => {
            // auto chose the host route: the target cannot address the source's device memory.
            return match predict_host(source, target) {
                PredictedOutcome::Copied { reason } => PredictedOutcome::Copied {
                    reason: format!("{dst} cannot address device memory, so auto took the host route: {reason}"),
                },
                other => other,
            };
        }
        "host" => return predict_host(source, target),
        "pinned" if target.settings.cuda_available == Some(false) => {
            return fail(
                "the pinned path stages through page-locked memory with the CUDA driver, which is unavailable here",
                None,
                "use path='copy' or path='host'",
            );
        }
        "pinned" | "copy" => return predict_staged(source, target, path),
        _ => {}
    }

    if let Some(f) = producer_or_path_gap(source, target, path) {
        return f;
    }
    if let Some(f) = device_gap(source, target, path) {
        return f;
    }
    if let Some(f) = super::targets::import_failure(source, target, path).or_else(|| dtype_gap(target, &source.dtype)) {
        return f;
    }
    if let Some(f) = layout_gap(source, target, path) {
        return f;
    }

    if source.numel() == 0 {
        return PredictedOutcome::Copied { reason: super::judgement::NOTHING_TO_SHARE.into() };
    }
    if let Some(copy) = cupy_cai_device_copy(source, target, path) {
        return copy;
    }
    if let Some(copy) = super::targets::import_copy(source, target, path) {
        return copy;
    }

    let mut notes: Vec<String> = Vec::new();
    if matches!(path, "dlpack" | "capsule")
        && let Some(label) = super::targets::relabels(dst, &source.dtype)
    {
        notes.push(super::targets::relabel_note(dst, &source.dtype, label));
    }
    if dst == "jax" {
        // Rule 1: with x64 off JAX converts 64-bit arrays to new 32-bit buffers after import (jax#11895).
        let narrowed = match source.dtype.as_str() {
            "int64" => Some("int32"),
            "uint64" => Some("uint32"),
            "float64" => Some("float32"),
            "complex128" => Some("complex64"),
            _ => None,
        }
        .filter(|_| target.settings.target.keeps_64_bit != Some(true));
        let on_xla_gpu = matches!(source.dlpack_device.0, 2 | 10);
        let gpu_misaligned = on_xla_gpu && !source.data_ptr.is_multiple_of(XLA_GPU_PARAMETER_ALIGNMENT);
        if let Some(to) = narrowed {
            if path == "cai" {
                // jnp.asarray of a __cuda_array_interface__ takes the dtype with lattice_result_type,
                // which does not canonicalise: the array keeps its 64-bit dtype and is a view (seen
                // on an H200 with jax 0.11.2: Numba int64/float64/complex128 arrays shared).
                notes.push(format!(
                    "JAX keeps {} here although jax_enable_x64 is off: jnp.asarray does not narrow a __cuda_array_interface__ (path 'dlpack' would copy it to {to})",
                    source.dtype
                ));
            } else if gpu_misaligned {
                // The narrowing runs an XLA kernel (jit_convert_element_type) on the imported buffer,
                // and XLA's GPU executables take only 16-byte aligned arguments
                // (kEntryParameterAlignBytes): torch and CuPy views one int64 into an allocation fail.
                return fail(
                    format!(
                        "JAX narrows {} to {to} on import (x64 is off) with an XLA GPU kernel, and XLA's GPU kernels take only {XLA_GPU_PARAMETER_ALIGNMENT}-byte aligned inputs: the source starts at {:#x}, {} bytes past a {XLA_GPU_PARAMETER_ALIGNMENT}-byte boundary",
                        source.dtype,
                        source.data_ptr,
                        source.data_ptr % XLA_GPU_PARAMETER_ALIGNMENT
                    ),
                    Some("Address of buffer"),
                    "share an aligned copy: x.clone() (torch) or x.copy() (CuPy) starts a new allocation; enabling jax_enable_x64 lets the import share, but JAX computations on an unaligned array fail the same way",
                );
            } else {
                return PredictedOutcome::Copied {
                    reason: format!(
                        "dtype changed {} → {to}: JAX narrows 64-bit types when jax_enable_x64 is off (enable it to share)",
                        source.dtype
                    ),
                };
            }
        }
        // Rule 2: XLA's CPU client views only 64-byte aligned host memory; the GPU client has no check.
        if path != "cai" && matches!(source.dlpack_device.0, 1 | 3) && !source.data_ptr.is_multiple_of(XLA_CPU_ALIGNMENT) {
            return PredictedOutcome::Copied {
                reason: format!(
                    "source address {:#x} is not {XLA_CPU_ALIGNMENT}-byte aligned, so XLA's CPU client copies it (torch allocates 64-byte aligned memory; NumPy's malloc often does not)",
                    source.data_ptr
                ),
            };
        }
        // The GPU import aliases any address (DLPack and __cuda_array_interface__ alike), but every
        // XLA GPU computation checks its arguments' alignment: the share works, later work does not.
        if gpu_misaligned {
            notes.push(format!(
                "the source starts at {:#x}, not {XLA_GPU_PARAMETER_ALIGNMENT}-byte aligned: JAX shares it, but XLA's GPU kernels take only {XLA_GPU_PARAMETER_ALIGNMENT}-byte aligned inputs, so JAX computations on it will fail (\"Address of buffer 0 must be a multiple of 10\"); share x.clone() (torch) or x.copy() (CuPy) if JAX is to compute with it",
                source.data_ptr
            ));
        }
    }

    // Rule 6: torch, CuPy, Numba and Paddle import writable views and ignore READ_ONLY.
    if source.readonly && (matches!(dst, "torch" | "cupy" | "numba" | "paddle") || super::targets::writes_read_only(dst)) {
        notes.push(format!(
            "shared, but {dst} can mutate a read-only source ({} memory is read-only)",
            source.framework
        ));
    }
    // Numba's own __cuda_array_interface__ ignores zero strides when it decides contiguity
    // (devicearray.is_contiguous), so it describes a broadcast view as C-contiguous (strides=None).
    if dst == "numba" && has_zero_stride(&source.shape, &source.strides) {
        notes.push(
            "shared, but Numba's __cuda_array_interface__ describes this broadcast view as C-contiguous (strides=None): a consumer that reads it back from Numba by __cuda_array_interface__ gets the wrong layout and reads past the source's memory".into(),
        );
    }
    PredictedOutcome::Shared { note: (!notes.is_empty()).then(|| notes.join("; ")) }
}
