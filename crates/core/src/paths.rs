//! THE path table: every way gpushare can hand an array over (share paths within one device, move
//! paths between devices, process paths to another process), declared once, with the places and
//! endpoints a handoff joins. Data only: the policy that picks a path, `auto`, is
//! [`crate::auto`]'s, over this table and the cost model.
//!
//! paths.py, devices.py, processes/, the predictor, the lab's tables and plot, the magics and the
//! CLI read this table (`gpushare._native.paths.path_table`).

/// Which kind of handoff a path makes. Written as its word (`share`, `move`, `process`) in JSON and
/// in a cost model's keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PathKind {
    /// Within one device: the target gets the source's memory (or a copy of it) where it lies.
    Share,
    /// To another device (`device=`): the array is moved on the way.
    Move,
    /// To another process (`across=`).
    Process,
}

impl PathKind {
    pub fn name(self) -> &'static str {
        match self {
            PathKind::Share => "share",
            PathKind::Move => "move",
            PathKind::Process => "process",
        }
    }

    pub fn parse(name: &str) -> Option<PathKind> {
        [PathKind::Share, PathKind::Move, PathKind::Process].into_iter().find(|k| k.name() == name)
    }
}

impl std::fmt::Display for PathKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One path, as every part of gpushare names and describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathSpec {
    pub name: &'static str,
    pub kind: PathKind,
    pub description: &'static str,
    /// Why the path copies whenever it copies, where it copies by design (the words a result gives
    /// as its reason); `None` for a path that is meant to share.
    pub copies_by_design: Option<&'static str>,
    /// Its colour in every plot (matplotlib's tab10, then its pale variants).
    pub colour: &'static str,
    /// Whether the prediction rules (crates/core/src/explain) model it.
    pub modelled: bool,
    /// When it applies, in words.
    pub applies: &'static str,
    /// Whether gpushare's own copy makes the handoff, queued on the source's stream in the source's
    /// CUDA context (or waited for before it returns): waiting for that context is waiting for the
    /// route's work, wherever the result lies.
    pub copies_in_source_context: bool,
}

impl PathSpec {
    /// The path copies by gpushare's own copy in the source's context ([`PathSpec::copies_in_source_context`]).
    const fn by_gpushare_in_source_context(mut self) -> PathSpec {
        self.copies_in_source_context = true;
        self
    }
}

const fn spec(
    name: &'static str,
    kind: PathKind,
    description: &'static str,
    copies_by_design: Option<&'static str>,
    colour: &'static str,
    modelled: bool,
    applies: &'static str,
) -> PathSpec {
    PathSpec { name, kind, description, copies_by_design, colour, modelled, applies, copies_in_source_context: false }
}

use PathKind::{Move, Process, Share};

