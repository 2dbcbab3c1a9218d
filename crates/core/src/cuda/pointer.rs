//! What the driver knows about an address: memory type, device, owning context, allocation range.

use std::borrow::Cow;
use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::sys;
use serde::{Serialize, Serializer};

use super::context::active_primary_handle;
use super::error::{CudaError, Result, check, guarded};

/// The kind of memory behind an address, as `CU_POINTER_ATTRIBUTE_MEMORY_TYPE` (+ `IS_MANAGED`) says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MemoryType {
    /// Device memory (`cuMemAlloc`, `cudaMalloc`, caching allocators, stream-ordered pools, VMM).
    Device,
    /// Page-locked host memory the driver allocated or registered (`cuMemHostAlloc`,
    /// `cudaMallocHost`, `cudaHostRegister`, torch `pin_memory()`, JAX `pinned_host`).
    Host,
    /// Managed (unified) memory (`cudaMallocManaged`, CuPy managed pools): `IS_MANAGED` is set.
    Managed,
    /// An address the driver does not know: ordinary pageable host memory (malloc, NumPy), or no
    /// memory at all. The attribute query succeeds with type 0, context 0 and ordinal −2.
    Pageable,
    /// A CUDA array (`CU_MEMORYTYPE_ARRAY`); not expected from a plain pointer.
    Array,
    /// `CU_MEMORYTYPE_UNIFIED`; used by memcpy descriptors, not expected from a pointer query.
    Unified,
    /// A code this build does not know (a newer driver).
    Unknown(u32),
}

impl MemoryType {
    /// Maps the raw `MEMORY_TYPE` code. Managed memory reports a device or host type depending on
    /// where it lives, so `IS_MANAGED` wins over the code.
    pub fn from_driver(code: u32, is_managed: bool) -> MemoryType {
        if is_managed && code != 0 {
            return MemoryType::Managed;
        }
        match code {
            0 => MemoryType::Pageable,
            1 => MemoryType::Host,
            2 => MemoryType::Device,
            3 => MemoryType::Array,
            4 => MemoryType::Unified,
            other => MemoryType::Unknown(other),
        }
    }

    pub fn name(&self) -> Cow<'static, str> {
        match self {
            MemoryType::Device => "device".into(),
            MemoryType::Host => "pinned_host".into(),
            MemoryType::Managed => "managed".into(),
            MemoryType::Pageable => "pageable_host".into(),
            MemoryType::Array => "array".into(),
            MemoryType::Unified => "unified".into(),
            MemoryType::Unknown(code) => format!("unknown({code})").into(),
        }
    }

    /// Memory a kernel on the GPU can address directly (device, managed; pinned host only if mapped).
    pub fn is_device_addressable(&self) -> bool {
        matches!(self, MemoryType::Device | MemoryType::Managed | MemoryType::Unified)
    }
}

impl std::fmt::Display for MemoryType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

impl Serialize for MemoryType {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.name())
    }
}

/// The driver's answer about one address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PointerAttributes {
    /// The address asked about.
    pub ptr: u64,
    pub memory_type: MemoryType,
    /// The raw `CU_POINTER_ATTRIBUTE_MEMORY_TYPE` code (0 when the driver does not know the address).
    pub memory_type_code: u32,
    /// CUDA ordinal of the device the memory belongs to; −2 for pageable host memory.
    pub device_ordinal: i32,
    /// The owning context (`CU_POINTER_ATTRIBUTE_CONTEXT`), 0 when there is none.
    ///
    /// 0 does not mean "not CUDA memory": memory mapped through the virtual-memory-management API
    /// (`cuMemCreate`/`cuMemMap`) and memory from stream-ordered pools (`cudaMallocAsync`,
    /// `cuMemAllocFromPoolAsync`) belongs to the device, not to a context, so it reports no owning
    /// context. JAX/XLA on an H200 reported exactly that (type device, context 0), as does PyTorch
    /// with `PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync` or `expandable_segments:True`, and TF with
    /// `TF_GPU_ALLOCATOR=cuda_malloc_async`. Such memory is usable from any context on the device.
    pub context: u64,
    /// Whether `context` is its device's primary context; `None` when there is no owning context.
    pub context_is_primary: Option<bool>,
    /// Start of the allocation the address lies in (`RANGE_START_ADDR`): for a caching allocator
    /// (PyTorch, CuPy) this is the allocator's segment, not the tensor.
    pub range_start: u64,
    /// Size of that allocation in bytes; 0 when unknown (pageable memory).
    pub range_size: u64,
    /// A process-unique id of the allocation (`BUFFER_ID`), 0 when unknown. Two addresses in the same
    /// allocation have the same id.
    pub buffer_id: u64,
    pub is_managed: bool,
    /// The memory pool handle (`MEMPOOL_HANDLE`) when the memory came from a stream-ordered pool, else 0.
    pub mempool: u64,
}

