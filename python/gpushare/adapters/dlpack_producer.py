"""Arrays of no framework gpushare knows, taken as DLPack gives them: any *producer* (an object with
``__dlpack__`` and ``__dlpack_device__``, which the array API's ``from_dlpack`` takes: framework
``"unknown"``), and a bare DLPack *capsule* (``"dltensor"`` or ``"dltensor_versioned"``, which
PyTorch, CuPy, Paddle, MLX and Warp take: framework ``"capsule"``).

Each is described from its capsule, and its capsule is consumed once: a producer is asked for one
capsule (versioned where it can make one), gpushare reads the description from it without
consuming it, and the handoff gives the target that same capsule, so a producer whose
``__dlpack__`` works once (the frameworks' own test producers, wrappers around one capsule) is
handed over whole. Nothing else is known of these sources: they are sources only (no framework to
import into), their export takes no stream from the consumer (the one capsule was made before the
consumer asked: DLPack's default, the legacy default stream on CUDA), and the rules predict them
by their DLPack layout alone.
"""

from __future__ import annotations

import weakref
from typing import Any, Callable, ClassVar

from gpushare import _native
from gpushare.adapters.base import Adapter, TensorInfo, versioned_capsule
from gpushare.exceptions import gpushare_error

_LIVE_NAMES = ("dltensor", "dltensor_versioned")
_USED_NAMES = ("used_dltensor", "used_dltensor_versioned")


def capsule_name(obj: Any) -> str | None:
    """The name of a PyCapsule (``"dltensor"``, ``"used_dltensor_versioned"``, …), None for any
    other object. Read from the capsule's repr, which names it; the C API would need ctypes."""
    if type(obj).__name__ != "PyCapsule":
        return None
    text = repr(obj)
    start = text.find('"')
    end = text.find('"', start + 1)
    return text[start + 1:end] if start >= 0 and end > start else None


def consumed_capsule(obj: Any) -> str | None:
    """Why ``obj`` is no array, where it is a DLPack capsule a consumer already took; None otherwise."""
    name = capsule_name(obj)
    if name not in _USED_NAMES:
        return None
    return (
        f"a DLPack capsule that was already consumed (its name is now {name!r}): a consumer renames the "
        "capsule it imports, and each capsule can be imported once. Export a fresh one (x.__dlpack__()) "
        "for each import, or hand over the array itself"
    )


def _device_words(kind: int, ordinal: int) -> str:
    return {1: "cpu", 2: f"cuda:{ordinal}", 3: "cuda_host", 13: f"cuda_managed:{ordinal}"}.get(
        kind, f"dlpack device ({kind}, {ordinal})")


class _OneCapsule:
    """What a target's ``from_dlpack`` is handed for a producer: its one capsule, with the device
    the producer named. A consumer that asks for no versioned capsule (``max_version`` absent or
    below 1: JAX) gets it as a legacy one (the same tensor, no copy); a copy or another device it
    cannot have (gpushare never asks the producer twice), as DLPack's producers say so."""

    __slots__ = ("_capsule", "_device")

    def __init__(self, capsule: Any, device: tuple[int, int]):
        self._capsule, self._device = capsule, device

    def __dlpack_device__(self) -> tuple[int, int]:
        return self._device

    def __dlpack__(self, *, stream: Any = None, max_version: Any = None, dl_device: Any = None, copy: Any = None) -> Any:
        if copy:
            raise BufferError("a copy was asked of a producer gpushare exported once (copy=True is not supported)")
        if dl_device is not None and tuple(dl_device) != tuple(self._device):
            raise BufferError("unsupported device requested: gpushare hands over the producer's one capsule")
        capsule, self._capsule = self._capsule, None
        if capsule is None:
            raise BufferError("this producer's capsule was already handed over")
        if max_version is None or int(max_version[0]) < 1:
            return _native.share.legacy_capsule(capsule)
        return capsule


