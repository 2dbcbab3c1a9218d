//! Reading and checking DLPack tensors.
//!
//! A DLPack producer hands out a `DLManagedTensor` (legacy, capsule name `"dltensor"`) or a
//! `DLManagedTensorVersioned` (capsule name `"dltensor_versioned"`). [`read_legacy`] and
//! [`read_versioned`] turn either into a [`Layout`]: dtype, shape, strides in elements, device, the
//! data address with `byte_offset` applied, the bytes spanned by the strided extent, contiguity,
//! alignment and the read-only flag.
//!
//! The reader never takes ownership: it neither calls the deleter nor renames the capsule, so
//! inspecting a tensor neither consumes nor leaks the producer's memory. Every field is checked
//! before use: a null pointer, an absurd `ndim`, a negative extent or an overflowing stride product
//! is an error, never a panic or an out-of-bounds read.

mod dtype;
pub mod legacy;

pub use dtype::{DType, dtype_name};

use dlpark::ffi::{DLManagedTensor, DLManagedTensorVersioned, DLTensor};
use serde::{Deserialize, Serialize};

/// More dimensions than any framework supports (PyTorch and NumPy stop at 64); beyond this a
/// capsule is taken as corrupt rather than trusted with a read of `ndim` shape entries.
pub const MAX_NDIM: i32 = 64;

/// Largest alignment reported: DLPack asks for 256-byte aligned data, nothing needs more.
pub const MAX_ALIGNMENT: u64 = 256;

/// `DLDeviceType` codes with the names the DLPack header gives them.
/// DLPack's device types that gpushare's own code branches on (`kDLCPU`, `kDLCUDA`, `kDLCUDAHost`).
pub const DEVICE_CPU: u32 = 1;
pub const DEVICE_CUDA: u32 = 2;
pub const DEVICE_CUDA_HOST: u32 = 3;

pub fn device_type_name(code: u32) -> &'static str {
    match code {
        1 => "cpu",
        2 => "cuda",
        3 => "cuda_host",
        4 => "opencl",
        7 => "vulkan",
        8 => "metal",
        9 => "vpi",
        10 => "rocm",
        11 => "rocm_host",
        12 => "ext_dev",
        13 => "cuda_managed",
        14 => "oneapi",
        15 => "webgpu",
        16 => "hexagon",
        17 => "maia",
        18 => "trn",
        _ => "unknown",
    }
}

/// Device types whose memory the host can address directly.
pub fn is_host_accessible(device_type: u32) -> bool {
    matches!(device_type, 1 | 3 | 11 | 13)
}

/// Why a DLPack tensor could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DlpackError {
    #[error("the DLPack tensor pointer is null")]
    NullTensor,
    #[error("ndim {0} is outside 0..={MAX_NDIM}")]
    BadNdim(i32),
    #[error("shape pointer is null but ndim is {0}")]
    NullShape(i32),
    #[error("dimension {dim} has negative size {size}")]
    NegativeDim { dim: usize, size: i64 },
    #[error("the number of elements overflows 64 bits")]
    ElementCountOverflow,
    #[error("the strided extent overflows 64 bits")]
    ExtentOverflow,
    #[error("dtype has {bits} bits and {lanes} lanes; both must be positive")]
    BadDtype { bits: u8, lanes: u16 },
    #[error("data pointer is null but the tensor has {0} elements")]
    NullData(u64),
    #[error("data address plus byte_offset overflows 64 bits")]
    AddressOverflow,
    #[error("{strides} strides for {shape} dimensions")]
    StridesLength { shape: usize, strides: usize },
}

/// What a DLPack tensor says about itself, checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layout {
    pub dtype: DType,
    pub shape: Vec<i64>,
    /// Strides in elements; filled in as compact row-major when the producer gave none.
    pub strides: Vec<i64>,
    /// Whether the producer passed explicit strides (legacy producers may pass none).
    pub explicit_strides: bool,
    pub device_type: u32,
    pub device_id: i32,
    /// The pointer as the producer gave it, before `byte_offset`.
    pub base_ptr: u64,
    pub byte_offset: u64,
    /// `base_ptr + byte_offset`: the address of element (0, 0, …).
    pub data_ptr: u64,
    pub numel: u64,
    pub itemsize: u64,
    /// Lowest and one-past-highest byte address the strided extent touches; both equal `data_ptr`
    /// for a zero-size tensor.
    pub span_start: u64,
    pub span_end: u64,
    pub contiguous: bool,
    /// Largest power of two, up to 256, that divides `data_ptr`.
    pub alignment: u64,
    pub readonly: bool,
    /// DLPack version of a versioned capsule, `None` for a legacy one.
    pub version: Option<(u32, u32)>,
    pub flags: u64,
}

impl Layout {
    /// Bytes spanned by the strided extent (0 for a zero-size tensor).
    pub fn nbytes(&self) -> u64 {
        self.span_end - self.span_start
    }

