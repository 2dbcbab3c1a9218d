"""The Python API: ``share``, ``share_chain``, ``inspect``. The magics are thin over these."""

from __future__ import annotations

import functools
import warnings
from typing import Any, Iterator, Sequence

from gpushare import _native, advice, auto, devices, model_cache, verdicts
from gpushare.adapters import Adapter, adapter_for, adapter_of, framework
from gpushare.arguments import timing as _checked_timing
from gpushare.adapters.host import values_lost as _values_lost
from gpushare.exceptions import GpushareError, GpushareWarning
from gpushare.ledger import TRACKED_FRAMEWORKS, allocator_memory
from gpushare.paths import checks_source, route
from gpushare.warn_site import user_stacklevel as _user_stacklevel

ShareResult = _native.share.ShareResult
# Native: the common share goes from the caller straight to its plan, and the rest to
# plan_and_share below.
share = _native.share.share
TensorInfo = _native.share.TensorInfo


# Plans are kept by the planner of the model `auto` consults (model_cache.planner().plans), keyed
# (type of the array, target, path, source, device, already there), or (type of the array, target)
# for `auto` with none of the others. What else decides a share's path (where the array lies, its
# dtype, layout and size, whether it is read-only, the producer's state, the cost model) the plan's
# one `auto` reads per array, in the core (crates/core/src/explain/auto.rs): a plan is never reused
# for an array whose path could differ, and a new model comes with a new planner, without plans.


def inspect(obj: Any) -> TensorInfo:
    """What an array is: framework, dtype, shape, strides (elements), device in the framework's words
    and DLPack's, data address, bytes spanned, contiguity, alignment, read-only flag, CUDA attributes.

    Inspection reads a DLPack capsule without consuming it: the array is left as it was.
    """
    # A framework's failure is explained in Rust, as every share's is (its exception as __cause__).
    return _native.share.inspect_explained(adapter_of(obj), obj)


def plan_and_share(
    obj: Any,
    to: str,
    *,
    path: str = "auto",
    repeat: int | None = None,
    number: int | None = None,
    source: str | None = None,
    name: str | None = None,
    origin: TensorInfo | None = None,
    warmup: int = 0,
    budget: float | None = None,
    observe: bool = False,
    device: str | None = None,
    across: Any = None,
) -> ShareResult:
    """``gpushare.share`` (its documentation is there) where it is not the common share: another
    path, timing asked for, a worker, the first share of its kind, or an argument to check.

    ``gpushare.share`` is native (crates/python/src/binding/entry.rs): a share whose plan is made
    runs from the caller straight into the core, and everything else comes here, with the
    arguments as they were given.
    """
    common = path == "auto" and source is None and across is None
    repeat, number, warmup, budget = _checked_timing(repeat, number, warmup, budget)
    if (repeat is not None and repeat < 1) or (number is not None and number < 1):
        raise ValueError("repeat and number must be at least 1")
    if across is not None and device is not None:
        raise ValueError("device= and across= do not combine: a worker's arrays live on its own device (Worker(device=...))")
    if across is not None:
        from gpushare import processes

        return processes.share_across(obj, to, across, path=path, repeat=repeat or 1)
    if budget is not None and not budget > 0:
        raise ValueError(f"budget is a positive number of seconds, got {budget!r}")
    already_there = False
    moving_by_auto = device is not None and path == "auto"
    if device is not None and not moving_by_auto:
        path, device, already_there = _move_path(obj, to, path, device, source)
    # What depends only on the array's type, the target and the path is worked out once, into a plan
    # that runs every later share of that kind in the Rust core (crates/python/src/binding/plan.rs),
    # where `auto` is decided for each array (a move's too).
    # The common shares above are keyed by the array's type, the target and the device alone.
    if common:
        plan_key = (type(obj), to) if device is None else (type(obj), to, device)
    else:
        plan_key = (type(obj), to, path, source, device, already_there)
    plans = model_cache.planner().plans
    try:
        plan = plans.get(plan_key)
    except TypeError:  # an unhashable name: framework() below says what is wrong with it
        plan_key, plan = None, None
    if plan is None:
        if device is None:
            plan = _plan(obj, to, path, source)
        elif moving_by_auto:
            plan = _move_auto_plan(obj, to, source, device)
        else:
            plan = _move_plan(obj, to, path, source, device, already_there)
        if plan_key is not None:
            plans[plan_key] = plan
    if budget is None:
        result = plan.run(obj, repeat or 1, number or 1, name, origin, warmup=warmup, observe=observe)
    else:  # the budget's policy, with -r/-n pinned only where asked for
        result = plan.run(obj, repeat, number, name, origin, warmup=warmup, budget=budget, observe=observe)
    if result.owes_warning:
        warn_about(obj, result)
    return result


