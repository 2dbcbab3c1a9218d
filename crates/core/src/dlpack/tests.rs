//! Capsule contents built in the test: legacy and versioned, offsets, strides, every dtype code.

use super::*;
use dlpark::ffi::{DLDataType, DLDataTypeCode, DLDevice, DLDeviceType, DLPackVersion};

struct Owned {
    shape: Vec<i64>,
    strides: Option<Vec<i64>>,
}

fn tensor(o: &mut Owned, data: usize, offset: u64, code: u8, bits: u8, lanes: u16, dev: u32) -> DLTensor {
    DLTensor {
        data: data as *mut _,
        device: DLDevice { device_type: DLDeviceType(dev), device_id: 0 },
        ndim: o.shape.len() as i32,
        dtype: DLDataType { code: DLDataTypeCode(code), bits, lanes },
        shape: o.shape.as_mut_ptr(),
        strides: o.strides.as_mut().map_or(std::ptr::null_mut(), |s| s.as_mut_ptr()),
        byte_offset: offset,
    }
}

#[test]
fn legacy_compact_without_strides() {
    let mut o = Owned { shape: vec![3, 4], strides: None };
    let m = DLManagedTensor { dl_tensor: tensor(&mut o, 0x1000, 0, 2, 32, 1, 1), manager_ctx: std::ptr::null_mut(), deleter: None };
    let l = unsafe { read_legacy(&m) }.unwrap();
    assert_eq!(l.dtype.name(), "float32");
    assert_eq!(l.strides, vec![4, 1]);
    assert!(!l.explicit_strides);
    assert_eq!(l.numel, 12);
    assert_eq!(l.nbytes(), 48);
    assert!(l.contiguous);
    assert_eq!(l.alignment, 256);
    assert_eq!(l.version, None);
    assert!(!l.readonly);
}

#[test]
fn versioned_read_only_flag_and_version() {
    let mut o = Owned { shape: vec![5], strides: Some(vec![1]) };
    let m = DLManagedTensorVersioned {
        version: DLPackVersion { major: 1, minor: 2 },
        manager_ctx: std::ptr::null_mut(),
        deleter: None,
        flags: dlpark::DlpackFlags::READ_ONLY,
        dl_tensor: tensor(&mut o, 0x2000, 0, 0, 64, 1, 1),
    };
    let l = unsafe { read_versioned(&m) }.unwrap();
    assert!(l.readonly);
    assert_eq!(l.version, Some((1, 2)));
    assert_eq!(l.dtype.name(), "int64");
}

#[test]
fn byte_offset_is_applied_to_address_and_alignment() {
    let mut o = Owned { shape: vec![4], strides: Some(vec![1]) };
    let t = tensor(&mut o, 0x1000, 12, 2, 32, 1, 1);
    let l = unsafe { read_tensor(&t, 0, None) }.unwrap();
    assert_eq!(l.base_ptr, 0x1000);
    assert_eq!(l.data_ptr, 0x100c);
    assert_eq!(l.alignment, 4);
    assert_eq!((l.span_start, l.span_end), (0x100c, 0x100c + 16));
}

#[test]
fn strided_slice_spans_its_extent_not_numel() {
    // torch x[10:20, :50] of a 100x100 float32: shape [10, 50], strides [100, 1].
    let mut o = Owned { shape: vec![10, 50], strides: Some(vec![100, 1]) };
    let t = tensor(&mut o, 0x10000, 0, 2, 32, 1, 2);
    let l = unsafe { read_tensor(&t, 0, None) }.unwrap();
    assert_eq!(l.nbytes(), ((9 * 100 + 49) + 1) * 4);
    assert!(!l.contiguous);
    assert!(!l.is_permuted_compact());
    assert_eq!(l.device_name(), "cuda");
}

#[test]
fn transpose_is_permuted_compact_but_not_contiguous() {
    let mut o = Owned { shape: vec![4, 3], strides: Some(vec![1, 4]) };
    let l = unsafe { read_tensor(&tensor(&mut o, 0x1000, 0, 2, 64, 1, 1), 0, None) }.unwrap();
    assert!(!l.contiguous);
    assert!(l.is_permuted_compact());
    assert_eq!(l.nbytes(), 96);
}

#[test]
fn negative_strides_extend_below_the_data_pointer() {
    // a[::-1] of 5 int32 at 0x1000: data points at the last element.
    let mut o = Owned { shape: vec![5], strides: Some(vec![-1]) };
    let l = unsafe { read_tensor(&tensor(&mut o, 0x1010, 0, 0, 32, 1, 1), 0, None) }.unwrap();
    assert!(l.has_negative_stride());
    assert_eq!((l.span_start, l.span_end), (0x1000, 0x1014));
}

#[test]
fn zero_stride_broadcast_spans_one_element() {
    let mut o = Owned { shape: vec![1000], strides: Some(vec![0]) };
    let l = unsafe { read_tensor(&tensor(&mut o, 0x1000, 0, 2, 32, 1, 1), 0, None) }.unwrap();
    assert!(l.has_zero_stride());
    assert_eq!(l.nbytes(), 4);
    assert!(!l.is_permuted_compact());
}

