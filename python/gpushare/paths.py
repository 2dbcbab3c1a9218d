"""Transfer paths: each builds a function ``source_array -> target_array`` for a framework pair.

Every path has the same name in magic flags, the API, tables and JSON. A path that does not apply
to a pair raises :class:`PathNotApplicableError` with the reason when it is *built*, before anything
is converted.
"""

from __future__ import annotations


from typing import Any, Callable, Sequence

from gpushare import _native
from gpushare.adapters import Adapter
from gpushare.exceptions import gpushare_error

Route = Callable[[Any], Any]

#: THE path table (crates/core/src/paths.rs), read once: every path of every kind, with its description,
#: whether it copies by design, its plot colour, whether the rules model it and when it applies.
PATH_TABLE: tuple[dict, ...] = tuple(_native.paths.path_table())


def names_of(kind: str) -> tuple[str, ...]:
    """The paths of ``kind`` (``"share"``, ``"move"``, ``"process"``) in table order, without ``auto``."""
    return tuple(p["name"] for p in PATH_TABLE if p["kind"] == kind)


def describe(kind: str) -> dict[str, str]:
    """Path name → description for ``kind``, ``auto`` included."""
    return {p["name"]: p["description"] for p in PATH_TABLE if p["kind"] in (kind, "any")}


def parse_list(kind: str, paths: str | Sequence[str]) -> list[str]:
    """The paths of ``kind`` that ``paths`` names (``"dlpack,copy"``, a list of names, ``"all"``),
    checked, read by the core's one parser of path lists; ValueError naming the known ones."""
    return _native.text.parse_paths(kind, [paths] if isinstance(paths, str) else [str(p) for p in paths])


#: Paths in the order tables list them. ``auto`` resolves to one of them.
PATH_NAMES = names_of("share")

#: DLPack device types whose memory the host addresses (CPU, CUDA host, ROCm host, CUDA managed).

_BUILDERS: dict[str, Callable[[Adapter, Adapter], Route]] = {}


def register(name: str) -> Callable[[Callable[[Adapter, Adapter], Route]], Callable[[Adapter, Adapter], Route]]:
    """Registers a route builder under a path name (paths beyond the core add themselves here)."""

    def wrap(builder: Callable[[Adapter, Adapter], Route]) -> Callable[[Adapter, Adapter], Route]:
        _BUILDERS[name] = builder
        return builder

    return wrap


def checks_source(path: str) -> bool:
    """Whether the pipeline checks the source (``Adapter.check_source``) before this path: every
    route that exports the source through DLPack or ``__cuda_array_interface__`` does, because the
    export refuses or misreads some sources (a torch tensor that requires grad, or has its conjugate
    or negative bit set). The host route goes through the framework's own NumPy conversion, which
    detaches and resolves such tensors itself."""
    return path != "host"


def in_device_memory(obj: Any, src: Adapter) -> bool:
    """Whether ``obj`` lies in memory the host cannot address, as its adapter says."""
    try:
        return bool(src.in_device_memory(obj))
    except Exception:  # a source that cannot say: the handoff itself reports what is wrong
        return False


class ChosenRoute:
    """A route ``auto`` chose for a reason the result must give (the host route into NumPy from
    device memory): every share by it carries that reason as a note."""

    __slots__ = ("convert", "why", "ordering")

    def __init__(self, convert: Route, why: str):
        self.convert, self.why = convert, why
        self.ordering = getattr(convert, "ordering", None)

    def __call__(self, obj: Any) -> Any:
        return self.convert(obj)

    def take_notes(self) -> list[str]:
        inner = getattr(self.convert, "take_notes", None)
        return [*(inner() if inner is not None else []), self.why]


def _ordered(convert: Route, ordering: str) -> Route:
    """Marks a route with how it orders the two sides' work, for the stream report (read once by
    the pipeline, crates/python/src/binding/plan.rs): routes whose capsule carries no stream say what they did."""
    convert.ordering = ordering  # type: ignore[attr-defined]
    return convert


def _import_without_stream(src: Adapter, dst: Adapter) -> str:
    return (
        f"{dst.name} imports without a stream and runs on streams of its own: gpushare waited for "
        f"{src.name}'s queued work on the source's device before {dst.name} read it"
    )


