"""The interface every framework's adapter implements, with the generic behaviour most share, and
the helpers the adapters use alike (capsule exports, gpushare's errors with a reason and a fix).

An adapter knows how to recognise its framework's arrays *without importing the framework* (by the
module of the object's type and ``sys.modules``), how to export a DLPack capsule for inspection, and
how its framework imports from the DLPack protocol, from a legacy capsule, and from
``__cuda_array_interface__``. Nothing here imports a framework until an array of it, or a conversion
into it, is at hand.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import sys
from typing import Any, Callable, ClassVar

from gpushare import _native
from gpushare.exceptions import explained, gpushare_error

TensorInfo = _native.share.TensorInfo

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
    # Whether its import of gpushare's own buffer (the result of `copy`, `pinned` and `p2p`) views
    # that memory and queues no device work of its own, a wait on its stream at most: a sample of
    # such a handoff then ends when gpushare's copy has (the source context's settle), without the
    # framework's own synchronise waiting for the same copy again (crates/core/src/share/timing.rs).
    views_gpushare_buffers: ClassVar[bool] = False
    # Whether a call can return while its work on host memory is still queued (JAX's CPU client
    # copies a NumPy array it cannot view after `from_dlpack` returned: 200 MiB returned in 0.6 ms
    # and landed 150 ms later). A timed sample in host memory then waits for it (`synchronize`) at
    # its edges, as one on a device does (crates/core/src/share/timing.rs, `Edges`).
    queues_host_work: ClassVar[bool] = False
    # Whether its DLPack import waits on the host for the producer's stream (JAX's does: 11.1 ms
    # with 10.8 ms of matmuls queued on torch's stream, on 2x H200): with a busy producer such a
    # handoff costs all of the queued work, and `auto` prefers a path ordered on the device
    # (crates/core/src/advice/producer.rs).
    dlpack_import_waits: ClassVar[bool] = False
    # Whether its __cuda_array_interface__ import waits for the interface's `stream` as the
    # protocol asks (CuPy, Numba, PyTorch). JAX's does not: `auto` never takes `cai` into it.
    cai_import_orders: ClassVar[bool] = True
    #: Its own transport hands a host array to another process by moving it into shared memory
    #: once, values kept, so the worker maps the source itself (torch.multiprocessing). The move
    #: frees the memory the array's other views read, so the process ``auto`` takes that path only
    #: for an array already in shared memory (:meth:`host_memory_shared`), and ``shm`` otherwise.
    shares_host_memory_across_processes: ClassVar[bool] = False
    #: Its process paths that move a host array into shared memory before handing it over, unless
    #: :meth:`host_memory_shared` (torch_mp): the memory the array lay in is freed under its views.
    moving_process_paths: ClassVar[tuple[str, ...]] = ()
    # How the Rust core describes its arrays without calling inspect() (adapters/description.py):
    # "exchange_api", "capsule", an Attributes, Strided or ExportedCapsule recipe, or "inspect"
    # (inspect() alone).
    describe_by: ClassVar[Any] = "inspect"
    # The flags check_source() looks at, all false on an array it passes: attributes, or methods
    # named with "()". The core reads them and calls check_source() only when one is set.
    source_flags: ClassVar[tuple[str, ...]] = ()

    # Whether its arrays have __dlpack__ (Numba's have none) and can expose
    # __cuda_array_interface__ (NumPy's and TensorFlow's never do), and whether it imports that
    # interface (from_cai): the routes (paths.py) decide from these, never from the name.
    exports_dlpack: ClassVar[bool] = True
    exports_cai: ClassVar[bool] = True
    # Whether its legacy capsule export (``__dlpack__()`` without max_version) refuses its read-only
    # arrays, since only a versioned capsule carries that flag (NumPy's): `auto` then takes a capsule
    # for an array of it only where readonly() says it is writable (crates/core/src/auto.rs).
    legacy_capsule_refuses_readonly: ClassVar[bool] = False
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
    # Whether its __cuda_array_interface__ import takes an interface marked read-only. PyTorch's
    # refuses one outright ("the read only flag is not supported"), and an immutable framework's
    # arrays (JAX's) mark theirs so: `cai` between the two cannot work.
    imports_readonly_cai: ClassVar[bool] = True
    # Whether its arrays can live in host memory (CuPy's and Numba's live on a GPU only): the CPU
    # conformance matrix runs every framework that says so.
    host_arrays: ClassVar[bool] = True
    # Whether it can hold arrays in device memory (NumPy's live on the host only): `auto` takes the
    # host route from device memory into a framework that cannot (src/paths.rs).
    addresses_device: ClassVar[bool] = True
    # Whether its from_dlpack(x, device=…, copy=True) passes copy=True to the producer's
    # __dlpack__ (the producer makes the copy), rather than copying what a plain export gave it.
    copy_by_producer: ClassVar[bool] = False
    # Whether its from_dlpack, when the producer's __dlpack__ refuses, exports the array with the
    # producer framework's own exporter instead (torch.utils.dlpack.to_dlpack, which takes a tensor
    # that requires grad): what its raw call accepts, gpushare accepts.
    exports_by_producer_fallback: ClassVar[bool] = False

    # Modules that crash the process (SIGSEGV) when imported into it beside this framework: gpushare
    # never imports one while the other is loaded, and says why.
    crashes_beside: ClassVar[tuple[str, ...]] = ()
    # Whether the framework's native libraries write banners to the process's stderr (fd 2) when it
    # starts, which %gpuinfo --import and `gpushare doctor --import` keep out of the report.
    noisy_start: ClassVar[bool] = False
    #: Where ``gpushare.calibrate()`` sweeps this framework by default (``"cpu"``, ``"cuda"``):
    #: the frameworks engineers choose paths between there.
    calibrate_on: ClassVar[tuple[str, ...]] = ()
    #: The plain call of this framework that performs each share path into it without gpushare,
    #: ``{x}`` the source array (``gpushare.advise`` shows the one of its pick, so it can go into
    #: code that does not import gpushare). A path missing here has none to show.
    import_calls: ClassVar[dict[str, str]] = {}
    #: This framework's own call that makes a NumPy array of its array ``{x}`` (the first half of
    #: the ``host`` path), and the one that makes its array of NumPy array ``{a}`` (the second).
    to_numpy_call: ClassVar[str | None] = None
    from_numpy_call: ClassVar[str | None] = None
    #: Its own call that moves its array ``{x}`` to ``{device}`` (``cuda:1``, the ``move`` path).
    move_call: ClassVar[str | None] = None

    _installed: bool | None = None

    def host_memory_shared(self, obj: Any) -> bool:
        """Whether ``obj``'s host memory already lies in memory another process can map, so that the
        framework's own transport (``shares_host_memory_across_processes``) hands it over without
        moving it. Asked only of such a framework."""
        return False

    def readonly(self, obj: Any) -> bool:
        """Whether ``obj`` is marked read-only (asked only of a framework whose legacy capsule export
        refuses such arrays: ``legacy_capsule_refuses_readonly``)."""
        return bool(self.inspect(obj).readonly)

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
            try:
                found = importlib.util.find_spec(self.module) is not None
            except ModuleNotFoundError:
                # find_spec of a submodule ("mlx.core") imports its package, which raises where the
                # package is missing: the CUDA matrix crashed on a GPU machine without MLX.
                found = False
            self._installed = self.module in sys.modules or found
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
            raise gpushare_error(
                "framework_not_installed",
                f"{self.name} is not installed in this Python ({sys.executable}); pip install {self.pip_name()}"
            )
        conflict = self.import_conflict()
        if conflict is not None:
            raise gpushare_error("framework_not_installed", conflict)
        try:
            return self.import_module()
        except Exception as e:  # a broken install must not look like a missing one
            raise gpushare_error("framework_not_installed", f"{self.name} is installed but failed to import: {e}") from e

    def import_module(self) -> Any:
        """Imports the framework's module now, without ``load``'s checks: for a caller that checked
        ``import_conflict`` itself and reports a failure in its own words (``gpuinfo``)."""
        return importlib.import_module(self.module)

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

    def described_through_its_memory(self, obj: Any) -> dict | None:
        """``inspect(obj).to_dict()`` for an array ``inspect`` refuses although the array is in
        hand (a worker holds it after a handoff): its memory described through a view the
        framework can export, its dtype, shape and strides as the framework gives them. None: the
        framework's arrays are described by ``inspect`` alone."""
        return None

    def check_source(self, obj: Any, target: str | None = None, path: str | None = None) -> None:
        """Raises a ConversionError for sources this framework refuses to export (torch requires_grad)
        into ``target`` (a framework's name) by ``path`` (None: by its DLPack export)."""

    def check_view_bits(self, obj: Any) -> None:
        """Raises for a lazy view whose values live partly in a bit on the array (PyTorch's conjugate
        and negative bits): no handoff by memory carries the bit, one-process or across processes."""

    def check_copying_export(self, obj: Any, target: str | None = None, path: str | None = None) -> None:
        """``check_source`` for an export asked for a copy (DLPack's ``copy=True``): what the
        framework still refuses then (a copy may resolve a lazy view)."""
        self.check_source(obj, target, path)

    def detached(self, obj: Any) -> Any:
        """``obj``, or where the framework tracks it for gradients (PyTorch's ``requires_grad``,
        Paddle's ``stop_gradient`` off), a view of the same memory without that hold: what gpushare's
        own copies and shared buffers read, as the framework's own moves do."""
        return obj

    def in_device_memory(self, obj: Any) -> bool:
        """Whether ``obj`` lies in memory the host cannot address (``auto`` asks it of every share
        into a framework that cannot address device memory, so it must be cheap): DLPack's
        ``__dlpack_device__``, else the array's description."""
        where = getattr(obj, "__dlpack_device__", None)
        kind = where()[0] if where is not None else self.inspect(obj).dlpack_device[0]
        return int(kind) not in HOST_DEVICE_TYPES

    # -- conversion ------------------------------------------------------------------------
    def from_dlpack(self, obj: Any) -> Any:
        raise gpushare_error("path_not_applicable", f"{self.name} has no from_dlpack for objects")

    def from_capsule(self, capsule: Any) -> Any:
        raise gpushare_error("path_not_applicable", f"{self.name} does not import raw DLPack capsules")

    def to_capsule(self, obj: Any) -> Any:
        """A legacy ``"dltensor"`` capsule: the one kind every capsule consumer (TensorFlow) takes."""
        return obj.__dlpack__()

    def from_cai(self, obj: Any) -> Any:
        raise gpushare_error("path_not_applicable", f"{self.name} does not import __cuda_array_interface__")

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

    def cai_importer(self) -> Callable[[Any], Any]:
        return self.from_cai

    def synchronize(self, obj: Any) -> None:
        """Waits for work queued on the array's device (no-op on CPU)."""

    def current_stream(self, obj: Any) -> int | None:
        """The handle of the framework's current CUDA stream for the array's device, if it has one."""
        return None

    def export_without_stream(self) -> str:
        """What the stream report says of a handoff whose export took no stream
        (``export_takes_stream`` False): why the consumer reads finished values."""
        return f"{self.name}'s export takes no stream; gpushare passed none"

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

    # -- facts the prediction rules read (one typed facts hook) --------------------------------
    # What lets this framework keep 64-bit types where its import narrows them (JAX's x64 flag), as
    # the fix in the warning of a narrowing copy that lost values (adapters/host.py); None: it keeps them.
    keep_64_bit_fix: ClassVar[str | None] = None

    def rule_facts(self) -> dict[str, Any]:
        """What this framework's state tells the prediction rules, by the names of the core's
        ``FrameworkFacts`` (crates/core/src/explain/prediction.rs), which verdicts.py hands to the
        Rust ``Predictor`` as one typed struct:

        - ``keeps_64_bit``: as a target, whether its import keeps 64-bit dtypes (JAX's x64 flag);
        - ``per_thread_default_stream``: as a target, whether it asks producers for stream 2 (CuPy);
        - ``current_device``: as a source, the CUDA device it exports from, where it exports only
          from its current one (PyTorch);
        - ``has_current_context``: whether it has the CUDA context its calls need (PyCUDA);
        - ``dlpack_takes_device``: as a target, whether ``from_dlpack_on`` (a move's ``dlpack``
          path) can run: False here for an adapter that does not provide it.

        Each is a value, for a fact that cannot change once the framework is imported (read once per
        predictor), or a function of no arguments, for one that can (called at a prediction, and
        only where a rule of that handoff reads it). An adapter names only what it knows, and
        keeps what this base says (``{**super().rule_facts(), ...}``)."""
        return {} if type(self).from_dlpack_on is not Adapter.from_dlpack_on else {"dlpack_takes_device": False}

    # -- the host route and the lab's arrays ----------------------------------------------
    def to_numpy(self, obj: Any) -> Any:
        """What users write to get a NumPy array (``.cpu().numpy()``, ``.get()``, …)."""
        import numpy as np

        return np.asarray(obj)

    def host_array(self, obj: Any, on_host: bool) -> Any:
        """The host route's NumPy array of ``obj``: ``to_numpy``, copied where the array lies on
        the host (``on_host``), where ``.numpy()`` and ``np.asarray`` view the source's own memory:
        the naive route copies there."""
        array = self.to_numpy(obj)
        if on_host:
            import numpy as np

            array = np.array(array, copy=True)
        return array

    def from_numpy(self, array: Any, on_host: bool, ordinal: int) -> Any:
        """This framework's array from a NumPy array, on the host or CUDA device ``ordinal``."""
        raise gpushare_error("path_not_applicable", f"{self.name} cannot make an array from NumPy here")

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
    # How its users make another device current (``torch.cuda.set_device``), named when the current
    # device changed and no imported framework is known to have done it.
    current_device_setter: ClassVar[str | None] = None

    def device_scope(self, obj: Any) -> tuple[int, int, Any] | None:
        """``(source ordinal, current ordinal, context manager making the source's device current)``
        when ``obj`` is on a CUDA device other than this framework's current one; None otherwise."""
        return None

    def current_ordinal(self) -> int | None:
        """The CUDA device this framework calls current, asked only once it holds arrays on a GPU
        (None: a framework whose handoffs do not depend on it: no :meth:`device_scope`)."""
        return None

    def device_made_current(self, ordinal: int) -> Any:
        """A context manager that makes CUDA device ``ordinal`` current for this framework and the
        one current before current again after: what a handoff does where :meth:`device_scope`
        finds another device current."""
        return contextlib.nullcontext()

    def from_dlpack_on(self, obj: Any, on_host: bool, ordinal: int) -> Any:
        """``from_dlpack(obj, device=…, copy=True)``: the producer copies to the device (``dl_device``)."""
        raise gpushare_error("path_not_applicable", f"{self.name}'s from_dlpack takes no device here")

    def move(self, obj: Any, on_host: bool, ordinal: int) -> Any:
        """This framework's own move of ``obj`` to the host or CUDA device ``ordinal``."""
        raise gpushare_error("path_not_applicable", f"{self.name} has no move between devices")

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

    # -- Across processes: what gpushare.processes asks of the framework --------
    def process_steps(self) -> Any:
        """The framework's own steps of the process paths it implements (``process_paths``: its
        multiprocessing sharing, its distributed send/recv) and of the worker's tensors for them;
        None for a framework that implements none."""
        return None

    def host_view(self, obj: Any) -> Any:
        """A NumPy view of an array in host memory, without a copy where NumPy can view it (the
        ``shm`` path copies it into a segment from there)."""
        import numpy as np

        return np.asarray(obj)


def probe_export(array: Any) -> str:
    """What ``array.__dlpack__`` hands a consumer that accepts DLPack 1.x: "versioned" or "legacy"
    (where ``__dlpack__`` predates max_version, NumPy < 2.1). A capsule's repr names its kind."""
    return "versioned" if "dltensor_versioned" in repr(versioned_capsule(array)) else "legacy"


def major_version(version: str | None) -> int:
    try:
        return int((version or "0").split(".")[0])
    except ValueError:
        return 0

