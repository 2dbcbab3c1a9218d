//! One test per rule of dlpack-matrix.md §4 that `predict` encodes, plus the order between them.
use super::*;
use super::prediction::{STANDARD_DTYPES, at_least, base_and_lanes};
use crate::report::{TensorReport, Verdict};

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

/// A cost model of one pair at one place in which each path, given as `(path, seconds, shared)`,
/// costs the same at every size (a sweep of 64 KiB, 1 MiB and 16 MiB).
fn flat_model(source: &str, target: &str, place: &str, paths: &[(&str, f64, bool)]) -> crate::advice::model::CostModel {
    use crate::advice::model::{CostKey, CostModel, Observation};
    let mut m = CostModel::new(serde_json::json!({}), 0.0);
    for &(path, seconds, shared) in paths {
        let key = CostKey { kind: crate::paths::PathKind::Share, path: path.into(), source: source.into(), target: target.into(), place: place.into() };
        let flat = [1u64 << 16, 1 << 20, 1 << 24].iter().map(|&n| Observation { bytes: n, seconds }).collect();
        assert!(m.add(&key, flat, Some(shared)), "{path}");
    }
    m
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
        x64.settings.target.keeps_64_bit = Some(true);
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
    // (An array of 0 bytes has nothing to share: each target's array is its own.)
    let empty = src("torch", "float32", 0, vec![0, 3], vec![1, 0]);
    assert_eq!(predict(&empty, &to("jax")).verdict(), Verdict::Copied);
    assert_eq!(predict(&empty, &to("tf")).verdict(), Verdict::Copied);
}

#[test]
fn rule3_negative_strides_into_torch_are_refused_and_predicted_failed() {
    let reversed = src("numpy", "float32", 0x10000, vec![4, 6], vec![6, -1]);
    assert!(refuse(&reversed, "torch", "dlpack").is_some());
    let p = predict(&reversed, &to("torch"));
    assert_eq!(p.verdict(), Verdict::Failed);
    assert!(p.reason().unwrap().contains("188023") && p.fix().unwrap().contains("ascontiguousarray"));
    // Refused ⇒ predicted failed, for every target and path.
    for d in ["torch", "numpy", "jax", "tf", "cupy"] {
        for path in ["auto", "dlpack", "capsule", "cai"] {
            if refuse(&reversed, d, "dlpack").is_some() {
                assert_eq!(predict(&reversed, &TargetFacts::new(d, "", path)).verdict(), Verdict::Failed);
            }
        }
    }
    // Only crash-class inputs are refused: TF and JAX raise cleanly on bad strides.
    assert!(refuse(&reversed, "tf", "dlpack").is_none() && refuse(&reversed, "jax", "dlpack").is_none());
}

#[test]
fn paddle_refuses_negative_strides_and_takes_read_only_numpy_writable() {
    // Paddle 3.3 (CPU conformance matrix): from_dlpack of x[:, ::-1] read values outside the source.
    let reversed = src("numpy", "float32", 0x10000, vec![4, 6], vec![6, -1]);
    for path in ["dlpack", "capsule"] {
        let r = refuse(&reversed, "paddle", path).expect("refused");
        assert!(r.reason.contains("outside the source") && r.fix.contains("ascontiguousarray"));
        assert_eq!(predict(&reversed, &TargetFacts::new("paddle", "3.3.1", path)).verdict(), Verdict::Failed);
    }
    assert!(refuse(&reversed, "paddle", "host").is_none());
    // paddle.from_dlpack asks for a versioned capsule, so NumPy exports a read-only array, and
    // Paddle's tensor writes through it.
    let mut ro = f32("numpy", 0x10000);
    ro.readonly = true;
    let p = predict(&ro, &to("paddle"));
    assert_eq!(p.verdict(), Verdict::Shared);
    assert!(p.reason().unwrap().contains("paddle can mutate a read-only source"));
    // The capsule path is a legacy capsule: NumPy refuses it.
    assert_eq!(predict(&ro, &TargetFacts::new("paddle", "", "capsule")).verdict(), Verdict::Failed);
    // The host path: paddle.to_tensor has no uint16/32/64 (uint16 would become bfloat16 bits).
    let host = TargetFacts::new("paddle", "3.3.1", "host");
    for dt in ["uint16", "uint32", "uint64"] {
        let p = predict(&src("torch", dt, 0x10000, vec![4, 6], vec![6, 1]), &host);
        assert_eq!(p.verdict(), Verdict::Failed, "{dt}");
        assert!(p.reason().unwrap().contains("paddle has no"));
        let empty = predict(&src("numpy", dt, 0x10000, vec![0, 6], vec![6, 1]), &host);
        assert_eq!(empty.verdict(), Verdict::Failed, "zero-size {dt} fails too");
    }
    assert_eq!(predict(&src("torch", "uint8", 0x10000, vec![4, 6], vec![6, 1]), &host).verdict(), Verdict::Copied);
}

