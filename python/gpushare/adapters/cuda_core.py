"""NVIDIA cuda.core (``cuda-core``): ``StridedMemoryView``, the neutral layer numba-cuda and nccl4py
build on. It reads DLPack (versioned, READ_ONLY honoured) and ``__cuda_array_interface__``, exports
versioned capsules (``copy=True`` and ``dl_device`` refused: "Sorry, not supported") and carries the
DLPack C exchange API on its type (measured: cuda-core 1.2.2). It needs no GPU to describe host
memory: ``import cuda.core`` and ``StridedMemoryView.from_dlpack`` work without a driver."""

from __future__ import annotations

import sys
from typing import Any, Callable

from gpushare import _native
from gpushare.adapters.base import HOST_DEVICE_TYPES, Adapter, explained, probe_export, versioned_capsule
from gpushare.exceptions import gpushare_error

#: cuda.core keeps no current stream ("cuda.core has no global/current stream state"): an import of
#: device memory asks the producer to order its work before the legacy default stream (DLPack's
#: stream 1), which every later blocking stream waits for; host memory takes no stream (-1).
_LEGACY_DEFAULT_STREAM = 1
_NO_STREAM = -1


def _smv_type() -> Any:
    module = sys.modules.get("cuda.core._memoryview")
    return getattr(module, "StridedMemoryView", None)


