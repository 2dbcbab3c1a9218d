"""Where `share(x, "torch", device="cuda:1", path="p2p")` spends what the core's peer copy does not
(issue 26.6: share(device=) reached 0.845 of the core's p2p bandwidth at 256 MiB on 2x H200).

Times, on cuda:0 -> cuda:1 at 64 MiB, 256 MiB and 1 GiB (median of --repeat, both devices
synchronised after each call), each layer the share adds around the copy, so the difference between
two lines is one layer's cost:
  core        the core's copy into its own memory (bench_devices' "p2p core")
  +import     ... and torch importing it (the route's conversion without gpushare's guard)
  +export only  ... and the buffer's own __dlpack__ to a consumer on cuda:1 (no framework)
  +import, kept ... torch's import, the tensors released after the timing
  route       the move route gpushare builds (devices.move_route), called directly
  plan.run    the cached SharePlan of the share, run once (timing, verdict, report)
  share       gpushare.share as a user calls it
and the same for `pinned`. Prints a table and writes --json.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

SIZES = {"64 MiB": 64 << 20, "256 MiB": 256 << 20, "1 GiB": 1 << 30}


def timed(fn, sync, repeat):
    fn(), sync()
    samples = []
    for _ in range(repeat):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default="probe_move_share.json")
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    import torch

    import gpushare
    from gpushare import _native, api, devices
    from gpushare.adapters import framework
    from gpushare.paths import _shared_buffer_importer

    if torch.cuda.device_count() < 2:
        print("probe_move_share: fewer than 2 GPUs here")
        return 0
    sync = lambda: (torch.cuda.synchronize(0), torch.cuda.synchronize(1))  # noqa: E731
    src = dst = framework("torch")
    importer = _shared_buffer_importer(dst)
    out = {}
    for name, nbytes in SIZES.items():
        a = torch.randn(nbytes // 4, device="cuda:0")
        stream = torch.cuda.current_stream(0).cuda_stream
        for method in ("p2p", "pinned"):
            keep: list = []
            row = {}

            def core():
                keep.clear()
                keep.append(_native.SharedBuffer._copy_of(src.copy_source(a), method, stream, "cuda:1"))

            def with_import():
                keep.clear()
                keep.append(importer(_native.SharedBuffer._copy_of(src.copy_source(a), method, stream, "cuda:1")))

            def exported():
                # The buffer's own DLPack export to a consumer on cuda:1's legacy stream, no framework.
                keep.clear()
                buf = _native.SharedBuffer._copy_of(src.copy_source(a), method, stream, "cuda:1")
                keep.append(buf.__dlpack__(stream=1, max_version=(1, 0)))

            def imported_kept():
                # torch's import, the tensor kept until after the timing (its release not timed).
                buf = _native.SharedBuffer._copy_of(src.copy_source(a), method, stream, "cuda:1")
                keep.append(importer(buf))

            _, route = devices.move_route(src, dst, method, "cuda:1")
            plan = api._move_plan(a, "torch", method, None, "cuda:1")
            rep = args.repeat if method == "p2p" else max(args.repeat // 3, 4)
            row["core"] = timed(core, sync, rep)
            row["+import"] = timed(with_import, sync, rep)
            row["+export only"] = timed(exported, sync, rep)
            keep.clear()
            row["+import, kept"] = timed(imported_kept, sync, max(rep // 3, 4))
            keep.clear()
            torch.cuda.synchronize(1)
            row["route"] = timed(lambda: route(a), sync, rep)
            row["plan.run"] = timed(lambda: plan.run(a, 1, 1, None, None), sync, rep)
            row["share"] = timed(lambda: gpushare.share(a, "torch", device="cuda:1", path=method), sync, rep)
            r = gpushare.share(a, "torch", device="cuda:1", path=method)
            row["share_timing_median_s"] = r.timing.median
            row["correct"] = bool(torch.equal(r.value[:1024].cpu(), a[:1024].cpu()))
            del r
            out[f"{method} {name}"] = row
            print(f"{method:6} {name:8} " + "  ".join(f"{k} {v * 1e6:9.1f} µs" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()), flush=True)
        del a
        gpushare.lab.empty_cache()
        torch.cuda.empty_cache()
    # Where share's own Python goes around the copy: cProfile of 10 shares at 256 MiB (the copy
    # itself shows as the native call that makes it).
    import cProfile
    import io
    import pstats

    a = torch.randn((256 << 20) // 4, device="cuda:0")
    gpushare.share(a, "torch", device="cuda:1", path="p2p")
    sync()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(10):
        gpushare.share(a, "torch", device="cuda:1", path="p2p")
        sync()
    prof.disable()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(25)
    print(text.getvalue()[-6000:])
    json.dump(out, open(args.json, "w"), indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