#[test]
fn rule4_device_types() {
    let mut managed = f32("cupy", 0x10000);
    managed.dlpack_device = (13, 0);
    managed.dlpack_device_name = "cuda_managed:0".into();
    assert_eq!(predict(&managed, &to("torch")).expected_error(), Some("Unsupported device_type"));
    assert!(predict(&managed, &to("torch")).fix().unwrap().contains("path='cai'"), "PyTorch takes managed memory by CAI");
    let by_cai = TargetFacts::new("torch", "2.15.0", "cai");
    assert_eq!(predict(&managed, &by_cai).verdict(), Verdict::Shared, "the fix it names is predicted to work");
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
    let numpy_dlpack = TargetFacts::new("numpy", "", "dlpack");
    assert_eq!(predict(&gpu, &numpy_dlpack).expected_error(), Some("Unsupported device in DLTensor"));
    // auto takes the host route there, the one handoff NumPy can take, and says why it copies.
    let auto = predict(&gpu, &to("numpy"));
    assert_eq!(auto.verdict(), Verdict::Copied);
    assert!(auto.reason().unwrap().contains("numpy cannot address device memory"), "{auto:?}");
    assert_eq!(predict(&gpu, &to("cupy")).verdict(), Verdict::Shared);
    assert_eq!(predict(&gpu, &to("tf")).verdict(), Verdict::Shared);
}