/// Every path, in the order tables list them within a kind.
pub const PATHS: &[PathSpec] = &[
    spec("dlpack", Share, "the array-API protocol: the consumer's from_dlpack(obj)", None, "#1f77b4", true,
        "the source has __dlpack__ and the target's from_dlpack takes objects"),
    spec("capsule", Share, "legacy explicit capsule: to_dlpack → from_dlpack(capsule); the only way into TensorFlow", None,
        "#ff7f0e", true, "the target imports raw DLPack capsules"),
    spec("cai", Share, "__cuda_array_interface__ (CuPy, Numba, PyTorch)", None, "#2ca02c", true,
        "the source is in CUDA memory and exposes (or gpushare describes) __cuda_array_interface__"),
    spec("host", Share, "the naive route through NumPy on the host",
        Some("copied by design: the naive route through NumPy on the host"), "#d62728", true,
        "always: the values go through NumPy on the host"),
    spec("pinned", Share, "host staging through a page-locked buffer, copied by the Rust core with the CUDA driver",
        Some("copied by design: staged through page-locked host memory by gpushare"), "#9467bd", true,
        "the CUDA driver is usable and the source has __dlpack__")
    .by_gpushare_in_source_context(),
    spec("copy", Share, "a device-to-device copy, then a zero-copy handoff",
        Some("copied by design: gpushare copies into its own buffer, then shares that"), "#8c564b", true,
        "the source has __dlpack__")
    .by_gpushare_in_source_context(),
    spec("shared", Share, "a SharedBuffer: memory owned by gpushare, handed to every framework by DLPack", None,
        "#e377c2", false, "the source's memory is a gpushare.SharedBuffer"),
    spec("p2p", Move,
        "peer copy by gpushare's Rust core (cuDeviceCanAccessPeer, peer access enabled) into its own memory on the target device",
        Some("copied by design: a peer copy by gpushare into its own memory on the target device"), "#bcbd22", true,
        "the source is in device memory, the destination is another GPU, and the source has __dlpack__")
    .by_gpushare_in_source_context(),
    spec("pinned", Move, "staged through page-locked host memory by the Rust core, both legs overlapped",
        Some("copied by design: staged through page-locked host memory by gpushare onto the target device"), "#9467bd",
        true, "the destination is a GPU and the source has __dlpack__")
    .by_gpushare_in_source_context(),
    spec("dlpack", Move, "the consumer's from_dlpack(x, device=…, copy=True): the producer's __dlpack__(dl_device, copy)",
        Some("copied by design: from_dlpack(device=…, copy=True) asks the producer for a copy on the destination"),
        "#1f77b4", true, "the target's from_dlpack takes a device and copy=True"),
    spec("move", Move, "the source framework's own move (torch .to, jax.device_put, CuPy, Paddle), then the usual handoff",
        None, "#7f7f7f", true, "the source framework can move its arrays to the destination"),
    spec("ipc", Process, "CUDA IPC (Rust core): cuIpcGetMemHandle of the allocation + offset", None, "#1f77b4", false,
        "the array is in CUDA device memory"),
    spec("torch_mp", Process, "torch.multiprocessing reduce_tensor", None, "#ff7f0e", false, "the array is a torch tensor"),
    spec("shm", Process, "POSIX shared memory segment gpushare makes (a /dev/shm file, pages reserved with posix_fallocate)",
        None, "#2ca02c", false, "the array is in host memory"),
    spec("nccl", Process, "NCCL send/recv (torch.distributed)",
        Some("copied by design: NCCL sends the bytes into the worker's own tensor"), "#d62728", false,
        "a torch tensor in CUDA memory, the worker on another GPU"),
    spec("nccl_socket", Process,
        "NCCL NET/Socket on loopback (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1): stand-in for two hosts",
        Some("copied by design: NCCL sends the bytes over a socket into the worker's own tensor"), "#9467bd", false,
        "a torch tensor in CUDA memory, the worker on another GPU"),
    spec("gloo", Process, "gloo send/recv (torch.distributed, TCP loopback)",
        Some("copied by design: gloo sends the bytes over TCP into the worker's own tensor"), "#8c564b", false,
        "a torch tensor in host memory"),
    spec("remote", Process,
        "torch.distributed send/recv to a worker on another host: gloo for host tensors, NCCL for device tensors",
        Some("copied by design: the worker is on another host; the bytes cross the network into its own tensor"),
        "#e377c2", false, "a torch tensor, the worker on another host (Worker(host='HOST:PORT'))"),
];

/// `auto` itself: a name every kind takes, resolved by [`crate::auto::resolve_auto`].
pub const AUTO: PathSpec = spec(
    "auto",
    Share,
    "the fastest correct path for this pair: DLPack where both sides speak it, a capsule into TensorFlow, __cuda_array_interface__ for Numba, the host route into a framework that cannot address device memory; between devices a peer copy where the GPUs reach each other, else the framework's own move",
    None,
    "#17becf",
    true,
    "always",
);

/// The path of this kind and name (`auto` included).
pub fn find(kind: PathKind, name: &str) -> Option<&'static PathSpec> {
    if name == AUTO.name {
        return Some(&AUTO);
    }
    PATHS.iter().find(|p| p.kind == kind && p.name == name)
}

/// The names of one kind's paths, in table order (without `auto`).
pub fn names(kind: PathKind) -> impl Iterator<Item = &'static str> {
    PATHS.iter().filter(move |p| p.kind == kind).map(|p| p.name)
}

/// A list of paths of one kind as people write it: names separated by commas (in one text or
/// several), `auto` among them, or `all` alone (as nothing at all) for every path of the kind, in
/// table order. The one parser of path lists: `gpushare.compare`/`bench` (share and move paths),
/// the process tables, the magics and the command line read them here. Names come back checked
/// and without repeats, in the order written.
pub fn parse_list<'a>(kind: PathKind, texts: impl IntoIterator<Item = &'a str>) -> Result<Vec<&'static str>, String> {
    let written: Vec<&str> = texts.into_iter().flat_map(|t| t.split(',')).map(str::trim).filter(|n| !n.is_empty()).collect();
    if written.is_empty() || written == ["all"] {
        return Ok(names(kind).collect());
    }
    let mut list: Vec<&'static str> = Vec::new();
    for name in written {
        let Some(known) = names(kind).chain([AUTO.name]).find(|k| *k == name) else {
            let what = match kind {
                PathKind::Share => "transfer",
                PathKind::Move => "move",
                PathKind::Process => "process",
            };
            let known: Vec<&str> = names(kind).collect();
            return Err(format!("unknown {what} path '{name}'; known paths: {}, auto, all", known.join(", ")));
        };
        if !list.contains(&known) {
            list.push(known);
        }
    }
    Ok(list)
}

