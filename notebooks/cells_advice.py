"""The cells of notebook 08: which path is fastest on this machine, predicted before it runs and
checked after. Runs on a GPU; on a CPU it calibrates the CPU paths instead."""

from __future__ import annotations

from cells_common import code, md

PATH_ADVICE = [
    md("""
# Which path is fastest here: predicted before, checked after

gpushare fits a cost model of this machine: every path's time as `fixed + bytes / bandwidth`, per
framework pair and place, from a short sweep (`gpushare.calibrate()`, the same form NCCL's tuner
uses). Then it can answer *before* converting anything: what will each path do with this array and
what will it cost, and which should I take? This notebook calibrates, asks, and then measures what
it predicted.
"""),
    code("""
%load_ext gpushare
import gpushare, torch
device = "cuda:0" if torch.cuda.is_available() else "cpu"
frameworks = [f for f in ("torch", "jax", "cupy", "numba") if gpushare.adapters.framework(f).installed()]
if device == "cpu":
    # A short stand-in: the GPU parts below are skipped, the CPU paths of two frameworks calibrated.
    frameworks = [f for f in ("torch", "numpy") if gpushare.adapters.framework(f).installed()]
    print("no CUDA here: the GPU parts are skipped; calibrating", frameworks, "on the CPU")
else:
    print(device, frameworks)
"""),
    md("## Calibrate: a few seconds per pair, cached for this machine\\nEach row is one path of one pair: its fixed cost, its bandwidth where it copies, and the worst error the fit showed on its own sweep."),
    code("""
model = gpushare.calibrate(frameworks, device=device, repeat=5)
model
"""),
    md("## Ask before converting\\n`advise` gives every applicable path's verdict (from the rules) and time (from the model), nothing converted. Zero-copy paths differ only in fixed cost, so the pick is the cheapest that shares."),
    code("""
x = torch.ones(1 << 20, device=device)  # 4 MiB
gpushare.advise(x, "cupy" if "cupy" in frameworks else "numpy")
"""),
    code("%share x ->jax --advise"),
    md("## Checked after: predicted against measured at sizes the model never saw\\nThe sweep below measures every path at four sizes between and beyond the calibration's; each row shows the prediction made before it ran and how far off it was."),
    code("""
target = "cupy" if "cupy" in frameworks else "numpy"
b = gpushare.bench("torch", target, ["16KiB", "256KiB", "4MiB", "32MiB"], device=device, repeat=5, progress=False)
d = b.to_dict()
print(f"{'path':<8} {'size':>9} {'measured':>11} {'predicted':>11} {'error':>6}  bound by")
for p in d["points"]:
    if p["verdict"] == "failed" or not p.get("timing") or p["path"] == "shared":
        continue
    pred = model.predict("share", p["path"], "torch", target, d["device"], p["size"])
    if pred is None:
        continue
    measured = p["timing"]["median"]
    print(f"{p['path']:<8} {p['size']:>9} {measured*1e6:9.1f}µs {pred.seconds*1e6:9.1f}µs "
          f"{abs(pred.seconds - measured) / measured * 100:5.0f}%  {pred.bound}{' (MISS)' if pred.misses(measured) else ''}")
b
"""),
    md("## The model's lines over the measured points\nEach path's fitted `fixed + bytes / bandwidth` drawn over the sizes, and the points the sweep above measured at sizes the model never saw: a zero-copy path is a flat line (its fixed cost), a copy bends up where its bandwidth takes over."),
    code("""
import importlib.util
import numpy as np
from gpushare.paths import PATH_TABLE
HAVE_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None
if not HAVE_MATPLOTLIB:
    print("matplotlib is not installed (pip install matplotlib): the model's lines are not drawn")
else:
    import matplotlib.pyplot as plt
    colours = {p["name"]: p["colour"] for p in PATH_TABLE if p["kind"] == "share"}
    grid = np.logspace(np.log10(16 << 10), np.log10(64 << 20), 60)
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for path in dict.fromkeys(p["path"] for p in d["points"]):
        measured = [(p["size"], p["timing"]["median"]) for p in d["points"]
                    if p["path"] == path and p["verdict"] != "failed" and p.get("timing")]
        line = [model.predict("share", path, "torch", target, d["device"], int(n)) for n in grid]
        if not measured or path == "shared" or any(f is None for f in line):
            continue
        colour = colours.get(path, "#7f7f7f")
        ax.plot(grid, [f.seconds * 1e6 for f in line], color=colour, label=f"{path}: model")
        ax.scatter([n for n, _ in measured], [t * 1e6 for _, t in measured], color=colour, edgecolors="black", zorder=3,
                   label=f"{path}: measured")
    ax.set(xscale="log", yscale="log", xlabel="bytes", ylabel="µs per handoff",
           title=f"torch → {target} on {d['device']}: model (lines) against measured (points)")
    ax.legend(fontsize=7, ncol=2)
    plt.show()
"""),
    md("## A busy producer\nA path whose host waits for the producer's queued work (a capsule into TensorFlow, the host and pinned copies, JAX's DLPack import) costs at least all of that work; one ordered on the device (`dlpack` into most consumers, `cai`, `copy`) does not. `advise` and `auto` ask the driver whether the producer's stream is busy (`cuStreamQuery`, which does not wait), say which state they assumed, and prefer a path ordered on the device while it is busy. `queued=` tells `advise` how much is queued where you know."),
    code("""
consumer = "jax" if "jax" in frameworks else target
print("idle:", gpushare.advise(x, consumer).recommended, "| share takes", gpushare.share(x, consumer).path)
if device != "cpu":
    a = torch.randn(4096, 4096, device=device)
    (a @ a).sum().item()  # warm: cuBLAS loaded, the kernels chosen
    for _ in range(8):
        a @ a             # milliseconds of work queued on torch's stream
    busy = gpushare.advise(x, consumer)
    taken = gpushare.share(x, consumer)
    torch.cuda.synchronize()
    print("busy:", busy.recommended, "| share takes", taken.path, "|", busy.assumed)
    display(busy)
else:
    print("no GPU here: nothing is queued on a CPU; with 2 ms queued, as advise would predict it:")
    display(gpushare.advise(x, consumer, queued=2e-3))
"""),
    md("## A move between GPUs and a handoff to another process\nWith two GPUs, `calibrate(..., to_device='cuda:1')` fits the moves and `advise(x, to, device='cuda:1')` ranks them; `calibrate(..., processes=True)` fits the process paths and `advise(x, to, across='process')` ranks those. `shares=False` sweeps only the moves or processes, keeping the share pairs fitted above."),
    code("""
if torch.cuda.device_count() >= 2:
    gpushare.calibrate(["torch"], device="cuda:0", to_device="cuda:1", repeat=5, shares=False)
    display(gpushare.advise(x, "torch", device="cuda:1"))
else:
    print("fewer than 2 GPUs here: no move to advise on")
"""),
    code("""
gpushare.calibrate(["torch"], sizes=("64KiB", "1MiB", "16MiB"), device=device, processes=True, repeat=3, shares=False)
gpushare.advise(x, "torch", across="process")
"""),
]
