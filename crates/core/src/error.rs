//! gpushare's one error type. Each module keeps the error that says precisely what went wrong in
//! it ([`CudaError`], [`SharedError`], [`DlpackError`]) and every one of them converts into
//! [`Error`]; the share pipeline raises [`Error`] itself. The binding turns it into gpushare's
//! Python exceptions in one place (`crates/python/src/binding/errors.rs`), the way polars'
//! `PolarsError` reaches Python through its one `PyPolarsErr`.
//!
//! Each variant is one kind of failure a user can meet, and so one Python exception class: the
//! binding's conversion is a table from variant to class, and Python code that refuses something
//! builds the same variants by kind ([`Error::from_kind`]), so every failure reads in one form.

use std::fmt;

use crate::cuda::CudaError;
use crate::dlpack::DlpackError;
use crate::explain::PredictedOutcome;
use crate::shared::SharedError;

/// An error raised by code outside the core (a framework, an adapter), kept whole so that the
/// binding can re-raise it or chain it (`raise … from`).
pub type Foreign = Box<dyn std::error::Error + Send + Sync + 'static>;

#[derive(Debug)]
pub enum Error {
    /// A framework name gpushare does not know.
    UnknownFramework(String),
    /// The framework is known but cannot be imported here.
    FrameworkNotInstalled(String),
    /// The object is not an array of the named (or any known) framework.
    NotAnArray(String),
    /// A DLPack tensor that cannot be read.
    DLPack(String),
    /// The CUDA driver refused a call, or there is no usable driver; an interrupted wait is the
    /// user's Ctrl-C.
    Cuda(CudaError),
    /// A worker process died, was killed, timed out or was stopped.
    Worker(String),
    /// A refusal of gpushare's own that is none of the kinds above.
    Other(String),
    /// Bad arguments (negative repeat, an unknown device or dtype name, …): Python's `ValueError`.
    Usage(String),
    /// The host could not give the memory asked for: Python's `MemoryError`.
    OutOfHostMemory(String),
    /// Refused before calling the framework: it would crash or misread the input. `subject` names
    /// who refused ("torch → jax", or a path).
    UnsafeInput {
        subject: String,
        reason: String,
        fix: String,
        framework_error: Option<String>,
        predicted: Option<PredictedOutcome>,
    },
    /// The path does not apply to this pair; `reason` where the message says more than why.
    PathNotApplicable {
        message: String,
        reason: Option<String>,
        fix: Option<String>,
        framework_error: Option<String>,
        predicted: Option<PredictedOutcome>,
    },
    /// A handoff that failed, explained.
    Conversion {
        message: String,
        reason: String,
        fix: Option<String>,
        /// The framework's own words (`TypeName: message`), where a framework raised.
        framework_error: Option<String>,
        predicted: Option<PredictedOutcome>,
        origin: Option<Foreign>,
    },
    /// A framework raised; the pipeline explains it ([`Error::explain`]) as a [`Conversion`].
    ///
    /// [`Conversion`]: Error::Conversion
    Framework { text: String, origin: Option<Foreign> },
    /// One of gpushare's own errors raised by an adapter, passed through unchanged but for the
    /// prediction, which the binding attaches.
    Raised { origin: Foreign, predicted: Option<PredictedOutcome> },
    /// Ctrl-C or another error that must reach the user untouched.
    Interrupted(Foreign),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The one form of an explained failure: `"{subject}: {reason}. Fix: {fix}"`, or without the fix
/// where there is none. The pipeline's conversions, its refusals and every adapter's refusal read so.
pub fn explained_message(subject: &str, reason: &str, fix: Option<&str>) -> String {
    match fix {
        Some(fix) => format!("{subject}: {reason}. Fix: {fix}"),
        None => format!("{subject}: {reason}"),
    }
}

/// What [`Error::from_kind`] was given: a refusal as Python code describes it.
#[derive(Debug, Default, Clone)]
pub struct Refusal {
    /// The whole message, or, with `reason`, who refused (the message is then the one form).
    pub subject: String,
    pub reason: Option<String>,
    pub fix: Option<String>,
    pub framework_error: Option<String>,
}

/// The kinds [`Error::from_kind`] knows, by the name Python code gives them.
pub const KINDS: &[&str] = &[
    "unknown_framework",
    "framework_not_installed",
    "not_an_array",
    "dlpack",
    "cuda",
    "no_cuda",
    "worker",
    "gpushare",
    "conversion",
    "unsafe_input",
    "path_not_applicable",
];

impl Error {
    /// The error of kind `kind` (one of [`KINDS`]) for a refusal made outside the core (an
    /// adapter, a Python module): the same variants, and so the same exceptions and the same
    /// message form, as the core's own. `Err` names the kinds when `kind` is none of them.
    pub fn from_kind(kind: &str, refusal: Refusal) -> std::result::Result<Error, String> {
        let Refusal { subject, reason, fix, framework_error } = refusal;
        let message = match &reason {
            Some(reason) => explained_message(&subject, reason, fix.as_deref()),
            None => subject.clone(),
        };
        if framework_error.is_some() && !matches!(kind, "conversion" | "unsafe_input" | "path_not_applicable") {
            return Err(format!("a {kind} error carries no framework_error: only a conversion's kinds do"));
        }
        Ok(match kind {
            "unknown_framework" => Error::UnknownFramework(message),
            "framework_not_installed" => Error::FrameworkNotInstalled(message),
            "not_an_array" => Error::NotAnArray(message),
            "dlpack" => Error::DLPack(message),
            // A device that cannot be used as asked; "no_cuda" when there is no usable driver.
            "cuda" => Error::Cuda(CudaError::InvalidArgument(message)),
            "no_cuda" => Error::Cuda(CudaError::Unavailable(message)),
            "worker" => Error::Worker(message),
            "gpushare" => Error::Other(message),
            "conversion" => Error::Conversion {
                reason: reason.unwrap_or_else(|| subject.clone()),
                message,
                fix,
                framework_error,
                predicted: None,
                origin: None,
            },
            "unsafe_input" => match (reason, fix) {
                (Some(reason), Some(fix)) => Error::UnsafeInput { subject, reason, fix, framework_error, predicted: None },
                _ => return Err("an unsafe_input error needs a reason and a fix".into()),
            },
            "path_not_applicable" => Error::PathNotApplicable { message, reason, fix, framework_error, predicted: None },
            other => return Err(format!("unknown error kind {other:?}: use one of {}", KINDS.join(", "))),
        })
    }

