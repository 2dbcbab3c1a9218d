"""Numba-CUDA: no DLPack at all, only ``__cuda_array_interface__``; gpushare makes the capsule
TensorFlow takes from it."""

from __future__ import annotations

import sys
from typing import Any, Callable

from gpushare import _native
from gpushare.adapters._cai import _TYPESTR_CODES, capsule_over_interface, info_from_cai
from gpushare.adapters.base import Adapter, TensorInfo
from gpushare.adapters.description import Strided
from gpushare.exceptions import gpushare_error


class NumbaAdapter(Adapter):
    """Numba-CUDA device arrays: no ``__dlpack__``, only ``__cuda_array_interface__``."""

    name = "numba"
    calibrate_on = ("cuda",)
    import_calls = {"cai": "numba.cuda.as_cuda_array({x})"}
    to_numpy_call = "{x}.copy_to_host()"
    from_numpy_call = "numba.cuda.to_device({a})"
    module = "numba"
    type_modules = ("numba", "numba_cuda")
    accepts_objects = False
    accepts_capsules = False
    exports_dlpack = False
    imports_cai = True
    host_arrays = False
    worker_receives = ("ipc",)
    # What inspect() reads, read by the core: a device array's own attributes (its
    # __cuda_array_interface__ builds a dict on every read), the device the driver's.
    describe_by = Strided(dtype_code_bits="_dtype_code_bits", pointer="device_ctypes_pointer")

    def load(self) -> Any:
        numba = super().load()
        # `numba.cuda` is an attribute only once the submodule is imported.
        import numba.cuda  # noqa: F401

        return numba

    def pip_name(self) -> str:
        # What to install: the distribution that provides the module, and the variant a GPU needs.
        return "numba (and numba-cuda for its CUDA arrays)"

    def is_array(self, obj: Any) -> bool:
        return "numba" in sys.modules and hasattr(obj, "__cuda_array_interface__") and any(self.owns_type(c) for c in type(obj).__mro__)

    def device(self, obj: Any) -> str:
        return self._device_at(obj.__cuda_array_interface__["data"][0])

    def _device_at(self, ptr: int | None) -> str:
        """The device of the memory at ``ptr``, as the driver says (one call). Numba's arrays name no
        device; its current device costs microseconds of its context machinery on every share and
        is the device current now, not the array's. That is the answer only where the driver has
        none (a zero-size array's null pointer)."""
        ordinal = _native.cuda.pointer_device(int(ptr)) if ptr else None
        if ordinal is None:
            ordinal = self.load().cuda.get_current_device().id
        return f"cuda:{ordinal}"

    def inspect(self, obj: Any) -> TensorInfo:
        # A device array's own attributes, read directly: its __cuda_array_interface__ property
        # builds a dict on every read (a contiguity check, the dtype's string, the stream as an
        # int), and describing the target of torch→numba that way cost 12 µs of a 52 µs share on
        # an H200 host (tools/stage_trace.py). The interface's pointer is this one.
        try:
            shape, strides, dtype = obj.shape, obj.strides, obj.dtype
            pointer = obj.device_ctypes_pointer.value or 0
        except AttributeError:  # another Numba type with the interface only
            return self._inspect_interface(obj)
        code = _TYPESTR_CODES.get(dtype.kind)
        itemsize = dtype.itemsize
        if code is None or not itemsize or any(step % itemsize for step in strides):
            return self._inspect_interface(obj)  # what the interface path says of such an array
        device = self._device_at(pointer)
        return _native.share.tensor_info_from_fields(
            self.name, device, pointer, tuple(shape), tuple(step // itemsize for step in strides), code,
            itemsize * 8, 2, int(device.rsplit(":", 1)[1]), False,
        )

    def _dtype_code_bits(self, dtype: Any) -> tuple[int, int] | tuple[()]:
        """DLPack's ``(code, bits)`` of a NumPy dtype (Numba's arrays carry NumPy's), as inspect()
        reads it; ``()`` for a kind DLPack has no code for."""
        code = _TYPESTR_CODES.get(dtype.kind)
        return (code, dtype.itemsize * 8) if code is not None and dtype.itemsize else ()

    def _inspect_interface(self, obj: Any) -> TensorInfo:
        cai = dict(obj.__cuda_array_interface__)
        # Numba's interface drops the strides whenever its is_contiguous check passes, and that
        # check ignores zero strides: a broadcast view would read as a compact array spanning more
        # bytes than it owns. The array's own strides (bytes) are the truth.
        strides = getattr(obj, "strides", None)
        if strides is not None:
            cai["strides"] = tuple(strides)
        return info_from_cai(cai, self.name, self._device_at(cai["data"][0]))

    def from_dlpack(self, obj: Any) -> Any:
        raise gpushare_error("path_not_applicable", "Numba has no from_dlpack; use path='cai'")

    def from_cai(self, obj: Any) -> Any:
        return self.load().cuda.as_cuda_array(obj)

    def cai_importer(self) -> Callable[[Any], Any]:
        # Numba's own function, bound once where Numba is imported (a plan loads its target before
        # building the route): from_cai's load() re-runs `import numba.cuda` on every call.
        cuda = sys.modules.get("numba.cuda")
        as_cuda_array = getattr(cuda, "as_cuda_array", None) if cuda is not None else None
        return as_cuda_array if as_cuda_array is not None else self.from_cai

    def to_capsule(self, obj: Any) -> Any:
        """A legacy capsule over the array's memory, made by gpushare (Numba has no DLPack export):
        what TensorFlow, which imports only capsules, takes. The capsule keeps ``obj`` alive."""
        # Numba's interface drops the strides of a compact array: the array's own are the truth.
        return capsule_over_interface(obj, getattr(obj, "strides", None), lambda: self.device(obj), "Numba")

    def capsule_exporter(self) -> Callable[[Any], Any]:
        return self.to_capsule

    def synchronize(self, obj: Any) -> None:
        self.load().cuda.synchronize()

    def to_numpy(self, obj: Any) -> Any:
        return obj.copy_to_host()

    def from_numpy(self, array: Any, on_host: bool, ordinal: int) -> Any:
        if on_host:
            raise ValueError("Numba device arrays live on a GPU: use --device cuda:N")
        cuda = self.load().cuda
        # Numba allocates on its current device, which JAX's start makes the last GPU: the array
        # asked for on cuda:0 lay on cuda:1, and every process handoff of it then opened a context
        # in the worker (105-127 ms each on 2x H200).
        with cuda.gpus[ordinal]:
            return cuda.to_device(array)

    def has_gpu(self) -> bool:
        return bool(self.load().cuda.is_available())

    def describe_runtime(self, info: Any, module: Any) -> None:
        info.from_dlpack = False
        info.dlpack_export, info.dlpack_export_source = "none", "documented"
        info.notes.append("no DLPack producer: __cuda_array_interface__ only")
        cuda = sys.modules.get("numba.cuda")
        if cuda is not None:
            info.gpu_devices = [f"cuda:{i}" for i in range(len(cuda.gpus))] if cuda.is_available() else []
