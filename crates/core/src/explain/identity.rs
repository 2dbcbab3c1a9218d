//! Memory identity across processes: do the two sides' identities, each asked in its own process,
//! name the same physical memory? What the one judge ([`super::judge_handoff`]) reads of two sides
//! in two processes.
//!
//! A raw pointer means nothing in another process, so memory is named by what both processes can
//! see: host memory by the file behind the mapping (device, inode, offset; `/dev/shm/NAME` for a
//! POSIX segment), device memory by the CUDA IPC handle of its allocation and the offset in it.
//! "shared" means both sides name the same memory, mapped so that a write on one side is read on
//! the other; anything else is a copy, and the reason says which part of the identity differs.

use crate::report::process::{HostMapping, MemoryIdentity};

/// Whether `source` and `target` (each from its own process) name the same physical memory, and why.
pub fn same_memory(source: Option<&MemoryIdentity>, target: Option<&MemoryIdentity>) -> (bool, String) {
    let (Some(a), Some(b)) = (source, target) else {
        return (false, "the identity of one side is unknown".into());
    };
    match (a, b) {
        (MemoryIdentity::Host(a), MemoryIdentity::Host(b)) => {
            if a.inode == 0 || b.inode == 0 {
                return (false, "the worker's array lies in anonymous private memory of its own (no shared file behind it)".into());
            }
            if (&a.dev, a.inode) != (&b.dev, b.inode) {
                return (false, "the two sides' mappings are backed by different files".into());
            }
            if a.offset != b.offset {
                return (false, "same file, different offsets".into());
            }
            if a.mapping != HostMapping::Shared || b.mapping != HostMapping::Shared {
                return (false, "a private (copy-on-write) mapping of the file: writes are not seen by the other side".into());
            }
            (true, "same file and offset, mapped shared by both processes".into())
        }
        (MemoryIdentity::Cuda(a), MemoryIdentity::Cuda(b)) => {
            // The worker's identity names the handle it opened.
            let Some(handle) = &a.handle else {
                return (false, a.ipc_refusal.clone().unwrap_or_else(|| "the source allocation has no IPC handle".into()));
            };
            if b.opened_handle.as_ref() != Some(handle) {
                return (false, "the worker's array lies in an allocation of its own".into());
            }
            if b.offset != a.offset {
                return (false, "the worker mapped the allocation, but its array is not at the source's offset".into());
            }
            // The handle names the allocation and the offset the array in it; the sizes are shown beside.
            (true, "the worker mapped the source's allocation (same IPC handle, same offset)".into())
        }
        (a, b) => (false, format!("one side is {} memory, the other {} memory", kind(a), kind(b))),
    }
}

