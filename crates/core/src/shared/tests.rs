//! Tests of gpushare's own memory without a GPU: allocation and liveness, the pool, host copies and
//! gathers, devices and dtypes by name, the stream ledger.

use std::sync::{Arc, Mutex};

use super::*;
use crate::cuda;
use crate::dlpack::DType;

/// Tests that read the global liveness counter run one at a time.
static COUNTER: Mutex<()> = Mutex::new(());

#[test]
fn host_memory_is_256_byte_aligned_and_zeroed() {
    for len in [0usize, 1, 3, 255, 256, 257, 4096, 1 << 20] {
        let m = HostMemory::new(len, true).unwrap();
        assert_eq!(m.addr() % HOST_ALIGNMENT as u64, 0, "len {len}");
        assert_eq!(m.len(), len);
        // SAFETY: the memory is ours and at least max(len, 1) bytes long.
        let bytes = unsafe { std::slice::from_raw_parts(m.addr() as usize as *const u8, len.max(1)) };
        assert!(bytes.iter().all(|&b| b == 0));
    }
}

#[test]
fn an_allocation_lives_until_its_last_reference() {
    let _serial = lock(&COUNTER);
    let before = buffers_alive();
    let a = Allocation::host(1024, true).unwrap();
    assert_eq!(buffers_alive(), before + 1);
    let consumer_one = Arc::clone(&a);
    let consumer_two = Arc::clone(&a);
    drop(a);
    assert_eq!(buffers_alive(), before + 1, "consumers still hold it");
    drop(consumer_one);
    assert_eq!(buffers_alive(), before + 1);
    drop(consumer_two);
    assert_eq!(buffers_alive(), before);
}

#[test]
fn owner_of_finds_live_allocations_only() {
    let _serial = lock(&COUNTER);
    let a = Allocation::host(4096, false).unwrap();
    let found = owner_of(a.ptr() + 100, 200).expect("inside");
    assert!(Arc::ptr_eq(&found, &a));
    assert!(owner_of(a.ptr() + 4000, 200).is_none(), "runs past the end");
    let addr = a.ptr();
    drop(found);
    drop(a);
    assert!(owner_of(addr, 1).is_none());
}

#[test]
fn host_copies_are_exact_and_interruptible() {
    let len = COPY_CHUNK_BYTES * 2 + 17;
    let src: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
    let dst = HostMemory::new(len, false).unwrap();
    let mut asked = 0;
    // SAFETY: both ranges are ours and `len` long.
    let chunks = unsafe {
        copy_host_chunked(dst.addr(), src.as_ptr() as usize as u64, len, &mut || {
            asked += 1;
            true
        })
    }
    .unwrap();
    assert_eq!((chunks, asked), (3, 2));
    // SAFETY: written above.
    let out = unsafe { std::slice::from_raw_parts(dst.addr() as usize as *const u8, len) };
    assert!(out == src.as_slice());
    // SAFETY: as above.
    let stopped = unsafe { copy_host_chunked(dst.addr(), src.as_ptr() as usize as u64, len, &mut || false) };
    assert_eq!(stopped, Err(SharedError::Interrupted));
}

#[test]
fn copy_of_host_memory_and_refusals() {
    let _serial = lock(&COUNTER);
    let src: Vec<u32> = (0..1000).collect();
    // SAFETY: `src` is live host memory of 4000 bytes.
    let (copy, report) =
        unsafe { copy_of(src.as_ptr() as usize as u64, 4000, Device::Cpu, Method::Copy, 0, &mut || true) }.unwrap();
    assert_eq!((report.bytes, report.complete), (4000, true));
    assert_eq!(copy.ptr() % 256, 0);
    // SAFETY: the allocation holds 4000 bytes written above.
    let out = unsafe { std::slice::from_raw_parts(copy.ptr() as usize as *const u32, 1000) };
    assert_eq!(out, src.as_slice());
    // SAFETY: refused before touching memory.
    let refused = unsafe { copy_of(src.as_ptr() as usize as u64, 4000, Device::Cpu, Method::Pinned, 0, &mut || true) };
    assert!(matches!(refused, Err(SharedError::NotApplicable(m)) if m.contains("path='copy'")));
}

