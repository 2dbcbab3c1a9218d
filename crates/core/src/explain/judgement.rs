//! Judgement after the fact: from addresses, extents and CUDA allocation identity, did the
//! target share the source's memory?

use super::XLA_CPU_ALIGNMENT;
use crate::dlpack::{has_zero_stride, is_host_accessible};
use crate::report::process::{MemoryIdentity, Segment};
use crate::report::{TensorReport, Verdict};

/// The reason given for a zero-size array, on every path: it has no memory, so the target's array
/// cannot view the source's; "copied" is the verdict (its array is its own, however it was made),
/// and the reason says there was nothing to share. The judgement and the prediction give the same words.
pub const NOTHING_TO_SHARE: &str = "zero-size: nothing to share (the array has 0 bytes, so the target's array is its own)";

/// The outcome of a handoff: verdict, the reason for a copy, and notes.
#[derive(Debug, Clone, PartialEq)]
pub struct Judgement {
    pub verdict: Verdict,
    pub reason: Option<String>,
    pub notes: Vec<String>,
}

fn same_address_space(a: &TensorReport, b: &TensorReport) -> bool {
    let (at, ai) = a.dlpack_device;
    let (bt, bi) = b.dlpack_device;
    (is_host_accessible(at) && is_host_accessible(bt)) || (at == bt && ai == bi)
}

/// CUDA allocation identity, when the driver described both pointers: same buffer id.
fn same_cuda_allocation(a: &TensorReport, b: &TensorReport) -> Option<bool> {
    let id = |t: &TensorReport| t.cuda.as_ref()?.get("buffer_id")?.as_u64().filter(|id| *id != 0);
    Some(id(a)? == id(b)?)
}

/// Why each copying path copies: by design, not because a framework refused to share.
/// The words are the path table's (`crate::paths`).
pub fn copied_by_design(path: &str) -> Option<&'static str> {
    crate::paths::copied_by_design(crate::paths::PathKind::Share, path)
}

/// The two sides of a handoff, as the judge reads them.
#[derive(Debug, Clone, Copy)]
pub enum Sides<'a> {
    /// Both arrays live in this process: described by address, extent and, where the driver
    /// described both pointers, CUDA allocation identity.
    Here { source: &'a TensorReport, target: &'a TensorReport },
    /// Each array lives in its own process (a worker's): described by memory identity, asked in
    /// each process (a raw pointer means nothing in another). `staged`: the segment a private
    /// source was copied into first (`shm`), which the worker then maps.
    Apart { source: Option<&'a MemoryIdentity>, target: Option<&'a MemoryIdentity>, staged: Option<&'a Segment> },
}

/// THE judge of a handoff by path `path` of kind `kind`, wherever its two sides live: "shared" only
/// when the target's array is the source's memory and nothing was copied on the way; anything else
/// is "copied", with the reason. A copy by a path that copies by design gives the path table's
/// words (the same in every table), whatever made the two sides differ.
pub fn judge_handoff(kind: crate::paths::PathKind, path: &str, sides: Sides<'_>) -> Judgement {
    let designed = crate::paths::copied_by_design(kind, path);
    let mut judgement = match sides {
        Sides::Here { source, target } => judge(source, target),
        Sides::Apart { source, target, staged } => judge_apart(path, source, target, staged),
    };
    if judgement.verdict == Verdict::Copied
        && judgement.reason.as_deref() != Some(NOTHING_TO_SHARE)
        && let Some(why) = designed
    {
        judgement.reason = Some(why.to_string());
    }
    judgement
}

