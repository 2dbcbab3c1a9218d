"""gpushare's cost contract, measured against the raw framework calls in the same run.

1. gpushare's own stages add at most 5 µs to a share (the contract is stated for a GPU; on the CPU
   it is reported against the same 5 µs). Own is everything a share does that is not a framework
   call: the API's entry and the plan's lookup (around the pipeline), describing from what
   was read, predicting, judging, the result object, and the route's own work around the
   framework's import (its conversion stage less the raw call). Each stage is timed inside the
   extension by its stage trace (crates/core/src/trace.rs, switched on for this run only) and
   printed stage by stage. Beside it, what the check reads: the calls into the framework's API
   that an honest verdict must make (layout, address, flags) and the CUDA driver's answers about
   the memory. An adapter described by its own `inspect()` in Python counts as gpushare's own.
2. A `%share` cell's wall time (run through an IPython InteractiveShell, its table rendered as a
   notebook front end renders it) stays within its timing budget (`GpuShare.time_budget`) plus
   50 ms; the first cell of each pair, which imports and plans, is reported beside it.
3. `share(x, ..., device="cuda:1")` adds at most 20 µs to the framework's own peer copy
   (`t.to("cuda:1")`, CuPy's `copy()` on the other device), both waited for, at 1 MiB and 256 MiB.

Raw call and share are timed in alternating blocks and the overhead is the median of the
per-block differences, so that a slow spell of the machine lands on both. A line that cannot be
measured here (no CUDA, one GPU, IPython or a framework not installed) says so and is skipped.

Run: `make bench`, or `python benchmarks/bench_core.py [--device cpu|cuda] [--json FILE]`.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import statistics
import sys
import time
from collections import defaultdict

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
if not any("cuda" in arg for arg in sys.argv[1:]):
    os.environ.setdefault("JAX_PLATFORMS", "cpu")

import gpushare  # noqa: E402
from gpushare import _native  # noqa: E402

OWN_BUDGET = 5e-6
CELL_SLACK = 50e-3
MOVE_BUDGET = 20e-6
READ_KINDS = ("framework", "driver")
# What is left of a share's call after its traced stages: the API's entry, the plan's lookup and
# the result's return (the stage trace starts inside the plan's run).
API = "the API and the plan's lookup"


def installed(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def block(fn, number: int) -> float:
    """Mean time of one call over `number` calls, in seconds."""
    t0 = time.perf_counter_ns()
    for _ in range(number):
        fn()
    return (time.perf_counter_ns() - t0) / number * 1e-9


def paired(raw, ours, number: int, blocks: int) -> tuple[float, float, float]:
    """Raw and gpushare timed in alternating blocks (the order swapped every other block): medians
    of each, and the median of the per-block differences (what gpushare adds), in seconds."""
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


def traced(share, raw, rounds: int, settle=lambda: None) -> dict:
    """`rounds` shares with the stage trace on, each beside one raw call: the median of each stage
    (summed within a share where a stage recurs, as describing does for source and target), of
    gpushare's own stages together, of the check's reads, and of the raw call, in seconds.
    `settle` runs after each call, untimed (a wait for the device)."""
    for _ in range(max(10, rounds // 10)):
        share()
        raw()
        settle()
    per_stage: dict[str, list[float]] = defaultdict(list)
    kinds: dict[str, str] = {API: "own"}
    own, reads, conversion, raws, harness = [], [], [], [], []
    nothing = lambda: None  # noqa: E731 - the share's call in this loop, less gpushare
    _native.share._stage_trace(True)
    # The trace's own cost in each stage is taken off it; between the share's call and its return
    # there is one such cost more than stages (the first mark's start and the last one's end).
    cost = _native.share._stage_trace_cost()
    try:
        for _ in range(rounds):
            t0 = time.perf_counter_ns()
            raw()
            raws.append((time.perf_counter_ns() - t0) * 1e-9)
            settle()
            t0 = time.perf_counter_ns()
            nothing()
            harness.append((time.perf_counter_ns() - t0) * 1e-9)
            _native.share._stage_trace()
            t0 = time.perf_counter_ns()
            result = share()
            total = (time.perf_counter_ns() - t0) * 1e-9
            stages = _native.share._stage_trace()
            settle()
            del result
            sums: dict[str, float] = defaultdict(float)
            sums[API] = total - sum(s for _, _, s in stages) - (len(stages) + 1) * cost
            for stage, kind, seconds in stages:
                sums[stage] += seconds
                kinds[stage] = kind
            for stage, seconds in sums.items():
                per_stage[stage].append(seconds)
            own.append(sum(s for stage, s in sums.items() if kinds[stage] == "own"))
            reads.append(sum(s for stage, s in sums.items() if kinds[stage] in READ_KINDS))
            conversion.append(sum(s for stage, s in sums.items() if kinds[stage] == "conversion"))
    finally:
        _native.share._stage_trace(False)
    # The loop's own cost around a call (a Python call, the clock read twice) is the harness's, not
    # gpushare's: taken off the API's stage, which is what is left of the call after its stages.
    harness_s = statistics.median(harness)
    per_stage[API] = [s - harness_s for s in per_stage[API]]
    own = [s - harness_s for s in own]
    raw_s = statistics.median(raws)
    # The conversion stage is the route's call into the framework's import: what it takes beyond
    # the raw call is the route's own work (a path `auto` chose that is faster than the raw call
    # reads below 0, and adds nothing).
    route = statistics.median(conversion) - raw_s
    return dict(
        raw_s=raw_s,
        stages={stage: (kinds[stage], statistics.median(v), len(v) / rounds) for stage, v in per_stage.items()},
        own_stages_s=statistics.median(own),
        own_s=statistics.median(own) + max(0.0, route),
        route_s=route,
        reads_s=statistics.median(reads),
        harness_s=harness_s,
    )


def verdict(ok: bool) -> str:
    return "PASS" if ok else "OVER"


def own_stages(cases: dict, args, out: dict) -> None:
    """Contract 1, per pair: gpushare's own stages against 5 µs, the check's reads beside them."""
    print(f"1. gpushare's own stages, at most {OWN_BUDGET * 1e6:.0f} µs a share"
          + ("" if args.device == "cuda" else " (stated for a GPU; on the CPU for reference)"))
    print(f"   {'pair':<14} {'raw µs':>8} {'share µs':>9} {'added µs':>9} {'own µs':>7} {'reads µs':>9}  verdict")
    for name, (raw, share) in cases.items():
        try:
            raw_s, share_s, added = paired(raw, share, args.number, args.blocks)
            t = traced(share, raw, args.rounds)
        except Exception as e:  # reported as this line's result: the other lines still run
            print(f"   {name:<14} failed: {type(e).__name__}: {e}")
            out["own_stages"].append(dict(pair=name, error=f"{type(e).__name__}: {e}", verdict="FAILED"))
            continue
        ok = t["own_s"] <= OWN_BUDGET
        print(f"   {name:<14} {raw_s * 1e6:8.2f} {share_s * 1e6:9.2f} {added * 1e6:9.2f} {t['own_s'] * 1e6:7.2f} "
              f"{t['reads_s'] * 1e6:9.2f}  {verdict(ok)}")
        for stage, (kind, seconds, times) in t["stages"].items():
            repeat = f" ×{times:.0f}" if times > 1 else ""
            print(f"       {stage + repeat:<56} {kind:<10} {seconds * 1e6:7.2f}")
        print(f"       {'the route around the framework call (conversion - raw)':<56} {'own':<10} {t['route_s'] * 1e6:7.2f}")
        out["own_stages"].append(dict(
            pair=name, raw_us=round(raw_s * 1e6, 3), share_us=round(share_s * 1e6, 3), added_us=round(added * 1e6, 3),
            own_us=round(t["own_s"] * 1e6, 3), reads_us=round(t["reads_s"] * 1e6, 3), route_us=round(t["route_s"] * 1e6, 3),
            stages={s: [k, round(v * 1e6, 3)] for s, (k, v, _) in t["stages"].items()},
            trace_cost_ns_a_stage=round(_native.share._stage_trace_cost() * 1e9, 1),
            harness_ns=round(t["harness_s"] * 1e9, 1),
            budget_us=OWN_BUDGET * 1e6, verdict=verdict(ok)))
    print("   raw: the framework's own call; share: gpushare.share, untraced; added: share less raw, the median of")
    print(f"   {args.blocks} alternating blocks. own and reads: medians over {args.rounds} traced shares, each stage less")
    print(f"   the trace's own cost ({_native.share._stage_trace_cost() * 1e9:.0f} ns a stage), and the API's stage less the loop's")
    print("   own cost around a call (an empty Python call timed the same way); reads: the framework and driver")
    print("   calls the check makes.")


def magic_cells(cells: dict, namespace: dict, args, out: dict) -> None:
    """Contract 2: each `%share` cell's wall time against its timing budget plus 50 ms."""
    print(f"2. a %share cell within its timing budget + {CELL_SLACK * 1e3:.0f} ms")
    if not installed("IPython"):
        print("   IPython not installed: skipped")
        out["skipped"].append("%share cell: IPython not installed")
        return
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    ip = InteractiveShell.instance(history_load_length=0)
    ip.history_manager.enabled = False
    # Every format a notebook front end asks for (the table's HTML among them), not only text.
    ip.display_formatter.active_types = list(ip.display_formatter.format_types)
    ip.run_line_magic("load_ext", "gpushare")
    ip.user_ns.update(namespace)
    budget = ip.magics_manager.registry["GpuShare"].time_budget
    limit = budget + CELL_SLACK

    def run(cell: str) -> float:
        with capture_output():
            t0 = time.perf_counter_ns()
            ip.run_cell(cell, store_history=False).raise_error()
            return (time.perf_counter_ns() - t0) * 1e-9

    print(f"   {'cell':<22} {'first ms':>9} {'median ms':>10} {'max ms':>7} {'limit ms':>9}  verdict")
    for cell in cells:
        try:
            first = run(cell)
            walls = [run(cell) for _ in range(args.cells)]
        except Exception as e:  # reported as this line's result: the other lines still run
            print(f"   {cell:<22} failed: {type(e).__name__}: {e}")
            out["magic_cells"].append(dict(cell=cell, error=f"{type(e).__name__}: {e}", verdict="FAILED"))
            continue
        median, most = statistics.median(walls), max(walls)
        ok = most <= limit
        print(f"   {cell:<22} {first * 1e3:9.1f} {median * 1e3:10.1f} {most * 1e3:7.1f} {limit * 1e3:9.1f}  {verdict(ok)}")
        out["magic_cells"].append(dict(cell=cell, first_ms=round(first * 1e3, 2), median_ms=round(median * 1e3, 2),
                                       max_ms=round(most * 1e3, 2), limit_ms=round(limit * 1e3, 2), verdict=verdict(ok)))
    print(f"   wall time of ip.run_cell with the table rendered, {args.cells} cells after the first (which imports and")
    print(f"   plans, and is not held to the limit); the timing budget GpuShare.time_budget = {budget:g} s.")


