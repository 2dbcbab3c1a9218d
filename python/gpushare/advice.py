"""Path advice: a cost model of this machine that predicts every path before it runs.

``calibrate()`` measures each path of each framework pair at three or more sizes (a short sweep,
seconds on a CPU) and fits ``time = fixed + bytes / bandwidth`` per path, pair and place: the form
NCCL's tuner uses. The fit, the error it showed on sizes it did not see, and the machine it was made for
(devices, driver, framework versions) are cached in ``$XDG_CACHE_HOME/gpushare/model.json``;
``model()`` reads that cache and says when it is stale. ``advise(x, to, device=…, across=…)``
answers without converting anything: each applicable path's predicted verdict (the rules of
crates/core/src/explain) and time (the model), the recommendation and why. Fitting, predicting,
deciding and rendering are the core's (crates/core/src/advice); this module runs the sweep and
keeps the cache.
"""

from __future__ import annotations

import time
import warnings
from typing import Any, Iterable, Sequence

from gpushare import _native, arguments, auto, devices, machine_ceilings, model_cache, paths, verdicts
# The cached model: `advice.model()`, `advice.forget()` and the rest read as they always did.
from gpushare.model_cache import (  # noqa: F401  (re-exported: gpushare.advice is where users look)
    auto_model, cache_file, forget, machine_key, made_at, model, save, stale_note, summary,
)
from gpushare.adapters import ADAPTERS, HOST_DEVICE_TYPES, adapter_for, framework
from gpushare.adapters.base import Adapter
from gpushare.exceptions import GpushareError, GpushareWarning

CostModel = _native.advice.CostModel
Advice = _native.advice.Advice

#: Seven sizes, no two neighbours more than 16x apart and none more than 8x apart from 64 KiB up
#: (three is the fewest a fit of two numbers can check itself against): a copy's line per range of
#: sizes (crates/core/src/advice/segments.rs) is only as good as its knots are close. With four
#: (64 KiB, 1, 16, 64 MiB) a copy's cost per byte changed between knots where nothing saw it: on the
#: 2-core CPU, copies at 256 KiB still ran in the 2 MiB cache and at 4 MiB at
#: 10 GB/s, while 1 MiB straddled the cache and 16 MiB paid page faults (a new mapping), and
#: predicting 256 KiB and 4 MiB from another sweep's 64 KiB, 1 and 16 MiB missed by a median 56
#: and 40 %; with 512 KiB and 8 MiB as knots, 27 and 13 %. 4 KiB: a handoff to another process of
#: a small array costs there 2-6x one of 1 MiB and more. Sizes above the largest (or 4x below the
#: smallest) are predicted as extrapolated, from that size.
DEFAULT_SIZES = ("4KiB", "64KiB", "512KiB", "1MiB", "8MiB", "16MiB", "64MiB")


def _host_work() -> int:
    """A fixed piece of interpreter work (dict, call and arithmetic traffic, as a handoff's own
    Python is), a few microseconds long."""
    total = 0
    table: dict[int, int] = {}
    for i in range(48):
        table[i & 7] = table.get(i & 7, 0) + i
        total += len(table)
    return total


#: Timed handoffs per size of a process path, at least. Why: a handoff to another process is a
#: round trip between two processes that each wait on the scheduler, and on a 2-core CPU the
#: median of 5 moved by up to 2x between neighbouring sweeps of the same size
#: (tools/process_sizes.py: torch_mp at 4 MiB 802, 557 and 1320 µs). A handoff costs
#: 0.1-1 ms, so 15 of each of seven sizes add well under a second per path.
PROCESS_REPEAT = 15

#: A process calibration measures every size in this many rounds, the frameworks (and the
#: workers' devices) taking turns, a fresh worker each round, the samples split between them. A
#: process handoff's time drifts by tens of percent within seconds, for every framework and not
#: together (on 2x H200: torch's `ipc` 140-404 µs, CuPy's
#: 154-365 µs, the worker's round trip steady at 51-62 µs): a fit from one sweep's moment lies as
#: far from the level the machine keeps as any later measurement does, and the median of moments
#: apart lies nearer it, as the share calibration's one-size-at-a-time order does for shares.
PROCESS_ROUNDS = 3

#: How many times calibrate measures inside copying paths' sweeps (CostModel.refinements): each pass
#: measures the middle, on a logarithmic scale, of every gap wider than 4x and of each gap of 2x or
#: more beside a size its neighbours' line missed by 30 % or more.
REFINE_PASSES = 2

#: A path that copies by design is measured a second time, at another moment and with arrays of
#: another dtype of the same bytes, at its sweep's sizes from SECOND_ROUND_FROM up: a copy's time at
#: one size can change from one array to the next by more than one sweep shows (on an H200 torch→jax
#: by `host` at 24 MiB took 26.1 ms in float32, 28.5 ms in int8 and 11.5 ms in float16 in one round;
#: its prediction, from float32, was 30 ms). Its fit runs through the middle of both rounds and
#: states how far they lay apart (the core's rounds_spread), so the error it states covers arrays
#: the first round did not see, and a path whose arrays differ too much to be promised within 2x
#: says so.
SECOND_ROUND_FROM = 1 << 20
SECOND_ROUND_DTYPE = "int8"