impl PointerAttributes {
    /// The driver knows this address (anything but pageable host memory).
    pub fn is_known_to_cuda(&self) -> bool {
        self.memory_type != MemoryType::Pageable
    }

    /// `[ptr, ptr + nbytes)` lies inside this address's allocation. `nbytes == 0` (an empty view)
    /// counts when `ptr` lies in the allocation or at its end. Always false for pageable memory,
    /// whose extent the driver does not know.
    pub fn contains(&self, ptr: u64, nbytes: u64) -> bool {
        if self.range_size == 0 || ptr < self.range_start {
            return false;
        }
        let offset = ptr - self.range_start;
        match offset.checked_add(nbytes) {
            Some(end) if nbytes == 0 => end <= self.range_size,
            Some(end) => offset < self.range_size && end <= self.range_size,
            None => false,
        }
    }

    /// Byte offset of `ptr` from the start of its allocation.
    pub fn offset_in_allocation(&self) -> Option<u64> {
        (self.range_size > 0 && self.ptr >= self.range_start).then(|| self.ptr - self.range_start)
    }

    /// The memory came from a stream-ordered pool (and so has no owning context).
    pub fn from_stream_ordered_pool(&self) -> bool {
        self.mempool != 0
    }
}

/// `[b_ptr, b_ptr + b_nbytes)` lies inside the allocation that `a` was taken from: the target of a
/// conversion aliases the source's CUDA allocation (possibly at an offset), even if the addresses
/// differ. Needs only the source's attributes; false when `a` is pageable host memory.
pub fn same_allocation(a: &PointerAttributes, b_ptr: u64, b_nbytes: u64) -> bool {
    a.contains(b_ptr, b_nbytes)
}

/// [`same_allocation`] when both sides' attributes are at hand: the same non-zero buffer id, or
/// `b`'s bytes inside `a`'s allocation range.
pub fn same_allocation_as(a: &PointerAttributes, b: &PointerAttributes, b_nbytes: u64) -> bool {
    (a.buffer_id != 0 && a.buffer_id == b.buffer_id) || same_allocation(a, b.ptr, b_nbytes)
}

/// The attributes queried, in this order, one 8-byte zeroed slot each (see [`decode_slots`]).
const ATTRIBUTES: [sys::CUpointer_attribute; 8] = [
    sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_CONTEXT,
    sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
    sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
    sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
    sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_RANGE_SIZE,
    sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_BUFFER_ID,
    sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_IS_MANAGED,
    // Last, so a driver that refuses it can be asked again without it.
    sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE,
];

/// Reads the first four bytes of a slot: where the driver stores a 4-byte value (an enum, an int),
/// whatever the byte order.
fn low_u32(slot: u64) -> u32 {
    let b = slot.to_ne_bytes();
    u32::from_ne_bytes([b[0], b[1], b[2], b[3]])
}

/// Turns the raw slots into attributes (without the primary-context comparison, which needs the
/// driver). Each slot was zeroed and the driver wrote 4 or 8 bytes (or a 1-byte bool for
/// `IS_MANAGED` on some drivers) at its start, so 4-byte values are read from the first four bytes
/// and flags as "any byte non-zero". Enum outputs are read as integers: an unknown code must not
/// become an invalid Rust enum value.
pub(crate) fn decode_slots(ptr: u64, slots: &[u64; 8]) -> PointerAttributes {
    let is_managed = slots[6] != 0;
    let memory_type_code = low_u32(slots[1]);
    PointerAttributes {
        ptr,
        memory_type: MemoryType::from_driver(memory_type_code, is_managed),
        memory_type_code,
        context: slots[0],
        context_is_primary: None,
        device_ordinal: low_u32(slots[2]) as i32,
        range_start: slots[3],
        range_size: slots[4],
        buffer_id: slots[5],
        is_managed,
        mempool: slots[7],
    }
}

