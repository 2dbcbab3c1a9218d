"""The cells of notebook 08: which path is fastest on this machine, predicted before it runs and
checked after (issue 26.7). Runs on a GPU; on a CPU it calibrates the CPU paths instead."""

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
    md("## A busy producer\\n`capsule` and `cai` carry no stream, so gpushare synchronises the producer on the host first: the host waits for all of its queued work. `dlpack` orders with an event on the device instead. Tell `advise` how much work is queued and the pick changes."),
    code("""
print(gpushare.advise(x, target, queued=0.0).recommended, "with an idle producer")
print(gpushare.advise(x, target, queued=2e-3).recommended, "with 2 ms queued on the producer's stream")
gpushare.advise(x, target, queued=2e-3)
"""),
    md("## A move between GPUs and a handoff to another process\\nWith two GPUs, `advise(x, to, device='cuda:1')` ranks the moves; `across='process'` the process paths (their times appear once `calibrate(..., processes=True)` measured them)."),
    code("""
if torch.cuda.device_count() >= 2:
    gpushare.calibrate(["torch"], device="cuda:0", to_device="cuda:1", repeat=5)
    display(gpushare.advise(x, "torch", device="cuda:1"))
else:
    print("one GPU here: no move to advise on")
gpushare.advise(x, "torch", across="process")
"""),
]
