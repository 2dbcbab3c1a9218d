"""How true the cost model is (issue 26.5): predicted against measured, and how good `auto`'s pick is.

One run: calibrate this machine's model (three sizes, into a cache of this run's own), then sweep
pairs × paths at *other* sizes with the real lab and compare every measured row with the model's
prediction made before it ran, and every (pair, size)'s `auto` row with the fastest path of the best
verdict measured in the same sweep. Reports:

- the median |predicted − measured| / measured for sizes ≥ 1 MiB (goal ≤ 15 %) and below (≤ 30 %);
- how often `auto` is within 1.1× of the fastest correct path measured (goal ≥ 95 % of cells), and
  the worst ratio (never above 1.5×);
- on a GPU with ``--busy``, the same handoffs with ~2 ms of work queued on the producer's stream:
  a host-side synchronise (`capsule`, `cai`) waits for it, an event on the device (`dlpack`) does
  not, and the model's prediction with the queued work is checked against both.

Run: ``.venv/bin/python benchmarks/bench_advice.py [--device cuda] [--busy] [--json F]``.
CPU pairs: torch, jax, tf, numpy; GPU: torch, jax, cupy, numba, tf (where installed).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
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
from gpushare import advice  # noqa: E402

CALIBRATION_SIZES = ("64KiB", "1MiB", "16MiB", "64MiB")
#: Sizes the model was not fitted at, inside and just outside its sweep.
EVALUATION_SIZES = ("16KiB", "256KiB", "4MiB", "32MiB")
LARGE = 1 << 20


def frameworks(device: str) -> list[str]:
    return advice._default_frameworks(device)


def evaluate(model, device: str, names: list[str], repeat: int) -> tuple[list[dict], list[dict]]:
    """Every measured row against its prediction; every (pair, size)'s auto against the best."""
    rows, autos = [], []
    for src, dst in itertools.permutations(names, 2):
        b = gpushare.bench(src, dst, EVALUATION_SIZES, device=device, repeat=repeat, progress=False)
        d = b.to_dict()
        place = d["device"]
        by_size: dict[int, list[dict]] = {}
        for p in d["points"]:
            by_size.setdefault(int(p["size"]), []).append(p)
            timing = p.get("timing")
            if p["verdict"] == "failed" or not timing:
                continue
            predicted = model.predict("share", p["path"], src, dst, place, int(p["size"]))
            if predicted is None:
                continue
            measured = float(timing["median"])
            rows.append(dict(pair=f"{src}->{dst}", path=p["path"], size=int(p["size"]), measured_s=measured,
                             predicted_s=predicted.seconds, error=abs(predicted.seconds - measured) / measured,
                             tolerance=predicted.tolerance, extrapolated=predicted.extrapolated))
        for size, points in by_size.items():
            worked = [p for p in points if p["verdict"] != "failed" and p.get("timing")]
            auto = [p for p in worked if p.get("auto")]
            if not worked or not auto:
                continue
            best_verdict = "shared" if any(p["verdict"] == "shared" for p in worked) else "copied"
            # `shared` hands over a SharedBuffer, not the user's array: not a path auto could take;
            # nor a path whose consumer may read before the producer's queued work lands.
            takes_objects = gpushare.adapters.framework(dst).accepts_objects
            ordered = lambda p: gpushare._native.path_ordering("share", p["path"], place, takes_objects)[2]  # noqa: E731
            correct = [p for p in worked if p["verdict"] == best_verdict and p["path"] != "shared" and ordered(p)]
            if not correct:  # only `shared` shared (a CPU run: numpy->jax dlpack copied at 4 MiB): no cell to judge
                continue
            fastest = min(correct, key=lambda p: p["timing"]["median"])
            chosen = auto[0]
            ratio = chosen["timing"]["median"] / fastest["timing"]["median"]
            autos.append(dict(pair=f"{src}->{dst}", size=size, auto=chosen["path"], auto_s=chosen["timing"]["median"],
                              auto_verdict=chosen["verdict"], fastest=fastest["path"],
                              fastest_s=fastest["timing"]["median"], ratio=ratio))
    return rows, autos


