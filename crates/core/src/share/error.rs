//! The one error type of the share pipeline. The binding turns it into gpushare's Python
//! exceptions in one place (`crates/python/src/binding/errors.rs`, `impl From<ShareError> for PyErr`), the way
//! polars' `PyPolarsErr` does.

use std::fmt;

use crate::explain::{self, PredictedOutcome};

/// An error raised by code outside the core (a framework, an adapter), kept whole so that the
/// binding can re-raise it or chain it (`raise … from`).
pub type Foreign = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Which step of the pipeline failed: the same framework error means something different while
/// describing the source and while converting it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Describing or checking the source, before any prediction.
    Inspect,
    /// Converting, or describing what the conversion made.
    Convert,
}

#[derive(Debug)]
pub enum ShareError {
    /// A framework name gpushare does not know.
    UnknownFramework(String),
    /// The framework is known but cannot be imported here.
    FrameworkNotInstalled(String),
    /// The object is not an array of the named (or any known) framework.
    NotAnArray(String),
    /// A DLPack tensor that cannot be read.
    DLPack(String),
    /// The CUDA driver refused a call.
    Cuda(String),
    /// Bad arguments (negative repeat, an unknown path name, …).
    Usage(String),
    /// Refused before calling the framework: it would crash or misread the input.
    UnsafeInput { source: String, target: String, reason: String, fix: String, predicted: Option<PredictedOutcome> },
    /// The path does not apply to this pair.
    PathNotApplicable { message: String, predicted: Option<PredictedOutcome> },
    /// A handoff the framework failed, explained.
    Conversion {
        message: String,
        reason: String,
        fix: Option<String>,
        /// The framework's own words: `TypeName: message`.
        framework_error: String,
        predicted: Option<PredictedOutcome>,
        origin: Option<Foreign>,
    },
    /// A framework raised; the pipeline explains it ([`ShareError::explain`]) as a [`Conversion`].
    ///
    /// [`Conversion`]: ShareError::Conversion
    Framework { text: String, origin: Option<Foreign> },
    /// One of gpushare's own errors raised by an adapter, passed through unchanged but for the
    /// prediction, which the binding attaches.
    Raised { origin: Foreign, predicted: Option<PredictedOutcome> },
    /// Ctrl-C or another error that must reach the user untouched.
    Interrupted(Foreign),
}

pub type Result<T> = std::result::Result<T, ShareError>;

impl ShareError {
    /// `Framework` errors made into explained `Conversion`s; everything else gains the prediction
    /// where it can carry one. `source` and `target` are framework names, `path` the route.
    pub fn explain(self, stage: Stage, source: &str, target: &str, path: &str, predicted: Option<&PredictedOutcome>) -> ShareError {
        match self {
            ShareError::Framework { text, origin } => {
                let (target, path, predicted) = match stage {
                    // Describing the source is not yet a handoff: no prediction, no path.
                    Stage::Inspect => (source, "inspect", None),
                    Stage::Convert => (target, path, predicted),
                };
                conversion(source, target, path, text, predicted.cloned(), origin)
            }
            ShareError::Raised { origin, predicted: None } if stage == Stage::Convert => {
                ShareError::Raised { origin, predicted: predicted.cloned() }
            }
            ShareError::PathNotApplicable { message, predicted: None } => {
                ShareError::PathNotApplicable { message, predicted: predicted.cloned() }
            }
            other => other,
        }
    }

    /// The prediction carried, if any.
    pub fn predicted(&self) -> Option<&PredictedOutcome> {
        match self {
            ShareError::UnsafeInput { predicted, .. }
            | ShareError::PathNotApplicable { predicted, .. }
            | ShareError::Conversion { predicted, .. }
            | ShareError::Raised { predicted, .. } => predicted.as_ref(),
            _ => None,
        }
    }

    /// Why it failed and how to fix it, in a row of a comparison table.
    pub fn reason_and_fix(&self) -> (String, Option<String>) {
        match self {
            ShareError::UnsafeInput { reason, fix, .. } => (reason.clone(), Some(fix.clone())),
            ShareError::Conversion { reason, fix, .. } => (reason.clone(), fix.clone()),
            other => (other.to_string(), None),
        }
    }

