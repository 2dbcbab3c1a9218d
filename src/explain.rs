//! The rules that say why a conversion shared, copied or failed.
//!
//! Three questions, asked at three moments:
//! - [`refuse`], before any framework is called: is this input known to *crash* the target (abort
//!   the process, or make it read the wrong bytes)? Only those are stopped; everything else is
//!   handed to the framework, so gpushare reports what really happens.
//! - [`predict`], before the call: from the source's DLPack layout, the target framework, its
//!   version and settings, and the transfer path, will the target share the memory, copy it, or fail
//!   (and with which of the framework's own words)? The rules are those of dlpack-matrix.md §4,
//!   checked against the installed frameworks by `tests/test_conformance.py`.
//! - [`judge`], after the call: from addresses and extents (and CUDA allocation identity when the
//!   driver described both pointers), did the target share the source's memory? A target that lies
//!   inside the live source, or overlaps it at all, views it (a copy is a new allocation and cannot
//!   overlap live memory); where its description reaches past the source, a note says so. A
//!   prediction that differs from the judgement is shown as UNEXPECTED, never hidden.

use crate::dlpack::{
    has_negative_stride, has_zero_stride, is_c_contiguous, is_host_accessible, is_permuted_compact,
};
use crate::report::{Prediction, TensorReport, Verdict};

/// JAX/XLA's CPU client refuses to alias data that is not aligned to `EIGEN_MAX_ALIGN_BYTES`.
pub const XLA_CPU_ALIGNMENT: u64 = 64;

/// XLA's GPU executables check that every argument buffer is aligned to `kEntryParameterAlignBytes`
/// (16) and raise "Address of buffer N must be a multiple of 10" (hex) otherwise. The GPU import
/// itself aliases any address.
pub const XLA_GPU_PARAMETER_ALIGNMENT: u64 = 16;

/// A conversion gpushare will not attempt, with the fix to try.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub reason: String,
    pub fix: String,
}

/// Stops inputs that would crash the target framework, before calling it. Only crash-class inputs
/// belong here: an input the framework rejects with an exception is handed to it, so that the user
/// sees the framework's real answer (and [`predict`] has already said it will fail).
///
/// Negative strides into PyTorch: `torch.from_dlpack` aborted the whole process on them in 2.12
/// (SIGABRT, pytorch#188023); later versions raise "Storage size calculation overflowed" (#188047).
/// gpushare refuses them on every version, because a kernel that dies loses the user's work.
pub fn refuse(src: &TensorReport, target: &str) -> Option<Refusal> {
    let (shape, strides) = (&src.shape, &src.strides);
    match target {
        "torch" if has_negative_stride(shape, strides) => Some(Refusal {
            reason: format!(
                "negative strides {strides:?}: torch.from_dlpack aborted the process on them (pytorch#188023, torch 2.12; later versions raise)"
            ),
            fix: "make a contiguous copy first, e.g. numpy.ascontiguousarray(x) or x.copy()".into(),
        }),
        _ => None,
    }
}

// ------------------------------------------------------------------------------------------------
// Prediction
// ------------------------------------------------------------------------------------------------

/// Settings of the frameworks that change the outcome of a handoff.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    /// `jax.config.jax_enable_x64`: off (the default), JAX narrows 64-bit dtypes on import.
    pub jax_x64: bool,
    /// `CUPY_CUDA_PER_THREAD_DEFAULT_STREAM`: CuPy then passes `stream=2`, which PyTorch refuses.
    pub cupy_ptds: bool,
    /// The source framework's version ("" when unknown): NumPy before 2.1 exports legacy capsules only.
    pub source_version: String,
    /// The source framework's current CUDA device, when known (PyTorch exports only from it).
    pub source_current_device: Option<i32>,
    /// Whether the CUDA driver is usable, when known (the `pinned` path needs it).
    pub cuda_available: Option<bool>,
}

/// What gpushare knows about the target of a handoff.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TargetFacts {
    /// gpushare's framework name: `torch`, `jax`, `tf`, `numpy`, `cupy`, `numba`.
    pub framework: String,
    /// The target framework's `__version__` ("" when unknown: the newest behaviour is assumed).
    pub version: String,
    /// The transfer path (`dlpack`, `capsule`, `cai`, `host`, `pinned`, `copy`, or `auto`).
    pub path: String,
    pub settings: Settings,
}

impl TargetFacts {
    pub fn new(framework: &str, version: &str, path: &str) -> TargetFacts {
        TargetFacts { framework: framework.into(), version: version.into(), path: path.into(), ..Default::default() }
    }
}

/// What a handoff is predicted to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PredictedOutcome {
    /// The target will view the source's memory; `note` says what to watch for (a writable view
    /// of read-only memory, a zero-size tensor that has no storage).
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

    /// The form stored on a [`crate::report::ShareReport`].
    pub fn to_prediction(&self) -> Prediction {
        Prediction { verdict: self.verdict(), reason: self.reason().map(str::to_string) }
    }
}

fn fail(reason: impl Into<String>, expected: Option<&str>, fix: impl Into<String>) -> PredictedOutcome {
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
fn at_least(version: &str, min: (u64, u64, u64)) -> bool {
    parse_version(version).is_none_or(|v| v >= min)
}

/// The path `auto` resolves to, as `gpushare.paths.resolve_auto` does.
pub fn resolve_path<'a>(source_framework: &str, target: &str, path: &'a str) -> &'a str {
    if path != "auto" {
        return path;
    }
    if source_framework == "numba" || target == "numba" {
        "cai"
    } else if target == "tf" {
        "capsule"
    } else {
        "dlpack"
    }
}

/// Paths [`predict`] models; for others it falls back to the rules of `dlpack`.
pub const MODELLED_PATHS: &[&str] = &["auto", "dlpack", "capsule", "cai", "host", "pinned", "copy"];

