"""How true the cost model is: predicted against measured, and how good `auto`'s pick is.

One run: calibrate this machine's model (``gpushare.calibrate``'s sizes, into a cache of this run's
own), then sweep pairs × paths at *other* sizes with the real lab and compare every measured row with the model's
prediction made before it ran, and every (pair, size)'s `auto` row with the fastest path of the best
verdict measured in the same sweep. Three kinds of handoff, each calibrated and evaluated:

- **shares** within the device: every ordered pair of the frameworks below;
- **moves** to a second GPU (``device=``, on a machine with two; otherwise "fewer than 2 GPUs"):
  each framework's own arrays, by ``p2p``, ``pinned``, ``dlpack`` and ``move``;
- **processes** (``across=``): the frameworks a worker can receive, by ``ipc``, ``torch_mp``,
  ``shm``, ``nccl``, ``nccl_socket`` and ``gloo`` where each applies (on a CPU: ``torch_mp``,
  ``shm``, ``gloo``; ``nccl`` needs the worker on a second GPU).

Reports, per kind and together: the median |predicted − measured| / measured for sizes ≥ 1 MiB
(goal ≤ 15 %) and below (≤ 30 %); how often `auto` is within 1.1× of the fastest correct path
measured (goal ≥ 95 % of cells) and the worst ratio (never above 1.5×).

On a GPU ``--busy`` measures the same share handoffs with milliseconds of matmuls queued on the
producer's stream: every path and `auto` (which asks the driver whether the producer is busy and
then prefers a path ordered on the device), each against the model's prediction with the queued
work added where the host waits for it, and `auto`'s pick against the fastest correct path
measured busy.

``--rounds N`` measures the share grid N times against the one calibration and reports each round's
medians and how far they lie apart (goal: within 3 points of each other).

Run: ``.venv/bin/python benchmarks/bench_advice.py [--device cuda] [--busy] [--no-moves]
[--no-processes] [--rounds N] [--json F]``. CPU pairs: torch, jax, tf, numpy; GPU: torch, jax, cupy, numba, tf
(where installed).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import shutil
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
if "--device" not in sys.argv or "cpu" in sys.argv:
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
# The model of this run, not the user's.
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="gpushare-bench-advice-")

import gpushare  # noqa: E402
from gpushare import advice, devices, model_cache, paths  # noqa: E402

#: The sizes `gpushare calibrate` sweeps for its users: the model measured is theirs.
CALIBRATION_SIZES = advice.DEFAULT_SIZES
#: Sizes the model was not fitted at, inside its sweep: none of them a calibration size, nor the
#: middle of a gap calibrate measures where a copy's cost bends (16 KiB and 32 MiB are).
EVALUATION_SIZES = ("12KiB", "256KiB", "4MiB", "40MiB")
#: ``--grid untuned``: sizes between and beyond the calibrated ones (200 MiB past its 64 MiB), in
#: dtypes the calibration did not use, as a user's arrays come: the stated error's promise is
#: checked where nothing was tuned.
UNTUNED_SIZES = ("3KiB", "96KiB", "3MiB", "24MiB", "200MiB")
UNTUNED_DTYPES = ("float32", "int8", "float16")
#: The sizes and dtypes of this run (main() sets them from --grid).
GRID = {"sizes": EVALUATION_SIZES, "dtypes": ("float32",)}
LARGE = 1 << 20
#: From this size a copy is bound by the bandwidth of what it crosses: the goal there is ≤ 5 % for
#: every path that copies, each on its own.
BANDWIDTH_BOUND = 64 << 20


def frameworks(device: str) -> list[str]:
    return advice._default_frameworks(device)


def _score(model, kind: str, pair: tuple[str, str], place: str, points: list[dict], takes_objects: bool,
           auto_path: str | None = None, speed: float | None = None,
           unavailable: frozenset[str] = frozenset()) -> tuple[list[dict], list[dict]]:
    """One sweep's rows against the model's predictions, and each size's `auto` against the fastest
    correct path measured. ``auto_path``: the path `auto` takes where the sweep marks none (processes).

    A row's prediction is the one the lab made right before it ran (``predicted``, its fixed cost
    scaled by the host's speed measured then), else the model's with ``speed``, the host's speed
    measured before the sweep; ``unscaled_s`` is the model's with the fixed cost as calibrated."""
    src, dst = pair
    rows, autos = [], []
    by_size: dict[int, list[dict]] = {}
    for p in points:
        by_size.setdefault(int(p["size"]), []).append(p)
        timing = p.get("timing")
        if p["verdict"] == "failed" or not timing or p["path"] in ("auto", "shared"):
            continue
        unscaled = model.predict(kind, p["path"], src, dst, place, int(p["size"]))
        if unscaled is None:
            continue
        made = p.get("predicted") or model.predict(kind, p["path"], src, dst, place, int(p["size"]), host_speed=speed).to_dict()
        measured = float(timing["median"])
        rows.append(dict(kind=kind, pair=f"{src}->{dst}", place=place, path=p["path"], size=int(p["size"]),
                         measured_s=measured, predicted_s=made["seconds"], unscaled_s=unscaled.seconds,
                         host_slowdown=made.get("host_slowdown"),
                         error=abs(made["seconds"] - measured) / measured,
                         error_unscaled=abs(unscaled.seconds - measured) / measured, tolerance=made["tolerance"],
                         extrapolated=made["extrapolated"], unpredictable=made.get("unpredictable"),
                         dtype=p.get("dtype"),
                         # A process row's source allocation (what CUDA IPC maps), where known.
                         allocation=((p.get("source") or {}).get("identity") or {}).get("size")))
    for size, pts in by_size.items():
        worked = [p for p in pts if p["verdict"] != "failed" and p.get("timing")]
        auto = [p for p in worked if p.get("auto")] or [p for p in worked if p["path"] == auto_path]
        if not worked or not auto:
            continue
        # `shared` hands over a SharedBuffer, not the user's array: not a path auto could take;
        # nor a path whose consumer may read before the producer's queued work lands, nor one
        # `unavailable` for the caller's array.
        cai_orders = gpushare.adapters.framework(dst).cai_import_orders
        ordered = lambda p: gpushare._native.paths.path_ordering(kind, p["path"], place, takes_objects, cai_orders)[2]  # noqa: E731
        candidates = [p for p in worked if p["path"] not in unavailable]
        best_verdict = "shared" if any(p["verdict"] == "shared" for p in candidates) else "copied"
        correct = [p for p in candidates if p["verdict"] == best_verdict and p["path"] != "shared" and ordered(p)]
        if not correct:
            continue
        fastest = min(correct, key=lambda p: p["timing"]["median"])
        chosen = auto[0]
        ratio = chosen["timing"]["median"] / fastest["timing"]["median"]
        autos.append(dict(kind=kind, pair=f"{src}->{dst}", size=size, auto=chosen["path"], auto_s=chosen["timing"]["median"],
                          auto_verdict=chosen["verdict"], fastest=fastest["path"], fastest_s=fastest["timing"]["median"],
                          fastest_verdict=best_verdict, ratio=ratio, auto_correct=chosen["verdict"] == best_verdict))
    return rows, autos


