//! The gaps the prediction rules look for before a handoff: a dtype the target cannot take, a
//! device it cannot reach, a layout it cannot import, a producer or path that cannot carry the
//! array. Each returns the predicted outcome when it finds one ([`super::prediction::predict`]).

use super::prediction::{PredictedOutcome, STANDARD_DTYPES, TargetFacts, at_least, base_and_lanes, fail};
use crate::dlpack::{
    has_negative_stride, has_zero_stride, is_c_contiguous, is_host_accessible, is_permuted_compact,
};
use crate::report::TensorReport;

const TORCH_EXTRA: &[&str] = &[
    "bfloat16", "complex32", "float8_e5m2", "float8_e5m2fnuz", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e8m0fnu",
];
const JAX_EXTRA: &[&str] = &[
    "bfloat16", "float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz", "float8_e4m3fn", "float8_e4m3fnuz",
    "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu",
];

/// Rule 9: a dtype the target cannot import, with the framework's words for it.
pub(super) fn dtype_gap(target: &TargetFacts, dtype: &str) -> Option<PredictedOutcome> {
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

/// Rule 4: DLPack device types each consumer imports (over `path`: `cai` carries no device type).
pub(super) fn device_gap(source: &TensorReport, target: &TargetFacts, path: &str) -> Option<PredictedOutcome> {
    let (dev, _) = source.dlpack_device;
    let name = &source.dlpack_device_name;
    let host_fix = "copy to plain device or host memory first";
    match target.framework.as_str() {
        // DLConvertor: CPU, CUDA, ROCm, Metal (MPS), oneAPI (XPU), MAIA; not pinned host (3) or managed (13).
        // Managed memory is addressable from the device, and PyTorch takes it through
        // __cuda_array_interface__, which carries no device type (pytorch#96318): a route exists.
        "torch" if dev == 13 && path == "cai" => None,
        "torch" if dev == 13 => Some(fail(
            format!("PyTorch's DLPack import does not take DLPack device {name} (kDLCUDAManaged)"),
            Some("Unsupported device_type"),
            "use path='cai': PyTorch views managed memory through __cuda_array_interface__ without a copy",
        )),
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
pub(super) fn layout_gap(source: &TensorReport, target: &TargetFacts, path: &str) -> Option<PredictedOutcome> {
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
        // NumPy sizes an array as its element count times the itemsize in an npy_intp, whatever
        // the strides: a broadcast view (torch's expand) that views a few bytes can still have a
        // shape whose size overflows it, and from_dlpack then raises "array is too big".
        "numpy" if numpy_size_overflows(shape, &source.dtype) => Some(fail(
            format!(
                "NumPy cannot describe shape {shape:?} of {}: its element count times the itemsize exceeds 2**63-1 bytes, even though the view ({}) spans only {} bytes",
                source.dtype,
                what(),
                source.nbytes
            ),
            Some("array is too big"),
            "share a smaller view (slice it, or expand it on the NumPy side with numpy.broadcast_to)",
        )),
        "tf" if source.byte_offset != 0 => Some(fail(
            format!("TensorFlow refuses a non-zero DLPack byte_offset ({})", source.byte_offset),
            Some("Unsupported byte_offset"),
            "make a contiguous copy first",
        )),
        "tf" if !is_c_contiguous(shape, strides) => Some(fail(
            format!("TensorFlow imports only compact row-major tensors (shape {shape:?}, strides {strides:?})"),
            Some("Invalid strides array from DLPack"),
            contiguous_fix,
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

/// Whether NumPy's size of an array (elements × itemsize, in a signed 64-bit npy_intp) overflows.
/// Bytes per element of a dtype by its name (`float32` → 4, `bool` → 1, `float4_e2m1fnx2` → 1).
pub(super) fn itemsize_of(dtype: &str) -> u64 {
    let (base, lanes) = base_and_lanes(dtype);
    let bits: u64 = base.trim_start_matches(|c: char| !c.is_ascii_digit()).parse().unwrap_or(8).max(8);
    (bits / 8).saturating_mul(lanes.max(1) as u64)
}

pub(super) fn numpy_size_overflows(shape: &[i64], dtype: &str) -> bool {
    if shape.contains(&0) {
        return false;
    }
    let mut size: i128 = itemsize_of(dtype) as i128;
    for &d in shape {
        size = size.saturating_mul(d.max(0) as i128);
        if size > i64::MAX as i128 {
            return true;
        }
    }
    false
}

/// Rules 5–7: the producer refuses what the consumer asks of it, or the capsule generation or
/// path does not fit the pair.
pub(super) fn producer_or_path_gap(source: &TensorReport, target: &TargetFacts, path: &str) -> Option<PredictedOutcome> {
    let src = source.framework.as_str();
    let dst = target.framework.as_str();
    // Device or managed memory: what __cuda_array_interface__ can describe (it has no device type).
    let on_cuda = matches!(source.dlpack_device.0, 2 | 13);
    match path {
        "capsule" => {
            if matches!(dst, "jax" | "numpy") {
                return Some(fail(
                    format!("{dst} does not import raw DLPack capsules (JAX removed it in 0.7.2; NumPy never did)"),
                    None,
                    "use path='dlpack'",
                ));
            }
        }
        "dlpack" => {
            // Paddle 3.x's __dlpack_device__ says (kDLCPU, None) for host tensors; JAX looks the
            // device up by that id and raises (PyTorch and NumPy read the capsule instead).
            if src == "paddle" && dst == "jax" && source.dlpack_device.0 == 1 {
                return Some(fail(
                    "Paddle's __dlpack_device__ gives no device id for host tensors (None), and JAX looks its device up by that id",
                    Some("device_from_local_hardware_id"),
                    "go through NumPy (jnp.asarray(x.numpy()), a copy) or PyTorch (torch.from_dlpack(x), shared, then to JAX)",
                ));
            }
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
            // TensorFlow has no interface of its own: gpushare describes a tensor in CUDA memory by one.
            if src == "numpy" {
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
            // JAX marks its own interface read-only, and PyTorch refuses a read-only interface
            // ("the read only flag is not supported"): every calibration on 2x H200 failed so. The
            // route refuses the pair before touching an array (paths.py, `imports_readonly_cai`).
            if src == "jax" && dst == "torch" {
                return Some(fail(
                    "jax marks its __cuda_array_interface__ read-only and torch refuses a read-only interface",
                    Some("read-only"),
                    "use path='dlpack'",
                ));
            }
        }
        _ => {}
    }
    // Which capsule generation the producer is asked for: consumers that pass max_version get a
    // versioned one (torch, NumPy, CuPy, Paddle 3.3 on the dlpack path); JAX calls __dlpack__
    // without it, and explicit capsules (the capsule path, TF) are legacy.
    let versioned_request = path == "dlpack" && (matches!(dst, "torch" | "numpy" | "cupy" | "paddle") || super::targets::asks_versioned(dst));
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
    // TF's __dlpack__ refuses any stream, which torch and CuPy pass for CUDA tensors: gpushare hands
    // them TensorFlow's capsule without one (its export waits for the tensor's work first).
    // Rule 5: CuPy under CUPY_CUDA_PER_THREAD_DEFAULT_STREAM passes stream=2, which torch refuses.
    if src == "torch" && dst == "cupy" && path == "dlpack" && target.settings.target.per_thread_default_stream {
        return Some(fail(
            "CuPy runs on the per-thread default stream (stream=2), which PyTorch's __dlpack__ refuses",
            Some("per-thread default stream is not supported"),
            "unset CUPY_CUDA_PER_THREAD_DEFAULT_STREAM, or use path='cai'",
        ));
    }
    // Rule 7 is handled, not predicted: torch exports only from its current CUDA device, and every
    // gpushare route makes the source's device current for the handoff (gpushare.devices), so the
    // raw call's failure never happens here; the result notes what gpushare did.
    None
}
