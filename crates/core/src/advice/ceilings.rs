//! The ceiling of every resource a copy crosses, and which resources each path's copy crosses.
//!
//! A bandwidth a table shows can never exceed the ceiling of the slowest resource its copy crosses:
//! one above it is a timing bug (a copy timed before it landed). The GPU ceilings are measured here
//! with the CUDA driver, on a stream of gpushare's own, timed by CUDA events (the best of a few
//! copies: a ceiling is what the hardware can do, not what it usually does); host memory is
//! measured by the Python layer (`gpushare.machine_ceilings`), which also caches every figure per machine.

use crate::cuda::{self, DeviceBuffer, EventTimer, PinnedHostBuffer, Stream};
use crate::paths::{PathKind, Place};

/// A resource a copy crosses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Resource {
    /// Host memory: a copy from host memory into host memory.
    HostMemory,
    /// One GPU's memory: a copy within it.
    DeviceMemory(i32),
    /// The host link into this GPU (PCIe or C2C), from page-locked host memory.
    HostToDevice(i32),
    /// The host link out of this GPU.
    DeviceToHost(i32),
    /// The link between two GPUs, in this direction (NVLink, PCIe, or the driver's way through the host).
    Peer { from: i32, to: i32 },
}

impl Resource {
    /// The key the ceilings are stored under: `host_memory`, `device_memory:0`,
    /// `host_to_device:0`, `device_to_host:0`, `peer:0->1`.
    pub fn key(self) -> String {
        match self {
            Resource::HostMemory => "host_memory".into(),
            Resource::DeviceMemory(d) => format!("device_memory:{d}"),
            Resource::HostToDevice(d) => format!("host_to_device:{d}"),
            Resource::DeviceToHost(d) => format!("device_to_host:{d}"),
            Resource::Peer { from, to } => format!("peer:{from}->{to}"),
        }
    }

    /// In words, for tables.
    pub fn describe(self) -> String {
        match self {
            Resource::HostMemory => "host memory copy".into(),
            Resource::DeviceMemory(d) => format!("cuda:{d} memory copy"),
            Resource::HostToDevice(d) => format!("host link into cuda:{d} (page-locked)"),
            Resource::DeviceToHost(d) => format!("host link out of cuda:{d} (page-locked)"),
            Resource::Peer { from, to } => format!("link cuda:{from} → cuda:{to}"),
        }
    }
}

/// Whether a path's copy goes through host memory whatever the two ends are: the naive host route
/// and the paths staged through page-locked memory. Every other copy takes the direct way between
/// where the array lies and where it lands.
fn stages_through_host(kind: PathKind, path: &str) -> bool {
    matches!((kind, path), (PathKind::Share, "host" | "pinned") | (PathKind::Move, "pinned"))
}

/// The resources a copy by `path` of `kind` crosses, from where the array lies to where the result
/// lies. A path meant to share that copied anyway (a framework's own copy) copied where it lies.
/// Empty when nothing can have been copied (a move to where the array already is, shared).
pub fn resources(kind: PathKind, path: &str, source: Place, target: Place) -> Vec<Resource> {
    use Place::{Device, Host};
    match (source, target) {
        (Host, Host) => vec![Resource::HostMemory],
        (Host, Device(b)) => vec![Resource::HostToDevice(b)],
        (Device(a), Host) => vec![Resource::DeviceToHost(a)],
        (Device(a), Device(b)) if stages_through_host(kind, path) => {
            vec![Resource::DeviceToHost(a), Resource::HostToDevice(b)]
        }
        (Device(a), Device(b)) if a == b => vec![Resource::DeviceMemory(a)],
        (Device(a), Device(b)) => vec![Resource::Peer { from: a, to: b }],
    }
}

/// Bytes per second of the best of `repeats` timed copies, after one untimed copy. `copy` queues
/// one copy on the stream it is given.
fn best_of(repeats: usize, bytes: usize, stream: &Stream, mut copy: impl FnMut(&Stream) -> cuda::Result<()>) -> cuda::Result<f64> {
    let mut timer = EventTimer::new(stream.ordinal())?;
    copy(stream)?;
    stream.synchronize()?;
    let mut best = f64::INFINITY;
    for _ in 0..repeats.max(1) {
        timer.start(stream)?;
        copy(stream)?;
        timer.stop(stream)?;
        best = best.min(timer.elapsed_ms()? / 1e3);
    }
    Ok(if best > 0.0 { bytes as f64 / best } else { f64::INFINITY })
}

