//! Property tests of the DLPack reader over arbitrary `DLTensor` contents: whatever a producer (or a
//! corrupt capsule) puts in the struct, `read_tensor` and `layout_from_parts` answer `Ok` or `Err`,
//! never panic, and every `Ok` layout is self-consistent.
//!
//! Shapes and strides are backed by real arrays of the claimed `ndim` whenever `0 <= ndim <= 64`,
//! so every read the reader is allowed to make is in bounds (its safety contract); beyond that the
//! pointers are dangling or null, and the reader must not touch them.
//!
//! `PROPTEST_CASES` overrides the number of cases (2,000 by default, ~1 s in a debug build).

use dlpark::ffi::{DLDataType, DLDataTypeCode, DLDevice, DLDeviceType, DLTensor};
use gpushare_core::dlpack::{DType, DlpackError, Layout, LayoutParts, MAX_ALIGNMENT, MAX_NDIM, layout_from_parts, read_tensor};
use proptest::prelude::*;

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(2000)
}

/// Sizes: mostly small (so some tensors are valid and non-empty), with zeros, negatives and the
/// extremes that overflow products.
fn dim() -> impl Strategy<Value = i64> {
    prop_oneof![
        6 => 0i64..6,
        1 => Just(0i64),
        1 => -4i64..0,
        1 => Just(i64::MAX),
        1 => Just(i64::MIN),
        1 => (1i64 << 31)..(1i64 << 33),
        1 => any::<i64>(),
    ]
}

fn stride() -> impl Strategy<Value = i64> {
    prop_oneof![
        6 => -8i64..64,
        1 => Just(0i64),
        1 => Just(i64::MAX),
        1 => Just(i64::MIN),
        1 => Just(i64::MAX / 2),
        1 => any::<i64>(),
    ]
}

fn ndim() -> impl Strategy<Value = i32> {
    prop_oneof![
        8 => 0i32..=8,
        2 => 9i32..=MAX_NDIM,
        1 => -10i32..0,
        1 => (MAX_NDIM + 1)..=10_000,
        1 => Just(i32::MIN),
        1 => Just(i32::MAX),
    ]
}

fn address() -> impl Strategy<Value = u64> {
    prop_oneof![
        3 => (0u64..1 << 20).prop_map(|a| 0x7f00_0000_0000 + a),
        1 => Just(0u64),
        1 => (u64::MAX - 4096)..=u64::MAX,
        1 => any::<u64>(),
    ]
}

fn byte_offset() -> impl Strategy<Value = u64> {
    prop_oneof![
        4 => Just(0u64),
        2 => 0u64..256,
        1 => (u64::MAX - 4096)..=u64::MAX,
        1 => any::<u64>(),
    ]
}

fn dtype() -> impl Strategy<Value = (u8, u8, u16)> {
    prop_oneof![
        // Real dtypes.
        4 => (0u8..=6, prop_oneof![Just(8u8), Just(16), Just(32), Just(64), Just(128)], Just(1u16)),
        // Float8/6/4 codes, sub-byte widths, vector lanes.
        2 => (7u8..=17, 1u8..=8, prop_oneof![Just(1u16), Just(2), Just(4)]),
        // Anything: unknown codes, zero bits or lanes, u16::MAX lanes.
        2 => (any::<u8>(), any::<u8>(), any::<u16>()),
    ]
}

#[derive(Debug, Clone)]
struct Raw {
    ndim: i32,
    shape: Vec<i64>,
    strides: Vec<i64>,
    null_shape: bool,
    null_strides: bool,
    data: u64,
    byte_offset: u64,
    dtype: (u8, u8, u16),
    device: (u32, i32),
    flags: u64,
}