    pub fn is_interrupt(&self) -> bool {
        matches!(self, ShareError::Interrupted(_))
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
) -> ShareError {
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
    let mut message = match &fix {
        Some(fix) => format!("{source} → {target} via {path} failed: {reason}. Fix: {fix}"),
        None => format!("{source} → {target} via {path} failed: {reason}"),
    };
    if let Some(p) = &predicted
        && !matches!(p, PredictedOutcome::Failed { .. })
    {
        message.push_str(&format!(" (UNEXPECTED: gpushare predicted {})", p.verdict().as_str()));
    }
    ShareError::Conversion { message, reason, fix, framework_error: text, predicted, origin }
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

impl fmt::Display for ShareError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShareError::UnknownFramework(m)
            | ShareError::FrameworkNotInstalled(m)
            | ShareError::NotAnArray(m)
            | ShareError::DLPack(m)
            | ShareError::Cuda(m)
            | ShareError::Usage(m) => f.write_str(m),
            ShareError::UnsafeInput { source, target, reason, fix, .. } => {
                write!(f, "{source} → {target}: {reason}. Fix: {fix}")
            }
            ShareError::PathNotApplicable { message, .. } | ShareError::Conversion { message, .. } => f.write_str(message),
            ShareError::Framework { text, .. } => f.write_str(text),
            ShareError::Raised { origin, .. } | ShareError::Interrupted(origin) => write!(f, "{origin}"),
        }
    }
}

impl std::error::Error for ShareError {}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(words: &str) -> PredictedOutcome {
        PredictedOutcome::Failed { reason: "r".into(), expected_error: Some(words.into()), fix: "f".into() }
    }

    #[test]
    fn a_foreseen_failure_is_explained_by_its_prediction() {
        let e = conversion("a", "b", "dlpack", "BufferError: Boom happened".into(), Some(failed("boom")), None);
        let ShareError::Conversion { reason, fix, message, .. } = e else { panic!() };
        assert_eq!((reason.as_str(), fix.as_deref()), ("r", Some("f")));
        assert!(!message.contains("UNEXPECTED"), "{message}");
    }

    #[test]
    fn a_foreseen_failure_is_explained_by_its_prediction_even_where_a_known_failure_matches() {
        // "Unsupported device_type" is a known failure with a generic fix; the prediction was made
        // for this array and names the route that works (managed memory into PyTorch, issue 24.25).
        let predicted = PredictedOutcome::Failed {
            reason: "managed".into(),
            expected_error: Some("Unsupported device_type".into()),
            fix: "use path='cai'".into(),
        };
        let e = conversion("cupy", "torch", "dlpack", "BufferError: Unsupported device_type 13".into(), Some(predicted), None);
        let ShareError::Conversion { reason, fix, .. } = e else { panic!() };
        assert_eq!((reason.as_str(), fix.as_deref()), ("managed", Some("use path='cai'")));
        let unforeseen = conversion("cupy", "torch", "dlpack", "BufferError: Unsupported device_type 13".into(), None, None);
        let ShareError::Conversion { fix, .. } = unforeseen else { panic!() };
        assert_eq!(fix.as_deref(), Some("copy to plain device or host memory first"), "the known failure still explains");
    }

    #[test]
    fn a_failure_other_than_the_one_foreseen_keeps_the_frameworks_words() {
        let e = conversion("a", "b", "dlpack", "TypeError: other".into(), Some(failed("boom")), None);
        let ShareError::Conversion { reason, fix, .. } = e else { panic!() };
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
        let ShareError::Conversion { message, reason, framework_error, .. } = e else { panic!() };
        assert!(!message.contains("frame #0") && !message.contains("Exception raised from"), "{message}");
        assert!(reason.ends_with("FunctionalTensor)."), "{reason}");
        assert_eq!(framework_error, text);
        let long = "ValueError: ".to_string() + &"x".repeat(5000);
        let e = conversion("a", "b", "dlpack", long.clone(), None, None);
        assert!(e.to_string().chars().count() < HEADLINE_CHARS + 200, "{}", e.to_string().len());
        let ShareError::Conversion { framework_error, .. } = e else { panic!() };
        assert_eq!(framework_error, long);
    }

    #[test]
    fn explaining_at_inspection_names_no_path_and_no_prediction() {
        let e = ShareError::Framework { text: "RuntimeError: x".into(), origin: None };
        let e = e.explain(Stage::Inspect, "jax", "torch", "dlpack", Some(&PredictedOutcome::Shared { note: None }));
        assert_eq!(e.to_string(), "jax → jax via inspect failed: RuntimeError: x");
        assert!(e.predicted().is_none());
    }
}
