//! Memory gpushare owns and hands to every framework at once: the storage of `gpushare.SharedBuffer`
//! and the destination of the `copy` and `pinned` transfer paths.
//!
//! An [`Allocation`] is either 256-byte-aligned host memory (DLPack asks for 256-byte alignment;
//! JAX and TensorFlow copy host memory that is less aligned than they want, so anything less would
//! turn "shared" into "copied") or device memory from the CUDA layer's [`DeviceBuffer`]. It lives in
//! an `Arc`: the Python object holds one reference and every exported DLPack tensor holds another in
//! its manager context, so the memory goes away only when the last framework lets go.
//!
//! **Streams.** A device allocation remembers the stream that last wrote it without waiting
//! (`pending`) and the streams that were handed it (`users`). An export to a consumer on another
//! stream waits for the pending write first ([`Allocation::ready_for`]); a pooled buffer used again
//! by a writer on another stream waits for its earlier users ([`take_pooled`]).
//!
//! **Pool.** The `copy` and `pinned` paths allocate a destination per conversion. `cuMemAlloc` and
//! `cuMemFree` (which waits for the whole device) would cost more than copying a few hundred MiB,
//! so their buffers go back to a small pool ([`POOL_MAX_BYTES`]) when the last consumer lets go, the
//! way PyTorch's caching allocator keeps `clone()` cheap; host buffers are pooled too (fresh pages
//! cost a page fault each, more than the copy into them). Buffers a user made with
//! `SharedBuffer(...)` are never pooled: they are freed when the last consumer lets go.

use std::alloc::{Layout as AllocLayout, alloc, alloc_zeroed, dealloc};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use crate::cuda::{self, CudaError, DeviceBuffer, PinnedStager, Stream};
use crate::dlpack::DType;

/// Alignment of host allocations: what DLPack recommends and the most any framework asks for.
pub const HOST_ALIGNMENT: usize = 256;
/// Host copies are cut into chunks of this size; between chunks the caller is asked whether to go
/// on (Ctrl-C in a notebook stops a multi-GiB copy within milliseconds).
pub const COPY_CHUNK_BYTES: usize = 64 << 20;
/// Most bytes the pool of the `copy`/`pinned` paths keeps for reuse.
pub const POOL_MAX_BYTES: usize = 4 << 30;
/// Most buffers the pool keeps.
pub const POOL_MAX_ENTRIES: usize = 16;
/// A stream that gpushare cannot name (a consumer that asked for no synchronisation, or one that
/// reads through `__cuda_array_interface__`): reusing memory it saw waits for the whole device.
pub const UNKNOWN_STREAM: u64 = u64::MAX;

/// Why a SharedBuffer could not be made, filled or exported.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SharedError {
    #[error("unknown device {0:?}: use \"cpu\", \"cuda\" or \"cuda:N\"")]
    BadDevice(String),
    #[error("unknown dtype {0:?}: use a name like float32, int64, bfloat16, bool, complex64")]
    BadDtype(String),
    #[error("{0}")]
    BadShape(String),
    #[error("cannot allocate {0} bytes of host memory")]
    OutOfHostMemory(usize),
    #[error("{0}")]
    NotApplicable(String),
    #[error("interrupted")]
    Interrupted,
    #[error(transparent)]
    Cuda(#[from] CudaError),
}

pub type Result<T, E = SharedError> = std::result::Result<T, E>;

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these locks leaves plain data that is still consistent.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

// ---------------------------------------------------------------------------------------------
// Devices and dtypes by name.

/// Where an allocation lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Device {
    Cpu,
    Cuda(i32),
}

impl Device {
    /// `"cpu"`, `"cuda"` (= `cuda:0`), `"cuda:N"`, `"gpu"`, `"gpu:N"`; case and spaces ignored.
    pub fn parse(text: &str) -> Result<Device> {
        let t = text.trim().to_ascii_lowercase();
        if t == "cpu" {
            return Ok(Device::Cpu);
        }
        for prefix in ["cuda", "gpu"] {
            if let Some(rest) = t.strip_prefix(prefix) {
                if rest.is_empty() {
                    return Ok(Device::Cuda(0));
                }
                if let Some(n) = rest.strip_prefix(':').and_then(|n| n.parse::<i32>().ok())
                    && n >= 0
                {
                    return Ok(Device::Cuda(n));
                }
            }
        }
        Err(SharedError::BadDevice(text.to_owned()))
    }

    /// From a DLPack `(device_type, device_id)`: CPU and page-locked host memory are host memory.
    pub fn from_dlpack(device_type: u32, device_id: i32) -> Result<Device> {
        match device_type {
            1 | 3 => Ok(Device::Cpu),
            2 => Ok(Device::Cuda(device_id)),
            other => Err(SharedError::NotApplicable(format!(
                "gpushare copies host and CUDA device memory; this array is in {} memory",
                crate::dlpack::device_type_name(other)
            ))),
        }
    }