def host_speed(samples: int = 9, rounds: int = 6) -> float:
    """The host's speed now: seconds that a fixed piece of interpreter work takes, the median of
    ``samples`` (about 0.4 ms in all: a median of five let one spike set a whole sweep's speed). A handoff's fixed cost is host work, and on a shared host
    (the GPU machines are virtual) that speed drifts: within a few minutes of one run the same
    path measured 0.7x to 1.6x its calibrated time, every path of a pair moving together, and
    this piece of work tracked it (benchmarks/bench_advice.py reports the error with and without
    it). Calibration measures it with each sweep and predictions scale a share's fixed cost by it
    (a move's and a process handoff's are the device's and the worker's, and stay as calibrated)."""
    times = []
    for _ in range(samples):
        started = time.perf_counter()
        for _ in range(rounds):
            _host_work()
        times.append(time.perf_counter() - started)
    times.sort()
    return times[len(times) // 2]


def _default_frameworks(device: str) -> list[str]:
    """The installed frameworks whose adapters ask to be calibrated on this kind of device."""
    where = "cuda" if device.startswith("cuda") else "cpu"
    return [a.name for a in ADAPTERS.values() if where in a.calibrate_on and a.installed()]


def fitted_time(point: dict) -> float:
    """The time a fit takes from a measured point: the median of its samples, except for the
    ``remote`` path (a worker on another host), whose fit takes their mean. A small message over
    the network has a bimodal time (gloo on a 250 Hz kernel: 0.1-0.45 ms, or one timer tick
    later, about 4 ms, in any mix): the median jumps between the two modes from one sweep to the
    next, while the mean is the expected cost per handoff, which a mix of the modes keeps. At
    large sizes the two agree (the tick is small against the bytes' time)."""
    timing = point["timing"]
    samples = [float(t) for t in timing.get("samples") or ()]
    if point.get("path") == "remote" and samples:
        return sum(samples) / len(samples)
    return float(timing["median"])


def _fit_points(m: Any, kind: str, source: str, target: str, place: str, points: Iterable[dict],
                limits: Any = None, link: float | None = None) -> int:
    """Fits each path of a sweep's points (``to_dict()["points"]`` of a Benchmark, each with the
    ``host_speed`` measured before its sweep where there was one) into ``m``, with its verdict:
    True where it shared at every size, False where it copied at every size, None where it did
    both (``auto`` replaces a path only by one with the same verdict, and never one whose verdict
    depends on the array). ``limits`` (:func:`gpushare.ceilings`): each copying path's ceiling at
    its largest size, below which its cost per byte never falls past the sweep; ``link``: the
    ceiling of the link the ``remote`` path crossed (:func:`gpushare.processes.remote.link_ceiling`),
    in bytes per second, which bounds that path's fit the same way."""
    by_path: dict[str, list[tuple[int, float]]] = {}
    speeds_of: dict[str, list[float | None]] = {}
    verdicts_of: dict[str, set[str]] = {}
    largest: dict[str, dict] = {}
    for p in points:
        timing = p.get("timing")
        # `shared` starts from a SharedBuffer, not the pair's own arrays: no path for the pair's auto.
        if p.get("verdict") == "failed" or not timing or p.get("path") in ("auto", "shared"):
            continue
        by_path.setdefault(p["path"], []).append((int(p["size"]), fitted_time(p)))
        speeds_of.setdefault(p["path"], []).append(p.get("host_speed"))
        verdicts_of.setdefault(p["path"], set()).add(p["verdict"])
        if int(p["size"]) >= int(largest.get(p["path"], {}).get("size", -1)):
            largest[p["path"]] = p

    def ceiling(path: str) -> float | None:
        # The slowest resource the path's largest copy crossed, judged as every table's bandwidth is
        # (machine_ceilings.table_problems): only for copies within or between places a ceiling
        # names (a process handoff's is its worker's business).
        p = largest[path]
        if path == "remote":
            return link
        if limits is None or kind == "process" or p.get("verdict") != "copied" or not p.get("bytes_moved"):
            return None
        # The ceiling of the sizes past the sweep, where its lines are carried on: a ceiling for n
        # bytes is the fastest copy measured within 16x of n, so asked at 64x the largest size it is
        # a copy of four times that size or more, not one that still fits a cache.
        source_place = machine_ceilings.dlpack_place(place.split("->")[0])
        bound, _ = limits.bound_of_row(source_place, p, 64 * int(p["bytes_moved"]))
        return bound

    def speeds(path: str) -> list[float] | None:
        # Only a share's fixed cost is this interpreter's work. A move's is the framework's copy and
        # the device's latency, a process handoff's the worker's round trip: scaled by the host's
        # speed, their median error rose from 16.5 to 31.4 % (moves below 1 MiB) and from 17.9 to
        # 45.7 % (processes, 1 MiB and up) on the 2x H200, where the shares' fell
        # from 29.8 to 16.7 % (benchmarks/bench_advice.py; docs/gpu-results.md).
        measured = speeds_of[path]
        if kind != "share" or any(s is None for s in measured):
            return None
        return [float(s) for s in measured]  # type: ignore[arg-type]

    def verdict(path: str) -> bool | None:
        # A path that shared at some sizes and copied at others (JAX copies a NumPy array that is
        # not 64-byte aligned, and small NumPy arrays are 16-byte aligned) shares or copies by the
        # array, which only the rules can tell: calling it "copies" let a size-aware `auto` replace
        # DLPack by gpushare's `copy` for numpy→jax at 256 KiB, where DLPack shared (CPU,
        # benchmarks/bench_advice.py).
        seen = verdicts_of[path]
        return True if seen == {"shared"} else False if seen == {"copied"} else None

    return sum(
        m.add(kind, path, source, target, place, pts, verdict(path), speeds(path), ceiling(path))
        for path, pts in by_path.items()
    )


def calibrate(
    frameworks: Sequence[str] | None = None,
    *,
    sizes: Sequence[int | str] = DEFAULT_SIZES,
    device: str | None = None,
    to_device: str | None = None,
    processes: bool = False,
    worker_device: str | None = None,
    across: str | None = None,
    repeat: int = 5,
    save: bool = True,
    shares: bool = True,
    record: list | None = None,
    progress: bool | str = True,
) -> Any:
    """Measures every path of every ordered pair of ``frameworks`` (default: those installed of
    PyTorch, TensorFlow, JAX and NumPy on a CPU; PyTorch, TensorFlow, JAX, CuPy and Numba on a GPU) at
    ``sizes`` (three at least) on ``device`` (default ``cuda:0`` where CUDA is usable, else ``cpu``),
    fits each path's ``fixed + bytes / bandwidth``, and caches the model for this machine. ``to_device="cuda:1"`` also fits the move paths there;
    ``processes=True`` the process paths (``PROCESS_ROUNDS`` sweeps of every size, a fresh worker
    each; ``worker_device="cuda:1"`` also a worker working on that GPU, where NCCL's paths apply);
    ``across="HOST:PORT"`` the ``remote`` path to the worker there (``gpushare worker --listen``),
    in ``PROCESS_ROUNDS`` sweeps of every size, a fresh connection (and worker process there)
    each, fitted like any other path but on the mean of each size's samples rather than their
    median (a small message's time over the network is bimodal: :func:`fitted_time`), and bounded
    by the link's ceiling (:func:`gpushare.processes.remote.link_ceiling`, measured once for the
    peer); ``shares=False`` sweeps only
    those (the share pairs calibrated before are kept). ``record``: a list that receives
    every sweep as measured (``kind``, ``source``, ``target``, ``place``, ``started`` and the lab's
    ``points`` with their timing samples), so a run can be refitted later without the machine
    (benchmarks/replay_advice.py). ``progress``: a bar of the sweeps measured, what is measured
    now beside it, where someone watches (a notebook, a terminal: :mod:`gpushare.progress`);
    ``"lines"``: a line per sweep on stderr instead (``gpushare calibrate``); False: nothing.
    At the end, where some fits are too uncertain to recommend from (a busy machine, a drifting
    path: ``CostModel.uncertainty_line``), a :class:`GpushareWarning` says so in one line, and
    ``advise`` repeats it beside a recommendation that rests on one of them. Returns the ``CostModel``.

    The sweep goes one size at a time across every pair rather than one pair at a time: on 2x H200
    a path's time held within 1.4 % during one pair's sweep, yet lay more
    than 20 % (up to 2.5x) from where it lay half a minute later for half of the paths that share,
    in both directions. A pair measured at four moments of the calibration is fitted to the level
    the machine keeps, and the error its fit states includes how far those moments differ."""
    from gpushare import lab

    frameworks = arguments.names("frameworks", frameworks)
    if across is not None:
        across = arguments.across_option(across, "across")
        if across == "processes":  # the same as processes=True
            processes, across = True, None
    repeat = arguments.count("repeat", repeat, optional=False)  # type: ignore[assignment]
    size_list = list(dict.fromkeys(arguments.sizes("sizes", sizes)))
    if len(size_list) < 3:
        raise ValueError(f"a fit needs at least three sizes, got {sizes!r}")
    if 0 in size_list:
        raise ValueError("sizes: a fit needs arrays of at least 1 byte, got 0")
    if device is None:
        device = "cuda:0" if machine_ceilings.cuda_devices() else "cpu"
    # One spelling from here on (gpu:1, CUDA:1 and cuda:1 are one device; the core's parser).
    device = devices.device_name(*devices.check_device(device))
    names = [framework(n).name for n in frameworks] if frameworks else _default_frameworks(device)
    previous = model(allow_stale=True)
    m = CostModel(machine_key(), time.time())
    if previous is not None and previous.stale_against(machine_key()) is None:
        m = CostModel.from_json(previous.to_json())  # keep what was calibrated before for other places
    sweeps: dict[tuple[str, str, str, str], list[dict]] = {}
    link: float | None = None  # the remote link's ceiling, bytes per second
    pairs = sum(1 for s in names for d in names if shares and (s != d or to_device is not None))
    total = len(size_list) * (pairs + (len(names) if to_device is not None else 0))
    if processes:
        total += PROCESS_ROUNDS * len(names) * (2 if worker_device is not None else 1)
    if across is not None:
        total += PROCESS_ROUNDS * len(names)
    shown = _CalibrationProgress(total, progress)

    def measure(kind: str, src: str, dst: str, sweep_sizes: list[int], times: int | None = None,
                on: str | None = None, **where: Any) -> None:
        shown.now(kind, src, dst, sweep_sizes, where)
        started, speed = time.time(), host_speed()
        times = times or repeat
        # With the arrays' device current: a fit holds no device switch (another framework, JAX
        # among them, may have made another GPU current), which is priced apart and added where
        # one is made (measure_device_switch).
        with _arrays_device_current(framework(src), on or device):
            d = lab.bench(src, dst, sweep_sizes, device=on or device, repeat=times, progress=False, **where).to_dict()
        place = d.get("device", on or device)
        if kind == "move":
            place = f"{place}->{devices.device_name(*devices.parse_device(where['to_device']))}"
        elif kind == "process":
            across = where["across"]
            place = process_place(place, getattr(across, "device", None), getattr(across, "host", None))
        points = [{**p, "host_speed": speed} for p in d["points"]]
        sweeps.setdefault((kind, src, dst, place), []).extend(points)
        if record is not None:
            record.append({"kind": kind, "source": src, "target": dst, "place": place, "started": started,
                           "host_speed": speed, "dtype": d.get("dtype"), "points": d["points"]})
        shown.done()

    try:
        for size in size_list:
            for src in names:
                for dst in names:
                    if shares and (src != dst or to_device is not None):
                        measure("share", src, dst, [size])
                if to_device is not None:
                    measure("move", src, src, [size], to_device=to_device)
        if processes:  # a fresh worker per sweep, every size in each, the sweeps in rounds (PROCESS_ROUNDS)
            from gpushare.processes import Worker

            per_round = -(-max(repeat, PROCESS_REPEAT) // PROCESS_ROUNDS)
            for _ in range(PROCESS_ROUNDS):
                for src in names:
                    measure("process", src, src, size_list, times=per_round, across="processes")
                    if worker_device is not None:  # a worker on another GPU: NCCL's paths apply there
                        with Worker(device=worker_device) as worker:
                            measure("process", src, src, size_list, times=per_round, across=worker)
        # A copying path is measured in the middle of every gap of its sweep wider than 4x, and
        # where its cost bends (a knot its neighbours' line misses by 30 % or more) in the middle
        # of each gap beside it, in REFINE_PASSES passes at most (CostModel.refinements, the
        # core's rule): the bend is placed, not drawn through as a straight line
        # (which predicted torch→jax by `host` at 3 MiB at 3.3x its time on an H200). A bend that
        # stays between two sizes is stated there as a step: those sizes get words, not a number.
        for _ in range(REFINE_PASSES):
            draft = CostModel(machine_key(), time.time())
            for (kind, src, dst, place), points in sweeps.items():
                if kind in ("share", "move"):
                    _fit_points(draft, kind, src, dst, place, points)
            wanted: dict[tuple[str, str, str, int], list[str]] = {}
            for kind, path, src, dst, _place, nbytes in draft.refinements():
                wanted.setdefault((kind, src, dst, nbytes), []).append(path)
            if not wanted:
                break
            shown.more(len(wanted))
            for (kind, src, dst, nbytes), refined in sorted(wanted.items()):
                where = {"to_device": to_device} if kind == "move" else {}
                measure(kind, src, dst, [nbytes], paths=sorted(refined), **where)
        for kind, src, dst, at, copying in _second_round(sweeps):
            shown.more(1)
            where = {"to_device": to_device} if kind == "move" else {}
            measure(kind, src, dst, at, paths=copying, dtype=SECOND_ROUND_DTYPE, **where)
        if across is not None:  # the remote path alone: the others cannot reach another host
            from gpushare.processes import Worker

            from gpushare.processes import remote as process_remote

            per_round = -(-max(repeat, PROCESS_REPEAT) // PROCESS_ROUNDS)
            for _ in range(PROCESS_ROUNDS):
                for src in names:
                    with Worker(host=across) as worker:
                        # A worker without a GPU takes host tensors only (gloo; NCCL needs a GPU on
                        # both sides): its remote path is calibrated from host memory, wherever the
                        # shares were.
                        on = device if worker._link().get("device") is not None else "cpu"
                        measure("process", src, src, size_list, times=per_round, on=on, across=worker,
                                paths=["remote"])
                        link = process_remote.link_ceiling(worker)["bandwidth"]  # measured once, then cached
    finally:
        shown.close()
    # The machine's ceilings (measured once and cached): past its sweep no copy is predicted faster.
    # They bound the fits and nothing else, so a machine that cannot measure them (a GPU too full
    # for their 256 MiB copies) still gets its model, with lines carried on as measured.
    try:
        limits = machine_ceilings.ceilings(gpu=device.startswith("cuda"))
    except GpushareError as e:
        warnings.warn(f"calibrate: this machine's ceilings could not be measured ({e}); past the sizes "
                      "calibrated, predictions carry the measured lines on", GpushareWarning, stacklevel=2)
        limits = None
    for (kind, src, dst, place), points in sweeps.items():
        _fit_points(m, kind, src, dst, place, points, limits, link)
    if shares:
        for src in names:
            speed = host_speed()
            seconds = measure_device_switch(framework(src), device)
            if seconds is not None:
                m.set_device_switch(src, device, seconds, speed)
    if save:
        model_cache.save(m)
    # One line where some fits are too uncertain to recommend from, and why (advise repeats it).
    line = m.uncertainty_line()
    if line is not None:
        warnings.warn(f"calibrate: {line}", GpushareWarning, stacklevel=2)
    return m


def _arrays_device_current(src: Any, device: str) -> Any:
    """A context manager that makes ``device`` (``cuda:0``) current for framework ``src`` where its
    handoffs depend on the current device, and the one current before again after; nothing
    otherwise (host memory, a framework without a current device)."""
    import contextlib

    on_host, ordinal = devices.parse_device(device)
    if on_host or type(src).current_ordinal is Adapter.current_ordinal:
        return contextlib.nullcontext()
    return src.device_made_current(ordinal)


#: Rounds of :func:`measure_device_switch`, and handoffs in each.
SWITCH_ROUNDS, SWITCH_NUMBER = 9, 200


def measure_device_switch(src: Any, device: str) -> float | None:
    """Seconds one handoff from ``src`` of an array on ``device`` (``cuda:0``) adds while another GPU
    is current: the handoff's guard (:class:`gpushare.devices.DeviceGuarded`) makes the array's
    device current and the other one current again after. Measured as the lab times a handoff
    (the guard's note is written once and taken after the timed handoffs, not with each): that
    guard around a handoff that does nothing else, less the same handoff with the array's device
    current (where the core calls the route inside the guard directly), round by round, the median
    kept. None on a machine with one GPU (no other device can be current), for host memory, and
    for a framework whose handoffs do not depend on the current device."""
    on_host, ordinal = devices.parse_device(device)
    if on_host or type(src).device_scope is Adapter.device_scope or len(machine_ceilings.cuda_devices()) < 2:
        return None
    other = 1 if ordinal == 0 else 0
    try:
        obj = src.ones(256, "float32", False, ordinal)
    except Exception:  # a framework that cannot place arrays there: nothing to price
        return None

    def nothing(x: Any) -> Any:
        return x

    guarded = devices.DeviceGuarded(nothing, src, "dlpack")

    def per_handoff(switching: bool) -> float:
        with src.device_made_current(other if switching else ordinal):
            started = time.perf_counter()
            for _ in range(SWITCH_NUMBER):
                (guarded if switching else nothing)(obj)
            seconds = (time.perf_counter() - started) / SWITCH_NUMBER
        guarded.take_notes()
        return seconds

    # Interleaved, so a drift of the host's speed touches both sides of each difference alike.
    differences = sorted(per_handoff(True) - per_handoff(False) for _ in range(SWITCH_ROUNDS))
    return max(differences[len(differences) // 2], 0.0)


def _second_round(sweeps: dict[tuple[str, str, str, str], list[dict]]) -> list[tuple[str, str, str, list[int], list[str]]]:
    """``(kind, source, target, sizes, paths)`` of each sweep's second round (SECOND_ROUND_FROM):
    the paths that copy by design and copied at every size, at the sizes of the sweep from
    SECOND_ROUND_FROM up. A path that shares, or shared at some size, is left as measured: its cost
    is no copy's, and another dtype could change its verdict."""
    rounds = []
    for (kind, src, dst, _place), points in sweeps.items():
        if kind not in ("share", "move"):
            continue
        verdicts: dict[str, set[str]] = {}
        for p in points:
            verdicts.setdefault(p["path"], set()).add(p["verdict"])
        copying = sorted(path for path, seen in verdicts.items()
                         if seen == {"copied"} and _native.paths.copied_by_design(kind, path) is not None)
        at = sorted({int(p["size"]) for p in points if int(p["size"]) >= SECOND_ROUND_FROM and p["path"] in copying})
        if copying and at:
            rounds.append((kind, src, dst, at, copying))
    return rounds


class _CalibrationProgress:
    """What calibrate is measuring and how far it is: a bar where someone watches
    (:mod:`gpushare.progress`), or a line per sweep on stderr (``"lines"``: the CLI, whose kernel's
    stderr is passed on as it comes), or nothing."""

    def __init__(self, total: int, mode: bool | str):
        from gpushare.progress import bar

        self.total, self.n, self.lines = total, 0, mode == "lines"
        self.bar = bar(total, "calibrate", bool(mode) and not self.lines)

    def now(self, kind: str, src: str, dst: str, sizes: list[int], where: dict) -> None:
        to = where.get("to_device")
        at = _native.text.format_bytes(sizes[0]) if len(sizes) == 1 else f"{len(sizes)} sizes"
        what = f"{kind} {src}→{dst}" + (f" to {to}" if to else "") + f" at {at}" + (f" in {where['dtype']}" if "dtype" in where else "")
        if self.lines:
            import sys

            print(f"calibrate: {self.n + 1}/{self.total} {what}", file=sys.stderr, flush=True)
        else:
            self.bar.set_postfix_str(what)

    def more(self, n: int) -> None:
        """``n`` sweeps more than counted at the start (sizes inside a bend)."""
        self.total += n
        if hasattr(self.bar, "total"):
            self.bar.total = self.total
        if hasattr(self.bar, "refresh"):
            self.bar.refresh()

    def done(self) -> None:
        self.n += 1
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()


def lab_predictor(source: str, target: str, device: str | None) -> Any:
    """For the lab's tables: ``predict(path, nbytes, dlpack_device) -> (prediction, ordering)``,
    each row's time as the model predicted it before the row ran, and how the handoff is ordered.
    Without a current model of this machine, no prediction, and the ordering only for device
    memory (where it decides what `auto` may take: the table's footer says why `auto` left a faster
    row whose handoff nothing orders). ``device``: a move's destination."""
    m = model()
    kind = "share" if device is None else "move"
    producer, consumer = framework(source), framework(target)

    def predict(path: str, nbytes: int, dlpack_device: tuple[int, int], shares: bool | None = None) -> tuple[Any, str | None]:
        where = devices.device_name(int(dlpack_device[0]) in HOST_DEVICE_TYPES, int(dlpack_device[1]))
        place = where if device is None else f"{where}->{devices.device_name(*devices.parse_device(device))}"
        ordering, words, _ = _native.paths.path_ordering(kind, path, where, consumer.accepts_objects, consumer.cai_import_orders)
        if m is None:
            return None, (words if where != "cpu" else None)
        # The host's speed right before the row runs: a share's fixed cost is host work (a move's
        # fit carries no speed, so it is not measured for one).
        speed = host_speed() if kind == "share" else None
        return m.predict(kind, path, source, target, place, int(nbytes), ordering, 0.0, speed, shares=shares,
                         switches_device=switches_device(producer, kind, path, where)), words

    return predict


#: The move paths whose handoff runs with the source's device current (gpushare.devices.move_route):
#: the framework's own ``move`` goes by the framework's current device.
_GUARDED_MOVES = ("p2p", "pinned", "dlpack")


def switches_device(src: Any, kind: str, path: str, place: str) -> bool:
    """Whether a handoff of ``kind`` by ``path`` from ``src`` of an array at ``place`` (``cuda:0``; a
    move's ``cuda:0->cuda:1``) runs now with another device current than the array's, so that it
    makes the array's device current and the other one current again after
    (:class:`gpushare.devices.DeviceGuarded`): the model adds the time the calibration measured for
    that (:func:`measure_device_switch`)."""
    where = place.split("->", 1)[0]
    if not where.startswith("cuda:") or kind not in ("share", "move") or (kind == "move" and path not in _GUARDED_MOVES):
        return False
    try:
        current = src.current_ordinal()
    except Exception:  # a framework that cannot say now: nothing is added
        return False
    return current is not None and f"cuda:{current}" != where


def producer_state(src: Any, obj: Any) -> str:
    """``"busy"`` when the producer's current stream for ``obj`` has work queued that has not
    finished (the driver's ``cuStreamQuery``, which does not wait), ``"idle"`` when it has none
    (or ``obj`` is in host memory: nothing to wait for), ``"unknown"`` where nobody can say (a
    framework without a current stream, such as JAX; no CUDA driver)."""
    if not paths.in_device_memory(obj, src):
        return "idle"
    try:
        handle = src.current_stream(obj)
        if handle is None:
            return "unknown"
        # The default streams (0, 1, 2) are the current context's: the device says which.
        ordinal = int(src.inspect(obj).dlpack_device[1]) if int(handle) <= 2 else 0
    except Exception:  # a framework that cannot say: nothing is assumed
        return "unknown"
    busy = _native.cuda.stream_busy(int(handle), ordinal)
    return "unknown" if busy is None else ("busy" if busy else "idle")


def process_place(place: str, worker_device: str | None, peer: str | None = None) -> str:
    """The cost model's place of a handoff to a worker from memory at ``place`` (``cpu``,
    ``cuda:0``): ``cuda:0->process`` for a worker on the memory's device (or on none), and
    ``cuda:0->process@cuda:1`` for one working on another GPU, where NCCL applies and a CUDA IPC
    mapping is opened from another device's context. ``peer``: a worker on another host
    (``HOST:PORT``), whose handoffs cross the link to that host: ``cpu->remote:HOST``, fitted
    apart from every other host's (one calibration never predicts another link)."""
    if peer is not None:
        host = peer.rsplit(":", 1)[0] if ":" in peer else peer
        return f"{place}->remote:{host}"
    if worker_device is not None:  # one spelling, so `gpu:1` and `cuda:1` are one place
        worker_device = devices.device_name(*devices.parse_device(worker_device))
    if worker_device is None or worker_device == place or place == "cpu":
        return f"{place}->process"
    return f"{place}->process@{worker_device}"


def process_prediction(obj: Any, path: str, to: str | None, worker_device: str | None = None,
                       peer: str | None = None) -> Any:
    """The cost model's time for handing ``obj`` to a worker by process ``path``, the worker holding
    it in framework ``to`` (None: the source's) on ``worker_device`` (None: the memory's device),
    on another host at ``peer`` (``HOST:PORT``; None: this host), asked before the handoff runs; None where this
    machine is not calibrated for that path, pair and place (``calibrate(processes=True)``).
    Process paths' fits carry no host-speed scaling (it made them worse on the 2x H200)."""
    from gpushare.exceptions import GpushareError

    m = model()
    if m is None:
        return None
    try:
        src = adapter_for(obj, None)
        info = src.inspect(obj)
        nbytes = int(info.nbytes)
        place = process_place(_place(src, obj, info), worker_device, peer)
    except GpushareError:  # an object no adapter describes (the worker can take it by its address
        return None  # alone): no fit is keyed by it, and the handoff itself says what it makes of it
    target = framework(to).name if to is not None else src.name
    ordering = "host_synchronise" if _native.paths.path_waits("process", path, place) else "none"
    return m.predict("process", path, src.name, target, place, nbytes, ordering)


def _place(src: Any, obj: Any, info: Any = None) -> str:
    """Where ``obj`` lies, as the model names places (``cpu``, ``cuda:0``); ``info``: its
    description where the caller has it already."""
    on_device = paths.in_device_memory(obj, src)
    info = info if info is not None else src.inspect(obj)
    return f"cuda:{info.dlpack_device[1]}" if on_device else "cpu"


def _row(kind: str, path: str, verdict: str, reason: str | None, place: str, src: str, dst: str,
         nbytes: int, m: Any, queued: float, speed: float | None = None, moves_source: bool = False) -> dict:
    target = framework(dst)
    ordering, words, ordered = _native.paths.path_ordering(kind, path, place, target.accepts_objects, target.cai_import_orders)
    waits = _native.paths.path_waits(kind, path, place, target.accepts_objects, target.dlpack_import_waits)
    # A path whose host waits for the producer's queue is predicted with the queued work added.
    ordering = "host_synchronise" if waits else ordering
    # The rules' verdict for this array: a fit measured with another prices it not (no number).
    shares = {"shared": True, "copied": False}.get(verdict)
    switches = m is not None and switches_device(framework(src), kind, path, place)
    prediction = None if m is None else m.predict(kind, path, src, dst, place, nbytes, ordering, queued, speed, shares=shares,
                                                  switches_device=switches)
    return {"path": path, "kind": kind, "verdict": verdict, "reason": reason, "ordering": words,
            "ordered": ordered, "waits": waits, "prediction": prediction, "moves_source": moves_source}


def source_refusal(src: Any, dst: Any, obj: Any, kind: str, path: str) -> Any:
    """The prediction of the source's own check on a handoff by ``path`` (a share's or a move's),
    read from flags on ``obj`` the description does not hold (PyTorch's requires_grad, conjugate
    and negative bits): a failure, or None where the check passes. The same checks the handoff
    makes (``paths.checks_source``, ``devices.move_route``), so a prediction equals the outcome."""
    if kind == "share":
        if not paths.checks_source(path):
            return None
        check = lambda: src.check_source(obj, dst.name, path)  # noqa: E731
    elif path == "dlpack":
        check = lambda: (src.check_copying_export if dst.copy_by_producer else src.check_source)(obj, dst.name, path)  # noqa: E731
    elif path == "move":
        check = lambda: src.check_view_bits(obj)  # noqa: E731 - the bits survive the framework's move
    elif devices.move_checks_source(path):
        check = lambda: src.check_source(obj, dst.name, path)  # noqa: E731
    else:
        return None
    try:
        check()
    except GpushareError as e:
        predicted = getattr(e, "predicted", None)
        if predicted is not None and predicted.verdict == "failed":
            return predicted
    return None


def advise(obj: Any, to: str, *, device: str | None = None, across: Any = None, queued: float | None = None,
           source: str | None = None) -> Any:
    """What each applicable path would do with ``obj`` and cost, before anything runs.

    Within the array's device (the default), each share path's predicted verdict (the rules) and
    time (the cost model, see :func:`calibrate`); with ``device="cuda:1"``, the move paths; with
    ``across`` (a Worker or ``"process"``), the process paths. ``queued``: seconds of work queued
    on the producer's stream, which a path whose host waits for it (``path_waits``: a capsule into
    TensorFlow, host and pinned copies, peer moves, process handles, JAX's DLPack import) adds to
    its time; 0 for an idle producer; None (the default): the driver is asked whether the
    producer's stream is busy (the amount is then unknown, and a path ordered on the device is
    preferred). ``Advice.producer`` and the table say which state was assumed.
    Returns an :class:`Advice` (``recommended``, ``why``, ``rows``; text, HTML and JSON forms)."""
    queued, across = arguments.seconds("queued", queued), arguments.across(across)
    dst = framework(to)
    src = adapter_for(obj, framework(source) if source is not None else None)
    info = src.inspect(obj)
    nbytes = int(info.payload_bytes)  # what a copy moves: a strided view's elements, not its span
    place = _place(src, obj, info)
    if queued is None:
        state, queued = producer_state(src, obj), 0.0
    else:
        state = "busy" if queued > 0 else "idle"
    m = model()
    # The host's speed now scales a share's fixed cost (moves' and process paths' fits carry none).
    speed = host_speed() if m is not None and across is None and device is None else None
    note = stale_note()
    rows: list[dict] = []
    by_size: list[tuple[int, int | None, str]] = []  # processes: the worker maps the source whatever its size
    if across is not None:
        from gpushare import processes

        # An unstarted Worker says where a worker would run (the NCCL paths need another GPU).
        worker = (across if isinstance(across, processes.Worker) else
                  processes.Worker(host=across) if arguments.is_remote(across) else processes.Worker())
        kind, where = "process", process_place(place, worker.device, worker.host)
        rules_choice = auto.across_processes(obj)
        for path in paths.names_of("process"):
            why = processes.applicability(obj, path, worker, to=to)
            if why is None and path == "shm" and processes.shm_copies(obj):
                # A segment that does not fit in /dev/shm is refused by the handoff: never recommended.
                from gpushare.processes import rules as process_rules

                why = process_rules.shm_room_problem(nbytes)
            if why is not None:
                rows.append(_row(kind, path, "failed", why, where, src.name, dst.name, nbytes, None, queued))
                continue
            copies = _native.paths.copied_by_design("process", path)
            # The framework's own transport moves a host array not yet in shared memory, freeing the
            # memory its views read: shown, never recommended (auto never takes it either).
            moves = path in src.moving_process_paths and not paths.in_device_memory(obj, src) and not src.host_memory_shared(obj)
            if path == "shm" and copies is None and processes.shm_copies(obj):
                # Once, before the first handoff: the handoffs predicted here pass the segment's name
                # (crates/core/src/paths.rs, handoff_moves_bytes).
                copies = "copied once into a shared memory segment gpushare makes (before the first handoff, " \
                         "not in the time predicted), which the worker maps"
            moved = ("moves the tensor's storage into shared memory first and frees the memory its views read "
                     "(never recommended; call x.share_memory_() first)") if moves else None
            rows.append(_row(kind, path, "copied" if copies else "shared", copies or moved, where, src.name, dst.name,
                             nbytes, m, queued, speed, moves_source=moves))
    elif device is not None:
        on_host, ordinal = devices.check_device(device)
        target = devices.device_name(on_host, ordinal)
        kind, where = "move", f"{place}->{target}"
        destination = devices.dlpack_place(on_host, ordinal)
        rules_choice = auto.choice(src, dst, tuple(info.dlpack_device), destination)[0]
        by_size = _auto_by_size(src, dst, tuple(info.dlpack_device), destination)
        for path in paths.names_of("move"):
            predictor = verdicts.move_predictor(src, dst, path, destination)
            p = None if predictor is None else predictor(info)
            if p is None:
                continue
            refused = source_refusal(src, dst, obj, "move", path)
            if refused is not None and p.verdict != "failed":
                p = refused
            rows.append(_row(kind, path, p.verdict, p.reason, where, src.name, dst.name, nbytes, m, queued, speed))
    else:
        kind, where = "share", place
        # Where no row's prediction can rank the paths, the rules' own choice stands, as it does for
        # the core's auto of this array (a model's pick for arrays like the calibration's is no pick
        # where its fits cannot price this one).
        rules_choice = auto.choice(src, dst, tuple(info.dlpack_device), rules_only=True)[0]
        by_size = _auto_by_size(src, dst, tuple(info.dlpack_device), None, auto.readonly_if_needed(src, obj))
        for path in paths.names_of("share"):
            p = verdicts.predict(src, dst, info, path)
            if p is None:
                continue
            refused = source_refusal(src, dst, obj, "share", path)
            if refused is not None and p.verdict != "failed":
                p = refused
            rows.append(_row(kind, path, p.verdict, p.reason, where, src.name, dst.name, nbytes, m, queued, speed))
    advised = Advice(src.name, dst.name, nbytes, where, rows, rules_choice, queued, note, state, by_size)
    # The plain framework call of the pick, for code that does not import gpushare.
    code = None if advised.recommended is None else plain_call(kind, advised.recommended, src.name, dst.name, where, device)
    # A recommendation resting on a fit calibrate called too uncertain says so beside it, as
    # calibrate did (a busy machine, a drifting path).
    uncertain = dict(m.uncertain()) if m is not None and advised.recommended is not None else {}
    why = uncertain.get(f"{kind} {src.name}->{dst.name} {advised.recommended} @{where}")
    if why is not None:
        line = m.uncertainty_line()
        repeated = f"{advised.recommended} rests on a fit too uncertain to recommend from ({why}); calibrate said: {line}"
        note = repeated if note is None else f"{note}; {repeated}"
    if code is not None or why is not None:
        advised = Advice(src.name, dst.name, nbytes, where, rows, rules_choice, queued, note, state, by_size, code)
    return advised


#: What keeps a plain call ordered against the producer's queued work, by the handoff's ordering
#: (``_native.paths.path_ordering``'s name).
_KEEP_ORDERED = {
    "device_event": "ordered on the device: the consumer passes its stream to __dlpack__; nothing more to do",
    "consumer_orders": "ordered by the consumer, which waits for the producer's stream that "
                       "__cuda_array_interface__ names; nothing more to do",
    "host_synchronise": "synchronise the producer's stream before the call (its import does not wait for queued work)",
    "producer_wait": "the producer's own call waits for its queued work; synchronise before reading "
                     "the result on another stream",
    "none": "host memory: nothing to order",
    "unordered": "nothing orders it: synchronise the producer's stream before the call",
}


def plain_call(kind: str, path: str, source: str, target: str, place: str, device: str | None = None
               ) -> tuple[str, str] | None:
    """``(call, ordered_by)``: the plain framework call that performs ``path`` from ``source``'s
    array ``x`` into ``target`` without gpushare, as each adapter declares its framework's own call
    (``import_calls``, ``to_numpy_call``/``from_numpy_call`` for ``host``, ``move_call``), and what
    keeps it ordered against the producer's queued work; None where the frameworks declare none
    (gpushare's own copies: ``copy``, ``pinned``, ``p2p``, ``shared``, and process paths)."""
    src, dst = framework(source), framework(target)
    call: str | None = None
    if kind == "share" and path == "host":
        # The host route copies, as gpushare's does: np.array copies where the source's own call
        # to NumPy would have shared (a CPU tensor's .numpy()).
        if src.to_numpy_call is not None and dst.from_numpy_call is not None:
            call = dst.from_numpy_call.format(a=f"np.array({src.to_numpy_call.format(x='x')})")
    elif kind == "share":
        template = dst.import_calls.get(path)
        call = None if template is None else template.format(x="x")
    elif kind == "move" and path == "move" and device is not None and src.move_call is not None:
        ordinal = _native.text.parse_device(device)[1]
        call = src.move_call.format(x="x", device=device, ordinal=ordinal)
    if call is None:
        return None
    where = place.split("->")[0]
    ordering, _, _ = _native.paths.path_ordering(kind, path, where, dst.accepts_objects, dst.cai_import_orders)
    waits = _native.paths.path_waits(kind, path, place, dst.accepts_objects, dst.dlpack_import_waits)
    if waits and ordering != "none":
        ordering = "host_synchronise"
    return call, _KEEP_ORDERED.get(ordering, ordering)


def _auto_by_size(src: Any, dst: Any, source_device: tuple[int, int], destination: tuple[int, int] | None = None,
                  source_readonly: bool | None = None) -> list[tuple[int, int | None, str, str | None]]:
    """``(from, below or None, path, close or None)``: the path THE ``auto`` takes for each range of
    sizes of this pair, where the model's choice changes with size, and a path predicted within the
    model's error of it there (``auto.ranges``); empty where one path serves every size."""
    if not auto.size_breaks(src, dst, source_device, destination, source_readonly):
        return []  # one path at every size (asked of the kept breaks: no range is worked out)
    ranges = auto.ranges(src, dst, source_device, destination, source_readonly)
    return ranges if len({path for _, _, path, _ in ranges}) > 1 else []