def evaluate(model, device: str, names: list[str], repeat: int) -> tuple[list[dict], list[dict]]:
    """Shares: every ordered pair's measured rows against their predictions; every (pair, size)'s auto."""
    rows, autos = [], []
    for (src, dst), dtype in itertools.product(itertools.permutations(names, 2), GRID["dtypes"]):
        speed = advice.host_speed()
        d = gpushare.bench(src, dst, GRID["sizes"], dtype=dtype, device=device, repeat=repeat, progress=False).to_dict()
        takes_objects = gpushare.adapters.framework(dst).accepts_objects
        r, a = _score(model, "share", (src, dst), d["device"], [{**p, "dtype": dtype} for p in d["points"]],
                      takes_objects, speed=speed)
        rows += r
        autos += a
    return rows, autos


def move_frameworks(names: list[str]) -> list[str]:
    """The frameworks whose own arrays move between GPUs (Numba's and TensorFlow's are left out:
    their moves are the framework's own copy through the host, calibrated by nobody)."""
    return [n for n in names if n in ("torch", "jax", "cupy")]


def evaluate_moves(model, device: str, to_device: str, names: list[str], repeat: int) -> tuple[list[dict], list[dict]]:
    """Moves to ``to_device``: each framework's own arrays by every move path, and auto's pick."""
    rows, autos = [], []
    for src, dtype in itertools.product(names, GRID["dtypes"]):
        speed = advice.host_speed()
        d = gpushare.bench(src, src, GRID["sizes"], dtype=dtype, device=device, to_device=to_device, repeat=repeat,
                           progress=False).to_dict()
        r, a = _score(model, "move", (src, src), f"{d['device']}->{to_device}", d["points"], True, speed=speed)
        rows += r
        autos += a
    return rows, autos


