//! One path tried on one array: the raw run the lab's loop hands over ([`PathRun`]) and the row tables
//! show and the JSON carries ([`PathRow`]).

use serde::{Deserialize, Serialize};

use crate::report::{TensorReport, Verdict};
use crate::stats::Timing;

/// One path tried on one array, as the lab's loop measured it.
#[derive(Debug, Clone)]
pub struct PathRun {
    pub path: String,
    pub verdict: Verdict,
    /// `false` when the path does not apply to the pair (then `verdict` is `"failed"`).
    pub applicable: bool,
    pub reason: Option<String>,
    pub fix: Option<String>,
    /// Seconds per loop, one per repeat.
    pub samples: Vec<f64>,
    pub loops: u64,
    /// Device seconds per loop by CUDA events on the source's stream, one per repeat.
    pub device_samples: Option<Vec<f64>>,
    /// Payload bytes the path copied (0 when it shared).
    pub bytes_moved: u64,
    pub target: Option<TensorReport>,
    pub notes: Vec<String>,
    /// This is the path `auto` picks for the pair.
    pub auto: bool,
    /// False when the row was measured from another source than the others (the `shared` path
    /// of a sweep starts from a SharedBuffer): shown, but never ranked against them.
    pub comparable: bool,
    /// What the cost model predicted before the path ran (where this machine is calibrated).
    pub predicted: Option<crate::advice::model::Prediction>,
    /// How the handoff was ordered against the producer's queued work, in words.
    pub ordering: Option<String>,
}

impl PathRun {
    /// A run of `path` that measured nothing yet: failed, applicable, one loop, no samples,
    /// comparable with the other rows.
    pub fn new(path: &str) -> PathRun {
        PathRun {
            path: path.to_string(),
            verdict: Verdict::Failed,
            applicable: true,
            reason: None,
            fix: None,
            samples: Vec::new(),
            loops: 1,
            device_samples: None,
            bytes_moved: 0,
            target: None,
            notes: Vec::new(),
            auto: false,
            comparable: true,
            predicted: None,
            ordering: None,
        }
    }
}

/// A measured path as tables show it and the JSON carries it: within this process, or to a worker
/// process (then `worker` says how the memory was handed over and describes both sides).
// The schema names every key (a JSON key gpushare does not write is no row); `deny_unknown_fields`
// itself cannot be serde's, as a sweep's point flattens the row beside its `size`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct PathRow {
    pub path: String,
    pub verdict: Verdict,
    pub applicable: bool,
    pub auto: bool,
    pub reason: Option<String>,
    pub fix: Option<String>,
    pub bytes_moved: u64,
    /// Host wall time per handoff.
    pub timing: Option<Timing>,
    /// Device time per handoff (CUDA events), where measured.
    pub device_timing: Option<Timing>,
    /// Bytes moved per second at the median time; `None` when nothing was copied or it failed.
    pub bandwidth: Option<f64>,
    /// The fastest path that worked (at this size, in a sweep), faster than the next beyond the
    /// measured spread.
    pub fastest: bool,
    /// Within the measured spread of the fastest: no winner can be named among the tied rows.
    pub tied: bool,
    pub comparable: bool,
    /// Set when the spread makes the median untrustworthy.
    pub warning: Option<String>,
    pub notes: Vec<String>,
    pub target: Option<TensorReport>,
    /// What the cost model predicted before the path ran; `None` where the machine is not calibrated.
    pub predicted: Option<crate::advice::model::Prediction>,
    /// Whether the measured median lies further from the prediction than the model's stated error.
    pub misses_prediction: bool,
    /// How the handoff was ordered against the producer's queued work, in words.
    pub ordering: Option<String>,
    /// A handoff to a worker process: the mechanism, the bytes each handoff moves and both sides by
    /// memory identity (`target` above is then `None`: the worker's array is not described here).
    /// Absent within this process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<crate::report::process::WorkerHandoff>,
}

