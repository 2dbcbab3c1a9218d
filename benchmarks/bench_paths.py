"""Transfer paths against PyTorch's own copies, in one run, with the issue's targets checked.

Measured (GPU; on a CPU-only machine the same script runs small sizes and marks the GPU-only
figures "n/a"):

- PyTorch's pinned round trip ``x.to('cpu', non_blocking=True).to(dev, non_blocking=True)`` and
  ``x.clone()``: the references;
- gpushare's ``pinned`` path (D→H→D through page-locked memory, double-buffered by the Rust core),
  its ``copy`` path (cuMemcpyDtoD into gpushare memory, then a zero-copy handoff) and the naive
  ``host`` path (``.cpu().numpy()`` → ``torch.from_numpy(...).to(dev)``), all torch → torch;
- zero-copy paths (``dlpack``, ``cai``, ``shared``) from 1 KiB to 1 GiB, to every framework present;
- gpushare's own timing (``gpushare.share(..., repeat=, number=)``, the loop every share, table and
  calibration runs) against ``torch.utils.benchmark.Timer`` on the same route, A/B: one input, the
  same calls per block, the tools taking turns (``Run.agreement``).

gpushare's paths are timed by ``gpushare.share``; PyTorch's references by ``torch.utils.benchmark``.
The A/B section is what makes the two comparable: it checks the two timers agree on one route.

Targets (printed as ratios, and stored with ``ok`` in the JSON):
pinned ≥ 80 % of torch's pinned bandwidth and ≥ 10× host at 256 MiB; copy ≥ 90 % of clone
bandwidth; zero-copy flat within 2× from 1 KiB to 1 GiB; medians within 10 % of torch.utils.benchmark.

    python benchmarks/bench_paths.py [--quick] [--device cuda:0] [--budget 240] --out results.json

Every measurement is guarded: an error is recorded in the JSON and the run goes on. ``--budget``
seconds bound the whole run (what is left is marked skipped); a full run takes about a minute on an
H100, ``--quick`` about 20 s.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Iterator

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.utils.benchmark as tbench  # noqa: E402

import gpushare  # noqa: E402
from gpushare import _native, lab, paths  # noqa: E402
from gpushare.adapters import framework  # noqa: E402

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30

#: The tool column of a row: gpushare's paths are timed by the product's own loop, PyTorch's
#: references by PyTorch's timer.
SHARE, REFERENCE = "gpushare.share", "torch.utils.benchmark"

#: Torch threads while gpushare.share and torch.utils.benchmark are compared: Timer's own default.
#: CUDA work does not depend on it; on a busy CPU a multi-threaded copy of a few MiB waits for the
#: scheduler to run its workers, and both tools would time that noise instead of the copy.
AGREEMENT_THREADS = 1


@contextlib.contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """torch's intra-op thread count set to ``n`` inside, restored after (what Timer does)."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def size_label(n: int) -> str:
    for unit, f in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if n >= f:
            return f"{n / f:g} {unit}"
    return f"{n} B"


