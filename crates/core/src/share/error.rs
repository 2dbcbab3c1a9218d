//! How the share pipeline explains a failure: a framework's exception becomes an explained
//! [`Error::Conversion`] (the prediction's reason and fix where it foresaw the failure, a known
//! failure's otherwise), at the [`Stage`] it happened. The error type itself is the core's one
//! [`Error`] (crates/core/src/error.rs).

use crate::error::explained_message;
pub use crate::error::{Error, Foreign, Result};
use crate::explain::{self, PredictedOutcome};

/// The pipeline's error is the core's one error, under the name the binding's pipeline code uses.
pub type ShareError = Error;

/// Which step of the pipeline failed: the same framework error means something different while
/// describing the source and while converting it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Describing or checking the source, before any prediction.
    Inspect,
    /// Converting, or describing what the conversion made.
    Convert,
}

impl Error {
    /// `Framework` errors made into explained `Conversion`s; everything else gains the prediction
    /// where it can carry one. `source` and `target` are framework names, `path` the route.
    pub fn explain(self, stage: Stage, source: &str, target: &str, path: &str, predicted: Option<&PredictedOutcome>) -> Error {
        match self {
            Error::Framework { text, origin } => match stage {
                // Describing the source is not yet a handoff: no prediction, no path; the message
                // names the pair asked for and says the source's description failed.
                // An inspection of the array alone names no target ("").
                Stage::Inspect if target.is_empty() => {
                    explained_conversion(&format!("inspecting the {source} array failed"), text, None, origin)
                }
                Stage::Inspect => explained_conversion(
                    &format!("{} failed describing the {source} source", crate::route::label(source, target)),
                    text,
                    None,
                    origin,
                ),
                Stage::Convert => conversion(source, target, path, text, predicted.cloned(), origin),
            },
            Error::Raised { origin, predicted: None } if stage == Stage::Convert => {
                Error::Raised { origin, predicted: predicted.cloned() }
            }
            Error::PathNotApplicable { message, reason, fix, framework_error, predicted: None } => {
                Error::PathNotApplicable { message, reason, fix, framework_error, predicted: predicted.cloned() }
            }
            other => other,
        }
    }
}

/// The explained error of a framework that failed a handoff: the prediction's reason and fix when
/// it foresaw these words (it was made for this array and path, so it can name the route that works,
/// as path='cai' for managed memory into PyTorch), else a known failure's, else the framework's
/// text; and "UNEXPECTED" when gpushare had predicted success.
pub fn conversion(
    source: &str,
    target: &str,
    path: &str,
    text: String,
    predicted: Option<PredictedOutcome>,
    origin: Option<Foreign>,
) -> Error {
    explained_conversion(&format!("{} via {path} failed", crate::route::label(source, target)), text, predicted, origin)
}

/// [`conversion`] under any headline (`source → target …`).
fn explained_conversion(headline_words: &str, text: String, predicted: Option<PredictedOutcome>, origin: Option<Foreign>) -> Error {
    let foreseen = predicted.as_ref().and_then(|p| match p {
        PredictedOutcome::Failed { reason, expected_error: Some(words), fix }
            if !words.is_empty() && text.to_lowercase().contains(&words.to_lowercase()) =>
        {
            Some((reason.clone(), Some(fix.clone())))
        }
        _ => None,
    });
    let (reason, fix) = match (foreseen, explain::explain_failure(&text)) {
        (Some(foreseen), _) => foreseen,
        (None, Some((reason, fix))) => (reason.to_string(), Some(fix.to_string())),
        (None, None) => (headline(&text), None),
    };
    let mut message = explained_message(headline_words, &reason, fix.as_deref());
    if let Some(p) = &predicted
        && !matches!(p, PredictedOutcome::Failed { .. })
    {
        message.push_str(&format!(" (UNEXPECTED: gpushare predicted {})", p.verdict().as_str()));
    }
    Error::Conversion { message, reason, fix, framework_error: Some(text), predicted, origin }
}

/// The part of a framework's error text a message shows: its first paragraph, without the C++
/// backtrace PyTorch appends ("Exception raised from … (most recent call first):" and the frames),
/// cut to [`HEADLINE_CHARS`]. The whole text stays in `framework_error`.
pub fn headline(text: &str) -> String {
    let mut head = text;
    for marker in ["\nException raised from ", "\n\n"] {
        if let Some(at) = head.find(marker) {
            head = &head[..at];
        }
    }
    let head = head.trim_end();
    match head.char_indices().nth(HEADLINE_CHARS) {
        Some((at, _)) => format!("{}… (the framework's full text is in .framework_error)", &head[..at]),
        None => head.to_string(),
    }
}

