"""PaddlePaddle: versioned ``__dlpack__``, ``paddle.from_dlpack``, legacy capsules through
``paddle.utils.dlpack``, gradients that block an export, and bfloat16 handed out as raw bits."""

from __future__ import annotations

import sys
from typing import Any, Callable, ClassVar

from gpushare import _native
from gpushare.adapters.base import Adapter, explained, major_version, versioned_capsule


class PaddleAdapter(Adapter):
    """PaddlePaddle tensors: ``__dlpack__`` (versioned), ``paddle.from_dlpack`` and legacy capsules
    through ``paddle.utils.dlpack``."""

    name = "paddle"
    module = "paddle"
    aliases = ("paddlepaddle", "pd")
    crashes_beside = ("tensorflow",)  # PaddlePaddle 3.3 with TensorFlow 2.20
    type_modules = ("paddle",)
    distribution_names = ("paddlepaddle-gpu", "paddlepaddle")
    tracks_allocator = True

    def pip_name(self) -> str:
        # What to install: the distribution that provides the module, and the variant a GPU needs.
        return (
            "paddlepaddle (the project called paddle is another one; for an NVIDIA GPU, paddlepaddle-gpu "
            "from https://www.paddlepaddle.org.cn/install/quick)"
        )

    def is_array(self, obj: Any) -> bool:
        paddle = sys.modules.get("paddle")
        return paddle is not None and isinstance(obj, paddle.Tensor)

    def device(self, obj: Any) -> str:
        return str(obj.place)

    def inspect_capsule(self, obj: Any) -> Any:
        if not obj.stop_gradient:
            obj = obj.detach()  # inspection only: the address is the same
        return versioned_capsule(obj)

    def inspect(self, obj: Any) -> Any:
        info = super().inspect(obj)
        # paddle.from_dlpack takes DLPack's uint16 as its bfloat16 (it stores bfloat16 as uint16)
        # and exports the tensor as uint16 again: the description names Paddle's own label, so that
        # a share into Paddle says the dtype is not the source's (the rules' words: targets.rs).
        if info.dtype == "uint16" and str(obj.dtype).endswith("bfloat16"):
            kind, ordinal = info.dlpack_device
            info = _native.share.tensor_info_from_fields(
                self.name, info.device, info.data_ptr + info.byte_offset, list(info.shape), list(info.strides),
                4, 16, kind, ordinal, info.readonly,  # DLPack's kDLBfloat, 16 bits
            )
        return info

    def detached(self, obj: Any) -> Any:
        return obj if obj.stop_gradient else obj.detach()

    def check_source(self, obj: Any, target: str | None = None, path: str | None = None) -> None:
        if not obj.stop_gradient:
            raise explained("conversion", "paddle's DLPack export", "tensor requires gradients (stop_gradient=False)", "x.detach()")

    def from_dlpack(self, obj: Any) -> Any:
        return self.load().from_dlpack(obj)

    def dlpack_importer(self) -> Callable[[Any], Any]:
        return self.load().from_dlpack

    def from_capsule(self, capsule: Any) -> Any:
        return self.load().utils.dlpack.from_dlpack(capsule)

    def to_capsule(self, obj: Any) -> Any:
        return self.load().utils.dlpack.to_dlpack(obj)

    def capsule_exporter(self) -> Callable[[Any], Any]:
        return self.load().utils.dlpack.to_dlpack

    def capsule_importer(self) -> Callable[[Any], Any]:
        return self.load().utils.dlpack.from_dlpack

    def synchronize(self, obj: Any) -> None:
        if "gpu" in str(obj.place).lower():
            self.load().device.synchronize()

    def to_numpy(self, obj: Any) -> Any:
        out = obj.numpy()
        if self._holds_bfloat16(obj):
            # Paddle hands bfloat16 out as its raw bits in uint16 (host-route cells of the conformance
            # matrix then carried 16320 for 1.5): the bits viewed as ml_dtypes' bfloat16 are the values.
            out = out.view(self._bfloat16())
        return out

    def host_view(self, obj: Any) -> Any:
        import numpy as np

        view = np.asarray(obj)
        # A bfloat16 tensor reaches NumPy as its raw bits in uint16: the shm path would hand the
        # worker integers. Its bits are viewed as ml_dtypes' bfloat16 (which a worker unpickles
        # whole), as to_numpy does. A uint16 tensor Paddle labels bfloat16 (its DLPack import of
        # uint16) exports as uint16 and holds uint16 values: it stays uint16.
        if view.dtype == np.uint16 and self._holds_bfloat16(obj):
            return view.view(self._bfloat16())
        return view

    def _holds_bfloat16(self, obj: Any) -> bool:
        """Whether ``obj`` holds bfloat16 values: labelled so, and exported so (a uint16 array that
        paddle.from_dlpack labelled bfloat16 exports as uint16 and holds uint16 values)."""
        return str(obj.dtype).endswith("bfloat16") and Adapter.inspect(self, obj).dtype == "bfloat16"

    @staticmethod
    def _bfloat16() -> Any:
        try:
            import ml_dtypes
        except ImportError:
            raise explained("conversion", "paddle", "NumPy has no bfloat16 without ml_dtypes, and "
                            "Paddle gives a bfloat16 tensor's raw bits as uint16", "pip install ml_dtypes, "
                            "or cast to float32 first (x.astype('float32'))") from None
        return ml_dtypes.bfloat16

    # NumPy dtypes paddle.to_tensor cannot take as themselves: it reads uint16 as bfloat16 bits (the
    # values change) and refuses uint32 and uint64.
    _NO_TENSOR_DTYPES: ClassVar[tuple[str, ...]] = ("uint16", "uint32", "uint64")

    def from_numpy(self, array: Any, on_host: bool, ordinal: int) -> Any:
        paddle = self.load()
        name = array.dtype.name
        if name in self._NO_TENSOR_DTYPES:
            raise explained(
                "conversion", "paddle",
                f"paddle has no {name} tensors (paddle.to_tensor reads uint16 as bfloat16 bits and refuses uint32/uint64)",
                "cast to a signed integer type first, e.g. x.astype(numpy.int64)",
            )
        if name == "bfloat16":
            array = array.view("uint16")  # ml_dtypes' bfloat16: Paddle takes its bits as uint16
        return paddle.to_tensor(array, place=paddle.CPUPlace() if on_host else paddle.CUDAPlace(ordinal))

    def has_gpu(self) -> bool:
        return bool(self.load().device.is_compiled_with_cuda() and self.load().device.cuda.device_count())

    def move(self, obj: Any, on_host: bool, ordinal: int) -> Any:
        # Tensor.cpu() / .cuda(n): Paddle's own move (a tensor already there keeps its memory);
        # detached first, as torch's move is, so a tensor that requires gradients moves too.
        if not obj.stop_gradient:
            obj = obj.detach()
        return obj.cpu() if on_host else obj.cuda(ordinal)

    def describe_runtime(self, info: Any, module: Any) -> None:
        info.from_dlpack = hasattr(module, "from_dlpack") or hasattr(getattr(module, "utils", None), "dlpack")
        info.dlpack_export = "versioned" if major_version(info.version) >= 3 else "legacy"
        info.dlpack_export_source = "documented"
        if module.device.is_compiled_with_cuda():
            info.gpu_devices = [f"gpu:{i}" for i in range(module.device.cuda.device_count())]
        else:
            info.gpu_devices = []

    def allocator_memory(self, ordinal: int) -> dict[str, int] | None:
        paddle = sys.modules.get("paddle")
        if paddle is None or not paddle.device.is_compiled_with_cuda():
            return None
        if ordinal >= paddle.device.cuda.device_count():
            return None
        return {
            "allocated": int(paddle.device.cuda.memory_allocated(ordinal)),
            "reserved": int(paddle.device.cuda.memory_reserved(ordinal)),
        }