def warn_about(obj: Any, result: ShareResult) -> None:
    """The warnings a share owes its caller: a writable view of read-only memory, and a copy that
    changed the dtype and lost values."""
    # Asked of the result as words and a flag: its source and target TensorInfo are made only
    # where a copy changed the dtype (every move, and jax→torch's warning, asked on every share).
    warning = result.readonly_warning
    if warning is not None:
        warnings.warn(warning, GpushareWarning, stacklevel=_user_stacklevel())
    if not result.shared and result.dtype_changed:
        lost = values_lost(obj, result.value)
        if lost is not None:
            source_info, target_info = result.source, result.target
            warnings.warn(
                f"{result.pair}: the copy changed the dtype {source_info.dtype} → {target_info.dtype} and {lost}",
                GpushareWarning,
                stacklevel=_user_stacklevel(),
            )


def values_lost(source: Any, value: Any) -> str | None:
    """When a copy changed the dtype (JAX without x64 narrows 64-bit types), whether the values
    survived: None if every value is equal, else what was lost, in words (adapters/host.py)."""
    try:
        src, dst = adapter_of(source), adapter_of(value)
    except Exception:  # a comparison gpushare cannot make says nothing
        return None
    return _values_lost(src, source, dst, value)


def _plan(obj: Any, to: str, path: str, source: str | None) -> Any:
    """The SharePlan for arrays like ``obj`` to framework ``to`` by ``path``: names checked, the
    target imported, the route built. A path that does not apply raises here, with its prediction."""
    dst = framework(to)
    src = adapter_for(obj, framework(source) if source is not None else None)
    dst.load()
    try:
        # The route `auto` starts from, for where this array lies (each array's own `auto` picks the
        # route that runs it).
        source_device = _source_device(src, obj) if path == "auto" else (1, 0)
        if path != "auto":
            path_name, convert = route(src, dst, path)
        else:
            try:
                path_name, convert = auto.route(src, dst, source_device)
            except GpushareError:
                # The model's pick cannot be built here (a model made where the CUDA driver was
                # usable, say): the plan starts from the rules' own path.
                path_name = auto.choice(src, dst, source_device, rules_only=True)[0]
                path_name, convert = route(src, dst, path_name)
    except GpushareError as e:  # the path does not apply to this pair: predicted too
        try:
            src_info = src.inspect(obj)
        except Exception:  # nothing to predict from; the path error is the one to report
            e.predicted = None
            raise e from None
        e.predicted = verdicts.predict(src, dst, src_info, path)
        raise
    by_auto = path == "auto"
    # `auto` is decided again for each array by the predictor's own rule (where it lies, its dtype,
    # layout and size, the producer's state), and the plan runs that path: the route for another
    # path is built when an array first takes it.
    route_for = (lambda other: (route(src, dst, other)[1], checks_source(other))) if by_auto else None
    return _native.share.SharePlan(
        src, dst, path_name, convert, verdicts.predictor(src, dst, path),
        _pair_allocators(src, dst), check_source=checks_source(path_name), route_for=route_for,
    )


def _source_device(src: Adapter, obj: Any) -> tuple[int, int]:
    """DLPack's ``(device_type, id)`` of ``obj``; the host where it cannot be described (the
    handoff then reports what is wrong with it)."""
    return _source_place(src, obj)[0]


