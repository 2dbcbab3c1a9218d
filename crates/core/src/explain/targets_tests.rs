//! The rules of MLX, Warp and cuda.core as targets (targets.rs), the refusal of a DLPack
//! byte_offset into Paddle and Warp, and PyCUDA's endpoints, each as the CPU conformance matrix
//! measured it (mlx 0.32.4, warp-lang 1.19.0, cuda-core 1.2.2, paddle 3.3.1).
use super::*;
use crate::report::{TensorReport, Verdict};

fn src(framework: &str, dtype: &str, shape: Vec<i64>, strides: Vec<i64>) -> TensorReport {
    let numel: u64 = shape.iter().map(|d| *d as u64).product();
    TensorReport {
        framework: framework.into(),
        dtype: dtype.into(),
        shape,
        strides,
        device: "cpu".into(),
        dlpack_device: (1, 0),
        dlpack_device_name: "cpu:0".into(),
        data_ptr: 0x10000,
        byte_offset: 0,
        nbytes: numel * 4,
        span: (0x10000, 0x10000 + numel * 4),
        contiguous: true,
        alignment: 64,
        readonly: false,
        dlpack_version: None,
        cuda: None,
    }
}

fn f32(framework: &str) -> TensorReport {
    src(framework, "float32", vec![4, 6], vec![6, 1])
}

fn to(framework: &str) -> TargetFacts {
    TargetFacts::new(framework, "", "auto")
}

#[test]
fn mlx_copies_every_cpu_import_and_narrows_64_bit_floats() {
    let p = predict(&f32("torch"), &to("mlx"));
    assert_eq!(p.verdict(), Verdict::Copied);
    assert!(p.reason().unwrap().contains("copies every array"), "{p:?}");
    let p = predict(&src("numpy", "float64", vec![4, 6], vec![6, 1]), &to("mlx"));
    assert!(p.reason().unwrap().contains("float64 → float32"), "{p:?}");
    let p = predict(&src("numpy", "float32", vec![4, 6], vec![6, -1]), &to("mlx"));
    assert_eq!(p.expected_error(), Some("negative strides"), "{p:?}");
    // Out of MLX: its legacy capsule shares like any other.
    assert_eq!(predict(&f32("mlx"), &to("torch")).verdict(), Verdict::Shared);
}

#[test]
fn warp_has_no_complex_and_no_0_d_arrays_and_writes_read_only_sources() {
    let p = predict(&src("torch", "complex64", vec![4, 6], vec![6, 1]), &to("warp"));
    assert_eq!(p.expected_error(), Some("does not support complex types"), "{p:?}");
    let p = predict(&src("numpy", "float32", vec![], vec![]), &to("warp"));
    assert_eq!(p.verdict(), Verdict::Failed, "{p:?}");
    assert_eq!(predict(&f32("torch"), &to("warp")).verdict(), Verdict::Shared);
    // Warp asks for a legacy capsule: NumPy will not put a read-only array in one.
    let mut ro = f32("numpy");
    ro.readonly = true;
    assert_eq!(predict(&ro, &to("warp")).expected_error(), Some("Cannot export readonly array"));
    let mut ro_torch = f32("jax");
    ro_torch.readonly = true;
    assert!(predict(&ro_torch, &to("warp")).reason().unwrap().contains("can mutate a read-only source"));
}

#[test]
fn cuda_core_asks_for_versioned_capsules_and_refuses_bfloat16() {
    let mut ro = f32("numpy");
    ro.readonly = true;
    assert_eq!(predict(&ro, &to("cuda_core")), PredictedOutcome::Shared { note: None });
    let p = predict(&src("torch", "bfloat16", vec![4, 6], vec![6, 1]), &to("cuda_core"));
    assert_eq!(p.expected_error(), Some("Unsupported dtype"), "{p:?}");
    // Paddle's host tensors have no device id; the dtype is not looked at before that.
    let p = predict(&src("paddle", "bfloat16", vec![4, 6], vec![6, 1]), &to("cuda_core"));
    assert_eq!(p.expected_error(), Some("an integer is required"), "{p:?}");
    let p = predict(&src("warp", "bfloat16", vec![4, 6], vec![6, 1]), &to("numpy"));
    assert_eq!(p.expected_error(), Some("attempted to fetch exception but none was set"), "{p:?}");
}

#[test]
fn a_byte_offset_is_refused_into_paddle_and_warp_and_told_to_tensorflow() {
    let mut slice = src("mlx", "float32", vec![2, 4], vec![6, 1]);
    slice.byte_offset = 32;
    for target in ["paddle", "warp"] {
        let r = refuse(&slice, target, "auto").expect(target);
        assert!(r.reason.contains("byte_offset of 32"), "{r:?}");
    }
    assert!(refuse(&slice, "torch", "auto").is_none());
    // TensorFlow checks the offset before the strides.
    assert_eq!(predict(&slice, &to("tf")).expected_error(), Some("Unsupported byte_offset"));
}

#[test]
fn pycuda_speaks_the_cuda_array_interface_only() {
    let e = known_endpoints("pycuda", "pycuda");
    assert!(!e.source_exports_dlpack && !e.target_accepts_objects && !e.target_accepts_capsules);
    assert!(!known_endpoints("torch", "cuda_core").target_accepts_capsules);
    let mut gpu = f32("pycuda");
    gpu.dlpack_device = (2, 0);
    assert_eq!(resolve_auto_for(&gpu, "torch", None), "cai");
}

#[test]
fn explicit_paths_that_the_new_targets_do_not_take_fail_as_predicted() {
    let path = |p: &str, t: &str| TargetFacts::new(t, "", p);
    // cuda.core takes objects, not raw capsules; PyCUDA no DLPack at all; MLX no interface.
    assert_eq!(predict(&f32("torch"), &path("capsule", "cuda_core")).verdict(), Verdict::Failed);
    assert_eq!(predict(&f32("torch"), &path("dlpack", "pycuda")).verdict(), Verdict::Failed);
    let mut gpu = f32("torch");
    gpu.dlpack_device = (2, 0);
    assert_eq!(predict(&gpu, &path("cai", "mlx")).verdict(), Verdict::Failed);
    assert_eq!(predict(&gpu, &path("cai", "cuda_core")).verdict(), Verdict::Shared);
    // The host route's constructors: no complex in Warp, no complex128 in MLX, no 0-d Warp arrays.
    let complex = src("torch", "complex64", vec![0, 6], vec![6, 1]);
    assert_eq!(predict(&complex, &path("host", "warp")).verdict(), Verdict::Failed, "before the zero-size rule");
    let c128 = src("torch", "complex128", vec![4, 6], vec![6, 1]);
    assert_eq!(predict(&c128, &path("host", "mlx")).verdict(), Verdict::Failed);
    assert_eq!(predict(&src("torch", "float32", vec![], vec![]), &path("host", "warp")).verdict(), Verdict::Failed);
    assert_eq!(predict(&f32("torch"), &path("host", "warp")).verdict(), Verdict::Copied);
}
