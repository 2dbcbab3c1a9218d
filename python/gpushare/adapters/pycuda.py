"""PyCUDA: ``GPUArray`` exports ``__cuda_array_interface__`` (v3: strides in bytes always given,
``"stream": None``, never read-only) and no DLPack (inducer/pycuda#226). PyCUDA has no import of
the interface; gpushare makes a ``GPUArray`` over the same memory (``gpudata=`` the pointer,
``base=`` the source, which keeps it alive), and a legacy capsule for TensorFlow.

Every PyCUDA call needs a current CUDA context. ``pycuda.autoinit`` makes a context of its own;
``pycuda.autoprimaryctx`` retains the device's primary context, the one PyTorch, JAX, CuPy and
TensorFlow use. gpushare never makes one behind the user's back: it says which to import."""

from __future__ import annotations

import sys
from typing import Any

from gpushare import _native
from gpushare.adapters._cai import capsule_over_interface, info_from_cai
from gpushare.adapters.base import Adapter, TensorInfo, explained
from gpushare.exceptions import gpushare_error

_NO_CONTEXT_FIX = (
    "import pycuda.autoprimaryctx (the device's primary context, which PyTorch, JAX, CuPy and "
    "TensorFlow share) or pycuda.autoinit (a context of PyCUDA's own) first"
)


class PycudaAdapter(Adapter):
    name = "pycuda"
    module = "pycuda"
    type_modules = ("pycuda",)
    accepts_objects = False
    accepts_capsules = False
    exports_dlpack = False
    imports_cai = True
    host_arrays = False

    def pip_name(self) -> str:
        return "pycuda (an sdist only: it builds against the CUDA toolkit, nvcc on PATH; docs/pycuda-on-gpu.md)"

    def load(self) -> Any:
        pycuda = super().load()
        # The submodules are attributes only once imported; neither makes a context.
        import pycuda.driver  # noqa: F401
        import pycuda.gpuarray  # noqa: F401

        return pycuda

    def is_array(self, obj: Any) -> bool:
        gpuarray = sys.modules.get("pycuda.gpuarray")
        return gpuarray is not None and isinstance(obj, gpuarray.GPUArray)

    def device(self, obj: Any) -> str:
        ptr = int(obj.__cuda_array_interface__["data"][0] or 0)
        attributes = _native.cuda.pointer_attributes(ptr) if ptr else None
        # The interface has no ordinal; the driver knows the pointer's (none for a zero-size array).
        return f"cuda:{int((attributes or {}).get('device_ordinal') or 0)}"

    def inspect(self, obj: Any) -> TensorInfo:
        return info_from_cai(obj.__cuda_array_interface__, self.name, self.device(obj))

    def from_dlpack(self, obj: Any) -> Any:
        raise gpushare_error("path_not_applicable", "PyCUDA has no DLPack import (inducer/pycuda#226); use path='cai'")

    def from_cai(self, obj: Any) -> Any:
        pycuda = self.load()
        self._require_context(pycuda)
        import numpy as np

        cai = obj.__cuda_array_interface__
        dtype = np.dtype(cai["typestr"])
        shape = tuple(cai["shape"])
        strides = cai.get("strides")
        ptr = int(cai["data"][0] or 0)
        if not ptr:
            # A zero-size source has no memory (address 0): GPUArray asserts that an array without
            # gpudata has no base, and a zero-size one allocates nothing.
            return pycuda.gpuarray.GPUArray(shape, dtype, strides=strides)
        return pycuda.gpuarray.GPUArray(shape, dtype, gpudata=ptr, strides=strides, base=obj)

    def data_pointer(self, obj: Any) -> int:
        return int(obj.__cuda_array_interface__["data"][0] or 0)

    def to_capsule(self, obj: Any) -> Any:
        """A legacy capsule made by gpushare (PyCUDA has no DLPack export), for TensorFlow."""
        return capsule_over_interface(obj, None, lambda: self.device(obj), "PyCUDA")

    @staticmethod
    def has_current_context() -> bool:
        """Whether PyCUDA has a context of its own current on this thread (``Context.get_current()``
        reads PyCUDA's context stack, not the driver's: the primary context PyTorch made current does
        not count). Never imports PyCUDA: without ``pycuda.driver`` loaded there is none."""
        driver = sys.modules.get("pycuda.driver")
        if driver is None:
            return False
        try:
            return driver.Context.get_current() is not None
        except Exception:  # the driver is not initialised: no context either
            return False

    def rule_facts(self) -> dict[str, Any]:
        # `import pycuda.autoprimaryctx` can come at any time: read at each prediction into PyCUDA.
        return {**super().rule_facts(), "has_current_context": self.has_current_context}

    def _require_context(self, pycuda: Any) -> None:
        if not self.has_current_context():
            raise explained("framework_not_installed", "pycuda", "PyCUDA has no current CUDA context", _NO_CONTEXT_FIX)

    def synchronize(self, obj: Any) -> None:
        self.load().driver.Context.synchronize()

    def to_numpy(self, obj: Any) -> Any:
        return obj.get()

    def from_numpy(self, array: Any, on_host: bool, ordinal: int) -> Any:
        if on_host:
            raise ValueError("PyCUDA arrays live on a GPU: use --device cuda:N")
        pycuda = self.load()
        self._require_context(pycuda)
        return pycuda.gpuarray.to_gpu(array)

    def has_gpu(self) -> bool:
        driver = self.load().driver
        try:
            driver.init()
            return driver.Device.count() > 0
        except Exception:
            return False

    def describe_runtime(self, info: Any, module: Any) -> None:
        info.from_dlpack = False
        info.dlpack_export, info.dlpack_export_source = "none", "documented"
        info.notes.append("no DLPack: __cuda_array_interface__ only (gpushare views it by a GPUArray)")
        driver = sys.modules.get("pycuda.driver")
        context = None
        try:
            context = driver.Context.get_current() if driver is not None else None
        except Exception:
            pass
        if context is None:
            info.notes.append("no current context: " + _NO_CONTEXT_FIX)
            return
        info.gpu_devices = [f"cuda:{i}" for i in range(driver.Device.count())]
        # The driver's word, not which module was imported: both may be, in either order.
        handle = int(getattr(context, "handle", 0) or 0)
        ordinal = int((_native.cuda.current_context() or {}).get("device") or 0)
        primary = (_native.cuda.primary_context(ordinal) or {}).get("handle") == handle
        info.notes.append(f"context {handle:#x}: " + ("the device's primary context" if primary else
                          "PyCUDA's own (pycuda.autoinit or make_context), not the primary one"))