    /// The prediction carried, if any.
    pub fn predicted(&self) -> Option<&PredictedOutcome> {
        match self {
            Error::UnsafeInput { predicted, .. }
            | Error::PathNotApplicable { predicted, .. }
            | Error::Conversion { predicted, .. }
            | Error::Raised { predicted, .. } => predicted.as_ref(),
            _ => None,
        }
    }

    /// Why it failed and how to fix it, in a row of a comparison table.
    pub fn reason_and_fix(&self) -> (String, Option<String>) {
        match self {
            Error::UnsafeInput { reason, fix, .. } => (reason.clone(), Some(fix.clone())),
            Error::Conversion { reason, fix, .. } => (reason.clone(), fix.clone()),
            other => (other.to_string(), None),
        }
    }

    pub fn is_interrupt(&self) -> bool {
        matches!(self, Error::Interrupted(_) | Error::Cuda(CudaError::Interrupted))
    }
}

impl From<CudaError> for Error {
    fn from(error: CudaError) -> Self {
        Error::Cuda(error)
    }
}

impl From<SharedError> for Error {
    fn from(error: SharedError) -> Self {
        match error {
            SharedError::BadDevice(_) | SharedError::NoSuchHost(_) | SharedError::BadDtype(_) | SharedError::BadShape(_) => Error::Usage(error.to_string()),
            SharedError::OutOfHostMemory(_) => Error::OutOfHostMemory(error.to_string()),
            // The message is the reason: a SharedBuffer's path refusals say only why.
            SharedError::NotApplicable(reason) => Error::PathNotApplicable {
                message: reason.clone(),
                reason: Some(reason),
                fix: None,
                framework_error: None,
                predicted: None,
            },
            // Its waits are waits for the GPU, cut short by Ctrl-C.
            SharedError::Interrupted => Error::Cuda(CudaError::Interrupted),
            SharedError::Cuda(e) => Error::Cuda(e),
        }
    }
}

impl From<DlpackError> for Error {
    fn from(error: DlpackError) -> Self {
        Error::DLPack(format!("invalid DLPack tensor: {error}"))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::UnknownFramework(m)
            | Error::FrameworkNotInstalled(m)
            | Error::NotAnArray(m)
            | Error::DLPack(m)
            | Error::Worker(m)
            | Error::Other(m)
            | Error::Usage(m)
            | Error::OutOfHostMemory(m) => f.write_str(m),
            Error::Cuda(e) => write!(f, "{e}"),
            Error::UnsafeInput { subject, reason, fix, .. } => f.write_str(&explained_message(subject, reason, Some(fix))),
            Error::PathNotApplicable { message, .. } | Error::Conversion { message, .. } => f.write_str(message),
            Error::Framework { text, .. } => f.write_str(text),
            Error::Raised { origin, .. } | Error::Interrupted(origin) => write!(f, "{origin}"),
        }
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(subject: &str, reason: Option<&str>, fix: Option<&str>) -> Refusal {
        Refusal { subject: subject.into(), reason: reason.map(Into::into), fix: fix.map(Into::into), framework_error: None }
    }