#[test]
fn rule5_producer_refuses_a_consumer_kwarg() {
    // TensorFlow's __dlpack__ refuses the stream torch and CuPy pass: gpushare's dlpack route hands
    // them TensorFlow's capsule without one (paths.py), so the handoff shares.
    let tf_gpu = on_cuda(f32("tf", 0x10000), 0);
    for target in ["torch", "cupy"] {
        assert_eq!(predict(&tf_gpu, &TargetFacts::new(target, "", "dlpack")).verdict(), Verdict::Shared, "{target}");
    }
    assert_eq!(predict(&tf_gpu, &TargetFacts::new("torch", "", "capsule")).verdict(), Verdict::Shared);
    // Numba takes TensorFlow's tensors through an interface gpushare writes for them, and
    // TensorFlow takes Numba's arrays through a capsule gpushare makes over their memory.
    assert_eq!(predict(&tf_gpu, &TargetFacts::new("numba", "", "auto")).verdict(), Verdict::Shared);
    let numba_gpu = on_cuda(f32("numba", 0x10000), 0);
    assert_eq!(predict(&numba_gpu, &TargetFacts::new("tf", "", "auto")).verdict(), Verdict::Shared);
    // A TensorFlow tensor TensorFlow keeps in host memory (int32 on a GPU device) has no such interface.
    let tf_host = f32("tf", 0x10000);
    assert_eq!(predict(&tf_host, &TargetFacts::new("numba", "", "auto")).verdict(), Verdict::Failed);
    assert_eq!(predict(&tf_gpu, &to("jax")).verdict(), Verdict::Shared); // JAX passes stream=None for TF
    // CuPy under PTDS passes stream=2, which torch refuses.
    let torch_gpu = on_cuda(f32("torch", 0x10000), 0);
    let mut ptds = to("cupy");
    ptds.settings.target.per_thread_default_stream = true;
    assert_eq!(predict(&torch_gpu, &ptds).expected_error(), Some("per-thread default stream is not supported"));
    assert_eq!(predict(&torch_gpu, &to("cupy")).verdict(), Verdict::Shared);
    // JAX's interface is read-only, which torch refuses; CuPy takes it, and torch takes CuPy's.
    let jax_gpu = on_cuda(f32("jax", 0x10000), 0);
    let via_cai = |target: &str| TargetFacts::new(target, "", "cai");
    assert_eq!(predict(&jax_gpu, &via_cai("torch")).expected_error(), Some("read-only"));
    assert_eq!(predict(&jax_gpu, &via_cai("cupy")).verdict(), Verdict::Shared);
    assert_eq!(predict(&on_cuda(f32("cupy", 0x10000), 0), &via_cai("torch")).verdict(), Verdict::Shared);
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
fn rule7_another_current_device_is_handled_not_a_failure() {
    // gpushare makes the source's device current for every handoff (gpushare.devices), so torch's
    // "different CUDA device index" never reaches a share: whatever device is current, it shares.
    let t = on_cuda(f32("torch", 0x10000), 1);
    for current in [0, 1] {
        let mut facts = to("jax");
        facts.settings.source.current_device = Some(current);
        assert_eq!(predict(&t, &facts).verdict(), Verdict::Shared, "current cuda:{current}");
    }
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
    // An empty tensor (null pointer included) has nothing to share: the judgement's words, on
    // every path, even where JAX would narrow and where the path copies by design.
    let empty = src("torch", "int64", 0, vec![0], vec![1]);
    for path in ["auto", "dlpack", "host", "copy"] {
        let p = predict(&empty, &TargetFacts::new("jax", "", path));
        assert_eq!(p.verdict(), Verdict::Copied, "{path}");
        assert_eq!(p.reason(), Some(crate::explain::NOTHING_TO_SHARE), "{path}");
    }
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
    let auto = |source: &str, target: &str| resolve_path(&f32(source, 0x10000), &TargetFacts::between(source, target, "", "auto")).to_string();
    assert_eq!(auto("torch", "tf"), "capsule");
    assert_eq!(auto("torch", "jax"), "dlpack");
    assert_eq!(auto("numba", "torch"), "cai");
    assert_eq!(auto("numba", "tf"), "capsule");
    assert_eq!(auto("tf", "numba"), "cai");
    // From device memory into NumPy, which cannot address it, auto copies through the host.
    assert_eq!(auto("torch", "numpy"), "dlpack");
    assert_eq!(resolve_path(&on_cuda(f32("torch", 0x10000), 1), &to("numpy")), "host");
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
    // copy makes a compact buffer: broadcast and reversed views are accepted by every target (and
    // not refused into torch); the buffer is no read-only NumPy array.
    let broadcast = src("torch", "float32", 0x10000, vec![4, 6], vec![0, 1]);
    let reversed = src("numpy", "float32", 0x10000, vec![4, 6], vec![-6, 1]);
    for dst in ["jax", "numpy", "tf", "torch"] {
        for (label, x) in [("broadcast", &broadcast), ("reversed", &reversed)] {
            for path in ["copy", "pinned"] {
                let p = predict(x, &TargetFacts::new(dst, "", path));
                assert_eq!(p.verdict(), Verdict::Copied, "{label} into {dst} by {path}: {p:?}");
            }
        }
    }
    assert_eq!(predict(&reversed, &TargetFacts::new("torch", "", "dlpack")).verdict(), Verdict::Failed);
    // A broadcast view whose compact copy would need more than 2**63 bytes cannot be copied.
    let mut huge = src("torch", "float32", 0x10000, vec![1], vec![0]);
    (huge.shape, huge.strides) = (vec![1 << 31, 1 << 31], vec![0, 0]);
    assert_eq!(predict(&huge, &TargetFacts::new("jax", "", "copy")).verdict(), Verdict::Failed);
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
    x64.settings.target.keeps_64_bit = Some(true);
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
            let p = predict(&t, &TargetFacts::between("numba", "jax", "", "auto"));
            assert_eq!(p.verdict(), Verdict::Shared, "{dtype} {t:?}");
            assert!(p.reason().unwrap().contains(&format!("JAX keeps {dtype}")));
        }
    }
    let said = "JaxRuntimeError: UNIMPLEMENTED: Only arrays with trivial (compact) striding are supported; i.e., arrays whose striding represents a transposition of the underlying buffer but not broadcasting.";
    for dtype in ["bool", "int8", "float32", "int64", "complex128"] {
        let sliced = numba(dtype, 0x7f00_0000_0220, vec![2, 4], vec![6, 1]);
        let p = predict(&sliced, &TargetFacts::between("numba", "jax", "", "auto"));
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
    assert_eq!(predict(&empty, &TargetFacts::between("numba", "jax", "", "auto")).verdict(), Verdict::Copied);
    assert!(predict(&empty, &TargetFacts::between("numba", "jax", "", "auto")).reason().unwrap().contains("nothing to share"));
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
    let p = predict(&src("torch", "int64", 0x10000, vec![8], vec![1]), &to("jax")).into_prediction();
    assert_eq!(p.verdict, Verdict::Copied);
    assert!(p.reason.unwrap().contains("x64"));
    assert_eq!(base_and_lanes("float4_e2m1fnx2"), ("float4_e2m1fn", 2));
    assert_eq!(base_and_lanes("complex128"), ("complex128", 1));
    assert_eq!(base_and_lanes("int8x4"), ("int8", 4));
    assert_eq!(base_and_lanes("complex64"), ("complex64", 1));
    assert_eq!(base_and_lanes("complex64x2"), ("complex64", 2));
}