impl PathRow {
    pub fn from_run(run: PathRun) -> PathRow {
        let verdict = run.verdict;
        let worked = verdict != Verdict::Failed && !run.samples.is_empty();
        let timing = worked.then(|| Timing::from_samples(run.samples.clone(), run.loops));
        let device_timing = if worked {
            run.device_samples.filter(|d| !d.is_empty()).map(|d| Timing::from_samples(d, run.loops))
        } else {
            None
        };
        let timing = timing.map(|mut t| {
            t.device_median = device_timing.as_ref().map(|d| d.median);
            t
        });
        let bandwidth = timing
            .as_ref()
            .filter(|t| run.bytes_moved > 0 && t.median > 0.0)
            .map(|t| run.bytes_moved as f64 / t.median);
        let warning = timing.as_ref().and_then(Timing::noise_warning);
        let misses_prediction = match (&run.predicted, &timing) {
            (Some(p), Some(t)) => p.misses(t.median),
            _ => false,
        };
        PathRow {
            path: run.path,
            verdict,
            applicable: run.applicable,
            auto: run.auto,
            reason: run.reason,
            fix: run.fix,
            bytes_moved: if worked { run.bytes_moved } else { 0 },
            timing,
            device_timing,
            bandwidth,
            fastest: false,
            tied: false,
            comparable: run.comparable,
            warning,
            notes: run.notes,
            target: run.target,
            predicted: run.predicted,
            misses_prediction,
            ordering: run.ordering,
            worker: None,
        }
    }

    pub fn worked(&self) -> bool {
        self.verdict != Verdict::Failed && self.timing.as_ref().is_some_and(|t| t.median.is_finite())
    }

    pub(super) fn median(&self) -> Option<f64> {
        self.timing.as_ref().map(|t| t.median).filter(|m| m.is_finite())
    }

    /// The row's state in the one vocabulary (crate::render::state).
    pub fn state(&self) -> crate::render::State {
        crate::render::State::of(self.verdict, self.applicable)
    }

    /// Whether the path copies by design (its reason says so), so a copy is its answer.
    pub fn copies_by_design(&self) -> bool {
        self.verdict == Verdict::Copied && self.reason.as_deref().is_some_and(|r| r.contains("by design"))
    }

    /// "shared", "copied (by design)", "copied", "not applicable", "failed".
    pub fn verdict_text(&self) -> String {
        if self.applicable && self.copies_by_design() {
            "copied (by design)".into()
        } else {
            self.state().word().into()
        }
    }

    /// The first call of a row that worked, timed with its one-off costs apart (a handoff to a
    /// worker: the path's set-up); `None` for every other row.
    pub fn first_call(&self) -> Option<f64> {
        self.timing.as_ref().filter(|_| self.worked()).and_then(|t| t.first_call)
    }

    pub(crate) fn path_text(&self) -> String {
        if self.auto { format!("{} (auto)", self.path) } else { self.path.clone() }
    }

    /// What a table says under the row: its reason (without the "copied by design: " the verdict
    /// already says), the fix, notes, a noise or prediction warning, and the ordering where the
    /// array lies in device memory (host memory has no queue: crate::render::state::ordering_words).
    pub(crate) fn why(&self) -> String {
        let design = self.reason.as_deref().filter(|_| self.copies_by_design());
        let mut parts: Vec<String> = Vec::new();
        let said = crate::render::state::reason_words(design, self.reason.as_deref(), self.fix.as_deref());
        if !said.is_empty() {
            parts.push(said);
        }
        parts.extend(self.notes.iter().cloned());
        if let Some(w) = &self.warning {
            parts.push(format!("⚠ {w}"));
        }
        if let (true, Some(p), Some(t)) = (self.misses_prediction, &self.predicted, &self.timing) {
            parts.push(format!(
                "⚠ measured {} against {} predicted: {:.0} % off, beyond the model's stated ±{:.0} %",
                crate::render::units::time(t.median),
                crate::render::units::time(p.seconds),
                (t.median - p.seconds).abs() / t.median * 100.0,
                p.tolerance * 100.0
            ));
        }
        if let Some(o) = self.ordering.as_deref().and_then(crate::render::state::ordering_words) {
            parts.push(o);
        }
        if let Some(worker) = self.worker.as_ref().filter(|_| self.applicable) {
            parts.extend(crate::render::process::worker_details(worker));
        }
        parts.join("; ")
    }