/// The longest framework text a message quotes, in characters.
pub const HEADLINE_CHARS: usize = 400;

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(words: &str) -> PredictedOutcome {
        PredictedOutcome::Failed { reason: "r".into(), expected_error: Some(words.into()), fix: "f".into() }
    }

    #[test]
    fn a_foreseen_failure_is_explained_by_its_prediction() {
        let e = conversion("a", "b", "dlpack", "BufferError: Boom happened".into(), Some(failed("boom")), None);
        let Error::Conversion { reason, fix, message, .. } = e else { panic!() };
        assert_eq!((reason.as_str(), fix.as_deref()), ("r", Some("f")));
        assert!(!message.contains("UNEXPECTED"), "{message}");
    }

    #[test]
    fn a_foreseen_failure_is_explained_by_its_prediction_even_where_a_known_failure_matches() {
        // "Unsupported device_type" is a known failure with a generic fix; the prediction was made
        // for this array and names the route that works (managed memory into PyTorch).
        let predicted = PredictedOutcome::Failed {
            reason: "managed".into(),
            expected_error: Some("Unsupported device_type".into()),
            fix: "use path='cai'".into(),
        };
        let e = conversion("cupy", "torch", "dlpack", "BufferError: Unsupported device_type 13".into(), Some(predicted), None);
        let Error::Conversion { reason, fix, .. } = e else { panic!() };
        assert_eq!((reason.as_str(), fix.as_deref()), ("managed", Some("use path='cai'")));
        let unforeseen = conversion("cupy", "torch", "dlpack", "BufferError: Unsupported device_type 13".into(), None, None);
        let Error::Conversion { fix, .. } = unforeseen else { panic!() };
        assert_eq!(fix.as_deref(), Some("copy to plain device or host memory first"), "the known failure still explains");
    }

    #[test]
    fn a_failure_other_than_the_one_foreseen_keeps_the_frameworks_words() {
        let e = conversion("a", "b", "dlpack", "TypeError: other".into(), Some(failed("boom")), None);
        let Error::Conversion { reason, fix, .. } = e else { panic!() };
        assert_eq!((reason.as_str(), fix), ("TypeError: other", None));
    }

    #[test]
    fn a_failure_after_a_predicted_success_says_unexpected() {
        let shared = PredictedOutcome::Shared { note: None };
        let e = conversion("torch", "jax", "dlpack", "ValueError: x".into(), Some(shared), None);
        assert!(e.to_string().ends_with("(UNEXPECTED: gpushare predicted shared)"), "{e}");
    }

    #[test]
    fn a_cpp_backtrace_stays_out_of_the_message_and_in_framework_error() {
        let text = "RuntimeError: Cannot access data pointer of Tensor (e.g. FakeTensor, FunctionalTensor).\nException raised from throw_data_ptr_access_error at /pytorch/c10/core/TensorImpl.cpp:1234 (most recent call first):\nframe #0: c10::Error::Error() + 0x1\nframe #1: …";
        let e = conversion("torch", "numpy", "dlpack", text.into(), None, None);
        let Error::Conversion { message, reason, framework_error, .. } = e else { panic!() };
        assert!(!message.contains("frame #0") && !message.contains("Exception raised from"), "{message}");
        assert!(reason.ends_with("FunctionalTensor)."), "{reason}");
        assert_eq!(framework_error.as_deref(), Some(text));
        let long = "ValueError: ".to_string() + &"x".repeat(5000);
        let e = conversion("a", "b", "dlpack", long.clone(), None, None);
        assert!(e.to_string().chars().count() < HEADLINE_CHARS + 200, "{}", e.to_string().len());
        let Error::Conversion { framework_error, .. } = e else { panic!() };
        assert_eq!(framework_error, Some(long));
    }

    #[test]
    fn explaining_at_inspection_names_no_path_and_no_prediction() {
        let e = Error::Framework { text: "RuntimeError: x".into(), origin: None };
        let e = e.explain(Stage::Inspect, "jax", "torch", "dlpack", Some(&PredictedOutcome::Shared { note: None }));
        assert_eq!(e.to_string(), "jax → torch failed describing the jax source: RuntimeError: x");
        assert!(e.predicted().is_none());
        let alone = Error::Framework { text: "RuntimeError: x".into(), origin: None }.explain(Stage::Inspect, "jax", "", "inspect", None);
        assert_eq!(alone.to_string(), "inspecting the jax array failed: RuntimeError: x");
    }
}
