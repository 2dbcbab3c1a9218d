"""The transfer-path laboratory: every way to move an array from one framework to another, side by
side, timed properly.

- :func:`compare` tries every transfer path for one array (``%share x ->jax --path all``) and
  returns a :class:`Comparison`: one row per path with its verdict (shared, copied, failed — a path
  that does not apply is a row with the reason, never hidden), bytes moved, median and minimum time,
  IQR, bandwidth and, on a GPU, device time; the fastest is highlighted.
- :func:`bench` sweeps sizes × paths (``%sharebench torch->jax``) and returns a :class:`Benchmark`
  with tables and an SVG plot of time and bandwidth against size.
- :class:`SharedBuffer` is memory owned by gpushare's Rust core, handed to any number of
  frameworks at once.

Tables, JSON and the plot are rendered by the Rust core; raw seconds and bytes stay in the data.
"""

from __future__ import annotations

import warnings
from typing import Any, Iterable, Sequence

from gpushare import _native, arguments, auto, verdicts
from gpushare.adapters import Adapter, adapter_for, framework
from gpushare.exceptions import GpushareWarning, PathNotApplicableError
from gpushare import paths as paths_module
from gpushare.paths import _shared_buffer_importer, checks_source, route
from gpushare.progress import bar as progress_bar
from gpushare.sweep_sizes import check_fits, whole_elements
from gpushare.warn_site import user_stacklevel

SharedBuffer = _native.share.SharedBuffer
#: Every transfer path for one array (crates/python/src/binding/lab.rs): rows, text, HTML, JSON, to_pandas().
Comparison = _native.lab.Comparison
#: A sweep over sizes × paths (crates/python/src/binding/lab.rs): points, tables, SVG plot, plot(), to_pandas().
Benchmark = _native.lab.Benchmark

#: Sizes ``bench`` and ``%sharebench`` sweep when none are given.
DEFAULT_SIZES = ("4KiB", "1MiB", "256MiB")


def parse_size(size: int | str) -> int:
    """``"4KiB"`` → 4096, ``"1.5 MB"`` → 1500000, ``65536`` → 65536 (bytes)."""
    if isinstance(size, int) and not isinstance(size, bool):
        if size < 0:
            raise ValueError(f"a size is at least 0 bytes, got {size}")
        return size
    if not isinstance(size, str):
        raise ValueError(f"cannot read size {size!r}: write e.g. 4KiB, 1MiB, 256MiB, 1GiB or a number of bytes")
    # The core's one parser of sizes, which the command line reads them with too.
    return _native.text.parse_size(size)


def parse_paths(paths: str | Sequence[str]) -> list[str]:
    """``"all"`` → every path; ``"dlpack,copy"`` or a list → those paths (checked)."""
    return paths_module.parse_list("share", paths)


def buffer_to(buf: Any, to: Any) -> Any:
    """A view of :class:`SharedBuffer` ``buf`` in framework ``to`` (a name or an adapter), sharing
    its memory: by DLPack (TensorFlow: a legacy capsule; Numba: ``__cuda_array_interface__``), as
    the framework's adapter imports one. What ``SharedBuffer.to`` does.

    >>> buf = gpushare.SharedBuffer((4,), "float32", "cpu")   # doctest: +SKIP
    >>> gpushare.lab.buffer_to(buf, "numpy")                  # doctest: +SKIP
    """
    dst = to if isinstance(to, Adapter) else framework(to)
    dst.load()
    return _shared_buffer_importer(dst)(buf)


def empty_cache() -> None:
    """Frees the device buffers the ``copy`` and ``pinned`` paths keep for reuse."""
    _native.share.shared_pool_clear()