#[test]
fn numpy_cannot_size_a_shape_whose_bytes_overflow_npy_intp() {
    // torch.ones(1).expand(2**31, 2**31): a broadcast view of 4 bytes whose size is 2**64 bytes.
    let t = broadcast("float32", vec![1 << 31, 1 << 31]);
    let p = predict(&t, &to("numpy"));
    assert_eq!(p.verdict(), Verdict::Failed);
    assert_eq!(p.expected_error(), Some("array is too big"));
    // 2**61 one-byte elements fit; the same count of 4-byte ones does not.
    for (dtype, ok) in [("uint8", true), ("float32", false)] {
        let t = broadcast(dtype, vec![1 << 30, 1 << 31]);
        assert_eq!(predict(&t, &to("numpy")).verdict() != Verdict::Failed, ok, "{dtype}");
    }
    // Other consumers size arrays their own way: only NumPy's rule is this one.
    let big = broadcast("float32", vec![1 << 31, 1 << 31]);
    assert_ne!(predict(&big, &to("torch")).expected_error(), Some("array is too big"));
}

/// A broadcast view of one element with a huge shape (its report spans one element).
fn broadcast(dtype: &str, shape: Vec<i64>) -> TensorReport {
    let mut t = src("torch", dtype, 0x10000, vec![1], vec![1]);
    t.strides = vec![0; shape.len()];
    t.shape = shape;
    t.contiguous = false;
    t
}

#[test]
fn one_facts_remembers_auto_per_kind_of_source_and_never_across_kinds() {
    // numpy→torch on a CPU: the capsule is faster, and NumPy refuses a read-only array by one. The
    // facts remember what `auto` took, per source place and read-only flag: a writable array first
    // must not make a read-only one take the capsule, on the host or on a GPU.
    let m = flat_model("numpy", "torch", "cpu", &[("dlpack", 5.2e-6, true), ("capsule", 2.5e-6, true)]);
    let facts = TargetFacts { auto_model: Some(std::sync::Arc::new(m)), ..to("torch") };
    let writable = f32("numpy", 0x1000);
    let mut readonly = f32("numpy", 0x1000);
    readonly.readonly = true;
    for _ in 0..2 {
        assert_eq!(resolve_path(&writable, &facts), "capsule");
        assert_eq!(resolve_path(&readonly, &facts), "dlpack");
        assert_eq!(resolve_path(&on_cuda(writable.clone(), 0), &facts), "dlpack");
    }
    // A copy of the facts answers the same.
    assert_eq!(resolve_path(&readonly, &facts.clone()), "dlpack");
}

