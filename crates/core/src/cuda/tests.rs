//! Tests that run anywhere: the pure logic, and the no-CUDA behaviour where the driver is missing.
//! GPU behaviour is tested in `crates/core/tests/cuda_driver.rs`.

use super::pointer::decode_slots;
use super::*;

fn device_attrs(ptr: u64, start: u64, size: u64, buffer_id: u64) -> PointerAttributes {
    PointerAttributes {
        ptr,
        memory_type: MemoryType::Device,
        memory_type_code: 2,
        device_ordinal: 0,
        context: 0x1000,
        context_is_primary: Some(true),
        range_start: start,
        range_size: size,
        buffer_id,
        is_managed: false,
        mempool: 0,
    }
}

#[test]
fn memory_type_codes_map_to_kinds() {
    assert_eq!(MemoryType::from_driver(0, false), MemoryType::Pageable);
    assert_eq!(MemoryType::from_driver(1, false), MemoryType::Host);
    assert_eq!(MemoryType::from_driver(2, false), MemoryType::Device);
    assert_eq!(MemoryType::from_driver(3, false), MemoryType::Array);
    assert_eq!(MemoryType::from_driver(4, false), MemoryType::Unified);
    assert_eq!(MemoryType::from_driver(77, false), MemoryType::Unknown(77));
    // Managed memory reports device or host as its type; IS_MANAGED decides.
    assert_eq!(MemoryType::from_driver(2, true), MemoryType::Managed);
    assert_eq!(MemoryType::from_driver(1, true), MemoryType::Managed);
    // An unknown address cannot be managed: the flag alone does not make it so.
    assert_eq!(MemoryType::from_driver(0, true), MemoryType::Pageable);
}

#[test]
fn memory_type_names_serialise_as_strings() {
    assert_eq!(MemoryType::Device.name(), "device");
    assert_eq!(MemoryType::Host.name(), "pinned_host");
    assert_eq!(MemoryType::Pageable.name(), "pageable_host");
    assert_eq!(serde_json::to_string(&MemoryType::Managed).unwrap(), "\"managed\"");
    assert_eq!(serde_json::to_string(&MemoryType::Unknown(9)).unwrap(), "\"unknown(9)\"");
    assert!(MemoryType::Device.is_device_addressable());
    assert!(MemoryType::Managed.is_device_addressable());
    assert!(!MemoryType::Host.is_device_addressable());
    assert!(!MemoryType::Pageable.is_device_addressable());
}

/// The slots as the driver leaves them: 8-byte zeroed slots, 4-byte values written at the start.
fn slot_u32(v: u32) -> u64 {
    let b = v.to_ne_bytes();
    u64::from_ne_bytes([b[0], b[1], b[2], b[3], 0, 0, 0, 0])
}

#[test]
fn decodes_a_pageable_host_answer() {
    // What the H200 returned for malloc'd memory: success, context 0, type 0, ordinal -2.
    let slots = [0, 0, slot_u32((-2i32) as u32), 0, 0, 0, 0, 0];
    let a = decode_slots(0x7f00_0000_1000, &slots);
    assert_eq!(a.memory_type, MemoryType::Pageable);
    assert_eq!(a.device_ordinal, -2);
    assert_eq!(a.context, 0);
    assert!(!a.is_known_to_cuda());
    assert_eq!(a.context_is_primary, None);
    assert!(!same_allocation(&a, 0x7f00_0000_1000, 4));
}