/// Splits a dtype name into its base and lanes: `float4_e2m1fnx2` → (`float4_e2m1fn`, 2).
fn base_and_lanes(dtype: &str) -> (&str, u32) {
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
const STANDARD_DTYPES: &[&str] = &[
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32",
    "float64", "complex64", "complex128",
];
const TORCH_EXTRA: &[&str] = &[
    "bfloat16", "complex32", "float8_e5m2", "float8_e5m2fnuz", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e8m0fnu",
];
const JAX_EXTRA: &[&str] = &[
    "bfloat16", "float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz", "float8_e4m3fn", "float8_e4m3fnuz",
    "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu",
];

/// Rule 9: a dtype the target cannot import, with the framework's words for it.
fn dtype_gap(target: &TargetFacts, dtype: &str) -> Option<PredictedOutcome> {
    let (base, lanes) = base_and_lanes(dtype);
    let standard = STANDARD_DTYPES.contains(&base);
    let fix = "cast to a dtype both frameworks have (e.g. float32) before sharing";
    let (supported, expected, who) = match target.framework.as_str() {
        // torch takes fp4 only as packed pairs (lanes = 2), and nothing else with lanes ≠ 1.
        "torch" => (
            (lanes == 1 && (standard || TORCH_EXTRA.contains(&base))) || (base == "float4_e2m1fn" && lanes == 2),
            "Unsupported",
            "PyTorch",
        ),
        "jax" => (lanes == 1 && (standard || JAX_EXTRA.contains(&base)), "DLPack", "JAX"),
        "tf" => (
            // TF imports bool since kDLBool exists (older TF exported bool as uint8); no float8 or fp4.
            lanes == 1 && (standard || base == "bfloat16"),
            "Unsupported Type Codes",
            "TensorFlow",
        ),
        // NumPy has no bfloat16 or float8 of its own (ml_dtypes' are not DLPack-registered in 2.x).
        "numpy" => (lanes == 1 && standard, "Unsupported dtype in DLTensor", "NumPy"),
        // CuPy: no float8 or complex32; bfloat16 through ml_dtypes.
        "cupy" => (lanes == 1 && (standard || base == "bfloat16"), "", "CuPy"),
        // __cuda_array_interface__ typestrs have no bfloat16 or float8.
        "numba" => (lanes == 1 && standard, "", "Numba"),
        _ => (true, "", ""),
    };
    if supported {
        return None;
    }
    let expected = (!expected.is_empty()).then_some(expected);
    Some(fail(format!("{who} cannot import dtype {dtype} over DLPack"), expected, fix))
}

/// Rule 4: DLPack device types each consumer imports.
fn device_gap(source: &TensorReport, target: &TargetFacts) -> Option<PredictedOutcome> {
    let (dev, _) = source.dlpack_device;
    let name = &source.dlpack_device_name;
    let host_fix = "copy to plain device or host memory first";
    match target.framework.as_str() {
        // DLConvertor: CPU, CUDA, ROCm, Metal (MPS), oneAPI (XPU), MAIA; not pinned host (3) or managed (13).
        "torch" if !matches!(dev, 1 | 2 | 8 | 10 | 14 | 17) => Some(fail(
            format!("PyTorch does not import DLPack device {name} (kDLCUDAHost and kDLCUDAManaged included)"),
            Some("Unsupported device_type"),
            host_fix,
        )),
        // JAX imports CPU, CUDA, ROCm and pinned host; managed memory (13) raises a TypeError.
        "jax" if !matches!(dev, 1 | 2 | 3 | 10) => Some(fail(
            format!("JAX does not import DLPack device {name}"),
            Some("unsupported device type"),
            host_fix,
        )),
        "tf" if !matches!(dev, 1 | 2) => Some(fail(
            format!("TensorFlow maps only kDLCPU and kDLCUDA to its devices, not {name}"),
            None,
            host_fix,
        )),
        "numpy" if !is_host_accessible(dev) => Some(fail(
            format!("NumPy cannot address {name} memory"),
            Some("Unsupported device in DLTensor"),
            "copy to the host first (path='host', or x.cpu() / cupy.asnumpy(x))",
        )),
        "cupy" if dev == 1 => Some(fail(
            "CuPy imports device memory only; the source is on the CPU",
            Some("CPU arrays cannot be directly imported to CuPy"),
            "cupy.asarray(x) copies it to the GPU",
        )),
        "cupy" if !matches!(dev, 2 | 3 | 10 | 13) => {
            Some(fail(format!("CuPy does not import DLPack device {name}"), None, host_fix))
        }
        _ => None,
    }
}

/// Rule 3: layouts the consumer cannot express, computed from shape and strides, for the import the
/// path uses (`dlpack`/`capsule`: the consumer's DLPack import; `cai`: its `__cuda_array_interface__`
/// import, where only JAX checks the layout).
fn layout_gap(source: &TensorReport, target: &TargetFacts, path: &str) -> Option<PredictedOutcome> {
    let (shape, strides) = (&source.shape, &source.strides);
    let contiguous_fix = "make it contiguous first: x.contiguous() (torch), numpy.ascontiguousarray(x)";
    let what = || {
        if has_zero_stride(shape, strides) {
            "a zero stride (broadcast)"
        } else if has_negative_stride(shape, strides) {
            "a negative stride"
        } else {
            "a strided view"
        }
    };
    if path == "cai" {
        // torch.as_tensor, cupy.asarray and numba.cuda.as_cuda_array take any strides. JAX's
        // jnp.asarray builds its view in jaxlib's CudaArrayInterfaceToBuffer, which accepts only a
        // permutation of a compact layout (transposes included, on every version; size-0 and size-1
        // dimensions are skipped) and raises otherwise: it never falls back to a copy. Seen on an
        // H200 with jax 0.11.2: Numba's x[1:3, 2:] raised "Only arrays with trivial (compact)
        // striding are supported".
        if target.framework != "jax" || shape.contains(&0) {
            return None;
        }
        let ok = !has_zero_stride(shape, strides) && is_permuted_compact(shape, strides);
        return (!ok).then(|| {
            fail(
                format!(
                    "jnp.asarray views a __cuda_array_interface__ only when its strides are compact or a transpose of compact, not {} (shape {shape:?}, strides {strides:?}); it raises rather than copying",
                    what()
                ),
                Some("trivial (compact) striding"),
                "make it contiguous first: x.contiguous() (torch), cupy.ascontiguousarray(x) (CuPy), or copy a Numba view into a cuda.device_array of its shape",
            )
        });
    }
    match target.framework.as_str() {
        "tf" if !is_c_contiguous(shape, strides) => Some(fail(
            format!("TensorFlow imports only compact row-major tensors (shape {shape:?}, strides {strides:?})"),
            Some("Invalid strides array from DLPack"),
            contiguous_fix,
        )),
        "tf" if source.byte_offset != 0 => Some(fail(
            format!("TensorFlow refuses a non-zero DLPack byte_offset ({})", source.byte_offset),
            Some("Unsupported byte_offset"),
            "make a contiguous copy first",
        )),
        // Zero-size tensors skip JAX's check, as they do in jaxlib's StridesToLayout.
        "jax" if !shape.contains(&0) => {
            // Transposes are accepted since JAX 0.8.0; before, only C order.
            let ok = if at_least(&target.version, (0, 8, 0)) {
                !has_zero_stride(shape, strides) && is_permuted_compact(shape, strides)
            } else {
                is_c_contiguous(shape, strides)
            };
            (!ok).then(|| {
                fail(
                    format!(
                        "JAX imports only compact layouts or their transposes, not {} (shape {shape:?}, strides {strides:?}); copy=True does not help: the check comes first",
                        what()
                    ),
                    Some("Only DLPack tensors with trivial (compact) striding are supported"),
                    contiguous_fix,
                )
            })
        }
        _ => None,
    }
}

/// Rules 5–7: the producer refuses what the consumer asks of it, or the capsule generation or
/// path does not fit the pair.
fn producer_or_path_gap(source: &TensorReport, target: &TargetFacts, path: &str) -> Option<PredictedOutcome> {
    let src = source.framework.as_str();
    let dst = target.framework.as_str();
    let on_cuda = source.dlpack_device.0 == 2;
    match path {
        "capsule" => {
            if matches!(dst, "jax" | "numpy") {
                return Some(fail(
                    format!("{dst} does not import raw DLPack capsules (JAX removed it in 0.7.2; NumPy never did)"),
                    None,
                    "use path='dlpack'",
                ));
            }
            if src == "numba" {
                return Some(fail("Numba device arrays have no __dlpack__", None, "use path='cai'"));
            }
        }
        "dlpack" => {
            if dst == "tf" {
                return Some(fail(
                    "TensorFlow's from_dlpack takes legacy capsules only",
                    None,
                    "use path='capsule' (auto does)",
                ));
            }
            if src == "numba" || dst == "numba" {
                return Some(fail("Numba speaks __cuda_array_interface__, not DLPack", None, "use path='cai'"));
            }
        }
        "cai" => {
            if matches!(src, "numpy" | "tf") {
                return Some(fail(
                    format!("{src} arrays do not expose __cuda_array_interface__"),
                    None,
                    "use path='dlpack'",
                ));
            }
            if matches!(dst, "numpy" | "tf") {
                return Some(fail(
                    format!("{dst} does not import __cuda_array_interface__"),
                    None,
                    "use path='dlpack' or 'capsule'",
                ));
            }
            if !on_cuda {
                return Some(fail(
                    format!("__cuda_array_interface__ describes CUDA memory only; the source is on {}", source.dlpack_device_name),
                    Some("cuda_array_interface"),
                    "use path='dlpack'",
                ));
            }
            if base_and_lanes(&source.dtype).0 == "bfloat16" || source.dtype.starts_with("float8") {
                return Some(fail(
                    format!("__cuda_array_interface__ has no typestr for {}", source.dtype),
                    None,
                    "use path='dlpack'",
                ));
            }
        }
        _ => {}
    }
    // Which capsule generation the producer is asked for: consumers that pass max_version get a
    // versioned one (torch, NumPy, CuPy on the dlpack path); JAX calls __dlpack__ without it, and
    // explicit capsules (the capsule path, TF) are legacy.
    let versioned_request = path == "dlpack" && matches!(dst, "torch" | "numpy" | "cupy");
    // Rule 6: NumPy will not export a read-only array through a legacy capsule, which cannot say
    // read-only; NumPy before 2.1 has no versioned export at all.
    if src == "numpy" && source.readonly && path != "cai" {
        let numpy_versioned = at_least(&target.settings.source_version, (2, 1, 0));
        if !versioned_request || !numpy_versioned {
            return Some(fail(
                format!(
                    "the NumPy array is read-only and {} asks for a legacy capsule, which cannot carry the read-only flag",
                    if path == "capsule" { "the capsule path" } else { dst }
                ),
                Some("Cannot export readonly array"),
                "share a writable copy (x.copy()), or use path='dlpack' into a consumer that asks for versioned capsules (torch, NumPy)",
            ));
        }
    }
    // Rule 5: TF's __dlpack__ takes stream=None only; torch and CuPy pass a stream for CUDA tensors.
    if src == "tf" && on_cuda && path == "dlpack" && matches!(dst, "torch" | "cupy") {
        return Some(fail(
            format!("TensorFlow's __dlpack__ refuses the CUDA stream that {dst} passes"),
            Some("non-None stream"),
            "use path='capsule' (tf.experimental.dlpack.to_dlpack)",
        ));
    }
    // Rule 5: CuPy under CUPY_CUDA_PER_THREAD_DEFAULT_STREAM passes stream=2, which torch refuses.
    if src == "torch" && dst == "cupy" && path == "dlpack" && target.settings.cupy_ptds {
        return Some(fail(
            "CuPy runs on the per-thread default stream (stream=2), which PyTorch's __dlpack__ refuses",
            Some("per-thread default stream is not supported"),
            "unset CUPY_CUDA_PER_THREAD_DEFAULT_STREAM, or use path='cai'",
        ));
    }
    // Rule 7: torch exports only from its current CUDA device; CuPy switches device first, others do not.
    if src == "torch"
        && on_cuda
        && path != "cai"
        && dst != "cupy"
        && let Some(current) = target.settings.source_current_device
        && current != source.dlpack_device.1
    {
        return Some(fail(
            format!(
                "the torch tensor is on cuda:{} but torch's current device is cuda:{current}",
                source.dlpack_device.1
            ),
            Some("different CUDA device index"),
            "wrap the share in `with torch.cuda.device(x.device):` or call torch.cuda.set_device first",
        ));
    }
    None
}

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
    if source.numel() == 0 {
        return PredictedOutcome::Shared { note: Some("zero-size: there is no storage to share or copy".into()) };
    }
    PredictedOutcome::Copied {
        reason: "path 'host' copies through NumPy on the host by design (the naive route, for comparison)".into(),
    }
}