class DLPackProducerAdapter(Adapter):
    """Any object with ``__dlpack__`` and ``__dlpack_device__`` of no known framework."""

    name = "unknown"
    module = ""  # no framework to import: a source only
    # Its export happens once, before the consumer asks: the consumer's stream never reaches it.
    export_takes_stream = False
    exports_cai = False
    accepts_objects = False
    accepts_capsules = False
    addresses_device = True

    #: Capsules exported for inspection and not yet handed over, by the producer's id (the producer
    #: held weakly where it can be, so that its capsule is dropped with it).
    _pending: ClassVar[dict[int, tuple[Any, Any]]] = {}

    def installed(self) -> bool:
        return True

    def imported(self) -> bool:
        return True

    def load(self) -> Any:
        raise gpushare_error("path_not_applicable", f"'{self.name}' names arrays of no known framework: it is a source only")

    def version(self) -> str | None:
        return None

    def owns_type(self, tp: type) -> bool:
        return False  # found last, by protocol (adapter_of), never by module

    def is_array(self, obj: Any) -> bool:
        tp = type(obj)
        return hasattr(tp, "__dlpack__") and hasattr(tp, "__dlpack_device__")

    def _place(self, obj: Any) -> tuple[int, int]:
        kind, ordinal = obj.__dlpack_device__()
        return int(kind), int(ordinal or 0)

    def device(self, obj: Any) -> str:
        return _device_words(*self._place(obj))

    def inspect_capsule(self, obj: Any) -> Any:
        """The producer's one capsule: exported on first need, kept until it is handed over."""
        key = id(obj)
        pending = self._pending.get(key)
        if pending is not None and pending[0]() is obj:
            return pending[1]
        capsule = versioned_capsule(obj)
        try:
            ref = weakref.ref(obj, lambda _, key=key: self._pending.pop(key, None))
        except TypeError:  # not weakly referable: exported afresh each time it is asked
            return capsule
        self._pending[key] = (ref, capsule)
        return capsule

    def _take_capsule(self, obj: Any) -> Any:
        pending = self._pending.pop(id(obj), None)
        if pending is not None and pending[0]() is obj:
            return pending[1]
        return versioned_capsule(obj)

    def stream_free_export(self, obj: Any) -> Any:
        return _OneCapsule(self._take_capsule(obj), self._place(obj))

    def export_without_stream(self) -> str:
        return (
            "an unknown producer's one capsule was exported without a stream (DLPack's default: its work "
            "ordered before the legacy default stream on CUDA); gpushare passed none"
        )

    def to_capsule(self, obj: Any) -> Any:
        return self._take_capsule(obj)

    def capsule_exporter(self) -> Callable[[Any], Any]:
        return self._take_capsule

    def synchronize(self, obj: Any) -> None:
        """Nothing to wait on: the producer ordered its work when it exported (stream None)."""

    def current_stream(self, obj: Any) -> int | None:
        return None

    def to_numpy(self, obj: Any) -> Any:
        import numpy as np

        return np.from_dlpack(self.stream_free_export(obj))


class CapsuleAdapter(DLPackProducerAdapter):
    """A bare DLPack capsule (legacy or versioned), not yet consumed."""

    name = "capsule"

    def is_array(self, obj: Any) -> bool:
        return capsule_name(obj) in _LIVE_NAMES

    @staticmethod
    def _live(obj: Any) -> Any:
        """``obj``, or the refusal of a capsule a consumer already took (asked on every use: the
        pipeline remembers the adapter of a type, and a capsule of this type may be consumed)."""
        consumed = consumed_capsule(obj)
        if consumed is not None:
            raise gpushare_error("not_an_array", consumed)
        return obj

    def _place(self, obj: Any) -> tuple[int, int]:
        kind, ordinal = TensorInfo.from_capsule(self._live(obj), self.name, "").dlpack_device
        return int(kind), int(ordinal)

    def in_device_memory(self, obj: Any) -> bool:
        from gpushare.adapters.base import HOST_DEVICE_TYPES

        return self._place(obj)[0] not in HOST_DEVICE_TYPES

    def inspect_capsule(self, obj: Any) -> Any:
        return self._live(obj)

    def _take_capsule(self, obj: Any) -> Any:
        return self._live(obj)

    def stream_free_export(self, obj: Any) -> Any:
        # The target's from_dlpack gets the capsule itself, as the raw call gives it: PyTorch, CuPy,
        # Paddle, MLX and Warp (legacy capsules) take one; NumPy, JAX and cuda.core want an object.
        return self._live(obj)

    def export_without_stream(self) -> str:
        return "a bare capsule carries no stream (made before the consumer asked); gpushare passed none"

    def to_numpy(self, obj: Any) -> Any:
        import numpy as np

        return np.from_dlpack(_OneCapsule(obj, self._place(obj)))