#[test]
fn zero_d_and_zero_size() {
    let mut o = Owned { shape: vec![], strides: None };
    let l = unsafe { read_tensor(&tensor(&mut o, 0x1000, 0, 2, 32, 1, 1), 0, None) }.unwrap();
    assert_eq!((l.numel, l.nbytes()), (1, 4));
    let mut o = Owned { shape: vec![0, 3], strides: Some(vec![3, 1]) };
    // Empty tensors may carry a null pointer: that is "no storage", not an error.
    let l = unsafe { read_tensor(&tensor(&mut o, 0, 0, 2, 32, 1, 1), 0, None) }.unwrap();
    assert_eq!((l.numel, l.nbytes()), (0, 0));
    assert!(l.contiguous);
}

#[test]
fn every_dtype_code_has_a_name() {
    let cases: &[(u8, u8, u16, &str)] = &[
        (0, 8, 1, "int8"), (0, 16, 1, "int16"), (0, 32, 1, "int32"), (0, 64, 1, "int64"),
        (1, 8, 1, "uint8"), (1, 64, 1, "uint64"), (2, 16, 1, "float16"), (2, 64, 1, "float64"),
        (3, 64, 1, "opaque64"), (4, 16, 1, "bfloat16"), (5, 64, 1, "complex64"), (5, 128, 1, "complex128"),
        (6, 8, 1, "bool"), (7, 8, 1, "float8_e3m4"), (8, 8, 1, "float8_e4m3"), (9, 8, 1, "float8_e4m3b11fnuz"),
        (10, 8, 1, "float8_e4m3fn"), (11, 8, 1, "float8_e4m3fnuz"), (12, 8, 1, "float8_e5m2"),
        (13, 8, 1, "float8_e5m2fnuz"), (14, 8, 1, "float8_e8m0fnu"), (15, 6, 1, "float6_e2m3fn"),
        (16, 6, 1, "float6_e3m2fn"), (17, 4, 2, "float4_e2m1fnx2"), (2, 32, 4, "float32x4"), (99, 8, 1, "code99_8bit"),
    ];
    for (code, bits, lanes, name) in cases {
        let mut o = Owned { shape: vec![2], strides: None };
        let l = unsafe { read_tensor(&tensor(&mut o, 0x1000, 0, *code, *bits, *lanes, 1), 0, None) }.unwrap();
        assert_eq!(&l.dtype.name(), name);
        assert_eq!(l.itemsize, (u64::from(*bits) * u64::from(*lanes)).div_ceil(8));
    }
}

#[test]
fn corrupt_fields_are_errors() {
    assert_eq!(unsafe { read_legacy(std::ptr::null()) }.unwrap_err(), DlpackError::NullTensor);
    let mut o = Owned { shape: vec![2], strides: None };
    let mut t = tensor(&mut o, 0x1000, 0, 2, 32, 1, 1);
    t.ndim = 1_000_000;
    assert_eq!(unsafe { read_tensor(&t, 0, None) }.unwrap_err(), DlpackError::BadNdim(1_000_000));
    t.ndim = -1;
    assert_eq!(unsafe { read_tensor(&t, 0, None) }.unwrap_err(), DlpackError::BadNdim(-1));
    t.ndim = 1;
    t.shape = std::ptr::null_mut();
    assert_eq!(unsafe { read_tensor(&t, 0, None) }.unwrap_err(), DlpackError::NullShape(1));
    let mut o = Owned { shape: vec![-3], strides: None };
    assert!(matches!(unsafe { read_tensor(&tensor(&mut o, 0x1000, 0, 2, 32, 1, 1), 0, None) }, Err(DlpackError::NegativeDim { .. })));
    let mut o = Owned { shape: vec![i64::MAX, i64::MAX], strides: None };
    assert_eq!(unsafe { read_tensor(&tensor(&mut o, 0x1000, 0, 2, 32, 1, 1), 0, None) }.unwrap_err(), DlpackError::ElementCountOverflow);
    let mut o = Owned { shape: vec![2, 2], strides: Some(vec![i64::MAX, i64::MAX]) };
    assert_eq!(unsafe { read_tensor(&tensor(&mut o, 0x1000, 0, 2, 32, 1, 1), 0, None) }.unwrap_err(), DlpackError::ExtentOverflow);
    let mut o = Owned { shape: vec![2], strides: None };
    assert_eq!(unsafe { read_tensor(&tensor(&mut o, 0, 0, 2, 32, 1, 1), 0, None) }.unwrap_err(), DlpackError::NullData(2));
    assert!(matches!(unsafe { read_tensor(&tensor(&mut o, 0x1000, 0, 2, 0, 1, 1), 0, None) }, Err(DlpackError::BadDtype { .. })));
    assert_eq!(unsafe { read_tensor(&tensor(&mut o, usize::MAX, 8, 2, 32, 1, 1), 0, None) }.unwrap_err(), DlpackError::AddressOverflow);
}
