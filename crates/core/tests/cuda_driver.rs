//! The CUDA layer against a real driver: `cargo test --test cuda_driver` on a GPU machine.
//!
//! Cargo has no "skip": without a usable driver each test prints "no CUDA: <reason>" and returns,
//! so this file passes (vacuously) on machines without a GPU. Tests run on parallel threads of one
//! process, one at a time; each checks that it leaves its thread's current context as it found it.

use gpushare_core::cuda::{
    self, ContextPolicy, CudaError, DeviceBuffer, EventTimer, MemoryType, PinnedHostBuffer, PinnedStager,
    PrivateContextAllocation, Stream,
};

use std::sync::{Mutex, MutexGuard};

const MIB: usize = 1 << 20;

/// The tests run one at a time: memory figures are device-wide, and large allocations of one test
/// would move another's numbers.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn cuda_here(test: &str) -> bool {
    match cuda::driver_status() {
        cuda::DriverStatus::Available { .. } => true,
        cuda::DriverStatus::Unavailable { reason } => {
            println!("{test}: no CUDA: {reason}");
            false
        }
    }
}

fn current_ctx() -> Option<u64> {
    cuda::current_context().expect("cuCtxGetCurrent").map(|c| c.handle)
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u32).wrapping_mul(31).wrapping_add(u32::from(seed)) as u8).collect()
}

/// Uploads `data` into a new device buffer on device 0 and waits.
fn upload(data: &[u8], stream: &Stream) -> DeviceBuffer {
    let buffer = DeviceBuffer::new(0, data.len()).expect("cuMemAlloc");
    // SAFETY: the buffer holds data.len() bytes; we synchronise before `data` can go away.
    unsafe { cuda::copy_htod_async(buffer.ptr(), data.as_ptr(), data.len(), stream) }.expect("HtoD");
    stream.synchronize().expect("sync");
    buffer
}

fn download(buffer: &DeviceBuffer, len: usize, stream: &Stream) -> Vec<u8> {
    let mut out = vec![0u8; len];
    // SAFETY: `out` holds len bytes and outlives the synchronise below.
    unsafe { cuda::copy_dtoh_async(out.as_mut_ptr(), buffer.ptr(), len, stream) }.expect("DtoH");
    stream.synchronize().expect("sync");
    out
}

#[test]
fn driver_and_devices_are_reported() {
    let _serial = serial();
    if !cuda_here("driver_and_devices_are_reported") {
        return;
    }
    let status = cuda::driver_status();
    println!("{status:?} = CUDA {}", status.version_string().unwrap_or_default());
    let devices = cuda::devices().expect("devices");
    assert_eq!(devices.len() as i32, status.device_count());
    for d in &devices {
        println!("{d:?}");
        assert!(!d.name.is_empty());
        assert!(d.uuid.starts_with("GPU-") && d.uuid.len() == 40, "uuid {}", d.uuid);
        assert!(d.compute_capability.0 >= 3);
        assert!(d.total_memory > 0 && d.multiprocessor_count > 0);
        if let Some(bus) = &d.pci_bus_id {
            assert!(bus.contains(':'), "pci bus id {bus}");
        }
        assert_eq!(d.primary_context.active, d.primary_context.handle.is_some());
        if let Some(free) = d.free_memory {
            assert!(free <= d.total_memory);
        }
        if cuda::visible_devices_env().is_none() {
            assert_eq!(d.visible_as, None);
        }
    }
    let matrix = cuda::peer_access_matrix().expect("peer matrix");
    assert_eq!(matrix.len(), devices.len());
    for (i, row) in matrix.iter().enumerate() {
        assert_eq!(row.len(), devices.len());
        assert!(row[i]);
    }
    assert!(matches!(cuda::device_info(999), Err(CudaError::InvalidArgument(_))));
}