/// The `copy` and `pinned` paths: gpushare copies the source into a SharedBuffer of the same dtype,
/// shape and strides, then hands that buffer to the target by DLPack (a legacy capsule into
/// TensorFlow, `__cuda_array_interface__` into Numba). The target's device, dtype and layout rules
/// apply to the buffer as they would to the source; the producer is gpushare, which refuses nothing.
fn predict_staged(source: &TensorReport, target: &TargetFacts, path: &str) -> PredictedOutcome {
    let buffer = TensorReport { framework: "gpushare".into(), readonly: false, byte_offset: 0, ..source.clone() };
    let import = match target.framework.as_str() {
        "tf" => "capsule",
        "numba" => "cai",
        _ => "dlpack",
    };
    let checks = [
        producer_or_path_gap(&buffer, target, import),
        device_gap(&buffer, target),
        dtype_gap(target, &buffer.dtype),
        layout_gap(&buffer, target, import),
    ];
    if let Some(f) = checks.into_iter().flatten().next() {
        return f;
    }
    if source.numel() == 0 {
        return PredictedOutcome::Shared { note: Some("zero-size: there is no storage to share or copy".into()) };
    }
    PredictedOutcome::Copied {
        reason: format!("path '{path}' copies the data into a gpushare SharedBuffer by design, then hands it over without a second copy"),
    }
}

