"""The Python API: ``share``, ``share_chain``, ``inspect``. The magics are thin over these."""

from __future__ import annotations

import json
import os
import sys
import warnings
from typing import Any, Iterator, Sequence

from gpushare import _native, verdicts
from gpushare.adapters import Adapter, adapter_for, adapter_of, framework
from gpushare.exceptions import ConversionError, GpushareError, GpushareWarning
from gpushare.paths import route

ShareResult = _native.ShareResult
TensorInfo = _native.TensorInfo


# (type of the array, target, path, source) -> the _native.SharePlan that runs such shares.
_PLANS: dict[tuple[Any, ...], Any] = {}


def _predicted_this(predicted: Any, text: str) -> bool:
    """The prediction said "failed" and named words that the framework's message contains: its
    reason is then the explanation (never when the framework failed for another reason)."""
    expected = getattr(predicted, "expected_error", None)
    return bool(predicted is not None and predicted[0] == "failed" and expected and expected.lower() in text.lower())


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def _user_stacklevel() -> int:
    """The stacklevel that points a warning at the first frame outside gpushare (the user's line,
    whether they called share, share_chain or a magic)."""
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.dirname(os.path.abspath(frame.f_code.co_filename)) == _PACKAGE_DIR:
        frame, level = frame.f_back, level + 1
    return level


def _conversion_error(
    src: Adapter, dst: Adapter, path: str, exc: BaseException, predicted: Any = None
) -> ConversionError:
    text = f"{type(exc).__name__}: {exc}"
    known = _native.explain_failure(text)
    if known is not None:
        reason, fix = known
        message = f"{src.name} → {dst.name} via {path} failed: {reason}. Fix: {fix}"
    elif _predicted_this(predicted, text):
        reason, fix = predicted[1] or text, getattr(predicted, "fix", None)
        message = f"{src.name} → {dst.name} via {path} failed: {reason}. Fix: {fix}"
    else:
        reason, fix = text, None
        message = f"{src.name} → {dst.name} via {path} failed: {text}"
    if predicted is not None and predicted[0] != "failed":
        message += f" (UNEXPECTED: gpushare predicted {predicted[0]})"
    err = ConversionError(message)
    err.reason = reason
    err.fix = fix
    err.framework_error = text
    err.predicted = predicted
    return err


class _StreamRecorder:
    """Stands in for the source during one handoff and records what the consumer asked its
    ``__dlpack__`` for: the stream argument is how DLPack orders work between frameworks."""

    __slots__ = ("obj", "requests")

    def __init__(self, obj: Any):
        self.obj = obj
        self.requests: list[dict] = []

    def __dlpack__(self, **kwargs: Any) -> Any:
        self.requests.append(kwargs)
        return self.obj.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> Any:
        return self.obj.__dlpack_device__()


def _stream_report(src: Adapter, obj: Any, requests: list[dict], path: str) -> dict:
    """Producer and consumer streams of a handoff and whether the producer had to order them."""
    producer = src.current_stream(obj)
    report: dict[str, Any] = {"path": path, "producer_stream": producer}
    if path != "dlpack" or not requests:
        report["consumer_stream"] = None
        report["wait"] = "none: this route carries no stream; gpushare synchronised the source first"
        return report
    consumer = requests[-1].get("stream")
    report["consumer_stream"] = consumer
    report["max_version"] = requests[-1].get("max_version")
    if consumer is None:
        report["wait"] = "producer synchronises with the legacy default stream (stream=None)"
    elif consumer == -1:
        report["wait"] = "none: the consumer asked for no synchronisation (stream=-1)"
    elif producer is not None and consumer == producer:
        report["wait"] = "none: producer and consumer use the same stream"
    else:
        report["wait"] = f"producer makes stream {consumer} wait on its stream {producer} (event)"
    return report