#[test]
fn decodes_device_pinned_managed_and_pool_answers() {
    let slots = [0xdead_b000, slot_u32(2), slot_u32(1), 0x7000_0000, 2 << 20, 42, 0, 0];
    let a = decode_slots(0x7000_0100, &slots);
    assert_eq!(a.memory_type, MemoryType::Device);
    assert_eq!((a.device_ordinal, a.context, a.buffer_id), (1, 0xdead_b000, 42));
    assert_eq!(a.offset_in_allocation(), Some(0x100));
    assert!(!a.from_stream_ordered_pool());

    let pinned = decode_slots(0x10, &[0xc0, slot_u32(1), slot_u32(0), 0x10, 64, 7, 0, 0]);
    assert_eq!(pinned.memory_type, MemoryType::Host);

    // IS_MANAGED written as a 1-byte bool or a 4-byte int: both read as set.
    for flag in [1u64, slot_u32(1)] {
        let m = decode_slots(0x20, &[0xc0, slot_u32(2), slot_u32(0), 0x20, 64, 8, flag, 0]);
        assert_eq!(m.memory_type, MemoryType::Managed);
        assert!(m.is_managed);
    }

    // Stream-ordered pool (cudaMallocAsync, JAX/XLA): device memory with no owning context.
    let pool = decode_slots(0x30, &[0, slot_u32(2), slot_u32(0), 0x30, 64, 9, 0, 0x5000]);
    assert_eq!(pool.memory_type, MemoryType::Device);
    assert_eq!(pool.context, 0);
    assert!(pool.from_stream_ordered_pool());
}

#[test]
fn same_allocation_is_range_containment() {
    let a = device_attrs(0x1000, 0x1000, 0x1000, 5); // allocation [0x1000, 0x2000)
    assert!(same_allocation(&a, 0x1000, 0x1000)); // the whole allocation
    assert!(same_allocation(&a, 0x1800, 0x100)); // a view inside
    assert!(same_allocation(&a, 0x1fff, 1)); // the last byte
    assert!(!same_allocation(&a, 0x1fff, 2)); // runs past the end
    assert!(!same_allocation(&a, 0x0fff, 1)); // before the start
    assert!(!same_allocation(&a, 0x2000, 1)); // just after
    assert!(same_allocation(&a, 0x2000, 0)); // an empty view at the end
    assert!(!same_allocation(&a, 0x2001, 0));
    assert!(!same_allocation(&a, 0x1800, u64::MAX)); // overflow is not containment
    let unknown = device_attrs(0x1000, 0, 0, 0);
    assert!(!same_allocation(&unknown, 0x1000, 0));
}

#[test]
fn same_allocation_as_uses_buffer_ids() {
    let a = device_attrs(0x1000, 0x1000, 0x1000, 5);
    // Same id, addresses reported in another range (the driver's word wins).
    let b = device_attrs(0x9000, 0x9000, 0x10, 5);
    assert!(same_allocation_as(&a, &b, 0x10));
    // Different id, but inside a's range.
    let c = device_attrs(0x1100, 0x1000, 0x1000, 6);
    assert!(same_allocation_as(&a, &c, 0x10));
    // Different id, elsewhere.
    let d = device_attrs(0x9000, 0x9000, 0x10, 6);
    assert!(!same_allocation_as(&a, &d, 0x10));
    // Id 0 means unknown and never matches.
    let (z1, z2) = (device_attrs(0x1, 0, 0, 0), device_attrs(0x9, 0, 0, 0));
    assert!(!same_allocation_as(&z1, &z2, 1));
}

#[test]
fn uuids_format_like_nvidia_smi() {
    let bytes: [u8; 16] =
        [0x5f, 0x2e, 0x9a, 0x01, 0xb2, 0xc3, 0x4d, 0x5e, 0x8f, 0x90, 0x01, 0x12, 0x23, 0x34, 0x45, 0xff];
    assert_eq!(format_uuid(&bytes), "GPU-5f2e9a01-b2c3-4d5e-8f90-0112233445ff");
    assert_eq!(format_uuid(&[0; 16]), "GPU-00000000-0000-0000-0000-000000000000");
}