    /// True when the strides are a permutation of a compact layout (a transpose).
    pub fn is_permuted_compact(&self) -> bool {
        is_permuted_compact(&self.shape, &self.strides)
    }

    pub fn has_negative_stride(&self) -> bool {
        has_negative_stride(&self.shape, &self.strides)
    }

    pub fn has_zero_stride(&self) -> bool {
        has_zero_stride(&self.shape, &self.strides)
    }

    pub fn device_name(&self) -> &'static str {
        device_type_name(self.device_type)
    }
}

/// Largest power of two, at most [`MAX_ALIGNMENT`], that divides `addr` (0 counts as fully aligned).
pub fn alignment_of(addr: u64) -> u64 {
    if addr == 0 {
        return MAX_ALIGNMENT;
    }
    (1u64 << addr.trailing_zeros().min(63)).min(MAX_ALIGNMENT)
}

/// True when the strides are a permutation of a compact layout (a transpose), which is what JAX
/// accepts; zero-size tensors pass, as they do in JAX.
pub fn is_permuted_compact(shape: &[i64], strides: &[i64]) -> bool {
    if shape.contains(&0) {
        return true;
    }
    let mut dims: Vec<(i64, i64)> =
        shape.iter().zip(strides).filter(|(s, _)| **s != 1).map(|(s, st)| (*s, *st)).collect();
    dims.sort_by_key(|(_, st)| *st);
    let mut expected = 1i64;
    for (size, stride) in dims {
        if stride != expected {
            return false;
        }
        expected = expected.saturating_mul(size);
    }
    true
}

/// A stride below zero on a dimension that has more than one element (`a[::-1]`).
pub fn has_negative_stride(shape: &[i64], strides: &[i64]) -> bool {
    shape.iter().zip(strides).any(|(s, st)| *s > 1 && *st < 0)
}

/// A zero stride on a dimension that has more than one element (a broadcast view).
pub fn has_zero_stride(shape: &[i64], strides: &[i64]) -> bool {
    shape.iter().zip(strides).any(|(s, st)| *s > 1 && *st == 0)
}

/// Compact row-major strides, in elements.
pub fn compact_strides(shape: &[i64]) -> Vec<i64> {
    let mut strides = vec![0i64; shape.len()];
    let mut acc = 1i64;
    for (i, size) in shape.iter().enumerate().rev() {
        strides[i] = acc;
        acc = acc.saturating_mul((*size).max(1));
    }
    strides
}

/// C-contiguous, ignoring the strides of size-1 dimensions as NumPy and PyTorch do.
pub fn is_c_contiguous(shape: &[i64], strides: &[i64]) -> bool {
    if shape.contains(&0) {
        return true;
    }
    let mut expected = 1i64;
    for (size, stride) in shape.iter().zip(strides).rev() {
        if *size != 1 {
            if *stride != expected {
                return false;
            }
            expected = expected.saturating_mul(*size);
        }
    }
    true
}

/// Reads a legacy `DLManagedTensor`.
///
/// # Safety
/// `managed` must be null or point to a `DLManagedTensor` whose `shape` (and non-null `strides`)
/// point to at least `ndim` readable `i64`s when `0 <= ndim <= MAX_NDIM`.
pub unsafe fn read_legacy(managed: *const DLManagedTensor) -> Result<Layout, DlpackError> {
    if managed.is_null() {
        return Err(DlpackError::NullTensor);
    }
    // SAFETY: non-null, and the caller promises it points to a DLManagedTensor.
    unsafe { read_tensor(&(*managed).dl_tensor, 0, None) }
}

/// Reads a versioned `DLManagedTensorVersioned`, whose flags carry READ_ONLY.
///
/// # Safety
/// As [`read_legacy`], for a `DLManagedTensorVersioned`.
pub unsafe fn read_versioned(managed: *const DLManagedTensorVersioned) -> Result<Layout, DlpackError> {
    if managed.is_null() {
        return Err(DlpackError::NullTensor);
    }
    // SAFETY: non-null, and the caller promises it points to a DLManagedTensorVersioned.
    unsafe {
        let m = &*managed;
        read_tensor(&m.dl_tensor, m.flags.bits(), Some((m.version.major, m.version.minor)))
    }
}

