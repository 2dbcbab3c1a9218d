//! A strided gather on the GPU: the kernel behind compact copies of broadcast, reversed and other
//! non-contiguous device arrays (`path="copy"`/`"pinned"`).
//!
//! `cuMemcpy2D`/`3D` cannot do it: they take no zero or negative pitch, and a copy per element would
//! be millions of driver calls. So gpushare carries one small kernel as PTX text (no NVRTC, no CUDA
//! toolkit at build or run time), which the driver compiles for the device when it is first used,
//! once per context. Each thread copies one unit (1, 2, 4 or 8 bytes: the widest that divides the
//! item size, the source address and every stride, so every load and store is aligned) to output
//! position `i`, after decomposing `i` over the shape, innermost dimension first.

use std::ffi::c_void;
use std::sync::Mutex;

use cudarc::driver::sys;

use super::context::current_ctx_raw;
use super::error::{CudaError, Result, check, guarded};
use super::stream::Stream;

/// Dimensions the kernel takes after [`crate::shared::gather_plan`] merged what it could.
pub const GATHER_MAX_DIMS: usize = 16;
/// Unit widths in bytes, one kernel each.
const UNITS: [u64; 4] = [1, 2, 4, 8];
const THREADS: u32 = 256;
/// At most this many blocks; the kernel strides over the rest (gridDim.x may be up to 2^31-1, but a
/// grid this size already fills any current GPU).
const MAX_BLOCKS: u64 = 1 << 16;

/// The PTX of the four kernels `gpushare_gather_{1,2,4,8}`.
///
/// Parameters: `dst` (compact output), `src` (address of element 0), `n` (units to copy), `ndim`,
/// and `desc`: 16 unit counts (innermost dimension first) followed by 16 byte strides (signed).
/// ISA 7.0 / sm_75 so that every driver since CUDA 11.0 loads it and the driver's JIT compiles it
/// for newer GPUs (Hopper included). Generic loads and stores: the addresses come from DLPack
/// producers and may be any device-addressable memory (cuMemAlloc, pools, managed memory).
pub fn gather_ptx() -> String {
    let mut ptx = String::from(".version 7.0\n.target sm_75\n.address_size 64\n");
    for unit in UNITS {
        let (reg_type, mem_type) = match unit {
            1 => ("u16", "u8"), // PTX has no 8-bit registers: u8 loads widen into a 16-bit one
            2 => ("u16", "u16"),
            4 => ("u32", "u32"),
            _ => ("u64", "u64"),
        };
        ptx.push_str(&format!(
            "
.visible .entry gpushare_gather_{unit}(
    .param .u64 p_dst,
    .param .u64 p_src,
    .param .u64 p_n,
    .param .u32 p_ndim,
    .param .align 8 .b8 p_desc[256]
)
{{
    .reg .pred %p<4>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<16>;
    .reg .{reg_type} %v;

    ld.param.u64 %rd1, [p_dst];
    ld.param.u64 %rd2, [p_src];
    ld.param.u64 %rd3, [p_n];
    ld.param.u32 %r1, [p_ndim];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mul.wide.u32 %rd4, %r2, %r3;
    cvt.u64.u32 %rd5, %r4;
    add.u64 %rd4, %rd4, %rd5;
    mov.u32 %r5, %nctaid.x;
    mul.wide.u32 %rd6, %r5, %r3;
LOOP_{unit}:
    setp.ge.u64 %p1, %rd4, %rd3;
    @%p1 bra DONE_{unit};
    mov.u64 %rd7, %rd4;
    mov.u64 %rd8, 0;
"
        ));
        for d in 0..GATHER_MAX_DIMS {
            let (shape_at, stride_at) = (8 * d, 8 * (GATHER_MAX_DIMS + d));
            ptx.push_str(&format!(
                "    setp.le.u32 %p2, %r1, {d};
    @%p2 bra ADDR_{unit};
    ld.param.u64 %rd9, [p_desc+{shape_at}];
    ld.param.u64 %rd10, [p_desc+{stride_at}];
    div.u64 %rd11, %rd7, %rd9;
    mul.lo.u64 %rd12, %rd11, %rd9;
    sub.u64 %rd12, %rd7, %rd12;
    mad.lo.s64 %rd8, %rd12, %rd10, %rd8;
    mov.u64 %rd7, %rd11;
"
            ));
        }
        ptx.push_str(&format!(
            "ADDR_{unit}:
    add.s64 %rd13, %rd2, %rd8;
    ld.{mem_type} %v, [%rd13];
    mul.lo.u64 %rd14, %rd4, {unit};
    add.u64 %rd14, %rd1, %rd14;
    st.{mem_type} [%rd14], %v;
    add.u64 %rd4, %rd4, %rd6;
    bra LOOP_{unit};
DONE_{unit}:
    ret;
}}
"
        ));
    }
    ptx
}

