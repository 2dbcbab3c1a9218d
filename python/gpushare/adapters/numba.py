"""Numba-CUDA: no DLPack at all, only ``__cuda_array_interface__``; gpushare makes the capsule
TensorFlow takes from it."""

from __future__ import annotations

import sys
from typing import Any, Callable

from gpushare import _native
from gpushare.adapters._cai import _TYPESTR_CODES, _native_compact_strides, info_from_cai
from gpushare.adapters.base import Adapter, TensorInfo
from gpushare.adapters.examples import EXAMPLE_SHAPE, NotConstructible, aligned_numpy, numpy_example
from gpushare.exceptions import PathNotApplicableError


class NumbaAdapter(Adapter):
    """Numba-CUDA device arrays: no ``__dlpack__``, only ``__cuda_array_interface__``."""

    name = "numba"
    module = "numba"
    type_modules = ("numba", "numba_cuda")
    accepts_objects = False
    accepts_capsules = False
    exports_dlpack = False
    imports_cai = True
    host_arrays = False
    worker_receives = ("ipc",)

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
        return f"cuda:{self.load().cuda.get_current_device().id}"

    def inspect(self, obj: Any) -> TensorInfo:
        cai = dict(obj.__cuda_array_interface__)
        # Numba's interface drops the strides whenever its is_contiguous check passes, and that
        # check ignores zero strides: a broadcast view would read as a compact array spanning more
        # bytes than it owns. The array's own strides (bytes) are the truth.
        strides = getattr(obj, "strides", None)
        if strides is not None:
            cai["strides"] = tuple(strides)
        return info_from_cai(cai, self.name, self.device(obj))

    def from_dlpack(self, obj: Any) -> Any:
        raise PathNotApplicableError("Numba has no from_dlpack; use path='cai'")

    def from_cai(self, obj: Any) -> Any:
        return self.load().cuda.as_cuda_array(obj)

    def to_capsule(self, obj: Any) -> Any:
        """A legacy capsule over the array's memory, made by gpushare (Numba has no DLPack export):
        what TensorFlow, which imports only capsules, takes. The capsule keeps ``obj`` alive."""
        cai = obj.__cuda_array_interface__
        typestr = cai["typestr"]
        code = _TYPESTR_CODES.get(typestr[1])
        itemsize = int(typestr[2:])
        if code is None:
            raise PathNotApplicableError(f"Numba's typestr {typestr!r} has no DLPack code")
        strides = getattr(obj, "strides", None) or cai.get("strides")
        shape = tuple(cai["shape"])
        if strides is None:
            strides_el = _native_compact_strides(shape)
        else:
            if any(s % itemsize for s in strides):
                raise PathNotApplicableError("the array's strides are not whole elements, which DLPack cannot describe")
            strides_el = [s // itemsize for s in strides]
        ptr = int(cai["data"][0] or 0)
        # The capsule is gpushare's word, and its consumer (TensorFlow) places the tensor on the GPU it
        # names: the driver's ordinal of the memory, not the current device Numba's label comes from
        # (with JAX imported cuda:1 is current, and TensorFlow put cuda:0's memory on /GPU:1).
        attributes = _native.cuda_pointer_attributes(ptr) if ptr else None
        ordinal = (attributes or {}).get("device_ordinal")
        if ordinal is None:
            ordinal = int(self.device(obj).rsplit(":", 1)[1])
        return _native.capsule_over(obj, ptr, list(shape), strides_el, code, itemsize * 8, 2, int(ordinal))

    def capsule_exporter(self) -> Callable[[Any], Any]:
        return self.to_capsule

    def synchronize(self, obj: Any) -> None:
        self.load().cuda.synchronize()

    def to_numpy(self, obj: Any) -> Any:
        return obj.copy_to_host()

    def from_numpy(self, array: Any, on_host: bool, ordinal: int) -> Any:
        if on_host:
            raise ValueError("Numba device arrays live on a GPU: use --device cuda:N")
        return self.load().cuda.to_device(array)

    def has_gpu(self) -> bool:
        return bool(self.load().cuda.is_available())

    def describe_runtime(self, info: Any, module: Any) -> None:
        info.from_dlpack = False
        info.dlpack_export, info.dlpack_export_source = "none", "documented"
        info.notes.append("no DLPack producer: __cuda_array_interface__ only")
        cuda = sys.modules.get("numba.cuda")
        if cuda is not None:
            info.gpu_devices = [f"cuda:{i}" for i in range(len(cuda.gpus))] if cuda.is_available() else []

    def example(self, dtype: str, layout: str, on_host: bool, ordinal: int = 0) -> Any:
        if on_host:
            raise NotConstructible("numba device arrays live on the GPU")
        if layout == "read_only":
            raise NotConstructible("numba device arrays cannot be read-only")
        if layout == "zero_stride":
            # DeviceNDArray would take strides (0, itemsize), but Numba's __cuda_array_interface__ then
            # says C-contiguous (is_contiguous ignores zero strides): no consumer could read it right.
            raise NotConstructible("numba device arrays export a zero stride view as C-contiguous, so it is not built")
        if layout == "negative_stride":
            raise NotConstructible(f"numba device arrays cannot take a {layout.replace('_', ' ')} view")
        if dtype == "bfloat16":
            raise NotConstructible("numba has no bfloat16")
        cuda = self.load().cuda
        n = EXAMPLE_SHAPE[0] * EXAMPLE_SHAPE[1]
        if layout == "misaligned":
            return cuda.to_device(aligned_numpy((n,), dtype, extra=1))[1:]
        if layout in ("zero_d", "zero_size"):
            return cuda.to_device(numpy_example(dtype, layout))
        base = cuda.to_device(numpy_example(dtype, "contiguous"))
        if layout == "contiguous":
            return base
        if layout == "transposed":
            # Numba's `.T` is not a view: it runs a transpose kernel into a new compact array (and that
            # kernel fails to compile with NumPy 2.5). A transposed view is the same memory with swapped
            # strides, which DeviceNDArray takes as it is.
            from numba.cuda.cudadrv.devicearray import DeviceNDArray

            isz = base.dtype.itemsize
            rows, cols = EXAMPLE_SHAPE
            return DeviceNDArray(shape=(cols, rows), strides=(isz, cols * isz), dtype=base.dtype,
                                 gpu_data=base.gpu_data)
        if layout == "sliced":
            return base[1:3, 2:]
        raise AssertionError(layout)

    def readback(self, obj: Any) -> Any:
        try:
            return self.to_numpy(obj)
        except Exception:  # e.g. negative strides ("D->H copy not implemented for negative strides")
            return _numba_through_cai(obj)


def _numba_through_cai(x: Any) -> Any:
    """A Numba view that copy_to_host cannot read, read through another framework's
    ``__cuda_array_interface__`` import: CuPy takes any strides; torch only non-negative ones
    (negative strides are what gpushare refuses to hand to torch)."""
    try:
        import cupy
    except ImportError:
        cupy = None
    if cupy is not None:
        return cupy.asarray(x).get()
    if any(s < 0 for s in x.strides):
        raise NotImplementedError("reading a Numba view with negative strides needs CuPy")
    import torch

    return torch.as_tensor(x, device="cuda").cpu().numpy()
