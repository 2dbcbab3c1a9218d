//! Where one share's time goes inside the pipeline, stage by stage: a diagnostic compiled in only
//! with the `stage-trace` feature (`maturin build --features stage-trace`), since a profiler does
//! not see into the extension (tools/stage_trace.py prints it).
//! Without the feature every call here is empty and the optimiser removes it.
//!
//! [`mark`] records, on the calling thread, that the stage named ends now; [`take`] returns each
//! stage's seconds since the mark before it, in order, and starts over.

#[cfg(feature = "stage-trace")]
mod on {
    use std::cell::RefCell;
    use std::time::Instant;

    thread_local! {
        static MARKS: RefCell<Vec<(&'static str, Instant)>> = const { RefCell::new(Vec::new()) };
    }

    pub fn mark(stage: &'static str) {
        let now = Instant::now();
        MARKS.with(|m| m.borrow_mut().push((stage, now)));
    }

    pub fn take() -> Option<Vec<(&'static str, f64)>> {
        let marks = MARKS.with(|m| std::mem::take(&mut *m.borrow_mut()));
        Some(marks.windows(2).map(|w| (w[1].0, (w[1].1 - w[0].1).as_secs_f64())).collect())
    }
}

/// The stage named ends now (nothing without the `stage-trace` feature).
#[inline(always)]
pub fn mark(_stage: &'static str) {
    #[cfg(feature = "stage-trace")]
    on::mark(_stage);
}

/// Each stage's seconds since the mark before it, in order, and a fresh start; `None` without the
/// `stage-trace` feature.
pub fn take() -> Option<Vec<(&'static str, f64)>> {
    #[cfg(feature = "stage-trace")]
    return on::take();
    #[cfg(not(feature = "stage-trace"))]
    None
}

#[cfg(all(test, feature = "stage-trace"))]
mod tests {
    #[test]
    fn stages_are_timed_from_the_mark_before_them() {
        super::take();
        super::mark("start");
        super::mark("a");
        super::mark("b");
        let stages = super::take().unwrap();
        assert_eq!(stages.iter().map(|s| s.0).collect::<Vec<_>>(), ["a", "b"]);
        assert!(stages.iter().all(|s| s.1 >= 0.0));
        assert_eq!(super::take().unwrap(), vec![]);
    }
}

#[cfg(all(test, not(feature = "stage-trace")))]
mod tests {
    #[test]
    fn without_the_feature_nothing_is_recorded() {
        super::mark("start");
        assert!(super::take().is_none());
    }
}
