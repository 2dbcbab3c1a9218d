"""gpushare's exceptions. They are created in the Rust core and re-exported here.

GpushareError
├── UnknownFrameworkError       a framework name gpushare does not know
├── FrameworkNotInstalledError  the framework is known but cannot be imported here
├── NotAnArrayError             the object is not an array of the named (or any known) framework
├── DLPackError                 a DLPack capsule that cannot be read
├── CudaError                   the CUDA driver refused a call
├── WorkerError                 a worker process died, was killed, timed out or was stopped
└── ConversionError             a handoff that failed: ``.reason``, ``.fix``, ``.framework_error``
    ├── UnsafeInputError        refused before calling the framework (it would crash or mis-read)
    └── PathNotApplicableError  the transfer path does not apply to this pair
"""

from __future__ import annotations

from gpushare._native import (
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
)


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
]
