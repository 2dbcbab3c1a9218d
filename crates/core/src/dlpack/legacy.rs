//! Legacy `DLManagedTensor`s made by gpushare, for consumers that take nothing else.
//!
//! TensorFlow's `from_dlpack` accepts only a capsule named `"dltensor"` (DLPack 0.x). Two producers
//! cannot give it one:
//! - CuPy 14 hands out versioned tensors from every export, `toDlpack()` included;
//! - Numba has no DLPack export at all, only `__cuda_array_interface__`.
//!
//! [`legacy_of_versioned`] forwards a versioned tensor as a legacy one (the same `DLTensor`;
//! deleting the legacy tensor deletes the versioned one), and [`borrowed`] describes memory that
//! an owner keeps alive (deleting the tensor runs the owner's release). Neither copies a byte.

use dlpark::ffi::{DLDataType, DLDataTypeCode, DLDevice, DLDeviceType, DLManagedTensor, DLManagedTensorVersioned, DLTensor};

/// What a consumer holds: a legacy tensor first, so a pointer to the whole is a pointer to it.
#[repr(C)]
struct LegacyOfVersioned {
    legacy: DLManagedTensor,
    versioned: *mut DLManagedTensorVersioned,
}

/// A legacy tensor that forwards to `versioned`: the same data, shape and strides (still owned by
/// the versioned tensor), and a deleter that calls the versioned tensor's deleter. The flags are
/// dropped (a legacy tensor has none): callers decide whether a read-only tensor may go this way.
///
/// # Safety
/// `versioned` must be a valid, unconsumed `DLManagedTensorVersioned` whose ownership passes to
/// the returned tensor: the caller must not delete it (or let its capsule delete it) afterwards.
pub unsafe fn legacy_of_versioned(versioned: *mut DLManagedTensorVersioned) -> *mut DLManagedTensor {
    // SAFETY: the caller promises `versioned` is valid.
    let dl_tensor = unsafe { (*versioned).dl_tensor };
    let wrapper = Box::new(LegacyOfVersioned {
        legacy: DLManagedTensor { dl_tensor, manager_ctx: std::ptr::null_mut(), deleter: Some(delete_legacy_of_versioned) },
        versioned,
    });
    Box::into_raw(wrapper).cast()
}

unsafe extern "C" fn delete_legacy_of_versioned(managed: *mut DLManagedTensor) {
    if managed.is_null() {
        return;
    }
    // SAFETY: `managed` came from `legacy_of_versioned` (the only place this deleter is set), so it
    // points to a boxed LegacyOfVersioned, deleted exactly once by the DLPack contract.
    let wrapper = unsafe { Box::from_raw(managed.cast::<LegacyOfVersioned>()) };
    // SAFETY: the versioned tensor was handed to us unconsumed and is deleted only here.
    if let Some(deleter) = unsafe { (*wrapper.versioned).deleter } {
        unsafe { deleter(wrapper.versioned) };
    }
}

/// Lets go of whatever keeps a borrowed tensor's memory alive.
pub type Release = Box<dyn FnOnce() + Send>;

#[repr(C)]
struct Borrowed {
    legacy: DLManagedTensor,
    // The DLTensor points into these: they live, unmoved, as long as the tensor.
    shape: Box<[i64]>,
    strides: Box<[i64]>,
    release: Option<Release>,
}

/// How a borrowed tensor describes its memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Described {
    pub data: u64,
    pub device_type: u32,
    pub device_id: i32,
    pub dtype_code: u8,
    pub bits: u8,
    pub shape: Vec<i64>,
    /// In elements, as DLPack counts them.
    pub strides: Vec<i64>,
}

/// A legacy tensor over memory that someone else keeps alive; deleting it runs `release`.
/// Returns `None` (and runs `release`) when shape and strides disagree in length.
pub fn borrowed(described: Described, release: Release) -> Option<*mut DLManagedTensor> {
    if described.shape.len() != described.strides.len() || described.shape.len() > super::MAX_NDIM as usize {
        release();
        return None;
    }
    let mut wrapper = Box::new(Borrowed {
        legacy: DLManagedTensor {
            dl_tensor: DLTensor {
                data: described.data as *mut std::ffi::c_void,
                device: DLDevice { device_type: DLDeviceType(described.device_type), device_id: described.device_id },
                ndim: described.shape.len() as i32,
                dtype: DLDataType { code: DLDataTypeCode(described.dtype_code), bits: described.bits, lanes: 1 },
                shape: std::ptr::null_mut(),
                strides: std::ptr::null_mut(),
                byte_offset: 0,
            },
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(delete_borrowed),
        },
        shape: described.shape.into_boxed_slice(),
        strides: described.strides.into_boxed_slice(),
        release: Some(release),
    });
    wrapper.legacy.dl_tensor.shape = wrapper.shape.as_mut_ptr();
    wrapper.legacy.dl_tensor.strides = wrapper.strides.as_mut_ptr();
    Some(Box::into_raw(wrapper).cast())
}

