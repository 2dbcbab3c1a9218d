"""``auto``: the policy that picks a path, over the table of paths (:mod:`gpushare.paths`) and the
cost model (:mod:`gpushare.model_cache`).

THE ``auto`` is one function of the core (``crates/core/src/auto.rs``, reached through
``gpushare._native.paths.Pair``); this module asks it questions with what the two adapters declare and
the model this process holds, and builds the route of its pick. It keeps nothing: what ``auto``
decided is kept in the core, per array (a share's) or in the model's planner (a move's).
"""

from __future__ import annotations

from typing import Any

from gpushare import _native, arguments, model_cache, paths
from gpushare.adapters import Adapter


def pair(src: Adapter, dst: Adapter) -> Any:
    """What adapters ``src`` and ``dst`` declare that ``auto`` decides from, as one typed object
    (``gpushare._native.paths.Pair``): every question put to ``auto`` takes it."""
    return _native.paths.Pair.of(src, dst)


def choice(
    src: Adapter, dst: Adapter, source_device: tuple[int, int] = (1, 0),
    destination: tuple[int, int] | None = None, producer_busy: bool = False, source_readonly: bool | None = None,
    nbytes: int | None = None, rules_only: bool = False,
) -> tuple[str, str, str | None]:
    """``(path, kind, why)``: THE ``auto`` for an array of ``src`` lying on ``source_device``
    (DLPack's ``(device_type, id)``), handed to ``dst`` where it lies or, with ``destination``,
    moved there. ``why`` says why where the choice is not the plain handoff (the host route into a
    framework that cannot address device memory; a move). ``producer_busy``: the producer's stream
    has queued work (``gpushare.advice.producer_state``): where the machine is calibrated, a path
    ordered on the device replaces one that waits on the host. ``source_readonly``: whether the
    array is read-only, where known (a legacy capsule replaces DLPack for NumPy only for a writable
    array). ``nbytes``: the array's size, where known: the model decides for the range of sizes it
    lies in (:func:`size_breaks`); None: at 1 MiB. ``rules_only``: the rules' choice, whatever the
    cost model says."""
    return pair(src, dst).auto(_native.paths.HandoffFacts(
        tuple(source_device), destination, model=None if rules_only else model_cache.auto_model(), nbytes=nbytes,
        producer_busy=producer_busy, source_readonly=source_readonly,
    ))


def path_for(src: Adapter, dst: Adapter, source_device: tuple[int, int] = (1, 0)) -> str:
    """The path ``auto`` takes for an array of ``src`` on ``source_device`` handed to ``dst``."""
    return choice(src, dst, source_device)[0]


def size_breaks(
    src: Adapter, dst: Adapter, source_device: tuple[int, int] = (1, 0),
    destination: tuple[int, int] | None = None, source_readonly: bool | None = None,
) -> tuple[int, ...]:
    """The sizes, in bytes, at which :func:`choice`'s path for these facts may change with the
    array's size (empty: one path at every size, as for every pair whose paths share: they move no
    bytes). The cost model decides once per range between them, so one choice, one route and one
    plan serve a whole range (``bisect.bisect_right(breaks, nbytes)`` names it). A share keeps its
    own ranges in the core (its ``auto`` per array; a move's, the planner's)."""
    model = model_cache.auto_model()
    if model is None:
        return ()
    return tuple(pair(src, dst).size_breaks(_native.paths.HandoffFacts(
        tuple(source_device), destination, model=model, source_readonly=source_readonly,
    )))


def ranges(
    src: Adapter | str, dst: Adapter | str, source_device: tuple[int, int] = (1, 0),
    destination: tuple[int, int] | None = None, source_readonly: bool | None = None,
) -> list[tuple[int, int | None, str, str | None]]:
    """``(from, below or None, path, close or None)``: the path THE ``auto`` takes for each range of
    sizes of these facts (the ranges of :func:`size_breaks`, neighbours with the same path joined;
    one range where one path serves every size), and ``close``, another path it could take that the
    model predicts within its stated error there: a tie the model cannot break
    (``crates/core/src/auto.rs``, ``auto_ranges``). Without a model, the rules' one range.
    ``src`` and ``dst``: adapters, or the frameworks' names."""
    src, dst = arguments.adapter("src", src), arguments.adapter("dst", dst)
    return list(pair(src, dst).ranges(_native.paths.HandoffFacts(
        tuple(source_device), destination, model=model_cache.auto_model(), source_readonly=source_readonly,
    )))


def readonly_if_needed(src: Adapter, obj: Any) -> bool | None:
    """Whether ``obj`` is read-only, where ``auto`` depends on it: on a calibrated machine, for a
    source whose legacy capsule export refuses read-only arrays (NumPy's), the model may take a
    capsule for a writable array only. None elsewhere (asked of nothing)."""
    if not src.legacy_capsule_refuses_readonly or model_cache.auto_model() is None:
        return None
    return src.readonly(obj)


def across_processes(obj: Any) -> str:
    """The process path THE ``auto`` takes for handing ``obj`` to another process (``across=``):
    ``ipc`` for device memory, ``shm`` for host memory, the framework's own transport for host
    memory it already shares (gpushare.processes calls this)."""
    return process_choice(obj)[0]


def process_choice(obj: Any) -> tuple[str, str | None]:
    """:func:`across_processes` with the core's reason for the path, in words."""
    from gpushare.adapters import adapter_of

    src = adapter_of(obj)
    on_device = paths.in_device_memory(obj, src)
    shared = not on_device and src.shares_host_memory_across_processes and src.host_memory_shared(obj)
    path, _kind, why = pair(src, src).auto(_native.paths.HandoffFacts((2, 0) if on_device else (1, 0), across=True, host_shared=shared))
    return path, why


def route(src: Adapter, dst: Adapter, source_device: tuple[int, int] = (1, 0)) -> tuple[str, paths.Route]:
    """``(path, conversion)`` of ``auto``'s pick for arrays of ``src`` on ``source_device``: the
    route a plan starts from (asked when a plan is made; a share's ``auto`` is decided again for
    each array, by the core, crates/core/src/explain/auto.rs). Where the pick is not the plain
    handoff, every share by it carries the reason (:class:`gpushare.paths.ChosenRoute`)."""
    name, _, why = choice(src, dst, source_device)
    _, convert = paths.route(src, dst, name)
    return name, convert if why is None else paths.ChosenRoute(convert, why)