class Run:
    """Collects measurements and errors; stops measuring once the time budget is spent."""

    def __init__(self, device: str, repeat: int, budget: float):
        self.device, self.repeat, self.deadline = device, repeat, time.monotonic() + budget
        self.cuda = device.startswith("cuda")
        self.measurements: list[dict] = []
        self.errors: list[dict] = []

    def _record(self, rec: dict) -> dict:
        self.measurements.append(rec)
        shown = rec.get("error") or rec.get("skipped")
        if shown:
            print(f"  {rec['name']:<34} {size_label(rec['size']):>9}  {rec['tool']:<22} {shown}", flush=True)
        else:
            bw = f"{rec['bandwidth_GBps']:9.2f} GB/s" if rec.get("bandwidth_GBps") else ""
            print(f"  {rec['name']:<34} {size_label(rec['size']):>9}  {rec['tool']:<22} "
                  f"{rec['median_s'] * 1e6:12.2f} µs {bw}", flush=True)
        return rec

    def _spent(self, rec: dict) -> bool:
        if time.monotonic() > self.deadline:
            rec["skipped"] = "time budget spent"
            return True
        return False

    def _failed(self, rec: dict, e: Exception) -> None:
        rec["error"] = f"{type(e).__name__}: {e}"
        self.errors.append({"name": rec["name"], "size": rec["size"], "traceback": traceback.format_exc(limit=4)})

    def reference(self, name: str, size: int, fn: Callable[[Any], Any], arg: Any, *, moved: int) -> dict:
        """A raw framework call ``fn(arg)`` timed by torch.utils.benchmark (blocked auto-range)."""
        rec: dict[str, Any] = {"name": name, "size": size, "tool": REFERENCE, "bytes_moved": moved}
        if self._spent(rec):
            return self._record(rec)
        try:
            timer = tbench.Timer(stmt="fn(arg)", globals={"fn": fn, "arg": arg}, num_threads=torch.get_num_threads())
            m = timer.blocked_autorange(min_run_time=0.02 * self.repeat)
            rec.update(median_s=m.median, min_s=min(m.times), iqr_s=m.iqr, repeats=len(m.times),
                       loops=m.number_per_run,
                       bandwidth_GBps=(moved / m.median / 1e9) if moved and m.median > 0 else None)
        except Exception as e:
            self._failed(rec, e)
        return self._record(rec)

    def share(self, name: str, size: int, obj: Any, target: str, path: str, *, moved: int) -> dict:
        """gpushare's ``path`` from ``obj`` into ``target``, timed as the magics time it (``share``
        with a ``budget``): warm-up, calls per sample auto-ranged to 20 ms so the synchronisation at
        a sample's edges is amortised as Timer's blocks amortise theirs, ``repeat`` samples; with
        the share's checked verdict. (``share(repeat=N)`` alone times N single handoffs, each
        synchronised: the latency of one, not the rate of many.)"""
        rec: dict[str, Any] = {"name": name, "size": size, "tool": SHARE, "bytes_moved": moved}
        if self._spent(rec):
            return self._record(rec)
        try:
            r = gpushare.share(obj, target, path=path, repeat=self.repeat, warmup=2, budget=0.2)
            t = r.timing
            rec.update(median_s=t.median, min_s=t.min, iqr_s=t.iqr, repeats=t.repeats, loops=t.loops,
                       device_median_s=t.device_median, warning=t.warning, verdict=r.verdict,
                       bandwidth_GBps=(moved / t.median / 1e9) if moved and t.median > 0 else None)
            del r
        except Exception as e:
            self._failed(rec, e)
        return self._record(rec)

    def agreement(self, name: str, size: int, path: str, arg: Any, *, moved: int,
                  rounds: int = 60, max_block: float = 0.01) -> tuple[dict, dict]:
        """gpushare's ``path`` torch → torch through ``gpushare.share`` and the same route's call
        through torch.utils.benchmark.Timer, measured fairly.

        Both time the same route on the same input (already allocated, warmed up by torch's own
        ``blocked_autorange``), with the same number of calls per block (the one
        ``blocked_autorange`` chose, divided by 10 while a block would last over ``max_block``, so
        the tools can take turns often), the same synchronisation (``torch.cuda.synchronize`` at
        block boundaries only), the garbage collector off and the same torch thread count. They take
        turns, one block each per round in a random order, for ``rounds`` rounds. Each tool's median
        is over its blocks; the ratio is the median over rounds of gpushare's block over torch's
        block beside it, which cancels what the machine does to both (a busy neighbour, clocks);
        the ratio of the two medians is kept too.
        """
        ours: dict[str, Any] = {"name": name, "size": size, "tool": SHARE, "bytes_moved": moved,
                                "section": "agreement"}
        theirs: dict[str, Any] = {"name": name, "size": size, "tool": REFERENCE, "bytes_moved": moved,
                                  "section": "agreement"}
        if time.monotonic() > self.deadline:
            ours["skipped"] = theirs["skipped"] = "time budget spent"
            return self._record(ours), self._record(theirs)
        try:
            fn = route("torch", "torch", path)
            with torch_threads(AGREEMENT_THREADS):
                timer = tbench.Timer(stmt="fn(arg)", globals={"fn": fn, "arg": arg}, label=name,
                                     sub_label=size_label(size), num_threads=AGREEMENT_THREADS)
                auto = timer.blocked_autorange(min_run_time=0.2)
                number = auto.number_per_run
                while number >= 10 and auto.median * number > max_block:
                    number //= 10
                warmup = max(number // 100, 2)  # what Timer.timeit(number) runs untimed first
                ours_s: list[float] = []
                theirs_s: list[float] = []
                steps = (lambda: ours_s.extend(gpushare.share(arg, "torch", path=path, repeat=1, number=number,
                                                              warmup=warmup).timing.samples),
                         lambda: theirs_s.extend(timer.timeit(number).times))
                order = random.Random(size)
                for _ in range(rounds):
                    for step in steps if order.random() < 0.5 else steps[::-1]:
                        step()
            for rec, times in ((ours, ours_s), (theirs, theirs_s)):
                t = _native.share.Timing(times, number)
                rec.update(median_s=t.median, min_s=t.min, iqr_s=t.iqr, repeats=len(times), loops=number,
                           warning=t.warning, threads=AGREEMENT_THREADS, samples_s=times,
                           bandwidth_GBps=(moved / t.median / 1e9) if moved and t.median > 0 else None)
            theirs.update(autorange_median_s=auto.median, autorange_loops=auto.number_per_run,
                          autorange_blocks=len(auto.times))
            theirs["ratio_gpushare_over_torch"] = statistics.median(o / t for o, t in zip(ours_s, theirs_s))
            theirs["ratio_of_medians"] = ours["median_s"] / theirs["median_s"]
        except Exception as e:
            ours["error"] = theirs["error"] = f"{type(e).__name__}: {e}"
            self.errors.append({"name": name, "size": size, "traceback": traceback.format_exc(limit=4)})
        return self._record(ours), self._record(theirs)

    def find(self, name: str, size: int) -> dict | None:
        """The sweep's measurement (not the A/B agreement's) of ``name`` at ``size``."""
        for r in self.measurements:
            if r["name"] == name and r["size"] == size and "median_s" in r and r.get("section") != "agreement":
                return r
        return None


def route(src: str, dst: str, path: str) -> Callable[[Any], Any]:
    return paths.route(framework(src), framework(dst), path)[1]


def make(n_bytes: int, device: str) -> torch.Tensor:
    return torch.ones(max(n_bytes // 4, 1), dtype=torch.float32, device=device)


def copies(run: Run, sizes: list[int]) -> None:
    """References (clone, torch pinned round trip) and gpushare's copy, pinned and host paths."""
    dev = run.device
    pinned = True
    try:
        route("torch", "torch", "pinned")
    except Exception as e:
        print(f"  pinned path not applicable here: {e}")
        pinned = False

    def torch_pinned(x: torch.Tensor) -> torch.Tensor:
        return x.to("cpu", non_blocking=True).to(dev, non_blocking=True)

    for size in sizes:
        try:
            x = make(size, dev)
        except Exception as e:
            run._record({"name": "make source", "size": size, "tool": "torch", "error": f"{type(e).__name__}: {e}"})
            continue
        n = x.numel() * x.element_size()
        run.reference("torch clone", size, torch.clone, x, moved=n)
        run.share("gpushare copy", size, x, "torch", "copy", moved=n)
        if run.cuda:
            run.reference("torch pinned round trip", size, torch_pinned, x, moved=n)
        if pinned and run.cuda:
            run.share("gpushare pinned", size, x, "torch", "pinned", moved=n)
        if size <= 256 * MiB:
            run.share("gpushare host", size, x, "torch", "host", moved=n)
        del x
        lab.empty_cache()
        if run.cuda:
            torch.cuda.empty_cache()


def zero_copy(run: Run, sizes: list[int]) -> None:
    """Zero-copy handoffs: their cost must not grow with the size."""
    dev = run.device
    targets = ["torch"]
    for fw, probe in (("cupy", "cupy"), ("jax", "jax"), ("numpy", "numpy")):
        try:
            mod = __import__(probe)
            if fw == "jax" and run.cuda and not any(d.platform == "gpu" for d in mod.devices()):
                continue
            if fw == "numpy" and run.cuda:
                continue
            if fw == "cupy" and not run.cuda:
                continue
            targets.append(fw)
        except Exception:
            pass
    for size in sizes:
        try:
            x = make(size, dev)
            shared_src = gpushare.SharedBuffer((max(size // 4, 1),), "float32", dev).to("torch")
        except Exception as e:
            run._record({"name": "make source", "size": size, "tool": "torch", "error": f"{type(e).__name__}: {e}"})
            continue
        for dst_name in targets:
            for path in ("dlpack", "cai", "shared"):
                if path == "cai" and dst_name not in ("cupy",):
                    continue
                obj = shared_src if path == "shared" else x
                try:
                    route("torch", dst_name, path)
                except Exception as e:
                    run._record({"name": f"{path} torch→{dst_name}", "size": size, "tool": SHARE,
                                 "error": f"not applicable: {e}"})
                    continue
                run.share(f"{path} torch→{dst_name}", size, obj, dst_name, path, moved=0)
        del x, shared_src
        if run.cuda:
            torch.cuda.empty_cache()


def against_torch_timer(run: Run, sizes: list[int]) -> None:
    """The same routes through gpushare.share and torch.utils.benchmark, A/B on one input: medians
    must agree."""
    dev = run.device
    ops = [("gpushare copy", "copy"), ("dlpack torch→torch", "dlpack")]
    if run.cuda:
        ops.append(("gpushare pinned", "pinned"))
    for size in sizes:
        x = make(size, dev)
        n = x.numel() * x.element_size()
        for name, path in ops:
            run.agreement(name, size, path, x, moved=0 if path == "dlpack" else n)
        del x
        lab.empty_cache()
        if run.cuda:
            torch.cuda.empty_cache()


def targets(run: Run, zero_sizes: list[int], big: int) -> list[dict]:
    out: list[dict] = []

    def target(what: str, value: float | None, goal: str, ok: bool | None, note: str = "") -> None:
        out.append({"target": what, "value": value, "goal": goal, "ok": ok, "note": note})

    def bw(name: str, size: int) -> float | None:
        r = run.find(name, size)
        return r.get("bandwidth_GBps") if r else None

    for size in sorted({256 * MiB, big}):
        p, tp, h = bw("gpushare pinned", size), bw("torch pinned round trip", size), bw("gpushare host", size)
        ratio = p / tp if p and tp else None
        target(f"pinned / torch pinned bandwidth @ {size_label(size)}", ratio, "≥ 0.80",
               None if ratio is None else ratio >= 0.8, "" if ratio else "needs CUDA")
        if size == 256 * MiB:
            ratio = p / h if p and h else None
            target(f"pinned / host bandwidth @ {size_label(size)}", ratio, "≥ 10",
                   None if ratio is None else ratio >= 10, "" if ratio else "needs CUDA")
        c, cl = bw("gpushare copy", size), bw("torch clone", size)
        ratio = c / cl if c and cl else None
        target(f"copy / clone bandwidth @ {size_label(size)}", ratio, "≥ 0.90", None if ratio is None else ratio >= 0.9,
               "" if run.cuda or ratio is None else f"CPU: clone runs on {torch.get_num_threads()} torch threads, copy on one")
    sweep = [r for r in run.measurements if r["tool"] == SHARE and r.get("section") != "agreement"]
    names = sorted({r["name"] for r in sweep if r["name"].split(" ")[0] in ("dlpack", "cai", "shared")})
    for name in names:
        medians = [r["median_s"] for r in sweep if r["name"] == name and "median_s" in r and r["size"] in zero_sizes]
        if len(medians) < 2:
            target(f"zero-copy {name} flat over sizes", None, "max/min ≤ 2", None, "fewer than two sizes measured")
            continue
        ratio = max(medians) / min(medians)
        target(f"zero-copy {name} flat {size_label(min(zero_sizes))}..{size_label(max(zero_sizes))}", ratio,
               "max/min ≤ 2", ratio <= 2.0)
    for r in run.measurements:
        if "ratio_gpushare_over_torch" in r:
            ratio = r["ratio_gpushare_over_torch"]
            target(f"median vs torch.utils.benchmark: {r['name']} @ {size_label(r['size'])}", ratio,
                   "0.90–1.10", 0.9 <= ratio <= 1.1,
                   f"A/B, {r['repeats']} blocks of {r['loops']}; ratio of medians {r['ratio_of_medians']:.3f}")
    return out


def environment(device: str) -> dict:
    env: dict[str, Any] = {"python": sys.version.split()[0], "platform": platform.platform(), "device": device,
                           "gpushare": gpushare.__version__, "torch": torch.__version__, "numpy": np.__version__}
    for mod in ("jax", "cupy", "numba", "tensorflow"):
        if mod in sys.modules:
            env[mod] = getattr(sys.modules[mod], "__version__", "?")
    try:
        env["cuda_driver"] = _native.cuda.driver_status()
        if device.startswith("cuda"):
            env["gpu"] = torch.cuda.get_device_name(torch.device(device))
    except Exception as e:
        env["cuda_error"] = str(e)
    return env


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, help="write the results as JSON here")
    ap.add_argument("--quick", action="store_true", help="fewer sizes and repeats")
    ap.add_argument("--device", default=None, help="cuda:N or cpu (default: cuda:0 when usable)")
    ap.add_argument("--repeat", type=int, default=None, help="samples per measurement (default 7, quick 5)")
    ap.add_argument("--budget", type=float, default=240.0, help="seconds for the whole run (default 240)")
    args = ap.parse_args(argv)

    cuda = bool(_native.cuda.driver_status().get("available")) and torch.cuda.is_available()
    device = args.device or ("cuda:0" if cuda else "cpu")
    on_gpu = device.startswith("cuda")
    repeat = args.repeat or (5 if args.quick else 7)
    if on_gpu:
        copy_sizes = [1 * MiB, 256 * MiB, 1 * GiB] if args.quick else [64 * KiB, 1 * MiB, 16 * MiB, 256 * MiB, 1 * GiB]
        zero_sizes = [1 * KiB, 1 * MiB, 1 * GiB] if args.quick else [1 * KiB, 16 * KiB, 256 * KiB, 4 * MiB, 64 * MiB, 1 * GiB]
        timer_sizes = [1 * MiB, 256 * MiB]
    else:  # a CPU-only machine: small sizes, the GPU figures stay n/a
        copy_sizes = [64 * KiB, 1 * MiB] if args.quick else [64 * KiB, 1 * MiB, 16 * MiB]
        zero_sizes = [1 * KiB, 1 * MiB] if args.quick else [1 * KiB, 64 * KiB, 4 * MiB, 16 * MiB]
        timer_sizes = [1 * MiB]
    run = Run(device, repeat, args.budget)
    started = time.monotonic()
    print(f"bench_paths on {device} (repeat {repeat}, budget {args.budget:.0f} s)", flush=True)
    for title, step in (("copies", lambda: copies(run, copy_sizes)), ("zero-copy", lambda: zero_copy(run, zero_sizes)),
                        ("gpushare.share vs torch.utils.benchmark", lambda: against_torch_timer(run, timer_sizes))):
        print(f"== {title}", flush=True)
        try:
            step()
        except Exception as e:  # a whole step failing is recorded, the others still run
            run.errors.append({"step": title, "error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc(limit=6)})
            print(f"  step failed: {type(e).__name__}: {e}", flush=True)
    checks = targets(run, zero_sizes, max(copy_sizes))
    print("== targets")
    width = max((len(c["target"]) for c in checks), default=20)
    for c in checks:
        value = "n/a" if c["value"] is None else f"{c['value']:.3g}"
        mark = {True: "✓", False: "✗", None: "–"}[c["ok"]]
        print(f"  {c['target']:<{width}}  {value:>8}  {c['goal']:<10} {mark} {c['note']}")
    elapsed = time.monotonic() - started
    print(f"done in {elapsed:.1f} s; {len(run.measurements)} measurements, {len(run.errors)} errors", flush=True)
    results = {"schema": "gpushare.bench_paths/1", "environment": environment(device), "quick": args.quick,
               "repeat": repeat, "elapsed_s": elapsed, "measurements": run.measurements, "targets": checks,
               "errors": run.errors}
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=1, default=str, allow_nan=True))
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