    /// DLPack `(device_type, device_id)`.
    pub fn dlpack(self) -> (u32, i32) {
        match self {
            Device::Cpu => (1, 0),
            Device::Cuda(n) => (2, n),
        }
    }

    pub fn name(self) -> String {
        match self {
            Device::Cpu => "cpu".to_owned(),
            Device::Cuda(n) => format!("cuda:{n}"),
        }
    }
}

/// A dtype by the names NumPy, PyTorch and JAX use (`float32`, `bfloat16`, `bool`, `complex64`),
/// plus the short aliases `float`, `double`, `half`, `int`, `long`.
pub fn parse_dtype(name: &str) -> Result<DType> {
    let n = name.trim().to_ascii_lowercase();
    let n = n.strip_prefix("torch.").or_else(|| n.strip_prefix("np.")).unwrap_or(&n);
    let (code, bits) = match n {
        "bool" => (6, 8),
        "float" => (2, 32),
        "double" => (2, 64),
        "half" => (2, 16),
        "int" => (0, 32),
        "long" => (0, 64),
        "bfloat16" => (4, 16),
        other => {
            let (code, digits) = if let Some(d) = other.strip_prefix("float") {
                (2, d)
            } else if let Some(d) = other.strip_prefix("uint") {
                (1, d)
            } else if let Some(d) = other.strip_prefix("int") {
                (0, d)
            } else if let Some(d) = other.strip_prefix("complex") {
                (5, d)
            } else {
                return Err(SharedError::BadDtype(name.to_owned()));
            };
            let bits: u8 = digits.parse().map_err(|_| SharedError::BadDtype(name.to_owned()))?;
            let valid = match code {
                2 => matches!(bits, 16 | 32 | 64),
                5 => matches!(bits, 64 | 128),
                _ => matches!(bits, 8 | 16 | 32 | 64),
            };
            if !valid {
                return Err(SharedError::BadDtype(name.to_owned()));
            }
            (code, bits)
        }
    };
    Ok(DType { code, bits, lanes: 1 })
}

/// Bytes of a compact array of `shape` with items of `itemsize` bytes, checked for overflow.
pub fn compact_nbytes(shape: &[i64], itemsize: u64) -> Result<usize> {
    let mut n: u64 = itemsize;
    for (dim, &size) in shape.iter().enumerate() {
        if size < 0 {
            return Err(SharedError::BadShape(format!("dimension {dim} has negative size {size}")));
        }
        n = n.checked_mul(size as u64).ok_or_else(|| SharedError::BadShape("the size overflows 64 bits".into()))?;
    }
    usize::try_from(n).map_err(|_| SharedError::BadShape("the size does not fit in memory".into()))
}

// ---------------------------------------------------------------------------------------------
// Host memory.

/// `len` bytes of host memory aligned to [`HOST_ALIGNMENT`] (at least one byte is allocated, so
/// even an empty buffer has a real, aligned address).
pub struct HostMemory {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the struct exclusively owns its allocation; it hands out addresses only, and whoever
// writes through them (frameworks, the copy functions) is bound by the DLPack contract.
unsafe impl Send for HostMemory {}
// SAFETY: as above; no interior state besides the allocation.
unsafe impl Sync for HostMemory {}

impl HostMemory {
    fn layout(len: usize) -> Result<AllocLayout> {
        AllocLayout::from_size_align(len.max(1), HOST_ALIGNMENT).map_err(|_| SharedError::OutOfHostMemory(len))
    }

    pub fn new(len: usize, zeroed: bool) -> Result<HostMemory> {
        let layout = Self::layout(len)?;
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { if zeroed { alloc_zeroed(layout) } else { alloc(layout) } };
        let ptr = NonNull::new(raw).ok_or(SharedError::OutOfHostMemory(len))?;
        Ok(HostMemory { ptr, len })
    }

