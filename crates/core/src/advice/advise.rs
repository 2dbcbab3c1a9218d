//! `advise`: every applicable path's predicted time for one array, and which to take, before any
//! of them runs. The rules (crates/core/src/explain) say what each path will do (share,
//! copy or fail, and why); the cost model ([`super::model`]) says what it will cost; the
//! recommendation is the one `auto` would take, for the reason the row states.

use serde::{Deserialize, Serialize};

use super::model::{Candidate, Prediction, fastest_correct};
use super::producer::Producer;
use crate::report::Verdict;

/// One path as `advise` sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AdviceRow {
    pub path: String,
    // Both are enums here and their words in JSON; the published schema keeps them strings, as it
    // always had them.
    /// `share`, `move` or `process`.
    #[schemars(with = "String")]
    pub kind: crate::paths::PathKind,
    /// What the rules predict: `shared`, `copied` or `failed`.
    #[schemars(with = "String")]
    pub verdict: crate::report::Verdict,
    /// Why it copies or fails, in the rules' words; `None` when it shares.
    pub reason: Option<String>,
    /// How the handoff is ordered against the producer's queued work, in words.
    pub ordering: String,
    /// Whether that ordering guarantees the consumer reads finished values; a path that does not
    /// is never recommended.
    #[serde(default = "ordered_by_default")]
    pub ordered: bool,
    /// Whether the host waits for all of the producer's queued work before this handoff returns
    /// ([`super::producer::host_waits`]): with a busy producer, such a path costs at least its
    /// fixed cost plus that work, and is recommended only where every other correct path waits too.
    #[serde(default)]
    pub waits: bool,
    /// The model's prediction; `None` where this path is not calibrated on this machine.
    pub prediction: Option<Prediction>,
    /// Whether a handoff by this path moves the caller's array to other memory first and frees the
    /// memory it lay in (torch.multiprocessing with a tensor not yet in shared memory), so that
    /// every view made of it before reads freed memory: never recommended, as `auto` never takes it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub moves_source: bool,
}

fn ordered_by_default() -> bool {
    true
}

/// What `advise` answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Advice {
    pub source: String,
    pub target: String,
    pub nbytes: u64,
    /// Where the array lies and where it goes: `cuda:0`, `cuda:0->cuda:1`, `cuda:0->process`.
    pub place: String,
    pub rows: Vec<AdviceRow>,
    /// The path to take.
    pub recommended: Option<String>,
    /// Why, in words: the verdict it gives, what bounds it (fixed cost or bandwidth), which link.
    pub why: String,
    /// The producer had queued work (a host-side synchronise would wait for it), seconds; 0 where
    /// none was queued or the amount is not known (see `producer`).
    pub queued: f64,
    /// The producer's state the predictions assumed: idle, busy (its stream had queued work) or
    /// unknown (predicted as idle).
    #[serde(default)]
    pub producer: Producer,
    /// Why the model could not answer for some paths (not calibrated, stale), or `None`.
    pub model_note: Option<String>,
    /// The path `auto` takes for each range of sizes of this pair and place, where the model's
    /// choice changes with size ([`crate::advice::crossings`]); empty where one path serves every
    /// size.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub auto_by_size: Vec<SizeRange>,
    /// The plain framework call that performs the recommended path without gpushare, and what
    /// keeps it ordered against the producer's queued work (each adapter declares its framework's
    /// call); `None` where its framework declares none.
    #[serde(default)]
    pub code: Option<PlainCall>,
}

/// A framework's own call for a path, as code a user can keep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PlainCall {
    /// The expression, `x` the source array: `jax.dlpack.from_dlpack(x)`.
    pub call: String,
    /// What the caller must do to keep the consumer after the producer's queued work, in words.
    pub ordered_by: String,
}

/// One range of sizes and the path `auto` takes for arrays in it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SizeRange {
    /// Bytes the range starts at (included).
    pub from: u64,
    /// Bytes it ends below; `None`: no end.
    pub below: Option<u64>,
    pub path: String,
    /// Another path `auto` could take that the model predicts within its stated error of `path` in
    /// this range (`crate::auto::auto_close_second`): a tie the model cannot break.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub close: Option<String>,
}

impl SizeRange {
    /// `move below 22.9 MiB`, `p2p from 22.9 MiB up`, `copy from 9.77 KiB to 1.00 MiB`.
    pub fn words(&self) -> String {
        format!("{} {}", self.path, span_words(self.from, self.below))
    }
}