fn raw() -> impl Strategy<Value = Raw> {
    (ndim(), any::<bool>(), any::<bool>()).prop_flat_map(|(ndim, null_shape, null_strides)| {
        // Backing arrays of exactly `ndim` entries where the reader may read them; a single entry
        // otherwise (never read: the reader must reject the ndim first).
        let len = if (0..=MAX_NDIM).contains(&ndim) { ndim as usize } else { 1 };
        (
            Just(ndim),
            prop::collection::vec(dim(), len),
            prop::collection::vec(stride(), len),
            Just(null_shape && prop_rare(ndim)),
            Just(null_strides),
            address(),
            byte_offset(),
            dtype(),
            (any::<u32>(), any::<i32>()),
            any::<u64>(),
        )
            .prop_map(
                |(ndim, shape, strides, null_shape, null_strides, data, byte_offset, dtype, device, flags)| Raw {
                    ndim,
                    shape,
                    strides,
                    null_shape,
                    null_strides,
                    data,
                    byte_offset,
                    dtype,
                    device,
                    flags,
                },
            )
    })
}

/// A null shape pointer is tried only for some tensors (it is always an error when ndim > 0).
fn prop_rare(ndim: i32) -> bool {
    ndim % 3 == 0
}

fn tensor(r: &mut Raw) -> DLTensor {
    DLTensor {
        data: r.data as usize as *mut _,
        device: DLDevice { device_type: DLDeviceType(r.device.0), device_id: r.device.1 },
        ndim: r.ndim,
        dtype: DLDataType { code: DLDataTypeCode(r.dtype.0), bits: r.dtype.1, lanes: r.dtype.2 },
        shape: if r.null_shape { std::ptr::null_mut() } else { r.shape.as_mut_ptr() },
        strides: if r.null_strides { std::ptr::null_mut() } else { r.strides.as_mut_ptr() },
        byte_offset: r.byte_offset,
    }
}