/// Reads a bare `DLTensor`.
///
/// # Safety
/// `tensor.shape` and a non-null `tensor.strides` must point to `ndim` readable `i64`s whenever
/// `0 <= ndim <= MAX_NDIM`; nothing is read otherwise.
pub unsafe fn read_tensor(
    tensor: &DLTensor,
    flags: u64,
    version: Option<(u32, u32)>,
) -> Result<Layout, DlpackError> {
    let ndim = tensor.ndim;
    if !(0..=MAX_NDIM).contains(&ndim) {
        return Err(DlpackError::BadNdim(ndim));
    }
    if ndim > 0 && tensor.shape.is_null() {
        return Err(DlpackError::NullShape(ndim));
    }
    let n = ndim as usize;
    let shape: Vec<i64> = if n == 0 {
        Vec::new()
    } else {
        // SAFETY: non-null and the caller promises `ndim` readable entries.
        unsafe { std::slice::from_raw_parts(tensor.shape, n) }.to_vec()
    };
    let explicit_strides = !tensor.strides.is_null() && n > 0;
    let strides: Vec<i64> = if explicit_strides {
        // SAFETY: as above.
        unsafe { std::slice::from_raw_parts(tensor.strides, n) }.to_vec()
    } else {
        compact_strides(&shape)
    };
    let dtype = DType { code: tensor.dtype.code.0, bits: tensor.dtype.bits, lanes: tensor.dtype.lanes };
    let base_ptr = tensor.data as u64;
    layout_from_parts(LayoutParts {
        dtype,
        shape,
        strides,
        explicit_strides,
        device_type: tensor.device.device_type.0,
        device_id: tensor.device.device_id,
        base_ptr,
        byte_offset: tensor.byte_offset,
        flags,
        version,
    })
}

/// The raw fields of a tensor, before checking.
#[derive(Debug, Clone)]
pub struct LayoutParts {
    pub dtype: DType,
    pub shape: Vec<i64>,
    pub strides: Vec<i64>,
    pub explicit_strides: bool,
    pub device_type: u32,
    pub device_id: i32,
    pub base_ptr: u64,
    pub byte_offset: u64,
    pub flags: u64,
    pub version: Option<(u32, u32)>,
}

/// Checks raw fields and computes the derived ones. Safe: works on owned values only.
pub fn layout_from_parts(p: LayoutParts) -> Result<Layout, DlpackError> {
    if p.dtype.bits == 0 || p.dtype.lanes == 0 {
        return Err(DlpackError::BadDtype { bits: p.dtype.bits, lanes: p.dtype.lanes });
    }
    if p.shape.len() != p.strides.len() {
        return Err(DlpackError::StridesLength { shape: p.shape.len(), strides: p.strides.len() });
    }
    let mut numel: u64 = 1;
    for (dim, size) in p.shape.iter().enumerate() {
        if *size < 0 {
            return Err(DlpackError::NegativeDim { dim, size: *size });
        }
        numel = numel.checked_mul(*size as u64).ok_or(DlpackError::ElementCountOverflow)?;
    }
    let itemsize = p.dtype.itemsize();
    let data_ptr = p.base_ptr.checked_add(p.byte_offset).ok_or(DlpackError::AddressOverflow)?;
    if numel > 0 && p.base_ptr == 0 {
        return Err(DlpackError::NullData(numel));
    }
    let (span_start, span_end) = if numel == 0 {
        (data_ptr, data_ptr)
    } else {
        // Offsets in elements of the lowest and highest element, then in bytes. One product of a
        // 64-bit size and a 64-bit stride fits in i128, but a sum of 64 of them, or that sum times
        // the itemsize, may not (found by crates/core/tests/fuzz_dlpack.rs): every step is checked.
        let overflow = DlpackError::ExtentOverflow;
        let (mut lo, mut hi) = (0i128, 0i128);
        for (size, stride) in p.shape.iter().zip(&p.strides) {
            let reach = (*size as i128 - 1).checked_mul(*stride as i128).ok_or(overflow.clone())?;
            let side = if reach < 0 { &mut lo } else { &mut hi };
            *side = side.checked_add(reach).ok_or(overflow.clone())?;
        }
        let item = itemsize as i128;
        let start = lo.checked_mul(item).and_then(|b| (data_ptr as i128).checked_add(b));
        let end = hi.checked_add(1).and_then(|h| h.checked_mul(item)).and_then(|b| (data_ptr as i128).checked_add(b));
        match (start, end) {
            (Some(start), Some(end)) if start >= 0 && end <= u64::MAX as i128 => (start as u64, end as u64),
            _ => return Err(overflow),
        }
    };
    let contiguous = is_c_contiguous(&p.shape, &p.strides);
    Ok(Layout {
        alignment: alignment_of(data_ptr),
        readonly: p.flags & u64::from(dlpark::ffi::DLPACK_FLAG_BITMASK_READ_ONLY) != 0,
        dtype: p.dtype,
        shape: p.shape,
        strides: p.strides,
        explicit_strides: p.explicit_strides,
        device_type: p.device_type,
        device_id: p.device_id,
        base_ptr: p.base_ptr,
        byte_offset: p.byte_offset,
        data_ptr,
        numel,
        itemsize,
        span_start,
        span_end,
        contiguous,
        version: p.version,
        flags: p.flags,
    })
}

#[cfg(test)]
mod tests;
