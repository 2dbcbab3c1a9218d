"""NVIDIA Warp (``warp-lang``): ``array.__dlpack__(stream=None)`` exports legacy capsules only (no
``max_version``, no ``copy``), ``wp.from_dlpack`` imports objects and legacy capsules and passes its
device's current stream, ``__cuda_array_interface__`` out of CUDA arrays, and ``wp.array(data=…)``
views one in (measured: warp-lang 1.19.0)."""

from __future__ import annotations

import sys
from typing import Any, Callable

from gpushare import _native
from gpushare.adapters.base import Adapter, explained, major_version


class WarpAdapter(Adapter):
    name = "warp"
    module = "warp"
    aliases = ("wp",)
    type_modules = ("warp",)
    distribution_names = ("warp-lang",)
    imports_cai = True
    tracks_allocator = True

    def pip_name(self) -> str:
        return "warp-lang (one wheel for CPU and CUDA 13; it needs driver R580+ for its GPU devices)"

    def is_array(self, obj: Any) -> bool:
        wp = sys.modules.get("warp")
        return wp is not None and isinstance(obj, wp.array)

    def device(self, obj: Any) -> str:
        return str(obj.device)

    def inspect_capsule(self, obj: Any) -> Any:
        # Warp's __dlpack__ takes no max_version: a legacy capsule, and never a READ_ONLY flag
        # (Warp arrays are writable).
        return obj.__dlpack__()

    def _started(self) -> Any:
        """Warp, with its runtime started: ``wp.from_dlpack`` raises "DLPack device conversion
        requires an initialized Warp runtime" until something (``wp.init()``, making any array)
        started it. gpushare starts it, and the next share says what the raw call would have done."""
        wp = self.load()
        if getattr(sys.modules.get("warp._src.context"), "runtime", None) is None:
            wp.init()
            _pending_notes.append(
                "Warp's runtime was not started: wp.from_dlpack would have raised \"DLPack device conversion "
                "requires an initialized Warp runtime\"; gpushare ran wp.init() first"
            )
        return wp

    def from_dlpack(self, obj: Any) -> Any:
        return self.dlpack_importer()(obj)

    def dlpack_importer(self) -> Callable[[Any], Any]:
        return _Import(self._started().from_dlpack)

    def to_capsule(self, obj: Any) -> Any:
        return obj.__dlpack__()

    def from_capsule(self, capsule: Any) -> Any:
        return self.capsule_importer()(capsule)

    def capsule_importer(self) -> Callable[[Any], Any]:
        # wp.from_dlpack takes "dltensor" capsules only; a versioned one (CuPy's toDlpack) is
        # forwarded as a legacy one over the same tensor, as into TensorFlow.
        from_dlpack, legacy = self._started().from_dlpack, _native.share.legacy_capsule
        return _Import(lambda capsule: from_dlpack(legacy(capsule)))

    def from_cai(self, obj: Any) -> Any:
        # wp.array(data=…) on a CUDA device views a __cuda_array_interface__ (and keeps it alive);
        # the interface has no device ordinal, so the driver's word on the pointer places it.
        cai = obj.__cuda_array_interface__
        ptr = int(cai["data"][0] or 0)
        attributes = _native.cuda.pointer_attributes(ptr) if ptr else None
        ordinal = (attributes or {}).get("device_ordinal", 0)
        return self._started().array(data=obj, device=f"cuda:{int(ordinal)}")

    def data_pointer(self, obj: Any) -> int:
        return int(obj.ptr or 0)

    def synchronize(self, obj: Any) -> None:
        if obj.device.is_cuda:
            self.load().synchronize_device(obj.device)

    def current_stream(self, obj: Any) -> int | None:
        if not obj.device.is_cuda:
            return None
        return int(obj.device.stream.cuda_stream)

    def to_numpy(self, obj: Any) -> Any:
        return obj.numpy()

    def from_numpy(self, array: Any, on_host: bool, ordinal: int) -> Any:
        wp = self.load()
        if array.ndim == 0:
            raise explained("conversion", "warp", "Warp has no 0-d arrays", "share x.reshape(1), a view of one element")
        if array.dtype.kind == "c":
            raise explained("conversion", "warp", "Warp has no complex dtypes", "split into real and imaginary parts")
        if array.dtype.name == "bfloat16":
            return wp.array(array.view("uint16"), dtype=wp.uint16, device="cpu" if on_host else f"cuda:{ordinal}").view(wp.bfloat16)
        return wp.array(array, device="cpu" if on_host else f"cuda:{ordinal}")

    def has_gpu(self) -> bool:
        return bool(self.load().is_cuda_available())

    def move(self, obj: Any, on_host: bool, ordinal: int) -> Any:
        return obj.to("cpu" if on_host else f"cuda:{ordinal}")

    def describe_runtime(self, info: Any, module: Any) -> None:
        info.from_dlpack = hasattr(module, "from_dlpack")
        # Not probed: probing makes an array, which initialises Warp (its banner, the CUDA driver).
        info.dlpack_export, info.dlpack_export_source = "legacy", "documented"
        info.notes.append("__dlpack__ takes no max_version or copy; wp.from_dlpack takes legacy capsules only")
        runtime = getattr(getattr(module, "_src", None), "context", None)
        if getattr(runtime, "runtime", None) is not None:
            info.gpu_devices = [str(d) for d in module.get_cuda_devices()]
        elif major_version(info.version) >= 1:
            info.notes.append("runtime not initialised yet (wp.init() starts it and prints its banner)")

    def allocator_memory(self, ordinal: int) -> dict[str, int] | None:
        wp = sys.modules.get("warp")
        context = sys.modules.get("warp._src.context")
        if wp is None or context is None or getattr(context, "runtime", None) is None:
            return None
        if ordinal >= wp.get_cuda_device_count():
            return None
        device = wp.get_device(f"cuda:{ordinal}")
        if not device.is_mempool_supported:
            return None
        return {"used": int(wp.get_mempool_used_mem_current(device)), "peak": int(wp.get_mempool_used_mem_high(device))}


#: What a share into Warp did around Warp's own call (it started Warp's runtime), for that share's result.
_pending_notes: list[str] = []


class _Import:
    """Warp's import as a route calls it, with ``take_notes``: the pipeline reads a route's notes
    after each share (crates/python/src/binding/plan.rs), so the share that started Warp's runtime
    says so."""

    __slots__ = ("convert",)

    def __init__(self, convert: Callable[[Any], Any]):
        self.convert = convert

    def __call__(self, obj: Any) -> Any:
        return self.convert(obj)

    def take_notes(self) -> list[str]:
        notes = _pending_notes[:]
        _pending_notes.clear()
        return notes