/// One `cuPointerGetAttributes` call for the first `count` of [`ATTRIBUTES`], into fresh zeroed slots.
fn query_slots(ptr: u64, count: usize) -> (sys::CUresult, [u64; 8]) {
    let mut slots = [0u64; 8];
    let mut attrs = ATTRIBUTES;
    let base = slots.as_mut_ptr();
    // SAFETY: `base` points at 8 u64 slots, all in bounds.
    let mut data: [*mut c_void; 8] = std::array::from_fn(|i| unsafe { base.add(i) }.cast::<c_void>());
    let count = count.min(ATTRIBUTES.len());
    // SAFETY: `attrs` and `data` hold at least `count` entries; each data slot is 8 bytes, the widest
    // attribute value asked for, and outlives the call.
    let rc = unsafe { sys::cuPointerGetAttributes(count as u32, attrs.as_mut_ptr(), data.as_mut_ptr(), ptr) };
    (rc, slots)
}

/// Asks the driver about `ptr` with `cuPointerGetAttributes`, which, unlike the single-attribute
/// call, answers for addresses it does not know (pageable host memory) instead of failing. Needs
/// `cuInit` but no current context, and creates none.
pub fn pointer_attributes(ptr: u64) -> Result<PointerAttributes> {
    guarded(|| {
        let mut attributes = unlabelled_attributes(ptr)?;
        label_primary_inner(&mut attributes)?;
        Ok(attributes)
    })
}

/// [`pointer_attributes`] without `context_is_primary`: one driver call. For a caller that keeps
/// what it learnt per allocation (`BUFFER_ID` is unique in the process, and a live allocation's
/// context, and so whether that context is primary, cannot change) and labels only allocations it
/// has not seen with [`label_primary`].
pub fn pointer_attributes_unlabelled(ptr: u64) -> Result<PointerAttributes> {
    guarded(|| unlabelled_attributes(ptr))
}

/// Fills `context_is_primary` (three driver calls) of attributes from [`pointer_attributes_unlabelled`].
pub fn label_primary(attributes: &mut PointerAttributes) -> Result<()> {
    guarded(|| label_primary_inner(attributes))
}

fn label_primary_inner(attributes: &mut PointerAttributes) -> Result<()> {
    if attributes.context != 0 && attributes.device_ordinal >= 0 {
        let primary = active_primary_handle(attributes.device_ordinal)?;
        attributes.context_is_primary = Some(primary == Some(attributes.context));
    }
    Ok(())
}

/// [`pointer_attributes`] without `context_is_primary` (which costs three more driver calls): what
/// a check of the memory's kind and extent needs. Call inside [`guarded`].
fn unlabelled_attributes(ptr: u64) -> Result<PointerAttributes> {
    let (mut rc, mut slots) = query_slots(ptr, ATTRIBUTES.len());
    if rc == sys::CUresult::CUDA_ERROR_INVALID_VALUE {
        // A driver that refuses MEMPOOL_HANDLE: ask again for the first seven.
        (rc, slots) = query_slots(ptr, ATTRIBUTES.len() - 1);
    }
    check("cuPointerGetAttributes", rc)?;
    Ok(decode_slots(ptr, &slots))
}

/// Attributes of `[ptr, ptr + nbytes)` after checking that it is device-addressable memory lying
/// inside one allocation: what a copy into or out of it needs before the driver is asked to touch it.
pub fn check_device_range(ptr: u64, nbytes: u64, what: &str) -> Result<PointerAttributes> {
    let attributes = pointer_attributes_unlabelled(ptr)?;
    if !attributes.memory_type.is_device_addressable() {
        return Err(CudaError::InvalidArgument(format!(
            "{what} {ptr:#x} is {} memory, not device memory",
            attributes.memory_type
        )));
    }
    if !attributes.contains(ptr, nbytes) {
        return Err(CudaError::InvalidArgument(format!(
            "{what} [{ptr:#x}, +{nbytes}) does not fit in its allocation [{:#x}, +{})",
            attributes.range_start, attributes.range_size
        )));
    }
    Ok(attributes)
}

