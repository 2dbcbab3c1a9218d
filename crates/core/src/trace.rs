//! Where one share's time goes inside the pipeline, stage by stage, and whose work each stage is:
//! gpushare's own, a read the check makes of the framework or of the CUDA driver, the conversion
//! itself, or a wait for device work. A profiler does not see into the extension, and the GPU cost
//! contract is stated for gpushare's own stages (benchmarks/bench_core.py, tools/stage_trace.py).
//!
//! Off unless [`enable`]d at run time, so the released extension measures itself: while off a mark
//! is one relaxed atomic load and a branch, and records nothing.
//!
//! [`mark`] records, on the calling thread, that the stage named ends now; [`take`] returns each
//! stage's seconds since the mark before it, in order, and starts over.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

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

thread_local! {
    static MARKS: RefCell<Vec<(&'static str, Kind, Instant)>> = const { RefCell::new(Vec::new()) };
}

/// Starts or stops recording (every thread); stopping drops what the calling thread recorded.
pub fn enable(on: bool) {
    ON.store(on, Ordering::Relaxed);
    if !on {
        MARKS.with(|m| m.borrow_mut().clear());
    }
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

/// Each stage this thread marked, with its seconds since the mark before it, in order, and a fresh
/// start: the first mark only starts the clock.
pub fn take() -> Vec<Stage> {
    let marks = MARKS.with(|m| std::mem::take(&mut *m.borrow_mut()));
    marks.windows(2).map(|w| (w[1].0, w[1].1, (w[1].2 - w[0].2).as_secs_f64())).collect()
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
}