unsafe extern "C" fn delete_borrowed(managed: *mut DLManagedTensor) {
    if managed.is_null() {
        return;
    }
    // SAFETY: `managed` came from `borrowed`, the only place this deleter is set.
    let mut wrapper = unsafe { Box::from_raw(managed.cast::<Borrowed>()) };
    if let Some(release) = wrapper.release.take() {
        release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn borrowed_tensor_describes_the_memory_and_releases_once() {
        let released = Arc::new(AtomicUsize::new(0));
        let r = released.clone();
        let data = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
        let m = borrowed(
            Described {
                data: data.as_ptr() as u64,
                device_type: 1,
                device_id: 0,
                dtype_code: 2,
                bits: 32,
                shape: vec![2, 3],
                strides: vec![3, 1],
            },
            Box::new(move || {
                r.fetch_add(1, Ordering::SeqCst);
            }),
        )
        .expect("shape and strides agree");
        // SAFETY: `m` is the tensor just made, read before its deleter runs.
        let layout = unsafe { crate::dlpack::read_legacy(m) }.expect("a valid tensor");
        assert_eq!(layout.shape, vec![2, 3]);
        assert_eq!(layout.strides, vec![3, 1]);
        assert_eq!(layout.data_ptr, data.as_ptr() as u64);
        assert_eq!(layout.dtype.name(), "float32");
        assert_eq!(released.load(Ordering::SeqCst), 0);
        // SAFETY: deleted once, as a consumer would.
        unsafe { ((*m).deleter.expect("set"))(m) };
        assert_eq!(released.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn mismatched_strides_are_refused_and_the_owner_released() {
        let released = Arc::new(AtomicUsize::new(0));
        let r = released.clone();
        let d = Described { data: 0, device_type: 2, device_id: 0, dtype_code: 2, bits: 32, shape: vec![2, 3], strides: vec![1] };
        assert!(borrowed(d, Box::new(move || { r.fetch_add(1, Ordering::SeqCst); })).is_none());
        assert_eq!(released.load(Ordering::SeqCst), 1);
    }

    static VERSIONED_DELETES: AtomicUsize = AtomicUsize::new(0);

    unsafe extern "C" fn count_versioned_delete(v: *mut DLManagedTensorVersioned) {
        VERSIONED_DELETES.fetch_add(1, Ordering::SeqCst);
        // SAFETY: made by Box::into_raw in the test below.
        drop(unsafe { Box::from_raw(v) });
    }

    #[test]
    fn legacy_of_versioned_forwards_the_tensor_and_its_deleter() {
        let mut shape = [4i64];
        let mut strides = [1i64];
        let data = [0u8; 16];
        let versioned = Box::into_raw(Box::new(DLManagedTensorVersioned {
            version: dlpark::ffi::DLPackVersion { major: 1, minor: 0 },
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(count_versioned_delete),
            flags: dlpark::DlpackFlags::empty(),
            dl_tensor: DLTensor {
                data: data.as_ptr() as *mut _,
                device: DLDevice { device_type: DLDeviceType(1), device_id: 0 },
                ndim: 1,
                dtype: DLDataType { code: DLDataTypeCode(0), bits: 32, lanes: 1 },
                shape: shape.as_mut_ptr(),
                strides: strides.as_mut_ptr(),
                byte_offset: 0,
            },
        }));
        // SAFETY: a valid, unconsumed tensor whose ownership passes here.
        let legacy = unsafe { legacy_of_versioned(versioned) };
        // SAFETY: valid until deleted below.
        let layout = unsafe { crate::dlpack::read_legacy(legacy) }.expect("valid");
        assert_eq!((layout.shape.clone(), layout.data_ptr), (vec![4], data.as_ptr() as u64));
        assert_eq!(layout.version, None, "a legacy tensor carries no version");
        let before = VERSIONED_DELETES.load(Ordering::SeqCst);
        // SAFETY: deleted once.
        unsafe { ((*legacy).deleter.expect("set"))(legacy) };
        assert_eq!(VERSIONED_DELETES.load(Ordering::SeqCst), before + 1);
    }
}
