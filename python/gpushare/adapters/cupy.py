"""CuPy: GPU arrays only, versioned capsules (CuPy 14), ``__cuda_array_interface__``, and the
per-thread default stream it may ask producers for."""

from __future__ import annotations

import os
import sys
from typing import Any, Callable, ClassVar

from gpushare.adapters.base import Adapter, major_version, versioned_capsule
from gpushare.exceptions import gpushare_error


class CupyAdapter(Adapter):
    name = "cupy"
    views_gpushare_buffers = True  # from_dlpack of gpushare's buffer: a view, a stream wait at most
    calibrate_on = ("cuda",)
    import_calls = {
        "dlpack": "cupy.from_dlpack({x})",
        "capsule": "cupy.from_dlpack({x}.__dlpack__())",
        "cai": "cupy.asarray({x})",
    }
    to_numpy_call = "cupy.asnumpy({x})"
    from_numpy_call = "cupy.asarray({a})"
    module = "cupy"
    aliases = ("cp",)
    type_modules = ("cupy",)
    distribution_names = ("cupy", "cupy-cuda13x", "cupy-cuda12x", "cupy-cuda11x", "cupy-rocm-6-0")
    tracks_allocator = True
    worker_receives = ("ipc",)
    imports_cai = True
    host_arrays = False
    describe_by = "capsule"  # inspect(): the versioned capsule, device "cuda:N"

    def pip_name(self) -> str:
        # What to install: the distribution that provides the module, and the variant a GPU needs.
        return "cupy-cuda12x or cupy-cuda13x, for your CUDA major version (plain cupy builds from source)"

    def is_array(self, obj: Any) -> bool:
        cp = sys.modules.get("cupy")
        return cp is not None and isinstance(obj, cp.ndarray)

    def device(self, obj: Any) -> str:
        return f"cuda:{obj.device.id}"

    def inspect_capsule(self, obj: Any) -> Any:
        return versioned_capsule(obj)

    def from_dlpack(self, obj: Any) -> Any:
        return self.load().from_dlpack(obj)

    def from_capsule(self, capsule: Any) -> Any:
        return self.load().from_dlpack(capsule)

    def dlpack_importer(self) -> Callable[[Any], Any]:
        return self.load().from_dlpack

    def capsule_importer(self) -> Callable[[Any], Any]:
        return self.load().from_dlpack

    def to_capsule(self, obj: Any) -> Any:
        # __dlpack__() with no arguments is the legacy capsule (measured: CuPy 14.2); toDlpack() is
        # deprecated and hands out a versioned one.
        return obj.__dlpack__()

    def from_cai(self, obj: Any) -> Any:
        return self.load().asarray(obj)

    def from_cai_on(self, obj: Any, ordinal: int) -> Any:
        cupy = self.load()
        with cupy.cuda.Device(ordinal):
            return cupy.asarray(obj)

    def synchronize(self, obj: Any) -> None:
        self.load().cuda.runtime.deviceSynchronize()

    def current_stream(self, obj: Any) -> int | None:
        return int(self.load().cuda.get_current_stream().ptr)

    current_device_setter = "cupy.cuda.Device(n).use()"

    _ptds: ClassVar[list[bool]] = []

    def rule_facts(self) -> dict[str, Any]:
        # CuPy reads CUPY_CUDA_PER_THREAD_DEFAULT_STREAM once, at import; so do we (os.environ
        # costs ~1 µs). torch refuses stream=2 from CuPy only.
        if not self._ptds:
            self._ptds.append(os.environ.get("CUPY_CUDA_PER_THREAD_DEFAULT_STREAM", "").strip() not in ("", "0"))
        # As a target: cupy.asarray of a __cuda_array_interface__ on another device copies it to
        # CuPy's current device (the rules read it only for a CUDA source).
        return {"per_thread_default_stream": self._ptds[0], "current_device": self._current_device}

    @staticmethod
    def _current_device() -> int | None:
        cupy = sys.modules.get("cupy")
        try:
            return int(cupy.cuda.runtime.getDevice()) if cupy is not None else None
        except Exception:  # no driver or no device: no CUDA source to compare with
            return None

    def to_numpy(self, obj: Any) -> Any:
        return obj.get()

    def from_numpy(self, array: Any, on_host: bool, ordinal: int) -> Any:
        if on_host:
            raise ValueError("CuPy arrays live on a GPU: use --device cuda:N")
        cp = self.load()
        with cp.cuda.Device(ordinal):
            return cp.asarray(array)

    def has_gpu(self) -> bool:
        try:
            return self.load().cuda.runtime.getDeviceCount() > 0
        except Exception:  # CUDARuntimeError without a driver or a device
            return False

    def describe_runtime(self, info: Any, module: Any) -> None:
        info.from_dlpack = hasattr(module, "from_dlpack")
        # Any CuPy array lives on the GPU, so probing would allocate there: documented instead
        # (versioned DLPack since CuPy 14).
        info.dlpack_export = "versioned" if major_version(info.version) >= 14 else "legacy"
        info.dlpack_export_source = "documented"
        try:
            info.gpu_devices = [f"cuda:{i}" for i in range(module.cuda.runtime.getDeviceCount())]
        except Exception as e:  # CUDARuntimeError without a driver
            info.gpu_devices = []
            info.notes.append(f"no GPU: {e}")

    def device_scope(self, obj: Any) -> tuple[int, int, Any] | None:
        ordinal, current = obj.device.id, self.current_ordinal()
        return None if current == ordinal else (ordinal, current, self.device_made_current(ordinal))

    def current_ordinal(self) -> int | None:
        return int(sys.modules["cupy"].cuda.runtime.getDevice())

    def device_made_current(self, ordinal: int) -> Any:
        return self.load().cuda.Device(ordinal)

    def from_dlpack_on(self, obj: Any, on_host: bool, ordinal: int) -> Any:
        if on_host:
            raise gpushare_error("path_not_applicable", "CuPy arrays live on a GPU: use the target framework for device='cpu'")
        cp = self.load()
        with cp.cuda.Device(ordinal):
            return cp.from_dlpack(obj, device=(2, ordinal), copy=True)

    def move(self, obj: Any, on_host: bool, ordinal: int) -> Any:
        if on_host:
            return obj.get()
        cp = self.load()
        with cp.cuda.Device(ordinal):
            return cp.array(obj, copy=True)  # a peer copy where peer access is on

    def allocator_memory(self, ordinal: int) -> dict[str, int] | None:
        cupy = sys.modules.get("cupy")
        if cupy is None:
            return None
        # CuPy's pools are per device and answer for the current one; switching devices
        # (cudaSetDevice) would create a context on a device CuPy may never have used.
        if cupy.cuda.runtime.getDevice() != ordinal:
            return None
        pool = cupy.get_default_memory_pool()
        figures = {"used": int(pool.used_bytes()), "total": int(pool.total_bytes())}
        limit = int(pool.get_limit())
        if limit:
            figures["limit"] = limit
        return figures

