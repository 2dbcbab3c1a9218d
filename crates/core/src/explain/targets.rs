//! The rules of the targets whose DLPack import differs from the defaults of dlpack-matrix.md §4
//! in ways [`super::predict`]'s general rules do not cover: MLX, NVIDIA Warp and cuda.core
//! (measured on the CPU with mlx 0.32.4, warp-lang 1.19.0 and cuda-core 1.2.2; their CUDA rows are
//! the CPU rules until the CUDA matrix has run them). PyCUDA's rules are its endpoints alone
//! (its adapter declares `__cuda_array_interface__` only, both ways).
//!
//! Each target answers two questions, asked by `predict` after the path, producer and device rules
//! (before the general dtype rule) and after the zero-size rule: will its import fail, and will it copy?

use super::prediction::{PredictedOutcome, TargetFacts, base_and_lanes};
use crate::report::TensorReport;

fn fail(reason: impl Into<String>, expected: Option<&str>, fix: impl Into<String>) -> PredictedOutcome {
    PredictedOutcome::Failed { reason: reason.into(), expected_error: expected.map(str::to_string), fix: fix.into() }
}

const CAST_FIX: &str = "cast to a dtype both frameworks have (e.g. float32) before sharing";

/// Whether `target` asks the producer for a versioned capsule (`max_version`) on the `dlpack`
/// path, so that a read-only NumPy array can be exported to it: `mx.from_dlpack` and
/// `StridedMemoryView.from_dlpack` do; `wp.from_dlpack` does not.
pub(super) fn asks_versioned(target: &str) -> bool {
    matches!(target, "mlx" | "cuda_core")
}

/// Whether `target` imports a read-only source as a writable view: Warp's import takes legacy
/// capsules only, which carry no READ_ONLY flag. (cuda.core keeps the flag; MLX copies.)
pub(super) fn writes_read_only(target: &str) -> bool {
    target == "warp"
}

/// The dtype `target`'s DLPack import labels a `dtype` array with, where it is not `dtype`: Paddle
/// 3.3 takes DLPack's uint16 as its bfloat16 (`paddle.from_dlpack` and `paddle.utils.dlpack`
/// alike; it stores bfloat16 as uint16), over the same bytes, and its kernels then treat the
/// tensor as uint16 (arithmetic on it fails: "Selected wrong DataType `uint16`").
pub fn relabels(target: &str, dtype: &str) -> Option<&'static str> {
    match (target, dtype) {
        ("paddle", "uint16") => Some("bfloat16"),
        _ => None,
    }
}

/// What to say of a target that labels the source's bytes `label` rather than `dtype`.
pub fn relabel_note(target: &str, dtype: &str, label: &str) -> String {
    let mut note = format!(
        "{target} labels the array {label}, not {dtype}, over the same bytes: the values are the source's bits under another dtype"
    );
    if relabels(target, dtype) == Some("bfloat16") {
        note.push_str(
            " (Paddle takes DLPack's uint16 as its bfloat16, and its kernels then treat the tensor as uint16: arithmetic on it fails; cast to int32 first, e.g. x.astype(numpy.int32), to compute with it in Paddle)",
        );
    }
    note
}

/// PyCUDA's calls need a context on PyCUDA's own context stack (`Context.get_current()`; the one
/// PyTorch or CuPy made current in the driver does not count): without one gpushare's view of the
/// memory (a `GPUArray`) cannot be made, and the adapter says which import makes one. Whether there
/// is one can change at run time (`import pycuda.autoprimaryctx`): the adapter's facts say.
fn pycuda_without_context(target: &TargetFacts) -> Option<PredictedOutcome> {
    if target.framework != "pycuda" || target.settings.target.has_current_context != Some(false) {
        return None;
    }
    Some(fail(
        "PyCUDA has no current CUDA context",
        None, // gpushare's adapter says so before PyCUDA is called
        "import pycuda.autoprimaryctx (the device's primary context, which PyTorch, JAX, CuPy and TensorFlow share) or pycuda.autoinit (a context of PyCUDA's own) first",
    ))
}

/// Whether this MLX imports CUDA memory over DLPack. None does yet: `mx.from_dlpack` raises
/// "[convert] CUDA import is not supported." for kDLCUDA and kDLCUDAManaged on every backend (seen
/// on 2x H200 with mlx 0.32.4 and mlx-cuda-13; the same words in 0.32.2's convert.cpp), and 0.32.4
/// is the newest release. An unknown version is taken to be one of these; a later
/// release is assumed to import it, to be measured when it comes.
fn mlx_imports_cuda(version: &str) -> bool {
    super::prediction::parse_version(version).is_some_and(|v| v >= (0, 33, 0))
}