#[test]
fn driver_versions_format_as_major_minor() {
    assert_eq!(format_driver_version(13000), "13.0");
    assert_eq!(format_driver_version(12080), "12.8");
    assert_eq!(format_driver_version(12020), "12.2");
    let s = DriverStatus::Available { version: 12040, device_count: 2 };
    assert_eq!(s.version_string().as_deref(), Some("12.4"));
    assert_eq!(s.device_count(), 2);
    assert_eq!(
        serde_json::to_value(&s).unwrap(),
        serde_json::json!({"state": "available", "version": 12040, "device_count": 2})
    );
    let u = DriverStatus::Unavailable { reason: "libcuda not found".into() };
    assert_eq!(
        serde_json::to_value(&u).unwrap(),
        serde_json::json!({"state": "unavailable", "reason": "libcuda not found"})
    );
    assert_eq!(u.device_count(), 0);
}

#[test]
fn visible_devices_parse_like_the_driver() {
    let unset = parse_visible_devices(None);
    assert_eq!((unset.raw, unset.hides_all), (None, false));

    let empty = parse_visible_devices(Some(""));
    assert!(empty.hides_all);
    assert!(empty.entries.is_empty());

    let none = parse_visible_devices(Some("-1"));
    assert!(none.hides_all);
    assert_eq!(none.ignored, vec!["-1"]);

    let v = parse_visible_devices(Some("2, 0"));
    assert_eq!(v.entries, vec!["2", "0"]);
    assert_eq!(v.physical_for(0), Some("2"));
    assert_eq!(v.physical_for(1), Some("0"));
    assert_eq!(v.physical_for(2), None);
    assert_eq!(v.physical_for(-1), None);

    // Reading stops at the first invalid entry.
    let cut = parse_visible_devices(Some("0,2,-1,1"));
    assert_eq!(cut.entries, vec!["0", "2"]);
    assert_eq!(cut.ignored, vec!["-1", "1"]);
    assert!(!cut.hides_all);

    let uuids = parse_visible_devices(Some("GPU-5f2e9a01,MIG-abc"));
    assert_eq!(uuids.entries, vec!["GPU-5f2e9a01", "MIG-abc"]);
    assert!(parse_visible_devices(Some("GPU-")).hides_all);
    assert!(parse_visible_devices(Some("all")).hides_all);
}

#[test]
fn staging_plans_cut_into_page_aligned_chunks() {
    let p = plan_staging(100 << 20, 8 << 20, 16 << 20).unwrap();
    assert_eq!((p.chunk_bytes, p.chunks), (8 << 20, 13));
    // A buffer smaller than two chunks shrinks the chunk.
    let p = plan_staging(10_000, 8 << 20, 10_000).unwrap();
    assert_eq!((p.chunk_bytes, p.chunks), (4096, 3));
    // Below a page nothing is rounded.
    let p = plan_staging(10, 3, 100).unwrap();
    assert_eq!((p.chunk_bytes, p.chunks), (3, 4));
    assert_eq!(plan_staging(0, 4096, 8192).unwrap().chunks, 0);
    assert!(matches!(plan_staging(10, 0, 100), Err(CudaError::InvalidArgument(_))));
    assert!(matches!(plan_staging(10, 8, 1), Err(CudaError::InvalidArgument(_))));
}

#[test]
fn errors_read_well() {
    let e = CudaError::Unavailable("libcuda not found".into());
    assert_eq!(e.to_string(), "no CUDA: libcuda not found");
    assert!(e.is_unavailable());
    assert_eq!(e.driver_code(), None);
    let d = CudaError::Driver {
        call: "cuMemAlloc_v2",
        code: 2,
        name: "CUDA_ERROR_OUT_OF_MEMORY".into(),
        description: "out of memory".into(),
    };
    assert_eq!(d.to_string(), "cuMemAlloc_v2 failed: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory");
    assert_eq!(d.driver_code(), Some(2));
}