def route(src: Adapter, dst: Adapter, path: str) -> tuple[str, Route]:
    """``(path, conversion)`` for arrays of ``src`` handed to ``dst`` by ``path``. Built when a plan
    is made (the planner keeps the plan, crates/python/src/binding/plan.rs) or a table runs the
    path: a builder binds what each handoff calls, and depends on nothing else. ``auto`` is not a
    path here: its pick is :func:`gpushare.auto.route`'s."""
    builder = _BUILDERS.get(path)
    if builder is None:
        known = ", ".join((*PATH_NAMES, "auto"))
        raise gpushare_error("path_not_applicable", f"unknown transfer path {path!r}; known paths: {known}")
    # Whatever device another framework made current, the handoff runs with the source's.
    from gpushare.devices import guard

    return path, guard(src, builder(src, dst), path)


@register("dlpack")
def _dlpack(src: Adapter, dst: Adapter) -> Route:
    if not dst.accepts_objects:
        return dst.from_dlpack  # raises the adapter's own explanation when called
    if not src.exports_dlpack:
        raise gpushare_error("path_not_applicable", f"{src.name} arrays have no __dlpack__; use path='cai'")
    importer = dst.dlpack_importer()
    if src.export_takes_stream:
        return importer
    export = src.stream_free_export

    def convert(obj: Any) -> Any:
        return importer(export(obj))

    return _ordered(convert, src.export_without_stream())


@register("capsule")
def _capsule(src: Adapter, dst: Adapter) -> Route:
    if not dst.accepts_capsules:
        raise gpushare_error(
            "path_not_applicable",
            f"{dst.name} does not import raw DLPack capsules; use path='dlpack'"
        )
    to_capsule, from_capsule = src.capsule_exporter(), dst.capsule_importer()

    if dst.import_takes_stream or not src.export_takes_stream:
        # A capsule carries no stream. From an export that takes none, the export says how the work
        # is ordered (TensorFlow's waits); other consumers of raw capsules are the legacy API users
        # asked for.
        def convert(obj: Any) -> Any:
            return from_capsule(to_capsule(obj))

        return convert if src.export_takes_stream else _ordered(convert, src.export_without_stream())

    # Into TensorFlow, which reads on streams of its own: without a wait it could read the
    # source's memory before the source's queued work wrote it.
    synchronize = src.synchronize

    def convert_after_wait(obj: Any) -> Any:
        synchronize(obj)
        return from_capsule(to_capsule(obj))

    return _ordered(convert_after_wait, _import_without_stream(src, dst))


@register("cai")
def _cai(src: Adapter, dst: Adapter) -> Route:
    if not (src.exports_cai or src.cai_view):
        raise gpushare_error("path_not_applicable", f"{src.name} arrays do not expose __cuda_array_interface__")
    if src.exports_cai and src.immutable and not dst.imports_readonly_cai:
        # Measured in every calibration on 2x H200: jax → torch via cai failed with torch's
        # TypeError, a path reported as applicable that never works.
        raise gpushare_error(
            "path_not_applicable",
            f"{src.name} marks its __cuda_array_interface__ read-only and {dst.name} refuses a read-only interface; "
            "use path='dlpack'",
        )
    from_cai = dst.cai_importer()
    if not src.exports_cai:
        # TensorFlow has no interface: gpushare describes the tensor by one (its export waited).
        view = src.cuda_array_view

        def convert_view(obj: Any) -> Any:
            return from_cai(view(obj))

        return convert_view if src.export_takes_stream else _ordered(convert_view, src.export_without_stream())

    in_device_memory = src.in_device_memory

    def convert(obj: Any) -> Any:
        # Host arrays have no CUDA array interface (torch raises on CPU tensors); without this check
        # a consumer such as jnp.asarray would quietly copy through __array__ instead. An array in
        # device memory has one, which the adapter says for a fraction of reading it (torch builds
        # it as a dict, and the consumer reads it again: 3-5 µs of every torch→numba share on an
        # H200); memory the host can address too (managed) may have one: it is read.
        try:
            if not in_device_memory(obj):
                obj.__cuda_array_interface__
        except (AttributeError, RuntimeError, TypeError) as e:
            raise gpushare_error(
                "path_not_applicable",
                f"cai needs an array in CUDA memory; this {src.name} array has no __cuda_array_interface__ ({e})"
            ) from None
        return from_cai(obj)

    return convert


# -- The paths of the transfer-path lab -------------------------------------------------------
# ``host`` is the naive route users write by hand; ``pinned`` and ``copy`` are copies made by the
# Rust core into memory it owns (a SharedBuffer), then handed to the target without a second copy;
# ``shared`` hands the target a SharedBuffer the source already lives in.


def _device_of(src: Adapter, obj: Any) -> tuple[bool, int]:
    """``(in host memory, CUDA ordinal)`` of an array, as its adapter describes it."""
    kind, ordinal = src.inspect(obj).dlpack_device
    return kind in (1, 3), int(ordinal)