/// MLX's import of CUDA memory: refused (see [`mlx_imports_cuda`]); pinned host memory
/// (kDLCUDAHost) is an "Unsupported device" to it. The host route works: gpushare copies the values
/// through NumPy and MLX makes its own array of them.
fn mlx_cuda_import(source: &TensorReport, target: &TargetFacts) -> Option<PredictedOutcome> {
    let (kind, words) = match source.dlpack_device.0 {
        2 | 13 => ("CUDA", "CUDA import is not supported"),
        3 => ("pinned host (kDLCUDAHost)", "Unsupported device"),
        _ => return None,
    };
    if kind == "CUDA" && mlx_imports_cuda(&target.version) {
        return None;
    }
    Some(fail(
        format!(
            "MLX {} has no DLPack import of {kind} memory: mx.from_dlpack refuses it whichever backend MLX was built with",
            if target.version.is_empty() { "0.32" } else { target.version.as_str() }
        ),
        Some(words),
        "use path='host': gpushare copies the values through NumPy into an MLX array (mx.array(x.cpu().numpy()) by hand)",
    ))
}

/// Will the host route's constructor (the adapter's `from_numpy`) refuse the values? MLX has no
/// complex128, Warp no complex dtypes and no 0-d arrays: their adapters say so rather than change
/// the values.
pub(super) fn host_failure(source: &TensorReport, target: &TargetFacts) -> Option<PredictedOutcome> {
    match target.framework.as_str() {
        "mlx" if source.dtype == "complex128" => {
            Some(fail("MLX has no complex128", None, "cast to complex64 first"))
        }
        "warp" if source.dtype.starts_with("complex") => {
            Some(fail(format!("Warp has no complex dtypes ({})", source.dtype), None, "share the real and imaginary parts as two float arrays"))
        }
        // The adapter's view of NumPy's array needs a DLPack export, which ml_dtypes' bfloat16 lacks.
        "cuda_core" if base_and_lanes(&source.dtype).0 == "bfloat16" => {
            Some(fail("NumPy's bfloat16 (ml_dtypes) has no DLPack export for cuda.core to view", None, "cast to float32 first"))
        }
        "warp" if warp_shape_failure(source, false).is_some() => warp_shape_failure(source, false),
        "warp" if source.shape.is_empty() => {
            Some(fail("Warp has no 0-d arrays", None, "share x.reshape(1), a view of one element"))
        }
        "pycuda" => pycuda_without_context(target),
        _ => None,
    }
}

/// A bare DLPack capsule (a source of framework `capsule`) handed to a `from_dlpack` as it is, as
/// the raw call hands it: PyTorch, CuPy, Paddle and MLX take one; NumPy, JAX (since 0.7.2) and
/// cuda.core want an object with `__dlpack__` and `__dlpack_device__`; Warp takes legacy capsules
/// only. The `capsule` path hands it to the target's capsule import, which every capsule consumer has.
fn bare_capsule_failure(source: &TensorReport, target: &TargetFacts, path: &str) -> Option<PredictedOutcome> {
    if source.framework != "capsule" || path != "dlpack" {
        return None;
    }
    let fix = "hand over the producer itself (the object whose __dlpack__ made the capsule), or use path='capsule' into a framework that imports capsules (torch, CuPy, Paddle, MLX, Warp, TensorFlow)";
    let words = match target.framework.as_str() {
        "jax" => "must have __dlpack__ and __dlpack_device__",
        "numpy" => "has no attribute '__dlpack__'",
        "cuda_core" => "has no attribute '__dlpack_device__'",
        "warp" if source.dlpack_version.is_some() => {
            return Some(fail(
                "wp.from_dlpack takes legacy (\"dltensor\") capsules only, and this bare capsule is versioned",
                Some("Expected a valid DLPack capsule"),
                "use path='capsule' (gpushare forwards a versioned capsule to Warp as a legacy one)",
            ));
        }
        _ => return None,
    };
    Some(fail(
        format!("a bare DLPack capsule: {}'s from_dlpack takes only objects with __dlpack__ and __dlpack_device__", target.framework),
        Some(words),
        fix,
    ))
}