def _source_place(src: Adapter, obj: Any, with_size: bool = False) -> tuple[tuple[int, int], int | None]:
    """``(DLPack's (device_type, id), bytes of its elements)`` of ``obj`` from one description; the host and
    no size where it cannot be described (the handoff then reports what is wrong with it). The
    size only ``with_size`` (else None: nothing asks it)."""
    try:
        info = src.inspect(obj)
    except Exception:
        return (1, 0), None
    kind, ordinal = info.dlpack_device
    return (int(kind), int(ordinal)), (int(info.payload_bytes) if with_size else None)


def _pair_allocators(src: Any, dst: Any) -> Any:
    """The ledger's allocator probe for a share from ``src`` to ``dst``: their two allocators only.
    A handoff allocates in its target's allocator (a framework's copy), in its source's (an export
    that copies), or outside every framework (gpushare's own buffers), which the driver's figure
    shows; asking every other imported framework cost each observed share tens of microseconds
    on a GPU (JAX's memory_stats) and could never show a change. The names are worked out here,
    once per plan, in the ledger's order: the probe runs twice in every observed share."""
    pair = {src.module, dst.module}
    return functools.partial(allocator_memory, frameworks=tuple(n for n in TRACKED_FRAMEWORKS if n in pair))


def _move_path(obj: Any, to: str, path: str, device: str, source: str | None) -> tuple[str, str | None, bool]:
    """``(path, device, already_there)`` of a share with ``device=``: the device checked (a CUDA
    device that is not here raises CudaError), ``auto`` resolved for this array by the one
    ``auto``, and ``device`` None when the array is already there and a path that is no move was
    asked for (a plain handoff)."""
    on_host, ordinal = devices.check_device(device)
    if path != "move" and path in devices.MOVE_PATHS:
        # A move path asked by name runs as asked wherever the array lies (only `move` does nothing
        # where it already is): no need to describe the array here, which the plan does anyway.
        return path, devices.device_name(on_host, ordinal), False
    src = adapter_for(obj, framework(source) if source is not None else None)
    # With a calibrated model the move's path may depend on the array's size (a peer copy starts
    # later and streams faster than the framework's own move): asked of the array, not assumed.
    calibrated = path == "auto" and model_cache.auto_model() is not None
    source_device, nbytes = _source_place(src, obj, calibrated)
    destination = devices.dlpack_place(on_host, ordinal)
    here = devices.already_on(source_device, destination)
    if here and path != "auto" and path not in devices.MOVE_PATHS:
        return path, None, True
    if path == "auto":
        path = _move_auto(obj, src, framework(to), source_device, destination, nbytes)
    return path, devices.device_name(on_host, ordinal), here


def _move_auto(obj: Any, src: Adapter, dst: Adapter, source_device: tuple[int, int], destination: tuple[int, int],
               nbytes: int | None) -> str:
    """The path THE ``auto`` takes to move ``obj`` from ``source_device`` to ``destination``: the
    planner's, worked out once per kind of move and range of sizes; the driver is asked of the
    producer only where its state changes the path."""
    return model_cache.planner().move_auto(
        src, dst, source_device, destination, nbytes, lambda: advice.producer_state(src, obj) == "busy",
    )


def _move_plan(obj: Any, to: str, path: str, source: str | None, device: str, already_there: bool = False) -> Any:
    """The SharePlan of a move of arrays like ``obj`` to ``device``, handed to framework ``to``."""

    dst = framework(to)
    src = adapter_for(obj, framework(source) if source is not None else None)
    dst.load()
    path_name, convert = devices.move_route(src, dst, path, device, already_there)
    predictor = verdicts.move_predictor(src, dst, path_name, devices.dlpack_place(*devices.check_device(device)))
    return _native.share.SharePlan(
        src, dst, path_name, convert, predictor, _pair_allocators(src, dst),
        check_source=devices.move_checks_source(path_name), kind="move",
    )