def process_frameworks(names: list[str]) -> list[str]:
    """The frameworks a worker process can receive (their adapters' ``worker_receives``)."""
    return [n for n in names if gpushare.adapters.framework(n).worker_receives]


def evaluate_processes(model, device: str, names: list[str], repeat: int,
                       worker_device: str | None = None) -> tuple[list[dict], list[dict], dict]:
    """Processes: each framework's arrays handed to a worker by every process path, and auto's
    pick (``ipc`` from device memory, ``shm`` from the host: THE auto, gpushare.auto.across_processes); with
    ``worker_device`` also to a worker working on that GPU (NCCL's paths).

    Measured as the calibration measures (``advice.PROCESS_ROUNDS`` rounds, the frameworks and the
    workers' places taking turns, a fresh worker each, the samples split between the rounds and
    pooled): a process handoff's time drifts by tens of percent within seconds on one worker
    (tools/worker_placement.py: torch's `ipc` 186-404 µs on one worker over five seconds,
    its round trip steady), so one sweep's moment measures the drift as much as the path. Also
    returns what one round alone would have said (each round's median against the same prediction)
    and the drift between rounds, so the pooled figure hides nothing."""
    rounds = advice.PROCESS_ROUNDS
    per_round = -(-max(repeat, advice.PROCESS_REPEAT) // rounds)
    sweeps: dict[tuple[str, str | None], list[dict]] = {}
    for _ in range(rounds):
        for src in names:
            for where in ([None, worker_device] if worker_device else [None]):
                worker = gpushare.Worker(device=where).start() if where else "processes"
                try:
                    d = gpushare.bench(src, src, GRID["sizes"], device=device, across=worker,
                                       repeat=per_round, progress=False).to_dict()
                finally:
                    if where:
                        worker.stop()
                sweeps.setdefault((src, where), []).append(d)
    rows, autos, one_round, drift = [], [], [], []
    for (src, where), runs in sweeps.items():
        place = advice.process_place(runs[0].get("device", device), where)
        adapter = gpushare.adapters.framework(src)
        on_host, ordinal = devices.parse_device(device)
        auto_path = gpushare.auto.across_processes(adapter.ones(16, "float32", on_host, ordinal))
        # The framework's own transport moves a private host array into shared memory and frees
        # the memory its views read (torch_mp; the sweep measures it on a clone): auto never does
        # that to a caller's array, so it is no path auto could have taken for the grid's arrays.
        unavailable = frozenset(adapter.moving_process_paths if on_host else ())
        pooled = _pooled_points(runs)
        r, a = _score(model, "process", (src, src), place, pooled, True, auto_path, unavailable=unavailable)
        rows += r
        autos += a
        for run in runs:
            one_round += _score(model, "process", (src, src), place, run["points"], True, auto_path)[0]
        for p in pooled:
            medians = p["timing"].get("round_medians") if p.get("timing") else None
            if medians and len(medians) > 1:
                drift.append((max(medians) - min(medians)) / statistics.median(medians))
    large = [r["error"] for r in one_round if r["size"] >= LARGE]
    notes = {"rounds": rounds, "samples_per_round": per_round,
             "one_round_median_error_large": statistics.median(large) if large else None,
             "drift_between_rounds_median": statistics.median(drift) if drift else None}
    return rows, autos, notes


def _pooled_points(runs: list[dict]) -> list[dict]:
    """One sweep's points with each (path, size)'s samples pooled over every round's sweep: the
    median of all of them, as the calibration takes it (``round_medians`` keeps each round's)."""
    pooled: dict[tuple[str, int], dict] = {}
    for run in runs:
        for p in run["points"]:
            key = (p["path"], int(p["size"]))
            timing = p.get("timing")
            if key not in pooled:
                pooled[key] = dict(p, timing=None if not timing else dict(timing, samples=[], round_medians=[]))
            kept = pooled[key]
            if p["verdict"] == "failed" or not timing:
                kept["verdict"], kept["timing"] = p["verdict"], None  # a round that failed fails the row
                continue
            if kept["timing"] is not None:
                kept["timing"]["samples"] += list(timing["samples"])
                kept["timing"]["round_medians"].append(float(timing["median"]))
    for p in pooled.values():
        if p.get("timing"):
            p["timing"]["median"] = statistics.median(p["timing"]["samples"])
            p["timing"]["min"] = min(p["timing"]["samples"])
    return list(pooled.values())


def _queue(torch):
    """Milliseconds of warmed matmuls to queue on torch's current stream, and how long they take."""
    a = torch.randn(4096, 4096, device="cuda")

    def queue_work() -> None:
        for _ in range(4):
            a @ a

    queue_work()  # cuBLAS starts, the kernels load: not part of what is queued later
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    queue_work()
    end.record()
    torch.cuda.synchronize()
    return queue_work, start.elapsed_time(end) / 1e3


BUSY_PATHS = ("auto", "dlpack", "capsule", "cai", "host", "pinned", "copy")


def busy_producer(model, repeat: int) -> tuple[list[dict], list[dict]]:
    """torch → cupy/jax/numba/tf on a GPU with milliseconds of matmuls queued on the producer's
    stream before each handoff: every path and `auto` measured busy, against the model's
    prediction with the queued work added where the host waits for it; and `auto`'s pick (it asks
    the driver) against the fastest correct path measured busy."""
    import torch

    queue_work, queued = _queue(torch)
    x = torch.ones(1 << 18, device="cuda")
    nbytes = x.numel() * 4
    rows, autos = [], []
    for dst in [n for n in ("cupy", "jax", "numba", "tf") if gpushare.adapters.framework(n).installed()]:
        target = gpushare.adapters.framework(dst)
        measured = []
        for path in BUSY_PATHS:
            samples, taken, verdict = [], path, None
            try:
                gpushare.share(x, dst, path=path)  # warm the idle plan: the route, the target's import
                queue_work()
                gpushare.share(x, dst, path=path)  # and the busy one (auto may take another path)
                torch.cuda.synchronize()
                for _ in range(repeat):
                    torch.cuda.synchronize()
                    queue_work()
                    t0 = time.perf_counter()
                    r = gpushare.share(x, dst, path=path)
                    samples.append(time.perf_counter() - t0)
                    taken, verdict = r.path, r.verdict
            except gpushare.GpushareError:
                torch.cuda.synchronize()
                continue
            torch.cuda.synchronize()
            ordering, _, ordered = gpushare._native.paths.path_ordering("share", taken, "cuda:0", target.accepts_objects,
                                                                  target.cai_import_orders)
            waits = gpushare._native.paths.path_waits("share", taken, "cuda:0", target.accepts_objects, target.dlpack_import_waits)
            p = model.predict("share", taken, "torch", dst, "cuda:0", nbytes, "host_synchronise" if waits else ordering, queued)
            measured.append(dict(pair=f"torch->{dst}", path=path, took=taken, verdict=verdict, queued_s=queued,
                                 measured_s=statistics.median(samples), predicted_s=None if p is None else p.seconds,
                                 ordering=ordering, ordered=ordered, waits=waits))
        rows += measured
        auto = [m for m in measured if m["path"] == "auto"]
        worked = [m for m in measured if m["path"] != "auto"]
        if not auto or not worked:
            continue
        best = "shared" if any(m["verdict"] == "shared" for m in worked) else "copied"
        correct = [m for m in worked if m["verdict"] == best and m["ordered"]]
        if not correct:
            continue
        fastest = min(correct, key=lambda m: m["measured_s"])
        torch.cuda.synchronize()
        queue_work()
        advised = gpushare.advise(x, dst)
        torch.cuda.synchronize()
        # auto's pick is judged by that path's own row, as in the idle sweep (where the lab marks the
        # row auto took): the separate auto row, measured at another moment of a queue whose length
        # varies by a few hundred µs, would judge the noise (cai against cai read 1.63x on an H100).
        picked = next((m for m in worked if m["path"] == auto[0]["took"]), auto[0])
        autos.append(dict(kind="busy", pair=f"torch->{dst}", size=nbytes, auto=auto[0]["took"], auto_s=picked["measured_s"],
                          auto_row_s=auto[0]["measured_s"],
                          auto_verdict=auto[0]["verdict"], fastest=fastest["path"], fastest_s=fastest["measured_s"],
                          fastest_verdict=best, ratio=picked["measured_s"] / fastest["measured_s"],
                          advise_producer=advised.producer, advise_pick=advised.recommended))
    return rows, autos


def promise(rows: list[dict]) -> dict:
    """How the stated errors held: the share of rows given a number whose measured median lay
    within it (coverage, goal >= 90 %), the worst ratio between predicted and measured of those
    (goal <= 2x), and the rows that said they could not be predicted within 2x instead."""
    numbered = [r for r in rows if not r.get("unpredictable")]
    within = [r for r in numbered if r["error"] <= r["tolerance"]]
    ratios = [max(r["predicted_s"] / r["measured_s"], r["measured_s"] / r["predicted_s"]) for r in numbered
              if r["predicted_s"] > 0 and r["measured_s"] > 0]
    worst = max(numbered, key=lambda r: max(r["predicted_s"] / r["measured_s"], r["measured_s"] / r["predicted_s"]),
                default=None)
    return {
        "coverage": len(within) / len(numbered) if numbered else None,
        "worst_ratio": max(ratios) if ratios else None,
        "worst_row": None if worst is None else {k: worst.get(k) for k in ("pair", "path", "size", "dtype", "measured_s", "predicted_s")},
        "unpredictable_rows": len(rows) - len(numbered),
        "median_tolerance": statistics.median(r["tolerance"] for r in numbered) if numbered else None,
    }


def bandwidth_bound(rows: list[dict]) -> dict[str, float]:
    """The median error of each path that copies by design (every move copies), over its rows of
    BANDWIDTH_BOUND and up that were given a number, by ``kind path``."""
    errors: dict[str, list[float]] = {}
    for r in rows:
        copies = r["kind"] == "move" or gpushare._native.paths.copied_by_design(r["kind"], r["path"]) is not None
        if r["size"] >= BANDWIDTH_BOUND and not r.get("unpredictable") and copies:
            errors.setdefault(f"{r['kind']} {r['path']}", []).append(r["error"])
    return {label: statistics.median(e) for label, e in sorted(errors.items())}


def summarise(rows: list[dict], autos: list[dict]) -> dict:
    large = [r["error"] for r in rows if r["size"] >= LARGE]
    small = [r["error"] for r in rows if r["size"] < LARGE]
    # A pick with a worse verdict than the best measured (a copy where a path shares) is not
    # correct, however fast: it counts against auto, never for it.
    within = sum(a.get("auto_correct", True) and a["ratio"] <= 1.1 for a in autos)
    wrong = [a for a in autos if not a.get("auto_correct", True)]
    large_unscaled = [r["error_unscaled"] for r in rows if r["size"] >= LARGE]
    small_unscaled = [r["error_unscaled"] for r in rows if r["size"] < LARGE]
    return {
        "median_error_large": statistics.median(large) if large else None,
        "median_error_small": statistics.median(small) if small else None,
        # The same with each fixed cost as calibrated, not scaled to the host's speed at the time.
        "median_error_large_unscaled": statistics.median(large_unscaled) if large_unscaled else None,
        "median_error_small_unscaled": statistics.median(small_unscaled) if small_unscaled else None,
        "rows": len(rows),
        "auto_within_1_1": f"{within}/{len(autos)}",
        "auto_wrong_verdict": len(wrong),
        "auto_worst": max(autos, key=lambda a: a["ratio"]) if autos else None,
        "median_error_bandwidth_bound": bandwidth_bound(rows),
        **promise(rows),
    }


def report(title: str, summary: dict) -> None:
    print(f"\n{title}: {summary['rows']} rows")
    unscaled = {k: summary.get(f"{k}_unscaled") for k in ("median_error_large", "median_error_small")}
    aside = {k: "" if v is None else f"; {v*100:.1f} % with fixed costs as calibrated" for k, v in unscaled.items()}
    if summary["median_error_large"] is not None:
        print(f"  median |predicted - measured| / measured, >= 1 MiB: {summary['median_error_large']*100:.1f} % (goal <= 15 %)"
              f"{aside['median_error_large']}")
    if summary["median_error_small"] is not None:
        print(f"  median |predicted - measured| / measured, <  1 MiB: {summary['median_error_small']*100:.1f} % (goal <= 30 %)"
              f"{aside['median_error_small']}")
    if summary.get("coverage") is not None:
        w = summary["worst_row"]
        print(f"  measured within the stated error: {summary['coverage']*100:.0f} % of rows with a number (goal >= 90 %); "
              f"worst ratio {summary['worst_ratio']:.2f}x ({w['pair']} {w['path']} at {w['size']} B; goal <= 2x); "
              f"median stated error ±{summary['median_tolerance']*100:.0f} %; "
              f"{summary['unpredictable_rows']} rows said they could not be predicted within 2x")
    bound = summary.get("median_error_bandwidth_bound") or {}
    if bound:
        print(f"  median error from {BANDWIDTH_BOUND >> 20} MiB up, each path that copies (goal <= 5 % each): "
              + ", ".join(f"{label} {e*100:.1f} %" for label, e in bound.items()))
    print(f"  auto within 1.1x of the fastest correct path measured: {summary['auto_within_1_1']} cells (goal >= 95 %)")
    if summary["auto_wrong_verdict"]:
        print(f"  auto took a worse verdict than the best measured in {summary['auto_wrong_verdict']} cells (counted as misses)")
    worst = summary["auto_worst"]
    if worst:
        print(f"  worst: {worst['pair']} at {worst['size']} B, auto {worst['auto']} {worst['auto_s']*1e6:.1f} µs against "
              f"{worst['fastest']} {worst['fastest_s']*1e6:.1f} µs ({worst['ratio']:.2f}x; goal never above 1.5x)")


def gpu_count() -> int:
    status = gpushare._native.cuda.driver_status()
    return int(status.get("device_count") or 0) if status.get("available") else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", help="cpu or cuda:0")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--busy", action="store_true", help="also measure with work queued on the producer (GPU)")
    parser.add_argument("--no-moves", action="store_true", help="skip the moves to a second GPU")
    parser.add_argument("--no-processes", action="store_true", help="skip the process paths")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--rounds", type=int, default=1,
                        help="measure the share grid this many times against the one calibration: the spread of the medians")
    parser.add_argument("--save-model", metavar="FILE", help="after calibrating, keep a copy of the cost model here")
    parser.add_argument("--calibrated", metavar="FILE",
                        help="measure against this cost model (an earlier run's --save-model on this machine) instead "
                             "of calibrating: more rounds against one calibration than one command fits")
    parser.add_argument("--grid", choices=("default", "untuned"), default="default",
                        help="untuned: sizes between and past the calibrated ones (3 KiB to 200 MiB) in float32, "
                             "int8 and float16, where nothing was tuned")
    args = parser.parse_args()
    if args.grid == "untuned":
        GRID.update(sizes=UNTUNED_SIZES, dtypes=UNTUNED_DTYPES)
    device = "cuda:0" if args.device == "cuda" else args.device
    names = frameworks(device)
    to_device = "cuda:1" if device.startswith("cuda") and gpu_count() >= 2 and not args.no_moves else None
    movers = move_frameworks(names) if to_device else []
    workers = [] if args.no_processes else process_frameworks(names)
    t0 = time.time()
    calibration: list[dict] = []  # every calibration sweep with its samples: replay_advice.py refits from it
    if args.calibrated:
        # This run's cache (a directory of its own) takes the earlier run's model, as calibrate left it.
        model_file = model_cache.cache_file()
        model_file.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(args.calibrated, model_file)
        advice.forget()
        if advice.model() is None:
            parser.error(f"--calibrated: {args.calibrated} is not a cost model of this machine")
        movers, workers = [], []  # what the earlier run calibrated is measured as it stands: shares
    else:
        gpushare.calibrate(names, sizes=CALIBRATION_SIZES, device=device, repeat=args.repeat, record=calibration)
    if movers:
        gpushare.calibrate(movers, sizes=CALIBRATION_SIZES, device=device, to_device=to_device, repeat=args.repeat, shares=False,
                           record=calibration)
    if workers:
        gpushare.calibrate(workers, sizes=CALIBRATION_SIZES, device=device, processes=True, repeat=args.repeat, shares=False,
                           worker_device=to_device, record=calibration)
    model = advice.model()
    calibration_s = time.time() - t0
    if args.save_model:
        # Before the grid: a run stopped later keeps its calibration for --calibrated.
        os.makedirs(os.path.dirname(os.path.abspath(args.save_model)), exist_ok=True)
        shutil.copyfile(model_cache.cache_file(), args.save_model)
    print(f"device {device}; frameworks {', '.join(names)}; moves {', '.join(movers) or 'none'}; "
          f"processes {', '.join(workers) or 'none'}; calibration {calibration_s:.1f} s, {len(model)} paths fitted"
          f"{' (cached, calibrated at ' + time.strftime('%H:%M:%S', time.gmtime(model.created)) + ' UTC)' if args.calibrated else ''}")
    kinds: dict[str, tuple[list[dict], list[dict]]] = {"shares": evaluate(model, device, names, args.repeat)}
    rounds = [summarise(*kinds["shares"])] if args.rounds > 1 else []
    for k in range(1, args.rounds + 1):
        if k > 1:
            rounds.append(summarise(*evaluate(model, device, names, args.repeat)))
        if args.rounds > 1:  # each round as it ends: a run stopped before the last keeps the rest
            print(f"shares, round {k} of {args.rounds}: median error >= 1 MiB {rounds[-1]['median_error_large']*100:.1f} %, "
                  f"< 1 MiB {rounds[-1]['median_error_small']*100:.1f} %", flush=True)
    if movers:
        kinds["moves"] = evaluate_moves(model, device, to_device, movers, args.repeat)
    elif device.startswith("cuda") and not args.no_moves:
        print("moves: skipped, fewer than 2 GPUs")
    process_notes: dict = {}
    if workers:
        rows, autos, process_notes = evaluate_processes(model, device, workers, args.repeat, worker_device=to_device)
        kinds["processes"] = (rows, autos)
    print(f"{'kind':<8} {'pair':<14} {'path':<11} {'size':>9} {'measured':>10} {'predicted':>10} {'error':>7}")
    for kind, (rows, _) in kinds.items():
        for r in rows:
            # A handoff to a worker on another GPU names that GPU beside its path.
            label = r["path"] + (f"@{r['place'].split('@')[1]}" if "@" in r["place"] else "")
            print(f"{kind:<8} {r['pair']:<14} {label:<11} {r['size']:>9} {r['measured_s']*1e6:9.1f}µ "
                  f"{r['predicted_s']*1e6:9.1f}µ {r['error']*100:6.0f}%{' (outside the sweep)' if r['extrapolated'] else ''}")
    summaries = {kind: summarise(rows, autos) for kind, (rows, autos) in kinds.items()}
    every = summarise([r for rows, _ in kinds.values() for r in rows], [a for _, autos in kinds.values() for a in autos])
    for kind, summary in summaries.items():
        report(kind, summary)
    report("all kinds", every)
    if process_notes.get("one_round_median_error_large") is not None:
        drift = process_notes["drift_between_rounds_median"]
        print(f"  processes, measured in {process_notes['rounds']} rounds of {process_notes['samples_per_round']} samples "
              f"(as calibrated): one round alone would read {process_notes['one_round_median_error_large']*100:.1f} % "
              f"at >= 1 MiB; the rounds of one row differ by {0 if drift is None else drift*100:.0f} % (median)")
    for kind, (_, autos) in kinds.items():
        if kind != "shares":
            for a in autos:
                print(f"  {kind} {a['pair']} at {a['size']} B: auto {a['auto']} ({a['auto_verdict']}) {a['auto_s']*1e6:.1f} µs, "
                      f"fastest correct {a['fastest']} ({a['fastest_verdict']}) {a['fastest_s']*1e6:.1f} µs, {a['ratio']:.2f}x")
    busy, busy_autos = busy_producer(model, args.repeat) if args.busy and device.startswith("cuda") else ([], [])
    for b in busy:
        pred = "n/a" if b["predicted_s"] is None else f"{b['predicted_s']*1e6:.0f} µs"
        print(f"busy producer ({b['queued_s']*1e3:.2f} ms queued): {b['pair']} {b['path']}"
              f"{' -> ' + b['took'] if b['path'] == 'auto' else ''} ({b['ordering']}{', host waits' if b['waits'] else ''}): "
              f"measured {b['measured_s']*1e6:.0f} µs, predicted {pred}")
    for a in busy_autos:
        print(f"busy producer: {a['pair']}: auto took {a['auto']} {a['auto_s']*1e6:.0f} µs, fastest correct measured busy "
              f"{a['fastest']} {a['fastest_s']*1e6:.0f} µs ({a['ratio']:.2f}x); advise ({a['advise_producer']}) recommends {a['advise_pick']}")
    if rounds:
        print(f"\nshares, {len(rounds)} rounds of the grid against one calibration:")
        for key, words in (("median_error_large", ">= 1 MiB"), ("median_error_small", "<  1 MiB")):
            medians = [r[key] * 100 for r in rounds if r[key] is not None]
            print(f"  median error {words}: {', '.join(f'{m:.1f}' for m in medians)} %; "
                  f"spread {max(medians) - min(medians):.1f} points (goal: within 3 points of each other)")
        # Each round's worst row too: the rows of rounds after the first are not kept, and a round's
        # worst ratio alone does not say which handoff it was.
        summaries["rounds"] = {"shares": [{k: r[k] for k in ("median_error_large", "median_error_small", "coverage", "worst_ratio",
                                                              "worst_row", "unpredictable_rows")}
                                          for r in rounds]}
    if busy_autos:
        summaries["busy"] = summarise([], busy_autos)
        report("busy producer, auto's pick", summaries["busy"])
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"device": device, "frameworks": names, "moves_to": to_device, "move_frameworks": movers,
                       "process_frameworks": workers,
                       "rows": [r for rows, _ in kinds.values() for r in rows],
                       "autos": [a for _, autos in kinds.values() for a in autos], "busy": busy, "busy_autos": busy_autos,
                       "summary": every, "summaries": summaries, "process_rounds": process_notes, "model": model.to_dict(),
                       "calibration": calibration, "calibration_s": calibration_s}, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