/// `below 22.9 MiB`, `from 22.9 MiB up`, `from 9.77 KiB to 1.00 MiB`, `at every size`.
fn span_words(from: u64, below: Option<u64>) -> String {
    let bytes = crate::render::units::bytes;
    match (from, below) {
        (0, Some(below)) => format!("below {}", bytes(below)),
        (from, Some(below)) => format!("from {} to {}", bytes(from), bytes(below)),
        (0, None) => "at every size".to_string(),
        (from, None) => format!("from {} up", bytes(from)),
    }
}

/// Where `ranges` are ties (a close second in each, [`SizeRange::close`]), neighbours joined: `move
/// and p2p below 13.9 MiB`; empty where none is.
pub fn tie_words(ranges: &[SizeRange]) -> Vec<String> {
    let mut spans: Vec<(u64, Option<u64>, Vec<&str>)> = Vec::new();
    let mut open = false;
    for r in ranges {
        let Some(close) = &r.close else {
            open = false;
            continue;
        };
        if !open {
            spans.push((r.from, r.below, Vec::new()));
            open = true;
        }
        let span = spans.last_mut().expect("a span was opened");
        span.1 = r.below;
        for name in [r.path.as_str(), close.as_str()] {
            if !span.2.contains(&name) {
                span.2.push(name);
            }
        }
    }
    spans
        .into_iter()
        .map(|(from, below, mut names)| {
            names.sort_unstable();
            let last = names.pop().unwrap_or_default();
            let names = if names.is_empty() { last.to_string() } else { format!("{} and {last}", names.join(", ")) };
            format!("{names} {}", span_words(from, below))
        })
        .collect()
}