#[test]
fn one_facts_remembers_auto_per_range_of_sizes_where_the_model_changes_its_mind() {
    use crate::advice::model::{CostKey, CostModel, Observation};
    // Two copies whose lines cross at 10 000 bytes: 1 µs + 1 ns/B against 10 µs + 0.1 ns/B.
    // Each array takes the path fastest for its own size, asked in either order, again and again.
    // (An int64 array into JAX with x64 off: DLPack copies it, narrowing, as the host route does.
    // Only copies have lines: a handoff that shares moves no bytes and is fitted one cost.)
    let key = |path: &str| CostKey { kind: crate::paths::PathKind::Share, path: path.into(), source: "numpy".into(), target: "jax".into(), place: "cpu".into() };
    let line = |fixed: f64, per_byte: f64| -> Vec<Observation> {
        [1u64 << 10, 1 << 16, 1 << 20].iter().map(|&n| Observation { bytes: n, seconds: fixed + per_byte * n as f64 }).collect()
    };
    let mut m = CostModel::new(serde_json::json!({}), 0.0);
    m.add(&key("dlpack"), line(1e-6, 1e-9), None);
    m.add(&key("host"), line(1e-5, 1e-10), Some(false));
    let facts = TargetFacts { auto_model: Some(std::sync::Arc::new(m)), ..to("jax") };
    let sized = |nbytes: u64| TensorReport { nbytes, ..src("numpy", "int64", 0x1000, vec![nbytes as i64 / 8], vec![1]) };
    assert_eq!(predict(&sized(4096), &TargetFacts { path: "dlpack".into(), ..to("jax") }).verdict(), Verdict::Copied);
    for order in [[4096, 1 << 20, 9_000, 12_000], [12_000, 9_000, 1 << 20, 4096]] {
        let memo = facts.clone();
        for _ in 0..2 {
            for n in order {
                let expected = if n < 10_000 { "dlpack" } else { "host" };
                assert_eq!(resolve_path(&sized(n), &memo), expected, "{n} bytes");
            }
        }
    }
}

#[test]
fn a_strided_array_is_priced_by_the_bytes_of_its_elements_not_by_its_span() {
    use crate::advice::model::{CostKey, CostModel, Observation};
    // Two copies whose lines cross at 10 000 bytes, as in the test above. Every other int64 of
    // 2048 holds 8 KiB and spans 16 KiB: a copy moves its 8 KiB, so `auto` takes the path fastest
    // for 8 KiB, as for a compact array of those 8 KiB.
    let key = |path: &str| CostKey { kind: crate::paths::PathKind::Share, path: path.into(), source: "numpy".into(), target: "jax".into(), place: "cpu".into() };
    let line = |fixed: f64, per_byte: f64| -> Vec<Observation> {
        [1u64 << 10, 1 << 16, 1 << 20].iter().map(|&n| Observation { bytes: n, seconds: fixed + per_byte * n as f64 }).collect()
    };
    let mut m = CostModel::new(serde_json::json!({}), 0.0);
    m.add(&key("copy"), line(1e-6, 1e-9), Some(false));
    m.add(&key("host"), line(1e-5, 1e-10), Some(false));
    let facts = TargetFacts { auto_model: Some(std::sync::Arc::new(m)), ..to("jax") };
    let span = (1023 * 2 + 1) * 8;
    let strided = TensorReport {
        nbytes: span,
        span: (0x1000, 0x1000 + span),
        contiguous: false,
        ..src("numpy", "int64", 0x1000, vec![1024], vec![2])
    };
    assert_eq!((strided.payload_bytes(), strided.nbytes), (8192, 16376));
    // JAX imports no strided view by DLPack: gpushare's own copy and the host's copy it.
    for path in ["copy", "host"] {
        assert_eq!(predict(&strided, &TargetFacts { path: path.into(), ..to("jax") }).verdict(), Verdict::Copied, "{path}");
    }
    assert_eq!(resolve_path(&strided, &facts), "copy");
    // A sweep's other sizes, from this array's description: a 1-d array of that many bytes of
    // elements, of its dtype and stride.
    let resized = strided.resized(1 << 20);
    assert_eq!((resized.payload_bytes(), resized.shape.clone(), resized.strides.clone()), (1 << 20, vec![1 << 17], vec![2]));
    assert_eq!((resized.dtype.as_str(), resized.span.1 - resized.span.0), ("int64", resized.nbytes));
    assert_eq!(resolve_path(&resized, &facts), "host");
}