def inspect(obj: Any) -> TensorInfo:
    """What an array is: framework, dtype, shape, strides (elements), device in the framework's words
    and DLPack's, data address, bytes spanned, contiguity, alignment, read-only flag, CUDA attributes.

    Inspection reads a DLPack capsule without consuming it: the array is left as it was.
    """
    adapter = adapter_of(obj)
    try:
        return adapter.inspect(obj)
    except GpushareError:
        raise
    except Exception as e:
        raise _conversion_error(adapter, adapter, "inspect", e) from e


def share(
    obj: Any,
    to: str,
    *,
    path: str = "auto",
    repeat: int = 1,
    number: int = 1,
    source: str | None = None,
    name: str | None = None,
    origin: TensorInfo | None = None,
) -> ShareResult:
    """Converts ``obj`` to framework ``to`` and reports what happened.

    Parameters
    ----------
    obj : an array of PyTorch, TensorFlow, JAX, NumPy, CuPy or Numba.
    to : the target framework: ``"torch"``, ``"tf"``, ``"jax"``, ``"numpy"``, ``"cupy"``, ``"numba"``.
    path : the transfer path (``"auto"``, ``"dlpack"``, ``"capsule"``, ``"cai"``, …).
    repeat, number : timing: ``repeat`` samples of ``number`` conversions each (``%timeit``'s -r/-n).
    source : the framework ``obj`` must belong to (checked); inferred when None.

    Returns
    -------
    ShareResult with ``value`` (the converted array), ``verdict`` (``"shared"`` only when the target's
    bytes lie inside the source's memory), ``reason`` (why it copied), ``source``/``target``
    ``TensorInfo`` and ``timing``.

    Raises
    ------
    UnknownFrameworkError, FrameworkNotInstalledError, NotAnArrayError, UnsafeInputError (refused
    before calling the framework), PathNotApplicableError, ConversionError (the framework failed).

    Examples
    --------
    >>> r = gpushare.share(torch.ones(3), "numpy")
    >>> r.verdict, r.value
    ('shared', array([1., 1., 1.], dtype=float32))
    """
    if repeat < 1 or number < 1:
        raise ValueError("repeat and number must be at least 1")
    # What depends only on the array's type, the target and the path is worked out once, into a plan
    # that runs every later share of that kind in the Rust core (src/python/plan.rs).
    plan_key = (type(obj), to, path, source)
    try:
        plan = _PLANS.get(plan_key)
    except TypeError:  # an unhashable name: framework() below says what is wrong with it
        plan_key, plan = None, None
    if plan is None:
        plan = _plan(obj, to, path, source)
        if plan_key is not None:
            _PLANS[plan_key] = plan
    result = plan.run(obj, repeat, number, name, origin)
    warning = result.readonly_warning
    if warning is not None:
        warnings.warn(
            f"{result.source.framework} → {result.target.framework}: {warning}",
            GpushareWarning,
            stacklevel=_user_stacklevel(),
        )
    return result


def _plan(obj: Any, to: str, path: str, source: str | None) -> Any:
    """The SharePlan for arrays like ``obj`` to framework ``to`` by ``path``: names checked, the
    target imported, the route built. A path that does not apply raises here, with its prediction."""
    dst = framework(to)
    src = adapter_for(obj, framework(source) if source is not None else None)
    dst.load()
    try:
        path_name, convert = route(src, dst, path)
    except GpushareError as e:  # the path does not apply to this pair: predicted too
        try:
            src_info = src.inspect(obj)
        except Exception:  # nothing to predict from; the path error is the one to report
            e.predicted = None
            raise e from None
        e.predicted = verdicts.predict(src, dst, src_info, path)
        raise
    return _native.SharePlan(
        src,
        dst,
        path_name,
        convert,
        verdicts.predictor(src, dst, path_name),
        _error_hook(src, dst, path_name),
        _observed_handoff,
        type(src).check_source is not Adapter.check_source,
    )


