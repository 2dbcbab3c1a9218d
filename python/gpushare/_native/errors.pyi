"""gpushare._native.errors: gpushare's exceptions and how a framework's failure is explained (crates/python/src/binding/errors.rs)."""

from typing import Any, Callable, Iterable, Iterator, Literal, Sequence

class GpushareError(Exception):
    # Every gpushare exception carries these, in one form (crates/python/src/binding/errors.rs).
    reason: str
    fix: str | None
    framework_error: str | None
    predicted: Any

class UnknownFrameworkError(GpushareError): ...

class FrameworkNotInstalledError(GpushareError): ...

class NotAnArrayError(GpushareError): ...

class DLPackError(GpushareError): ...

class CudaError(GpushareError):
    kind: str
    code: int | None

class WorkerError(GpushareError): ...

class ConversionError(GpushareError): ...

class UnsafeInputError(ConversionError): ...

class PathNotApplicableError(ConversionError): ...

def explain_failure(error_text: str) -> tuple[str, str] | None: ...

def gpushare_error(
    kind: str, message: str, *, reason: str | None = None, fix: str | None = None, framework_error: str | None = None
) -> GpushareError: ...