def _path_route(
    src: Adapter, dst: Adapter, path: str, is_auto: bool, device: str | None, already_there: bool,
    described: Any = None,
) -> tuple[Any, Any, bool, str]:
    """What the lab's loop (crates/python/src/binding/lab_run.rs) needs of one path, from the adapters:
    ``(convert, predictor, check_source, kind)``. It raises PathNotApplicableError for a path that
    does not apply, which the loop turns into a row with the reason. With ``device``, the path is
    a move there (``already_there``: the array is on that device). ``is_auto``: the row of the path
    ``auto`` took, predicted as ``auto`` (the predictor then says why auto took it). ``described``:
    the array's TensorInfo, where the loop has it: a path the rules say cannot run is refused in
    the rules' own words, the sentence ``advise`` gives for the same path."""
    if device is None:
        predictor = verdicts.predictor(src, dst, "auto" if is_auto else path)
        try:
            _, convert = route(src, dst, path)
        except PathNotApplicableError as e:
            raise _in_the_rules_words(e, predictor, described) from None
        return convert, predictor, checks_source(path), "share"
    from gpushare.devices import check_device, dlpack_place, move_checks_source, move_route

    predictor = verdicts.move_predictor(src, dst, path, dlpack_place(*check_device(device)))
    try:
        _, convert = move_route(src, dst, path, device, already_there)
    except PathNotApplicableError as e:
        raise _in_the_rules_words(e, predictor, described) from None
    return convert, predictor, move_checks_source(path), "move"


def _in_the_rules_words(e: PathNotApplicableError, predictor: Any, described: Any) -> PathNotApplicableError:
    """``e`` with the reason and fix the prediction rules (crates/core/src/explain/) give where
    they too say the path cannot run: one sentence per path, whichever of compare, the sweep and
    advise shows it. The route's own words stay where the rules make no such prediction."""
    if predictor is None or described is None:
        return e
    p = predictor(described)
    if p.verdict != "failed" or not p.reason:
        return e
    e.reason, e.fix = p.reason, p.fix
    return e


def _link_for(device: str | None) -> Any:
    """For a move to ``device``: ``link(source_ordinal, path)``, the link the path crosses, which the
    loop notes beside the row's bandwidth."""
    if device is None:
        return None
    from gpushare import topology

    return lambda ordinal, path: topology.link_for(ordinal, device, path)


def compare(
    obj: Any,
    to: str,
    paths: str | Sequence[str] = "all",
    *,
    repeat: int = 7,
    number: int | None = None,
    source: str | None = None,
    warmup: int = 1,
    min_sample_time: float = 0.005,
    device: str | None = None,
    across: Any = None,
) -> Comparison:
    """Tries every transfer path (or those named) from ``obj`` to framework ``to`` and times each.

    Parameters
    ----------
    obj : an array of PyTorch, TensorFlow, JAX, NumPy, CuPy or Numba.
    to : the target framework.
    paths : ``"all"`` (every path in the table order of DESIGN.md), a comma-separated string or a list.
    repeat, number : samples and handoffs per sample (``%timeit``'s -r/-n); ``number=None`` picks
        it so a sample lasts ``min_sample_time`` seconds.
    source : the framework ``obj`` must belong to (checked); inferred when None.
    warmup : untimed handoffs before timing (at least one: it also finds paths that do not apply).
    device : ``"cuda:1"``/``"cpu"``: compare the moves there instead (``p2p``, ``pinned``, ``dlpack``
        with ``dl_device``/``copy=True``, and ``move``, the framework's own, as the baseline); each
        copied row notes its bandwidth against the link's limit where gpushare knows it.
    across : a :class:`gpushare.Worker` or ``"process"``: compare the process paths instead
        (:func:`gpushare.processes.compare`; ``paths`` then names process paths).

    Returns
    -------
    Comparison: one row per path, failures and paths that do not apply included with their reason.

    Examples
    --------
    >>> gpushare.compare(torch.ones(1024), "jax")          # doctest: +SKIP
    """
    # Whole numbers named in words (1.5, "3" or True are not a count of samples).
    repeat, number = arguments.count("repeat", repeat, optional=False), arguments.count("number", number)
    if across is not None and device is not None:
        raise ValueError("device= and across= do not combine: a worker's arrays live on its own device (Worker(device=...))")
    if across is not None:
        from gpushare import processes

        return processes.compare(obj, to, paths, across=across, repeat=repeat)
    if device is not None:
        from gpushare import devices

        devices.check_device(device)
        names = list(devices.MOVE_PATHS) if paths in ("all", ["all"]) else parse_move_paths(paths)
    else:
        names = parse_paths(paths)
    dst = framework(to)
    src = adapter_for(obj, framework(source) if source is not None else None)
    dst.load()
    readonly = auto.readonly_if_needed(src, obj)  # as share's auto takes it for this array
    # The loop describes the array once; each path checks the source itself where its route needs
    # it (not the host route): a torch tensor that requires grad or has its conjugate bit set gets a
    # failed row with the fix for DLPack and a working one for the host.
    return _native.lab.compare_paths(
        obj, src, dst, names,
        lambda source_device, nbytes, info: _auto_for(src, dst, source_device, device, readonly, nbytes, info),
        lambda path, is_auto, here, info=None: _path_route(src, dst, path, is_auto, device, here, info),
        repeat=repeat, number=number, warmup=warmup, min_sample_time=min_sample_time, link_for=_link_for(device),
        predict_for=_predict_for(src, dst, device),
    )