def busy_producer(model, repeat: int) -> list[dict]:
    """torch → cupy/jax/numba on a GPU with a few milliseconds of matmuls queued on the producer's
    stream: a host-side synchronise waits for them, an event on the device should not."""
    import torch

    out = []
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
    queued = start.elapsed_time(end) / 1e3
    x = torch.ones(1 << 18, device="cuda")
    for dst in [n for n in ("cupy", "jax", "numba") if gpushare.adapters.framework(n).installed()]:
        for path in ("dlpack", "capsule", "cai"):
            samples = []
            try:
                gpushare.share(x, dst, path=path)  # warm: the route, the plan, the target's import
                for _ in range(repeat):
                    torch.cuda.synchronize()
                    queue_work()
                    t0 = time.perf_counter()
                    gpushare.share(x, dst, path=path)
                    samples.append(time.perf_counter() - t0)
            except gpushare.GpushareError:
                continue
            torch.cuda.synchronize()
            ordering = gpushare._native.path_ordering("share", path, "cuda:0",
                                                      gpushare.adapters.framework(dst).accepts_objects)[0]
            p = model.predict("share", path, "torch", dst, "cuda:0", x.numel() * 4, ordering, queued)
            measured = statistics.median(samples)
            out.append(dict(pair=f"torch->{dst}", path=path, queued_s=queued, measured_s=measured,
                            predicted_s=None if p is None else p.seconds, ordering=ordering))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", help="cpu or cuda:0")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--busy", action="store_true", help="also measure with work queued on the producer (GPU)")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    device = "cuda:0" if args.device == "cuda" else args.device
    names = frameworks(device)
    t0 = time.time()
    calibration: list[dict] = []  # every calibration sweep with its samples: replay_advice.py refits from it
    model = gpushare.calibrate(names, sizes=CALIBRATION_SIZES, device=device, repeat=args.repeat, record=calibration)
    calibration_s = time.time() - t0
    rows, autos = evaluate(model, device, names, args.repeat)
    large = [r["error"] for r in rows if r["size"] >= LARGE]
    small = [r["error"] for r in rows if r["size"] < LARGE]
    within = sum(a["ratio"] <= 1.1 for a in autos)
    worst = max(autos, key=lambda a: a["ratio"]) if autos else None
    print(f"device {device}; frameworks {', '.join(names)}; calibration {calibration_s:.1f} s, {len(model)} paths fitted")
    print(f"{'pair':<14} {'path':<8} {'size':>9} {'measured':>10} {'predicted':>10} {'error':>7}")
    for r in rows:
        print(f"{r['pair']:<14} {r['path']:<8} {r['size']:>9} {r['measured_s']*1e6:9.1f}µ {r['predicted_s']*1e6:9.1f}µ "
              f"{r['error']*100:6.0f}%{' (outside the sweep)' if r['extrapolated'] else ''}")
    summary = {
        "median_error_large": statistics.median(large) if large else None,
        "median_error_small": statistics.median(small) if small else None,
        "auto_within_1_1": f"{within}/{len(autos)}",
        "auto_worst": worst,
    }
    print()
    if large:
        print(f"median |predicted - measured| / measured, >= 1 MiB: {summary['median_error_large']*100:.1f} % (goal <= 15 %)")
    if small:
        print(f"median |predicted - measured| / measured, <  1 MiB: {summary['median_error_small']*100:.1f} % (goal <= 30 %)")
    print(f"auto within 1.1x of the fastest correct path measured: {within} of {len(autos)} cells (goal >= 95 %)")
    if worst:
        print(f"worst: {worst['pair']} at {worst['size']} B, auto {worst['auto']} {worst['auto_s']*1e6:.1f} µs against "
              f"{worst['fastest']} {worst['fastest_s']*1e6:.1f} µs ({worst['ratio']:.2f}x; goal never above 1.5x)")
    busy = busy_producer(model, args.repeat) if args.busy and device.startswith("cuda") else []
    for b in busy:
        pred = "n/a" if b["predicted_s"] is None else f"{b['predicted_s']*1e6:.0f} µs"
        print(f"busy producer ({b['queued_s']*1e3:.2f} ms queued): {b['pair']} {b['path']} ({b['ordering']}): "
              f"measured {b['measured_s']*1e6:.0f} µs, predicted {pred}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"device": device, "frameworks": names, "rows": rows, "autos": autos, "busy": busy,
                       "summary": summary, "model": model.to_dict(), "calibration": calibration,
                       "calibration_s": calibration_s}, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