fn kind(identity: &MemoryIdentity) -> &'static str {
    match identity {
        MemoryIdentity::Host(_) => "host",
        MemoryIdentity::Cuda(_) => "cuda",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explain::{Sides, judge_handoff};
    use crate::paths::PathKind;
    use crate::report::Verdict;
    use crate::report::process::{CudaIdentity, HostIdentity, Segment};

    fn host(file: &str, inode: u64, offset: u64, mapping: HostMapping) -> MemoryIdentity {
        MemoryIdentity::Host(HostIdentity {
            file: Some(file.into()),
            unlinked: false,
            mapping,
            dev: Some("00:1b".into()),
            inode,
            offset: Some(offset),
            address: 4096,
        })
    }

    fn cuda(handle: Option<&str>, opened: Option<&str>, offset: u64) -> MemoryIdentity {
        MemoryIdentity::Cuda(CudaIdentity {
            address: 1024,
            device: Some(0),
            context: Some(1),
            context_is_primary: Some(true),
            base: Some(0),
            size: Some(1 << 21),
            offset: Some(offset),
            memory_type: Some("device".into()),
            handle: handle.map(Into::into),
            ipc_refusal: None,
            opened_handle: opened.map(Into::into),
            mapped_base: None,
            driver_handle: None,
        })
    }

    #[test]
    fn a_segment_mapped_shared_at_the_same_offset_is_the_same_memory() {
        let a = host("/dev/shm/psm_1", 364, 0, HostMapping::Shared);
        assert!(same_memory(Some(&a), Some(&a.clone())).0);
        let other_offset = host("/dev/shm/psm_1", 364, 64, HostMapping::Shared);
        assert_eq!(same_memory(Some(&a), Some(&other_offset)).1, "same file, different offsets");
        let private = host("/dev/shm/psm_1", 364, 0, HostMapping::Private);
        assert!(same_memory(Some(&a), Some(&private)).1.contains("copy-on-write"));
        let anonymous = host("", 0, 0, HostMapping::Private);
        assert!(same_memory(Some(&a), Some(&anonymous)).1.contains("anonymous"));
        assert!(same_memory(None, Some(&a)).1.contains("unknown"));
        assert!(same_memory(Some(&a), Some(&cuda(None, None, 0))).1.contains("host memory, the other cuda"));
    }

    #[test]
    fn device_memory_is_the_same_when_the_worker_opened_the_handle_at_the_offset() {
        let src = cuda(Some("ab01"), None, 1024);
        assert!(same_memory(Some(&src), Some(&cuda(None, Some("ab01"), 1024))).0);
        assert!(!same_memory(Some(&src), Some(&cuda(None, Some("ab01"), 0))).0);
        assert!(same_memory(Some(&src), Some(&cuda(None, Some("ff"), 1024))).1.contains("of its own"));
        assert!(same_memory(Some(&cuda(None, None, 0)), Some(&src)).1.contains("no IPC handle"));
    }

    fn apart<'a>(a: Option<&'a MemoryIdentity>, b: Option<&'a MemoryIdentity>, staged: Option<&'a Segment>) -> Sides<'a> {
        Sides::Apart { source: a, target: b, staged }
    }

    #[test]
    fn a_staged_segment_and_a_send_are_copies_with_their_reason() {
        let a = host("/dev/shm/psm_1", 364, 0, HostMapping::Shared);
        let shared = judge_handoff(PathKind::Process, "shm", apart(Some(&a), Some(&a), None));
        assert_eq!((shared.verdict, shared.reason), (Verdict::Shared, None));
        let seg = Segment { name: "psm_1".into(), offset: 0 };
        let staged = judge_handoff(PathKind::Process, "shm", apart(Some(&a), Some(&a), Some(&seg)));
        assert_eq!(staged.verdict, Verdict::Copied);
        assert!(staged.reason.unwrap().contains("(psm_1 + 0)"));
        // A path that copies by design gives the path table's words, as every table does.
        let anonymous = host("", 0, 0, HostMapping::Private);
        let sent = judge_handoff(PathKind::Process, "gloo", apart(Some(&a), Some(&anonymous), None));
        assert_eq!(sent.reason.as_deref(), crate::paths::copied_by_design(PathKind::Process, "gloo"));
        assert!(sent.reason.unwrap().contains("gloo sends the bytes"));
        let nccl = judge_handoff(PathKind::Process, "nccl", apart(None, None, None));
        assert!(nccl.reason.unwrap().contains("NCCL sends the bytes"));
        // A path that shares by design says which part of the identity differs.
        let other = host("/dev/shm/psm_1", 364, 64, HostMapping::Shared);
        let moved = judge_handoff(PathKind::Process, "shm", apart(Some(&a), Some(&other), None));
        assert_eq!(moved.reason.as_deref(), Some("same file, different offsets"));
    }

    #[test]
    fn a_handoff_to_another_host_copies_even_where_the_identities_look_alike() {
        // The same segment name and inode on two machines is a coincidence, not one memory.
        let a = host("/dev/shm/psm_1", 364, 0, HostMapping::Shared);
        let remote = judge_handoff(PathKind::Process, "remote", apart(Some(&a), Some(&a), None));
        assert_eq!(remote.verdict, Verdict::Copied);
        assert!(remote.reason.unwrap().contains("another host"));
    }
}
