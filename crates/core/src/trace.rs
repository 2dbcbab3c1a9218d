//! Where one share's time goes inside the pipeline, stage by stage, and whose work each stage is:
//! gpushare's own, a read the check makes of the framework or of the CUDA driver, the conversion
//! itself, or a wait for device work. A profiler does not see into the extension, and the GPU cost
//! contract is stated for gpushare's own stages (benchmarks/bench_core.py, tools/stage_trace.py).
//!
//! Off unless [`enable`]d at run time, so the released extension measures itself: while off a mark
//! is one relaxed atomic load and a branch, and records nothing.
//!
//! [`mark`] records, on the calling thread, that the stage named ends now; [`take`] returns each
//! stage's seconds since the mark before it, less the trace's own cost, in order, and starts over.
//! The trace's own cost is in every stage once (the end of the mark before it, the start of its
//! own: tens of ns where reading the clock is slow, about 1 µs of a share's 15 stages), so it is
//! measured when the trace is switched on, as two marks with nothing between them, and taken off.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Whose work a stage is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// gpushare's own: planning, describing from what was read, predicting, judging, the result.
    Own,
    /// Calls into a framework's API that an honest check of the verdict must make (the array's
    /// layout, address and flags).
    Framework,
    /// The CUDA driver's answers about the memory (which allocation and context it is in).
    Driver,
    /// The conversion: the framework's own import, through the route.
    Conversion,
    /// Waiting for device work (a synchronise the timing or the target needs).
    Wait,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Own => "own",
            Kind::Framework => "framework",
            Kind::Driver => "driver",
            Kind::Conversion => "conversion",
            Kind::Wait => "wait",
        }
    }
}

/// One stage: its name, whose work it is, and its seconds since the mark before it.
pub type Stage = (&'static str, Kind, f64);

static ON: AtomicBool = AtomicBool::new(false);
/// What the trace itself puts into each stage, in ns (see the module's doc).
static MARK_COST_NS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static MARKS: RefCell<Vec<(&'static str, Kind, Instant)>> = const { RefCell::new(Vec::new()) };
}

/// Starts or stops recording (every thread); starting measures the trace's own cost per stage on
/// the calling thread, stopping drops what the calling thread recorded.
pub fn enable(on: bool) {
    if on {
        MARK_COST_NS.store(measure_mark_cost().as_nanos() as u64, Ordering::Relaxed);
    }
    ON.store(on, Ordering::Relaxed);
    MARKS.with(|m| m.borrow_mut().clear());
}

/// The median interval between two marks with nothing between them: the trace's own part of a stage.
fn measure_mark_cost() -> Duration {
    MARKS.with(|m| m.borrow_mut().clear());
    for _ in 0..1001 {
        record("", Kind::Own);
    }
    let marks = MARKS.with(|m| std::mem::take(&mut *m.borrow_mut()));
    let mut intervals: Vec<Duration> = marks.windows(2).map(|w| w[1].2 - w[0].2).collect();
    intervals.sort_unstable();
    intervals[intervals.len() / 2]
}

/// The trace's own cost per stage that [`take`] takes off, in seconds (measured by [`enable`]).
pub fn mark_cost() -> f64 {
    MARK_COST_NS.load(Ordering::Relaxed) as f64 * 1e-9
}

/// Whether marks are recorded.
pub fn enabled() -> bool {
    ON.load(Ordering::Relaxed)
}

/// The stage named ends now, and was `kind`'s work (nothing while the trace is off).
#[inline(always)]
pub fn mark(stage: &'static str, kind: Kind) {
    if ON.load(Ordering::Relaxed) {
        record(stage, kind);
    }
}

#[inline(never)]
fn record(stage: &'static str, kind: Kind) {
    let now = Instant::now();
    MARKS.with(|m| m.borrow_mut().push((stage, kind, now)));
}

/// Each stage this thread marked, with its seconds since the mark before it less the trace's own
/// cost (never below 0), in order, and a fresh start: the first mark only starts the clock.
pub fn take() -> Vec<Stage> {
    let marks = MARKS.with(|m| std::mem::take(&mut *m.borrow_mut()));
    stages(&marks, Duration::from_nanos(MARK_COST_NS.load(Ordering::Relaxed)))
}

fn stages(marks: &[(&'static str, Kind, Instant)], cost: Duration) -> Vec<Stage> {
    marks.windows(2).map(|w| (w[1].0, w[1].1, (w[1].2 - w[0].2).saturating_sub(cost).as_secs_f64())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    // One test: the switch is process-wide, and tests run on several threads at once.
    #[test]
    fn stages_are_recorded_only_while_on_timed_from_the_mark_before_them() {
        enable(false);
        mark("start", Kind::Own);
        mark("a", Kind::Framework);
        assert!(!enabled());
        assert_eq!(take(), vec![]);

        enable(true);
        // Switching on measured what a mark costs and left nothing recorded.
        assert_eq!(take(), vec![]);
        mark("start", Kind::Own);
        mark("a", Kind::Framework);
        mark("b", Kind::Own);
        let stages = take();
        assert_eq!(stages.iter().map(|s| (s.0, s.1)).collect::<Vec<_>>(), [("a", Kind::Framework), ("b", Kind::Own)]);
        assert!(stages.iter().all(|s| s.2 >= 0.0));
        assert_eq!(take(), vec![]);

        // Stopping drops a share recorded half-way: the next start is a fresh one.
        mark("start", Kind::Own);
        enable(false);
        enable(true);
        mark("start", Kind::Own);
        mark("c", Kind::Driver);
        assert_eq!(take().iter().map(|s| s.0).collect::<Vec<_>>(), ["c"]);
        enable(false);
        assert_eq!(Kind::Conversion.as_str(), "conversion");
    }

    #[test]
    fn each_stage_is_its_interval_less_the_traces_own_cost_never_below_zero() {
        let t0 = Instant::now();
        let us = Duration::from_micros;
        let marks = [("start", Kind::Own, t0), ("a", Kind::Framework, t0 + us(10)), ("b", Kind::Own, t0 + us(15))];
        assert_eq!(stages(&marks, us(1)), vec![("a", Kind::Framework, 9e-6), ("b", Kind::Own, 4e-6)]);
        assert_eq!(stages(&marks, us(6)), vec![("a", Kind::Framework, 4e-6), ("b", Kind::Own, 0.0)]);
        assert_eq!(stages(&marks[..1], us(1)), vec![]);
    }
}