/// Without a driver every entry point answers `Unavailable` with the probe's reason, and none panics.
#[test]
fn without_a_driver_everything_is_unavailable() {
    let status = driver_status();
    if status.is_available() {
        println!("CUDA driver present ({status:?}): the no-CUDA test does not apply here");
        return;
    }
    let reason = status.reason().expect("an unavailable status has a reason").to_owned();
    assert!(!reason.is_empty());
    assert_eq!(status.version_string(), None);
    let unavailable = |what: &str, e: CudaError| {
        assert_eq!(e, CudaError::Unavailable(reason.clone()), "{what}");
    };
    unavailable("require_driver", require_driver().unwrap_err());
    unavailable("pointer_attributes", pointer_attributes(0x1000).unwrap_err());
    unavailable("check_device_range", check_device_range(0x1000, 4, "source").unwrap_err());
    unavailable("devices", devices().unwrap_err());
    unavailable("device_info", device_info(0).unwrap_err());
    unavailable("peer_access_matrix", peer_access_matrix().unwrap_err());
    unavailable("current_context", current_context().unwrap_err());
    unavailable("primary_context_state", primary_context_state(0).unwrap_err());
    unavailable("mem_info", mem_info(0, ContextPolicy::ExistingOnly).unwrap_err());
    unavailable("mem_info activating", mem_info(0, ContextPolicy::RetainPrimary).unwrap_err());
    unavailable("synchronize_context", synchronize_context(0).unwrap_err());
    unavailable("DeviceBuffer", DeviceBuffer::new(0, 16).unwrap_err());
    unavailable("DeviceBuffer empty", DeviceBuffer::new(0, 0).unwrap_err());
    unavailable("PinnedHostBuffer", PinnedHostBuffer::new(0, 16).unwrap_err());
    unavailable("PrivateContextAllocation", PrivateContextAllocation::new(0, 16).unwrap_err());
    unavailable("Stream::new", Stream::new(0).unwrap_err());
    let external = Stream::external(Stream::LEGACY_DEFAULT, 0);
    assert!(!external.is_owned());
    unavailable("Stream::synchronize", external.synchronize().unwrap_err());
    unavailable("synchronize_stream", synchronize_stream(&external).unwrap_err());
    unavailable("Stream::is_done", external.is_done().unwrap_err());
    unavailable("wait_interruptibly", external.wait_interruptibly(&mut || true).unwrap_err());
    unavailable("EventTimer", EventTimer::new(0).unwrap_err());
    unavailable("PinnedStager", PinnedStager::new(0, 1 << 20).unwrap_err());
    unavailable("copy_dtod_checked", copy_dtod_checked(0x2000, 0x1000, 16, &external).unwrap_err());
    // SAFETY: without a driver these return before touching any address.
    unsafe {
        unavailable("copy_dtod", copy_dtod(0x2000, 0x1000, 16, &external).unwrap_err());
        unavailable("copy_dtoh_async", copy_dtoh_async(std::ptr::null_mut(), 0x1000, 16, &external).unwrap_err());
        unavailable("copy_htod_async", copy_htod_async(0x1000, std::ptr::null(), 16, &external).unwrap_err());
    }
    // Zero-byte copies are no-ops that need no driver; argument errors come before the driver.
    // SAFETY: nothing is copied.
    assert!(unsafe { copy_dtod(0, 0, 0, &external) }.is_ok());
    assert!(matches!(PinnedHostBuffer::new(0, 0), Err(CudaError::InvalidArgument(_))));
    // Asking twice gives the same cached answer.
    assert!(std::ptr::eq(driver_status(), status));
}

#[test]
fn a_poll_pause_stays_a_small_share_of_the_wait() {
    use super::stream::{POLL_OVERSHOOT, next_pause};
    use std::time::Duration;
    let ms = Duration::from_millis;
    // Early in a wait the pauses are short whatever they were: a 6 ms copy is noticed within
    // about 3 % of its duration, not up to 1 ms late.
    assert!(next_pause(ms(1), ms(3)) <= ms(3) / POLL_OVERSHOOT);
    assert_eq!(next_pause(Duration::from_micros(10), ms(2)), Duration::from_micros(20));
    // Long waits still sleep (at most 1 ms a pause), never spin.
    assert_eq!(next_pause(ms(1), Duration::from_secs(1)), ms(1));
    assert_eq!(next_pause(Duration::from_micros(1), Duration::ZERO), Duration::from_micros(10));
}
