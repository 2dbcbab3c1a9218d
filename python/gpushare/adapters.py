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
import os
import sys
from typing import Any, Callable, ClassVar

from gpushare import _native
from gpushare.exceptions import (
    ConversionError,
    GpushareError,
    FrameworkNotInstalledError,
    NotAnArrayError,
    PathNotApplicableError,
    UnknownFrameworkError,
    UnsafeInputError,
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


def explained(cls: type, framework: str, reason: str, fix: str, framework_error: str | None = None) -> Exception:
    """One of gpushare's errors with ``.reason`` and ``.fix``, raised by an adapter for an input
    its framework cannot take; ``framework_error`` keeps the framework's own words, if it said any."""
    err = cls(f"{framework}: {reason}. Fix: {fix}")
    err.reason, err.fix = reason, fix
    if framework_error is not None:
        err.framework_error = framework_error
    return err


def exports_versioned(obj: Any) -> bool:
    """False once ``obj``'s type is known to export legacy capsules only."""
    return type(obj) not in _LEGACY_EXPORTERS


#: DLPack device types whose memory the host addresses (CPU, CUDA host, ROCm host, CUDA managed).
HOST_DEVICE_TYPES = (1, 3, 11, 13)


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
    # Whether this framework's __dlpack__ takes the consumer's stream (DLPack's way of ordering the
    # two sides' work), and whether its import passes one. TensorFlow does neither: its export
    # refuses any stream and its capsule import asks for none, so the routes order the work
    # themselves (paths.py) and say how in the stream report.
    export_takes_stream: ClassVar[bool] = True
    import_takes_stream: ClassVar[bool] = True
    # Whether its import can queue device work that fails later, when waited on (JAX narrows a
    # 64-bit buffer by a kernel without x64, and a misaligned one fails only then): a share into it
    # waits for a result that is not the source's bytes as they are (a copy, or a changed dtype)
    # before reporting it. Other imports view or fail at once, so a share into them never waits:
    # waiting would block on every kernel the user has queued on the device.
    import_settles_later: ClassVar[bool] = False
    # Whether its inspect() is no more than its versioned DLPack capsule read with the device in
    # DLPack's words ("cpu", "cuda:0") for a mutable array, wherever such a capsule can be made:
    # the Rust core then reads that capsule itself, without calling inspect() (a microsecond or two
    # of Python per share), and calls inspect() only where it cannot (no max_version, an export
    # that fails, memory other than host or CUDA device). Leave False for any adapter whose
    # inspect() or device() says more than the capsule for an array that exports one.
    describes_by_capsule: ClassVar[bool] = False

    # Whether its arrays have __dlpack__ (Numba's have none) and can expose
    # __cuda_array_interface__ (NumPy's and TensorFlow's never do), and whether it imports that
    # interface (from_cai): the routes (paths.py) decide from these, never from the name.
    exports_dlpack: ClassVar[bool] = True
    exports_cai: ClassVar[bool] = True
    # Whether gpushare describes its CUDA arrays by an interface of its own where the framework has
    # none (cuda_array_view): TensorFlow's, for Numba.
    cai_view: ClassVar[bool] = False
    # Across processes (gpushare.processes): the process paths a worker can hand this framework's
    # arrays to (ipc: device memory by CUDA IPC; shm: host memory), the paths this framework's own
    # library implements (torch.multiprocessing, torch.distributed), and the modules those need.
    worker_receives: ClassVar[tuple[str, ...]] = ()
    process_paths: ClassVar[tuple[str, ...]] = ()
    process_modules: ClassVar[tuple[str, ...]] = ()
    imports_cai: ClassVar[bool] = False
    # Whether its arrays can live in host memory (CuPy's and Numba's live on a GPU only): the CPU
    # conformance matrix runs every framework that says so.
    host_arrays: ClassVar[bool] = True
    # Whether it can hold arrays in device memory (NumPy's live on the host only): `auto` takes the
    # host route from device memory into a framework that cannot (src/paths.rs).
    addresses_device: ClassVar[bool] = True
    # Whether its from_dlpack(x, device=…, copy=True) passes copy=True to the producer's
    # __dlpack__ (the producer makes the copy), rather than copying what a plain export gave it.
    copy_by_producer: ClassVar[bool] = False

    # Modules that crash the process (SIGSEGV) when imported into it beside this framework: gpushare
    # never imports one while the other is loaded, and says why.
    crashes_beside: ClassVar[tuple[str, ...]] = ()
    # Whether the framework's native libraries write banners to the process's stderr (fd 2) when it
    # starts, which %gpuinfo --import and `gpushare doctor --import` keep out of the report.
    noisy_start: ClassVar[bool] = False

    _installed: bool | None = None

    def import_conflict(self) -> str | None:
        """Why importing this framework here would crash the process, or None."""
        loaded = [m for m in self.crashes_beside if m in sys.modules]
        if not loaded or self.module in sys.modules:
            return None
        return (
            f"{self.name} is not imported: {self.module} and {loaded[0]} crash (SIGSEGV) when both are "
            f"imported into one process; use {self.name} in another kernel or process"
        )

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
        # A module another thread is still importing is in sys.modules half-built ("partially
        # initialized module 'torch' has no attribute ..."): import_module waits for that import.
        if mod is not None and not getattr(getattr(mod, "__spec__", None), "_initializing", False):
            return mod
        if not self.installed():
            raise FrameworkNotInstalledError(
                f"{self.name} is not installed in this Python ({sys.executable}); pip install {self.pip_name()}"
            )
        conflict = self.import_conflict()
        if conflict is not None:
            raise FrameworkNotInstalledError(conflict)
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

    def copy_source(self, obj: Any) -> Any:
        """What gpushare's own copies (``copy``, ``pinned``, ``p2p``) read the array's layout from:
        the array itself where its type has DLPack's C exchange API (one C call, without the stream
        handshake of ``__dlpack__``: the copy is queued on the framework's current stream, which
        orders it), else an inspection capsule."""
        if getattr(type(obj), "__dlpack_c_exchange_api__", None) is not None:
            return obj
        return self.inspect_capsule(obj)

    def inspect(self, obj: Any) -> TensorInfo:
        # The Rust core adds the CUDA driver's pointer attributes itself when a driver is present.
        return TensorInfo.from_capsule(self.inspect_capsule(obj), self.name, self.device(obj), self.immutable)

    def check_source(self, obj: Any) -> None:
        """Raises a ConversionError for sources this framework refuses to export (torch requires_grad)."""

    def check_view_bits(self, obj: Any) -> None:
        """Raises for a lazy view whose values live partly in a bit on the array (PyTorch's conjugate
        and negative bits): no handoff by memory carries the bit, one-process or across processes."""

    def check_copying_export(self, obj: Any) -> None:
        """``check_source`` for an export asked for a copy (DLPack's ``copy=True``): what the
        framework still refuses then (a copy may resolve a lazy view)."""
        self.check_source(obj)

    def in_device_memory(self, obj: Any) -> bool:
        """Whether ``obj`` lies in memory the host cannot address (``auto`` asks it of every share
        into a framework that cannot address device memory, so it must be cheap): DLPack's
        ``__dlpack_device__``, else the array's description."""
        where = getattr(obj, "__dlpack_device__", None)
        kind = where()[0] if where is not None else self.inspect(obj).dlpack_device[0]
        return int(kind) not in HOST_DEVICE_TYPES

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

    def data_pointer(self, obj: Any) -> int:
        """The device address of an array that came through ``from_cai``."""
        return int(obj.__cuda_array_interface__["data"][0])

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

    def stream_free_export(self, obj: Any) -> Any:
        """What a consumer's ``from_dlpack`` gets when this framework's ``__dlpack__`` refuses
        streams (``export_takes_stream`` False): an object whose export takes none."""
        return obj

    def from_cai_on(self, obj: Any, ordinal: int) -> Any:
        """``from_cai`` with CUDA device ``ordinal`` current, where the framework places what it
        imports by the current device."""
        return self.from_cai(obj)

    def cuda_array_view(self, obj: Any) -> Any:
        """An object with ``__cuda_array_interface__`` for the array: the array itself where the
        framework exposes the interface."""
        return obj

    # -- facts the prediction rules read (verdicts.py hands them to the Rust Predictor) ------
    def per_thread_default_stream(self) -> bool:
        """As a target: whether it asks producers for the per-thread default stream (stream=2)."""
        return False

    def x64_reader(self) -> Callable[[], bool] | None:
        """As a target: a function that says whether 64-bit dtypes are kept (JAX's x64 flag);
        None where the framework keeps them always."""
        return None

    def current_device_reader(self) -> Callable[[], int | None] | None:
        """As a source: a function giving the CUDA device it exports from, where it exports only
        from its current device (PyTorch); None where any device's arrays export."""
        return None

    # -- the host route and the lab's arrays ----------------------------------------------
    def to_numpy(self, obj: Any) -> Any:
        """What users write to get a NumPy array (``.cpu().numpy()``, ``.get()``, …)."""
        import numpy as np

        return np.asarray(obj)

    def from_numpy(self, array: Any, on_host: bool, ordinal: int) -> Any:
        """This framework's array from a NumPy array, on the host or CUDA device ``ordinal``."""
        raise PathNotApplicableError(f"{self.name} cannot make an array from NumPy here")

    def ones(self, n: int, dtype: str, on_host: bool, ordinal: int) -> Any:
        """A 1-d array of ``n`` ones of ``dtype`` (the lab's source arrays)."""
        import numpy as np

        return self.from_numpy(np.ones(n, dtype=dtype), on_host, ordinal)

    def has_gpu(self) -> bool:
        """Whether this framework can place arrays on a CUDA device here (imports it)."""
        return False

    # -- several GPUs (gpushare.devices) ---------------------------------------------------
    # What the raw framework call says when the source is not on the current device (None: it
    # does not care), and how this framework changes the current device behind the user's back.
    off_device_failure: ClassVar[str | None] = None
    moves_current_device: ClassVar[str | None] = None

    def device_scope(self, obj: Any) -> tuple[int, int, Any] | None:
        """``(source ordinal, current ordinal, context manager making the source's device current)``
        when ``obj`` is on a CUDA device other than this framework's current one; None otherwise."""
        return None

    def from_dlpack_on(self, obj: Any, on_host: bool, ordinal: int) -> Any:
        """``from_dlpack(obj, device=…, copy=True)``: the producer copies to the device (``dl_device``)."""
        raise PathNotApplicableError(f"{self.name}'s from_dlpack takes no device here")

    def move(self, obj: Any, on_host: bool, ordinal: int) -> Any:
        """This framework's own move of ``obj`` to the host or CUDA device ``ordinal``."""
        raise PathNotApplicableError(f"{self.name} has no move between devices")

    # -- examples: the conformance matrix's sources (tools/conformance) ------------------
    def example(self, dtype: str, layout: str, on_host: bool, ordinal: int = 0) -> Any:
        """A ``(4, 6)``-based array of ``dtype`` in ``layout`` (one of ``EXAMPLE_LAYOUTS``), made
        the way this framework's users make it, on the host or CUDA device ``ordinal``. Raises
        :class:`NotConstructible`, with the reason, where the framework cannot make it."""
        raise NotConstructible(f"{self.name} builds no examples")

    def readback(self, obj: Any) -> Any:
        """The values of one of this framework's arrays as NumPy, to compare a target with its
        source (bfloat16 widened to float32, any strides)."""
        return widen_bfloat16(self.to_numpy(obj))

    # -- the environment report (gpushare.gpuinfo) ----------------------------------------
    #: Distribution names the framework is installed under (the first found gives the version);
    #: empty: its module's name.
    distribution_names: ClassVar[tuple[str, ...]] = ()

    def distributions(self) -> tuple[str, ...]:
        return self.distribution_names or (self.module,)

    def describe_runtime(self, info: Any, module: Any) -> None:
        """Fills ``info`` (a ``gpuinfo.FrameworkInfo``) for the imported framework: its DLPack
        entry points, what ``__dlpack__`` hands out, the GPUs it sees, notes. Never starts a GPU
        runtime the framework has not started itself."""
        info.from_dlpack = hasattr(module, "from_dlpack")

    # -- the memory ledger -----------------------------------------------------------------
    #: Whether ``allocator_memory`` can say anything (the ledger asks only these frameworks).
    tracks_allocator: ClassVar[bool] = False

    def allocator_memory(self, ordinal: int) -> dict[str, int] | None:
        """What this framework's allocator holds on CUDA device ``ordinal``, in its own terms; None
        when it is not imported, has not initialised CUDA, or cannot say. Never initialises it:
        asking JAX or TensorFlow before they touched the GPU would make them claim most of it."""
        return None


class NumpyAdapter(Adapter):
    name = "numpy"
    module = "numpy"
    aliases = ("np",)
    type_modules = ("numpy",)
    accepts_capsules = False
    exports_cai = False
    addresses_device = False
    copy_by_producer = True  # from_dlpack(x, device=, copy=True) asks x.__dlpack__(copy=True)
    worker_receives = ("shm",)
    # inspect() below is the versioned capsule read with the device "cpu" wherever NumPy makes one
    # (2.1 and later); what it does beyond that (legacy capsules, read-only flags of old NumPy,
    # dtypes DLPack lacks) is where the capsule cannot be read, which the core hands back to it.
    describes_by_capsule = True

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
        try:
            capsule = self.inspect_capsule(obj)
        except (BufferError, TypeError) as e:
            if obj.dtype.kind in "biufc":
                raise
            raise _numpy_dtype_refusal(obj.dtype, f"{type(e).__name__}: {e}") from e
        # A legacy capsule has no READ_ONLY flag: the array's flags say it instead.
        readonly = not exports_versioned(obj) and not obj.flags.writeable
        return TensorInfo.from_capsule(capsule, self.name, "cpu", readonly)

    def from_dlpack(self, obj: Any) -> Any:
        return self.load().from_dlpack(obj)

    def dlpack_importer(self) -> Callable[[Any], Any]:
        return self.load().from_dlpack

    def from_cai(self, obj: Any) -> Any:
        raise PathNotApplicableError("NumPy cannot address GPU memory through __cuda_array_interface__")

    def from_numpy(self, array: Any, on_host: bool, ordinal: int) -> Any:
        if not on_host:
            raise ValueError("NumPy arrays live on the host: use --device cpu")
        return array  # host memory is where NumPy lives

    def from_dlpack_on(self, obj: Any, on_host: bool, ordinal: int) -> Any:
        if not on_host:
            raise PathNotApplicableError("NumPy arrays live on the host: NumPy cannot take an array onto a GPU")
        return self.load().from_dlpack(obj, device="cpu", copy=True)

    def move(self, obj: Any, on_host: bool, ordinal: int) -> Any:
        if not on_host:
            raise PathNotApplicableError("NumPy arrays live on the host: move them with the target framework")
        return self.load().array(obj, copy=True)

    def describe_runtime(self, info: Any, module: Any) -> None:
        info.from_dlpack = hasattr(module, "from_dlpack")
        info.dlpack_export, info.dlpack_export_source = probe_export(module.zeros(1)), "probed"
        info.gpu_devices = []
        info.notes.append("host memory only")

    def example(self, dtype: str, layout: str, on_host: bool, ordinal: int = 0) -> Any:
        if not on_host:
            raise NotConstructible("numpy arrays live on the host")
        return numpy_example(dtype, layout)


class TorchAdapter(Adapter):
    name = "torch"
    module = "torch"
    aliases = ("pytorch", "pt")
    type_modules = ("torch",)
    copy_by_producer = True  # torch.from_dlpack(x, device=, copy=True) asks x.__dlpack__(copy=True)
    tracks_allocator = True
    imports_cai = True
    worker_receives = ("ipc", "shm", "torch_mp", "nccl", "nccl_socket", "gloo")
    process_paths = ("torch_mp", "nccl", "nccl_socket", "gloo")
    process_modules = ("torch.multiprocessing", "torch.distributed")

    def is_array(self, obj: Any) -> bool:
        torch = sys.modules.get("torch")
        return torch is not None and isinstance(obj, torch.Tensor)

    def inspect_capsule(self, obj: Any) -> Any:
        if obj.requires_grad:
            obj = obj.detach()  # inspection only: the address is the same
        if obj.is_cuda:
            # Tensor.__dlpack__ refuses a tensor off the current CUDA device ("Can't export tensors on
            # a different CUDA device index"), because it orders the export on the current device's
            # stream. Inspection reads the layout and orders nothing, so it asks torch's C export,
            # which has no such check: a tensor on cuda:0 is described while JAX made cuda:1 current.
            C = sys.modules["torch"]._C
            export = getattr(C, "_to_dlpack_versioned", None) or C._to_dlpack
            return export(obj)
        return versioned_capsule(obj)

    def inspect(self, obj: Any) -> TensorInfo:
        # PyTorch ships the DLPack 1.3 C exchange API: one C call fills a DLTensor, ~20x cheaper than
        # __dlpack__. It refuses tensors that require grad; those go through a detached capsule.
        try:
            info = _native.inspect_torch(obj)
            return info if info is not None else super().inspect(obj)
        except GpushareError:
            raise
        except Exception as e:
            refusal = self._unexportable(obj, f"{type(e).__name__}: {e}")
            if refusal is None:
                raise
            raise refusal from e

    @staticmethod
    def _unexportable(obj: Any, framework_error: str) -> Exception | None:
        """Why torch could not export ``obj`` (its layout or device has no DLPack form), in a
        sentence instead of PyTorch's message and C++ backtrace; None for other failures."""
        torch = sys.modules["torch"]
        if obj.is_nested:
            reason = "a nested tensor holds tensors of different shapes; DLPack describes one strided array"
            fix = "share its components (x.unbind()) or a padded tensor (x.to_padded_tensor(0.0))"
        elif obj.layout != torch.strided:
            reason = f"a sparse tensor ({obj.layout}) stores indices and values, not one strided array; DLPack has no sparse form"
            fix = "share x.to_dense(), or its parts (x.indices() and x.values() for COO)"
        elif obj.is_meta:
            reason = "a tensor on the meta device has a shape and dtype but no memory to share"
            fix = "materialise it first (torch.empty_like(x, device='cpu'), or load its data)"
        else:
            return None
        return explained(ConversionError, "torch", reason, fix, framework_error)

    def check_source(self, obj: Any) -> None:
        if obj.requires_grad:
            err = ConversionError(
                "torch tensor requires grad: DLPack cannot export it (\"Can't export tensors that require "
                "gradient\"). Fix: share x.detach(), which views the same memory"
            )
            err.reason = "tensor requires grad"
            err.fix = "x.detach()"
            raise err
        self.check_view_bits(obj)

    def check_view_bits(self, obj: Any) -> None:
        # Lazy conjugation and negation are bits on the tensor that DLPack cannot carry. PyTorch
        # refuses to export a conjugate view; a negative view it exports as is, and the target
        # reads every value with the wrong sign.
        if obj.is_conj():
            raise explained(
                ConversionError, "torch",
                "the tensor's conjugate bit is set (x.conj() is a lazy view): DLPack cannot carry the bit, "
                "and PyTorch refuses to export such a tensor",
                "share x.resolve_conj(), a conjugated copy",
            )
        if obj.is_neg():
            raise explained(
                UnsafeInputError, "torch",
                "the tensor's negative bit is set (a lazy negation such as torch._neg_view(x) or x.conj().imag): "
                "DLPack cannot carry the bit, so the target would read every value with the wrong sign",
                "share x.resolve_neg(), a negated copy",
            )

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
        # "cuda" is the current device, which another framework may have changed: the memory's own
        # device (the driver's word) keeps the handoff a view instead of a copy to the current GPU.
        device = "cuda"
        if torch.cuda.device_count() > 1:
            attrs = _native.cuda_pointer_attributes(obj.__cuda_array_interface__["data"][0])
            if attrs is not None and attrs.get("memory_type") == "device" and attrs.get("device_ordinal", -1) >= 0:
                device = f"cuda:{attrs['device_ordinal']}"
        return torch.as_tensor(obj, device=device)

    def synchronize(self, obj: Any) -> None:
        if obj.is_cuda:
            self.load().cuda.synchronize(obj.device)

    def current_stream(self, obj: Any) -> int | None:
        if not obj.is_cuda:
            return None
        torch = self.load()
        # The raw handle without building a torch.cuda.Stream (9 µs on an H100 host against ~1):
        # what torch's own compiler backends call. Public form where this PyTorch lacks it.
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        if raw is not None:
            return int(raw(obj.device.index))
        return int(torch.cuda.current_stream(obj.device).cuda_stream)

    def current_device_reader(self) -> Callable[[], int | None] | None:
        return self._current_device

    @staticmethod
    def _current_device() -> int | None:
        """PyTorch exports only from its current CUDA device: the device it would export from."""
        torch = sys.modules.get("torch")
        try:
            return int(torch.cuda.current_device()) if torch is not None else None
        except Exception:  # no CUDA initialised: nothing to predict from
            return None

    def to_numpy(self, obj: Any) -> Any:
        # .numpy() refuses lazy conjugate and negative views; the host route copies anyway.
        return obj.detach().cpu().resolve_conj().resolve_neg().numpy()

    def from_numpy(self, array: Any, on_host: bool, ordinal: int) -> Any:
        t = self.load().from_numpy(array)
        return t if on_host else t.to(f"cuda:{ordinal}")

    def ones(self, n: int, dtype: str, on_host: bool, ordinal: int) -> Any:
        torch = self.load()
        return torch.ones(n, dtype=getattr(torch, dtype), device="cpu" if on_host else f"cuda:{ordinal}")

    def has_gpu(self) -> bool:
        return bool(self.load().cuda.is_available())

    off_device_failure = (
        "torch's __dlpack__ refuses a tensor that is not on the current device when the consumer passes a "
        "stream (\"Can't export tensors on a different CUDA device index\")"
    )

    def device_scope(self, obj: Any) -> tuple[int, int, Any] | None:
        ordinal = obj.get_device()  # -1 on the host
        if ordinal < 0:
            return None
        cuda = sys.modules["torch"].cuda
        current = cuda.current_device()
        return None if current == ordinal else (ordinal, current, cuda.device(ordinal))

    def from_dlpack_on(self, obj: Any, on_host: bool, ordinal: int) -> Any:
        return self.load().from_dlpack(obj, device="cpu" if on_host else f"cuda:{ordinal}", copy=True)

    def in_device_memory(self, obj: Any) -> bool:
        return not obj.is_cpu  # 0.1 µs; torch's __dlpack_device__ costs 3.5 (torch 2.15)

    def check_copying_export(self, obj: Any) -> None:
        # With copy=True torch's export negates into the copy (torch 2.15: from_dlpack(neg_view,
        # copy=True) reads the right signs); it still refuses grad and the conjugate bit.
        if obj.is_neg() and not obj.is_conj() and not obj.requires_grad:
            return
        self.check_source(obj)

    def move(self, obj: Any, on_host: bool, ordinal: int) -> Any:
        return obj.detach().to("cpu" if on_host else f"cuda:{ordinal}")

    def describe_runtime(self, info: Any, module: Any) -> None:
        info.from_dlpack = hasattr(module, "from_dlpack")
        info.dlpack_export, info.dlpack_export_source = probe_export(module.zeros(1)), "probed"
        # is_available() counts devices without creating a CUDA context (torch keeps fork-safety).
        if module.cuda.is_available():
            info.gpu_devices = [f"cuda:{i}" for i in range(module.cuda.device_count())]
        else:
            info.gpu_devices = []
        if not module.cuda.is_initialized():
            info.notes.append("CUDA not initialised yet (no context, nothing allocated)")

    def example(self, dtype: str, layout: str, on_host: bool, ordinal: int = 0) -> Any:
        torch = self.load()
        dev = "cpu" if on_host else f"cuda:{ordinal}"
        n = EXAMPLE_SHAPE[0] * EXAMPLE_SHAPE[1]
        if layout == "negative_stride":
            raise NotConstructible("torch cannot make negative strides (torch.flip copies)")
        if layout == "read_only":
            raise NotConstructible("torch has no read-only tensors")
        if dtype == "bfloat16":
            flat = torch.tensor(example_values("float32", n + 1), device=dev).to(torch.bfloat16)
        else:
            # clone(): from_numpy would alias NumPy's malloc'd (often only 16-byte aligned) memory;
            # torch's own allocator aligns to 64 bytes, which is what a torch user gets.
            flat = torch.from_numpy(example_values(dtype, n + 1)).to(dev).clone()
        if layout == "misaligned":
            return flat[1:]  # torch allocations are 64-byte aligned, so one element in is not
        base = flat[:n].reshape(EXAMPLE_SHAPE)
        view = plain_view(base, layout)  # negative strides were refused above
        if view is not None:
            return view
        if layout == "zero_stride":
            return base[0].expand(*EXAMPLE_SHAPE)
        if layout == "zero_d":
            return base[0, 0].clone()
        raise AssertionError(layout)

    def readback(self, obj: Any) -> Any:
        obj = obj.detach().cpu()
        if obj.dtype == self.load().bfloat16:
            obj = obj.float()  # NumPy has no bfloat16
        return widen_bfloat16(obj.numpy())

    def allocator_memory(self, ordinal: int) -> dict[str, int] | None:
        torch = sys.modules.get("torch")
        cuda = getattr(torch, "cuda", None)
        # is_initialized() is False until torch has created its CUDA state; asking for figures
        # before would return zeros at best.
        if cuda is None or not cuda.is_initialized() or ordinal >= cuda.device_count():
            return None
        # The nested form comes straight from the allocator: memory_allocated() and friends each
        # flatten it in Python first (~70 µs apiece on an H200 host); the C call itself skips
        # memory_stats_as_nested_dict's device-index parsing, which the ledger pays twice a share.
        stats_of = getattr(torch._C, "_cuda_memoryStats", None) or cuda.memory_stats_as_nested_dict
        stats = stats_of(ordinal)
        allocated, reserved = stats.get("allocated_bytes", {}).get("all", {}), stats.get("reserved_bytes", {}).get("all", {})
        return {
            "allocated": int(allocated.get("current", 0)),
            "reserved": int(reserved.get("current", 0)),
            "peak_allocated": int(allocated.get("peak", 0)),
        }


class JaxAdapter(Adapter):
    name = "jax"
    module = "jax"
    type_modules = ("jax", "jaxlib")
    tracks_allocator = True
    imports_cai = True
    immutable = True
    accepts_capsules = False  # removed in JAX 0.7.2
    import_settles_later = True  # the narrowing kernel of 64-bit types without x64

    def pip_name(self) -> str:
        # What to install: the distribution that provides the module, and the variant a GPU needs.
        return 'jax (for an NVIDIA GPU: "jax[cuda12]" or "jax[cuda13]")'

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
        if info is not None:
            return info
        # The attribute route declines deleted arrays (reading a deleted array's layout crashes the
        # process); JAX's own calls raise on them, and so does gpushare, before touching it.
        if obj.is_deleted():
            raise explained(
                ConversionError, "jax",
                f"the array was deleted (x.delete() freed its buffer; shape {obj.shape}, dtype {obj.dtype}), "
                "so there is no memory to share",
                "share a live array: recreate it, or keep a reference instead of deleting it",
            )
        # JAX's __dlpack__ waits for a pending result holding the GIL, which the computation's end
        # can need (the core's settle_jax, src/python/plan.rs, says how it deadlocked): wait here,
        # where JAX releases it.
        if not obj.is_ready():
            obj.block_until_ready()
        return super().inspect(obj)

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

    def data_pointer(self, obj: Any) -> int:
        return int(obj.unsafe_buffer_pointer())  # jax arrays have no __cuda_array_interface__ of their own

    def x64_enabled(self) -> bool:
        """``jax.config.jax_enable_x64`` when JAX is already imported; False otherwise (JAX's default),
        or when the ``JAX_ENABLE_X64`` environment variable says so for a JAX not imported yet."""
        jax = sys.modules.get("jax")
        if jax is not None:
            try:
                return bool(jax.config.jax_enable_x64)
            except AttributeError:
                return False
        return os.environ.get("JAX_ENABLE_X64", "").strip().lower() in ("1", "true", "yes", "on")

    def x64_reader(self) -> Callable[[], bool] | None:
        return self.x64_enabled  # rule 1: a 64-bit dtype narrows into JAX unless x64 is on

    def synchronize(self, obj: Any) -> None:
        obj.block_until_ready()

    def from_numpy(self, array: Any, on_host: bool, ordinal: int) -> Any:
        jax = self.load()
        return jax.device_put(array, jax.devices("cpu")[0] if on_host else jax.devices("gpu")[ordinal])

    moves_current_device = "jax is imported: JAX makes the last GPU current when its backends start"

    def _jax_device(self, on_host: bool, ordinal: int) -> Any:
        jax = self.load()
        return jax.devices("cpu")[0] if on_host else jax.devices("gpu")[ordinal]

    def from_dlpack_on(self, obj: Any, on_host: bool, ordinal: int) -> Any:
        self.load()
        import jax.dlpack

        return jax.dlpack.from_dlpack(obj, device=self._jax_device(on_host, ordinal), copy=True)

    def move(self, obj: Any, on_host: bool, ordinal: int) -> Any:
        return self.load().device_put(obj, self._jax_device(on_host, ordinal))

    def has_gpu(self) -> bool:
        try:
            return any(d.platform == "gpu" for d in self.load().devices())
        except RuntimeError:
            return False

    def example(self, dtype: str, layout: str, on_host: bool, ordinal: int = 0) -> Any:
        jax = self.load()
        import jax.numpy as jnp

        if dtype in SIXTY_FOUR_BIT and not jax.config.jax_enable_x64:
            raise NotConstructible(f"jax holds no {dtype} with jax_enable_x64 off")
        if layout in ("transposed", "sliced", "negative_stride", "zero_stride", "misaligned"):
            raise NotConstructible(
                "layout not constructible in jax: its arrays are compact, row-major and aligned on export"
            )
        if layout == "read_only":
            raise NotConstructible("every jax array is immutable: the contiguous column is the read-only case")
        target = jax.devices("cpu" if on_host else "gpu")[0 if on_host else ordinal]
        values = compact_example_values(dtype, layout)
        return jax.device_put(jnp.asarray(values, dtype=dtype), target)

    def describe_runtime(self, info: Any, module: Any) -> None:
        dlpack = getattr(module, "dlpack", None)
        info.from_dlpack = hasattr(dlpack, "from_dlpack")
        if self.runtime_initialized():
            info.dlpack_export, info.dlpack_export_source = probe_export(module.numpy.zeros(1)), "probed"
            info.gpu_devices = [str(d) for d in module.local_devices() if d.platform in ("gpu", "cuda", "rocm")]
        else:
            # JAX's DLPACK_VERSION is (0, 8): legacy capsules only.
            info.dlpack_export, info.dlpack_export_source = "legacy", "documented"
            info.notes.append("backends not initialised yet (first use preallocates 75% of GPU memory by default)")
        try:
            if not module.config.jax_enable_x64:
                info.notes.append("x64 off: 64-bit arrays are copied to 32-bit on import")
        except AttributeError:
            pass

    def runtime_initialized(self) -> bool:
        """JAX has created its backends (on the first array or ``jax.devices()``). Before that,
        asking for devices would create them, and on a GPU preallocate 75% of its memory."""
        bridge = sys.modules.get("jax._src.xla_bridge")
        return bool(getattr(bridge, "_backends", None))

    def allocator_memory(self, ordinal: int) -> dict[str, int] | None:
        jax = sys.modules.get("jax")
        if jax is None or not self.runtime_initialized():
            return None
        for device in jax.local_devices():
            if device.platform not in ("gpu", "cuda", "rocm"):
                continue
            if getattr(device, "local_hardware_id", device.id) != ordinal:
                continue
            stats = device.memory_stats() or {}
            keys = ("bytes_in_use", "peak_bytes_in_use", "bytes_limit", "bytes_reserved")
            return {key: int(stats[key]) for key in keys if key in stats}
        return None


class TensorFlowAdapter(Adapter):
    name = "tf"
    module = "tensorflow"
    aliases = ("tensorflow",)
    crashes_beside = ("paddle",)  # PaddlePaddle 3.3 with TensorFlow 2.20
    # absl's "All log messages before absl::InitializeLog()…", oneDNN and CPU-feature notes, written
    # by C++ at import and first device query, whatever TF_CPP_MIN_LOG_LEVEL says.
    noisy_start = True
    type_modules = ("tensorflow", "keras")
    distribution_names = ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tf-nightly", "tensorflow-macos")
    tracks_allocator = True
    immutable = True
    accepts_objects = False  # tf.experimental.dlpack.from_dlpack takes capsules only
    # tf.Tensor.__dlpack__ raises on any stream ("does not support DLPack export with a non-None
    # stream"), and from_dlpack takes none; TensorFlow runs its GPU work on streams of its own,
    # which it does not expose (docs/gpu-results.md, issue 12).
    export_takes_stream = False
    import_takes_stream = False
    exports_cai = False
    cai_view = True  # a tensor in CUDA memory, described for Numba by gpushare (_CudaArrayView)

    def pip_name(self) -> str:
        return 'tensorflow (or tensorflow-cpu; "tensorflow[and-cuda]" for an NVIDIA GPU)'

    def is_array(self, obj: Any) -> bool:
        tf = sys.modules.get("tensorflow")
        return tf is not None and isinstance(obj, tf.Tensor) and hasattr(obj, "numpy")

    def inspect_capsule(self, obj: Any) -> Any:
        self._refuse_unexportable(obj)
        return self.to_capsule(obj)

    def inspect(self, obj: Any) -> TensorInfo:
        # The base's steps in one frame (every share into or out of TensorFlow describes a tensor
        # this way, and the nested calls were most of its cost): the dtype asked by TensorFlow's C
        # method before the export that would abort on it, the device name as TensorFlow gives it.
        datatype = getattr(obj, "_datatype_enum", None)
        if datatype is None or datatype() in self._UNEXPORTABLE:
            self._refuse_unexportable(obj)
        export = TensorFlowAdapter._to_dlpack or self._dlpack_functions()[0]
        return TensorInfo.from_capsule(export(obj), self.name, obj.device, self.immutable)

    # DT_STRING, DT_RESOURCE, DT_VARIANT: TensorFlow's own DLPack export aborts the whole process on
    # them (`Check failed: DataTypeCanUseMemcpy(dtype())`, tensor.cc), so gpushare checks the dtype
    # before calling it. Each: (what the tensor is, the fix).
    _UNEXPORTABLE: ClassVar[dict[int, tuple[str, str]]] = {
        7: (
            "a tf.string tensor holds variable-length byte strings, not numbers: DLPack has no form for it",
            "decode it to numbers first (tf.strings.to_number, tf.strings.unicode_decode, a lookup table), "
            "or take x.numpy() for a NumPy object array",
        ),
        20: (
            "a tf.resource tensor is a handle to a variable (tf.Variable(...).handle), not the variable's values",
            "share the variable's values: v.read_value() or tf.convert_to_tensor(v)",
        ),
        21: (
            "a tf.variant tensor (a tf.data dataset, a TensorList) holds TensorFlow objects, not an array",
            "share the tensors it contains (iterate the dataset, or tf.raw_ops.TensorListStack)",
        ),
    }

    def _refuse_unexportable(self, obj: Any) -> None:
        known = self._UNEXPORTABLE.get(obj.dtype.as_datatype_enum)
        if known is not None:
            reason, fix = known
            raise explained(
                UnsafeInputError, "tf",
                f"{reason}; TensorFlow's DLPack export would abort the process on it (Check failed: "
                f"DataTypeCanUseMemcpy), so gpushare does not call it",
                fix,
            )

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
        return (TensorFlowAdapter._import_capsule or self.capsule_importer())(capsule)

    def capsule_exporter(self) -> Callable[[Any], Any]:
        return self._dlpack_functions()[0]

    # Built once: it sits on every handoff into TensorFlow.
    _import_capsule: ClassVar[Any] = None

    def capsule_importer(self) -> Callable[[Any], Any]:
        # TensorFlow takes only "dltensor" capsules; CuPy 14 exports versioned ones from toDlpack().
        # A versioned capsule is forwarded as a legacy one (same tensor, no copy); a legacy capsule
        # passes through untouched.
        if TensorFlowAdapter._import_capsule is None:
            from_dlpack = self._dlpack_functions()[1]
            legacy = _native.legacy_capsule

            def import_capsule(capsule: Any) -> Any:
                return from_dlpack(legacy(capsule))

            TensorFlowAdapter._import_capsule = import_capsule
        return TensorFlowAdapter._import_capsule

    def stream_free_export(self, obj: Any) -> Any:
        return _StreamFreeExport(obj)

    def cuda_array_view(self, obj: Any) -> Any:
        return _CudaArrayView.of(self.inspect(obj), obj, self.name)

    def synchronize(self, obj: Any) -> None:
        # TensorFlow's streams are its own: SyncDevice on the tensor's device waits for them (what
        # tf.test.experimental.sync_devices does for every device; ~10 µs idle on an H100).
        if "GPU" not in obj.device:
            return
        tf = self.load()
        try:
            from tensorflow.python.ops import gen_sync_ops
        except ImportError:  # private module moved: the public, all-device form
            tf.test.experimental.sync_devices()
            return
        with tf.device(obj.device):
            gen_sync_ops.SyncDevice()

    def to_numpy(self, obj: Any) -> Any:
        return obj.numpy()

    def from_numpy(self, array: Any, on_host: bool, ordinal: int) -> Any:
        tf = self.load()
        with tf.device("/CPU:0" if on_host else f"/GPU:{ordinal}"):
            return tf.convert_to_tensor(array)

    def has_gpu(self) -> bool:
        return bool(self.load().config.list_physical_devices("GPU"))

    def example(self, dtype: str, layout: str, on_host: bool, ordinal: int = 0) -> Any:
        tf = self.load()
        if layout in ("transposed", "sliced", "negative_stride", "zero_stride", "misaligned"):
            raise NotConstructible(
                "layout not constructible in tf: its tensors are compact and row-major (slices copy)"
            )
        if layout == "read_only":
            raise NotConstructible("every tf tensor is immutable: the contiguous column is the read-only case")
        values = compact_example_values(dtype, layout)
        with tf.device("CPU:0" if on_host else f"GPU:{ordinal}"):
            t = tf.constant(values)
            return tf.cast(t, tf.bfloat16) if dtype == "bfloat16" else tf.identity(t)

    def describe_runtime(self, info: Any, module: Any) -> None:
        try:
            info.from_dlpack = hasattr(module.experimental.dlpack, "from_dlpack")
        except AttributeError:
            info.from_dlpack = False
        # TF exports "dltensor" capsules only, and its export syncs the whole device: not probed.
        info.dlpack_export, info.dlpack_export_source = "legacy", "documented"
        info.notes.append("imports capsules only: use the capsule path")
        if self.runtime_initialized():
            info.gpu_devices = [d.name for d in module.config.list_logical_devices("GPU")]
        else:
            info.notes.append("runtime not initialised yet (maps nearly all GPU memory unless memory growth is on)")

    def runtime_initialized(self) -> bool:
        """TF has initialised its runtime (devices exist). Before that, listing devices would
        initialise it, and without memory growth TF maps nearly all GPU memory."""
        context = sys.modules.get("tensorflow.python.eager.context")
        try:
            return bool(context is not None and context.context()._initialized)
        except Exception:
            return False

    def allocator_memory(self, ordinal: int) -> dict[str, int] | None:
        tf = sys.modules.get("tensorflow")
        if tf is None or not self.runtime_initialized():
            return None
        # TF's GPU:N is a logical index: it equals the CUDA ordinal unless set_visible_devices was used.
        if ordinal >= len(tf.config.list_logical_devices("GPU")):
            return None
        info = tf.config.experimental.get_memory_info(f"GPU:{ordinal}")
        return {"current": int(info["current"]), "peak": int(info["peak"])}


class CupyAdapter(Adapter):
    name = "cupy"
    module = "cupy"
    aliases = ("cp",)
    type_modules = ("cupy",)
    distribution_names = ("cupy", "cupy-cuda13x", "cupy-cuda12x", "cupy-cuda11x", "cupy-rocm-6-0")
    tracks_allocator = True
    worker_receives = ("ipc",)
    imports_cai = True
    host_arrays = False
    describes_by_capsule = True  # inspect(): the versioned capsule, device "cuda:N"

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

    _ptds: ClassVar[list[bool]] = []

    def per_thread_default_stream(self) -> bool:
        # CuPy reads CUPY_CUDA_PER_THREAD_DEFAULT_STREAM once, at import; so do we (os.environ
        # costs ~1 µs). torch refuses stream=2 from CuPy only.
        if not self._ptds:
            self._ptds.append(os.environ.get("CUPY_CUDA_PER_THREAD_DEFAULT_STREAM", "").strip() not in ("", "0"))
        return self._ptds[0]

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

    def example(self, dtype: str, layout: str, on_host: bool, ordinal: int = 0) -> Any:
        if on_host:
            raise NotConstructible("cupy arrays live on the GPU")
        if layout == "read_only":
            raise NotConstructible("cupy has no read-only arrays")
        if dtype == "bfloat16":
            raise NotConstructible("cupy builds no bfloat16 arrays (ml_dtypes arrays stay on the host)")
        cupy = self.load()
        n = EXAMPLE_SHAPE[0] * EXAMPLE_SHAPE[1]
        with cupy.cuda.Device(ordinal):
            if layout == "misaligned":
                return cupy.asarray(aligned_numpy((n,), dtype, extra=1))[1:]
            base = cupy.asarray(numpy_example(dtype, "contiguous"))
            view = plain_view(base, layout)
            if view is not None:
                return view
            if layout == "zero_stride":
                return cupy.broadcast_to(base[0], EXAMPLE_SHAPE)
            if layout == "zero_d":
                return base[0, 0].copy()
        raise AssertionError(layout)

    def device_scope(self, obj: Any) -> tuple[int, int, Any] | None:
        cuda = sys.modules["cupy"].cuda
        ordinal, current = obj.device.id, cuda.runtime.getDevice()
        return None if current == ordinal else (ordinal, current, cuda.Device(ordinal))

    def from_dlpack_on(self, obj: Any, on_host: bool, ordinal: int) -> Any:
        if on_host:
            raise PathNotApplicableError("CuPy arrays live on a GPU: use the target framework for device='cpu'")
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

    def check_source(self, obj: Any) -> None:
        if not obj.stop_gradient:
            err = ConversionError(
                "paddle tensor requires gradients (stop_gradient=False): DLPack cannot export it. "
                "Fix: share x.detach(), which views the same memory"
            )
            err.reason = "tensor requires gradients (stop_gradient=False)"
            err.fix = "x.detach()"
            raise err

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
        if "bfloat16" in str(obj.dtype):
            # Paddle hands bfloat16 out as its raw bits in uint16 (host-route cells of the conformance
            # matrix then carried 16320 for 1.5): the bits viewed as ml_dtypes' bfloat16 are the values.
            try:
                import ml_dtypes
            except ImportError:
                raise explained(ConversionError, "paddle", "NumPy has no bfloat16 without ml_dtypes, and "
                                "Paddle gives a bfloat16 tensor's raw bits as uint16", "pip install ml_dtypes, "
                                "or cast to float32 first (x.astype('float32'))") from None
            out = out.view(ml_dtypes.bfloat16)
        return out

    # NumPy dtypes paddle.to_tensor cannot take as themselves: it reads uint16 as bfloat16 bits (the
    # values change) and refuses uint32 and uint64.
    _NO_TENSOR_DTYPES: ClassVar[tuple[str, ...]] = ("uint16", "uint32", "uint64")

    def from_numpy(self, array: Any, on_host: bool, ordinal: int) -> Any:
        paddle = self.load()
        name = array.dtype.name
        if name in self._NO_TENSOR_DTYPES:
            raise explained(
                ConversionError, "paddle",
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

    def example(self, dtype: str, layout: str, on_host: bool, ordinal: int = 0) -> Any:
        paddle = self.load()
        if layout == "read_only":
            raise NotConstructible("paddle has no read-only tensors")
        if dtype in ("uint16", "uint32", "uint64"):
            # paddle.to_tensor reads a NumPy uint16 array as bfloat16 and refuses uint32/uint64.
            raise NotConstructible(f"paddle has no {dtype} tensors")
        place = paddle.CPUPlace() if on_host else paddle.CUDAPlace(ordinal)
        n = EXAMPLE_SHAPE[0] * EXAMPLE_SHAPE[1]
        if dtype == "bfloat16":
            flat = paddle.to_tensor(example_values("float32", n + 1), place=place).astype("bfloat16")
        else:
            flat = paddle.to_tensor(example_values(dtype, n + 1), dtype=dtype, place=place)
        if layout == "misaligned":
            return flat[1:]  # Paddle's allocations are 64-byte aligned; slices are views (stride kernels)
        base = flat[:n].reshape(list(EXAMPLE_SHAPE))
        view = plain_view(base, layout)  # transposes, slices and reversals are views in Paddle 3
        if view is not None:
            return view
        if layout == "zero_stride":
            return paddle.as_strided(base[0], list(EXAMPLE_SHAPE), [0, 1])  # expand copies; this views
        if layout == "zero_d":
            return base[0, 0].clone()
        raise AssertionError(layout)

    def readback(self, obj: Any) -> Any:
        if "bfloat16" in str(obj.dtype):
            obj = obj.astype("float32")  # NumPy has no bfloat16 (without ml_dtypes)
        return widen_bfloat16(obj.numpy())

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

_EXTENDED_FLOATS = ("bfloat", "float8", "float4", "float6", "int4", "uint4", "int2", "uint2")


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
    return explained(ConversionError, "numpy", reason, fix, framework_error)


def numpy_unit(dtype: Any) -> str:
    """The unit of a datetime64/timedelta64 dtype in words ("s", "ns", …; "generic" when unset)."""
    np = sys.modules["numpy"]
    unit, count = np.datetime_data(dtype)
    return unit if count == 1 else f"{count}{unit}"


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


class _StreamFreeExport:
    """Stands in for an array whose ``__dlpack__`` refuses streams (TensorFlow's) in a consumer's
    ``from_dlpack``: torch, CuPy and JAX pass their stream for CUDA memory, and the array's own
    export would raise. This one hands over the legacy capsule of ``__dlpack__()`` instead.
    That is safe only because TensorFlow's export waits for the work that produces the tensor
    before it returns (to_dlpack's documented guarantee, measured on an H100): the consumer's
    stream has nothing left to wait for. A copy or another device cannot be asked for here."""

    __slots__ = ("_array",)

    def __init__(self, array: Any):
        self._array = array

    def __dlpack__(self, *, stream: Any = None, max_version: Any = None, dl_device: Any = None, copy: Any = None) -> Any:
        if copy:
            raise BufferError("TensorFlow's DLPack export cannot make a copy (copy=True)")
        if dl_device is not None and tuple(dl_device) != tuple(self._array.__dlpack_device__()):
            raise BufferError(f"TensorFlow's DLPack export cannot move the tensor to {tuple(dl_device)}")
        return self._array.__dlpack__()

    def __dlpack_device__(self) -> Any:
        return self._array.__dlpack_device__()


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
            raise PathNotApplicableError(
                f"__cuda_array_interface__ describes CUDA memory only (cuda_array_interface); this {framework} "
                f"tensor is on {info.device} in {'host' if info.dlpack_device[0] in (1, 3) else 'other'} memory"
            )
        typestr = _DTYPE_TYPESTR.get(info.dtype)
        if typestr is None:
            raise PathNotApplicableError(f"__cuda_array_interface__ has no typestr for {info.dtype}")
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


def probe_export(array: Any) -> str:
    """What ``array.__dlpack__`` hands a consumer that accepts DLPack 1.x: "versioned" or "legacy"
    (where ``__dlpack__`` predates max_version, NumPy < 2.1). A capsule's repr names its kind."""
    return "versioned" if "dltensor_versioned" in repr(versioned_capsule(array)) else "legacy"


def major_version(version: str | None) -> int:
    try:
        return int((version or "0").split(".")[0])
    except ValueError:
        return 0


def by_module(module: str) -> Adapter | None:
    """The adapter of the framework imported as ``module`` ("tensorflow"), or None."""
    return next((a for a in ADAPTERS.values() if a.module == module), None)


# -- examples: what each adapter's ``example`` builds from -----------------------------------------
# The conformance matrix (tools/conformance, not shipped) asks every adapter for the same sources;
# the NumPy values and views every strided library makes alike live here, once.

#: The layouts an adapter's ``example`` knows, each a view of a (4, 6) array.
EXAMPLE_LAYOUTS = (
    "contiguous", "transposed", "sliced", "negative_stride", "zero_stride", "zero_d", "zero_size",
    "misaligned", "read_only",
)
EXAMPLE_SHAPE = (4, 6)
SIXTY_FOUR_BIT = ("int64", "uint64", "float64", "complex128")


class NotConstructible(Exception):
    """The layout or dtype cannot be made in the framework asked: the reason says why."""


def example_dtype(dtype: str) -> Any:
    """The NumPy dtype of a dtype name (bfloat16 through ml_dtypes, when it is installed)."""
    import numpy as np

    if dtype == "bfloat16":
        try:
            import ml_dtypes
        except ImportError:
            raise NotConstructible("numpy has no bfloat16 without ml_dtypes") from None
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(dtype)


def example_values(dtype: str, n: int) -> Any:
    """Distinct small values in ``dtype`` (so a transposed or reversed read is told apart)."""
    import numpy as np

    if dtype == "bool":
        return np.arange(n) % 3 == 0
    return (np.arange(n) % 7 + 1).astype(example_dtype(dtype))


def compact_example_values(dtype: str, layout: str) -> Any:
    """The NumPy values of a compact example (contiguous, 0-d or zero-size; bfloat16 as float32,
    which the framework then casts), for frameworks that build from values."""
    n = EXAMPLE_SHAPE[0] * EXAMPLE_SHAPE[1]
    values = example_values("float32" if dtype == "bfloat16" else dtype, n).reshape(EXAMPLE_SHAPE)
    if layout == "zero_d":
        return values[0, 0]
    if layout == "zero_size":
        return values[:0]
    return values


def aligned_numpy(shape: tuple[int, ...], dtype: str, extra: int = 0) -> Any:
    """A NumPy array whose data starts on a 64-byte boundary (np.zeros is often only 16-aligned),
    with ``extra`` spare elements behind it."""
    import numpy as np

    dt = example_dtype(dtype)
    n = int(np.prod(shape)) if shape else 1
    raw = np.zeros((n + extra) * dt.itemsize + 64, dtype=np.uint8)
    off = (-raw.ctypes.data) % 64
    flat = raw[off : off + (n + extra) * dt.itemsize].view(dt)
    flat[:] = example_values(dtype, n + extra)
    return flat


def plain_view(base: Any, layout: str) -> Any:
    """The views every strided array library makes the same way (NumPy, CuPy, PyTorch) of a
    compact 2-d ``base``; None for the layouts each builds its own way."""
    if layout == "contiguous":
        return base
    if layout == "transposed":
        return base.T
    if layout == "sliced":
        return base[1:3, 2:]
    if layout == "negative_stride":
        return base[:, ::-1]
    if layout == "zero_size":
        return base[:0]
    return None


def numpy_example(dtype: str, layout: str) -> Any:
    """NumPy's example, 64-byte aligned (also the host values CuPy and Numba copy to the GPU)."""
    import numpy as np

    n = EXAMPLE_SHAPE[0] * EXAMPLE_SHAPE[1]
    if layout == "misaligned":
        return aligned_numpy((n,), dtype, extra=1)[1:]
    flat = aligned_numpy(EXAMPLE_SHAPE, dtype)
    base = flat.reshape(EXAMPLE_SHAPE)
    view = plain_view(base, layout)
    if view is not None:
        return view
    if layout == "zero_stride":
        # as_strided, not broadcast_to: broadcast_to returns a read-only view, which would test the
        # read-only rule instead of the stride rule.
        return np.lib.stride_tricks.as_strided(base[0], shape=EXAMPLE_SHAPE, strides=(0, base.itemsize), writeable=True)
    if layout == "zero_d":
        return flat[:1].reshape(())
    if layout == "read_only":
        base.flags.writeable = False
        return base
    raise AssertionError(layout)


def widen_bfloat16(array: Any) -> Any:
    """``array`` as a NumPy array, bfloat16 (ml_dtypes) widened to float32 for comparisons."""
    import numpy as np

    out = np.asarray(array)
    return out.astype(np.float32) if out.dtype.name == "bfloat16" else out


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


ADAPTERS: dict[str, Adapter] = {
    a.name: a
    for a in (
        TorchAdapter(), TensorFlowAdapter(), JaxAdapter(), NumpyAdapter(), CupyAdapter(), NumbaAdapter(),
        PaddleAdapter(),
    )
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
    # A subclass (a user's ``class Image(np.ndarray)``, ``torch.Tensor.as_subclass(Tagged)``,
    # ``np.memmap``, astropy's Quantity) is defined in another module: the framework is found from
    # the first class of its MRO that a framework's module defines, and is_array confirms it.
    for cls in tp.__mro__:
        for candidate in ADAPTERS.values():
            if candidate.owns_type(cls) and candidate.is_array(obj):
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
