"""Where `share(x, "torch", device="cuda:1", path="p2p")` spends what it adds to the core's peer copy
at 256 MiB (issue 26.6, goal: at most 3 %). A diagnostic, not a benchmark of record: it prints the
copy alone, share() with and without the final synchronise (whether share blocks the host until the
copy ends), and a cProfile of share's calls. Run on a machine with two GPUs:
`python3 scripts/probe_move_overhead.py`."""

import cProfile
import os
import pstats
import statistics
import sys
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import torch  # noqa: E402

import gpushare  # noqa: E402
from gpushare import _native  # noqa: E402
from gpushare.adapters import framework  # noqa: E402


def median_us(fn, sync, repeat=30, wait=True):
    for _ in range(3):
        fn()
    sync()
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        if wait:
            sync()
        samples.append(time.perf_counter() - t0)
        if not wait:
            sync()
    return statistics.median(samples) * 1e6


def main() -> int:
    if torch.cuda.device_count() < 2:
        print("probe_move_overhead: fewer than 2 GPUs")
        return 0
    sync = lambda: (torch.cuda.synchronize(0), torch.cuda.synchronize(1))  # noqa: E731
    for nbytes in (256 << 20, 1 << 30):
        a = torch.randn(nbytes // 4, device="cuda:0")
        stream = torch.cuda.current_stream(0).cuda_stream
        copy_source, copy_of = framework("torch").copy_source, _native.SharedBuffer._copy_of
        keep = []

        def core():
            keep[:] = [copy_of(copy_source(a), "p2p", stream, "cuda:1")]

        def api():
            keep[:] = [gpushare.share(a, "torch", device="cuda:1", path="p2p")]

        # The route the pipeline runs (the copy, torch's import, the device guard) without the
        # pipeline around it (describing both sides, the prediction, the waits, the report).
        from gpushare import devices

        _, route = devices.move_route(framework("torch"), framework("torch"), "p2p", "cuda:1")

        def route_only():
            keep[:] = [route(a)]

        rows = {
            "p2p core, synchronised": median_us(core, sync),
            "route alone, synchronised": median_us(route_only, sync),
            "share(device=), synchronised": median_us(api, sync),
            "p2p core, host returns": median_us(core, sync, wait=False),
            "share(device=), host returns": median_us(api, sync, wait=False),
        }
        print(f"--- {nbytes >> 20} MiB")
        for k, v in rows.items():
            print(f"{k:34s} {v:9.1f} µs")
        print(f"share/core bandwidth ratio {rows['p2p core, synchronised'] / rows['share(device=), synchronised']:.3f}")
        r = gpushare.share(a, "torch", device="cuda:1", path="p2p")
        print("notes:", r.notes if hasattr(r, "notes") else None)
        del r
        keep.clear()
    # Where share()'s time goes between the Rust pipeline and the adapter calls it makes: each of
    # torch's adapter methods timed as the pipeline calls it (call_method1 finds these instance
    # attributes first), summed over 20 shares of 256 MiB.
    a = torch.randn((256 << 20) // 4, device="cuda:0")
    adapter = framework("torch")
    spent: dict = {}

    import gpushare.api as api_module
    from gpushare import devices as devices_module

    def timed(owner, name, label=None):
        """Replaces ``owner.name`` (an adapter's method, a module's function) with itself timed."""
        real = getattr(owner, name)

        def wrapper(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return real(*args, **kwargs)
            finally:
                calls, total = spent.get(label or name, (0, 0.0))
                spent[label or name] = (calls + 1, total + time.perf_counter() - t0)

        setattr(owner, name, wrapper)

    for name in ("synchronize", "current_stream", "check_source", "inspect", "detached", "copy_source", "check_view_bits"):
        timed(adapter, name)
    # _move_path and what it asks of the device layer and the adapters.
    for name in ("check_device", "dlpack_place", "already_on", "device_name"):
        timed(devices_module, name, f"devices.{name}")
    for name in ("adapter_for", "framework", "_source_device", "in_device_memory", "_move_path", "_move_plan"):
        if hasattr(api_module, name):
            timed(api_module, name, name if name.startswith("_move") else f"api.{name}")
    api_module._PLANS.clear()
    for _ in range(3):
        gpushare.share(a, "torch", device="cuda:1", path="p2p")
    sync()
    spent.clear()
    share_total = 0.0
    for _ in range(20):
        t0 = time.perf_counter()
        gpushare.share(a, "torch", device="cuda:1", path="p2p")
        share_total += time.perf_counter() - t0
        sync()
    print("--- 256 MiB share(device=), per share (20 shares):", f"{share_total / 20 * 1e6:.1f} µs")
    for name, (calls, total) in sorted(spent.items(), key=lambda kv: -kv[1][1]):
        print(f"  {name:16s} {calls / 20:4.1f} calls  {total / 20 * 1e6:8.1f} µs")
    for label, fn in (("torch.cuda.synchronize(0), idle", lambda: torch.cuda.synchronize(0)),
                      ("torch.cuda.synchronize(1), idle", lambda: torch.cuda.synchronize(1)),
                      ("cuCtxSynchronize cuda:0, idle", lambda: _native.cuda_synchronize_context(0))):
        print(f"  {label:34s} {median_us(fn, lambda: None, repeat=200, wait=False):7.2f} µs")
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(20):
        gpushare.share(a, "torch", device="cuda:1", path="p2p")
        sync()
    prof.disable()
    pstats.Stats(prof, stream=sys.stdout).sort_stats("tottime").print_stats(25)
    return 0


if __name__ == "__main__":
    sys.exit(main())