    /// The reason a path that does not apply gives in a footnote: its first clause (what is
    /// missing), without the framework's own message in parentheses.
    pub(crate) fn short_reason(&self) -> String {
        let r = self.reason.as_deref().unwrap_or("no reason given");
        let r = match r.find(" (") {
            Some(i) if i > 0 => &r[..i],
            _ => r,
        };
        r.to_string()
    }
}

/// How the footnote of the paths that do not apply here begins (the HTML greys it).
pub const NOT_APPLICABLE_LEAD: &str = "Not applicable here";

/// One footnote for the paths that cannot run for this pair on this machine: each with the
/// short reason, in grey, never as a failure (no call was made).
pub(crate) fn not_applicable_note(rows: &[&PathRow]) -> String {
    let mut seen: Vec<String> = Vec::new();
    for r in rows {
        let item = format!("{} ({})", r.path, r.short_reason());
        if !seen.iter().any(|s| s.starts_with(&format!("{} (", r.path))) {
            seen.push(item);
        }
    }
    format!("{NOT_APPLICABLE_LEAD} (not run): {}.", seen.join("; "))
}

/// Why a path that copies can be starred fastest: at `size` its copy cost less than the
/// shares' fixed costs; `auto` still shares, since a share is never a copy's stale value.
pub(crate) fn starred_copy_note(path: &str, size: &str) -> String {
    format!(
        "★ on {path}, a copy: at {size} copying the bytes cost less than a share's fixed import cost; \
         auto still shares where a path shares (a copy is taken only when none does)."
    )
}

/// Fewest samples a row needs before it can be named faster than another: fewer have no spread.
pub const MIN_SAMPLES_TO_RANK: usize = 3;

/// `[p25, p75]` of a row's samples per call, or `None` when there are too few to have a spread.
fn spread(row: &PathRow) -> Option<(f64, f64)> {
    let t = row.timing.as_ref()?;
    let mut sorted: Vec<f64> = t.samples.iter().copied().filter(|s| s.is_finite()).collect();
    if sorted.len() < MIN_SAMPLES_TO_RANK {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    Some((crate::stats::quantile(&sorted, 0.25), crate::stats::quantile(&sorted, 0.75)))
}

/// Marks the fastest comparable row that worked, if it is faster than every other beyond the
/// measured spread (its upper quartile below their lower quartiles); returns its index. Otherwise
/// the rows within its spread are marked as tied, and none is fastest.
pub(crate) fn mark_fastest(rows: &mut [&mut PathRow]) -> Option<usize> {
    let ranked: Vec<(usize, f64)> = rows
        .iter()
        .enumerate()
        .filter(|(_, r)| r.worked() && r.comparable)
        .filter_map(|(i, r)| r.median().map(|m| (i, m)))
        .collect();
    // A path measured alone (a sweep interrupted at this size, or one path asked for) is no
    // faster than anything: no ★.
    if ranked.len() < 2 {
        return None;
    }
    let best = ranked.iter().min_by(|a, b| a.1.total_cmp(&b.1))?.0;
    let others: Vec<usize> = ranked.iter().map(|(i, _)| *i).filter(|i| *i != best).collect();
    let best_spread = spread(rows[best]);
    let tied: Vec<usize> = others
        .iter()
        .copied()
        .filter(|&i| match (best_spread, spread(rows[i])) {
            (Some((_, best_high)), Some((low, _))) => low <= best_high,
            _ => true, // too few samples to tell them apart
        })
        .collect();
    if tied.is_empty() {
        rows[best].fastest = true;
        return Some(best);
    }
    for i in tied.into_iter().chain([best]) {
        rows[i].tied = true;
    }
    None
}