#[test]
fn host_copies_reuse_pooled_memory() {
    let _serial = lock(&COUNTER);
    let src: Vec<u8> = (0..3013u32).map(|i| (i % 7) as u8).collect(); // a size no other test uses
    let copy = || {
        // SAFETY: `src` is live host memory of src.len() bytes.
        unsafe { copy_of(src.as_ptr() as usize as u64, src.len(), Device::Cpu, Method::Copy, 0, &mut || true) }
            .unwrap()
            .0
    };
    let before = buffers_alive();
    let first = copy();
    assert!(first.is_pooled());
    let addr = first.ptr();
    drop(first);
    assert_eq!(buffers_alive(), before, "pooled memory is not counted as alive");
    let second = copy();
    assert_eq!(second.ptr(), addr, "the pooled buffer is reused");
    // SAFETY: the allocation holds src.len() bytes written by the copy.
    let out = unsafe { std::slice::from_raw_parts(second.ptr() as usize as *const u8, src.len()) };
    assert_eq!(out, src.as_slice());
}

/// The strided array's bytes in C order, element by element: what a compact copy must hold.
fn reference_gather(base: &[u8], data: usize, shape: &[i64], strides: &[i64], itemsize: usize) -> Vec<u8> {
    let numel: i64 = shape.iter().product();
    let mut out = Vec::new();
    for flat in 0..numel {
        let (mut rem, mut offset) = (flat, data as i64);
        for (&size, &stride) in shape.iter().zip(strides).rev() {
            offset += (rem % size) * stride * itemsize as i64;
            rem /= size;
        }
        out.extend_from_slice(&base[offset as usize..offset as usize + itemsize]);
    }
    out
}

#[test]
fn gather_plans_merge_what_steps_as_one_and_read_aligned_units() {
    let plan = |data, shape: &[i64], strides: &[i64], itemsize| gather_plan(data, shape, strides, itemsize).unwrap();
    // A broadcast column (reshape(4, 1).expand(4, 8)) of float32: rows of one repeated unit.
    let p = plan(0x1000, &[4, 8], &[1, 0], 4);
    assert_eq!((p.unit, p.shape.as_slice(), p.byte_strides.as_slice()), (4, &[4u64, 8][..], &[4i64, 0][..]));
    // Reversed float64: one dimension, stepping back.
    assert_eq!(plan(0x1000, &[5], &[-1], 8).byte_strides, vec![-8]);
    // Contiguous rows of complex128 merge into one run of 8-byte units; size-1 dims vanish.
    let p = plan(0x1000, &[3, 1, 4], &[8, 99, 1], 16);
    assert_eq!((p.unit, p.shape, p.byte_strides), (8, vec![3, 8], vec![128, 8]));
    // A float64 source 4 bytes off alignment is read in 4-byte units.
    let p = plan(0x1004, &[6], &[2], 8);
    assert_eq!((p.unit, p.shape, p.byte_strides), (4, vec![6, 2], vec![16, 4]));
    // 0-d: one unit.
    assert_eq!(plan(0x1000, &[], &[], 2).units(), 1);
    assert!(gather_plan(0, &[2], &[i64::MAX], 8).is_err());
}

