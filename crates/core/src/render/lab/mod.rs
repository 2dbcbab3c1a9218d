//! The transfer-path laboratory: a comparison of every path for one array (`gpushare.compare`,
//! `%share x ->jax --path all`) and a sweep over sizes × paths (`gpushare.bench`, `%sharebench`).
//!
//! The lab's loop (the binding's crates/python/src/binding/lab_run.rs, the share pipeline run once
//! per path and size) hands over raw runs ([`PathRun`]: samples in seconds, bytes, verdicts); this
//! module computes the statistics, picks the fastest path, chooses one unit per column and renders
//! text, HTML and the JSON payload (`gpushare.comparison/1`, `gpushare.benchmark/1`). The process
//! paths' loop (crates/core/src/share/process_lab.rs) hands over rows with their worker part, and
//! its comparison and sweep are these too. The plot of a sweep is in [`super::plot`].

mod benchmark;
pub(crate) mod columns;
mod comparison;
mod rows;

pub use benchmark::{BenchInput, BenchPoint, BenchRun, BenchmarkReport};
pub use columns::{ByteUnit, byte_unit_for, gbps, size_label};
pub use comparison::{ComparisonInput, ComparisonReport};
pub use rows::{NOT_APPLICABLE_LEAD, PathRow, PathRun};

#[cfg(test)]
pub(crate) mod tests;