/// Warp's arrays have at most 4 dimensions, each at most 2**31-1 long (int32 shapes): wp.from_dlpack
/// and wp.array refuse others (warp-lang 1.19). `dlpack`: the words of wp.from_dlpack.
fn warp_shape_failure(source: &TensorReport, dlpack: bool) -> Option<PredictedOutcome> {
    if source.shape.len() > 4 {
        return Some(fail(
            format!("Warp arrays have at most 4 dimensions, and this one has {}", source.shape.len()),
            dlpack.then_some("the maximum number of dimensions is 4"),
            "reshape to 4 dimensions or fewer first (merge adjacent contiguous axes)",
        ));
    }
    if let Some(long) = source.shape.iter().find(|d| **d > i64::from(i32::MAX)) {
        return Some(fail(
            format!("Warp's shapes are int32: a dimension of {long} elements is longer than 2**31-1"),
            dlpack.then_some("signed 32-bit integer"),
            "split the array into parts of at most 2**31-1 elements along that axis",
        ));
    }
    None
}

/// Will the import by `path` fail?
pub(super) fn import_failure(source: &TensorReport, target: &TargetFacts, path: &str) -> Option<PredictedOutcome> {
    if !matches!(path, "dlpack" | "capsule" | "cai") {
        return None;
    }
    // PyCUDA speaks __cuda_array_interface__ only, both ways (inducer/pycuda#226). As from Numba, a
    // capsule *out of* PyCUDA is gpushare's own, made from the interface (measured into TensorFlow
    // on an H100: shared); only a consumer asking the array for __dlpack__ finds none.
    if (path != "cai" && target.framework == "pycuda") || (path == "dlpack" && source.framework == "pycuda") {
        return Some(fail("PyCUDA has no DLPack, only __cuda_array_interface__", None, "use path='cai'"));
    }
    if let Some(f) = pycuda_without_context(target) {
        return Some(f);
    }
    // MLX has no __cuda_array_interface__ either way; cuda.core's StridedMemoryView reads one but
    // exposes none.
    if path == "cai" && (target.framework == "mlx" || matches!(source.framework.as_str(), "mlx" | "cuda_core")) {
        return Some(fail(
            format!(
                "{}: __cuda_array_interface__ is not spoken on this side (MLX has none; cuda.core exposes none)",
                crate::route::label(&source.framework, &target.framework)
            ),
            None,
            "use path='dlpack'",
        ));
    }
    if let Some(f) = bare_capsule_failure(source, target, path) {
        return Some(f);
    }
    if path == "capsule" && target.framework == "cuda_core" {
        return Some(fail(
            "cuda.core's StridedMemoryView.from_dlpack takes objects with __dlpack_device__, not raw capsules",
            None,
            "use path='dlpack'",
        ));
    }
    let (base, lanes) = base_and_lanes(&source.dtype);
    let unusual = lanes != 1 || base.starts_with("float8") || base.starts_with("float4") || base == "complex32";
    match target.framework.as_str() {
        "mlx" => {
            if unusual {
                return Some(fail(format!("MLX cannot import dtype {} over DLPack", source.dtype), None, CAST_FIX));
            }
            // mx.from_dlpack reads the dtype, then the device: CUDA memory it refuses (before it
            // looks at the strides), whichever backend MLX was built with.
            if let Some(f) = mlx_cuda_import(source, target) {
                return Some(f);
            }
            // Any negative stride, even on an axis of one element, where it moves nothing
            // (mlx 0.32.4: "Cannot convert DLPack arrays with negative strides").
            if source.strides.iter().any(|s| *s < 0) {
                return Some(fail(
                    format!("mx.from_dlpack refuses negative strides {:?}", source.strides),
                    Some("negative strides"),
                    "make a contiguous copy first, e.g. numpy.ascontiguousarray(x)",
                ));
            }
            None
        }
        "warp" => {
            if base.starts_with("complex") {
                // wp.from_dlpack says so itself; an array made over __cuda_array_interface__ first
                // maps the typestr to a Warp type (warp.types.dtype_from_numpy), which has none.
                let words = if path == "cai" { "to a Warp type" } else { "does not support complex types" };
                return Some(fail(
                    format!("Warp has no complex dtypes ({})", source.dtype),
                    Some(words),
                    "share the real and imaginary parts as two float arrays (x.real, x.imag), or a float view of twice the length",
                ));
            }
            if unusual {
                return Some(fail(format!("Warp cannot import dtype {} over DLPack", source.dtype), None, CAST_FIX));
            }
            if let Some(f) = warp_shape_failure(source, true) {
                return Some(f);
            }
            if source.shape.is_empty() {
                return Some(fail(
                    "Warp has no 0-d arrays: wp.from_dlpack fails on a 0-d tensor",
                    Some("list assignment index out of range"),
                    "share x.reshape(1) (torch: x.reshape(1), NumPy: x.reshape(1)), a view of one element",
                ));
            }
            None
        }
        "cuda_core" => {
            // Paddle 3.x's __dlpack_device__ says (kDLCPU, None) for host tensors, and
            // StridedMemoryView.from_dlpack reads the id as an int (before it looks at the dtype).
            if source.framework == "paddle" && source.dlpack_device.0 == 1 && path == "dlpack" {
                return Some(fail(
                    "Paddle's __dlpack_device__ gives no device id for host tensors (None), and StridedMemoryView.from_dlpack reads it as an integer",
                    Some("an integer is required"),
                    "go through NumPy (x.numpy() shares, then StridedMemoryView.from_dlpack of that) or PyTorch (torch.from_dlpack(x))",
                ));
            }
            // StridedMemoryView describes its dtype as a NumPy dtype: ml_dtypes' bfloat16 it views
            // (StridedMemoryView.from_dlpack(x, stream_ptr=-1) of a torch, JAX, MLX or TensorFlow
            // bfloat16 array; gpushare describes the view from its attributes, since the view's own
            // export refuses bfloat16), float8 and float4 it refuses.
            if unusual {
                return Some(fail(
                    format!("cuda.core's StridedMemoryView has no NumPy dtype for {} and refuses to export it", source.dtype),
                    Some("Unsupported dtype"),
                    CAST_FIX,
                ));
            }
            None
        }
        // Warp's __dlpack__ has no max_version: NumPy retries without it, and on a dtype it has not
        // (bfloat16) its retry raises a SystemError instead of "Unsupported dtype in DLTensor".
        "numpy" if source.framework == "warp" && path == "dlpack" && base == "bfloat16" => Some(fail(
            format!("NumPy cannot import dtype {} over DLPack (from Warp's legacy export it says so as a SystemError)", source.dtype),
            Some("attempted to fetch exception but none was set"),
            "cast to float32 first (wp.array(x.numpy().astype('float32')) or a Warp kernel)",
        )),
        _ => None,
    }
}