#[test]
fn device_buffer_attributes_name_the_primary_context() {
    let _serial = serial();
    if !cuda_here("device_buffer_attributes_name_the_primary_context") {
        return;
    }
    let before = current_ctx();
    let buffer = DeviceBuffer::new(0, 4 * MIB).expect("alloc");
    assert_eq!(current_ctx(), before, "allocation must leave the current context alone");
    let a = cuda::pointer_attributes(buffer.ptr()).expect("attributes");
    println!("{a:?}");
    assert_eq!(a.memory_type, MemoryType::Device);
    assert_eq!(a.memory_type_code, 2);
    assert_eq!(a.device_ordinal, 0);
    assert_eq!(a.context, buffer.context());
    assert_eq!(a.context_is_primary, Some(true));
    assert_eq!(a.range_start, buffer.ptr());
    assert!(a.range_size >= 4 * MIB as u64);
    assert_ne!(a.buffer_id, 0);
    assert!(!a.is_managed && !a.from_stream_ordered_pool());

    // An interior address lies in the same allocation.
    let inner = cuda::pointer_attributes(buffer.ptr() + 4096).expect("attributes");
    assert_eq!(inner.range_start, buffer.ptr());
    assert_eq!(inner.buffer_id, a.buffer_id);
    assert_eq!(inner.offset_in_allocation(), Some(4096));
    assert!(cuda::same_allocation(&a, inner.ptr, 1024));
    assert!(cuda::same_allocation_as(&a, &inner, 1024));

    // Another allocation is not the same one.
    let other = DeviceBuffer::new(0, MIB).expect("alloc");
    let b = cuda::pointer_attributes(other.ptr()).expect("attributes");
    assert_ne!(b.buffer_id, a.buffer_id);
    assert!(!cuda::same_allocation_as(&a, &b, MIB as u64));

    // The primary context is active now, so free memory is answered without creating anything.
    let state = cuda::primary_context_state(0).expect("state");
    assert!(state.active);
    assert_eq!(state.handle, Some(buffer.context()));
    let mem = cuda::mem_info(0, ContextPolicy::ExistingOnly).expect("mem info");
    assert!(mem.free <= mem.total && mem.used() > 0);
    assert_eq!(current_ctx(), before);
}

#[test]
fn a_context_current_on_the_thread_is_waited_for_as_it_is_and_another_is_not() {
    use cudarc::driver::sys;
    let _serial = serial();
    if !cuda_here("a_context_current_on_the_thread_is_waited_for_as_it_is_and_another_is_not") {
        return;
    }
    let before = current_ctx();
    let buffer = DeviceBuffer::new(0, MIB).expect("alloc"); // the primary context is active now
    let primary = buffer.context();
    if before != Some(primary) {
        assert!(!cuda::synchronize_if_current(primary).expect("ask"), "not current: nothing waited for");
    }
    // SAFETY: the primary context is alive (the buffer holds memory in it); popped below.
    let pushed = unsafe { sys::cuCtxPushCurrent_v2(primary as usize as sys::CUcontext) };
    assert_eq!(pushed, sys::CUresult::CUDA_SUCCESS);
    assert!(cuda::synchronize_if_current(primary).expect("wait"), "current: waited for as it is");
    assert_eq!(current_ctx(), Some(primary), "and left current");
    let mut popped: sys::CUcontext = std::ptr::null_mut();
    // SAFETY: pops the context pushed above.
    assert_eq!(unsafe { sys::cuCtxPopCurrent_v2(&mut popped) }, sys::CUresult::CUDA_SUCCESS);
    assert_eq!(current_ctx(), before);
    cuda::synchronize_context(0).expect("the full wait, from whatever is current");
    assert_eq!(current_ctx(), before);
}

