"""gpushare's exceptions. They are created in the Rust core and re-exported here.

GpushareError
├── UnknownFrameworkError       a framework name gpushare does not know
├── FrameworkNotInstalledError  the framework is known but cannot be imported here
├── NotAnArrayError             the object is not an array of the named (or any known) framework
├── DLPackError                 a DLPack capsule that cannot be read
├── CudaError                   the CUDA driver refused a call
├── WorkerError                 a worker process died, was killed, timed out or was stopped
└── ConversionError             a handoff that failed
    ├── UnsafeInputError        refused before calling the framework (it would crash or mis-read)
    └── PathNotApplicableError  the transfer path does not apply to this pair

Every one carries ``.reason`` (why; the message itself where there is nothing more to say), ``.fix``
(or None), ``.framework_error`` (the framework's own words, or None) and ``.predicted`` (gpushare's
prediction for the handoff, or None). Rust makes them all, by one conversion
(crates/python/src/binding/errors.rs); Python code raises them with ``gpushare_error(kind, message,
reason=, fix=, framework_error=)`` or ``explained(kind, subject, reason, fix)``, never by calling a class.
"""

from __future__ import annotations

from gpushare._native.errors import (
    ConversionError,
    CudaError,
    DLPackError,
    FrameworkNotInstalledError,
    GpushareError,
    NotAnArrayError,
    PathNotApplicableError,
    UnknownFrameworkError,
    UnsafeInputError,
    WorkerError,
    gpushare_error,
)


def explained(kind: str, subject: str, reason: str, fix: str, framework_error: str | None = None) -> GpushareError:
    """The gpushare error of ``kind`` for a refusal that says why and how to fix it, in the one form
    every explained failure reads in, ``"{subject}: {reason}. Fix: {fix}"``, with ``.reason``, ``.fix``
    and ``.framework_error`` (the framework's own words, if it said any). Made in Rust by
    ``gpushare_error``, which makes the core's own errors too."""
    return gpushare_error(kind, subject, reason=reason, fix=fix, framework_error=framework_error)


def foreseen(err: GpushareError) -> GpushareError:
    """``err``, a refusal gpushare's own check makes before any framework call, carrying its own
    prediction (a failure, for its reason and fix): what the rules would guess of the conversion it
    never reaches cannot contradict it."""
    from gpushare import _native

    err.predicted = _native.paths.Prediction("failed", getattr(err, "reason", None) or str(err), getattr(err, "fix", None))
    return err


class GpushareWarning(UserWarning):
    """A handoff that worked but deserves attention (a writable view of read-only memory, a noisy timing)."""


def _render_traceback_(self: BaseException) -> list[str]:
    # IPython calls this instead of printing a full traceback: users see the gpushare message, not
    # the frames of gpushare's internals. The framework's own error, if any, follows on one line.
    lines = [f"\x1b[31m{type(self).__name__}\x1b[0m: {self}"]
    framework_error = getattr(self, "framework_error", None)
    if framework_error:
        # Its first line: PyTorch appends a C++ backtrace; the whole text stays in .framework_error.
        first = framework_error.strip().splitlines()[0] if framework_error.strip() else framework_error
        lines.append(f"  the framework said: {first}")
    return lines


GpushareError._render_traceback_ = _render_traceback_  # type: ignore[attr-defined]

__all__ = [
    "ConversionError",
    "CudaError",
    "DLPackError",
    "FrameworkNotInstalledError",
    "GpushareError",
    "GpushareWarning",
    "NotAnArrayError",
    "PathNotApplicableError",
    "UnknownFrameworkError",
    "UnsafeInputError",
    "WorkerError",
    "explained",
    "gpushare_error",
]
