//! The rules that say why a conversion shared, copied or failed.
//!
//! [`judge`] decides, after the fact, from addresses and extents (and from CUDA allocation identity
//! when the driver described both pointers) whether the target shares the source's memory, and
//! names the reason when it does not. [`refuse`] runs before any framework is called and stops
//! inputs that a framework is known to mishandle or crash on.

use crate::dlpack::{has_negative_stride, has_zero_stride, is_c_contiguous, is_host_accessible, is_permuted_compact};
use crate::report::{TensorReport, Verdict};

/// JAX/XLA's CPU client refuses to alias data that is not aligned to `EIGEN_MAX_ALIGN_BYTES`.
pub const XLA_CPU_ALIGNMENT: u64 = 64;

/// A conversion gpushare will not attempt, with the fix to try.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub reason: String,
    pub fix: String,
}

/// Stops inputs that a target framework cannot take, before calling it. Negative strides into
/// PyTorch are refused because `torch.from_dlpack` aborts the whole process on them (pytorch#188023).
pub fn refuse(src: &TensorReport, target: &str) -> Option<Refusal> {
    let (shape, strides) = (&src.shape, &src.strides);
    match target {
        "torch" if has_negative_stride(shape, strides) => Some(Refusal {
            reason: format!(
                "negative strides {strides:?}: torch.from_dlpack aborts the process on them (pytorch#188023)"
            ),
            fix: "make a contiguous copy first, e.g. numpy.ascontiguousarray(x) or x.copy()".into(),
        }),
        "tf" if !is_c_contiguous(shape, strides) => Some(Refusal {
            reason: format!(
                "TensorFlow imports only compact row-major DLPack tensors; shape {shape:?} has strides {strides:?} (\"Invalid strides array from DLPack\")"
            ),
            fix: "make it contiguous first: x.contiguous() (torch), numpy.ascontiguousarray(x), jnp.array(x)".into(),
        }),
        "jax" if has_zero_stride(shape, strides) || !is_permuted_compact(shape, strides) => Some(Refusal {
            reason: format!(
                "JAX imports only compact layouts or their transposes; shape {shape:?} has strides {strides:?} (\"Only DLPack tensors with trivial (compact) striding are supported\")"
            ),
            fix: "make it contiguous first: x.contiguous() (torch), numpy.ascontiguousarray(x)".into(),
        }),
        _ => None,
    }
}

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
    let inside = match same_cuda_allocation(source, target) {
        Some(same) => same && inside,
        None => inside,
    };
    if inside {
        if source.readonly && !target.readonly {
            notes.push("the target can write to memory the source marks read-only".into());
        }
        return Judgement { verdict: Verdict::Shared, reason: None, notes };
    }
    Judgement { verdict: Verdict::Copied, reason: Some(copy_reason(source, target)), notes }
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
        && source.data_ptr % XLA_CPU_ALIGNMENT != 0
    {
        return format!(
            "source address {:#x} is not {XLA_CPU_ALIGNMENT}-byte aligned, so XLA's CPU client copies it (torch allocates 64-byte aligned memory; NumPy's malloc often does not)",
            source.data_ptr
        );
    }
    if source.strides != target.strides {
        return format!("layout changed: strides {:?} → {:?}", source.strides, target.strides);
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
    fn refusals() {
        let neg = t("numpy", 0x1000, vec![4], vec![-1], (1, 0));
        assert!(refuse(&neg, "torch").unwrap().reason.contains("188023"));
        assert!(refuse(&neg, "numpy").is_none());
        let tr = t("torch", 0x1000, vec![4, 3], vec![1, 4], (1, 0));
        assert!(refuse(&tr, "tf").is_some());
        assert!(refuse(&tr, "jax").is_none());
        let bc = t("numpy", 0x1000, vec![4, 3], vec![0, 1], (1, 0));
        assert!(refuse(&bc, "jax").is_some());
    }
}

/// Known framework error texts, the reason they mean and the fix to try, in the frameworks' own words
/// (dlpack-matrix.md §1–§2). Matched by substring against the framework's message.
const KNOWN_FAILURES: &[(&str, &str, &str)] = &[
    ("require gradient", "the torch tensor requires grad", "share x.detach(), which views the same memory"),
    ("conjugate bit", "the torch tensor has its conjugate bit set", "share x.resolve_conj()"),
    ("Invalid strides array from DLPack", "TensorFlow takes only compact row-major tensors", "make it contiguous first"),
    ("trivial (compact) striding", "JAX takes only compact layouts or their transposes", "make it contiguous first"),
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
    }
}