#[test]
fn host_memory_kinds_are_told_apart() {
    let _serial = serial();
    if !cuda_here("host_memory_kinds_are_told_apart") {
        return;
    }
    let before = current_ctx();
    let pageable = vec![1u8; 4096];
    let a = cuda::pointer_attributes(pageable.as_ptr() as u64).expect("pageable attributes");
    println!("pageable: {a:?}");
    assert_eq!(a.memory_type, MemoryType::Pageable);
    assert_eq!(a.context, 0);
    assert_eq!(a.context_is_primary, None);
    assert!(!cuda::same_allocation(&a, pageable.as_ptr() as u64, 16));

    let pinned = PinnedHostBuffer::new(0, MIB).expect("pinned");
    let p = cuda::pointer_attributes(pinned.addr()).expect("pinned attributes");
    println!("pinned: {p:?}");
    assert_eq!(p.memory_type, MemoryType::Host);
    if p.range_size > 0 {
        assert!(p.contains(pinned.addr(), MIB as u64), "pinned range {p:?}");
    }
    assert!(cuda::check_device_range(pinned.addr(), 16, "source").is_err());
    assert_eq!(current_ctx(), before);
}

#[test]
fn private_context_allocation_is_not_primary_and_leaves_the_thread_alone() {
    let _serial = serial();
    if !cuda_here("private_context_allocation_is_not_primary_and_leaves_the_thread_alone") {
        return;
    }
    let primary = DeviceBuffer::new(0, MIB).expect("alloc"); // keeps the primary context active
    let before = current_ctx();
    let private = PrivateContextAllocation::new(0, MIB).expect("private context");
    assert_eq!(current_ctx(), before, "the private context must be popped");
    assert_ne!(private.context(), primary.context());
    let a = cuda::pointer_attributes(private.ptr()).expect("attributes");
    println!("private: {a:?}");
    assert_eq!(a.memory_type, MemoryType::Device);
    assert_eq!(a.context, private.context());
    assert_eq!(a.context_is_primary, Some(false));
    drop(private);
    assert_eq!(current_ctx(), before);
}

#[test]
fn device_copies_round_trip() {
    let _serial = serial();
    if !cuda_here("device_copies_round_trip") {
        return;
    }
    let before = current_ctx();
    let stream = Stream::new(0).expect("stream");
    let data = pattern(3 * MIB + 17, 3);
    let src = upload(&data, &stream);
    let dst = DeviceBuffer::new(0, data.len()).expect("alloc");
    cuda::copy_dtod_checked(dst.ptr(), src.ptr(), data.len(), &stream).expect("DtoD");
    assert_eq!(download(&dst, data.len(), &stream), data);

    // The same through an external handle: the legacy default stream, and our stream by handle.
    let zero = DeviceBuffer::new(0, data.len()).expect("alloc");
    zero.zero().expect("memset");
    let legacy = Stream::external(Stream::LEGACY_DEFAULT, 0);
    cuda::copy_dtod_checked(zero.ptr(), src.ptr(), data.len(), &legacy).expect("DtoD on stream 0");
    legacy.synchronize().expect("sync");
    let by_handle = Stream::external(stream.handle(), 0);
    assert_eq!(download(&zero, data.len(), &by_handle), data);

    // Checked copies refuse what does not fit, overlaps and host memory.
    let too_long = cuda::copy_dtod_checked(dst.ptr(), src.ptr(), 64 * MIB, &stream);
    assert!(matches!(too_long, Err(CudaError::InvalidArgument(_))), "{too_long:?}");
    let overlap = cuda::copy_dtod_checked(src.ptr() + 8, src.ptr(), 1024, &stream);
    assert!(matches!(overlap, Err(CudaError::InvalidArgument(_))), "{overlap:?}");
    let host = cuda::copy_dtod_checked(data.as_ptr() as u64, src.ptr(), 16, &stream);
    assert!(matches!(host, Err(CudaError::InvalidArgument(_))), "{host:?}");
    assert!(matches!(DeviceBuffer::new(999, 1), Err(CudaError::InvalidArgument(_))));
    assert_eq!(current_ctx(), before);
}

