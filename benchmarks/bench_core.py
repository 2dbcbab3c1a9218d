"""Core speed, as ratios against the raw framework calls measured in the same run.

Targets: on zero-copy CPU paths, gpushare.share adds at most max(5 µs, 25 %) to the median of the
raw framework call; %share including the report object stays under 200 µs; rendering a 10-row HTML
table takes under 1 ms. Run: `make bench` or `.venv/bin/python benchmarks/bench_core.py [--json F]`.

GPU mode (`--device cuda`): at 1 MiB and 256 MiB, `gpushare.share(x, to)` with
observation off adds at most max(10 µs, 25 %) to the raw call plus the target framework's own first
read of what it returned (address, shape, dtype; the raw call alone is reported beside it), for
torch→jax, torch→cupy, cupy→torch, jax→torch and torch→numba; the magic's own work (everything but the timed
conversion: describing, observing with the memory ledger and stream report, judging, rendering the
table) stays under 300 µs for a 1 MiB torch→jax. The GPU machine has no IPython, so that is measured
as `share_chain(..., observe=True)` plus the HTML table, less the raw call.

Raw call and share are timed in alternating blocks and the overhead is the median of the per-block
differences: timed one after the other, a slow spell during the raw phase once made the overhead
come out negative (and its budget looser).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
if "--device" not in sys.argv or "cpu" in sys.argv:
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import numpy as np  # noqa: E402
import torch  # noqa: E402

import gpushare  # noqa: E402
from gpushare import _native  # noqa: E402


def median_time(fn, number: int, repeat: int) -> float:
    """Median over `repeat` samples of the mean time of `number` calls, in seconds."""
    for _ in range(max(1, number // 10)):
        fn()
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter_ns()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter_ns() - t0) / number * 1e-9)
    return statistics.median(samples)


def block(fn, number: int) -> float:
    """Mean time of one call over `number` calls, in seconds."""
    t0 = time.perf_counter_ns()
    for _ in range(number):
        fn()
    return (time.perf_counter_ns() - t0) / number * 1e-9


def paired(raw, ours, number: int, blocks: int) -> tuple[float, float, float]:
    """Raw and gpushare timed in alternating blocks (A/B, the order swapped every other block), so
    that a slow spell of the machine lands on both: medians of each, and the median of the
    per-block differences (what gpushare adds), in seconds."""
    for fn in (raw, ours):
        for _ in range(max(1, number // 10)):
            fn()
    raw_s, ours_s, added = [], [], []
    for i in range(blocks):
        if i % 2:
            o = block(ours, number)
            r = block(raw, number)
        else:
            r = block(raw, number)
            o = block(ours, number)
        raw_s.append(r)
        ours_s.append(o)
        added.append(o - r)
    return statistics.median(raw_s), statistics.median(ours_s), statistics.median(added)


def gpu_main(args) -> int:
    """The GPU budgets, as ratios against the raw framework calls in the same run."""
    import cupy
    import jax

    import numba.cuda as numba_cuda

    FIRST_READ = {
        "jax": lambda y: (y.unsafe_buffer_pointer(), y.shape, y.dtype),
        "cupy": lambda y: (y.data.ptr, y.shape, y.dtype),
        "torch": lambda y: (y.data_ptr(), y.shape, y.dtype),
        "numba": lambda y: (y.device_ctypes_pointer.value, y.shape, y.dtype),
    }
    rows, ok = [], True
    print(f"{'pair':<16} {'size':>7} {'raw µs':>8} {'raw+read':>10} {'share µs':>9} {'added µs':>9} {'budget µs':>10}  verdict")
    for size in (1 << 20, 256 << 20):
        n = size // 4
        t = torch.ones(n, device="cuda")
        c = cupy.ones(n, dtype=cupy.float32)
        j = jax.device_put(jax.numpy.ones(n, dtype="float32"), jax.devices("gpu")[0])
        torch.cuda.synchronize()
        cases = {
            "torch->jax": (lambda: jax.dlpack.from_dlpack(t), lambda: gpushare.share(t, "jax")),
            "torch->cupy": (lambda: cupy.from_dlpack(t), lambda: gpushare.share(t, "cupy")),
            "cupy->torch": (lambda: torch.from_dlpack(c), lambda: gpushare.share(c, "torch")),
            "jax->torch": (lambda: torch.from_dlpack(j), lambda: gpushare.share(j, "torch")),
            "torch->numba": (lambda: numba_cuda.as_cuda_array(t), lambda: gpushare.share(t, "numba")),
        }
        for name, (raw, ours) in cases.items():
            # The budget's contract: the raw call plus the target framework's own first read of what it
            # returned (address, shape, dtype: what any honest check of the verdict reads; JAX builds
            # them lazily), measured beside the raw call alone in the same run.
            read = FIRST_READ[name.split("->")[1]]
            raw_and_read = lambda raw=raw, read=read: read(raw())  # noqa: E731
            raw_s, ours_s, added = paired(raw_and_read, ours, 200, args.blocks)
            raw_only_s = median_time(raw, 200, max(5, args.blocks // 3))
            budget = max(10e-6, 0.25 * raw_s)
            passed = added <= budget
            ok &= passed
            rows.append(dict(pair=name, size=size, raw_call_s=raw_only_s, raw_s=raw_s, share_s=ours_s, added_s=added,
                             budget_s=budget, ok=passed))
            print(f"{name:<16} {size >> 20:>4} MiB {raw_only_s*1e6:8.2f} {raw_s*1e6:10.2f} {ours_s*1e6:9.2f} {added*1e6:9.2f} "
                  f"{budget*1e6:10.2f}  {'ok' if passed else 'OVER BUDGET'}")
        if size == 1 << 20:
            raw = lambda: jax.dlpack.from_dlpack(t)  # noqa: E731

            def magic_work():
                table = gpushare.ShareTable(gpushare.share_chain(t, ["jax"], name="t", observe=True))
                return table._repr_html_()

            raw_s, ours_s, own = paired(raw, magic_work, 50, args.blocks)
            magic_ok = own <= 300e-6
            ok &= magic_ok
            rows.append(dict(pair="magic own work torch->jax", size=size, raw_s=raw_s, share_s=ours_s, added_s=own,
                             budget_s=300e-6, ok=magic_ok))
            print(f"magic's own work, torch->jax 1 MiB, observation on: {own*1e6:.1f} µs (budget 300 µs) "
                  f"{'ok' if magic_ok else 'OVER BUDGET'}")
            # The magic itself where IPython is there (carried to the GPU machine as a wheel), as the
            # issue defines its own work: the wall time of `%share t ->jax -n 1 -r 1 -q -o` and of
            # its table's mime bundle (what a front end renders), less the timed sample the result
            # reports (the sample includes its synchronisation: the magic times it that way).
            try:
                from IPython.core.interactiveshell import InteractiveShell
            except ImportError:
                print("(IPython not installed: the %share magic itself not measured)")
            else:
                ip = InteractiveShell.instance(history_load_length=0)
                ip.history_manager.enabled = False
                ip.run_line_magic("load_ext", "gpushare")
                ip.user_ns["t"] = t
                walls, owns = [], []
                for i in range(60 + 20 * args.blocks):
                    t0 = time.perf_counter_ns()
                    table = ip.run_line_magic("share", "t ->jax -n 1 -r 1 -q -o")
                    table._repr_mimebundle_()
                    wall = (time.perf_counter_ns() - t0) * 1e-9
                    timing = table[0].timing
                    if i >= 60:  # warm-up calls
                        walls.append(wall)
                        owns.append(wall - sum(timing.samples) * timing.loops - timing.untimed)
                own = statistics.median(owns)
                real_ok = own <= 300e-6
                ok &= real_ok
                # The default magic, whose observed handoff is the timing's warm-up; its own
                # work is its wall time less every handoff the timing made: the samples × loops it
                # reports and the untimed ones (warm-up runs, the runs that chose the loop count).
                walls_default, owns_default = [], []
                for i in range(3 + args.blocks // 3):
                    t0 = time.perf_counter_ns()
                    table = ip.run_line_magic("share", "t ->jax -q -o")
                    table._repr_mimebundle_()
                    wall = (time.perf_counter_ns() - t0) * 1e-9
                    timing = table[0].timing
                    if i >= 3:
                        walls_default.append(wall)
                        owns_default.append(wall - sum(timing.samples) * timing.loops - timing.untimed)
                own_default = statistics.median(owns_default)
                default_ok = own_default <= 300e-6
                ok &= default_ok
                rows.append(dict(pair="%share magic (default timing) own work torch->jax", size=size, raw_s=None,
                                 share_s=statistics.median(walls_default), added_s=own_default, budget_s=300e-6,
                                 ok=default_ok))
                print(f"%share t ->jax (default timing), observation on: {statistics.median(walls_default)*1e3:.1f} ms "
                      f"in all, {own_default*1e6:.1f} µs besides its timed samples (budget 300 µs) "
                      f"{'ok' if default_ok else 'OVER BUDGET'}")
                rows.append(dict(pair="%share magic own work torch->jax", size=size, raw_s=None,
                                 share_s=statistics.median(walls), added_s=own, budget_s=300e-6, ok=real_ok))
                print(f"%share t ->jax -n 1 -r 1 (IPython), observation on: {statistics.median(walls)*1e6:.1f} µs "
                      f"in all, {own*1e6:.1f} µs besides its timed sample (budget 300 µs) {'ok' if real_ok else 'OVER BUDGET'}")
        del t, c, j
    report = dict(
        date=time.strftime("%Y-%m-%d"), machine=platform.platform(), python=sys.version.split()[0],
        device=torch.cuda.get_device_name(0),
        versions=dict(torch=torch.__version__, numpy=np.__version__, jax=jax.__version__, cupy=cupy.__version__,
                      gpushare=gpushare.__version__),
        blocks=args.blocks, pairs=rows, all_within_budget=ok,
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--repeat", type=int, default=15, help="samples of %%share and of the HTML rendering")
    parser.add_argument("--blocks", type=int, default=30, help="alternating raw/share blocks per pair")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="cuda: the GPU budgets")
    args = parser.parse_args()
    if args.device == "cuda":
        return gpu_main(args)

    import jax
    import tensorflow as tf

    t = torch.ones(256, 256)
    a = np.ones((256, 256), dtype=np.float32)
    cases = {
        "torch->numpy": (lambda: np.from_dlpack(t), lambda: gpushare.share(t, "numpy"), 2000),
        "numpy->torch": (lambda: torch.from_dlpack(a), lambda: gpushare.share(a, "torch"), 2000),
        "torch->jax": (lambda: jax.dlpack.from_dlpack(t), lambda: gpushare.share(t, "jax"), 300),
        "torch->tf": (
            lambda: tf.experimental.dlpack.from_dlpack(torch.utils.dlpack.to_dlpack(t)),
            lambda: gpushare.share(t, "tf"),
            500,
        ),
    }
    rows = []
    ok = True
    print(f"{'pair':<14} {'raw µs':>8} {'share µs':>9} {'added µs':>9} {'ratio':>6} {'budget µs':>10}  verdict")
    for name, (raw, ours, number) in cases.items():
        raw_s, ours_s, added = paired(raw, ours, number, args.blocks)
        budget = max(5e-6, 0.25 * raw_s)
        passed = added <= budget
        ok &= passed
        rows.append(dict(pair=name, raw_s=raw_s, share_s=ours_s, added_s=added, budget_s=budget, ok=passed))
        print(
            f"{name:<14} {raw_s*1e6:8.2f} {ours_s*1e6:9.2f} {added*1e6:9.2f} {ours_s/raw_s:6.2f} {budget*1e6:10.2f}  "
            f"{'ok' if passed else 'OVER BUDGET'}"
        )
    print(f"(raw and share timed in {args.blocks} alternating blocks; added = median of the per-block differences)")

    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance(history_load_length=0)
    ip.history_manager.enabled = False
    ip.run_line_magic("load_ext", "gpushare")
    ip.user_ns["t"] = t
    # The magic's own work: one conversion timed once (-n 1 -r 1), so nearly all of it is not the
    # conversion; the default (%timeit-like within GpuShare.time_budget) adds the timed samples.
    magic_s = median_time(lambda: ip.run_line_magic("share", "t ->numpy -n 1 -r 1 -q -o"), 500, args.repeat)
    magic_ok = magic_s < 200e-6
    ok &= magic_ok
    print(f"%share t ->numpy (report object included): {magic_s*1e6:.1f} µs (budget 200 µs) {'ok' if magic_ok else 'OVER BUDGET'}")

    results = [gpushare.share(t, "numpy", name=f"v{i}") for i in range(10)]
    render_s = median_time(lambda: _native.render_shares(results, "html"), 500, args.repeat)
    render_ok = render_s < 1e-3
    ok &= render_ok
    print(f"10-row HTML table: {render_s*1e6:.1f} µs (budget 1000 µs) {'ok' if render_ok else 'OVER BUDGET'}")

    report = dict(
        date=time.strftime("%Y-%m-%d"),
        machine=platform.platform(),
        python=sys.version.split()[0],
        versions=dict(torch=torch.__version__, numpy=np.__version__, jax=jax.__version__, tf=tf.__version__),
        blocks=args.blocks,
        pairs=rows,
        magic_s=magic_s,
        render_10_rows_s=render_s,
        all_within_budget=ok,
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