def device_moves(args, out: dict) -> None:
    """Contract 3: share(device=) against the framework's own peer copy, both waited for."""
    print(f"3. share(device=) adds at most {MOVE_BUDGET * 1e6:.0f} µs to the peer copy")
    import torch

    if args.device != "cuda" or not torch.cuda.is_available():
        print("   no CUDA: skipped")
        out["skipped"].append("share(device=): no CUDA")
        return
    if torch.cuda.device_count() < 2:
        print("   fewer than 2 GPUs: skipped")
        out["skipped"].append("share(device=): fewer than 2 GPUs")
        return

    def done():
        torch.cuda.synchronize(0)
        torch.cuda.synchronize(1)

    print(f"   {'pair':<26} {'size':>8} {'raw µs':>9} {'share µs':>9} {'added µs':>9} {'own µs':>7}  verdict")
    for size in (1 << 20, 256 << 20):
        n = size // 4
        cases = {}
        t = torch.ones(n, device="cuda:0")
        # (raw, share), each without its wait: the wait is added to both where they are timed.
        cases["torch cuda:0 -> cuda:1"] = (lambda: t.to("cuda:1"), lambda: gpushare.share(t, "torch", device="cuda:1"))
        if installed("cupy"):
            import cupy

            with cupy.cuda.Device(0):
                c = cupy.ones(n, dtype=cupy.float32)

            def cupy_copy(c=c):
                with cupy.cuda.Device(1):
                    return c.copy()  # CuPy copies to the current device

            cases["cupy cuda:0 -> cuda:1"] = (cupy_copy, lambda c=c: gpushare.share(c, "cupy", device="cuda:1"))
        done()
        number = 20 if size <= 1 << 20 else 5
        for name, (raw, share) in cases.items():
            try:
                raw_s, share_s, added = paired(lambda raw=raw: (raw(), done()), lambda share=share: (share(), done()),
                                               number, args.blocks)
                tr = traced(share, raw, max(20, args.rounds // 10), settle=done)
            except Exception as e:  # reported as this line's result: the other lines still run
                print(f"   {name:<26} {size >> 20:>4} MiB  failed: {type(e).__name__}: {e}")
                out["device_moves"].append(dict(pair=name, size=size, error=f"{type(e).__name__}: {e}", verdict="FAILED"))
                continue
            ok = added <= MOVE_BUDGET
            print(f"   {name:<26} {size >> 20:>4} MiB {raw_s * 1e6:9.1f} {share_s * 1e6:9.1f} {added * 1e6:9.2f} "
                  f"{tr['own_stages_s'] * 1e6:7.2f}  {verdict(ok)}")
            if size == 1 << 20:
                for stage, (kind, seconds, times) in tr["stages"].items():
                    repeat = f" ×{times:.0f}" if times > 1 else ""
                    print(f"       {stage + repeat:<56} {kind:<10} {seconds * 1e6:7.2f}")
            out["device_moves"].append(dict(
                pair=name, size=size, raw_us=round(raw_s * 1e6, 3), share_us=round(share_s * 1e6, 3),
                added_us=round(added * 1e6, 3), own_us=round(tr["own_stages_s"] * 1e6, 3),
                stages={s: [k, round(v * 1e6, 3)] for s, (k, v, _) in tr["stages"].items()},
                budget_us=MOVE_BUDGET * 1e6, verdict=verdict(ok)))
        del t, cases
    print("   raw and share each until both devices are idle; added: the median of the per-block differences (the")
    print("   contract); own: gpushare's own stages of the share, traced as in 1 (stage by stage at 1 MiB).")


def cpu_cases() -> tuple[dict, dict, list, list]:
    import numpy as np
    import torch

    t = torch.ones(256, 256)
    a = np.ones((256, 256), dtype=np.float32)
    cases = {
        "torch->numpy": (lambda: np.from_dlpack(t), lambda: gpushare.share(t, "numpy")),
        "numpy->torch": (lambda: torch.from_dlpack(a), lambda: gpushare.share(a, "torch")),
    }
    cells, skipped = ["%share t ->numpy"], []
    if installed("jax"):
        import jax

        j = jax.numpy.ones((256, 256), dtype="float32")
        cases["torch->jax"] = (lambda: jax.dlpack.from_dlpack(t), lambda: gpushare.share(t, "jax"))
        # JAX's arrays are read-only: every share of one into torch owes its caller a warning.
        cases["jax->torch"] = (lambda: torch.from_dlpack(j), lambda: gpushare.share(j, "torch"))
        cells.append("%share t ->jax")
    else:
        skipped.append("torch<->jax: jax not installed")
    if installed("tensorflow"):
        import tensorflow as tf

        cases["torch->tf"] = (lambda: tf.experimental.dlpack.from_dlpack(torch.utils.dlpack.to_dlpack(t)),
                              lambda: gpushare.share(t, "tf"))
    else:
        skipped.append("torch->tf: tensorflow not installed")
    return cases, {"t": t, "a": a}, cells, skipped


def cuda_cases() -> tuple[dict, dict, list, list]:
    import torch

    if installed("jax"):
        import jax

        # JAX's backends start on first use and make the last GPU current; torch exports only from
        # the current device: start JAX first, then make cuda:0 current again.
        jax.devices()
    torch.cuda.set_device(0)
    n = (1 << 20) // 4
    t = torch.ones(n, device="cuda:0")
    cases, namespace, cells, skipped = {}, {"t": t}, [], []
    if installed("jax"):
        import jax

        j = jax.device_put(jax.numpy.ones(n, dtype="float32"), jax.devices("gpu")[0])
        j.block_until_ready()
        namespace["j"] = j
        cases["torch->jax"] = (lambda: jax.dlpack.from_dlpack(t), lambda: gpushare.share(t, "jax"))
        cases["jax->torch"] = (lambda: torch.from_dlpack(j), lambda: gpushare.share(j, "torch"))
        cells.append("%share t ->jax")
    else:
        skipped.append("torch<->jax: jax not installed")
    if installed("cupy"):
        import cupy

        c = cupy.ones(n, dtype=cupy.float32)
        namespace["c"] = c
        cases["torch->cupy"] = (lambda: cupy.from_dlpack(t), lambda: gpushare.share(t, "cupy"))
        cases["cupy->torch"] = (lambda: torch.from_dlpack(c), lambda: gpushare.share(c, "torch"))
        cells.append("%share t ->cupy")
    else:
        skipped.append("torch<->cupy: cupy not installed")
    if installed("numba"):
        import numba.cuda

        cases["torch->numba"] = (lambda: numba.cuda.as_cuda_array(t), lambda: gpushare.share(t, "numba"))
    else:
        skipped.append("torch->numba: numba not installed")
    torch.cuda.synchronize()
    return cases, namespace, cells, skipped


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="cpu: 256 KiB arrays in host memory; cuda: 1 MiB arrays on cuda:0 (cuda:1 for share(device=))")
    parser.add_argument("--json", metavar="FILE", help="write the results here, small and machine-readable")
    parser.add_argument("--blocks", type=int, default=30, help="alternating raw/share blocks per pair (default 30)")
    parser.add_argument("--number", type=int, default=300, help="calls per block (default 300)")
    parser.add_argument("--rounds", type=int, default=500, help="stage-traced shares per pair (default 500)")
    parser.add_argument("--cells", type=int, default=5, help="%%share cells timed per pair after the first (default 5)")
    args = parser.parse_args()
    for flag in ("blocks", "number", "rounds", "cells"):
        if getattr(args, flag) < 1:
            parser.error(f"--{flag} must be at least 1")

    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print("no CUDA: nothing to measure with --device cuda (run with --device cpu)")
        return 2
    cases, namespace, cells, skipped = cuda_cases() if args.device == "cuda" else cpu_cases()
    out: dict = dict(own_stages=[], magic_cells=[], device_moves=[], skipped=skipped)
    device = torch.cuda.get_device_name(0) if args.device == "cuda" else platform.processor() or platform.machine()
    print(f"gpushare {gpushare.__version__} on {args.device} ({device}), Python {sys.version.split()[0]}")
    for line in skipped:
        print(f"({line}: skipped)")
    own_stages(cases, args, out)
    magic_cells(cells, namespace, args, out)
    device_moves(args, out)

    lines = [*out["own_stages"], *out["magic_cells"], *out["device_moves"]]
    over = [row.get("pair", row.get("cell")) for row in lines if row["verdict"] != "PASS"]
    print(f"contract: {len(lines) - len(over)} of {len(lines)} lines PASS" + (f"; not: {', '.join(over)}" if over else ""))
    if args.json:
        versions = {name: getattr(sys.modules[name], "__version__", None)
                    for name in ("torch", "numpy", "jax", "tensorflow", "cupy", "numba", "IPython") if name in sys.modules}
        report = dict(benchmark="bench_core", date=time.strftime("%Y-%m-%d"), machine=platform.platform(),
                      python=sys.version.split()[0], device=args.device, device_name=device,
                      versions=dict(gpushare=gpushare.__version__, **versions),
                      settings=dict(blocks=args.blocks, number=args.number, rounds=args.rounds, cells=args.cells),
                      budgets=dict(own_us=OWN_BUDGET * 1e6, cell_slack_ms=CELL_SLACK * 1e3, move_us=MOVE_BUDGET * 1e6),
                      **out, all_pass=not over)
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