/// The ceiling of `resource` for copies of `bytes`, measured now: the best of `repeats` copies of
/// gpushare's own buffers by the CUDA driver (host memory is the Python layer's to measure).
pub fn measure(resource: Resource, bytes: usize, repeats: usize) -> cuda::Result<f64> {
    let bytes = bytes.max(1);
    match resource {
        Resource::HostMemory => {
            Err(cuda::CudaError::InvalidArgument("host memory is measured by gpushare.machine_ceilings, not the CUDA layer".into()))
        }
        Resource::DeviceMemory(d) => {
            let (src, dst, stream) = (DeviceBuffer::new(d, bytes)?, DeviceBuffer::new(d, bytes)?, Stream::new(d)?);
            // SAFETY: two live, disjoint device buffers of `bytes`, used by nothing else until
            // `best_of` has waited for its last copy.
            best_of(repeats, bytes, &stream, |s| unsafe { cuda::copy_dtod(dst.ptr(), src.ptr(), bytes, s) })
        }
        Resource::HostToDevice(d) => {
            let (host, dst, stream) = (PinnedHostBuffer::new(d, bytes)?, DeviceBuffer::new(d, bytes)?, Stream::new(d)?);
            // SAFETY: page-locked host memory and a device buffer of `bytes`, alive until waited for.
            best_of(repeats, bytes, &stream, |s| unsafe { cuda::copy_htod_async(dst.ptr(), host.as_ptr(), bytes, s) })
        }
        Resource::DeviceToHost(d) => {
            let (mut host, src, stream) = (PinnedHostBuffer::new(d, bytes)?, DeviceBuffer::new(d, bytes)?, Stream::new(d)?);
            let dst = host.as_mut_ptr();
            // SAFETY: as above; nothing reads the host buffer until it is dropped after the waits.
            best_of(repeats, bytes, &stream, |s| unsafe { cuda::copy_dtoh_async(dst, src.ptr(), bytes, s) })
        }
        Resource::Peer { from, to } => {
            // The fastest way the driver has between the two: direct where peer access can be
            // enabled (what gpushare's p2p and the frameworks' own moves use), else through the host.
            let _ = cuda::enable_peer_access(from, to);
            let (src, dst, stream) = (DeviceBuffer::new(from, bytes)?, DeviceBuffer::new(to, bytes)?, Stream::new(from)?);
            // SAFETY: two live device buffers of `bytes` on different devices (unified addressing).
            best_of(repeats, bytes, &stream, |s| unsafe { cuda::copy_dtod(dst.ptr(), src.ptr(), bytes, s) })
        }
    }
}

/// Parses a key of [`Resource::key`].
pub fn parse_key(key: &str) -> Option<Resource> {
    if key == "host_memory" {
        return Some(Resource::HostMemory);
    }
    let (name, rest) = key.split_once(':')?;
    let ordinal = |s: &str| s.parse::<i32>().ok().filter(|d| *d >= 0);
    match name {
        "device_memory" => ordinal(rest).map(Resource::DeviceMemory),
        "host_to_device" => ordinal(rest).map(Resource::HostToDevice),
        "device_to_host" => ordinal(rest).map(Resource::DeviceToHost),
        "peer" => {
            let (from, to) = rest.split_once("->")?;
            Some(Resource::Peer { from: ordinal(from)?, to: ordinal(to)? })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use PathKind::{Move, Share};
    use Place::{Device, Host};

    #[test]
    fn a_copy_crosses_what_lies_between_its_ends() {
        assert_eq!(resources(Share, "copy", Host, Host), [Resource::HostMemory]);
        assert_eq!(resources(Share, "copy", Device(0), Device(0)), [Resource::DeviceMemory(0)]);
        assert_eq!(resources(Share, "dlpack", Device(1), Device(1)), [Resource::DeviceMemory(1)], "a framework's own copy where it lies");
        assert_eq!(resources(Share, "host", Device(0), Host), [Resource::DeviceToHost(0)], "into NumPy");
        assert_eq!(resources(Share, "host", Device(0), Device(0)), [Resource::DeviceToHost(0), Resource::HostToDevice(0)]);
        assert_eq!(resources(Move, "p2p", Device(0), Device(1)), [Resource::Peer { from: 0, to: 1 }]);
        assert_eq!(resources(Move, "pinned", Device(0), Device(1)), [Resource::DeviceToHost(0), Resource::HostToDevice(1)]);
        assert_eq!(resources(Move, "move", Host, Device(1)), [Resource::HostToDevice(1)]);
    }

    #[test]
    fn keys_read_back() {
        for r in [Resource::HostMemory, Resource::DeviceMemory(2), Resource::HostToDevice(0), Resource::DeviceToHost(3), Resource::Peer { from: 1, to: 0 }] {
            assert_eq!(parse_key(&r.key()), Some(r));
        }
        assert_eq!(parse_key("peer:0-1"), None);
        assert_eq!(parse_key("device_memory:-1"), None);
    }

    #[test]
    fn host_memory_is_not_the_cuda_layers_to_measure() {
        assert!(measure(Resource::HostMemory, 1 << 20, 1).is_err());
    }
}