@register("host")
def _host(src: Adapter, dst: Adapter) -> Route:
    host_array, from_numpy = src.host_array, dst.from_numpy
    # A target that cannot address device memory (NumPy) keeps the host copy: the route goes back to
    # the source's device only for targets that live there (measured on a GPU: auto's host
    # route from cuda:0 into NumPy asked NumPy for device memory and failed).
    target_on_host = not dst.addresses_device

    def convert(obj: Any) -> Any:
        on_host, ordinal = _device_of(src, obj)
        # On the host, .numpy()/np.asarray are views of the source: the naive route copies there.
        return from_numpy(host_array(obj, on_host), on_host or target_on_host, ordinal)

    return convert


def _cuda_reason() -> str | None:
    """None when the CUDA driver is usable, else why not."""
    from gpushare import _native

    status = getattr(_native.cuda, "driver_status", None)
    if status is None:
        return "this build of gpushare has no CUDA layer"
    s = status()
    return None if s.get("available") else (s.get("reason") or "the CUDA driver is unavailable")


def _shared_buffer_importer(dst: Adapter) -> Route:
    """How ``dst`` takes a SharedBuffer without copying: DLPack, a legacy capsule (TensorFlow), or
    ``__cuda_array_interface__`` (Numba), as ``auto``'s last step says for a source with DLPack."""
    import_by = _native.paths.Pair(accepts_objects=dst.accepts_objects, accepts_capsules=dst.accepts_capsules).auto(_native.paths.HandoffFacts((1, 0)))[0]
    if import_by == "dlpack":
        # Resolved once, as the dlpack route's is (JAX's starts JAX here, before any handoff).
        return dst.dlpack_importer()
    if import_by == "capsule":
        from_capsule = dst.from_capsule
        return lambda buf: from_capsule(buf.__dlpack__())
    return dst.cai_importer()


class OwnCopy:
    """gpushare's own copy (``copy``, ``pinned``, ``p2p``) of ``src``'s arrays into a SharedBuffer,
    on the source's device (``target`` None) or on ``target`` (a move: ``"cuda:1"``), handed to the
    consumer by ``importer``. A move runs in Rust from the pipeline's description of the source
    (crates/python/src/binding/own_copy.rs) wherever the source's device is current; calling it
    reads the array's layout itself (a copy on the source's device, a move guarded for another
    current device, a caller outside the pipeline)."""

    __slots__ = ("method", "target", "importer", "stream_of", "_copy_source", "_detached", "_copy_of")

    def __init__(self, src: Adapter, method: str, target: str | None, importer: Route):
        self.method, self.target, self.importer = method, target, importer
        #: The source's current stream on the array's device: the copy is queued after its work.
        self.stream_of = src.current_stream
        # Bound once, as every route binds what it calls on each handoff.
        self._copy_source, self._detached, self._copy_of = src.copy_source, src.detached, _native.share.SharedBuffer._copy_of

    def __call__(self, obj: Any) -> Any:
        obj = self._detached(obj)
        return self.importer(self._copy_of(self._copy_source(obj), self.method, self.stream_of(obj), self.target))


def _into_shared_buffer(src: Adapter, dst: Adapter, method: str) -> Route:
    if not src.exports_dlpack:
        raise gpushare_error("path_not_applicable", f"{method} reads the source through DLPack and {src.name} arrays have none")
    return OwnCopy(src, method, None, _shared_buffer_importer(dst))


@register("pinned")
def _pinned(src: Adapter, dst: Adapter) -> Route:
    reason = _cuda_reason()
    if reason is not None:
        raise gpushare_error("path_not_applicable", f"pinned needs CUDA: {reason}")
    return _into_shared_buffer(src, dst, "pinned")


@register("copy")
def _copy(src: Adapter, dst: Adapter) -> Route:
    return _into_shared_buffer(src, dst, "copy")


@register("shared")
def _shared(src: Adapter, dst: Adapter) -> Route:
    from gpushare import _native

    if not src.exports_dlpack:
        raise gpushare_error("path_not_applicable", f"shared finds the source's memory through DLPack and {src.name} arrays have none")
    importer = _shared_buffer_importer(dst)
    inspect_capsule, detached = src.inspect_capsule, src.detached
    owner_of = _native.share.SharedBuffer._of

    def convert(obj: Any) -> Any:
        obj = detached(obj)
        buf = owner_of(inspect_capsule(obj))
        if buf is None:
            raise gpushare_error(
                "path_not_applicable",
                "shared hands over a gpushare.SharedBuffer and this array's memory is not one: "
                "make it with gpushare.SharedBuffer(shape, dtype, device).to(framework)"
            )
        return importer(buf)

    return convert