#[test]
fn staging_through_pinned_memory_copies_exactly() {
    let _serial = serial();
    if !cuda_here("staging_through_pinned_memory_copies_exactly") {
        return;
    }
    let before = current_ctx();
    let stream = Stream::new(0).expect("stream");
    // Not a multiple of the chunk, so the last chunk is short; odd chunk count and even.
    for (len, chunk) in [(37 * MIB + 123, 4 * MIB), (8 * MIB, 4 * MIB), (100, 4 * MIB)] {
        let data = pattern(len, len as u8);
        let src = upload(&data, &stream);
        let dst = DeviceBuffer::new(0, len).expect("alloc");
        let mut stager = PinnedStager::new(0, chunk).expect("stager");
        let report = stager.stage(src.ptr(), dst.ptr(), len, &stream, &mut || true).expect("stage");
        println!("{len} bytes via {chunk}: {report:?} = {:.2} GB/s", len as f64 / report.device_seconds / 1e9);
        assert_eq!(report.chunks as usize, len.div_ceil(chunk));
        assert!(report.device_seconds > 0.0);
        assert_eq!(download(&dst, len, &stream), data);
        // Reuse: a second copy into a fresh buffer through the same halves.
        let again = DeviceBuffer::new(0, len).expect("alloc");
        stager.stage(src.ptr(), again.ptr(), len, &stream, &mut || true).expect("stage again");
        assert_eq!(download(&again, len, &stream), data);
    }

    // The free function with a caller's buffer, on the legacy default stream.
    let data = pattern(10 * MIB + 1, 9);
    let legacy = Stream::external(Stream::LEGACY_DEFAULT, 0);
    let src = upload(&data, &legacy);
    let dst = DeviceBuffer::new(0, data.len()).expect("alloc");
    let pinned = PinnedHostBuffer::new(0, 2 * MIB).expect("pinned");
    // SAFETY: both ranges are our buffers; we synchronise before dropping `pinned`.
    let plan =
        unsafe { cuda::stage_through_pinned(src.ptr(), dst.ptr(), data.len(), MIB, &pinned, &legacy) }.expect("stage");
    legacy.synchronize().expect("sync");
    assert_eq!(plan.chunks as usize, data.len().div_ceil(MIB));
    assert_eq!(download(&dst, data.len(), &legacy), data);

    // An interrupted wait says so (the copy still completes on the GPU).
    let big = DeviceBuffer::new(0, 512 * MIB).expect("alloc");
    let big_dst = DeviceBuffer::new(0, 512 * MIB).expect("alloc");
    let mut stager = PinnedStager::new(0, PinnedStager::DEFAULT_CHUNK_BYTES).expect("stager");
    match stager.stage(big.ptr(), big_dst.ptr(), 512 * MIB, &stream, &mut || false) {
        Ok(r) => println!("finished before the first 50 ms check: {r:?}"),
        Err(e) => assert_eq!(e, CudaError::Interrupted),
    }
    stream.synchronize().expect("sync");
    assert_eq!(current_ctx(), before);
}

#[test]
fn event_timer_measures_device_time() {
    let _serial = serial();
    if !cuda_here("event_timer_measures_device_time") {
        return;
    }
    let before = current_ctx();
    let stream = Stream::new(0).expect("stream");
    let src = DeviceBuffer::new(0, 256 * MIB).expect("alloc");
    let dst = DeviceBuffer::new(0, 256 * MIB).expect("alloc");
    let mut timer = EventTimer::new(0).expect("timer");
    assert!(timer.elapsed_ms().is_err(), "elapsed before start/stop is an error");
    timer.start(&stream).expect("start");
    cuda::copy_dtod_checked(dst.ptr(), src.ptr(), 256 * MIB, &stream).expect("copy");
    timer.stop(&stream).expect("stop");
    let ms = timer.elapsed_ms().expect("elapsed");
    println!("256 MiB DtoD: {ms:.3} ms = {:.0} GB/s", 256.0 * MIB as f64 / (ms / 1e3) / 1e9);
    assert!(ms > 0.0 && ms < 1000.0);
    let again = timer.elapsed_ms_interruptibly(&mut || true).expect("elapsed");
    assert_eq!(again, ms);
    assert!(stream.is_done().expect("query"));
    assert_eq!(current_ctx(), before);
}