/// What every layout the reader accepts must satisfy.
fn check_invariants(l: &Layout, r: &Raw) -> Result<(), TestCaseError> {
    prop_assert!((0..=MAX_NDIM).contains(&r.ndim), "accepted ndim {}", r.ndim);
    prop_assert_eq!(l.shape.len(), r.ndim as usize);
    prop_assert_eq!(l.strides.len(), l.shape.len());
    prop_assert!(l.shape.iter().all(|d| *d >= 0), "negative dimension accepted: {:?}", l.shape);
    let numel = l.shape.iter().try_fold(1u64, |acc, d| acc.checked_mul(*d as u64));
    prop_assert_eq!(numel, Some(l.numel));
    prop_assert_eq!(Some(l.data_ptr), l.base_ptr.checked_add(l.byte_offset));
    prop_assert!(l.itemsize >= 1, "itemsize 0 for {:?}", l.dtype);
    prop_assert!(l.alignment.is_power_of_two() && l.alignment <= MAX_ALIGNMENT, "alignment {}", l.alignment);
    if l.data_ptr != 0 {
        prop_assert_eq!(l.data_ptr % l.alignment, 0);
    }
    prop_assert_eq!(l.readonly, r.flags & 1 != 0);
    prop_assert!(l.span_start <= l.span_end);
    if l.numel > 0 {
        prop_assert!(l.base_ptr != 0, "null data accepted for {} elements", l.numel);
        prop_assert!(l.span_start <= l.data_ptr && l.data_ptr <= l.span_end);
        prop_assert!(l.data_ptr < l.span_end, "first element outside its own span");
        prop_assert!(l.nbytes() >= l.itemsize, "nbytes {} < itemsize {}", l.nbytes(), l.itemsize);
        // The extent of a compact tensor is exactly its element bytes.
        if l.contiguous && l.shape.iter().all(|d| *d > 0) {
            prop_assert_eq!(Some(l.nbytes()), l.numel.checked_mul(l.itemsize));
        }
    } else {
        prop_assert_eq!((l.span_start, l.span_end), (l.data_ptr, l.data_ptr));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn read_tensor_never_panics_and_ok_layouts_are_consistent(mut r in raw()) {
        let t = tensor(&mut r);
        // SAFETY: shape and strides point to `ndim` readable i64s whenever 0 <= ndim <= MAX_NDIM
        // (the backing vectors were built with that length); the data pointer is never dereferenced.
        let result = unsafe { read_tensor(&t, r.flags, Some((1, 1))) };
        match result {
            Ok(l) => {
                check_invariants(&l, &r)?;
                prop_assert_eq!(l.explicit_strides, !r.null_strides && r.ndim > 0);
                if !r.null_strides {
                    prop_assert_eq!(&l.strides, &r.strides);
                }
            }
            Err(DlpackError::BadNdim(n)) => prop_assert!(!(0..=MAX_NDIM).contains(&n)),
            Err(DlpackError::NullShape(n)) => prop_assert!(r.null_shape && n > 0),
            Err(DlpackError::NullData(n)) => prop_assert!(r.data == 0 && n > 0),
            Err(_) => {}
        }
    }

    #[test]
    fn layout_from_parts_never_panics(
        shape in prop::collection::vec(dim(), 0..12),
        strides in prop::collection::vec(stride(), 0..12),
        base in address(),
        offset in byte_offset(),
        dt in dtype(),
        flags in any::<u64>(),
        device in (any::<u32>(), any::<i32>()),
    ) {
        // Shape and strides of different lengths are not a DLTensor (read_tensor never makes one):
        // the safe entry point rejects them rather than measuring a wrong extent.
        let same_len = shape.len() == strides.len();
        let ndim = shape.len() as i32;
        let result = layout_from_parts(LayoutParts {
            dtype: DType { code: dt.0, bits: dt.1, lanes: dt.2 },
            shape: shape.clone(),
            strides: strides.clone(),
            explicit_strides: true,
            device_type: device.0,
            device_id: device.1,
            base_ptr: base,
            byte_offset: offset,
            flags,
            version: None,
        });
        if !same_len {
            prop_assert!(result.is_err(), "shape {:?} with strides {:?} accepted", shape, strides);
        } else if let Ok(l) = &result {
            let r = Raw {
                ndim, shape, strides, null_shape: false, null_strides: false, data: base,
                byte_offset: offset, dtype: dt, device, flags,
            };
            check_invariants(l, &r)?;
        }
    }
}

/// The edges the strategies above reach only by chance, pinned.
#[test]
fn pinned_edges() {
    let parts = |shape: Vec<i64>, strides: Vec<i64>, base: u64, offset: u64| LayoutParts {
        dtype: DType { code: 2, bits: 32, lanes: 1 },
        shape,
        strides,
        explicit_strides: true,
        device_type: 1,
        device_id: 0,
        base_ptr: base,
        byte_offset: offset,
        flags: 0,
        version: None,
    };
    // Offsets that overflow the address, extents that run past u64::MAX or below 0.
    assert_eq!(layout_from_parts(parts(vec![1], vec![1], u64::MAX, 1)), Err(DlpackError::AddressOverflow));
    assert_eq!(layout_from_parts(parts(vec![2], vec![1], u64::MAX - 4, 0)), Err(DlpackError::ExtentOverflow));
    assert_eq!(layout_from_parts(parts(vec![2], vec![-1], 0, 0)).unwrap_err(), DlpackError::NullData(2));
    assert_eq!(layout_from_parts(parts(vec![2], vec![-1], 2, 0)), Err(DlpackError::ExtentOverflow));
    assert!(layout_from_parts(parts(vec![i64::MAX], vec![i64::MAX], 0x1000, 0)).is_err());
    assert!(layout_from_parts(parts(vec![i64::MAX], vec![i64::MIN], 0x1000, 0)).is_err());
    assert!(layout_from_parts(parts(vec![2, i64::MAX], vec![1, 1], 0x1000, 0)).is_err());
    // The last addressable element: the extent ends exactly at u64::MAX.
    let l = layout_from_parts(parts(vec![1], vec![1], u64::MAX - 4, 0)).unwrap();
    assert_eq!(l.span_end, u64::MAX);
    // A huge zero-size tensor with absurd strides is fine: nothing is addressed.
    let l = layout_from_parts(parts(vec![0, i64::MAX], vec![i64::MIN, i64::MAX], 0, 0)).unwrap();
    assert_eq!((l.numel, l.nbytes()), (0, 0));
    // u16::MAX lanes of 255 bits: the itemsize is computed without overflow.
    let mut p = parts(vec![1], vec![1], 0x1000, 0);
    p.dtype = DType { code: 200, bits: 255, lanes: u16::MAX };
    let l = layout_from_parts(p).unwrap();
    assert_eq!(l.itemsize, (255u64 * u64::from(u16::MAX)).div_ceil(8));
}