/// A path's plot colour, whatever its kind (a name shared by two kinds has one colour).
pub fn colour(name: &str) -> &'static str {
    if name == AUTO.name {
        return AUTO.colour;
    }
    PATHS.iter().find(|p| p.name == name).map_or("#7f7f7f", |p| p.colour)
}

/// Whether gpushare's own copy in the source's context makes this path's handoff
/// ([`PathSpec::copies_in_source_context`]).
pub fn copies_in_source_context(kind: PathKind, name: &str) -> bool {
    find(kind, name).is_some_and(|p| p.copies_in_source_context)
}

/// Why a path of this kind copies, where it copies by design.
pub fn copied_by_design(kind: PathKind, name: &str) -> Option<&'static str> {
    find(kind, name).and_then(|p| p.copies_by_design)
}

/// Whether every handoff by this path moves the array's bytes, so that its time grows with size.
/// A process path that copies nothing by design hands the worker a handle (a CUDA IPC handle, a
/// shared-memory segment's name, torch's storage descriptor): whatever it copies, it copies once
/// before the first handoff (`shm` a private array into a segment, `torch_mp` a storage into
/// shared memory), and the handoffs a sweep times after it cost the same at every size. Fitting
/// them a cost per byte fits the worker's drift: on a 2-core CPU `shm`'s line rose
/// from 166 to 273 µs between 16 KiB and 32 MiB while its handoffs read 150-155 µs at every size
/// (benchmarks/bench_advice.py).
pub fn handoff_moves_bytes(kind: PathKind, name: &str) -> bool {
    kind != PathKind::Process || copied_by_design(kind, name).is_some()
}

/// Where an array lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// Memory the host addresses (pageable or page-locked).
    Host,
    /// Device memory of this CUDA ordinal.
    Device(i32),
}

impl Place {
    /// From DLPack's `(device_type, device_id)`: memory the host addresses (CPU, CUDA host,
    /// ROCm host, CUDA managed) is the host's.
    pub fn of_dlpack(device: (u32, i32)) -> Place {
        if crate::dlpack::is_host_accessible(device.0) { Place::Host } else { Place::Device(device.1) }
    }

    /// The device as gpushare writes it everywhere (`cpu`, `cuda:1`): [`Device::name`]'s words.
    ///
    /// [`Device::name`]: crate::shared::Device::name
    pub fn name(self) -> String {
        match self {
            Place::Host => crate::shared::Device::Cpu,
            Place::Device(n) => crate::shared::Device::Cuda(n),
        }
        .name()
    }
}

/// What the adapters declare about the two frameworks of a handoff: all `auto` needs to know of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Endpoints {
    /// The source's arrays have `__dlpack__` (Numba's have none).
    pub source_exports_dlpack: bool,
    /// The target's `from_dlpack` takes objects with `__dlpack__` (TensorFlow's and Numba's do not).
    pub target_accepts_objects: bool,
    /// The target imports raw DLPack capsules.
    pub target_accepts_capsules: bool,
    /// The target can hold arrays in device memory (NumPy's live on the host only).
    pub target_addresses_device: bool,
    /// The target's DLPack import waits on the host for the producer's stream (JAX's does: 11.1 ms
    /// with 10.8 ms queued, on 2× H200): with a busy producer it costs all of the queued work.
    pub target_import_waits: bool,
    /// The target's `__cuda_array_interface__` import ignores the interface's `stream` (JAX's: with
    /// matmuls queued on torch's stream it read the values from before them, on an H100), so
    /// `cai` into it does not order the handoff.
    pub target_cai_unordered: bool,
    /// The source's legacy capsule export refuses its read-only arrays, since only a versioned
    /// capsule carries the read-only flag (NumPy's: "Cannot export readonly array"): a capsule
    /// replaces DLPack for such a source only where the array is known to be writable.
    pub source_capsule_refuses_readonly: bool,
}

impl Default for Endpoints {
    /// The plain handoff: a source with `__dlpack__`, a target that takes objects and capsules,
    /// addresses device memory and orders its imports (`_native.paths.Pair()`'s defaults).
    fn default() -> Endpoints {
        Endpoints {
            source_exports_dlpack: true,
            target_accepts_objects: true,
            target_accepts_capsules: true,
            target_addresses_device: true,
            target_import_waits: false,
            target_cai_unordered: false,
            source_capsule_refuses_readonly: false,
        }
    }
}

#[cfg(test)]
#[path = "paths_tests.rs"]
mod tests;