def _predict_for(src: Adapter, dst: Adapter, device: str | None) -> Any:
    """What each row was predicted to cost before it ran, from the cost model of this machine
    (``gpushare.advice``), and how its handoff is ordered (where the machine is not calibrated, no
    prediction: the tables then show none)."""
    from gpushare import advice

    return advice.lab_predictor(src.name, dst.name, device)


def _auto_for(src: Adapter, dst: Adapter, source_device: Any, device: str | None,
              source_readonly: bool | None = None, nbytes: int | None = None, info: Any = None) -> tuple[str, bool]:
    """``(path, already_there)``: the path THE ``auto`` (crates/core/src/auto.rs) takes for an array of
    ``src`` on DLPack device ``source_device`` spanning ``nbytes``, handed to ``dst`` where it lies or
    moved to ``device``, and whether the array is on ``device`` already: what ``share`` takes. With
    ``info`` (the array's description, or one of the same dtype and layout), within the device, the
    planner's word for that array, as a share of it runs (its dtype can change what a path gives)."""
    source_device = (int(source_device[0]), int(source_device[1] or 0))
    if device is None:
        if info is not None:
            return verdicts.predictor(src, dst, "auto").chosen_path(info, nbytes), False
        return auto.choice(src, dst, source_device, source_readonly=source_readonly, nbytes=nbytes)[0], False
    from gpushare.devices import already_on, check_device, dlpack_place

    destination = dlpack_place(*check_device(device))
    return auto.choice(src, dst, source_device, destination, nbytes=nbytes)[0], already_on(source_device, destination)


def _probe_info(src: Adapter, dtype: str, device: str) -> Any:
    """The description of a small array like a sweep's (its dtype, contiguous, on ``device``), from
    which ``auto`` is decided for each size as a share of such an array decides it; None where the
    source cannot make one (each row then says why)."""
    try:
        return src.inspect(make_array(src, 16, dtype, device))
    except Exception:  # the sweep itself reports what is wrong with such arrays
        return None


def parse_move_paths(paths: str | Sequence[str]) -> list[str]:
    """The paths of a move (``p2p,pinned,dlpack,move``, and ``auto``: the one it takes), checked."""
    return paths_module.parse_list("move", paths)


def _default_device(src: Adapter) -> str:
    """``cuda:0`` when the CUDA driver is usable and the source framework can place arrays there."""
    status = getattr(_native.cuda, "driver_status", None)
    if status is None or not status().get("available"):
        return "cpu"
    try:
        return "cuda:0" if src.has_gpu() else "cpu"
    except Exception:
        return "cpu"


def make_array(src: Adapter, n: int, dtype: str, device: str) -> Any:
    """A 1-d array of ``n`` ones of ``dtype`` made by framework ``src`` on ``device``."""
    from gpushare.devices import parse_device

    on_host, ordinal = parse_device(device)
    return src.ones(n, dtype, on_host, ordinal)