def _move_auto_plan(obj: Any, to: str, source: str | None, device: str) -> Any:
    """The SharePlan of ``auto`` moves of arrays like ``obj`` to ``device``, handed to framework
    ``to``: the core decides each array's path with the planner's ``move_auto`` (from where the
    array lies and, with a cost model, its size and the producer's state) and runs that path's
    route, predicted for that path. Raises CudaError for a CUDA device that is not here."""
    on_host, ordinal = devices.check_device(device)
    device = devices.device_name(on_host, ordinal)
    destination = devices.dlpack_place(on_host, ordinal)
    dst = framework(to)
    src = adapter_for(obj, framework(source) if source is not None else None)
    dst.load()
    # The plan starts from this array's path (a path that cannot make the move raises here).
    path, _, here = _move_path(obj, to, "auto", device, source)
    path_name, convert = devices.move_route(src, dst, path, device, here)

    def route_for(other: str, already_there: bool) -> tuple[Any, bool, Any]:
        _, other_convert = devices.move_route(src, dst, other, device, already_there)
        return other_convert, devices.move_checks_source(other), verdicts.move_predictor(src, dst, other, destination)

    return _native.share.SharePlan(
        src, dst, path_name, convert, verdicts.move_predictor(src, dst, path_name, destination), _pair_allocators(src, dst),
        check_source=devices.move_checks_source(path_name), kind="move",
        move_auto=(model_cache.planner(), destination, route_for),
    )


def parse_chain(spec: str) -> tuple[str | None, list[str]]:
    """``"torch->jax->tf"`` → ``("torch", ["jax", "tf"])``; ``"->jax"`` → ``(None, ["jax"])``;
    ``"torch→jax"`` as ``"torch->jax"`` (read by the core's one parser of routes). Names are
    checked (with a suggestion for typos)."""
    src, targets = _native.text.parse_route(spec)
    return (framework(src).name if src else None), [framework(p).name for p in targets]


def share_chain(
    obj: Any,
    targets: Sequence[str],
    *,
    path: str = "auto",
    repeat: int | None = None,
    number: int | None = None,
    source: str | None = None,
    name: str | None = None,
    warmup: int = 0,
    budget: float | None = None,
    observe: bool = False,
    device: str | None = None,
) -> ShareTable:
    """Converts through each framework in turn; in a chain of several hops every hop's result says
    whether it still shares the first source's memory (``shares_origin``; None for a single hop,
    whose verdict says it). Returns a :class:`ShareTable` (one ShareResult per
    hop, indexable and iterable), as ``%share -o`` does, shown as the magics' table."""
    results: list[ShareResult] = []
    # The first source, for the later hops' ``shares_origin``: a single hop is its own verdict, so
    # it is not described twice (what %share does on every run).
    current, origin = obj, (inspect(obj) if len(targets) > 1 else None)
    for i, target in enumerate(targets):
        r = share(
            current, target, path=path, repeat=repeat, number=number,
            source=source if i == 0 else None, name=name, origin=origin,
            warmup=warmup, budget=budget, observe=observe, device=device,
        )
        results.append(r)
        current = r.value
    return ShareTable(results)


class ShareTable:
    """Several handoffs as one table (what the magics show). Indexable by position or variable name."""

    def __init__(self, results: Sequence[ShareResult]):
        self.results = list(results)

    def __len__(self) -> int:
        return len(self.results)

    def __iter__(self) -> Iterator[ShareResult]:
        return iter(self.results)

    def __getitem__(self, key: int | str) -> ShareResult:
        if isinstance(key, str):
            for r in reversed(self.results):
                if r.name == key:
                    return r
            raise KeyError(key)
        return self.results[key]

    @property
    def values(self) -> dict[str, Any]:
        return {f"{r.name}_{r.target.framework}": r.value for r in self.results}

    def to_dict(self) -> list[dict]:
        return [r.to_dict() for r in self.results]

    def to_json(self) -> str:
        return _native.share.render_shares(self.results, "json")

    def to_pandas(self) -> Any:
        """One tidy row per handoff (as ``ShareResult.to_pandas()``), identifying columns first."""
        return _native.share.shares_dataframe(self.results)

    def __repr__(self) -> str:
        return _native.share.render_shares(self.results, "text")

    def _repr_html_(self) -> str:
        return _native.share.render_shares(self.results, "html")

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict:
        return _native.share.shares_mimebundle(self.results)


from gpushare.lab import bench, compare  # noqa: E402  (the transfer-path lab; %share --path all calls api.compare)
