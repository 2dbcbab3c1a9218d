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
fn cuda_core_asks_for_versioned_capsules_views_bfloat16_and_refuses_float8() {
    let mut ro = f32("numpy");
    ro.readonly = true;
    assert_eq!(predict(&ro, &to("cuda_core")), PredictedOutcome::Shared { note: None });
    // StridedMemoryView.from_dlpack views bfloat16 (its dtype from ml_dtypes); float8 it refuses.
    let p = predict(&src("torch", "bfloat16", vec![4, 6], vec![6, 1]), &to("cuda_core"));
    assert_eq!(p.verdict(), Verdict::Shared, "{p:?}");
    let p = predict(&src("torch", "float8_e5m2", vec![4, 6], vec![6, 1]), &to("cuda_core"));
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
    let e = super::fixtures::endpoints("pycuda", "pycuda");
    assert!(!e.source_exports_dlpack && !e.target_accepts_objects && !e.target_accepts_capsules);
    assert!(!super::fixtures::endpoints("torch", "cuda_core").target_accepts_capsules);
    let mut gpu = f32("pycuda");
    gpu.dlpack_device = (2, 0);
    assert_eq!(resolve_auto_with(&gpu, "torch", super::fixtures::endpoints("pycuda", "torch"), None), "cai");
    // Into TensorFlow (capsules only) auto takes a capsule gpushare makes from the interface, as
    // from Numba: it shares (on an H100, 56 cells predicted failed that shared). A consumer
    // asking the PyCUDA array itself for __dlpack__ finds none.
    assert_eq!(resolve_auto_with(&gpu, "tf", super::fixtures::endpoints("pycuda", "tf"), None), "capsule");
    let to_tf = |p: &str| TargetFacts::new("tf", "", p);
    assert_eq!(predict(&gpu, &to_tf("capsule")).verdict(), Verdict::Shared);
    assert_eq!(predict(&gpu, &to_tf("auto")).verdict(), Verdict::Shared);
    assert_eq!(predict(&gpu, &TargetFacts::new("torch", "", "dlpack")).verdict(), Verdict::Failed);
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

// -- What the CUDA matrix saw on 2x H200 (mlx 0.32.4 with mlx-cuda-13, warp 1.19.0, PyCUDA 2026.1) --

fn on_cuda(mut report: TensorReport) -> TensorReport {
    report.dlpack_device = (2, 0);
    report.device = "cuda:0".into();
    report.dlpack_device_name = "cuda:0".into();
    report
}

#[test]
fn mlx_refuses_cuda_memory_before_its_strides_and_its_narrowing() {
    let at = |version: &str| TargetFacts::new("mlx", version, "auto");
    for dtype in ["float32", "float64", "bool"] {
        for version in ["0.32.4", "0.32.2", ""] {
            let p = predict(&on_cuda(src("torch", dtype, vec![4, 6], vec![6, 1])), &at(version));
            assert_eq!(p.verdict(), Verdict::Failed, "{dtype} {version}: {p:?}");
            assert_eq!(p.expected_error(), Some("CUDA import is not supported"), "{p:?}");
            assert!(p.fix().unwrap().contains("path='host'"), "{p:?}");
        }
    }
    // The device comes before the strides (CuPy's reversed view said "CUDA import" on the H200).
    let reversed = on_cuda(src("cupy", "int8", vec![4, 6], vec![6, -1]));
    assert_eq!(predict(&reversed, &at("0.32.4")).expected_error(), Some("CUDA import is not supported"));
    // Managed memory is refused in the same words; a zero-size view cuda.core describes as host
    // memory is not CUDA memory to MLX (it took it on the H200; 0 bytes: nothing to share).
    let mut managed = f32("torch");
    managed.dlpack_device = (13, 0);
    assert_eq!(predict(&managed, &at("0.32.4")).expected_error(), Some("CUDA import is not supported"));
    assert_eq!(predict(&src("cuda_core", "float32", vec![0, 6], vec![6, 1]), &at("0.32.4")).verdict(), Verdict::Copied);
    // The fix works: the host route copies into MLX's own array.
    let host = TargetFacts::new("mlx", "0.32.4", "host");
    assert_eq!(predict(&on_cuda(f32("torch")), &host).verdict(), Verdict::Copied);
    // A release after the newest measured one is assumed to import CUDA memory.
    assert_eq!(predict(&on_cuda(f32("torch")), &at("0.33.0")).verdict(), Verdict::Shared);
    // MLX as a source is unchanged: its CUDA build exports host memory (kDLCPU), which torch views.
    assert_eq!(predict(&f32("mlx"), &to("torch")).verdict(), Verdict::Shared);
}

#[test]
fn complex_into_warp_by_the_interface_says_it_has_no_warp_type() {
    for source in ["numba", "pycuda"] {
        let p = predict(&on_cuda(src(source, "complex64", vec![4, 6], vec![6, 1])), &TargetFacts::between(source, "warp", "", "auto"));
        assert_eq!(p.verdict(), Verdict::Failed, "{p:?}");
        assert_eq!(p.expected_error(), Some("to a Warp type"), "{source}: {p:?}");
    }
    // By DLPack wp.from_dlpack says it in its own words.
    let p = predict(&on_cuda(src("torch", "complex64", vec![4, 6], vec![6, 1])), &to("warp"));
    assert_eq!(p.expected_error(), Some("does not support complex types"), "{p:?}");
}

#[test]
fn warp_bfloat16_is_refused_to_interface_consumers_which_would_read_uint16() {
    let bf16 = on_cuda(src("warp", "bfloat16", vec![4, 6], vec![6, 1]));
    for target in ["numba", "pycuda"] {
        // auto takes __cuda_array_interface__ into both (they import nothing else).
        let r = refuse(&bf16, target, "cai").expect(target);
        assert!(r.reason.contains("'<u2'"), "{r:?}");
        let p = predict(&bf16, &to(target));
        assert_eq!(p.verdict(), Verdict::Failed, "{p:?}");
        assert!(p.reason().unwrap().contains("gpushare refuses it"), "{p:?}");
    }
    // Zero-size too: the interface mislabels it all the same (the H200 shared one, predicted failed).
    assert!(refuse(&on_cuda(src("warp", "bfloat16", vec![0, 6], vec![6, 1])), "numba", "cai").is_some());
    // By DLPack bfloat16 is bfloat16; float32 by the interface is float32.
    assert!(refuse(&bf16, "torch", "dlpack").is_none());
    assert!(refuse(&on_cuda(f32("warp")), "numba", "cai").is_none());
}

#[test]
fn pycuda_without_a_current_context_fails_and_with_one_shares() {
    let gpu = on_cuda(f32("torch"));
    let mut none = to("pycuda");
    none.settings.target.has_current_context = Some(false);
    let p = predict(&gpu, &none);
    assert_eq!(p.verdict(), Verdict::Failed, "{p:?}");
    assert!(p.reason().unwrap().contains("no current CUDA context"), "{p:?}");
    assert!(p.fix().unwrap().contains("pycuda.autoprimaryctx"), "{p:?}");
    // The host route and gpushare's copies make a GPUArray too: they need the context as well.
    for path in ["host", "copy"] {
        let mut staged = TargetFacts::new("pycuda", "", path);
        staged.settings.target.has_current_context = Some(false);
        assert_eq!(predict(&gpu, &staged).verdict(), Verdict::Failed, "{path}");
    }
    let mut current = to("pycuda");
    current.settings.target.has_current_context = Some(true);
    assert_eq!(predict(&gpu, &current).verdict(), Verdict::Shared);
    // A reversed or broadcast view shares too: GPUArray takes any strides.
    let reversed = on_cuda(src("cupy", "int8", vec![4, 6], vec![6, -1]));
    assert_eq!(predict(&reversed, &current).verdict(), Verdict::Shared);
    // Another framework's context is no answer: the rule reads PyCUDA's own fact only.
    let mut other = to("torch");
    other.settings.target.has_current_context = Some(false);
    assert_eq!(predict(&gpu, &other).verdict(), Verdict::Shared);
}

#[test]
fn only_the_facts_a_rule_reads_are_read() {
    use crate::explain::{LiveFact, rule_reads};
    assert!(rule_reads(LiveFact::Keeps64Bit, &src("numpy", "int64", vec![4, 6], vec![6, 1])));
    assert!(!rule_reads(LiveFact::Keeps64Bit, &f32("numpy")));
    assert!(!rule_reads(LiveFact::CurrentDevice, &f32("torch")));
    assert!(rule_reads(LiveFact::CurrentDevice, &on_cuda(f32("torch"))));
}


#[test]
fn paddle_labels_uint16_as_bfloat16_and_a_share_says_so() {
    // paddle.from_dlpack of a uint16 array: a tensor labelled bfloat16 over the same bytes.
    let u16 = src("numpy", "uint16", vec![4, 6], vec![6, 1]);
    for path in ["auto", "dlpack", "capsule"] {
        let p = predict(&u16, &TargetFacts::new("paddle", "3.3.1", path));
        assert_eq!(p.verdict(), Verdict::Shared, "{path}");
        let note = p.reason().unwrap_or_default();
        assert!(note.contains("labels the array bfloat16, not uint16"), "{path}: {note}");
    }
    // Other dtypes keep their label; other targets keep uint16.
    assert_eq!(predict(&src("numpy", "int16", vec![4, 6], vec![6, 1]), &to("paddle")).reason(), None);
    assert_eq!(predict(&u16, &to("torch")).reason(), None);
    // The judgement of the result: shared, with the same words.
    let mut target = u16.clone();
    target.framework = "paddle".into();
    target.dtype = "bfloat16".into();
    let j = judge(&u16, &target);
    assert_eq!(j.verdict, Verdict::Shared);
    assert!(j.notes.iter().any(|n| n.contains("labels the array bfloat16, not uint16") && n.contains("arithmetic on it fails")), "{:?}", j.notes);
    // A target that keeps the source's dtype says nothing of labels.
    target.dtype = "uint16".into();
    assert!(judge(&u16, &target).notes.is_empty());
}

#[test]
fn a_bare_capsule_goes_where_the_raw_call_takes_one() {
    let legacy = f32("capsule");
    let mut versioned = f32("capsule");
    versioned.dlpack_version = Some((1, 1));
    let dlpack = |d: &str| TargetFacts::new(d, "", "dlpack");
    for d in ["jax", "numpy", "cuda_core"] {
        let p = predict(&legacy, &dlpack(d));
        assert_eq!(p.verdict(), Verdict::Failed, "{d}");
        assert!(p.reason().unwrap().contains("bare DLPack capsule"), "{d}: {p:?}");
        assert!(p.expected_error().is_some(), "{d}");
    }
    assert_eq!(predict(&versioned, &dlpack("warp")).verdict(), Verdict::Failed);
    assert_ne!(predict(&legacy, &dlpack("warp")).verdict(), Verdict::Failed);
    for d in ["torch", "paddle"] {
        assert_eq!(predict(&versioned, &dlpack(d)).verdict(), Verdict::Shared, "{d}");
    }
    // A producer of no known framework ("unknown") is an object: the general rules.
    assert_eq!(predict(&f32("unknown"), &dlpack("jax")).verdict(), Verdict::Shared);
}

#[test]
fn mlx_refuses_a_negative_stride_even_on_an_axis_of_one() {
    let p = predict(&src("numpy", "float32", vec![1, 6], vec![-6, 1]), &to("mlx"));
    assert_eq!(p.expected_error(), Some("negative strides"), "{p:?}");
}

#[test]
fn warp_refuses_more_than_four_dimensions_and_int32_overflowing_shapes() {
    let five = src("torch", "float32", vec![1, 1, 1, 1, 2], vec![2, 2, 2, 2, 1]);
    for path in ["auto", "dlpack"] {
        let p = predict(&five, &TargetFacts::new("warp", "", path));
        assert_eq!(p.expected_error(), Some("the maximum number of dimensions is 4"), "{p:?}");
    }
    assert_eq!(predict(&five, &TargetFacts::new("warp", "", "host")).verdict(), Verdict::Failed);
    let long = src("torch", "float32", vec![1 << 31], vec![0]);
    assert_eq!(predict(&long, &to("warp")).expected_error(), Some("signed 32-bit integer"));
    let longest_allowed = src("torch", "float32", vec![(1 << 31) - 1], vec![0]);
    assert_ne!(predict(&longest_allowed, &to("warp")).verdict(), Verdict::Failed);
    let four = src("torch", "float32", vec![1, 1, 1, 2], vec![2, 2, 2, 1]);
    assert_ne!(predict(&four, &to("warp")).verdict(), Verdict::Failed);
}

#[test]
fn cupy_copies_an_interface_of_another_device_to_its_current_one() {
    let mut on_1 = f32("jax");
    on_1.dlpack_device = (2, 1);
    on_1.device = "cuda:1".into();
    on_1.dlpack_device_name = "cuda:1".into();
    let mut cai = TargetFacts::new("cupy", "14.2.0", "cai");
    cai.settings.target.current_device = Some(0);
    let p = predict(&on_1, &cai);
    assert_eq!(p.verdict(), Verdict::Copied, "{p:?}");
    assert!(p.reason().unwrap().starts_with("device changed: cuda:1 → cuda:0"), "{p:?}");
    // By DLPack CuPy makes the producer's device current: shared. On CuPy's current device: shared.
    let mut dlpack = cai.clone();
    dlpack.path = "dlpack".into();
    assert_eq!(predict(&on_1, &dlpack).verdict(), Verdict::Shared);
    cai.settings.target.current_device = Some(1);
    assert_eq!(predict(&on_1, &cai).verdict(), Verdict::Shared);
    // gpushare makes a torch tensor's device current around the import.
    cai.settings.target.current_device = Some(0);
    let mut torch_on_1 = on_1.clone();
    torch_on_1.framework = "torch".into();
    assert_eq!(predict(&torch_on_1, &cai).verdict(), Verdict::Shared);
}