// What a report says about an allocation (`report.cuda`), made once per allocation.

/// What `report.cuda` says about the allocation `ptr` lies in, shared by the reports of every
/// array inside it; `None` where the driver cannot be asked. The driver's answer for the address
/// (one call, ~0.5 µs) names the allocation by its process-unique `BUFFER_ID`; what the report
/// holds beyond that answer (whether the context is primary, three more calls; the device's name
/// and UUID; the JSON map, ~2 µs in all) cannot change while the allocation lives, so it is built
/// once per allocation.
pub fn allocation_report(ptr: u64) -> Option<Arc<serde_json::Value>> {
    let attributes = pointer_attributes_unlabelled(ptr).ok()?;
    let reports = ALLOCATION_REPORTS.get_or_init(Default::default);
    reports.get_or_build(attributes, |a| label_primary(a).ok(), device_identity)
}

/// Name and UUID of a CUDA ordinal, asked once per ordinal (they never change in a process).
fn device_identity(ordinal: i32) -> Option<(String, String)> {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    type NameAndUuid = Option<(String, String)>;
    static CACHE: OnceLock<Mutex<HashMap<i32, NameAndUuid>>> = OnceLock::new();
    if ordinal < 0 {
        return None;
    }
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    let mut guard = cache.lock().ok()?;
    guard.entry(ordinal).or_insert_with(|| super::device_info(ordinal).ok().map(|d| (d.name, d.uuid))).clone()
}

static ALLOCATION_REPORTS: std::sync::OnceLock<AllocationReports> = std::sync::OnceLock::new();

/// The reports of allocations seen, by [`AllocationKey`].
#[derive(Default)]
struct AllocationReports {
    known: std::sync::Mutex<std::collections::HashMap<AllocationKey, Arc<serde_json::Value>>>,
}

impl AllocationReports {
    /// Freed allocations' ids never come back, so their entries are only dead weight: they are
    /// dropped all at once past a bound that a notebook's live allocations rarely reach.
    const KEPT: usize = 4096;

    /// The report of the allocation with these unlabelled attributes: the one made before for the
    /// same driver answer, else made now (`label` fills `context_is_primary`; `None`: no report).
    fn get_or_build(
        &self,
        mut attributes: PointerAttributes,
        label: impl FnOnce(&mut PointerAttributes) -> Option<()>,
        identity: impl FnOnce(i32) -> Option<(String, String)>,
    ) -> Option<Arc<serde_json::Value>> {
        let key = AllocationKey::of(&attributes);
        if let Some(key) = &key
            && let Some(known) = self.known.lock().ok().and_then(|known| known.get(key).cloned())
        {
            return Some(known);
        }
        label(&mut attributes)?;
        let mut value = serde_json::to_value(&attributes).unwrap_or_default();
        if let Some(map) = value.as_object_mut() {
            // What the allocation is, not the address asked about (the report's data_ptr): reports
            // of other arrays inside the allocation share these attributes.
            map.remove("ptr");
            if let Some((name, uuid)) = identity(attributes.device_ordinal) {
                // The driver's name for the device next to the framework's: `cuda:0` is an index
                // that CUDA_VISIBLE_DEVICES remaps; the UUID is what nvidia-smi shows.
                map.insert("device_name".into(), name.into());
                map.insert("device_uuid".into(), uuid.into());
            }
        }
        let value = Arc::new(value);
        if let Some(key) = key
            && let Ok(mut known) = self.known.lock()
        {
            if known.len() >= Self::KEPT {
                known.clear();
            }
            known.insert(key, Arc::clone(&value));
        }
        Some(value)
    }
}

