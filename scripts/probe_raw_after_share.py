"""What the raw framework call costs in a tight loop against right after other work (a share), for
torch→jax: bench_core's budget compares share() with the raw call timed in a loop of its own, where
JAX's from_dlpack runs with every cache warm. On the CPU, torch→jax's share() adds ~20 µs against a
budget of ~9 (issue 22.7); this shows how much of that is the same call running colder.

    JAX_PLATFORMS=cpu python scripts/probe_raw_after_share.py [--device cuda]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--rounds", type=int, default=3000)
    args = ap.parse_args()
    if args.device == "cpu":
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax
    import torch

    import gpushare

    t = torch.ones(1 << 16, device=args.device)
    raw = jax.dlpack.from_dlpack
    for _ in range(500):
        gpushare.share(t, "jax")
        raw(t)
    clock = time.perf_counter
    alone, shares, after = [], [], []
    for _ in range(args.rounds):
        t0 = clock()
        raw(t)
        t1 = clock()
        gpushare.share(t, "jax")
        t2 = clock()
        raw(t)
        t3 = clock()
        alone.append(t1 - t0)
        shares.append(t2 - t1)
        after.append(t3 - t2)
    med = lambda v: statistics.median(v) * 1e6  # noqa: E731
    print(f"torch→jax on {args.device}, 256 KiB, median of {args.rounds} rounds: raw call after a raw call "
          f"{med(alone):.1f} µs; share() {med(shares):.1f} µs; raw call right after a share {med(after):.1f} µs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