#[test]
fn host_gathers_equal_the_element_by_element_copy_for_any_layout() {
    let base: Vec<u8> = (0..4096u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
    let mut seed = 12345u64;
    let mut next = |n: u64| {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (seed >> 33) % n
    };
    for case in 0..3000 {
        let itemsize = [1usize, 2, 4, 8, 16][next(5) as usize];
        let ndim = next(5) as usize;
        let shape: Vec<i64> = (0..ndim).map(|_| next(5) as i64).collect();
        let strides: Vec<i64> = (0..ndim).map(|_| next(13) as i64 - 6).collect();
        // Start where the extent fits in `base`, at any (also odd) address.
        let reach = |sign: i64| -> i64 {
            shape.iter().zip(&strides).map(|(&n, &s)| if n > 0 && s * sign > 0 { (n - 1) * s.abs() } else { 0 }).sum::<i64>()
                * itemsize as i64
        };
        let data = (reach(-1) + next(7) as i64) as usize;
        assert!(data as i64 + reach(1) + itemsize as i64 <= base.len() as i64);
        let expected = reference_gather(&base, data, &shape, &strides, itemsize);
        let plan = gather_plan(base.as_ptr() as u64 + data as u64, &shape, &strides, itemsize as u64).unwrap();
        let mut out = vec![0xAAu8; expected.len() + 1];
        if !shape.contains(&0) {
            // SAFETY: every byte the layout reaches lies in `base` (checked above); `out` is longer.
            unsafe { gather_host(out.as_mut_ptr() as u64, base.as_ptr() as u64 + data as u64, &plan, &mut || true) }.unwrap();
        }
        assert_eq!(&out[..expected.len()], expected.as_slice(), "case {case}: {shape:?} {strides:?} x{itemsize} at {data}");
        assert_eq!(out[expected.len()], 0xAA, "case {case}: wrote past the end");
    }
}

#[test]
fn compact_copies_of_broadcast_and_reversed_host_arrays() {
    let _serial = lock(&COUNTER);
    let col: Vec<f32> = vec![1.0, 2.0, 3.0, 4.0];
    let source = |data: u64, shape: &'static [i64], strides: &'static [i64]| StridedSource {
        data,
        span_start: col.as_ptr() as u64,
        span_len: 16,
        shape,
        strides,
        itemsize: 4,
    };
    let read = |a: &Allocation, n: usize| {
        // SAFETY: the allocation holds at least n f32 written by the copy.
        unsafe { std::slice::from_raw_parts(a.ptr() as usize as *const f32, n) }.to_vec()
    };
    // reshape(4, 1).expand(4, 3)
    let (copy, report) =
        unsafe { compact_copy_of(&source(col.as_ptr() as u64, &[4, 3], &[1, 0]), Device::Cpu, Method::Copy, 0, &mut || true) }
            .unwrap();
    assert_eq!(report.bytes, 48);
    assert_eq!(read(&copy, 12), [1., 1., 1., 2., 2., 2., 3., 3., 3., 4., 4., 4.]);
    // x[::-1]: element 0 is the last one.
    let last = col.as_ptr() as u64 + 12;
    let (copy, _) = unsafe { compact_copy_of(&source(last, &[4], &[-1]), Device::Cpu, Method::Copy, 0, &mut || true) }.unwrap();
    assert_eq!(read(&copy, 4), [4., 3., 2., 1.]);
    let refused = unsafe { compact_copy_of(&source(last, &[4], &[-1]), Device::Cpu, Method::Pinned, 0, &mut || true) };
    assert!(matches!(refused, Err(SharedError::NotApplicable(m)) if m.contains("path='copy'")));
    // A broadcast gather of more than a chunk asks to go on, and stops when told.
    let one = [7u8];
    let wide: &'static [i64] = Box::leak(vec![(COPY_CHUNK_BYTES * 2) as i64].into_boxed_slice());
    let big = StridedSource { data: one.as_ptr() as u64, span_start: one.as_ptr() as u64, span_len: 1, shape: wide, strides: &[0], itemsize: 1 };
    let stopped = unsafe { compact_copy_of(&big, Device::Cpu, Method::Copy, 0, &mut || false) };
    assert_eq!(stopped.err(), Some(SharedError::Interrupted));
}

#[test]
fn the_gather_kernels_are_well_formed_ptx() {
    let ptx = cuda::gather_ptx();
    for unit in [1, 2, 4, 8] {
        assert_eq!(ptx.matches(&format!(".entry gpushare_gather_{unit}(")).count(), 1);
    }
    assert_eq!(ptx.matches('{').count(), ptx.matches('}').count());
    // GPUSHARE_PTXAS=/path/to/ptxas assembles it for Hopper (the GPU machine has no toolkit).
    if let Ok(ptxas) = std::env::var("GPUSHARE_PTXAS") {
        let path = std::env::temp_dir().join(format!("gpushare-gather-{}.ptx", std::process::id()));
        std::fs::write(&path, &ptx).unwrap();
        let out = std::process::Command::new(ptxas).args(["--gpu-name", "sm_90", "-o", "/dev/null"]).arg(&path).output().unwrap();
        let _ = std::fs::remove_file(&path);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
}

#[test]
fn devices_and_dtypes_by_name() {
    assert_eq!(Device::parse("cpu").unwrap(), Device::Cpu);
    assert_eq!(Device::parse(" CUDA ").unwrap(), Device::Cuda(0));
    assert_eq!(Device::parse("cuda:3").unwrap(), Device::Cuda(3));
    assert_eq!(Device::parse("gpu:1").unwrap(), Device::Cuda(1));
    assert!(Device::parse("cuda:-1").is_err());
    assert!(Device::parse("tpu").is_err());
    assert_eq!(Device::Cuda(2).dlpack(), (2, 2));
    assert_eq!(Device::from_dlpack(3, 0).unwrap(), Device::Cpu);
    assert!(Device::from_dlpack(10, 0).is_err());
    assert_eq!(parse_dtype("float32").unwrap(), DType { code: 2, bits: 32, lanes: 1 });
    assert_eq!(parse_dtype("torch.bfloat16").unwrap().name(), "bfloat16");
    assert_eq!(parse_dtype("bool").unwrap().itemsize(), 1);
    assert_eq!(parse_dtype("complex64").unwrap().itemsize(), 8);
    assert_eq!(parse_dtype("uint8").unwrap().name(), "uint8");
    assert!(parse_dtype("float7").is_err());
    assert!(parse_dtype("string").is_err());
    assert_eq!(compact_nbytes(&[2, 3], 4).unwrap(), 24);
    assert_eq!(compact_nbytes(&[], 8).unwrap(), 8);
    assert!(compact_nbytes(&[-1], 4).is_err());
    assert!(compact_nbytes(&[i64::MAX, 4], 4).is_err());
}

#[test]
fn stream_ledger_says_when_reuse_must_wait() {
    let mut ledger = StreamLedger::default();
    assert!(!ledger.must_wait_before_write_on(7));
    ledger.note_user(1); // the legacy default stream, by its DLPack sentinel
    assert!(!ledger.must_wait_before_write_on(0), "0 and 1 are the same stream");
    assert!(ledger.must_wait_before_write_on(0x55));
    ledger.users.clear();
    ledger.note_user(UNKNOWN_STREAM);
    assert!(ledger.must_wait_before_write_on(0));
}

#[test]
fn a_writer_on_another_device_waits_for_every_user_even_one_with_its_own_handle() {
    use super::allocation::Waits;
    let mut ledger = StreamLedger::default();
    assert_eq!(ledger.waits_before_write(0, false), Waits::None);
    // cuda:1's legacy default stream read the memory; a peer copy on cuda:0's stream 0 is not
    // ordered after it, though both handles are 0.
    ledger.note_user(0);
    assert_eq!(ledger.waits_before_write(0, true), Waits::None);
    assert_eq!(ledger.waits_before_write(0, false), Waits::Streams(vec![0]));
    ledger.note_user(0x55);
    assert_eq!(ledger.waits_before_write(0x55, true), Waits::Streams(vec![0]));
    assert_eq!(ledger.waits_before_write(0x55, false), Waits::Streams(vec![0, 0x55]));
    // A consumer that named no stream: only the whole device is safe.
    ledger.note_user(UNKNOWN_STREAM);
    assert_eq!(ledger.waits_before_write(0, true), Waits::Device);
    assert_eq!(ledger.waits_before_write(0, false), Waits::Device);
}

#[test]
fn cpu_allocations_need_no_stream_work() {
    let _serial = lock(&COUNTER);
    let a = Allocation::host(64, true).unwrap();
    a.ready_for(Some(0x1234), &mut || true).unwrap();
    assert_eq!(a.device(), Device::Cpu);
    assert!(!a.is_pooled());
}

#[test]
fn without_cuda_device_memory_is_an_error_not_a_panic() {
    if cuda::driver_status().is_available() {
        return; // covered by the GPU tests
    }
    let _serial = lock(&COUNTER);
    let before = buffers_alive();
    assert!(matches!(Allocation::on_device(0, 1024, true), Err(SharedError::Cuda(_))));
    assert!(matches!(Allocation::pooled(Device::Cuda(0), 1024, 0), Err(SharedError::Cuda(_))));
    assert_eq!(buffers_alive(), before);
    
}