/// Will the import copy? (`None`: it shares, as far as these rules know.)
pub(super) fn import_copy(source: &TensorReport, target: &TargetFacts, path: &str) -> Option<PredictedOutcome> {
    if target.framework != "mlx" || !matches!(path, "dlpack" | "capsule") {
        return None;
    }
    // mx.from_dlpack keeps no 64-bit floats: float64 and complex128 become new float32/complex64 arrays.
    let narrowed = match source.dtype.as_str() {
        "float64" => Some("float32"),
        "complex128" => Some("complex64"),
        _ => None,
    };
    if let Some(to) = narrowed {
        return Some(PredictedOutcome::Copied {
            reason: format!("dtype changed {} → {to}: mx.from_dlpack narrows 64-bit floating types", source.dtype),
        });
    }
    if source.dlpack_device.0 == 1 {
        return Some(PredictedOutcome::Copied {
            reason: "MLX's CPU import copies every array (mx.from_dlpack: \"Cannot import a CPU array without a copy\")".into(),
        });
    }
    None
}

/// Refusals of these frameworks' inputs ([`super::refuse`]): Warp's `__cuda_array_interface__`
/// describes a bfloat16 array with typestr `"<u2"` (warp.types.type_typestr: the interface has no
/// bfloat16), so a consumer of the interface (Numba, PyCUDA) makes a uint16 array of the bits and
/// reads values that are not the source's (seen on 2x H200: warp → numba "shared", values differ).
pub(super) fn refusal(src: &TensorReport, path: &str) -> Option<super::Refusal> {
    if src.framework == "warp" && path == "cai" && base_and_lanes(&src.dtype).0 == "bfloat16" {
        return Some(super::Refusal {
            reason: "Warp's __cuda_array_interface__ labels bfloat16 as uint16 (typestr '<u2'): the target would read the bits as integers".into(),
            fix: "cast to float32 first (a Warp kernel, or wp.array(x.numpy().astype('float32'))), or share by DLPack into a framework with bfloat16 (torch, JAX, CuPy)".into(),
        });
    }
    None
}
