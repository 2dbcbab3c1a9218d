//! The producer's state, and which paths make the host wait for its queued work.
//!
//! A handoff from device memory is ordered against the work the producer has queued on its
//! stream. Some paths order it on the device (an event, the stream carried in the interface, a
//! copy queued on the producer's stream): the host does not wait. Others wait on the host: gpushare
//! synchronises the producer's stream first (a capsule into TensorFlow, the copies it waits for, a
//! handle sent to another process), or the consumer's own import waits (JAX's DLPack import, as
//! measured on 2× H200: 11.1 ms with 10.8 ms of matmuls queued). On an idle producer the two cost
//! the same (the calibration measured an idle one); on a busy one a path that waits costs at least
//! its fixed cost plus all of the queued work, which the driver cannot size: `auto` and `advise`
//! then prefer a path ordered on the device, and say which state they assumed.

use serde::{Deserialize, Serialize};

use super::model::Ordering;
use crate::paths::PathKind::{self, Move, Process, Share};

/// Whether the producer's stream had work queued when the handoff was planned.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Producer {
    /// Nothing queued on the producer's stream (the driver said so, or the caller did): every
    /// path costs what the calibration measured.
    #[default]
    Idle,
    /// Work queued on the producer's stream: a path that waits on the host waits for all of it.
    Busy,
    /// Nobody could say (host memory has no stream; a framework without a current stream; no
    /// driver): predicted as idle, and said so.
    Unknown,
}

impl Producer {
    pub fn name(self) -> &'static str {
        match self {
            Producer::Idle => "idle",
            Producer::Busy => "busy",
            Producer::Unknown => "unknown",
        }
    }

    pub fn parse(name: &str) -> Option<Producer> {
        [Producer::Idle, Producer::Busy, Producer::Unknown].into_iter().find(|p| p.name() == name)
    }

    /// The state assumed, in words; `queued` is the seconds of queued work where known (0: not known).
    pub fn describe(self, queued: f64) -> String {
        match self {
            Producer::Idle => "producer idle (nothing queued on its stream): predicted as calibrated".into(),
            Producer::Busy if queued > 0.0 => format!(
                "producer busy ({} queued on its stream): a path that waits on the host waits for it",
                crate::render::units::time(queued)
            ),
            Producer::Busy => "producer busy (work queued on its stream, amount unknown): a path that waits on the host \
                               costs at least its fixed cost plus all of it"
                .into(),
            Producer::Unknown => "producer state unknown (no stream to ask): predicted as idle".into(),
        }
    }
}

/// How the handoff by `path` of `kind` is ordered against the
/// producer's queued work, from device memory (`on_device`) or the host, into a target that takes
/// DLPack objects or not (`target_takes_objects`: TensorFlow takes capsules alone, and gpushare
/// waits before it), whose `__cuda_array_interface__` import honours the interface's stream or not
/// (`cai_orders`: JAX's does not). As measured on 2× H200 and an H100 (docs/gpu-results.md).
pub fn ordering_of(kind: PathKind, path: &str, on_device: bool, target_takes_objects: bool, cai_orders: bool) -> Ordering {
    match (kind, path) {
        _ if !on_device => Ordering::None,
        (Share, "dlpack" | "copy" | "shared") => Ordering::DeviceEvent,
        (Share, "capsule") if !target_takes_objects => Ordering::HostSynchronise,
        (Share, "capsule") => Ordering::Unordered,
        (Share, "cai") if cai_orders => Ordering::ConsumerOrders,
        (Share, "cai") => Ordering::Unordered,
        (Move, "p2p" | "pinned" | "dlpack") => Ordering::DeviceEvent,
        (Process, "ipc" | "torch_mp") => Ordering::HostSynchronise,
        _ => Ordering::ProducerWait,
    }
}

/// What decides whether a handoff's host waits for the producer's queued work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitFacts {
    /// The source lies in device memory (host memory has no queue to wait for).
    pub on_device: bool,
    /// The target's `from_dlpack` takes objects (TensorFlow's takes capsules, after gpushare waits).
    pub target_takes_objects: bool,
    /// The target's DLPack import waits on the host for the producer's stream (JAX's does).
    pub target_import_waits: bool,
    /// The destination of a move is host memory (any move there waits for the copy to land).
    pub to_host: bool,
}

