"""Transfer paths: each builds a function ``source_array -> target_array`` for a framework pair.

Every path has the same name in magic flags, the API, tables and JSON. A path that does not apply
to a pair raises :class:`PathNotApplicableError` with the reason when it is *built*, before anything
is converted.
"""

from __future__ import annotations

from typing import Any, Callable

from gpushare.adapters import Adapter
from gpushare.exceptions import PathNotApplicableError

Route = Callable[[Any], Any]

#: Paths in the order tables list them. ``auto`` resolves to one of them.
PATH_NAMES = ("dlpack", "capsule", "cai", "host", "pinned", "copy", "shared")
PATH_DESCRIPTIONS = {
    "dlpack": "the array-API protocol: the consumer's from_dlpack(obj)",
    "capsule": "legacy explicit capsule: to_dlpack → from_dlpack(capsule); the only way into TensorFlow",
    "cai": "__cuda_array_interface__ (CuPy, Numba, PyTorch)",
    "host": "the naive route through NumPy on the host",
    "pinned": "host staging through a page-locked buffer, copied by the Rust core with the CUDA driver",
    "copy": "a device-to-device copy, then a zero-copy handoff",
    "shared": "a SharedBuffer: memory owned by gpushare, handed to every framework by DLPack",
    "auto": "the fastest correct path for this pair",
}

_BUILDERS: dict[str, Callable[[Adapter, Adapter], Route]] = {}


def register(name: str) -> Callable[[Callable[[Adapter, Adapter], Route]], Callable[[Adapter, Adapter], Route]]:
    """Registers a route builder under a path name (paths beyond the core add themselves here)."""

    def wrap(builder: Callable[[Adapter, Adapter], Route]) -> Callable[[Adapter, Adapter], Route]:
        _BUILDERS[name] = builder
        return builder

    return wrap


def available() -> tuple[str, ...]:
    return tuple(name for name in PATH_NAMES if name in _BUILDERS)


def resolve_auto(src: Adapter, dst: Adapter) -> str:
    """The fastest correct path for a pair: DLPack, except into TensorFlow (capsules only) and
    Numba (``__cuda_array_interface__`` only), and out of Numba (no ``__dlpack__``)."""
    if src.name == "numba" or dst.name == "numba":
        return "cai"
    if not dst.accepts_objects:
        return "capsule"
    return "dlpack"


_ROUTES: dict[tuple[str, str, str], tuple[str, Route]] = {}


def route(src: Adapter, dst: Adapter, path: str) -> tuple[str, Route]:
    """The resolved path name and its conversion function (cached: builders depend only on the pair)."""
    key = (src.name, dst.name, path)
    cached = _ROUTES.get(key)
    if cached is None:
        cached = _ROUTES[key] = _build_route(src, dst, path)
    return cached


def _build_route(src: Adapter, dst: Adapter, path: str) -> tuple[str, Route]:
    name = resolve_auto(src, dst) if path == "auto" else path
    builder = _BUILDERS.get(name)
    if builder is None:
        known = ", ".join((*PATH_NAMES, "auto"))
        raise PathNotApplicableError(f"unknown transfer path {path!r}; known paths: {known}")
    return name, builder(src, dst)


@register("dlpack")
def _dlpack(src: Adapter, dst: Adapter) -> Route:
    if not dst.accepts_objects:
        return dst.from_dlpack  # raises the adapter's own explanation when called
    if src.name == "numba":
        raise PathNotApplicableError("Numba device arrays have no __dlpack__; use path='cai'")
    return dst.from_dlpack


@register("capsule")
def _capsule(src: Adapter, dst: Adapter) -> Route:
    if not dst.accepts_capsules:
        raise PathNotApplicableError(
            f"{dst.name} does not import raw DLPack capsules; use path='dlpack'"
        )
    to_capsule, from_capsule = src.to_capsule, dst.from_capsule

    def convert(obj: Any) -> Any:
        return from_capsule(to_capsule(obj))

    return convert


@register("cai")
def _cai(src: Adapter, dst: Adapter) -> Route:
    if src.name in ("numpy", "tf"):
        raise PathNotApplicableError(f"{src.name} arrays do not expose __cuda_array_interface__")
    return dst.from_cai