#[test]
fn a_calibrated_auto_is_decided_on_the_array_and_predicted_for_the_path_it_takes() {
    use crate::report::Verdict;
    // torch→jax on a GPU, calibrated with float32 arrays: cai predicted fastest, both sweeps shared.
    // For an int64 array (x64 off) cai keeps the dtype and DLPack narrows it, and for bfloat16 cai
    // has no typestr: the path each array takes is the one its prediction is made for, and never
    // one the rules predict to fail where another works.
    let m = flat_model("torch", "jax", "cuda:0", &[("dlpack", 20e-6, true), ("cai", 5e-6, true), ("copy", 1e-6, false)]);
    let facts = TargetFacts { auto_model: Some(std::sync::Arc::new(m)), ..to("jax") };
    for dtype in ["float32", "int64", "bfloat16", "int8"] {
        let x = on_cuda(src("torch", dtype, 0x10000, vec![64], vec![1]), 0);
        let chosen = super::auto_for_array(&x, &facts);
        let predicted = predict(&x, &facts);
        let by_path = predict(&x, &TargetFacts { path: chosen.path.into(), ..to("jax") });
        assert_eq!(predicted.verdict(), by_path.verdict(), "{dtype}: auto's prediction is its path's ({})", chosen.path);
        // The best verdict an ordered path gives this array (cai into JAX ignores the producer's
        // stream on a GPU, so auto never takes it there): never a copy where such a path shares.
        let shares = predict(&x, &TargetFacts { path: "dlpack".into(), ..to("jax") }).verdict() == Verdict::Shared;
        assert_ne!(chosen.path, "cai", "{dtype}");
        if shares {
            assert_eq!(predicted.verdict(), Verdict::Shared, "{dtype}: took {}", chosen.path);
            assert_eq!(chosen.path, "dlpack", "{dtype}: the model's word never changes a verdict");
        } else {
            // Nothing ordered shares, and the rules' DLPack copies it: its fit, measured with
            // handoffs that shared (no bytes moved), cannot price this copy, so the model has no
            // word on it and does not overrule it with a copy it can price.
            assert_eq!(predicted.verdict(), Verdict::Copied, "{dtype}");
            assert_eq!(chosen.path, "dlpack", "{dtype}");
        }
    }
}

#[test]
fn a_busy_producer_changes_auto_only_where_the_model_says_and_the_prediction_follows_the_path() {
    // torch→a JAX-like consumer on a GPU whose DLPack import waits on the host for the producer
    // and whose `__cuda_array_interface__` import is ordered on the device: idle, DLPack (20 µs)
    // beats cai (40 µs); busy, DLPack would wait for all the queued work, so `auto` takes cai.
    let m = flat_model("torch", "jax", "cuda:0", &[("dlpack", 20e-6, true), ("cai", 40e-6, true)]);
    let endpoints = crate::paths::Endpoints { target_cai_unordered: false, ..super::fixtures::endpoints("torch", "jax") };
    let idle = TargetFacts { auto_model: Some(std::sync::Arc::new(m)), endpoints, ..to("jax") };
    let mut busy = idle.clone();
    busy.settings.producer_busy = true;
    let x = on_cuda(src("torch", "float32", 0x10000, vec![64], vec![1]), 0);
    assert!(super::auto_follows_producer(&x, &idle));
    assert_eq!(super::auto_for_array(&x, &idle).path, "dlpack");
    let chosen = super::auto_for_array(&x, &busy);
    assert_eq!(chosen.path, "cai");
    assert!(chosen.why.as_deref().is_some_and(|w| w.contains("busy")), "{chosen:?}");
    // The prediction of `auto` for a busy producer is cai's own.
    let by_cai = predict(&x, &TargetFacts { path: "cai".into(), endpoints, ..to("jax") });
    assert_eq!(predict(&x, &busy).reason(), by_cai.reason());
    // Host memory has no queue, and without a model the rules never read the producer.
    let on_host = src("torch", "float32", 0x10000, vec![64], vec![1]);
    assert!(!super::auto_follows_producer(&on_host, &idle));
    assert!(!super::auto_follows_producer(&x, &TargetFacts { endpoints, ..to("jax") }));
    // A consumer whose interface import ignores the producer's stream (JAX as measured): cai is
    // never taken on a GPU, so the producer's state changes nothing and is not asked.
    let jax = TargetFacts { endpoints: super::fixtures::endpoints("torch", "jax"), auto_memo: Default::default(), ..idle.clone() };
    assert!(!super::auto_follows_producer(&x, &jax));
}