def bench(
    src: str,
    dst: str,
    sizes: Iterable[int | str] = DEFAULT_SIZES,
    dtype: str = "float32",
    device: str | None = None,
    paths: str | Sequence[str] = "all",
    *,
    repeat: int = 5,
    number: int | None = None,
    warmup: int = 1,
    min_sample_time: float = 0.005,
    progress: bool = True,
    to_device: str | None = None,
    across: Any = None,
) -> Benchmark:
    """Sweeps sizes × paths for handoffs from framework ``src`` to ``dst``.

    For each size a 1-d array of ones is made by ``src`` on ``device`` (default ``cuda:0`` when
    CUDA is usable, else ``cpu``) and every path is measured as :func:`compare` does (the ``shared``
    path starts from a SharedBuffer viewed by ``src``). A progress bar shows the sweep where someone
    watches (a notebook, emptied when the sweep ends; a terminal, tqdm when installed; never in a
    script whose stderr is not a terminal, see :mod:`gpushare.progress`). Ctrl-C between
    measurements stops the sweep: the points measured so far come back
    with ``interrupted=True`` and a warning.

    ``across="processes"`` (or a :class:`gpushare.Worker`) sweeps the process paths instead
    (:func:`gpushare.processes.bench`): a worker process views each array in ``dst``.

    Examples
    --------
    >>> b = gpushare.bench("torch", "jax", sizes=["4KiB", "1MiB"])   # doctest: +SKIP
    >>> b.to_pandas()                                                # doctest: +SKIP
    """
    # Whole numbers named in words (1.5, "3" or True are not a count of samples).
    repeat, number = arguments.count("repeat", repeat, optional=False), arguments.count("number", number)
    if across is not None and to_device is not None:
        raise ValueError("to_device= and across= do not combine: a worker's arrays live on its own device (Worker(device=...))")
    if across is not None:
        from gpushare import processes

        return processes.bench(src, dst, sizes, dtype, device, paths, repeat=repeat, across=across)
    s, d = framework(src), framework(dst)
    if to_device is not None:  # moves: p2p, pinned, dlpack(dl_device), the framework's own
        from gpushare import devices

        devices.check_device(to_device)
        names = list(devices.MOVE_PATHS) if paths in ("all", ["all"]) else parse_move_paths(paths)
    else:
        names = parse_paths(paths)
    size_list = arguments.sizes("sizes", sizes)  # the one reader of size lists, calibrate's too
    if not size_list:
        raise ValueError("no sizes to sweep")
    itemsize = SharedBuffer((0,), dtype).itemsize  # checks the dtype name, bfloat16 included
    size_list = whole_elements(size_list, itemsize)
    s.load()
    d.load()
    device = device or _default_device(s)
    from gpushare.devices import dlpack_place, parse_device

    # Every size must fit where the sweep makes it, refused in one message before the first array.
    check_fits(size_list, [device, to_device or device])

    def elements(size: int) -> int:
        return size // itemsize  # whole elements already (whole_elements above)

    # What auto takes for an array like each size's (a calibrated model may change its mind with
    # size): those paths are measured at every size, and the sweep marks the one a share of the
    # array it made takes. The sweep's arrays are new, so writable (what auto takes may depend on
    # that: NumPy's capsules).
    place, writable = dlpack_place(*parse_device(device)), False if s.legacy_capsule_refuses_readonly else None
    probe = _probe_info(s, dtype, device) if to_device is None else None
    taken = [_auto_for(s, d, place, to_device, writable, elements(size) * itemsize, probe) for size in size_list]
    autos, here = [path for path, _ in taken], taken[0][1]
    # "auto" stands for every path it takes over the sweep, each measured at every size.
    wants_auto = "auto" in names
    names = list(dict.fromkeys(p for name in names for p in (dict.fromkeys(autos) if name == "auto" else [name])))

    def make_source(size: int, shared: bool) -> Any:
        n = elements(size)
        return SharedBuffer((n,), dtype, device).to(s.name) if shared else make_array(s, n, dtype, device)

    bar = progress_bar(len(size_list) * len(names), f"sharebench {s.name}→{d.name}", progress)
    try:
        result = _native.lab.bench_paths(
            s, d, size_list, names, autos, here, make_source,
            lambda path, is_auto, already_there, info=None: _path_route(s, d, path, is_auto, to_device, already_there, info), bar,
            dtype=dtype, device=device, repeat=repeat, number=number, warmup=warmup,
            min_sample_time=min_sample_time, link_for=_link_for(to_device),
            predict_for=_predict_for(s, d, to_device),
            # The path marked auto is the one a share of the sweep's own array takes (where the
            # allocator placed it can decide: JAX copies a NumPy array that is not 64-byte aligned).
            auto_for=lambda source_device, nbytes, info: _auto_for(s, d, source_device, to_device, writable, nbytes, info),
            measure_auto=wants_auto,
        )
    finally:
        bar.close()
    if result.interrupted:
        warnings.warn(
            f"sharebench interrupted: {len(result.points)} of {len(size_list) * len(names)} points measured",
            GpushareWarning, stacklevel=user_stacklevel(),
        )
    return result


__all__ = [
    "DEFAULT_SIZES", "Benchmark", "Comparison", "SharedBuffer", "bench", "buffer_to", "compare", "empty_cache",
    "make_array", "parse_paths", "parse_size",
]