/// [`judge_handoff`] of two sides in two processes, before the path table's words.
fn judge_apart(path: &str, source: Option<&MemoryIdentity>, target: Option<&MemoryIdentity>, staged: Option<&Segment>) -> Judgement {
    let copied = |reason: String| Judgement { verdict: Verdict::Copied, reason: Some(reason), notes: Vec::new() };
    if path == "remote" {
        // Identities asked on two hosts name memory of two machines: equal fields (a file of the
        // same name and inode) are a coincidence, never the same memory.
        return copied("the worker is on another host".into());
    }
    let (same, why) = super::same_memory(source, target);
    match (same, staged) {
        (true, Some(s)) => copied(format!("copied into a shared segment first; the worker maps that segment ({} + {})", s.name, s.offset)),
        (true, None) => Judgement { verdict: Verdict::Shared, reason: None, notes: Vec::new() },
        (false, _) => copied(why),
    }
}

/// Where the driver says the bytes at the target's address live: `(memory type, device ordinal)`.
fn driver_location(t: &TensorReport) -> Option<(&str, i64)> {
    let cuda = t.cuda.as_ref()?;
    Some((cuda.get("memory_type")?.as_str()?, cuda.get("device_ordinal")?.as_i64()?))
}

/// The target views the source's bytes although the two labels name different devices: the
/// driver's pointer attributes (not the frameworks' labels) say it is one allocation, reached
/// from another device by peer access, or page-locked host memory a GPU reads under unified
/// addressing. `None` when the driver does not say so. The notes say where the bytes live, over
/// which link the target reads them, and whether the target's own label is wrong.
fn reached_across(source: &TensorReport, target: &TensorReport) -> Option<Vec<String>> {
    let (memory, ordinal) = driver_location(target)?;
    let overlaps = target.span.0 < source.span.1 && source.span.0 < target.span.1;
    let same_allocation = same_cuda_allocation(source, target);
    let same = match same_allocation {
        Some(same) => same,
        // The source was described without the driver (host memory before CUDA was probed): the
        // driver's word on the target's address decides, if it is page-locked host memory at the
        // source's bytes.
        None => memory == "pinned_host" && is_host_accessible(source.dlpack_device.0) && overlaps,
    };
    if !same || !overlaps || !matches!(memory, "device" | "pinned_host" | "managed") {
        return None;
    }
    let (target_type, target_id) = target.dlpack_device;
    let mut notes = Vec::new();
    match memory {
        "pinned_host" => {
            notes.push("the bytes live in page-locked host memory (the driver's pointer attributes)".to_string());
            if target_type == 2 {
                notes.push(format!(
                    "cuda:{target_id} reads them over the host link (PCIe or C2C) under unified addressing: shared, \
                     but every read crosses that link"
                ));
            }
        }
        _ => {
            notes.push(format!("the bytes live in {memory} memory of cuda:{ordinal} (the driver's pointer attributes)"));
            if target_type == 2 && i64::from(target_id) != ordinal {
                notes.push(format!(
                    "{} labels the array cuda:{target_id}, but the driver says its bytes are on cuda:{ordinal}: kernels \
                     on cuda:{target_id} read them over peer access (NVLink or PCIe P2P; %gpuinfo shows the link)",
                    target.framework
                ));
                if target.framework == "numba" {
                    notes.push(
                        "Numba's __cuda_array_interface__ carries no device ordinal, so Numba labels the memory with its \
                         current device"
                            .into(),
                    );
                }
            }
        }
    }
    Some(notes)
}

/// Decides from addresses and extents whether `target` lies inside `source`'s memory.
pub fn judge(source: &TensorReport, target: &TensorReport) -> Judgement {
    let mut judgement = judge_places(source, target);
    // A target whose dtype is not the source's, over the same bytes, is never shared without a word.
    if judgement.verdict == Verdict::Shared && source.dtype != target.dtype {
        judgement.notes.push(super::targets::relabel_note(&target.framework, &source.dtype, &target.dtype));
    }
    judgement
}