    #[test]
    fn every_module_error_converts_into_the_one_error() {
        let cuda: Error = CudaError::Unavailable("no libcuda".into()).into();
        assert!(matches!(cuda, Error::Cuda(CudaError::Unavailable(_))) && cuda.to_string() == "no CUDA: no libcuda");
        let refused: Error = SharedError::NotApplicable("p2p needs two GPUs".into()).into();
        assert!(matches!(&refused, Error::PathNotApplicable { reason: Some(r), .. } if r == "p2p needs two GPUs"));
        assert_eq!(refused.to_string(), "p2p needs two GPUs");
        assert!(matches!(Error::from(SharedError::BadDevice("gpu".into())), Error::Usage(_)));
        assert!(matches!(Error::from(SharedError::OutOfHostMemory(8)), Error::OutOfHostMemory(_)));
        assert!(Error::from(SharedError::Interrupted).is_interrupt());
        assert!(Error::from(SharedError::Cuda(CudaError::Interrupted)).is_interrupt());
        let dlpack: Error = DlpackError::NullTensor.into();
        assert_eq!(dlpack.to_string(), "invalid DLPack tensor: the DLPack tensor pointer is null");
    }

    #[test]
    fn a_refusal_made_by_kind_reads_in_the_one_form() {
        let e = Error::from_kind("conversion", refusal("torch", Some("the conjugate bit is set"), Some("x.resolve_conj()"))).unwrap();
        assert_eq!(e.to_string(), "torch: the conjugate bit is set. Fix: x.resolve_conj()");
        assert_eq!(e.reason_and_fix(), ("the conjugate bit is set".into(), Some("x.resolve_conj()".into())));
        let e = Error::from_kind("unsafe_input", refusal("ipc", Some("r"), Some("f"))).unwrap();
        assert_eq!(e.to_string(), "ipc: r. Fix: f");
        let e = Error::from_kind("path_not_applicable", refusal("shm", Some("no NumPy here"), None)).unwrap();
        assert_eq!(e.to_string(), "shm: no NumPy here");
        let mut with_words = refusal("shm", Some("no room"), Some("free some"));
        with_words.framework_error = Some("OSError: [Errno 28] No space left on device".into());
        let e = Error::from_kind("path_not_applicable", with_words.clone()).unwrap();
        assert!(matches!(&e, Error::PathNotApplicable { fix: Some(_), framework_error: Some(_), .. }), "{e:?}");
        assert!(Error::from_kind("not_an_array", with_words).is_err(), "only a conversion's kinds carry a framework's words");
        let e = Error::from_kind("not_an_array", refusal("expected a torch array", None, None)).unwrap();
        assert_eq!(e.to_string(), "expected a torch array");
        let e = Error::from_kind("no_cuda", refusal("no libcuda", None, None)).unwrap();
        assert_eq!(e.to_string(), "no CUDA: no libcuda");
    }

    #[test]
    fn every_kind_is_known_and_an_unknown_kind_is_refused() {
        for kind in KINDS {
            assert!(Error::from_kind(kind, refusal("s", Some("r"), Some("f"))).is_ok(), "{kind}");
        }
        let err = Error::from_kind("conversoin", refusal("s", None, None)).unwrap_err();
        assert!(err.contains("conversion") && err.contains("path_not_applicable"), "{err}");
        assert!(Error::from_kind("unsafe_input", refusal("s", None, None)).is_err(), "unsafe input needs its fix");
    }
}
