//! The one vocabulary of a path's outcome, in every table (`%share`, `compare`, sweeps, `advise`)
//! and in `to_pandas()`: four states, each with one word and one colour.
//!
//! - **shared**: the target reads the source's memory (green);
//! - **copied**: the target holds a copy, by design where the path is a copy (orange, never a
//!   cross: a copy is an answer, not an error);
//! - **not applicable**: the path cannot run for this pair on this machine (no CUDA, a framework
//!   without the protocol): grey, its reason in a footnote, never the colour of a failure;
//! - **failed**: a call was made and failed (red).

use crate::report::Verdict;

/// A path's outcome as tables and frames name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Shared,
    Copied,
    NotApplicable,
    Failed,
}

/// Grey of a state that is no outcome of a call (not applicable here).
pub const GREY: &str = "#6e7781";

impl State {
    /// The state of a measured row: a path that does not apply is not a failure.
    pub fn of(verdict: Verdict, applicable: bool) -> State {
        match (applicable, verdict) {
            (false, _) => State::NotApplicable,
            (true, Verdict::Shared) => State::Shared,
            (true, Verdict::Copied) => State::Copied,
            (true, Verdict::Failed) => State::Failed,
        }
    }

    /// The state of a predicted row (`advise`: nothing was called): a path the rules say cannot
    /// run is not applicable here, never "failed".
    pub fn predicted(verdict: Verdict) -> State {
        match verdict {
            Verdict::Shared => State::Shared,
            Verdict::Copied => State::Copied,
            Verdict::Failed => State::NotApplicable,
        }
    }

    /// The word every table and `to_pandas()` give it.
    pub fn word(self) -> &'static str {
        match self {
            State::Shared => "shared",
            State::Copied => "copied",
            State::NotApplicable => "not applicable",
            State::Failed => "failed",
        }
    }

    /// A short form for narrow cells (a sweep's verdict row): the footnote says the rest.
    pub fn short(self) -> &'static str {
        match self {
            State::NotApplicable => "n/a",
            other => other.word(),
        }
    }

    /// The class of its cell (the `<style>` block colours it; tools select by it).
    pub fn class(self) -> &'static str {
        match self {
            State::Shared => "shared",
            State::Copied => "copied",
            State::NotApplicable => "na",
            State::Failed => "failed",
        }
    }

    /// Its colour, inline (JupyterLab drops `<style>` blocks from untrusted notebooks).
    pub fn style(self) -> &'static str {
        match self {
            State::Shared => "color:#1a7f37;font-weight:bold",
            State::Copied => "color:#b35900;font-weight:bold",
            State::NotApplicable => "color:#6e7781",
            State::Failed => "color:#cf222e;font-weight:bold",
        }
    }

    /// Whether the path ran and gave an answer (shared or copied).
    pub fn worked(self) -> bool {
        matches!(self, State::Shared | State::Copied)
    }
}

/// How a handoff was ordered against the producer's queued work, as a table says it, or `None`
/// where there is nothing to say: host memory has no queue, so a host row speaks of none (the
/// same words for `compare`'s and `advise`'s rows).
pub fn ordering_words(ordering: &str) -> Option<String> {
    let none = crate::advice::model::Ordering::None.describe();
    (!ordering.is_empty() && ordering != none).then(|| format!("ordered by {ordering}"))
}

/// What "copied by design: " introduces, where a verdict already says "copied (by design)".
pub const BY_DESIGN: &str = "copied by design: ";

/// A row's reason as every table gives it, in one form for `compare`, sweeps and `advise` (the
/// same path of the same pair reads the same): where the path copies by design, the path table's
/// words (`design`, crate::paths::copied_by_design) without the "copied by design: " its verdict
/// says; otherwise the rules' or the call's reason, then the fix.
pub fn reason_words(design: Option<&str>, reason: Option<&str>, fix: Option<&str>) -> String {
    if let Some(d) = design {
        return d.trim_start_matches(BY_DESIGN).to_string();
    }
    let mut parts: Vec<String> = Vec::new();
    if let Some(r) = reason.filter(|r| !r.is_empty()) {
        parts.push(r.to_string());
    }
    if let Some(f) = fix.filter(|f| !f.is_empty()) {
        parts.push(format!("fix: {f}"));
    }
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn four_states_four_words_and_only_a_failure_is_red() {
        assert_eq!(State::of(Verdict::Failed, false), State::NotApplicable);
        assert_eq!(State::of(Verdict::Failed, true), State::Failed);
        assert_eq!(State::predicted(Verdict::Failed), State::NotApplicable);
        let words: Vec<&str> = [State::Shared, State::Copied, State::NotApplicable, State::Failed].iter().map(|s| s.word()).collect();
        assert_eq!(words, ["shared", "copied", "not applicable", "failed"]);
        for s in [State::Shared, State::Copied, State::NotApplicable] {
            assert!(!s.style().contains("#cf222e") && !s.word().contains('✗'), "{s:?}");
        }
        assert!(State::Failed.style().contains("#cf222e"));
    }

    #[test]
    fn host_memory_has_no_ordering_to_speak_of() {
        assert_eq!(ordering_words(crate::advice::model::Ordering::None.describe()), None);
        assert_eq!(ordering_words("the consumer's stream"), Some("ordered by the consumer's stream".into()));
    }
}