#[test]
fn a_rules_path_whose_fit_cannot_price_this_array_is_not_overruled() {
    use crate::advice::model::{CostKey, CostModel, Observation};
    // A model whose sweep of numpy→torch by DLPack copied (a cache file that says so, or a sweep
    // of arrays DLPack copied) prices DLPack by the byte; a float32 array that DLPack shares is
    // not priced by that line, so the model has no word on DLPack for it and does not overrule
    // the rules' DLPack, whatever it says of the capsule (advise alike).
    let key = |path: &str| CostKey { kind: crate::paths::PathKind::Share, path: path.into(), source: "numpy".into(), target: "torch".into(), place: "cpu".into() };
    let sizes = [1u64 << 12, 1 << 16, 1 << 20];
    let mut m = CostModel::new(serde_json::json!({}), 0.0);
    m.add(&key("dlpack"), sizes.iter().map(|&n| Observation { bytes: n, seconds: 1e-3 + n as f64 * 1e-6 }).collect(), Some(false));
    m.add(&key("capsule"), sizes.iter().map(|&n| Observation { bytes: n, seconds: 1e-6 }).collect(), Some(true));
    let facts = TargetFacts { auto_model: Some(std::sync::Arc::new(m)), ..to("torch") };
    let x = TensorReport { nbytes: 1 << 18, ..f32("numpy", 0x10000) };
    assert_eq!(super::auto_for_array(&x, &facts).path, "dlpack");
    assert_eq!(predict(&x, &facts).verdict(), Verdict::Shared);
}

#[test]
fn a_calibrated_auto_remembered_under_one_current_device_is_not_reused_under_another() {
    // A JAX array on cuda:1 into CuPy, with a model that prices `cai` fastest. While cuda:1 is
    // current, `cai` shares and `auto` takes it. With cuda:0 current, CuPy's `cai` import copies
    // the array to cuda:0, and `auto` must take a path that still shares, although the array is of
    // the same kind as the one whose `auto` was remembered.
    let m = flat_model("jax", "cupy", "cuda:1", &[("dlpack", 20e-6, true), ("cai", 5e-6, true)]);
    let facts = TargetFacts { auto_model: Some(std::sync::Arc::new(m)), ..TargetFacts::between("jax", "cupy", "14.2.0", "auto") };
    let (mut cuda_1_current, mut cuda_0_current) = (facts.clone(), facts.clone());
    cuda_1_current.settings.target.current_device = Some(1);
    cuda_0_current.settings.target.current_device = Some(0);
    let x = on_cuda(src("jax", "float32", 0x10000, vec![64], vec![1]), 1);
    for _ in 0..2 {
        assert_eq!(super::auto_for_array(&x, &cuda_1_current).path, "cai");
        assert_eq!(predict(&x, &cuda_1_current).verdict(), Verdict::Shared);
        let chosen = super::auto_for_array(&x, &cuda_0_current);
        assert_ne!(chosen.path, "cai", "{chosen:?}");
        assert_eq!(predict(&x, &cuda_0_current).verdict(), Verdict::Shared, "{chosen:?}");
    }
}

#[test]
fn a_decision_is_remembered_per_kind_of_array_and_worked_out_again_for_another_kind_or_setting() {
    let memo = super::DecisionMemo::default();
    let facts = to("cupy");
    let worked_out = std::cell::Cell::new(0);
    let decide = |x: &TensorReport, facts: &TargetFacts| {
        memo.decide(x, facts, || {
            worked_out.set(worked_out.get() + 1);
            super::Decision { chosen: super::auto_for_array(x, facts), predicted: predict(x, facts) }
        })
    };
    let x = on_cuda(f32("torch", 0x10000), 0);
    let first = decide(&x, &facts);
    // Another array of the same kind (another address, the same alignment): remembered.
    assert_eq!(decide(&on_cuda(f32("torch", 0x20000), 0), &facts), first);
    assert_eq!(worked_out.get(), 1);
    // Another dtype, another device, another current device: each worked out, and each answer
    // is the one the rules give it.
    let int64 = on_cuda(src("torch", "int64", 0x10000, vec![4, 6], vec![6, 1]), 0);
    let on_1 = on_cuda(f32("torch", 0x10000), 1);
    let mut current_1 = facts.clone();
    current_1.settings.target.current_device = Some(1);
    for (x, facts) in [(&int64, &facts), (&on_1, &facts), (&x, &current_1)] {
        let decided = decide(x, facts);
        assert_eq!(*decided, super::Decision { chosen: super::auto_for_array(x, facts), predicted: predict(x, facts) });
    }
    assert_eq!(worked_out.get(), 4);
}
