"""NumPy: host memory only; versioned capsules from 2.1, legacy ones (and no read-only export)
before."""

from __future__ import annotations

import sys
from typing import Any, Callable

from gpushare.adapters._cai import _EXTENDED_FLOATS
from gpushare.adapters.base import Adapter, TensorInfo, explained, exports_versioned, probe_export, versioned_capsule
from gpushare.exceptions import gpushare_error


class NumpyAdapter(Adapter):
    name = "numpy"
    calibrate_on = ("cpu",)
    import_calls = {"dlpack": "np.from_dlpack({x})"}
    to_numpy_call = "{x}"
    from_numpy_call = "{a}"
    module = "numpy"
    aliases = ("np",)
    type_modules = ("numpy",)
    accepts_capsules = False
    exports_cai = False
    legacy_capsule_refuses_readonly = True  # "Cannot export readonly array since signalling readonly is unsupported"
    addresses_device = False
    copy_by_producer = True  # from_dlpack(x, device=, copy=True) asks x.__dlpack__(copy=True)
    worker_receives = ("shm",)
    # inspect() below is the versioned capsule read with the device "cpu" wherever NumPy makes one
    # (2.1 and later); what it does beyond that (legacy capsules, read-only flags of old NumPy,
    # dtypes DLPack lacks) is where the capsule cannot be read, which the core hands back to it.
    describe_by = "capsule"

    def is_array(self, obj: Any) -> bool:
        np = sys.modules.get("numpy")
        return np is not None and isinstance(obj, np.ndarray)

    def device(self, obj: Any) -> str:
        return "cpu"

    def readonly(self, obj: Any) -> bool:
        return not obj.flags.writeable

    def inspect_capsule(self, obj: Any) -> Any:
        # Versioned so that READ_ONLY travels. NumPy before 2.1 exports legacy capsules only and
        # refuses a read-only array there ("Cannot export readonly array"): inspection and the
        # copy/shared paths only read, so they get the capsule of a writable alias of the same
        # memory, and inspect() takes the read-only flag from the array's own flags.
        return versioned_capsule(obj, _numpy_legacy_capsule)

    def inspect(self, obj: Any) -> TensorInfo:
        try:
            capsule = self.inspect_capsule(obj)
        except (BufferError, TypeError) as e:
            if obj.dtype.kind in "biufc":
                raise
            raise _numpy_dtype_refusal(obj.dtype, f"{type(e).__name__}: {e}") from e
        # A legacy capsule has no READ_ONLY flag: the array's flags say it instead.
        readonly = not exports_versioned(obj) and not obj.flags.writeable
        return TensorInfo.from_capsule(capsule, self.name, "cpu", readonly)

    def described_through_its_memory(self, obj: Any) -> dict | None:
        # A dtype NumPy cannot export through DLPack (ml_dtypes' bfloat16, float8, int4, a
        # structured or byte-swapped dtype: what `shm` hands a worker): an unsigned-integer view
        # of the same strides where one of the item's width exists, else a view of its bytes.
        np = self.load()
        size = obj.dtype.itemsize
        try:
            storage = obj.view(f"u{size}") if size in (1, 2, 4, 8) else obj.view(np.uint8)
        except ValueError as e:  # bytes of a 0-d array, or of a last axis that is not contiguous
            raise gpushare_error("not_an_array", f"numpy: an array of dtype {obj.dtype} cannot be described through a "
                                                 f"view of its memory: {e}") from None
        report = self.inspect(storage).to_dict()
        report.update(dtype=str(obj.dtype), shape=list(obj.shape), strides=[s // size for s in obj.strides])
        return report

    def from_dlpack(self, obj: Any) -> Any:
        return self.load().from_dlpack(obj)

    def dlpack_importer(self) -> Callable[[Any], Any]:
        return self.load().from_dlpack

    def from_cai(self, obj: Any) -> Any:
        raise gpushare_error("path_not_applicable", "NumPy cannot address GPU memory through __cuda_array_interface__")

    def from_numpy(self, array: Any, on_host: bool, ordinal: int) -> Any:
        if not on_host:
            raise ValueError("NumPy arrays live on the host: use --device cpu")
        return array  # host memory is where NumPy lives

    def from_dlpack_on(self, obj: Any, on_host: bool, ordinal: int) -> Any:
        if not on_host:
            raise gpushare_error("path_not_applicable", "NumPy arrays live on the host: NumPy cannot take an array onto a GPU")
        return self.load().from_dlpack(obj, device="cpu", copy=True)

    def move(self, obj: Any, on_host: bool, ordinal: int) -> Any:
        if not on_host:
            raise gpushare_error("path_not_applicable", "NumPy arrays live on the host: move them with the target framework")
        return self.load().array(obj, copy=True)

    def describe_runtime(self, info: Any, module: Any) -> None:
        info.from_dlpack = hasattr(module, "from_dlpack")
        info.dlpack_export, info.dlpack_export_source = probe_export(module.zeros(1)), "probed"
        info.gpu_devices = []
        info.notes.append("host memory only")

class _WritableInterface:
    """The ``__array_interface__`` of an array with its read-only bit cleared; holds the array."""

    __slots__ = ("base", "__array_interface__")

    def __init__(self, array: Any):
        self.base = array  # keeps the memory alive as long as the alias (and its capsule) lives
        interface = dict(array.__array_interface__)
        interface["data"] = (interface["data"][0], False)
        self.__array_interface__ = interface


def _numpy_legacy_capsule(array: Any) -> Any:
    """A legacy capsule of a NumPy array, read-only ones included (for reading only: NumPy before
    2.1 has no versioned export and will not put a read-only array in a legacy capsule). The
    capsule views the same memory through a writable alias; gpushare never writes through it."""
    if array.flags.writeable:
        return array.__dlpack__()
    np = sys.modules["numpy"]
    return np.asarray(_WritableInterface(array)).__dlpack__()



def _numpy_dtype_refusal(dtype: Any, framework_error: str) -> Exception:
    """Why NumPy cannot export an array of ``dtype`` through DLPack, which carries only booleans,
    integers, floats and complex numbers, in words that name the dtype."""
    kind, name = dtype.kind, str(dtype)
    if dtype.names:
        reason = f"a structured array (dtype {name}) has named fields; DLPack describes one numeric dtype per array"
        fix = "share one field at a time (x['field'] views it), or numpy.lib.recfunctions.structured_to_unstructured(x)"
    elif kind == "O":
        reason = "an object array holds pointers to Python objects, not numbers; DLPack cannot describe it"
        fix = "convert it to a numeric dtype first, e.g. x.astype(numpy.float64)"
    elif kind in "US":
        reason = f"a string array (dtype {name}) holds characters, not numbers; DLPack has no string dtype"
        fix = "encode it as numbers first (codes from numpy.unique(x, return_inverse=True), or x.view(numpy.uint8) for bytes)"
    elif kind in "Mm":
        reason = f"a {dtype.type.__name__} array (dtype {name}) holds dates or durations; DLPack has no date or time dtype"
        fix = f"share its integer counts of {numpy_unit(dtype)}: x.view(numpy.int64) views the same memory"
    elif name.startswith(_EXTENDED_FLOATS):
        reason = f"NumPy cannot export ml_dtypes' {name} through DLPack"
        fix = "cast to float32 first"
    else:
        reason = f"dtype {name} has no DLPack code; DLPack carries only booleans, integers, floats and complex numbers"
        fix = "cast to a numeric dtype first"
    return explained("conversion", "numpy", reason, fix, framework_error)


def numpy_unit(dtype: Any) -> str:
    """The unit of a datetime64/timedelta64 dtype in words ("s", "ns", …; "generic" when unset)."""
    np = sys.modules["numpy"]
    unit, count = np.datetime_data(dtype)
    return unit if count == 1 else f"{count}{unit}"