/// Predicts what handing `source` to `target` will do, from the rules of dlpack-matrix.md §4.
///
/// Failures are checked first, because a framework that fails never gets to copy: the crash-class
/// refusal ([`refuse`]), then the path and the producer (rules 5–7: capsule generation, read-only
/// export, streams, device index), the device type (rule 4), the dtype (rule 9), and the layout
/// (rule 3; on the `cai` path only JAX checks it, and raises rather than copying). Then a zero-size
/// tensor is shared (rule 10: there is no storage to copy). Then the copies, in the order of §4:
/// JAX's x64 narrowing (rule 1), which fails instead on a GPU source that is not 16-byte aligned (the
/// narrowing is an XLA kernel, and XLA's GPU kernels check their inputs' alignment) and does not
/// happen at all on the `cai` path (jnp.asarray keeps the dtype); XLA CPU's 64-byte alignment
/// (rule 2); paths that copy by design. Whatever remains is shared, with notes: the target can write
/// to memory the source holds read-only (rule 6), a GPU array JAX shares but cannot compute with
/// (not 16-byte aligned), a 64-bit dtype JAX keeps with x64 off, a broadcast view Numba will
/// misdescribe.
pub fn predict(source: &TensorReport, target: &TargetFacts) -> PredictedOutcome {
    let dst = target.framework.as_str();
    let path = resolve_path(&source.framework, dst, &target.path);

    if let Some(r) = refuse(source, dst) {
        // On the versions that no longer abort (2.15 raises "Storage size calculation overflowed"),
        // the refusal still predicts the right verdict: failed.
        return PredictedOutcome::Failed {
            reason: format!("{}; gpushare refuses it before calling {dst}", r.reason),
            expected_error: None,
            fix: r.fix,
        };
    }

    match path {
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
    if let Some(f) = device_gap(source, target) {
        return f;
    }
    if let Some(f) = dtype_gap(target, &source.dtype) {
        return f;
    }
    if let Some(f) = layout_gap(source, target, path) {
        return f;
    }

    if source.numel() == 0 {
        return PredictedOutcome::Shared {
            note: Some("zero-size: there is no storage to share or copy".into()),
        };
    }

    let mut notes: Vec<String> = Vec::new();
    if dst == "jax" {
        // Rule 1: with x64 off JAX converts 64-bit arrays to new 32-bit buffers after import (jax#11895).
        let narrowed = match source.dtype.as_str() {
            "int64" => Some("int32"),
            "uint64" => Some("uint32"),
            "float64" => Some("float32"),
            "complex128" => Some("complex64"),
            _ => None,
        }
        .filter(|_| !target.settings.jax_x64);
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

    // Rule 6: torch, CuPy and Numba import writable views and ignore READ_ONLY.
    if source.readonly && matches!(dst, "torch" | "cupy" | "numba") {
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

#[cfg(test)]
mod predict_tests {
    //! One test per rule of dlpack-matrix.md §4 that `predict` encodes, plus the order between them.
    use super::*;

    fn src(framework: &str, dtype: &str, ptr: u64, shape: Vec<i64>, strides: Vec<i64>) -> TensorReport {
        let numel: u64 = shape.iter().map(|d| *d as u64).product();
        TensorReport {
            framework: framework.into(),
            dtype: dtype.into(),
            shape,
            strides,
            device: "cpu".into(),
            dlpack_device: (1, 0),
            dlpack_device_name: "cpu:0".into(),
            data_ptr: ptr,
            byte_offset: 0,
            nbytes: numel * 4,
            span: (ptr, ptr + numel * 4),
            contiguous: true,
            alignment: crate::dlpack::alignment_of(ptr),
            readonly: matches!(framework, "jax" | "tf"),
            dlpack_version: None,
            cuda: None,
        }
    }

    fn f32(framework: &str, ptr: u64) -> TensorReport {
        src(framework, "float32", ptr, vec![4, 6], vec![6, 1])
    }

    fn to(framework: &str) -> TargetFacts {
        TargetFacts::new(framework, "", "auto")
    }

    fn on_cuda(mut t: TensorReport, id: i32) -> TensorReport {
        t.dlpack_device = (2, id);
        t.dlpack_device_name = format!("cuda:{id}");
        t
    }

    #[test]
    fn plain_compact_aligned_shares_everywhere() {
        for s in ["torch", "numpy", "jax", "tf"] {
            for d in ["torch", "numpy", "jax", "tf"] {
                if s != d {
                    assert_eq!(predict(&f32(s, 0x10000), &to(d)).verdict(), Verdict::Shared, "{s}→{d}");
                }
            }
        }
    }

    #[test]
    fn rule1_jax_x64_narrows_64_bit_types() {
        for (dtype, narrow) in [("int64", "int32"), ("uint64", "uint32"), ("float64", "float32"), ("complex128", "complex64")] {
            let t = src("torch", dtype, 0x10000, vec![8], vec![1]);
            let p = predict(&t, &to("jax"));
            assert_eq!(p.verdict(), Verdict::Copied);
            assert!(p.reason().unwrap().contains(narrow) && p.reason().unwrap().contains("jax_enable_x64"));
            let mut x64 = to("jax");
            x64.settings.jax_x64 = true;
            assert_eq!(predict(&t, &x64).verdict(), Verdict::Shared, "{dtype} with x64 on");
        }
        assert_eq!(predict(&src("torch", "int32", 0x10000, vec![8], vec![1]), &to("jax")).verdict(), Verdict::Shared);
        // Only JAX narrows.
        assert_eq!(predict(&src("torch", "float64", 0x10000, vec![8], vec![1]), &to("tf")).verdict(), Verdict::Shared);
    }

    #[test]
    fn rule2_jax_cpu_alignment_copies_unaligned_host_memory_only() {
        let p = predict(&f32("numpy", 0x10004), &to("jax"));
        assert_eq!(p.verdict(), Verdict::Copied);
        assert!(p.reason().unwrap().contains("64-byte aligned"));
        assert_eq!(predict(&f32("numpy", 0x10040), &to("jax")).verdict(), Verdict::Shared);
        // The GPU client has no alignment check: the pointer is aliased.
        assert_eq!(predict(&on_cuda(f32("torch", 0x10004), 0), &to("jax")).verdict(), Verdict::Shared);
        // Other consumers alias unaligned memory.
        assert_eq!(predict(&f32("numpy", 0x10004), &to("torch")).verdict(), Verdict::Shared);
        assert_eq!(predict(&f32("numpy", 0x10004), &to("tf")).verdict(), Verdict::Shared);
        // x64 comes first when both apply.
        let both = src("numpy", "float64", 0x10008, vec![8], vec![1]);
        assert!(predict(&both, &to("jax")).reason().unwrap().contains("jax_enable_x64"));
    }

    #[test]
    fn rule3_layouts() {
        let transposed = src("torch", "float32", 0x10000, vec![6, 4], vec![1, 6]);
        let sliced = src("torch", "float32", 0x10020, vec![2, 4], vec![6, 1]);
        let broadcast = src("torch", "float32", 0x10000, vec![4, 6], vec![0, 1]);
        let reversed = src("numpy", "float32", 0x10000, vec![4, 6], vec![6, -1]);
        // TF: compact C order only.
        for t in [&transposed, &sliced, &broadcast, &reversed] {
            let p = predict(t, &to("tf"));
            assert_eq!(p.expected_error(), Some("Invalid strides array from DLPack"), "{t:?}");
        }
        // JAX: permutations of compact only, never a zero or negative stride.
        assert_eq!(predict(&transposed, &to("jax")).verdict(), Verdict::Shared);
        for t in [&sliced, &broadcast, &reversed] {
            let p = predict(t, &to("jax"));
            assert_eq!(p.verdict(), Verdict::Failed);
            assert!(p.expected_error().unwrap().contains("trivial (compact) striding"));
        }
        assert!(predict(&broadcast, &to("jax")).reason().unwrap().contains("zero stride"));
        // Before JAX 0.8.0 transposes failed too.
        assert_eq!(predict(&transposed, &TargetFacts::new("jax", "0.7.1", "dlpack")).verdict(), Verdict::Failed);
        assert_eq!(predict(&transposed, &TargetFacts::new("jax", "0.10.2", "dlpack")).verdict(), Verdict::Shared);
        // torch and NumPy take any non-negative strides.
        for t in [&transposed, &sliced, &broadcast] {
            assert_eq!(predict(t, &to("torch")).verdict(), Verdict::Shared);
            assert_eq!(predict(t, &to("numpy")).verdict(), Verdict::Shared);
        }
        assert_eq!(predict(&reversed, &to("numpy")).verdict(), Verdict::Shared);
        // A non-zero byte_offset is refused by TF.
        let mut offset = f32("torch", 0x10000);
        offset.byte_offset = 16;
        assert_eq!(predict(&offset, &to("tf")).expected_error(), Some("Unsupported byte_offset"));
        // Zero-size tensors skip the stride checks.
        let empty = src("torch", "float32", 0, vec![0, 3], vec![1, 0]);
        assert_eq!(predict(&empty, &to("jax")).verdict(), Verdict::Shared);
        assert_eq!(predict(&empty, &to("tf")).verdict(), Verdict::Shared);
    }

    #[test]
    fn rule3_negative_strides_into_torch_are_refused_and_predicted_failed() {
        let reversed = src("numpy", "float32", 0x10000, vec![4, 6], vec![6, -1]);
        assert!(refuse(&reversed, "torch").is_some());
        let p = predict(&reversed, &to("torch"));
        assert_eq!(p.verdict(), Verdict::Failed);
        assert!(p.reason().unwrap().contains("188023") && p.fix().unwrap().contains("ascontiguousarray"));
        // Refused ⇒ predicted failed, for every target and path.
        for d in ["torch", "numpy", "jax", "tf", "cupy"] {
            for path in ["auto", "dlpack", "capsule", "cai"] {
                if refuse(&reversed, d).is_some() {
                    assert_eq!(predict(&reversed, &TargetFacts::new(d, "", path)).verdict(), Verdict::Failed);
                }
            }
        }
        // Only crash-class inputs are refused: TF and JAX raise cleanly on bad strides.
        assert!(refuse(&reversed, "tf").is_none() && refuse(&reversed, "jax").is_none());
    }

    #[test]
    fn rule4_device_types() {
        let mut managed = f32("cupy", 0x10000);
        managed.dlpack_device = (13, 0);
        managed.dlpack_device_name = "cuda_managed:0".into();
        assert_eq!(predict(&managed, &to("torch")).expected_error(), Some("Unsupported device_type"));
        assert_eq!(predict(&managed, &to("jax")).expected_error(), Some("unsupported device type"));
        assert_eq!(predict(&managed, &to("numpy")).verdict(), Verdict::Shared); // host-accessible
        let mut pinned = f32("jax", 0x10000);
        pinned.dlpack_device = (3, 0);
        assert_eq!(predict(&pinned, &to("torch")).verdict(), Verdict::Failed);
        let cpu = f32("numpy", 0x10000);
        assert_eq!(
            predict(&cpu, &to("cupy")).expected_error(),
            Some("CPU arrays cannot be directly imported to CuPy")
        );
        let gpu = on_cuda(f32("torch", 0x10000), 0);
        assert_eq!(predict(&gpu, &to("numpy")).expected_error(), Some("Unsupported device in DLTensor"));
        assert_eq!(predict(&gpu, &to("cupy")).verdict(), Verdict::Shared);
        assert_eq!(predict(&gpu, &to("tf")).verdict(), Verdict::Shared);
    }

    #[test]
    fn rule5_producer_refuses_a_consumer_kwarg() {
        let tf_gpu = on_cuda(f32("tf", 0x10000), 0);
        let p = predict(&tf_gpu, &TargetFacts::new("torch", "", "dlpack"));
        assert_eq!(p.expected_error(), Some("non-None stream"));
        assert!(p.fix().unwrap().contains("capsule"));
        assert_eq!(predict(&tf_gpu, &TargetFacts::new("torch", "", "capsule")).verdict(), Verdict::Shared);
        assert_eq!(predict(&tf_gpu, &to("jax")).verdict(), Verdict::Shared); // JAX passes stream=None for TF
        // CuPy under PTDS passes stream=2, which torch refuses.
        let torch_gpu = on_cuda(f32("torch", 0x10000), 0);
        let mut ptds = to("cupy");
        ptds.settings.cupy_ptds = true;
        assert_eq!(predict(&torch_gpu, &ptds).expected_error(), Some("per-thread default stream is not supported"));
        assert_eq!(predict(&torch_gpu, &to("cupy")).verdict(), Verdict::Shared);
        // TF on the CPU takes stream=None, so torch ← TF works there.
        assert_eq!(predict(&f32("tf", 0x10000), &to("torch")).verdict(), Verdict::Shared);
    }

    #[test]
    fn rule6_capsule_generation_and_read_only() {
        let mut ro = f32("numpy", 0x10000);
        ro.readonly = true;
        // torch asks for a versioned capsule, gets READ_ONLY, and drops it.
        let p = predict(&ro, &to("torch"));
        assert_eq!(p.verdict(), Verdict::Shared);
        assert!(p.reason().unwrap().contains("can mutate a read-only source"));
        // JAX (no max_version) and the capsule path (TF) ask for a legacy capsule: NumPy refuses.
        for facts in [to("jax"), to("tf"), TargetFacts::new("torch", "", "capsule")] {
            let p = predict(&ro, &facts);
            assert_eq!(p.expected_error(), Some("Cannot export readonly array"), "{facts:?}");
        }
        // NumPy before 2.1 has no versioned export at all.
        let mut old = to("torch");
        old.settings.source_version = "2.0.2".into();
        assert_eq!(predict(&ro, &old).verdict(), Verdict::Failed);
        // Immutable JAX/TF memory imported writable by torch: shared, with the warning; NumPy imports it read-only.
        assert!(predict(&f32("jax", 0x10000), &to("torch")).reason().unwrap().contains("mutate"));
        assert_eq!(predict(&f32("jax", 0x10000), &to("numpy")).reason(), None);
        // Path generation: JAX and NumPy take no raw capsules, TF nothing else.
        assert_eq!(predict(&f32("torch", 0x10000), &TargetFacts::new("jax", "", "capsule")).verdict(), Verdict::Failed);
        assert_eq!(predict(&f32("torch", 0x10000), &TargetFacts::new("tf", "", "dlpack")).verdict(), Verdict::Failed);
    }

    #[test]
    fn rule7_torch_exports_only_from_its_current_device() {
        let t = on_cuda(f32("torch", 0x10000), 1);
        let mut facts = to("jax");
        facts.settings.source_current_device = Some(0);
        assert_eq!(predict(&t, &facts).expected_error(), Some("different CUDA device index"));
        facts.settings.source_current_device = Some(1);
        assert_eq!(predict(&t, &facts).verdict(), Verdict::Shared);
        let mut cupy = to("cupy");
        cupy.settings.source_current_device = Some(0);
        assert_eq!(predict(&t, &cupy).verdict(), Verdict::Shared); // CuPy switches device first
    }

    #[test]
    fn rule9_dtype_gaps() {
        let bf16 = src("torch", "bfloat16", 0x10000, vec![8], vec![1]);
        assert_eq!(predict(&bf16, &to("numpy")).expected_error(), Some("Unsupported dtype in DLTensor"));
        for d in ["jax", "tf"] {
            assert_eq!(predict(&bf16, &to(d)).verdict(), Verdict::Shared, "{d}");
        }
        let f8 = src("torch", "float8_e4m3fn", 0x10000, vec![8], vec![1]);
        assert_eq!(predict(&f8, &to("tf")).expected_error(), Some("Unsupported Type Codes"));
        assert_eq!(predict(&f8, &to("jax")).verdict(), Verdict::Shared);
        let e3m4 = src("jax", "float8_e3m4", 0x10000, vec![8], vec![1]);
        assert_eq!(predict(&e3m4, &to("torch")).verdict(), Verdict::Failed);
        // fp4: torch takes packed pairs only, JAX single lanes only.
        let fp4_1 = src("jax", "float4_e2m1fn", 0x10000, vec![8], vec![1]);
        assert_eq!(predict(&fp4_1, &to("torch")).verdict(), Verdict::Failed);
        let fp4_2 = src("torch", "float4_e2m1fnx2", 0x10000, vec![8], vec![1]);
        assert_eq!(predict(&fp4_2, &to("jax")).verdict(), Verdict::Failed);
        let c32 = src("torch", "complex32", 0x10000, vec![8], vec![1]);
        for d in ["numpy", "jax", "tf"] {
            assert_eq!(predict(&c32, &to(d)).verdict(), Verdict::Failed, "{d}");
        }
        // The standard dtypes pass everywhere (checked against the installed frameworks by the
        // conformance matrix).
        for dt in STANDARD_DTYPES {
            let t = src("torch", dt, 0x10000, vec![8], vec![1]);
            for d in ["numpy", "tf"] {
                assert_eq!(predict(&t, &to(d)).verdict(), Verdict::Shared, "{dt} → {d}");
            }
        }
    }

    #[test]
    fn rule10_empty_and_zero_d() {
        // An empty tensor (null pointer included) is "no storage", not a copy, even where JAX would narrow.
        let empty = src("torch", "int64", 0, vec![0], vec![1]);
        let p = predict(&empty, &to("jax"));
        assert_eq!(p.verdict(), Verdict::Shared);
        assert!(p.reason().unwrap().contains("zero-size"));
        // A failure still wins over "empty".
        let empty_bf16 = src("torch", "bfloat16", 0, vec![0, 3], vec![3, 1]);
        assert_eq!(predict(&empty_bf16, &to("numpy")).verdict(), Verdict::Failed);
        // 0-d: shared unless a copy rule applies (an unaligned NumPy scalar into JAX).
        let scalar = src("numpy", "float32", 0x10000, vec![], vec![]);
        assert_eq!(predict(&scalar, &to("tf")).verdict(), Verdict::Shared);
        let unaligned = src("numpy", "float32", 0x10010, vec![], vec![]);
        assert_eq!(predict(&unaligned, &to("jax")).verdict(), Verdict::Copied);
    }

    #[test]
    fn failures_come_before_copies() {
        // An int64 transpose-of-a-slice into JAX fails on strides; it never reaches the x64 copy.
        let t = src("torch", "int64", 0x10008, vec![2, 4], vec![6, 1]);
        assert_eq!(predict(&t, &to("jax")).verdict(), Verdict::Failed);
    }

    #[test]
    fn paths() {
        assert_eq!(resolve_path("torch", "tf", "auto"), "capsule");
        assert_eq!(resolve_path("torch", "jax", "auto"), "dlpack");
        assert_eq!(resolve_path("numba", "torch", "auto"), "cai");
        let gpu = on_cuda(f32("torch", 0x10000), 0);
        assert_eq!(predict(&gpu, &TargetFacts::new("numba", "", "auto")).verdict(), Verdict::Shared);
        assert_eq!(predict(&f32("torch", 0x10000), &TargetFacts::new("cupy", "", "cai")).verdict(), Verdict::Failed);
        assert_eq!(predict(&f32("numpy", 0x10000), &TargetFacts::new("torch", "", "cai")).verdict(), Verdict::Failed);
        let bf16 = on_cuda(src("torch", "bfloat16", 0x10000, vec![8], vec![1]), 0);
        assert_eq!(predict(&bf16, &TargetFacts::new("cupy", "", "cai")).verdict(), Verdict::Failed);
        assert_eq!(predict(&gpu, &TargetFacts::new("jax", "", "pinned")).verdict(), Verdict::Copied);
        let mut no_cuda = TargetFacts::new("jax", "", "pinned");
        no_cuda.settings.cuda_available = Some(false);
        assert_eq!(predict(&f32("torch", 0x10000), &no_cuda).verdict(), Verdict::Failed);
        assert_eq!(predict(&gpu, &TargetFacts::new("numpy", "", "host")).verdict(), Verdict::Copied);
        assert_eq!(predict(&f32("torch", 0x10000), &TargetFacts::new("jax", "", "host")).verdict(), Verdict::Copied);
        // host: only dtypes NumPy cannot carry between the two fail.
        let bf16 = src("torch", "bfloat16", 0x10000, vec![8], vec![1]);
        assert_eq!(predict(&bf16, &TargetFacts::new("jax", "", "host")).expected_error(), Some("unsupported ScalarType"));
        let jax_bf16 = src("jax", "bfloat16", 0x10000, vec![8], vec![1]);
        assert_eq!(predict(&jax_bf16, &TargetFacts::new("tf", "", "host")).verdict(), Verdict::Copied);
        assert_eq!(predict(&jax_bf16, &TargetFacts::new("torch", "", "host")).verdict(), Verdict::Failed);
        // copy keeps the layout, so the target's layout rules still apply; the buffer is no read-only NumPy array.
        let broadcast = src("torch", "float32", 0x10000, vec![4, 6], vec![0, 1]);
        assert_eq!(predict(&broadcast, &TargetFacts::new("jax", "", "copy")).verdict(), Verdict::Failed);
        assert_eq!(predict(&broadcast, &TargetFacts::new("numpy", "", "copy")).verdict(), Verdict::Copied);
        let mut ro = f32("numpy", 0x10000);
        ro.readonly = true;
        assert_eq!(predict(&ro, &TargetFacts::new("jax", "", "copy")).verdict(), Verdict::Copied);
        assert_eq!(predict(&bf16, &TargetFacts::new("numpy", "", "copy")).verdict(), Verdict::Failed);
    }

    #[test]
    fn gpu_jax_narrowing_fails_on_memory_xla_kernels_cannot_take() {
        // H200, jax 0.11.2, x64 off: torch/CuPy `x.ravel()[1:]` of int64/uint64/float64 (8 bytes past
        // an allocation) failed with XLA's "Address of buffer 0 must be a multiple of 10" (hex 16)
        // from jit_convert_element_type; complex128 (16 bytes past) copied as usual.
        for dtype in ["int64", "uint64", "float64"] {
            for fw in ["torch", "cupy"] {
                let t = on_cuda(src(fw, dtype, 0x7f00_0000_0208, vec![23], vec![1]), 0);
                let p = predict(&t, &to("jax"));
                assert_eq!(p.verdict(), Verdict::Failed, "{fw} {dtype}");
                assert_eq!(p.expected_error(), Some("Address of buffer"));
                assert!(p.reason().unwrap().contains("16-byte") && p.fix().unwrap().contains("clone()"));
                assert!(
                    "JaxRuntimeError: INTERNAL: Address of buffer 0 must be a multiple of 10, but was 0x7fd8ad000208 [executable_name='jit_convert_element_type']"
                        .contains(p.expected_error().unwrap())
                );
            }
        }
        let c128 = on_cuda(src("torch", "complex128", 0x7f00_0000_0210, vec![23], vec![1]), 0);
        assert!(predict(&c128, &to("jax")).reason().unwrap().contains("jax_enable_x64"));
        assert_eq!(predict(&c128, &to("jax")).verdict(), Verdict::Copied);
        // Aligned device memory narrows by copying, as before; so does the CPU, aligned or not (XLA's
        // CPU client copies unaligned memory on import, before it narrows).
        let aligned = on_cuda(src("torch", "int64", 0x7f00_0000_0200, vec![24], vec![1]), 0);
        assert_eq!(predict(&aligned, &to("jax")).verdict(), Verdict::Copied);
        let cpu = src("numpy", "int64", 0x10008, vec![23], vec![1]);
        assert!(predict(&cpu, &to("jax")).reason().unwrap().contains("jax_enable_x64"));
        // With x64 on nothing narrows: the import shares, with the warning that XLA cannot compute on it.
        let t = on_cuda(src("torch", "int64", 0x7f00_0000_0208, vec![23], vec![1]), 0);
        let mut x64 = to("jax");
        x64.settings.jax_x64 = true;
        let p = predict(&t, &x64);
        assert_eq!(p.verdict(), Verdict::Shared);
        assert!(p.reason().unwrap().contains("Address of buffer 0 must be a multiple of 10"));
        // Dtypes that do not narrow share on any address; the note says JAX cannot compute on them.
        let f = on_cuda(src("torch", "float32", 0x7f00_0000_0204, vec![23], vec![1]), 0);
        let p = predict(&f, &to("jax"));
        assert_eq!(p.verdict(), Verdict::Shared);
        assert!(p.reason().unwrap().contains("16-byte aligned"));
        assert_eq!(predict(&on_cuda(f32("torch", 0x10000), 0), &to("jax")).reason(), None);
    }

    #[test]
    fn cai_into_jax_keeps_64_bit_dtypes_and_raises_on_strides() {
        // H200, jax 0.11.2, x64 off: jnp.asarray of a Numba array shared int64/uint64/float64/complex128
        // (contiguous, 0-d, one element in) and raised on x[1:3, 2:] with "Only arrays with trivial
        // (compact) striding are supported" instead of copying.
        let numba = |dtype: &str, ptr: u64, shape: Vec<i64>, strides: Vec<i64>| on_cuda(src("numba", dtype, ptr, shape, strides), 0);
        for dtype in ["int64", "uint64", "float64", "complex128"] {
            for t in [
                numba(dtype, 0x7f00_0000_0200, vec![4, 6], vec![6, 1]),
                numba(dtype, 0x7f00_0000_0200, vec![], vec![]),
                numba(dtype, 0x7f00_0000_0208, vec![23], vec![1]),
            ] {
                let p = predict(&t, &to("jax"));
                assert_eq!(p.verdict(), Verdict::Shared, "{dtype} {t:?}");
                assert!(p.reason().unwrap().contains(&format!("JAX keeps {dtype}")));
            }
        }
        let said = "JaxRuntimeError: UNIMPLEMENTED: Only arrays with trivial (compact) striding are supported; i.e., arrays whose striding represents a transposition of the underlying buffer but not broadcasting.";
        for dtype in ["bool", "int8", "float32", "int64", "complex128"] {
            let sliced = numba(dtype, 0x7f00_0000_0220, vec![2, 4], vec![6, 1]);
            let p = predict(&sliced, &to("jax"));
            assert_eq!(p.verdict(), Verdict::Failed, "{dtype}");
            assert!(said.contains(p.expected_error().unwrap()));
            assert!(p.reason().unwrap().contains("raises rather than copying"));
        }
        // Transposes are views on every JAX version (jaxlib's CAI import sorts the strides); zero and
        // negative strides raise; zero-size arrays skip the check.
        let transposed = numba("float32", 0x7f00_0000_0200, vec![6, 4], vec![1, 6]);
        assert_eq!(predict(&transposed, &TargetFacts::new("jax", "0.7.1", "cai")).verdict(), Verdict::Shared);
        let broadcast = on_cuda(src("torch", "float32", 0x7f00_0000_0200, vec![4, 6], vec![0, 1]), 0);
        assert!(predict(&broadcast, &TargetFacts::new("jax", "", "cai")).reason().unwrap().contains("zero stride"));
        let reversed = on_cuda(src("cupy", "float32", 0x7f00_0000_0214, vec![4, 6], vec![6, -1]), 0);
        assert_eq!(predict(&reversed, &TargetFacts::new("jax", "", "cai")).verdict(), Verdict::Failed);
        let empty = numba("float32", 0, vec![0, 6], vec![6, 1]);
        assert_eq!(predict(&empty, &to("jax")).verdict(), Verdict::Shared);
        // Other CAI consumers take any strides.
        for d in ["torch", "cupy", "numba"] {
            assert_eq!(predict(&broadcast, &TargetFacts::new(d, "", "cai")).verdict(), Verdict::Shared, "{d}");
        }
        // The DLPack path still narrows the same Numba-like int64 (from torch, which has __dlpack__).
        let t = on_cuda(src("torch", "int64", 0x7f00_0000_0200, vec![4, 6], vec![6, 1]), 0);
        assert_eq!(predict(&t, &TargetFacts::new("jax", "", "dlpack")).verdict(), Verdict::Copied);
        assert_eq!(predict(&t, &TargetFacts::new("jax", "", "cai")).verdict(), Verdict::Shared);
    }

    #[test]
    fn broadcast_views_into_numba_share_with_a_warning() {
        // H200: torch `expand` and cupy.broadcast_to into Numba were judged "copied" only because
        // Numba's __cuda_array_interface__ reported them C-contiguous; the Numba array is a view.
        for fw in ["torch", "cupy"] {
            let b = on_cuda(src(fw, "float32", 0x7f00_0000_0200, vec![4, 6], vec![0, 1]), 0);
            let p = predict(&b, &to("numba"));
            assert_eq!(p.verdict(), Verdict::Shared);
            assert!(p.reason().unwrap().contains("C-contiguous"));
        }
        // Numba, like torch and CuPy, imports a read-only source writable.
        let mut jax = on_cuda(f32("jax", 0x7f00_0000_0200), 0);
        jax.readonly = true;
        assert!(predict(&jax, &to("numba")).reason().unwrap().contains("numba can mutate a read-only source"));
    }

    #[test]
    fn versions_parse() {
        assert_eq!(parse_version("2.15.0+cpu"), Some((2, 15, 0)));
        assert_eq!(parse_version("0.10.2"), Some((0, 10, 2)));
        assert_eq!(parse_version("2.21.0-rc1"), Some((2, 21, 0)));
        assert_eq!(parse_version("3"), Some((3, 0, 0)));
        assert_eq!(parse_version(""), None);
        assert!(at_least("", (9, 9, 9)));
        assert!(!at_least("0.7.9", (0, 8, 0)));
    }

    #[test]
    fn prediction_form() {
        let p = predict(&src("torch", "int64", 0x10000, vec![8], vec![1]), &to("jax")).to_prediction();
        assert_eq!(p.verdict, Verdict::Copied);
        assert!(p.reason.unwrap().contains("x64"));
        assert_eq!(base_and_lanes("float4_e2m1fnx2"), ("float4_e2m1fn", 2));
        assert_eq!(base_and_lanes("complex128"), ("complex128", 1));
        assert_eq!(base_and_lanes("int8x4"), ("int8", 4));
        assert_eq!(base_and_lanes("complex64"), ("complex64", 1));
        assert_eq!(base_and_lanes("complex64x2"), ("complex64", 2));
    }
}

// ------------------------------------------------------------------------------------------------
// Judgement after the fact
// ------------------------------------------------------------------------------------------------

/// The outcome of a handoff: verdict, the reason for a copy, and notes.
#[derive(Debug, Clone, PartialEq)]
pub struct Judgement {
    pub verdict: Verdict,
    pub reason: Option<String>,
    pub notes: Vec<String>,
}

fn same_address_space(a: &TensorReport, b: &TensorReport) -> bool {
    let (at, ai) = a.dlpack_device;
    let (bt, bi) = b.dlpack_device;
    (is_host_accessible(at) && is_host_accessible(bt)) || (at == bt && ai == bi)
}

/// CUDA allocation identity, when the driver described both pointers: same buffer id.
fn same_cuda_allocation(a: &TensorReport, b: &TensorReport) -> Option<bool> {
    let id = |t: &TensorReport| t.cuda.as_ref()?.get("buffer_id")?.as_u64().filter(|id| *id != 0);
    Some(id(a)? == id(b)?)
}

/// Decides from addresses and extents whether `target` lies inside `source`'s memory.
pub fn judge(source: &TensorReport, target: &TensorReport) -> Judgement {
    let mut notes = Vec::new();
    if !same_address_space(source, target) {
        return Judgement {
            verdict: Verdict::Copied,
            reason: Some(format!(
                "device changed: {} → {}",
                source.dlpack_device_name, target.dlpack_device_name
            )),
            notes,
        };
    }
    if source.numel() == 0 || target.numel() == 0 {
        notes.push("zero-size: there is no storage to share or copy".into());
        return Judgement { verdict: Verdict::Shared, reason: None, notes };
    }
    let inside = target.span.0 >= source.span.0 && target.span.1 <= source.span.1;
    // A copy is a new allocation, and a new allocation cannot overlap memory that is still alive: a
    // target whose bytes overlap the live source's views it, even where its description reaches
    // past the source's (a layout misreported by the target's exporter, or a target that reads
    // beyond the source). That is said in a note, not hidden behind "copied".
    let overlaps = target.span.0 < source.span.1 && source.span.0 < target.span.1;
    let (inside, overlaps) = match same_cuda_allocation(source, target) {
        Some(same) => (same && inside, same && overlaps),
        None => (inside, overlaps),
    };
    if inside || overlaps {
        if !inside {
            notes.push(overreach_note(source, target));
        }
        if source.readonly && !target.readonly {
            notes.push("the target can write to memory the source marks read-only".into());
        }
        return Judgement { verdict: Verdict::Shared, reason: None, notes };
    }
    Judgement { verdict: Verdict::Copied, reason: Some(copy_reason(source, target)), notes }
}

/// Why a target that views the source is described as reaching past the source's memory.
fn overreach_note(source: &TensorReport, target: &TensorReport) -> String {
    let past = target.span.1.saturating_sub(source.span.1) + source.span.0.saturating_sub(target.span.0);
    let mut note = format!(
        "the target views the source's memory, but as described (shape {:?}, strides {:?}) it reaches {past} bytes beyond the source's (strides {:?})",
        target.shape, target.strides, source.strides
    );
    if target.framework == "numba" && has_zero_stride(&source.shape, &source.strides) {
        note.push_str(
            ": Numba's __cuda_array_interface__ describes a broadcast array as C-contiguous (strides=None), so the Numba array itself keeps the zero stride but anything reading it through __cuda_array_interface__ reads past the source",
        );
    }
    note
}

/// The most specific known cause of a copy, in the order of the rules in dlpack-matrix.md §4.
pub fn copy_reason(source: &TensorReport, target: &TensorReport) -> String {
    if target.framework == "jax" && source.dtype != target.dtype {
        return format!(
            "dtype changed {} → {}: JAX narrows 64-bit types when jax_enable_x64 is off (enable it to share)",
            source.dtype, target.dtype
        );
    }
    if source.dtype != target.dtype {
        return format!("dtype changed {} → {}", source.dtype, target.dtype);
    }
    if target.framework == "jax"
        && is_host_accessible(source.dlpack_device.0)
        && !source.data_ptr.is_multiple_of(XLA_CPU_ALIGNMENT)
    {
        return format!(
            "source address {:#x} is not {XLA_CPU_ALIGNMENT}-byte aligned, so XLA's CPU client copies it (torch allocates 64-byte aligned memory; NumPy's malloc often does not)",
            source.data_ptr
        );
    }
    if source.strides != target.strides {
        return format!(
            "layout changed: strides {:?} → {:?} (the target holds its own copy in the new layout)",
            source.strides, target.strides
        );
    }
    "the target's memory lies outside the source's (the framework made its own copy)".into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(framework: &str, ptr: u64, shape: Vec<i64>, strides: Vec<i64>, dev: (u32, i32)) -> TensorReport {
        let numel: u64 = shape.iter().map(|d| *d as u64).product();
        TensorReport {
            framework: framework.into(),
            dtype: "float32".into(),
            shape,
            strides,
            device: "cpu".into(),
            dlpack_device: dev,
            dlpack_device_name: format!("{}:{}", crate::dlpack::device_type_name(dev.0), dev.1),
            data_ptr: ptr,
            byte_offset: 0,
            nbytes: numel * 4,
            span: (ptr, ptr + numel * 4),
            contiguous: true,
            alignment: crate::dlpack::alignment_of(ptr),
            readonly: false,
            dlpack_version: None,
            cuda: None,
        }
    }

    #[test]
    fn inside_is_shared_outside_is_copied() {
        let a = t("numpy", 0x1000, vec![16], vec![1], (1, 0));
        let view = t("torch", 0x1010, vec![4], vec![1], (1, 0));
        assert_eq!(judge(&a, &view).verdict, Verdict::Shared);
        let other = t("torch", 0x9000, vec![16], vec![1], (1, 0));
        let j = judge(&a, &other);
        assert_eq!(j.verdict, Verdict::Copied);
        assert!(j.reason.unwrap().contains("outside"));
    }

    #[test]
    fn device_change_is_a_copy_even_at_equal_addresses() {
        let a = t("torch", 0x1000, vec![4], vec![1], (1, 0));
        let b = t("jax", 0x1000, vec![4], vec![1], (2, 0));
        assert!(judge(&a, &b).reason.unwrap().starts_with("device changed"));
    }

    #[test]
    fn cuda_buffer_ids_decide_when_present() {
        let mut a = t("torch", 0x1000, vec![4], vec![1], (2, 0));
        let mut b = a.clone();
        a.cuda = Some(serde_json::json!({"buffer_id": 7}));
        b.cuda = Some(serde_json::json!({"buffer_id": 8}));
        assert_eq!(judge(&a, &b).verdict, Verdict::Copied);
        b.cuda = Some(serde_json::json!({"buffer_id": 7}));
        assert_eq!(judge(&a, &b).verdict, Verdict::Shared);
    }

    #[test]
    fn jax_reasons() {
        let src = t("numpy", 0x1008, vec![4], vec![1], (1, 0));
        let dst = t("jax", 0x5000, vec![4], vec![1], (1, 0));
        assert!(judge(&src, &dst).reason.unwrap().contains("aligned"));
        let mut narrowed = dst.clone();
        narrowed.dtype = "int32".into();
        let mut wide = src.clone();
        wide.dtype = "int64".into();
        assert!(judge(&wide, &narrowed).reason.unwrap().contains("jax_enable_x64"));
    }

    #[test]
    fn zero_size_and_read_only_notes() {
        let a = t("numpy", 0, vec![0], vec![1], (1, 0));
        let b = t("torch", 0, vec![0], vec![1], (1, 0));
        let j = judge(&a, &b);
        assert_eq!(j.verdict, Verdict::Shared);
        assert!(j.notes[0].contains("zero-size"));
        let mut ro = t("numpy", 0x1000, vec![4], vec![1], (1, 0));
        ro.readonly = true;
        let w = t("torch", 0x1000, vec![4], vec![1], (1, 0));
        assert!(judge(&ro, &w).notes[0].contains("read-only"));
    }

    #[test]
    fn a_target_overlapping_the_live_source_views_it() {
        // Numba's view of a (4, 6) broadcast with strides (0, 1): its __cuda_array_interface__ says
        // C-contiguous, so it is described as 24 elements from the source's address.
        let mut src = t("torch", 0x7f00_0000_0200, vec![4, 6], vec![0, 1], (2, 0));
        src.span = (0x7f00_0000_0200, 0x7f00_0000_0200 + 6 * 4);
        let numba = t("numba", 0x7f00_0000_0200, vec![4, 6], vec![6, 1], (2, 0));
        let j = judge(&src, &numba);
        assert_eq!(j.verdict, Verdict::Shared);
        assert!(j.notes[0].contains("reaches 72 bytes beyond") && j.notes[0].contains("Numba's __cuda_array_interface__"));
        // A compact copy elsewhere is a copy, and the reason says the layout is the copy's own.
        let copy = t("torch", 0x7f00_0010_0000, vec![4, 6], vec![6, 1], (2, 0));
        let j = judge(&src, &copy);
        assert_eq!(j.verdict, Verdict::Copied);
        assert!(j.reason.unwrap().contains("holds its own copy"));
        // Allocation identity still decides when the driver described both.
        let (mut a, mut b) = (src.clone(), numba.clone());
        a.cuda = Some(serde_json::json!({"buffer_id": 7}));
        b.cuda = Some(serde_json::json!({"buffer_id": 8}));
        assert_eq!(judge(&a, &b).verdict, Verdict::Copied);
        // Any other overlap says how far the description reaches, without naming Numba.
        let other = t("torch", 0x7f00_0000_0200, vec![24], vec![1], (2, 0));
        let j = judge(&src, &other);
        assert_eq!(j.verdict, Verdict::Shared);
        assert!(j.notes[0].contains("reaches 72 bytes beyond") && !j.notes[0].contains("Numba"));
    }

    #[test]
    fn refusals() {
        let neg = t("numpy", 0x1000, vec![4], vec![-1], (1, 0));
        assert!(refuse(&neg, "torch").unwrap().reason.contains("188023"));
        assert!(refuse(&neg, "numpy").is_none());
        // TF and JAX raise cleanly on layouts they cannot take: predicted failed, not refused.
        let tr = t("torch", 0x1000, vec![4, 3], vec![1, 4], (1, 0));
        assert!(refuse(&tr, "tf").is_none());
        let bc = t("numpy", 0x1000, vec![4, 3], vec![0, 1], (1, 0));
        assert!(refuse(&bc, "jax").is_none());
    }
}

/// Known framework error texts, the reason they mean and the fix to try, in the frameworks' own words
/// (dlpack-matrix.md §1–§2). Matched by substring against the framework's message.
const KNOWN_FAILURES: &[(&str, &str, &str)] = &[
    ("require gradient", "the torch tensor requires grad", "share x.detach(), which views the same memory"),
    ("conjugate bit", "the torch tensor has its conjugate bit set", "share x.resolve_conj()"),
    ("Storage size calculation overflowed", "PyTorch cannot take negative strides", "make a contiguous copy first, e.g. numpy.ascontiguousarray(x)"),
    ("DLPack only supports signed/unsigned integers", "the source's dtype has no DLPack code in its framework (NumPy cannot export ml_dtypes' bfloat16)", "cast to float32 first"),
    ("Invalid strides array from DLPack", "TensorFlow takes only compact row-major tensors", "make it contiguous first"),
    ("trivial (compact) striding", "JAX takes only compact layouts or their transposes", "make it contiguous first"),
    ("Address of buffer", "XLA's GPU kernels take only 16-byte aligned inputs and this array does not start on a 16-byte boundary", "share an aligned copy: x.clone() (torch) or x.copy() (CuPy)"),
    ("Unsupported byte_offset", "TensorFlow refuses a non-zero byte_offset", "make a contiguous copy first"),
    ("Cannot export readonly array", "NumPy will not export a read-only array through a legacy capsule, which cannot say read-only", "use path='dlpack' (versioned) or x.copy()"),
    ("only supports stream=None", "NumPy cannot take a CUDA stream", "move the array to the host first"),
    ("Unsupported device in DLTensor", "NumPy cannot address device memory", "copy to the host first (path='host')"),
    ("CPU arrays cannot be directly imported to CuPy", "CuPy imports device memory only", "cupy.asarray(x) copies to the GPU"),
    ("Unsupported device_type", "the consumer does not support this DLPack device type", "copy to plain device or host memory first"),
    ("unsupported device type", "the consumer does not support this DLPack device type", "copy to plain device or host memory first"),
    ("Unsupported Type Codes", "the consumer has no such dtype", "cast to a dtype both frameworks have"),
    ("Unsupported dtype", "the consumer has no such dtype", "cast to a dtype both frameworks have"),
    ("does not support bfloat16", "the consumer has no bfloat16", "cast to float32, or install ml_dtypes"),
    ("not supported by dlpack", "the dtype has no DLPack code", "cast to a standard dtype"),
    ("different CUDA device index", "the tensor is not on the current CUDA device", "torch.cuda.set_device(x.device) first"),
    ("non-None stream", "TensorFlow's __dlpack__ refuses a stream", "use path='capsule' (tf.experimental.dlpack.to_dlpack)"),
    ("consumed", "the DLPack capsule was already consumed", "export a fresh capsule for each import"),
    ("unknown device", "TensorFlow's GPU index is logical and does not match", "check tf.config.get_visible_devices()"),
];

/// Reason and fix for a framework's error text, when gpushare knows it.
pub fn explain_failure(error_text: &str) -> Option<(&'static str, &'static str)> {
    KNOWN_FAILURES
        .iter()
        .find(|(needle, _, _)| error_text.contains(needle))
        .map(|(_, reason, fix)| (*reason, *fix))
}

#[cfg(test)]
mod failure_tests {
    #[test]
    fn known_failures_map_to_fixes() {
        let (reason, fix) = super::explain_failure("RuntimeError: Can't export tensors that require gradient, use tensor.detach()").unwrap();
        assert!(reason.contains("grad") && fix.contains("detach"));
        assert!(super::explain_failure("something new").is_none());
        let (reason, fix) = super::explain_failure(
            "JaxRuntimeError: INTERNAL: Address of buffer 0 must be a multiple of 10, but was 0x7fd8ad000208",
        )
        .unwrap();
        assert!(reason.contains("16-byte") && fix.contains("clone()"));
    }
}
