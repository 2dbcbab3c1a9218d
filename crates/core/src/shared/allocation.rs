//! The memory itself: 256-byte-aligned [`HostMemory`], the reference-counted [`Allocation`] that a
//! SharedBuffer and every exported tensor hold, the registry that finds the allocation behind an
//! address ([`owner_of`]), and the [`StreamLedger`] of the streams that wrote or read it.

use std::alloc::{Layout as AllocLayout, alloc, alloc_zeroed, dealloc};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use super::pool::{give_to_pool, take_pooled};
use super::{Device, HOST_ALIGNMENT, Result, SharedError, UNKNOWN_STREAM, lock};
use crate::cuda::{self, CudaError, DeviceBuffer, Stream};

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
    /// The device of that stream where it is not the memory's own: a peer copy queued on the
    /// source's stream. `None`: the memory's own device.
    pub pending_on: Option<i32>,
    /// Streams the memory was written on or handed to; [`UNKNOWN_STREAM`] for consumers that
    /// gave none.
    pub users: Vec<u64>,
}

impl StreamLedger {
    pub(super) fn note_user(&mut self, stream: u64) {
        let stream = normalize_stream(stream);
        if !self.users.contains(&stream) {
            self.users.push(stream);
        }
    }

    /// Whether a writer on `stream` must wait before writing memory these users saw: stream order
    /// protects it from users on the same stream, nothing protects it from the others.
    pub fn must_wait_before_write_on(&self, stream: u64) -> bool {
        !matches!(self.waits_before_write(stream, true), Waits::None)
    }

    /// What a writer on `stream` must wait for before writing memory these users saw. The users are
    /// streams of the memory's own device; a writer on another device (a peer or staged move into
    /// this memory) shares no stream order with any of them, even where the handles are equal (0
    /// is each device's own legacy default stream).
    pub fn waits_before_write(&self, stream: u64, writer_on_this_device: bool) -> Waits {
        let stream = normalize_stream(stream);
        if self.users.contains(&UNKNOWN_STREAM) {
            return Waits::Device;
        }
        let others: Vec<u64> = self.users.iter().copied().filter(|&u| !writer_on_this_device || u != stream).collect();
        if others.is_empty() { Waits::None } else { Waits::Streams(others) }
    }
}

/// What a write into pooled memory waits for ([`StreamLedger::waits_before_write`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Waits {
    None,
    /// These streams of the memory's device: the writer's stream waits for them on the device.
    Streams(Vec<u64>),
    /// A consumer that named no stream used it: the whole device is synchronised.
    Device,
}

/// Handles 0 and 1 both mean the legacy default stream (`cudaStreamLegacy`).
pub fn normalize_stream(handle: u64) -> u64 {
    if handle == 1 { 0 } else { handle }
}

/// The memory behind an allocation. `None` only while being dropped (it moves to the pool).
pub(super) enum Memory {
    Host(Option<HostMemory>),
    Device(Option<DeviceBuffer>),
}

/// Memory that can wait in the pool.
pub(super) enum Reusable {
    Host(HostMemory),
    Device(DeviceBuffer),
}

impl Reusable {
    pub(super) fn len(&self) -> usize {
        match self {
            Reusable::Host(h) => h.len(),
            Reusable::Device(d) => d.len(),
        }
    }

    pub(super) fn into_memory(self) -> Memory {
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
    pub(super) ledger: Mutex<StreamLedger>,
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
        let writer = match device {
            Device::Cuda(ordinal) => ordinal,
            Device::Cpu => -1,
        };
        Self::pooled_for(device, len, stream, writer)
    }

    /// [`Allocation::pooled`] for a writer whose `stream` works on device `writer_ordinal`, which
    /// may be another device than the memory's (a move into it).
    pub fn pooled_for(device: Device, len: usize, stream: u64, writer_ordinal: i32) -> Result<Arc<Allocation>> {
        let (memory, ledger) = match take_pooled(device, len, stream, writer_ordinal)? {
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
        ledger.pending_on = None;
        ledger.note_user(stream);
    }

    /// A write into this memory was queued on `stream` of another device, `ordinal` (a peer copy on
    /// the source's stream), and not waited for. That stream is no user of this memory: its handle
    /// would stand for one of this device's streams.
    pub fn note_write_from(&self, stream: u64, ordinal: i32) {
        let mut ledger = lock(&self.ledger);
        ledger.pending = Some(normalize_stream(stream));
        ledger.pending_on = Some(ordinal);
    }

    /// The stream of another device whose write into this memory may still be running, if any.
    fn pending_elsewhere(&self) -> Option<Stream> {
        let ledger = lock(&self.ledger);
        match (ledger.pending, ledger.pending_on) {
            (Some(stream), Some(on)) => Some(Stream::external(stream, on)),
            _ => None,
        }
    }

    /// Makes the memory ready for a consumer that reads on `consumer` (`None`: a consumer that
    /// named no stream and reads on the legacy default stream; `Some(UNKNOWN_STREAM)`: one that asked
    /// for no synchronisation). A write still queued on another stream is waited for.
    ///
    /// A peer copy still running on another device's stream is waited for on the device where the
    /// consumer named its stream (an event: the host goes on, and the copy overlaps whatever the
    /// host does next), and on the host where it named none (a legacy capsule: TensorFlow reads on
    /// streams of its own).
    pub fn ready_for(&self, consumer: Option<u64>, keep_waiting: &mut dyn FnMut() -> bool) -> Result<()> {
        let Device::Cuda(ordinal) = self.device else { return Ok(()) };
        if let Some(writer) = self.pending_elsewhere() {
            let reader = consumer.map(normalize_stream);
            if reader != Some(UNKNOWN_STREAM) {
                lock(&self.ledger).note_user(reader.unwrap_or(0));
            }
            return match reader {
                Some(UNKNOWN_STREAM) => Ok(()),
                Some(stream) => cuda::order_after(&Stream::external(stream, ordinal), &writer).map_err(SharedError::Cuda),
                None => {
                    writer.wait_interruptibly(keep_waiting).map_err(|e| match e {
                        CudaError::Interrupted => SharedError::Interrupted,
                        other => SharedError::Cuda(other),
                    })?;
                    let mut ledger = lock(&self.ledger);
                    (ledger.pending, ledger.pending_on) = (None, None);
                    Ok(())
                }
            };
        }
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
    ///
    /// A peer copy still running on another device is waited for first: that stream's handle means
    /// nothing to a reader on this device.
    pub fn pending_for_unknown_reader(&self) -> Result<Option<u64>> {
        if let Some(writer) = self.pending_elsewhere() {
            writer.synchronize().map_err(SharedError::Cuda)?;
            let mut ledger = lock(&self.ledger);
            (ledger.pending, ledger.pending_on) = (None, None);
        }
        let mut ledger = lock(&self.ledger);
        ledger.note_user(UNKNOWN_STREAM);
        Ok(ledger.pending)
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