/// What names an allocation in [`AllocationReports`]: its `BUFFER_ID` with the rest of the driver's
/// one-call answer, so that a report is reused only where the driver says exactly what it said
/// when the report was made.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct AllocationKey {
    buffer_id: u64,
    context: u64,
    range_start: u64,
    range_size: u64,
    memory_type_code: u32,
    device_ordinal: i32,
    is_managed: bool,
    mempool: u64,
}

impl AllocationKey {
    /// `None` for an address the driver gives no id (pageable host memory).
    fn of(a: &PointerAttributes) -> Option<AllocationKey> {
        (a.buffer_id != 0).then_some(AllocationKey {
            buffer_id: a.buffer_id,
            context: a.context,
            range_start: a.range_start,
            range_size: a.range_size,
            memory_type_code: a.memory_type_code,
            device_ordinal: a.device_ordinal,
            is_managed: a.is_managed,
            mempool: a.mempool,
        })
    }
}

// The driver's attributes of one live allocation, while a share describes what it made from it.
std::thread_local! {
    static KNOWN_ALLOCATION: std::cell::RefCell<Option<Arc<serde_json::Value>>> = const { std::cell::RefCell::new(None) };
}

/// Runs `f` with `attributes` (the driver's attributes of an allocation, as `report.cuda` holds
/// them) at hand: [`known_attributes`] answers from them for any address inside that allocation
/// instead of asking the driver again (about 2 µs a time). Sound only while the caller keeps the
/// allocation alive, as a share does with its source: a live allocation's range and identity
/// cannot change.
pub fn with_known_allocation<T>(attributes: Option<&Arc<serde_json::Value>>, f: impl FnOnce() -> T) -> T {
    let Some(attributes) = attributes else { return f() };
    let previous = KNOWN_ALLOCATION.with(|k| k.replace(Some(Arc::clone(attributes))));
    let result = f();
    KNOWN_ALLOCATION.with(|k| k.replace(previous));
    result
}

/// The attributes of the allocation [`with_known_allocation`] holds, shared, when `ptr` on CUDA
/// device `ordinal` lies inside it; `None` otherwise (ask the driver). They describe the allocation
/// (range, identity, context), which is all `report.cuda` says: the address is the report's own.
pub fn known_attributes(ptr: u64, ordinal: i32) -> Option<Arc<serde_json::Value>> {
    KNOWN_ALLOCATION.with(|k| {
        let known = k.borrow();
        let known = known.as_ref()?;
        let map = known.as_object()?;
        let start = map.get("range_start")?.as_u64()?;
        let size = map.get("range_size")?.as_u64()?;
        let same_device = map.get("device_ordinal")?.as_i64()? == i64::from(ordinal);
        let device_memory = map.get("memory_type")?.as_str()? == "device";
        if !(same_device && device_memory && size > 0 && ptr >= start && ptr - start < size) {
            return None;
        }
        Some(Arc::clone(known))
    })
}

/// The ordinal of the CUDA device whose memory `ptr` is in: from the allocation
/// [`with_known_allocation`] holds where `ptr` lies inside it, else one driver call. `None` for
/// host or managed memory, an address the driver does not know, or no CUDA.
pub fn device_of(ptr: u64) -> Option<i32> {
    let known = KNOWN_ALLOCATION.with(|k| {
        let known = k.borrow();
        let map = known.as_ref()?.as_object()?;
        let start = map.get("range_start")?.as_u64()?;
        let size = map.get("range_size")?.as_u64()?;
        let device_memory = map.get("memory_type")?.as_str()? == "device";
        (device_memory && ptr >= start && ptr - start < size).then(|| map.get("device_ordinal")?.as_i64()).flatten()
    });
    if let Some(ordinal) = known.and_then(|o| i32::try_from(o).ok()) {
        return Some(ordinal);
    }
    let attributes = pointer_attributes_unlabelled(ptr).ok()?;
    (attributes.memory_type == MemoryType::Device && attributes.device_ordinal >= 0).then_some(attributes.device_ordinal)
}

#[cfg(test)]
mod known_allocation_tests {
    use super::*;

    fn device_allocation() -> Arc<serde_json::Value> {
        Arc::new(serde_json::json!({"memory_type": "device", "device_ordinal": 0, "range_start": 4096,
            "range_size": 1024, "buffer_id": 7, "context": 1}))
    }

