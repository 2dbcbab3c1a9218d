"""One adapter per framework, behind one small interface.

An adapter knows how to recognise its framework's arrays *without importing the framework* (by the
module of the object's type and ``sys.modules``), how to export a DLPack capsule for inspection, and
how its framework imports from the DLPack protocol, from a legacy capsule, and from
``__cuda_array_interface__``. Nothing here imports a framework until an array of it, or a conversion
into it, is at hand.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import sys
from typing import Any, Callable, ClassVar

from gpushare import _native
from gpushare.exceptions import (
    ConversionError,
    FrameworkNotInstalledError,
    NotAnArrayError,
    PathNotApplicableError,
    UnknownFrameworkError,
)

TensorInfo = _native.TensorInfo

# Array types whose ``__dlpack__`` predates the ``max_version`` keyword (NumPy < 2.1, CuPy < 13.?,
# PyTorch < 2.4): found on the first TypeError that names the keyword and remembered, so that
# every later export of the type asks for the legacy capsule straight away.
_LEGACY_EXPORTERS: set[type] = set()


def versioned_capsule(obj: Any, legacy_export: Callable[[Any], Any] | None = None) -> Any:
    """``obj.__dlpack__(max_version=(1, 0))``: a versioned capsule (flags, READ_ONLY included)
    where the producer can make one; where its ``__dlpack__`` has no ``max_version``, a legacy
    capsule (DLPack's rule for consumers: retry without it), from ``legacy_export`` if given."""
    tp = type(obj)
    if tp not in _LEGACY_EXPORTERS:
        try:
            return obj.__dlpack__(max_version=(1, 0))
        except TypeError as e:
            if "max_version" not in str(e):  # a TypeError of the export itself, not of the call
                raise
            _LEGACY_EXPORTERS.add(tp)
    return obj.__dlpack__() if legacy_export is None else legacy_export(obj)


def exports_versioned(obj: Any) -> bool:
    """False once ``obj``'s type is known to export legacy capsules only."""
    return type(obj) not in _LEGACY_EXPORTERS


class Adapter:
    """How gpushare talks to one framework."""

    name: ClassVar[str]
    module: ClassVar[str]
    aliases: ClassVar[tuple[str, ...]] = ()
    # Type-module prefixes that identify this framework's arrays.
    type_modules: ClassVar[tuple[str, ...]] = ()
    # Arrays of this framework cannot be written (JAX, TensorFlow): reported as readonly.
    immutable: ClassVar[bool] = False
    # Whether the consumer accepts an object with __dlpack__ / a raw capsule.
    accepts_objects: ClassVar[bool] = True
    accepts_capsules: ClassVar[bool] = True

    _installed: bool | None = None

    # -- discovery -------------------------------------------------------------------------
    def installed(self) -> bool:
        if self._installed is None:
            self._installed = self.module in sys.modules or importlib.util.find_spec(self.module) is not None
        return self._installed

    def imported(self) -> bool:
        return self.module in sys.modules

    def load(self) -> Any:
        """Imports the framework (only when a conversion into it is asked for)."""
        mod = sys.modules.get(self.module)
        if mod is not None:
            return mod
        if not self.installed():
            raise FrameworkNotInstalledError(
                f"{self.name} is not installed in this Python ({sys.executable}); pip install {self.pip_name()}"
            )
        try:
            return importlib.import_module(self.module)
        except Exception as e:  # a broken install must not look like a missing one
            raise FrameworkNotInstalledError(f"{self.name} is installed but failed to import: {e}") from e

    def pip_name(self) -> str:
        return self.module

    _version: str | None = None

    def version(self) -> str | None:
        # A module's version does not change once imported; cached because predictions ask twice
        # per share.
        if self._version is None:
            mod = sys.modules.get(self.module)
            if mod is None:
                return None
            self._version = getattr(mod, "__version__", None)
        return self._version

    def owns_type(self, tp: type) -> bool:
        return tp.__module__.split(".")[0] in self.type_modules

    def is_array(self, obj: Any) -> bool:
        raise NotImplementedError

    # -- inspection ------------------------------------------------------------------------
    def device(self, obj: Any) -> str:
        return str(obj.device)

    def inspect_capsule(self, obj: Any) -> Any:
        """A capsule for inspection only (never consumed), versioned where the producer can."""
        return obj.__dlpack__()

    def inspect(self, obj: Any) -> TensorInfo:
        # The Rust core adds the CUDA driver's pointer attributes itself when a driver is present.
        return TensorInfo.from_capsule(self.inspect_capsule(obj), self.name, self.device(obj), self.immutable)

    def check_source(self, obj: Any) -> None:
        """Raises a ConversionError for sources this framework refuses to export (torch requires_grad)."""

    # -- conversion ------------------------------------------------------------------------
    def from_dlpack(self, obj: Any) -> Any:
        raise PathNotApplicableError(f"{self.name} has no from_dlpack for objects")

    def from_capsule(self, capsule: Any) -> Any:
        raise PathNotApplicableError(f"{self.name} does not import raw DLPack capsules")

    def to_capsule(self, obj: Any) -> Any:
        """A legacy ``"dltensor"`` capsule: the one kind every capsule consumer (TensorFlow) takes."""
        return obj.__dlpack__()

    def from_cai(self, obj: Any) -> Any:
        raise PathNotApplicableError(f"{self.name} does not import __cuda_array_interface__")

    # What the routes call: the framework's own functions where they take one array and the
    # framework is imported, so that a timing measures the framework and not a wrapper around it.
    def dlpack_importer(self) -> Callable[[Any], Any]:
        return self.from_dlpack

    def capsule_exporter(self) -> Callable[[Any], Any]:
        return self.to_capsule

    def capsule_importer(self) -> Callable[[Any], Any]:
        return self.from_capsule

    def synchronize(self, obj: Any) -> None:
        """Waits for work queued on the array's device (no-op on CPU)."""

    def current_stream(self, obj: Any) -> int | None:
        """The handle of the framework's current CUDA stream for the array's device, if it has one."""
        return None


class NumpyAdapter(Adapter):
    name = "numpy"
    module = "numpy"
    aliases = ("np",)
    type_modules = ("numpy",)
    accepts_capsules = False

    def is_array(self, obj: Any) -> bool:
        np = sys.modules.get("numpy")
        return np is not None and isinstance(obj, np.ndarray)

    def device(self, obj: Any) -> str:
        return "cpu"

    def inspect_capsule(self, obj: Any) -> Any:
        # Versioned so that READ_ONLY travels. NumPy before 2.1 exports legacy capsules only and
        # refuses a read-only array there ("Cannot export readonly array"): inspection and the
        # copy/shared paths only read, so they get the capsule of a writable alias of the same
        # memory, and inspect() takes the read-only flag from the array's own flags.
        return versioned_capsule(obj, _numpy_legacy_capsule)

    def inspect(self, obj: Any) -> TensorInfo:
        capsule = self.inspect_capsule(obj)
        # A legacy capsule has no READ_ONLY flag: the array's flags say it instead.
        readonly = not exports_versioned(obj) and not obj.flags.writeable
        return TensorInfo.from_capsule(capsule, self.name, "cpu", readonly)

    def from_dlpack(self, obj: Any) -> Any:
        return self.load().from_dlpack(obj)

    def dlpack_importer(self) -> Callable[[Any], Any]:
        return self.load().from_dlpack

    def from_cai(self, obj: Any) -> Any:
        raise PathNotApplicableError("NumPy cannot address GPU memory through __cuda_array_interface__")


class TorchAdapter(Adapter):
    name = "torch"
    module = "torch"
    aliases = ("pytorch", "pt")
    type_modules = ("torch",)

    def is_array(self, obj: Any) -> bool:
        torch = sys.modules.get("torch")
        return torch is not None and isinstance(obj, torch.Tensor)

    def inspect_capsule(self, obj: Any) -> Any:
        if obj.requires_grad:
            obj = obj.detach()  # inspection only: the address is the same
        return versioned_capsule(obj)

    def inspect(self, obj: Any) -> TensorInfo:
        # PyTorch ships the DLPack 1.3 C exchange API: one C call fills a DLTensor, ~20x cheaper than
        # __dlpack__. It refuses tensors that require grad; those go through a detached capsule.
        info = _native.inspect_torch(obj)
        return info if info is not None else super().inspect(obj)

    def check_source(self, obj: Any) -> None:
        if obj.requires_grad:
            err = ConversionError(
                "torch tensor requires grad: DLPack cannot export it (\"Can't export tensors that require "
                "gradient\"). Fix: share x.detach(), which views the same memory"
            )
            err.reason = "tensor requires grad"
            err.fix = "x.detach()"
            raise err

    def from_dlpack(self, obj: Any) -> Any:
        return self.load().from_dlpack(obj)

    def from_capsule(self, capsule: Any) -> Any:
        return self.load().utils.dlpack.from_dlpack(capsule)

    def to_capsule(self, obj: Any) -> Any:
        return self.load().utils.dlpack.to_dlpack(obj)

    def dlpack_importer(self) -> Callable[[Any], Any]:
        return self.load().from_dlpack

    def capsule_exporter(self) -> Callable[[Any], Any]:
        return self.load().utils.dlpack.to_dlpack

    def capsule_importer(self) -> Callable[[Any], Any]:
        return self.load().utils.dlpack.from_dlpack

    def from_cai(self, obj: Any) -> Any:
        torch = self.load()
        return torch.as_tensor(obj, device="cuda")

    def synchronize(self, obj: Any) -> None:
        if obj.is_cuda:
            self.load().cuda.synchronize(obj.device)

    def current_stream(self, obj: Any) -> int | None:
        return int(self.load().cuda.current_stream(obj.device).cuda_stream) if obj.is_cuda else None


class JaxAdapter(Adapter):
    name = "jax"
    module = "jax"
    type_modules = ("jax", "jaxlib")
    immutable = True
    accepts_capsules = False  # removed in JAX 0.7.2

    def is_array(self, obj: Any) -> bool:
        jax = sys.modules.get("jax")
        return jax is not None and isinstance(obj, jax.Array)

    def device(self, obj: Any) -> str:
        devices = obj.devices()
        return repr(next(iter(devices))) if len(devices) == 1 else repr(obj.sharding)

    # JAX exports only legacy capsules, and __dlpack__ costs ~3 µs; the same facts are attributes
    # of the array, which the Rust core reads (`_native.inspect_jax`, src/python/plan.rs). It asks
    # the three methods below once per device, layout and dtype; anything they decline (sharded
    # arrays, tiled or sub-byte layouts, other platforms, extended dtypes) goes through DLPack.
    _platform_codes: ClassVar[dict[str, int]] = {"cpu": 1, "gpu": 2, "cuda": 2}

    def inspect(self, obj: Any) -> TensorInfo:
        info = _native.inspect_jax(obj, self)
        return info if info is not None else super().inspect(obj)

    def _describe_device(self, device: Any) -> tuple[str, int, int] | None:
        """``(words, DLPack device type, id)`` of a device the attribute route describes."""
        code = self._platform_codes.get(device.platform)
        return None if code is None else (repr(device), code, device.id)

    @staticmethod
    def _layout_order(obj: Any) -> tuple[int, ...] | None:
        """The layout's major-to-minor order; () for row-major; None for tiled or sub-byte layouts."""
        layout = obj.format.layout
        if layout.tiling or layout.sub_byte_element_size_in_bits:
            return None
        order = tuple(layout.major_to_minor)
        return () if order == tuple(range(len(order))) else order

    @staticmethod
    def _dtype_code_bits(dtype: Any) -> tuple[int, int] | tuple[()]:
        return _dtype_code_bits(dtype)

    def from_dlpack(self, obj: Any) -> Any:
        return self.dlpack_importer()(obj)

    def dlpack_importer(self) -> Callable[[Any], Any]:
        self.load()
        import jax.dlpack

        return jax.dlpack.from_dlpack

    def from_capsule(self, capsule: Any) -> Any:
        raise PathNotApplicableError(
            "JAX no longer imports raw capsules (removed in 0.7.2); use path='dlpack'"
        )

    def from_cai(self, obj: Any) -> Any:
        return self.load().numpy.asarray(obj)

    def x64_enabled(self) -> bool:
        jax = sys.modules.get("jax")
        return bool(jax is not None and jax.config.jax_enable_x64)

    def synchronize(self, obj: Any) -> None:
        obj.block_until_ready()


class TensorFlowAdapter(Adapter):
    name = "tf"
    module = "tensorflow"
    aliases = ("tensorflow",)
    type_modules = ("tensorflow", "keras")
    immutable = True
    accepts_objects = False  # tf.experimental.dlpack.from_dlpack takes capsules only

    def pip_name(self) -> str:
        return "tensorflow (or tensorflow-cpu)"

    def is_array(self, obj: Any) -> bool:
        tf = sys.modules.get("tensorflow")
        return tf is not None and isinstance(obj, tf.Tensor) and hasattr(obj, "numpy")

    def inspect_capsule(self, obj: Any) -> Any:
        return self.to_capsule(obj)

    # tf.experimental.dlpack's functions, looked up once: both sit on every TensorFlow handoff.
    _to_dlpack: ClassVar[Any] = None
    _from_dlpack: ClassVar[Any] = None

    def _dlpack_functions(self) -> tuple[Any, Any]:
        if TensorFlowAdapter._to_dlpack is None:
            dlpack = self.load().experimental.dlpack
            TensorFlowAdapter._from_dlpack = dlpack.from_dlpack
            TensorFlowAdapter._to_dlpack = dlpack.to_dlpack
        return TensorFlowAdapter._to_dlpack, TensorFlowAdapter._from_dlpack

    def to_capsule(self, obj: Any) -> Any:
        return (TensorFlowAdapter._to_dlpack or self._dlpack_functions()[0])(obj)

    def from_dlpack(self, obj: Any) -> Any:
        raise PathNotApplicableError(
            "TensorFlow's from_dlpack takes legacy capsules only; use path='capsule' (auto does)"
        )

    def from_capsule(self, capsule: Any) -> Any:
        return (TensorFlowAdapter._from_dlpack or self._dlpack_functions()[1])(capsule)

    def capsule_exporter(self) -> Callable[[Any], Any]:
        return self._dlpack_functions()[0]

    def capsule_importer(self) -> Callable[[Any], Any]:
        return self._dlpack_functions()[1]


class CupyAdapter(Adapter):
    name = "cupy"
    module = "cupy"
    aliases = ("cp",)
    type_modules = ("cupy",)

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
        return obj.toDlpack()

    def from_cai(self, obj: Any) -> Any:
        return self.load().asarray(obj)

    def synchronize(self, obj: Any) -> None:
        self.load().cuda.runtime.deviceSynchronize()

    def current_stream(self, obj: Any) -> int | None:
        return int(self.load().cuda.get_current_stream().ptr)


class NumbaAdapter(Adapter):
    """Numba-CUDA device arrays: no ``__dlpack__``, only ``__cuda_array_interface__``."""

    name = "numba"
    module = "numba"
    type_modules = ("numba", "numba_cuda")
    accepts_objects = False
    accepts_capsules = False

    def is_array(self, obj: Any) -> bool:
        return "numba" in sys.modules and hasattr(obj, "__cuda_array_interface__") and self.owns_type(type(obj))

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
        raise PathNotApplicableError("Numba device arrays have no __dlpack__; use path='cai'")

    def synchronize(self, obj: Any) -> None:
        self.load().cuda.synchronize()


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


_TYPESTR_CODES = {"i": 0, "u": 1, "f": 2, "c": 5, "b": 6}


def _dtype_code_bits(dtype: Any) -> tuple[int, int] | tuple[()]:
    """DLPack (code, bits) of a NumPy dtype of a standard kind; () for ml_dtypes' extended types
    (bfloat16, float8, int4: their kind is "V" or their names say so), which go through DLPack."""
    code = _TYPESTR_CODES.get(dtype.kind)
    if code is None or dtype.name.startswith(("bfloat", "float8", "float4", "int4", "uint4", "int2", "uint2")):
        return ()
    return (code, dtype.itemsize * 8)


def info_from_cai(cai: dict, framework: str, device: str) -> TensorInfo:
    """A TensorInfo from ``__cuda_array_interface__`` (through a capsule-free constructor)."""
    typestr = cai["typestr"]
    code = _TYPESTR_CODES.get(typestr[1])
    if code is None:
        raise NotAnArrayError(f"unsupported __cuda_array_interface__ typestr {typestr!r}")
    itemsize = int(typestr[2:])
    shape = tuple(cai["shape"])
    strides = cai.get("strides")
    strides_el = None if strides is None else tuple(s // itemsize for s in strides)
    ptr, readonly = cai["data"]
    device_id = int(device.rsplit(":", 1)[1]) if device.startswith("cuda:") else 0
    return _native.tensor_info_from_fields(
        framework, device, ptr, shape, strides_el, code, itemsize * 8, 2, device_id, readonly
    )


ADAPTERS: dict[str, Adapter] = {
    a.name: a
    for a in (TorchAdapter(), TensorFlowAdapter(), JaxAdapter(), NumpyAdapter(), CupyAdapter(), NumbaAdapter())
}
_NAMES: dict[str, Adapter] = {}
for _a in ADAPTERS.values():
    _NAMES[_a.name] = _a
    for _alias in _a.aliases:
        _NAMES[_alias] = _a

_BY_TYPE: dict[type, Adapter] = {}


def framework(name: str) -> Adapter:
    """The adapter for a framework name or alias; suggests the closest name when unknown."""
    if isinstance(name, str):
        adapter = _NAMES.get(name)  # the common case, exact, first: this is on every share's path
        if adapter is not None:
            return adapter
    adapter = _NAMES.get(name.strip().lower()) if isinstance(name, str) else None
    if adapter is None:
        close = difflib.get_close_matches(str(name).lower(), list(_NAMES), n=1, cutoff=0.4)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        raise UnknownFrameworkError(
            f"unknown framework {name!r}{hint} Known: {', '.join(ADAPTERS)}"
        )
    return adapter


def adapter_of(obj: Any) -> Adapter:
    """The adapter of an array, found from its type without importing any framework."""
    tp = type(obj)
    adapter = _BY_TYPE.get(tp)
    if adapter is not None:
        return adapter
    for candidate in ADAPTERS.values():
        if candidate.owns_type(tp) and candidate.is_array(obj):
            _BY_TYPE[tp] = candidate
            return candidate
    raise NotAnArrayError(
        f"a {tp.__module__}.{tp.__qualname__} is not an array of a known framework "
        f"({', '.join(ADAPTERS)})"
    )


def adapter_for(obj: Any, expected: Adapter | None) -> Adapter:
    """The adapter of ``obj``, checked against the framework the user named."""
    try:
        adapter = adapter_of(obj)
    except NotAnArrayError:
        if expected is None:
            raise
        raise NotAnArrayError(
            f"expected a {expected.name} array, got {type(obj).__module__}.{type(obj).__qualname__}"
        ) from None
    if expected is not None and adapter is not expected:
        raise NotAnArrayError(f"expected a {expected.name} array, got a {adapter.name} array")
    return adapter


Route = Callable[[Any], Any]