#[test]
fn memory_accounting_follows_allocations() {
    let _serial = serial();
    if !cuda_here("memory_accounting_follows_allocations") {
        return;
    }
    let keep = DeviceBuffer::new(0, MIB).expect("alloc"); // primary context active
    let before = cuda::mem_info(0, ContextPolicy::ExistingOnly).expect("mem info");
    let big = DeviceBuffer::new(0, 512 * MIB).expect("alloc");
    let after = cuda::mem_info(0, ContextPolicy::ExistingOnly).expect("mem info");
    println!("free {} → {} (total {})", before.free, after.free, after.total);
    // Other tests allocate at the same time; 512 MiB dwarfs what they do.
    assert!(before.free.saturating_sub(after.free) >= 256 * MIB as u64);
    drop((big, keep));
    cuda::synchronize_context(0).expect("synchronize");
}

#[test]
fn memory_meter_reads_without_touching_the_thread_and_a_context_costs_memory() {
    let _serial = serial();
    if !cuda_here("memory_meter_reads_without_touching_the_thread_and_a_context_costs_memory") {
        return;
    }
    let before = current_ctx();
    let meter = cuda::MemoryMeter::new(0).expect("meter");
    assert_eq!(current_ctx(), before, "the meter's context must be popped");
    let primary = cuda::primary_context_state(0).expect("primary state");
    assert_ne!(primary.handle, Some(meter.context()), "the meter's context is its own, not the primary one");
    let reading = meter.read().expect("read");
    assert!(reading.free > 0 && reading.free <= reading.total, "{reading:?}");
    assert_eq!(current_ctx(), before);
    // A 64 MiB allocation in the primary context shows in the meter's device-wide figure.
    let free = meter.read().expect("read").free;
    let big = DeviceBuffer::new(0, 64 * MIB).expect("alloc");
    let after = meter.read().expect("read").free;
    println!("64 MiB allocation: free {free} -> {after}");
    assert!(free - after >= 64 * MIB as u64, "free {free} -> {after}");
    drop(big);
    let step = meter.fresh_context_cost().expect("fresh context");
    println!("a fresh context: {step:?} = {} MiB", step.taken() / MIB as i64);
    assert!(step.taken() > 0, "creating a context took no device memory: {step:?}");
    assert_eq!(current_ctx(), before);
}

#[test]
fn peer_access_outlives_the_call_that_enabled_it() {
    let _serial = serial();
    if !cuda_here("peer_access_outlives_the_call_that_enabled_it") {
        return;
    }
    let count = cuda::devices().map(|d| d.len()).unwrap_or(0);
    if count < 2 || !cuda::peer_link(0, 1).map(|l| l.can_access).unwrap_or(false) {
        println!("peer_access_outlives_the_call_that_enabled_it: fewer than 2 GPUs with peer access");
        return;
    }
    let before = cuda::primary_context_state(1).expect("state of cuda:1");
    let ctx = current_ctx();
    cuda::enable_peer_access(0, 1).expect("enable peer access 0 -> 1");
    // Enabled between the two primary contexts: were cuda:1's released with the call (nobody
    // else held it), the access would go with it and peer copies would cross through the host.
    let after = cuda::primary_context_state(1).expect("state of cuda:1");
    println!("cuda:1's primary context before {before:?}, after {after:?}");
    assert!(after.active, "cuda:1's primary context must stay active with the peer access enabled into it");
    assert!(cuda::primary_context_state(0).expect("state of cuda:0").active);
    assert_eq!(current_ctx(), ctx, "the thread's current context is left as it was");
}
