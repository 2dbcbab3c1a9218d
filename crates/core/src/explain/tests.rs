use super::*;
use crate::report::{TensorReport, Verdict};

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
fn a_zero_size_array_labelled_with_another_device_moved_nothing() {
    // Numba labels a view with its current device; a zero-size one has no bytes to place.
    let src = t("torch", 0, vec![0], vec![1], (2, 0));
    let dst = t("numba", 0, vec![0], vec![1], (2, 1));
    let j = judge(&src, &dst);
    assert_eq!(j.verdict, Verdict::Copied, "{:?}", j.reason);
    assert_eq!(j.reason.as_deref(), Some(NOTHING_TO_SHARE));
}

#[test]
fn a_peer_view_is_shared_and_its_wrong_label_is_flagged() {
    // A Numba view of a cuda:1 tensor's memory while cuda:0 is current: same pointer, and Numba
    // labels it cuda:0 because its interface carries no ordinal.
    let mut src = t("torch", 0x7f00_0000_0000, vec![1024], vec![1], (2, 1));
    let mut dst = t("numba", 0x7f00_0000_0000, vec![1024], vec![1], (2, 0));
    let attrs = serde_json::json!({"buffer_id": 42, "memory_type": "device", "device_ordinal": 1});
    src.cuda = Some(std::sync::Arc::new(attrs.clone()));
    dst.cuda = Some(std::sync::Arc::new(attrs));
    let j = judge(&src, &dst);
    assert_eq!(j.verdict, Verdict::Shared, "{j:?}");
    let notes = j.notes.join(" | ");
    assert!(notes.contains("device memory of cuda:1"), "{notes}");
    assert!(notes.contains("labels the array cuda:0") && notes.contains("peer access"), "{notes}");
    assert!(notes.contains("no device ordinal"), "{notes}");
    // Another allocation at another device is a copy, whatever the labels.
    dst.cuda = Some(std::sync::Arc::new(serde_json::json!({"buffer_id": 43, "memory_type": "device", "device_ordinal": 0})));
    assert!(judge(&src, &dst).reason.unwrap().starts_with("device changed"));
    // Without the driver's word, labels decide: a copy.
    dst.cuda = None;
    assert_eq!(judge(&src, &dst).verdict, Verdict::Copied);
}

#[test]
fn pinned_host_memory_viewed_from_the_gpu_is_shared() {
    let src = t("torch", 0x5000_0000, vec![256], vec![1], (1, 0));
    let mut dst = t("jax", 0x5000_0000, vec![256], vec![1], (2, 0));
    dst.cuda = Some(std::sync::Arc::new(serde_json::json!({"buffer_id": 9, "memory_type": "pinned_host", "device_ordinal": 0})));
    let j = judge(&src, &dst);
    assert_eq!(j.verdict, Verdict::Shared, "{j:?}");
    assert!(j.notes.iter().any(|n| n.contains("page-locked host memory")), "{:?}", j.notes);
    assert!(j.notes.iter().any(|n| n.contains("host link")), "{:?}", j.notes);
    // Pageable memory at the same address is not reachable from the GPU: the labels decide.
    dst.cuda = Some(std::sync::Arc::new(serde_json::json!({"buffer_id": 0, "memory_type": "pageable_host", "device_ordinal": -2})));
    assert_eq!(judge(&src, &dst).verdict, Verdict::Copied);
    // A different page-locked buffer elsewhere is a copy.
    let mut elsewhere = t("jax", 0x9000_0000, vec![256], vec![1], (2, 0));
    elsewhere.cuda = Some(std::sync::Arc::new(serde_json::json!({"buffer_id": 10, "memory_type": "pinned_host", "device_ordinal": 0})));
    assert_eq!(judge(&src, &elsewhere).verdict, Verdict::Copied);
}

#[test]
fn cuda_buffer_ids_decide_when_present() {
    let mut a = t("torch", 0x1000, vec![4], vec![1], (2, 0));
    let mut b = a.clone();
    a.cuda = Some(std::sync::Arc::new(serde_json::json!({"buffer_id": 7})));
    b.cuda = Some(std::sync::Arc::new(serde_json::json!({"buffer_id": 8})));
    assert_eq!(judge(&a, &b).verdict, Verdict::Copied);
    b.cuda = Some(std::sync::Arc::new(serde_json::json!({"buffer_id": 7})));
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
    assert_eq!(j.verdict, Verdict::Copied);
    assert_eq!(j.reason.as_deref(), Some(NOTHING_TO_SHARE));
    // A path that copies by design keeps the zero-size words: there was nothing to copy either.
    let j = judge_handoff(crate::paths::PathKind::Share, "host", Sides::Here { source: &a, target: &b });
    assert_eq!((j.verdict, j.reason.as_deref()), (Verdict::Copied, Some(NOTHING_TO_SHARE)));
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
    a.cuda = Some(std::sync::Arc::new(serde_json::json!({"buffer_id": 7})));
    b.cuda = Some(std::sync::Arc::new(serde_json::json!({"buffer_id": 8})));
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
    assert!(refuse(&neg, "torch", "dlpack").unwrap().reason.contains("188023"));
    assert!(refuse(&neg, "numpy", "dlpack").is_none());
    // TF and JAX raise cleanly on layouts they cannot take: predicted failed, not refused.
    let tr = t("torch", 0x1000, vec![4, 3], vec![1, 4], (1, 0));
    assert!(refuse(&tr, "tf", "dlpack").is_none());
    let bc = t("numpy", 0x1000, vec![4, 3], vec![0, 1], (1, 0));
    assert!(refuse(&bc, "jax", "dlpack").is_none());
}
