"""Why `share(x, "torch", device="cuda:1", path="p2p")` loses 1-5 % of the core's peer copy at
256 MiB from one run to the next (the goal: at most 3 %): the spread of each call, not only the median.

Times the core's copy (until usable on cuda:1) and `share(device=)` in ABBA pairs, keeps every
sample, and prints per block: the host's speed before it (gpushare.advice.host_speed), the median
ratio core/share, the share's excess over the core's (p10, p50, p90, in µs), and the same with the
garbage collector off, so that a collection inside the timed call is told from the host's speed.
A diagnostic, not a benchmark of record. Two GPUs: `python3 -m tools.move_spread`.
"""

import gc
import statistics
import sys
import time

import torch

import gpushare
from gpushare import _native, advice
from gpushare.adapters import framework

PAIRS = 80


def block(a, label: str) -> None:
    s0 = torch.cuda.current_stream(0)
    stream = s0.cuda_stream
    copy_of, copy_source = _native.share.SharedBuffer._copy_of, framework("torch").copy_source
    keep: list = []

    def core() -> None:
        keep.clear()
        keep.append(copy_of(copy_source(a), "p2p", stream, "cuda:1"))
        s0.synchronize()

    def share() -> None:
        keep.clear()
        keep.append(gpushare.share(a, "torch", device="cuda:1", path="p2p"))

    sync = lambda: (torch.cuda.synchronize(0), torch.cuda.synchronize(1))  # noqa: E731
    for _ in range(3):
        core(); sync(); share(); sync()  # noqa: E702
    speed = advice.host_speed()
    c, s = [], []
    for n in range(PAIRS):
        for fn, out in ((core, c), (share, s)) if n % 2 == 0 else ((share, s), (core, c)):
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
            sync()
    ratio = statistics.median(x / y for x, y in zip(c, s))
    excess = sorted((y - x) * 1e6 for x, y in zip(c, s))
    q = lambda p: excess[min(len(excess) - 1, int(p * len(excess)))]  # noqa: E731
    print(f"{label:12s} host {speed * 1e6:6.1f} µs  core {statistics.median(c) * 1e6:7.1f} µs  "
          f"share {statistics.median(s) * 1e6:7.1f} µs  ratio {ratio:.3f}  "
          f"share - core p10 {q(0.1):6.1f} p50 {q(0.5):6.1f} p90 {q(0.9):6.1f} µs  "
          f"core min {min(c) * 1e6:7.1f} max {max(c) * 1e6:7.1f}  share min {min(s) * 1e6:7.1f} max {max(s) * 1e6:7.1f}")
    keep.clear()


def main() -> int:
    if torch.cuda.device_count() < 2:
        print("fewer than 2 GPUs here; nothing to measure")
        return 0
    a = torch.randn((256 << 20) // 4, device="cuda:0")
    for i in range(2):
        block(a, f"gc on {i}")
        gc.disable()
        try:
            block(a, f"gc off {i}")
        finally:
            gc.enable()
    return 0


if __name__ == "__main__":
    sys.exit(main())
