//! The rules that say why a conversion shared, copied or failed.
//!
//! Three questions, asked at three moments:
//! - [`refuse`], before any framework is called: is this input known to *crash* the target (abort
//!   the process, or make it read the wrong bytes)? Only those are stopped; everything else is
//!   handed to the framework, so gpushare reports what really happens.
//! - [`predict`], before the call: from the source's DLPack layout, the target framework, its
//!   version and settings, and the transfer path, will the target share the memory, copy it, or fail
//!   (and with which of the framework's own words)? The rules are those of dlpack-matrix.md §4,
//!   checked against the installed frameworks by `tests/test_conformance.py`.
//! - [`judge`], after the call: from addresses and extents (and CUDA allocation identity when the
//!   driver described both pointers), did the target share the source's memory? A target that lies
//!   inside the live source, or overlaps it at all, views it (a copy is a new allocation and cannot
//!   overlap live memory); where its description reaches past the source, a note says so. A
//!   prediction that differs from the judgement is shown as UNEXPECTED, never hidden.

mod auto;
#[cfg(test)]
pub(crate) mod fixtures;
mod gaps;
mod identity;
mod judgement;
mod known;
mod moves;
mod prediction;
mod process;
mod refusal;
mod targets;

pub use identity::same_memory;
pub use process::{ProcessFacts, ProcessProbe, refuse_process};
pub use judgement::{Judgement, NOTHING_TO_SHARE, Sides, copied_by_design, copy_reason, judge, judge_handoff};
pub use known::explain_failure;
pub use moves::MoveMemo;
pub use auto::{ArrayAuto, Decision, DecisionMemo, auto_follows_producer, auto_for_array, resolve_auto_with, resolve_path};
pub use prediction::{FrameworkFacts, LiveFact, PredictedOutcome, Settings, TargetFacts, parse_version, predict, rule_reads};
pub use refusal::{Refusal, refuse};

/// JAX/XLA's CPU client refuses to alias data that is not aligned to `EIGEN_MAX_ALIGN_BYTES`.
pub const XLA_CPU_ALIGNMENT: u64 = 64;

/// XLA's GPU executables check that every argument buffer is aligned to `kEntryParameterAlignBytes`
/// (16) and raise "Address of buffer N must be a multiple of 10" (hex) otherwise. The GPU import
/// itself aliases any address.
pub const XLA_GPU_PARAMETER_ALIGNMENT: u64 = 16;

#[cfg(test)]
mod predict_tests;

#[cfg(test)]
mod tests;

#[cfg(test)]
mod failure_tests;

#[cfg(test)]
mod targets_tests;