    pub fn addr(&self) -> u64 {
        self.ptr.as_ptr() as usize as u64
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for HostMemory {
    fn drop(&mut self) {
        // The layout was valid when allocating, so it is now.
        if let Ok(layout) = Self::layout(self.len) {
            // SAFETY: allocated in `new` with this layout.
            unsafe { dealloc(self.ptr.as_ptr(), layout) };
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Allocations, their liveness counter and the registry of live ones.

static ALIVE: AtomicUsize = AtomicUsize::new(0);

/// Allocations alive now (held by a SharedBuffer or by any exported tensor). Pooled buffers waiting
/// for reuse are not counted. For tests that check memory is freed only after the last consumer.
pub fn buffers_alive() -> usize {
    ALIVE.load(Ordering::SeqCst)
}

type Registry = Vec<(u64, u64, Weak<Allocation>)>;
static LIVE: Mutex<Registry> = Mutex::new(Vec::new());

/// Which streams wrote or read a device allocation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StreamLedger {
    /// A stream with a write queued that nobody has waited for.
    pub pending: Option<u64>,
    /// Streams the memory was written on or handed to; [`UNKNOWN_STREAM`] for consumers that
    /// gave none.
    pub users: Vec<u64>,
}

impl StreamLedger {
    fn note_user(&mut self, stream: u64) {
        let stream = normalize_stream(stream);
        if !self.users.contains(&stream) {
            self.users.push(stream);
        }
    }

    /// Whether a writer on `stream` must wait before writing memory these users saw: stream order
    /// protects it from users on the same stream, nothing protects it from the others.
    pub fn must_wait_before_write_on(&self, stream: u64) -> bool {
        let stream = normalize_stream(stream);
        self.users.iter().any(|&u| u != stream)
    }
}

/// Handles 0 and 1 both mean the legacy default stream (`cudaStreamLegacy`).
pub fn normalize_stream(handle: u64) -> u64 {
    if handle == 1 { 0 } else { handle }
}

/// The memory behind an allocation. `None` only while being dropped (it moves to the pool).
enum Memory {
    Host(Option<HostMemory>),
    Device(Option<DeviceBuffer>),
}

/// Memory that can wait in the pool.
enum Reusable {
    Host(HostMemory),
    Device(DeviceBuffer),
}

impl Reusable {
    fn len(&self) -> usize {
        match self {
            Reusable::Host(h) => h.len(),
            Reusable::Device(d) => d.len(),
        }
    }

    fn into_memory(self) -> Memory {
        match self {
            Reusable::Host(h) => Memory::Host(Some(h)),
            Reusable::Device(d) => Memory::Device(Some(d)),
        }
    }
}

/// Memory owned by gpushare, shared by reference counting (`Arc<Allocation>`).
pub struct Allocation {
    memory: Memory,
    /// Goes back to the pool when the last reference goes, instead of being freed.
    pooled: bool,
    ptr: u64,
    len: usize,
    device: Device,
    ledger: Mutex<StreamLedger>,
}

impl Allocation {
    fn register(memory: Memory, pooled: bool, device: Device, ledger: StreamLedger) -> Arc<Allocation> {
        let (ptr, len) = match &memory {
            Memory::Host(h) => h.as_ref().map_or((0, 0), |h| (h.addr(), h.len())),
            Memory::Device(d) => d.as_ref().map_or((0, 0), |b| (b.ptr(), b.len())),
        };
        let allocation = Arc::new(Allocation { memory, pooled, ptr, len, device, ledger: Mutex::new(ledger) });
        ALIVE.fetch_add(1, Ordering::SeqCst);
        if len > 0 {
            lock(&LIVE).push((ptr, ptr + len as u64, Arc::downgrade(&allocation)));
        }
        allocation
    }

    /// `len` bytes of 256-byte-aligned host memory; zeroed on request.
    pub fn host(len: usize, zeroed: bool) -> Result<Arc<Allocation>> {
        let memory = Memory::Host(Some(HostMemory::new(len, zeroed)?));
        Ok(Self::register(memory, false, Device::Cpu, StreamLedger::default()))
    }

    /// `len` bytes of device memory in device `ordinal`'s primary context (zeroed on request), freed
    /// when the last reference goes.
    pub fn on_device(ordinal: i32, len: usize, zeroed: bool) -> Result<Arc<Allocation>> {
        let buffer = DeviceBuffer::new(ordinal, len)?;
        if zeroed {
            buffer.zero()?;
        }
        Ok(Self::register(Memory::Device(Some(buffer)), false, Device::Cuda(ordinal), StreamLedger::default()))
    }

    /// `len` bytes (not zeroed) on `device` for a writer on `stream`, from the pool when it has memory
    /// of exactly that size there (after waiting for earlier users on other streams), returned to
    /// the pool when the last reference goes.
    pub fn pooled(device: Device, len: usize, stream: u64) -> Result<Arc<Allocation>> {
        let (memory, ledger) = match take_pooled(device, len, stream)? {
            Some((memory, ledger)) => (memory.into_memory(), ledger),
            None => match device {
                Device::Cpu => (Memory::Host(Some(HostMemory::new(len, false)?)), StreamLedger::default()),
                Device::Cuda(ordinal) => (Memory::Device(Some(DeviceBuffer::new(ordinal, len)?)), StreamLedger::default()),
            },
        };
        Ok(Self::register(memory, true, device, ledger))
    }

    /// Allocation of `len` bytes on `device`: host (aligned) or device memory.
    pub fn new(device: Device, len: usize, zeroed: bool) -> Result<Arc<Allocation>> {
        match device {
            Device::Cpu => Self::host(len, zeroed),
            Device::Cuda(ordinal) => Self::on_device(ordinal, len, zeroed),
        }
    }

    pub fn ptr(&self) -> u64 {
        self.ptr
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn device(&self) -> Device {
        self.device
    }

    pub fn is_pooled(&self) -> bool {
        self.pooled
    }

    pub fn ledger(&self) -> StreamLedger {
        lock(&self.ledger).clone()
    }

    /// A write was queued on `stream` and not waited for.
    pub fn note_write(&self, stream: u64) {
        let mut ledger = lock(&self.ledger);
        ledger.pending = Some(normalize_stream(stream));
        ledger.note_user(stream);
    }

    /// Makes the memory ready for a consumer that reads on `consumer` (`None`: a consumer that
    /// named no stream and reads on the legacy default stream; `Some(UNKNOWN_STREAM)`: one that asked
    /// for no synchronisation). A write still queued on another stream is waited for.
    pub fn ready_for(&self, consumer: Option<u64>, keep_waiting: &mut dyn FnMut() -> bool) -> Result<()> {
        let Device::Cuda(ordinal) = self.device else { return Ok(()) };
        let reader = normalize_stream(consumer.unwrap_or(0));
        let pending = {
            let mut ledger = lock(&self.ledger);
            ledger.note_user(reader);
            match ledger.pending {
                Some(p) if reader != UNKNOWN_STREAM && p != reader => ledger.pending.take(),
                _ => None,
            }
        };
        if let Some(stream) = pending {
            Stream::external(stream, ordinal).wait_interruptibly(keep_waiting).map_err(|e| match e {
                CudaError::Interrupted => SharedError::Interrupted,
                other => SharedError::Cuda(other),
            })?;
        }
        Ok(())
    }

    /// The stream a consumer must wait on before reading, for `__cuda_array_interface__` ("stream"),
    /// noting that an unnamed consumer uses the memory.
    pub fn pending_for_unknown_reader(&self) -> Option<u64> {
        let mut ledger = lock(&self.ledger);
        ledger.note_user(UNKNOWN_STREAM);
        ledger.pending
    }
}

impl Drop for Allocation {
    fn drop(&mut self) {
        if self.len > 0 {
            let me = self as *const Allocation;
            lock(&LIVE).retain(|(_, _, weak)| weak.as_ptr() != me && weak.strong_count() > 0);
        }
        ALIVE.fetch_sub(1, Ordering::SeqCst);
        if self.pooled {
            let reusable = match &mut self.memory {
                Memory::Host(h) => h.take().map(Reusable::Host),
                Memory::Device(d) => d.take().map(Reusable::Device),
            };
            if let Some(reusable) = reusable {
                let ledger = std::mem::take(&mut *lock(&self.ledger));
                give_to_pool(self.device, reusable, ledger);
            }
        }
        // Memory that is not pooled is freed by its own Drop.
    }
}

impl std::fmt::Debug for Allocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Allocation")
            .field("ptr", &format_args!("{:#x}", self.ptr))
            .field("len", &self.len)
            .field("device", &self.device)
            .field("pooled", &self.is_pooled())
            .finish()
    }
}

/// The live allocation that holds `[ptr, ptr + nbytes)`, if gpushare owns that memory.
pub fn owner_of(ptr: u64, nbytes: u64) -> Option<Arc<Allocation>> {
    let found = {
        let live = lock(&LIVE);
        live.iter()
            .filter(|(start, end, _)| *start <= ptr && ptr.saturating_add(nbytes) <= *end)
            .find_map(|(_, _, weak)| weak.upgrade())
    };
    // The lock is released before `found` can be dropped by the caller (whose Drop takes the lock).
    found
}

// ---------------------------------------------------------------------------------------------
// The pool of the copy and pinned paths.

struct Pooled {
    device: Device,
    memory: Reusable,
    ledger: StreamLedger,
}

static POOL: Mutex<Vec<Pooled>> = Mutex::new(Vec::new());

fn give_to_pool(device: Device, memory: Reusable, ledger: StreamLedger) {
    let len = memory.len();
    if len == 0 || len > POOL_MAX_BYTES {
        return; // dropped (freed) here
    }
    let evicted: Vec<Pooled> = {
        let mut pool = lock(&POOL);
        let mut evicted = Vec::new();
        while !pool.is_empty()
            && (pool.len() >= POOL_MAX_ENTRIES || pool.iter().map(|p| p.memory.len()).sum::<usize>() + len > POOL_MAX_BYTES)
        {
            evicted.push(pool.remove(0));
        }
        pool.push(Pooled { device, memory, ledger });
        evicted
    };
    drop(evicted); // freed outside the lock: cuMemFree waits for the device
}

/// Pooled memory of exactly `len` bytes on `device`, made safe to write on `stream`: if anyone used
/// it on another stream, the device is synchronised first.
fn take_pooled(device: Device, len: usize, stream: u64) -> Result<Option<(Reusable, StreamLedger)>> {
    let taken = {
        let mut pool = lock(&POOL);
        pool.iter().position(|p| p.device == device && p.memory.len() == len).map(|i| pool.remove(i))
    };
    let Some(Pooled { memory, mut ledger, .. }) = taken else { return Ok(None) };
    if let Device::Cuda(ordinal) = device
        && ledger.must_wait_before_write_on(stream)
    {
        cuda::synchronize_context(ordinal)?;
        ledger.users.clear();
    }
    ledger.pending = None;
    Ok(Some((memory, ledger)))
}

/// `(buffers, bytes)` in the pool.
pub fn pool_usage() -> (usize, usize) {
    let pool = lock(&POOL);
    (pool.len(), pool.iter().map(|p| p.memory.len()).sum())
}

/// Frees every pooled buffer (waits for the devices).
pub fn clear_pool() {
    let drained: Vec<Pooled> = std::mem::take(&mut *lock(&POOL));
    drop(drained);
}

// ---------------------------------------------------------------------------------------------
// Copies into a new allocation: the copy and pinned paths.

/// How a source gets into gpushare's memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// `cuMemcpyDtoDAsync` on the source's stream (GPU), `memcpy` in chunks (CPU).
    Copy,
    /// Device → page-locked host → device, double-buffered by the CUDA layer's [`PinnedStager`].
    Pinned,
    /// A peer copy from one GPU into memory gpushare allocates on another, after checking and
    /// enabling peer access (NVLink or PCIe P2P); the copy engine reads or writes the peer directly.
    P2p,
}

impl Method {
    pub fn parse(name: &str) -> Result<Method> {
        match name {
            "copy" => Ok(Method::Copy),
            "pinned" => Ok(Method::Pinned),
            "p2p" => Ok(Method::P2p),
            other => Err(SharedError::NotApplicable(format!("unknown copy method {other:?}: copy, pinned or p2p"))),
        }
    }
}

/// What a copy did.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct CopyReport {
    pub bytes: u64,
    /// Device time of a staged copy (events on the caller's stream); `None` for queued copies.
    pub device_seconds: Option<f64>,
    /// Host chunks or staging chunks.
    pub chunks: u64,
    /// The copy finished before returning (`false`: queued on the stream).
    pub complete: bool,
}

/// Copies `len` bytes of host memory from `src` to `dst` in chunks of [`COPY_CHUNK_BYTES`], asking
/// `keep_going` between chunks. Returns the number of chunks.
///
/// # Safety
/// `[src, src+len)` must be readable and `[dst, dst+len)` writable for the whole call, and the two
/// must not overlap.
pub unsafe fn copy_host_chunked(dst: u64, src: u64, len: usize, keep_going: &mut dyn FnMut() -> bool) -> Result<u64> {
    let mut offset = 0usize;
    let mut chunks = 0u64;
    while offset < len {
        if chunks > 0 && !keep_going() {
            return Err(SharedError::Interrupted);
        }
        let n = COPY_CHUNK_BYTES.min(len - offset);
        // SAFETY: the caller's contract; offset + n <= len.
        unsafe {
            std::ptr::copy_nonoverlapping(
                (src as usize + offset) as *const u8,
                (dst as usize + offset) as *mut u8,
                n,
            );
        }
        offset += n;
        chunks += 1;
    }
    Ok(chunks)
}

fn stager_for(from: i32, to: i32) -> Result<Arc<Mutex<PinnedStager>>> {
    type Stagers = Vec<((i32, i32), Arc<Mutex<PinnedStager>>)>;
    static STAGERS: Mutex<Stagers> = Mutex::new(Vec::new());
    let mut stagers = lock(&STAGERS);
    if let Some((_, s)) = stagers.iter().find(|(o, _)| *o == (from, to)) {
        return Ok(Arc::clone(s));
    }
    let stager = Arc::new(Mutex::new(PinnedStager::between(from, to, PinnedStager::DEFAULT_CHUNK_BYTES)?));
    stagers.push(((from, to), Arc::clone(&stager)));
    Ok(stager)
}

/// Peer access enabled both ways between two devices, once per pair and process.
fn ensure_peer_access(a: i32, b: i32) -> Result<()> {
    static ENABLED: Mutex<Vec<(i32, i32)>> = Mutex::new(Vec::new());
    let mut enabled = lock(&ENABLED);
    if enabled.contains(&(a, b)) {
        return Ok(());
    }
    cuda::enable_peer_access(a, b).map_err(|e| match e {
        CudaError::InvalidArgument(why) => SharedError::NotApplicable(format!("p2p: {why}; use path='pinned'")),
        other => SharedError::Cuda(other),
    })?;
    cuda::enable_peer_access(b, a).map_err(SharedError::Cuda)?;
    enabled.push((a, b));
    enabled.push((b, a));
    Ok(())
}

fn interrupted_or(e: CudaError) -> SharedError {
    match e {
        CudaError::Interrupted => SharedError::Interrupted,
        other => SharedError::Cuda(other),
    }
}

/// A new allocation holding a copy of the `len` bytes at `src` on `device`, made by `method`. On
/// the GPU the copy is ordered after the work queued on `stream` (the source framework's current
/// stream); a `Copy` is left queued there (the allocation remembers it), a `Pinned` copy is waited for.
///
/// # Safety
/// `[src, src+len)` must be live memory of `device` (as a DLPack producer described it) that stays
/// alive and unchanged until the copy has finished.
pub unsafe fn copy_of(
    src: u64,
    len: usize,
    device: Device,
    method: Method,
    stream: u64,
    keep_going: &mut dyn FnMut() -> bool,
) -> Result<(Arc<Allocation>, CopyReport)> {
    // SAFETY: the caller's contract.
    unsafe { copy_to(src, len, device, device, method, stream, keep_going) }
}

/// [`copy_of`] into a new allocation on device `to`: a move between GPUs (`p2p`, `pinned`), or a
/// copy on the source's own device (`to == device`). A move is waited for before returning: the
/// copy runs on the source's stream, which the target device's consumers cannot name.
///
/// # Safety
/// As [`copy_of`].
pub unsafe fn copy_to(
    src: u64,
    len: usize,
    device: Device,
    to: Device,
    method: Method,
    stream: u64,
    keep_going: &mut dyn FnMut() -> bool,
) -> Result<(Arc<Allocation>, CopyReport)> {
    if to != device {
        return match (device, to, method) {
            (Device::Cuda(a), Device::Cuda(b), Method::P2p) => {
                ensure_peer_access(a, b)?;
                let allocation = Allocation::pooled(Device::Cuda(b), len, stream)?;
                if len > 0 {
                    let source = Stream::external(stream, a);
                    cuda::copy_dtod_checked(allocation.ptr(), src, len, &source)?;
                    // A blocking wait, not a polled one: a GiB crosses NVLink in about 3 ms, and
                    // polling at 1 ms steps would cost a third of that.
                    source.synchronize()?;
                    let _ = keep_going;
                }
                lock(&allocation.ledger).note_user(stream);
                Ok((allocation, CopyReport { bytes: len as u64, device_seconds: None, chunks: 1, complete: true }))
            }
            (Device::Cuda(a), Device::Cuda(b), Method::Pinned) => {
                let allocation = Allocation::pooled(Device::Cuda(b), len, stream)?;
                let stager = stager_for(a, b)?;
                let report = lock(&stager)
                    .stage(src, allocation.ptr(), len, &Stream::external(stream, a), keep_going)
                    .map_err(interrupted_or)?;
                lock(&allocation.ledger).note_user(stream);
                Ok((
                    allocation,
                    CopyReport { bytes: report.bytes, device_seconds: Some(report.device_seconds), chunks: report.chunks, complete: true },
                ))
            }
            (Device::Cuda(_), Device::Cuda(_), Method::Copy) => Err(SharedError::NotApplicable(format!(
                "copy stays on the source's device ({}); to move to {} use path='p2p' (peer copy) or 'pinned' (host staging)",
                device.name(),
                to.name()
            ))),
            _ => Err(SharedError::NotApplicable(format!(
                "gpushare's own copies move device memory between GPUs; {} → {} is a move for the frameworks' own paths \
                 (dlpack with dl_device, or the framework's .to/device_put)",
                device.name(),
                to.name()
            ))),
        };
    }
    match (device, method) {
        (_, Method::P2p) => Err(SharedError::NotApplicable(format!(
            "p2p copies between two GPUs and the target device is the source's own ({}): use path='copy', or pass device='cuda:N'",
            device.name()
        ))),
        (Device::Cpu, Method::Pinned) => Err(SharedError::NotApplicable(
            "pinned stages device memory through page-locked host memory; this array is already in host \
             memory (cpu): use path='copy'"
                .into(),
        )),
        (Device::Cpu, Method::Copy) => {
            let allocation = Allocation::pooled(Device::Cpu, len, stream)?;
            // SAFETY: the caller's contract for `src`; the destination is fresh and `len` long.
            let chunks = unsafe { copy_host_chunked(allocation.ptr(), src, len, keep_going) }?;
            Ok((allocation, CopyReport { bytes: len as u64, device_seconds: None, chunks, complete: true }))
        }
        (Device::Cuda(ordinal), Method::Copy) => {
            let allocation = Allocation::pooled(Device::Cuda(ordinal), len, stream)?;
            if len > 0 {
                cuda::copy_dtod_checked(allocation.ptr(), src, len, &Stream::external(stream, ordinal))?;
                allocation.note_write(stream);
            }
            Ok((allocation, CopyReport { bytes: len as u64, device_seconds: None, chunks: 1, complete: false }))
        }
        (Device::Cuda(ordinal), Method::Pinned) => {
            let allocation = Allocation::pooled(Device::Cuda(ordinal), len, stream)?;
            let stager = stager_for(ordinal, ordinal)?;
            let report = lock(&stager)
                .stage(src, allocation.ptr(), len, &Stream::external(stream, ordinal), keep_going)
                .map_err(|e| match e {
                    CudaError::Interrupted => SharedError::Interrupted,
                    other => SharedError::Cuda(other),
                })?;
            lock(&allocation.ledger).note_user(stream);
            Ok((
                allocation,
                CopyReport {
                    bytes: report.bytes,
                    device_seconds: Some(report.device_seconds),
                    chunks: report.chunks,
                    complete: true,
                },
            ))
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Compact copies of strided arrays: what the copy and pinned paths hand over.

/// A strided array as a DLPack producer described it, for [`compact_copy_of`].
#[derive(Debug, Clone, Copy)]
pub struct StridedSource<'a> {
    /// Address of element (0, 0, …).
    pub data: u64,
    /// Lowest byte the layout reaches, and how many bytes from there to one past the highest.
    pub span_start: u64,
    pub span_len: usize,
    pub shape: &'a [i64],
    /// In elements; zero (broadcast) and negative (reversed) strides included.
    pub strides: &'a [i64],
    pub itemsize: u64,
}

/// How a strided array is read into a compact one: units of `unit` bytes, the dimensions in units
/// (outermost first) with their byte strides, dimensions of one dropped and neighbours that step
/// through memory as one dimension merged, so that the copy loops as little as it can.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatherPlan {
    /// 1, 2, 4 or 8: the widest that divides the item size, the source address and every stride,
    /// so that every unit read is aligned.
    pub unit: u64,
    pub shape: Vec<u64>,
    pub byte_strides: Vec<i64>,
}

impl GatherPlan {
    pub fn units(&self) -> u64 {
        self.shape.iter().product()
    }
}

/// The [`GatherPlan`] of a source. `shape` must be valid (non-negative, its bytes fit in memory).
pub fn gather_plan(data: u64, shape: &[i64], strides: &[i64], itemsize: u64) -> Result<GatherPlan> {
    let overflow = || SharedError::BadShape(format!("strides {strides:?} of itemsize {itemsize} overflow 64 bits"));
    let mut dims: Vec<(u64, i64)> = Vec::with_capacity(shape.len() + 1);
    for (&size, &stride) in shape.iter().zip(strides) {
        if size != 1 {
            let bytes = stride.checked_mul(itemsize as i64).ok_or_else(overflow)?;
            dims.push((size as u64, bytes));
        }
    }
    let mut unit = 8u64;
    while unit > 1
        && (!itemsize.is_multiple_of(unit) || !data.is_multiple_of(unit) || dims.iter().any(|&(_, st)| !st.unsigned_abs().is_multiple_of(unit)))
    {
        unit /= 2;
    }
    if itemsize / unit > 1 {
        dims.push((itemsize / unit, unit as i64));
    }
    let mut merged: Vec<(u64, i64)> = Vec::with_capacity(dims.len());
    for (size, stride) in dims {
        match merged.last_mut() {
            // The outer dimension steps exactly over the whole inner one: one dimension in memory.
            Some((outer, outer_stride)) if Some(*outer_stride) == stride.checked_mul(size as i64) => {
                *outer *= size;
                *outer_stride = stride;
            }
            _ => merged.push((size, stride)),
        }
    }
    if merged.is_empty() {
        merged.push((1, unit as i64)); // a single unit (0-d, or every dimension of size one)
    }
    Ok(GatherPlan { unit, shape: merged.iter().map(|d| d.0).collect(), byte_strides: merged.iter().map(|d| d.1).collect() })
}

/// Copies the strided array at `src` that `plan` describes into the compact array at `dst`, on the
/// host, asking `keep_going` after every [`COPY_CHUNK_BYTES`] written. Contiguous innermost runs
/// are copied whole. Returns the number of chunks.
///
/// # Safety
/// Every byte the plan reaches from `src` must be readable, `[dst, dst + plan.units() * plan.unit)`
/// writable, and the two must not overlap, for the whole call.
pub unsafe fn gather_host(dst: u64, src: u64, plan: &GatherPlan, keep_going: &mut dyn FnMut() -> bool) -> Result<u64> {
    let n = plan.shape.len();
    let contiguous_inner = n > 0 && plan.byte_strides[n - 1] == plan.unit as i64;
    let (outer_shape, outer_strides, run) = if contiguous_inner {
        (&plan.shape[..n - 1], &plan.byte_strides[..n - 1], plan.shape[n - 1] * plan.unit)
    } else {
        (&plan.shape[..], &plan.byte_strides[..], plan.unit)
    };
    if outer_shape.contains(&0) || run == 0 {
        return Ok(0);
    }
    let runs: u64 = outer_shape.iter().product();
    let mut index = vec![0u64; outer_shape.len()];
    let mut offset: i64 = 0;
    let mut out = dst;
    let (mut written, mut chunks) = (0u64, 1u64);
    for _ in 0..runs {
        let from = (src as i64).wrapping_add(offset) as usize;
        let to = out as usize;
        // SAFETY: the caller's contract: `from` is an address the layout reaches, `to` lies in the
        // destination; units are read and written unaligned, so no alignment is assumed.
        unsafe {
            match run {
                1 => *(to as *mut u8) = *(from as *const u8),
                2 => std::ptr::write_unaligned(to as *mut u16, std::ptr::read_unaligned(from as *const u16)),
                4 => std::ptr::write_unaligned(to as *mut u32, std::ptr::read_unaligned(from as *const u32)),
                8 => std::ptr::write_unaligned(to as *mut u64, std::ptr::read_unaligned(from as *const u64)),
                _ => std::ptr::copy_nonoverlapping(from as *const u8, to as *mut u8, run as usize),
            }
        }
        out += run;
        written += run;
        if written >= COPY_CHUNK_BYTES as u64 {
            if !keep_going() {
                return Err(SharedError::Interrupted);
            }
            written = 0;
            chunks += 1;
        }
        // Next index, last dimension fastest; the offset follows without multiplying.
        for d in (0..index.len()).rev() {
            index[d] += 1;
            offset = offset.wrapping_add(outer_strides[d]);
            if index[d] < outer_shape[d] {
                break;
            }
            offset = offset.wrapping_sub(outer_strides[d].wrapping_mul(outer_shape[d] as i64));
            index[d] = 0;
        }
    }
    Ok(chunks)
}

/// A new allocation holding a **compact** (C-contiguous) copy of `source`, made by `method`: a
/// broadcast view becomes its full array, a reversed one its values in order, so that every target
/// accepts the copy (TensorFlow and JAX take compact layouts only, PyTorch no negative strides).
/// A contiguous source is copied as one block ([`copy_of`]); any other is gathered: on the host
/// here, on the GPU by gpushare's kernel ([`cuda::gather_strided`]), queued on `stream` like
/// [`copy_of`]'s copies. `Pinned` gathers on the device first, then stages the compact result.
///
/// # Safety
/// `source` must describe live memory of `device` (as a DLPack producer described it) that stays
/// alive and unchanged until the copy has finished.
pub unsafe fn compact_copy_of(
    source: &StridedSource<'_>,
    device: Device,
    method: Method,
    stream: u64,
    keep_going: &mut dyn FnMut() -> bool,
) -> Result<(Arc<Allocation>, CopyReport)> {
    let len = compact_nbytes(source.shape, source.itemsize)?;
    if crate::dlpack::is_c_contiguous(source.shape, source.strides) || (device, method) == (Device::Cpu, Method::Pinned) {
        // SAFETY: the caller's contract; a C-contiguous array is the `len` bytes from its element 0
        // (and the host+pinned case is refused before memory is read).
        return unsafe { copy_of(source.data, len, device, method, stream, keep_going) };
    }
    let plan = gather_plan(source.data, source.shape, source.strides, source.itemsize)?;
    match (device, method) {
        (Device::Cpu, _) => {
            let allocation = Allocation::pooled(Device::Cpu, len, stream)?;
            // SAFETY: the caller's contract for the source; the destination is fresh and `len` long.
            let chunks = unsafe { gather_host(allocation.ptr(), source.data, &plan, keep_going) }?;
            Ok((allocation, CopyReport { bytes: len as u64, device_seconds: None, chunks, complete: true }))
        }
        (Device::Cuda(ordinal), Method::Copy) => {
            if plan.shape.len() > cuda::GATHER_MAX_DIMS {
                return Err(SharedError::NotApplicable(format!(
                    "this layout has {} dimensions that cannot be merged; gpushare's GPU gather takes at most {}: make it contiguous first",
                    plan.shape.len(),
                    cuda::GATHER_MAX_DIMS
                )));
            }
            cuda::check_device_range(source.span_start, source.span_len as u64, "source")?;
            let allocation = Allocation::pooled(Device::Cuda(ordinal), len, stream)?;
            // SAFETY: the source lies in one device allocation (checked above) and stays alive (the
            // caller's contract); the destination is fresh, `len` = units x unit bytes long.
            unsafe {
                cuda::gather_strided(
                    allocation.ptr(),
                    source.data,
                    plan.unit,
                    &plan.shape,
                    &plan.byte_strides,
                    &Stream::external(stream, ordinal),
                )
            }?;
            allocation.note_write(stream);
            Ok((allocation, CopyReport { bytes: len as u64, device_seconds: None, chunks: 1, complete: false }))
        }
        (Device::Cuda(_), Method::Pinned) => {
            // SAFETY: the caller's contract.
            let (compact, _) = unsafe { compact_copy_of(source, device, Method::Copy, stream, keep_going) }?;
            // Staged on the same stream, so after the gather; the stager waits, so `compact` may go.
            // SAFETY: `compact` is a live device allocation of `len` bytes.
            unsafe { copy_of(compact.ptr(), len, device, Method::Pinned, stream, keep_going) }
        }
        (Device::Cuda(_), Method::P2p) => Err(SharedError::NotApplicable(
            "p2p copies between two GPUs: name the target device (device='cuda:N'); on the source's own device use path='copy'".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