impl Advice {
    /// Chooses among `rows`: the fastest predicted of those that share when any shares (never a
    /// path predicted to fail); without predictions, `rules_choice` (the rules' `auto`) stands.
    pub fn decide(mut self, rules_choice: Option<&str>) -> Advice {
        let mut pool: Vec<&AdviceRow> = self
            .rows
            .iter()
            // As the one auto: a legacy capsule is a candidate where it orders the handoff (not into a
            // consumer that reads on its own stream) and where the rules predict it works for this
            // array (NumPy refuses a read-only one by capsule: that row is predicted to fail).
            .filter(|r| r.verdict != Verdict::Failed && r.ordered && !r.moves_source)
            .collect();
        // A busy producer: a path that waits on the host costs at least all of its queued work,
        // whose amount the driver cannot tell; a calibrated path of the same verdict that does not
        // wait is preferred, as the one auto does (crate::auto::resolve_auto).
        let avoided: Vec<String> = if self.producer == Producer::Busy {
            let any_shares = pool.iter().any(|r| r.verdict == Verdict::Shared);
            let same = |r: &AdviceRow| (r.verdict == Verdict::Shared) == any_shares;
            let calm = pool.iter().any(|r| same(r) && !r.waits && r.prediction.is_some());
            let waiting: Vec<String> = pool.iter().filter(|r| same(r) && r.waits).map(|r| r.path.clone()).collect();
            if calm {
                pool.retain(|r| !(r.waits && same(r)));
                waiting
            } else {
                Vec::new()
            }
        } else {
            Vec::new()
        };
        let candidates: Vec<Candidate<'_>> = pool
            .iter()
            // A prediction that cannot be promised within 2x gives no number to choose by.
            .map(|r| Candidate {
                path: &r.path,
                shares: r.verdict == Verdict::Shared,
                seconds: r.prediction.as_ref().filter(|p| p.unpredictable.is_none()).map(|p| p.seconds),
            })
            .collect();
        // The rules' own choice whose fit was measured with another verdict than this array's: the
        // model has no word on it, and a path it can price is no path it knows to be faster (the
        // one auto, crate::auto::resolve_auto_for_array, alike).
        let any_shares = pool.iter().any(|r| r.verdict == Verdict::Shared);
        let unpriced_rules = rules_choice.and_then(|c| pool.iter().find(|r| r.path == c)).filter(|r| {
            (r.verdict == Verdict::Shared) == any_shares && r.prediction.as_ref().is_some_and(|p| p.unlike_its_fit)
        });
        let by_model = match unpriced_rules {
            Some(_) => None,
            None => fastest_correct(&candidates).map(str::to_string),
        };
        let (recommended, why) = match by_model {
            Some(path) => {
                let row = self.rows.iter().find(|r| r.path == path).expect("a candidate is a row");
                let p = row.prediction.as_ref().expect("the model's choice has a prediction");
                let verdict = if row.verdict == Verdict::Shared {
                    "shares the source's memory".to_string()
                } else {
                    "nothing shares here; it copies".to_string()
                };
                let bound = match p.bandwidth {
                    // The rate this array is predicted to move at, as the table's column says.
                    Some(_) if p.bound == "bandwidth" => {
                        format!("bound by bandwidth ({} for this array)", crate::render::units::bandwidth(self.nbytes, p.seconds - p.waits_for_queue))
                    }
                    _ => format!("bound by its fixed cost ({})", crate::render::units::time(p.fixed)),
                };
                let waits = if p.waits_for_queue > 0.0 {
                    format!("; it waits {} for the producer's queued work", crate::render::units::time(p.waits_for_queue))
                } else if row.waits && self.producer == Producer::Busy {
                    "; it waits on the host for the producer's queued work (amount unknown), as every other path does".to_string()
                } else {
                    String::new()
                };
                let busy = if avoided.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; the producer is busy, and {} would wait on the host for its queued work: {path} is ordered on the device",
                        avoided.join(", ")
                    )
                };
                // "Fastest" only where it is: a path left out for not ordering the handoff may be
                // predicted faster (cai into JAX), and the footnote then says which and why.
                let fastest = if self.rows.iter().any(|r| Self::unordered_but_faster(r, row, p.seconds)) {
                    "predicted fastest of the paths that order the handoff"
                } else {
                    "predicted fastest"
                };
                let close = Self::close_second(&pool, row, p)
                    .map(|(second, q)| {
                        let slower = (q.seconds / p.seconds - 1.0) * 100.0;
                        let how = if slower < 0.5 { "as fast".to_string() } else { format!("{slower:.0} % slower") };
                        format!(
                            "; {} is predicted {how} ({}), within the model's error (±{:.0} %): the two may trade \
                             places from one calibration to the next, and `compare` measures both",
                            second.path,
                            crate::render::units::time(q.seconds),
                            p.tolerance.max(q.tolerance) * 100.0
                        )
                    })
                    .unwrap_or_default();
                (Some(path), format!("{verdict}, {fastest}: {}, {bound}{waits}{busy}{close}", crate::render::units::time(p.seconds)))
            }
            None if unpriced_rules.is_some() => (
                rules_choice.map(str::to_string),
                "the rules' choice (the calibration measured it with another verdict than this array's, so its \
                 time is not predicted here, and the model does not overrule it)"
                    .to_string(),
            ),
            // The rules' choice stands only where it is not predicted to fail.
            None => match rules_choice.filter(|c| self.rows.iter().all(|r| r.path != *c || r.verdict != Verdict::Failed)) {
                // Predictions too uncertain to rank by are not missing ones: calibrating again on an
                // idle machine is the fix, not calibrating at all.
                Some(path) if pool.iter().any(|r| r.prediction.as_ref().is_some_and(|p| p.unpredictable.is_some())) => (
                    Some(path.to_string()),
                    "the rules' choice (the calibrated predictions for these paths are too uncertain to rank: \
                     calibrate again on an idle machine)"
                        .to_string(),
                ),
                Some(path) => (
                    Some(path.to_string()),
                    "the rules' choice (no calibrated prediction for these paths: run gpushare.calibrate())".to_string(),
                ),
                None => (None, "no path applies".to_string()),
            },
        };
        self.recommended = recommended;
        self.why = why;
        self
    }

    /// The next fastest path the recommendation could have been (same verdict, in `pool`: it works
    /// and orders the handoff), where its prediction lies within the model's stated error of the
    /// recommendation's: the model cannot tell the two apart, and which one it predicts faster
    /// follows the noise of each calibration (between two H200s `move` and `p2p` were predicted a
    /// few percent apart below 8 MiB, in either order by calibration: notebook 08).
    fn close_second<'r>(pool: &[&'r AdviceRow], chosen: &AdviceRow, p: &Prediction) -> Option<(&'r AdviceRow, &'r Prediction)> {
        pool.iter()
            .filter(|r| r.path != chosen.path && r.verdict == chosen.verdict)
            .filter_map(|r| r.prediction.as_ref().map(|q| (*r, q)))
            .filter(|(_, q)| q.seconds.is_finite() && q.seconds >= p.seconds)
            .min_by(|a, b| a.1.seconds.total_cmp(&b.1.seconds))
            .filter(|(_, q)| q.seconds <= p.seconds * (1.0 + p.tolerance.max(q.tolerance)))
    }

    /// Whether `r` has `chosen`'s verdict, works and is predicted under `chosen_s`, but was left out
    /// because nothing orders its handoff against the producer's queued work.
    fn unordered_but_faster(r: &AdviceRow, chosen: &AdviceRow, chosen_s: f64) -> bool {
        !r.ordered && r.verdict == chosen.verdict && r.prediction.as_ref().is_some_and(|p| p.seconds < chosen_s)
    }

    /// The fastest path of the recommendation's verdict that the model predicts faster than it but
    /// that does not order the handoff (cai into JAX, which ignores the interface's stream): the
    /// footnote a table gives, so that "fastest" never stands beside a faster row unexplained.
    pub fn faster_unordered(&self) -> Option<&AdviceRow> {
        let chosen = self.rows.iter().find(|r| Some(&r.path) == self.recommended.as_ref())?;
        let chosen_s = chosen.prediction.as_ref()?.seconds;
        self.rows.iter().filter(|r| Self::unordered_but_faster(r, chosen, chosen_s)).min_by(|a, b| {
            let (x, y) = (a.prediction.as_ref().unwrap().seconds, b.prediction.as_ref().unwrap().seconds);
            x.total_cmp(&y)
        })
    }

    /// A copy the model predicts faster than the recommendation (which shares): the footnote a
    /// table gives when a copy would win on time alone.
    pub fn faster_copy(&self) -> Option<&AdviceRow> {
        let chosen = self.rows.iter().find(|r| Some(&r.path) == self.recommended.as_ref())?;
        let chosen_s = chosen.prediction.as_ref()?.seconds;
        if chosen.verdict != Verdict::Shared {
            return None;
        }
        self.rows
            .iter()
            .filter(|r| r.verdict == Verdict::Copied)
            .filter(|r| r.prediction.as_ref().is_some_and(|p| p.seconds < chosen_s))
            .min_by(|a, b| {
                let (x, y) = (a.prediction.as_ref().unwrap().seconds, b.prediction.as_ref().unwrap().seconds);
                x.total_cmp(&y)
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prediction(seconds: f64, bandwidth: Option<f64>) -> Prediction {
        Prediction {
            seconds,
            fixed: seconds,
            bandwidth,
            rate: bandwidth,
            bound: if bandwidth.is_some() { "bandwidth".into() } else { "fixed cost".into() },
            tolerance: 0.3,
            extrapolated: false,
            waits_for_queue: 0.0,
            host_slowdown: None,
            ..Default::default()
        }
    }

    fn row(path: &str, verdict: &str, seconds: Option<f64>) -> AdviceRow {
        AdviceRow {
            path: path.into(),
            kind: crate::paths::PathKind::Share,
            verdict: Verdict::parse(verdict).expect("a verdict's word"),
            reason: None,
            ordering: "x".into(),
            ordered: true,
            waits: false,
            prediction: seconds.map(|s| prediction(s, None)),
            moves_source: false,
        }
    }

    fn advice(rows: Vec<AdviceRow>) -> Advice {
        Advice {
            source: "torch".into(),
            target: "jax".into(),
            nbytes: 4096,
            place: "cpu".into(),
            rows,
            recommended: None,
            why: String::new(),
            queued: 0.0,
            producer: Producer::Idle,
            model_note: None,
            auto_by_size: Vec::new(),
            code: None,
        }
    }

    #[test]
    fn the_fastest_sharing_path_is_recommended_and_a_faster_copy_is_named() {
        let a = advice(vec![
            row("dlpack", "shared", Some(20e-6)),
            row("capsule", "shared", Some(15e-6)),
            row("copy", "copied", Some(12e-6)),
            row("cai", "failed", Some(1e-6)),
        ])
        .decide(Some("capsule"));
        assert_eq!(a.recommended.as_deref(), Some("capsule"));
        assert!(a.why.contains("shares the source's memory") && a.why.contains("15"), "{}", a.why);
        assert_eq!(a.faster_copy().map(|r| r.path.as_str()), Some("copy"));
        // Where the rules take dlpack, a faster legacy capsule that works and is ordered replaces it
        // (host memory); one predicted to fail (a read-only NumPy array) or unordered does not.
        let a = advice(vec![row("dlpack", "shared", Some(20e-6)), row("capsule", "shared", Some(15e-6))]).decide(Some("dlpack"));
        assert_eq!(a.recommended.as_deref(), Some("capsule"));
        let a = advice(vec![row("dlpack", "shared", Some(20e-6)), row("capsule", "failed", Some(15e-6))]).decide(Some("dlpack"));
        assert_eq!(a.recommended.as_deref(), Some("dlpack"));
        let mut unordered = row("capsule", "shared", Some(15e-6));
        unordered.ordered = false;
        assert_eq!(advice(vec![row("dlpack", "shared", Some(20e-6)), unordered]).decide(Some("dlpack")).recommended.as_deref(), Some("dlpack"));
    }

    #[test]
    fn a_path_that_moves_the_callers_array_is_never_recommended() {
        // torch_mp with a tensor not yet in shared memory: it shares, and is predicted faster than
        // shm's copy, but the move frees the memory the tensor's views read.
        let mut moving = row("torch_mp", "shared", Some(100e-6));
        moving.moves_source = true;
        let rows = |moving: AdviceRow| {
            let mut rows = vec![moving, row("shm", "copied", Some(150e-6))];
            rows.iter_mut().for_each(|r| r.kind = crate::paths::PathKind::Process);
            rows
        };
        assert_eq!(advice(rows(moving.clone())).decide(Some("shm")).recommended.as_deref(), Some("shm"));
        // A tensor already in shared memory moves nothing: the sharing path is taken.
        let shared = AdviceRow { moves_source: false, ..moving };
        assert_eq!(advice(rows(shared)).decide(Some("torch_mp")).recommended.as_deref(), Some("torch_mp"));
    }

    #[test]
    fn a_second_path_within_the_models_error_is_named_and_one_beyond_it_is_not() {
        // Between two H200s at 4 MiB (notebook 08): move 25.5 µs, p2p 27.0 µs.
        let moves = |p2p: f64| {
            let mut rows = vec![row("p2p", "copied", Some(p2p)), row("move", "copied", Some(25.5e-6)), row("dlpack", "copied", Some(49.4e-6))];
            for r in &mut rows {
                r.kind = crate::paths::PathKind::Move;
                r.prediction.as_mut().unwrap().tolerance = 0.15;
            }
            advice(rows).decide(Some("p2p"))
        };
        let close = moves(27.0e-6);
        assert_eq!(close.recommended.as_deref(), Some("move"));
        assert!(close.why.contains("p2p is predicted 6 % slower") && close.why.contains("±15 %"), "{}", close.why);
        assert!(!close.why.contains("dlpack is predicted"), "{}", close.why);
        assert!(moves(25.5e-6).why.contains(" is predicted as fast (25.5 µs)"), "{}", moves(25.5e-6).why);
        let apart = moves(40.0e-6);
        assert!(!apart.why.contains("slower"), "{}", apart.why);
        // Only a path the recommendation could have been: not one of another verdict, nor one left
        // out for its ordering.
        let mut unordered = row("cai", "shared", Some(16e-6));
        unordered.ordered = false;
        let a = advice(vec![row("dlpack", "shared", Some(15e-6)), unordered, row("copy", "copied", Some(15.5e-6))]).decide(Some("dlpack"));
        assert!(!a.why.contains("slower"), "{}", a.why);
    }

    #[test]
    fn a_faster_path_left_out_for_its_ordering_is_named_and_the_pick_is_not_called_fastest() {
        // torch→jax at 4 MiB on the 2x H200 (notebook 08): cai 67 µs, dlpack 121 µs;
        // JAX ignores the interface's stream, so cai is no candidate, and "predicted fastest: 121
        // µs" stood beside the 67 µs row with no word on why.
        let mut cai = row("cai", "shared", Some(67e-6));
        cai.ordered = false;
        cai.ordering = crate::advice::model::Ordering::Unordered.describe().into();
        let a = advice(vec![row("dlpack", "shared", Some(121e-6)), cai.clone(), row("copy", "copied", Some(92e-6))]).decide(Some("dlpack"));
        assert_eq!(a.recommended.as_deref(), Some("dlpack"));
        assert_eq!(a.faster_unordered().map(|r| r.path.as_str()), Some("cai"));
        assert!(a.why.contains("predicted fastest of the paths that order the handoff"), "{}", a.why);
        let text = crate::render::advice::advice_text(&a);
        assert!(text.contains("cai is predicted faster (67.0 µs) but is not taken: it is ordered by nothing the consumer honours"), "{text}");
        assert!(text.contains("copy is predicted faster"), "{text}");
        // A slower unordered path, or one of another verdict, is not worth a word.
        cai.prediction = Some(prediction(130e-6, None));
        let a = advice(vec![row("dlpack", "shared", Some(121e-6)), cai]).decide(Some("dlpack"));
        assert!(a.faster_unordered().is_none() && a.why.contains("predicted fastest:"), "{}", a.why);
    }

    #[test]
    fn without_predictions_the_rules_choice_stands_and_says_so() {
        let a = advice(vec![row("dlpack", "shared", None)]).decide(Some("dlpack"));
        assert_eq!(a.recommended.as_deref(), Some("dlpack"));
        assert!(a.why.contains("calibrate"), "{}", a.why);
        assert_eq!(advice(vec![]).decide(None).recommended, None);
        // A rules' choice predicted to fail is no recommendation.
        let failed = advice(vec![row("shm", "failed", None)]).decide(Some("shm"));
        assert_eq!(failed.recommended, None);
        assert_eq!(failed.why, "no path applies");
    }

    #[test]
    fn a_rules_choice_its_fit_cannot_price_for_this_array_is_not_overruled() {
        // The rules' DLPack shares this array, and its fit was measured with copies: no number for
        // it, and the capsule's number is no evidence that the capsule is faster.
        let mut dlpack = row("dlpack", "shared", Some(2e-3));
        if let Some(p) = dlpack.prediction.as_mut() {
            p.unlike_its_fit = true;
            p.unpredictable = Some("not predictable within 2x here: this array is shared".into());
        }
        let a = advice(vec![dlpack.clone(), row("capsule", "shared", Some(1e-6))]).decide(Some("dlpack"));
        assert_eq!(a.recommended.as_deref(), Some("dlpack"));
        assert!(a.why.contains("another verdict"), "{}", a.why);
        // Where the rules' choice is priced, the model ranks as always.
        let priced = advice(vec![row("dlpack", "shared", Some(2e-6)), row("capsule", "shared", Some(1e-6))]).decide(Some("dlpack"));
        assert_eq!(priced.recommended.as_deref(), Some("capsule"));
    }

    #[test]
    fn a_busy_producer_moves_the_pick_to_a_path_ordered_on_the_device() {
        // torch→jax on a GPU: JAX's DLPack import waits on the host, cai does not.
        let rows = || {
            let mut dlpack = row("dlpack", "shared", Some(20e-6));
            dlpack.waits = true;
            vec![dlpack, row("cai", "shared", Some(40e-6))]
        };
        let idle = advice(rows()).decide(Some("dlpack"));
        assert_eq!(idle.recommended.as_deref(), Some("dlpack"));
        let busy = Advice { producer: Producer::Busy, ..advice(rows()) }.decide(Some("dlpack"));
        assert_eq!(busy.recommended.as_deref(), Some("cai"));
        assert!(busy.why.contains("busy") && busy.why.contains("dlpack would wait"), "{}", busy.why);
        // Where every correct path waits (a capsule into TensorFlow), the fastest of them stands, and says so.
        let mut capsule = row("capsule", "shared", Some(8e-6));
        capsule.waits = true;
        let only = Advice { producer: Producer::Busy, ..advice(vec![capsule, row("copy", "copied", Some(9e-6))]) }.decide(Some("capsule"));
        assert_eq!(only.recommended.as_deref(), Some("capsule"));
        assert!(only.why.contains("amount unknown"), "{}", only.why);
        // A path that does not wait but is not calibrated is no reason to leave a calibrated one.
        let mut waits = row("dlpack", "shared", Some(20e-6));
        waits.waits = true;
        let uncalibrated = Advice { producer: Producer::Busy, ..advice(vec![waits, row("cai", "shared", None)]) }.decide(Some("dlpack"));
        assert_eq!(uncalibrated.recommended.as_deref(), Some("dlpack"));
    }
}
