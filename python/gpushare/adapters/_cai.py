"""The dtype and ``__cuda_array_interface__`` helpers several adapters share: typestr codes,
DLPack (code, bits) of a NumPy dtype, compact strides, a TensorInfo from an interface, and an
interface gpushare makes for CUDA memory whose framework has none."""

from __future__ import annotations

from typing import Any

from gpushare import _native
from gpushare.exceptions import gpushare_error

TensorInfo = _native.share.TensorInfo

_TYPESTR_CODES = {"i": 0, "u": 1, "f": 2, "c": 5, "b": 6}

_EXTENDED_FLOATS = ("bfloat", "float8", "float4", "float6", "int4", "uint4", "int2", "uint2")


def _dtype_code_bits(dtype: Any) -> tuple[int, int] | tuple[()]:
    """DLPack (code, bits) of a NumPy dtype of a standard kind; () for ml_dtypes' extended types
    (bfloat16, float8, int4: their kind is "V" or their names say so), which go through DLPack."""
    code = _TYPESTR_CODES.get(dtype.kind)
    if code is None or dtype.name.startswith(_EXTENDED_FLOATS):
        return ()
    return (code, dtype.itemsize * 8)


def _native_compact_strides(shape: tuple[int, ...]) -> list[int]:
    strides, step = [], 1
    for extent in reversed(shape):
        strides.append(step)
        step *= max(int(extent), 1)
    return strides[::-1]


_DTYPE_TYPESTR = {"int8": "|i1", "int16": "<i2", "int32": "<i4", "int64": "<i8", "uint8": "|u1", "uint16": "<u2",
                  "uint32": "<u4", "uint64": "<u8", "float16": "<f2", "float32": "<f4", "float64": "<f8",
                  "complex64": "<c8", "complex128": "<c16", "bool": "|b1"}


class _CudaArrayView:
    """``__cuda_array_interface__`` for an array in CUDA memory whose framework has none
    (TensorFlow): what Numba, which imports nothing else, takes. It keeps the array alive, and
    names no stream: TensorFlow's export waited for the tensor's work (see _StreamFreeExport)."""

    __slots__ = ("__cuda_array_interface__", "_owner")

    def __init__(self, interface: dict, owner: Any):
        self.__cuda_array_interface__ = interface
        self._owner = owner

    @classmethod
    def of(cls, info: TensorInfo, owner: Any, framework: str) -> _CudaArrayView:
        if info.dlpack_device[0] != 2:
            raise gpushare_error(
                "path_not_applicable",
                f"__cuda_array_interface__ describes CUDA memory only (cuda_array_interface); this {framework} "
                f"tensor is on {info.device} in {'host' if info.dlpack_device[0] in (1, 3) else 'other'} memory"
            )
        typestr = _DTYPE_TYPESTR.get(info.dtype)
        if typestr is None:
            raise gpushare_error("path_not_applicable", f"__cuda_array_interface__ has no typestr for {info.dtype}")
        itemsize = int(typestr[2:])
        return cls(
            {
                "shape": tuple(info.shape),
                "strides": tuple(s * itemsize for s in info.strides),
                "typestr": typestr,
                # Writable, as TensorFlow's own DLPack export says (a legacy capsule has no flag):
                # PyTorch refuses a read-only interface outright, and gpushare warns separately
                # that the target can write to memory TensorFlow treats as immutable.
                "data": (info.data_ptr, False),
                "version": 3,
                "stream": None,
            },
            owner,
        )


def info_from_cai(cai: dict, framework: str, device: str) -> TensorInfo:
    """A TensorInfo from ``__cuda_array_interface__`` (through a capsule-free constructor)."""
    typestr = cai["typestr"]
    code = _TYPESTR_CODES.get(typestr[1])
    if code is None:
        raise gpushare_error("not_an_array", f"unsupported __cuda_array_interface__ typestr {typestr!r}")
    itemsize = int(typestr[2:])
    shape = tuple(cai["shape"])
    strides = cai.get("strides")
    strides_el = None if strides is None else tuple(s // itemsize for s in strides)
    ptr, readonly = cai["data"]
    device_id = int(device.rsplit(":", 1)[1]) if device.startswith("cuda:") else 0
    return _native.share.tensor_info_from_fields(
        framework, device, ptr, shape, strides_el, code, itemsize * 8, 2, device_id, readonly
    )


def capsule_over_interface(obj: Any, strides: Any, device: Any, framework: str) -> Any:
    """A legacy capsule over the memory ``obj.__cuda_array_interface__`` describes, made by gpushare
    for a framework without a DLPack export (Numba, PyCUDA): what TensorFlow, which imports only
    capsules, takes. ``strides`` (bytes) override the interface's where the array knows better;
    ``device()`` names the device when the driver cannot. The capsule keeps ``obj`` alive."""
    cai = obj.__cuda_array_interface__
    typestr = cai["typestr"]
    code = _TYPESTR_CODES.get(typestr[1])
    itemsize = int(typestr[2:])
    if code is None:
        raise gpushare_error("path_not_applicable", f"{framework}'s typestr {typestr!r} has no DLPack code")
    strides = strides or cai.get("strides")
    shape = tuple(cai["shape"])
    if strides is None:
        strides_el = _native_compact_strides(shape)
    else:
        if any(s % itemsize for s in strides):
            raise gpushare_error("path_not_applicable", "the array's strides are not whole elements, which DLPack cannot describe")
        strides_el = [s // itemsize for s in strides]
    ptr = int(cai["data"][0] or 0)
    # The capsule is gpushare's word, and its consumer (TensorFlow) places the tensor on the GPU it
    # names: the driver's ordinal of the memory, not the current device a framework's label comes
    # from (with JAX imported cuda:1 is current, and TensorFlow put cuda:0's memory on /GPU:1).
    attributes = _native.cuda.pointer_attributes(ptr) if ptr else None
    ordinal = (attributes or {}).get("device_ordinal")
    if ordinal is None:
        ordinal = int(device().rsplit(":", 1)[1])
    return _native.share.capsule_over(obj, ptr, list(shape), strides_el, code, itemsize * 8, 2, int(ordinal))