/// Whether the host waits for all of the producer's queued work before the handoff by `path` of
/// `kind` returns: gpushare synchronises the producer's stream (a capsule into TensorFlow, the host
/// and pinned copies, a handle sent to another process), a copy gpushare queues after the
/// producer's work is waited for before the share returns (`copy` within a device, the peer and
/// pinned moves: the share is timed to the end of its copy, crates/core/src/share/timing.rs), or the
/// target's import waits (JAX's DLPack import). A framework's own move between GPUs and NCCL queue
/// their copies after the producer's work on the device. Measured on an H100 with 10.55 ms of
/// matmuls queued: `copy` into CuPy, JAX, Numba and TensorFlow took 10.6–11.1 ms.
pub fn host_waits(kind: PathKind, path: &str, facts: &WaitFacts) -> bool {
    if !facts.on_device {
        return false;
    }
    match (kind, path) {
        (Share, "capsule") => !facts.target_takes_objects,
        (Share, "host" | "pinned" | "copy") => true,
        (Share, "dlpack") => facts.target_import_waits,
        (Share, _) => false,
        (Move, _) if facts.to_host => true,
        (Move, "p2p" | "pinned") => true,
        (Move, _) => false,
        (Process, "ipc" | "torch_mp") => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GPU: WaitFacts = WaitFacts { on_device: true, target_takes_objects: true, target_import_waits: false, to_host: false };

    #[test]
    fn host_memory_never_waits_and_device_ordered_paths_do_not() {
        let host = WaitFacts { on_device: false, ..GPU };
        for path in ["dlpack", "capsule", "cai", "host", "pinned", "copy"] {
            assert!(!host_waits(Share, path, &host), "{path}");
        }
        for path in ["dlpack", "capsule", "cai"] {
            assert!(!host_waits(Share, path, &GPU), "{path}");
        }
        assert!(host_waits(Share, "host", &GPU) && host_waits(Share, "pinned", &GPU));
        // gpushare's copy within the device is timed to its end: the share returns after the queue.
        assert!(host_waits(Share, "copy", &GPU));
    }

    #[test]
    fn a_capsule_into_tensorflow_jax_dlpack_import_moves_and_process_handles_wait() {
        let tf = WaitFacts { target_takes_objects: false, ..GPU };
        assert!(host_waits(Share, "capsule", &tf));
        assert_eq!(ordering_of(Share, "capsule", true, false, true), Ordering::HostSynchronise);
        // JAX's interface import ignores the stream: cai into it is not ordered.
        assert_eq!(ordering_of(Share, "cai", true, true, true), Ordering::ConsumerOrders);
        assert_eq!(ordering_of(Share, "cai", true, true, false), Ordering::Unordered);
        let jax = WaitFacts { target_import_waits: true, ..GPU };
        assert!(host_waits(Share, "dlpack", &jax) && !host_waits(Share, "cai", &jax));
        assert!(host_waits(Move, "p2p", &GPU) && host_waits(Move, "pinned", &GPU));
        assert!(!host_waits(Move, "move", &GPU) && host_waits(Move, "move", &WaitFacts { to_host: true, ..GPU }));
        assert!(host_waits(Process, "ipc", &GPU) && host_waits(Process, "torch_mp", &GPU));
        assert!(!host_waits(Process, "nccl", &GPU));
    }

    #[test]
    fn the_state_says_what_was_assumed() {
        assert!(Producer::Busy.describe(0.0).contains("amount unknown"));
        assert!(Producer::Busy.describe(2e-3).contains("2"));
        assert!(Producer::Unknown.describe(0.0).contains("predicted as idle"));
        for p in [Producer::Idle, Producer::Busy, Producer::Unknown] {
            assert_eq!(Producer::parse(p.name()), Some(p));
        }
    }
}