def strided_copy_to_host(ptr: int, shape: tuple[int, ...], strides: tuple[int, ...] | None, dtype: Any,
                         copy_bytes: Callable[[int, Any], None]) -> Any:
    """A compact NumPy copy of the strided array at device address ``ptr`` (``strides`` in elements,
    as StridedMemoryView gives them; None: C order, any sign or zero): ``copy_bytes(address, host)``
    fills the uint8 array ``host`` with the bytes from ``address`` on, once, for the whole span
    from the lowest element to the highest, which NumPy then views with the strides."""
    import numpy as np

    dtype = np.dtype(dtype)
    shape = tuple(int(d) for d in shape)
    if strides is None:
        strides = tuple(int(s) // dtype.itemsize for s in np.empty(shape, dtype).strides) if shape else ()
    if any(d == 0 for d in shape):
        return np.empty(shape, dtype)
    low = sum((d - 1) * s for d, s in zip(shape, strides) if s < 0)
    high = sum((d - 1) * s for d, s in zip(shape, strides) if s > 0)
    host = np.empty((high - low + 1) * dtype.itemsize, np.uint8)
    copy_bytes(ptr + low * dtype.itemsize, host)
    first = host[-low * dtype.itemsize:].view(dtype) if low else host.view(dtype)
    view = np.lib.stride_tricks.as_strided(first, shape, tuple(s * dtype.itemsize for s in strides), writeable=False)
    return np.array(view, copy=True)


class CudaCoreAdapter(Adapter):
    name = "cuda_core"
    module = "cuda.core"
    aliases = ("cuda.core", "cuda-core")
    # Its types live in cuda.core._memoryview; "cuda" alone would claim cuda.bindings' objects too.
    type_modules = ("cuda.core",)
    distribution_names = ("cuda-core",)
    accepts_capsules = False  # StridedMemoryView.from_dlpack wants an object with __dlpack_device__
    exports_cai = False  # it reads __cuda_array_interface__ but does not expose one
    imports_cai = True
    describe_by = "exchange_api"  # StridedMemoryView's; inspect() reads the versioned capsule alike

    def pip_name(self) -> str:
        return 'cuda-core ("cuda-core[cu13]" or "[cu12]" brings the CUDA bindings for its GPU side)'

    def owns_type(self, tp: type) -> bool:
        return tp.__module__.startswith("cuda.core")

    def is_array(self, obj: Any) -> bool:
        smv = _smv_type()
        return smv is not None and isinstance(obj, smv)

    def device(self, obj: Any) -> str:
        return "cpu" if obj.device_id < 0 else f"cuda:{obj.device_id}"

    def inspect_capsule(self, obj: Any) -> Any:
        return versioned_capsule(obj)

    def inspect(self, obj: Any) -> Any:
        try:
            return super().inspect(obj)
        except BufferError:
            # StridedMemoryView views bfloat16 (its dtype from ml_dtypes) but its own __dlpack__
            # refuses to export it ("Unsupported dtype for DLPack export"): the view is described
            # from its attributes, as from_dlpack made it.
            if getattr(getattr(obj, "dtype", None), "name", None) != "bfloat16":
                raise
            on_host = obj.device_id < 0
            return _native.share.tensor_info_from_fields(
                self.name, self.device(obj), int(obj.ptr), list(obj.shape),
                None if obj.strides is None else list(obj.strides),
                4, 16,  # DLPack's kDLBfloat, 16 bits
                1 if on_host else 2, 0 if on_host else int(obj.device_id), bool(obj.readonly),
            )

    def _view(self, obj: Any) -> Any:
        kind = int(obj.__dlpack_device__()[0])
        stream = _NO_STREAM if kind in HOST_DEVICE_TYPES else _LEGACY_DEFAULT_STREAM
        return self._smv().from_dlpack(obj, stream_ptr=stream)

    def _smv(self) -> Any:
        self.load()
        import cuda.core.utils  # noqa: F401  the submodule that defines the public name

        return sys.modules["cuda.core.utils"].StridedMemoryView

    def from_dlpack(self, obj: Any) -> Any:
        return self._view(obj)

    def dlpack_importer(self) -> Callable[[Any], Any]:
        return self._view

    def from_cai(self, obj: Any) -> Any:
        # The interface's own stream, if any, is ordered before the legacy default stream.
        return self._smv().from_cuda_array_interface(obj, stream_ptr=_LEGACY_DEFAULT_STREAM)

    def data_pointer(self, obj: Any) -> int:
        return int(obj.ptr)

    def check_copying_export(self, obj: Any, target: str | None = None, path: str | None = None) -> None:
        raise explained(
            "path_not_applicable", "cuda_core",
            "StridedMemoryView.__dlpack__ refuses copy=True and dl_device (\"Sorry, not supported\")",
            # The prediction's fix (crates/core/src/explain/moves.rs, copying_export_gap): one
            # sentence for one refusal, before and after.
            "use path='move' (the source framework's own move) or path='copy'",
        )

    def to_numpy(self, obj: Any) -> Any:
        import numpy as np

        if obj.device_id < 0:
            try:
                return np.from_dlpack(obj)
            except BufferError:
                if getattr(obj.dtype, "name", None) != "bfloat16":
                    raise
                # The view's export refuses bfloat16 (its dtype from ml_dtypes): its host bytes are
                # copied by address and viewed with its strides.
                import ctypes

                return strided_copy_to_host(obj.ptr, obj.shape, obj.strides, obj.dtype,
                                            lambda ptr, host: ctypes.memmove(host.ctypes.data, ptr, host.nbytes))
        # StridedMemoryView.copy_to raises "Sorry, not supported: copy_to" in cuda-core 1.2.0 (seen
        # on 2x H200): the bytes the view spans are copied with the Buffer API, which every
        # cuda.core has, and NumPy views them with the view's strides.
        return strided_copy_to_host(obj.ptr, obj.shape, obj.strides, obj.dtype, lambda ptr, host: self._copy_to_host(obj, ptr, host))

    def _copy_to_host(self, obj: Any, ptr: int, host: Any) -> None:
        """Copies ``host.nbytes`` bytes from device address ``ptr`` (inside ``obj``'s memory) into
        the NumPy array ``host``, ordered after the legacy default stream, and waits."""
        core = self.load()
        device = core.Device(obj.device_id)
        if _native.cuda.current_context() is None:
            device.set_current()  # the primary context, which the frameworks cuda.core views share
        stream = device.default_stream
        source = core.Buffer.from_handle(ptr, host.nbytes)  # neither owns the memory
        source.copy_to(core.Buffer.from_handle(host.ctypes.data, host.nbytes), stream=stream)
        stream.sync()

    def from_numpy(self, array: Any, on_host: bool, ordinal: int) -> Any:
        smv = self._smv()
        if array.dtype.name == "bfloat16":
            raise explained("conversion", "cuda_core", "NumPy's bfloat16 (ml_dtypes) has no DLPack export",
                            "cast to float32 first")
        host = smv.from_dlpack(array, stream_ptr=_NO_STREAM)
        if on_host:
            return host
        raise gpushare_error(
            "path_not_applicable",
            "cuda.core allocates device memory through a Device and a Stream: make the array with another "
            "framework on the GPU and view it (StridedMemoryView.from_dlpack)"
        )

    def host_view(self, obj: Any) -> Any:
        # np.asarray of a StridedMemoryView is a 0-d object array (it has no __array__): NumPy's
        # view is made from the view's DLPack export, as from_dlpack made the view.
        import numpy as np

        return np.from_dlpack(obj)

    def has_gpu(self) -> bool:
        try:
            return self.load().system.get_num_devices() > 0
        except Exception:  # no driver: cuda.core raises its own "not found" errors
            return False

    def describe_runtime(self, info: Any, module: Any) -> None:
        info.from_dlpack = True  # StridedMemoryView.from_dlpack / from_any_interface
        import numpy as np

        info.dlpack_export = probe_export(self._smv().from_dlpack(np.zeros(1), stream_ptr=_NO_STREAM))
        info.dlpack_export_source = "probed"
        info.notes.append("the DLPack C exchange API (__dlpack_c_exchange_api__) on StridedMemoryView")
        try:
            count = module.system.get_num_devices()
        except Exception as e:
            info.gpu_devices = []
            info.notes.append(f"no GPU: {type(e).__name__}")
        else:
            info.gpu_devices = [f"cuda:{i}" for i in range(count)]