/// [`judge`] without the note on a relabelled dtype.
fn judge_places(source: &TensorReport, target: &TensorReport) -> Judgement {
    let notes = Vec::new();
    // A zero-size array has no bytes for the driver to place, and a label other than the source's
    // (Numba's current device) moves nothing: what judge_bytes says of zero-size arrays holds.
    let both_empty = source.numel() == 0 && target.numel() == 0;
    if !same_address_space(source, target) && !both_empty {
        if let Some(across) = reached_across(source, target) {
            let mut judgement = judge_bytes(source, target, notes);
            judgement.notes.splice(0..0, across);
            return judgement;
        }
        return Judgement {
            verdict: Verdict::Copied,
            reason: Some(format!(
                "device changed: {} → {}",
                source.dlpack_device_name, target.dlpack_device_name
            )),
            notes,
        };
    }
    judge_bytes(source, target, notes)
}

/// [`judge`] for two arrays in one address space: the target's extent against the source's.
fn judge_bytes(source: &TensorReport, target: &TensorReport, mut notes: Vec<String>) -> Judgement {
    if source.numel() == 0 || target.numel() == 0 {
        return Judgement { verdict: Verdict::Copied, reason: Some(NOTHING_TO_SHARE.into()), notes };
    }
    let inside = target.span.0 >= source.span.0 && target.span.1 <= source.span.1;
    // A copy is a new allocation, and a new allocation cannot overlap memory that is still alive: a
    // target whose bytes overlap the live source's views it, even where its description reaches
    // past the source's (a layout misreported by the target's exporter, or a target that reads
    // beyond the source). That is said in a note, not hidden behind "copied".
    let overlaps = target.span.0 < source.span.1 && source.span.0 < target.span.1;
    let (inside, overlaps) = match same_cuda_allocation(source, target) {
        Some(same) => (same && inside, same && overlaps),
        None => (inside, overlaps),
    };
    if inside || overlaps {
        if !inside {
            notes.push(overreach_note(source, target));
        }
        if source.readonly && !target.readonly {
            notes.push("the target can write to memory the source marks read-only".into());
        }
        return Judgement { verdict: Verdict::Shared, reason: None, notes };
    }
    Judgement { verdict: Verdict::Copied, reason: Some(copy_reason(source, target)), notes }
}

/// Why a target that views the source is described as reaching past the source's memory.
fn overreach_note(source: &TensorReport, target: &TensorReport) -> String {
    let past = target.span.1.saturating_sub(source.span.1) + source.span.0.saturating_sub(target.span.0);
    let mut note = format!(
        "the target views the source's memory, but as described (shape {:?}, strides {:?}) it reaches {past} bytes beyond the source's (strides {:?})",
        target.shape, target.strides, source.strides
    );
    if target.framework == "numba" && has_zero_stride(&source.shape, &source.strides) {
        note.push_str(
            ": Numba's __cuda_array_interface__ describes a broadcast array as C-contiguous (strides=None), so the Numba array itself keeps the zero stride but anything reading it through __cuda_array_interface__ reads past the source",
        );
    }
    note
}

/// The most specific known cause of a copy, in the order of the rules in dlpack-matrix.md §4.
pub fn copy_reason(source: &TensorReport, target: &TensorReport) -> String {
    if target.framework == "jax" && source.dtype != target.dtype {
        return format!(
            "dtype changed {} → {}: JAX narrows 64-bit types when jax_enable_x64 is off (enable it to share)",
            source.dtype, target.dtype
        );
    }
    if source.dtype != target.dtype {
        return format!("dtype changed {} → {}", source.dtype, target.dtype);
    }
    if target.framework == "jax"
        && is_host_accessible(source.dlpack_device.0)
        && !source.data_ptr.is_multiple_of(XLA_CPU_ALIGNMENT)
    {
        return format!(
            "source address {:#x} is not {XLA_CPU_ALIGNMENT}-byte aligned, so XLA's CPU client copies it (torch allocates 64-byte aligned memory; NumPy's malloc often does not)",
            source.data_ptr
        );
    }
    if source.strides != target.strides {
        return format!(
            "layout changed: strides {:?} → {:?} (the target holds its own copy in the new layout)",
            source.strides, target.strides
        );
    }
    "the target's memory lies outside the source's (the framework made its own copy)".into()
}