    #[test]
    fn an_address_inside_the_known_allocation_is_answered_from_it() {
        let a = device_allocation();
        with_known_allocation(Some(&a), || {
            let inside = known_attributes(4096 + 512, 0).unwrap();
            assert!(Arc::ptr_eq(&inside, &a), "the allocation's attributes, shared");
            assert_eq!(inside["buffer_id"].as_u64(), Some(7));
            assert!(known_attributes(4096 + 1024, 0).is_none(), "one past the end");
            assert!(known_attributes(4096, 1).is_none(), "another device");
        });
        assert!(known_attributes(4096, 0).is_none(), "only inside the scope");
    }

    #[test]
    fn host_memory_is_always_asked_about() {
        let mut a = device_allocation();
        Arc::make_mut(&mut a)["memory_type"] = "host".into();
        with_known_allocation(Some(&a), || assert!(known_attributes(4096, 0).is_none()));
    }
}

#[cfg(test)]
mod allocation_report_tests {
    use std::cell::Cell;

    use super::*;

    /// The driver's one-call answer for an address 256 bytes into allocation `buffer_id`.
    fn answer(buffer_id: u64, range_start: u64) -> PointerAttributes {
        let mut slots = [0u64; 8];
        slots[0] = 0xc0;
        slots[1] = 2; // CU_MEMORYTYPE_DEVICE
        slots[3] = range_start;
        slots[4] = 1 << 20;
        slots[5] = buffer_id;
        decode_slots(range_start + 256, &slots)
    }

    fn report(reports: &AllocationReports, attributes: PointerAttributes, labels: &Cell<u32>) -> Option<Arc<serde_json::Value>> {
        reports.get_or_build(
            attributes,
            |a| {
                labels.set(labels.get() + 1);
                a.context_is_primary = Some(true);
                Some(())
            },
            |ordinal| Some((format!("GPU {ordinal}"), "GPU-uuid".into())),
        )
    }

    #[test]
    fn an_allocation_is_labelled_once_and_its_report_shared() {
        let (reports, labels) = (AllocationReports::default(), Cell::new(0));
        let first = report(&reports, answer(7, 4096), &labels).unwrap();
        assert_eq!(first["context_is_primary"], serde_json::json!(true));
        assert_eq!(first["device_name"], serde_json::json!("GPU 0"));
        assert!(first.get("ptr").is_none(), "the allocation's report, not the address's");
        let again = report(&reports, answer(7, 4096), &labels).unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        assert_eq!(labels.get(), 1, "the primary-context calls ran once");
    }

    #[test]
    fn a_different_answer_for_the_same_id_is_not_answered_from_the_old_report() {
        let (reports, labels) = (AllocationReports::default(), Cell::new(0));
        let first = report(&reports, answer(7, 4096), &labels).unwrap();
        let moved = report(&reports, answer(7, 8192), &labels).unwrap();
        assert!(!Arc::ptr_eq(&first, &moved));
        assert_eq!(moved["range_start"].as_u64(), Some(8192));
        assert_eq!(labels.get(), 2);
    }

    #[test]
    fn memory_without_an_id_and_failed_labels_are_never_kept() {
        let (reports, labels) = (AllocationReports::default(), Cell::new(0));
        let pageable = decode_slots(0x1000, &[0u64; 8]);
        report(&reports, pageable.clone(), &labels).unwrap();
        report(&reports, pageable, &labels).unwrap();
        assert_eq!(labels.get(), 2, "pageable memory has no id to key on");
        assert!(reports.get_or_build(answer(9, 4096), |_| None, |_| None).is_none(), "no label, no report");
        report(&reports, answer(9, 4096), &labels).unwrap();
        assert_eq!(labels.get(), 3, "the failed label left nothing behind");
    }

    #[test]
    fn the_reports_kept_are_bounded() {
        let (reports, labels) = (AllocationReports::default(), Cell::new(0));
        for id in 1..=(AllocationReports::KEPT as u64 + 10) {
            report(&reports, answer(id, id << 24), &labels).unwrap();
        }
        assert!(reports.known.lock().unwrap().len() <= AllocationReports::KEPT);
    }
}