def _error_hook(src: Adapter, dst: Adapter, path: str) -> Any:
    """What a plan raises when a step fails: gpushare's own errors carry the prediction; any other
    exception of the framework becomes a ConversionError that explains it (``raise … from``)."""

    def on_error(stage: str, exc: BaseException, predicted: Any) -> BaseException:
        if isinstance(exc, GpushareError):
            if stage != "inspect":
                exc.predicted = predicted
            return exc
        if not isinstance(exc, Exception):  # KeyboardInterrupt and the like pass through untouched
            return exc
        if stage == "inspect":
            err = _conversion_error(src, src, "inspect", exc)
        else:
            err = _conversion_error(src, dst, path, exc, predicted)
        err.__cause__ = exc
        return err

    return on_error


def _observed_handoff(
    src: Adapter, dst: Adapter, obj: Any, convert: Any, path: str, src_info: TensorInfo
) -> tuple[str | None, str]:
    from gpushare.ledger import MemoryLedger

    ordinal = src_info.dlpack_device[1]
    recorder = _StreamRecorder(obj)
    src.synchronize(obj)
    before = MemoryLedger.snapshot(ordinal)
    value = convert(recorder if path == "dlpack" else obj)
    dst.synchronize(value)
    after = MemoryLedger.snapshot(ordinal)
    del value
    diff = MemoryLedger.diff(before, after)
    memory = {**diff.to_dict(), "summary": diff.summary()}
    return json.dumps(memory, default=str), json.dumps(_stream_report(src, obj, recorder.requests, path), default=str)


def parse_chain(spec: str) -> tuple[str | None, list[str]]:
    """``"torch->jax->tf"`` → ``("torch", ["jax", "tf"])``; ``"->jax"`` → ``(None, ["jax"])``.
    Names are checked (with a suggestion for typos)."""
    parts = [p.strip() for p in spec.split("->")]
    if len(parts) < 2 or any(p == "" for p in parts[1:]):
        raise ValueError(f"expected SRC->DST[->DST2…] or ->DST, got {spec!r}")
    src = parts[0] or None
    if src is not None:
        framework(src)
    return (framework(src).name if src else None), [framework(p).name for p in parts[1:]]


def share_chain(
    obj: Any,
    targets: Sequence[str],
    *,
    path: str = "auto",
    repeat: int = 1,
    number: int = 1,
    source: str | None = None,
    name: str | None = None,
) -> list[ShareResult]:
    """Converts through each framework in turn; every hop's result says whether it still shares the
    first source's memory (``shares_origin``)."""
    results: list[ShareResult] = []
    current, origin = obj, inspect(obj)
    for i, target in enumerate(targets):
        r = share(
            current, target, path=path, repeat=repeat, number=number,
            source=source if i == 0 else None, name=name, origin=origin,
        )
        results.append(r)
        current = r.value
    return results


class ShareTable:
    """Several handoffs as one table (what the magics show). Indexable by position or variable name."""

    def __init__(self, results: Sequence[ShareResult]):
        self.results = list(results)

    def __len__(self) -> int:
        return len(self.results)

    def __iter__(self) -> Iterator[ShareResult]:
        return iter(self.results)

    def __getitem__(self, key: int | str) -> ShareResult:
        if isinstance(key, str):
            for r in reversed(self.results):
                if r.name == key:
                    return r
            raise KeyError(key)
        return self.results[key]

    @property
    def values(self) -> dict[str, Any]:
        return {f"{r.name}_{r.target.framework}": r.value for r in self.results}

    def to_dict(self) -> list[dict]:
        return [r.to_dict() for r in self.results]

    def to_json(self) -> str:
        return _native.render_shares(self.results, "json")

    def to_pandas(self) -> Any:
        import pandas as pd

        return pd.json_normalize(self.to_dict())

    def __repr__(self) -> str:
        return _native.render_shares(self.results, "text")

    def _repr_html_(self) -> str:
        return _native.render_shares(self.results, "html")

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict:
        return _native.shares_mimebundle(self.results)


from gpushare.lab import bench, compare  # noqa: E402  (the transfer-path lab; %share --path all calls api.compare)