/// The loaded kernels of one context: `(context handle, [function per unit])`. Modules stay loaded
/// for the life of the context (primary contexts, which gpushare retains while it has memory there).
type Loaded = Vec<(u64, [u64; 4])>;
static LOADED: Mutex<Loaded> = Mutex::new(Vec::new());

/// The kernel for `unit`-byte units in the current context, loading the module on first use.
fn kernel(unit: u64) -> Result<sys::CUfunction> {
    let index = UNITS
        .iter()
        .position(|&u| u == unit)
        .ok_or_else(|| CudaError::InvalidArgument(format!("no gather kernel for {unit}-byte units")))?;
    let ctx = current_ctx_raw()?.ok_or_else(|| CudaError::NoContext("no current context to load the gather kernel in".into()))?;
    let key = ctx as usize as u64;
    let mut loaded = LOADED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((_, functions)) = loaded.iter().find(|(c, _)| *c == key) {
        return Ok(functions[index] as usize as sys::CUfunction);
    }
    let mut image = gather_ptx().into_bytes();
    image.push(0); // cuModuleLoadData takes PTX as a NUL-terminated string
    let mut module: sys::CUmodule = std::ptr::null_mut();
    // SAFETY: `image` is NUL-terminated PTX text, alive for the call; writes one CUmodule.
    check("cuModuleLoadData", unsafe { sys::cuModuleLoadData(&mut module, image.as_ptr().cast::<c_void>()) })?;
    let mut functions = [0u64; 4];
    for (slot, u) in functions.iter_mut().zip(UNITS) {
        let name = std::ffi::CString::new(format!("gpushare_gather_{u}")).expect("no NUL in the name");
        let mut f: sys::CUfunction = std::ptr::null_mut();
        // SAFETY: `module` was just loaded; writes one CUfunction.
        check("cuModuleGetFunction", unsafe { sys::cuModuleGetFunction(&mut f, module, name.as_ptr()) })?;
        *slot = f as usize as u64;
    }
    loaded.push((key, functions));
    Ok(functions[index] as usize as sys::CUfunction)
}

/// Queues on `stream` a copy of the strided array at `src` into the compact array at `dst`:
/// `n_units` units of `unit` bytes; `shape` (units per dimension) and `byte_strides` outermost
/// first, at most [`GATHER_MAX_DIMS`] of them, their product `n_units`.
///
/// # Safety
/// Every address the layout reaches from `src` must be readable device memory, and
/// `[dst, dst + n_units * unit)` writable device memory not overlapping it, both alive and
/// untouched by others until the copy has finished on `stream`.
pub unsafe fn gather_strided(
    dst: u64,
    src: u64,
    unit: u64,
    shape: &[u64],
    byte_strides: &[i64],
    stream: &Stream,
) -> Result<()> {
    if shape.len() != byte_strides.len() || shape.len() > GATHER_MAX_DIMS {
        return Err(CudaError::InvalidArgument(format!(
            "the gather kernel takes at most {GATHER_MAX_DIMS} dimensions with one stride each, not shape {shape:?} and strides {byte_strides:?}"
        )));
    }
    let n_units = shape.iter().try_fold(1u64, |acc, &s| acc.checked_mul(s));
    let Some(n_units) = n_units else {
        return Err(CudaError::InvalidArgument(format!("shape {shape:?} overflows 64 bits")));
    };
    if n_units == 0 {
        return Ok(());
    }
    // The kernel reads dimensions innermost first.
    let mut desc = [0u64; 2 * GATHER_MAX_DIMS];
    for (k, (&size, &stride)) in shape.iter().rev().zip(byte_strides.iter().rev()).enumerate() {
        desc[k] = size;
        desc[GATHER_MAX_DIMS + k] = stride as u64;
    }
    let blocks = n_units.div_ceil(THREADS as u64).min(MAX_BLOCKS) as u32;
    guarded(|| {
        let _scope = stream.enter()?;
        let function = kernel(unit)?;
        let (mut dst, mut src, mut n, mut ndim) = (dst, src, n_units, shape.len() as u32);
        let mut params: [*mut c_void; 5] = [
            (&mut dst as *mut u64).cast(),
            (&mut src as *mut u64).cast(),
            (&mut n as *mut u64).cast(),
            (&mut ndim as *mut u32).cast(),
            desc.as_mut_ptr().cast(),
        ];
        // SAFETY: the function takes exactly these five parameters (u64, u64, u64, u32, 256 bytes),
        // each pointed to by `params` for the duration of the call (the driver copies them); the
        // memory it touches is the caller's contract.
        check("cuLaunchKernel", unsafe {
            sys::cuLaunchKernel(
                function,
                blocks,
                1,
                1,
                THREADS,
                1,
                1,
                0,
                stream.raw(),
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        })
    })
}
