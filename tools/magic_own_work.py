"""Where the default `%share` magic's own work goes (benchmarks/bench_core.py holds a `%share` cell
to its timing budget plus 50 ms), torch→jax at 1 MiB with observation on: its wall time less every
handoff its timing made, split into the IPython magic around the share, the share's pipeline
outside its handoffs (stage by stage, by the extension's stage trace), and the table's mime
bundle. Then the same pieces warm (the magic run again at once) and
cold (after a burst of raw handoffs, as the default timing leaves the caches), and the
observation's allocator probe on its own.

A diagnostic, not a benchmark of record (benchmarks/bench_core.py is that):
`python3 -m tools.magic_own_work [--device cpu|cuda:0]`.
"""

import argparse
import os
import statistics
import sys
import time
from collections import defaultdict

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import gpushare  # noqa: E402
from gpushare import _native, api  # noqa: E402


def us(ns: float) -> float:
    return ns / 1e3


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--rounds", type=int, default=12)
    args = ap.parse_args()
    import jax
    import torch

    _native.share._stage_trace(True)
    jax.devices()
    if args.device.startswith("cuda"):
        # JAX's start makes the last GPU current; torch's DLPack export refuses a tensor elsewhere.
        torch.cuda.set_device(torch.device(args.device))
    t = torch.ones((1 << 20) // 4, device=args.device)
    raw = lambda: jax.dlpack.from_dlpack(t)  # noqa: E731
    for _ in range(50):
        raw()

    chain_ns: list[tuple[int, int]] = []
    share_chain = api.share_chain

    def timed_chain(*a, **k):
        t0 = time.perf_counter_ns()
        try:
            return share_chain(*a, **k)
        finally:
            chain_ns.append((t0, time.perf_counter_ns()))

    api.share_chain = timed_chain

    def handoffs_us(result) -> float:
        timing = result.timing
        return (sum(timing.samples) * timing.loops + timing.untimed) * 1e6

    # The share alone, with the magic's default policy (observed, one warm-up, within 0.05 s).
    rows = defaultdict(list)
    for i in range(args.rounds):
        _native.share._stage_trace()
        t0 = time.perf_counter_ns()
        r = share_chain(t, ["jax"], name="t", observe=True, warmup=1, budget=0.05)[0]
        wall = us(time.perf_counter_ns() - t0)
        marks = _native.share._stage_trace()
        if i < 3:
            continue
        rows["share: own"].append(wall - handoffs_us(r))
        rows["share: loops × samples"].append(r.timing.loops * 1000 + len(r.timing.samples))
        stages = defaultdict(float)
        for stage, _, seconds in marks:
            stages[stage] += seconds * 1e6
        for stage, value in stages.items():
            rows[f"  stage: {stage}"].append(value)
    print(f"--- share_chain(t, ['jax'], observe=True, warmup=1, budget=0.05) on {args.device}"
          " (stage-traced)")
    for key, values in rows.items():
        print(f"  {key:52s} {statistics.median(values):10.1f}")

    try:
        from IPython.core.interactiveshell import InteractiveShell
    except ImportError:
        print("(IPython not installed: the magic itself not measured)")
        return 0
    ip = InteractiveShell.instance(history_load_length=0)
    ip.history_manager.enabled = False
    ip.run_line_magic("load_ext", "gpushare")
    ip.user_ns["t"] = t

    def magic(line: str, burst: int) -> dict[str, float]:
        for _ in range(burst):
            raw()
        chain_ns.clear()
        t0 = time.perf_counter_ns()
        table = ip.run_line_magic("share", line)
        t1 = time.perf_counter_ns()
        table._repr_mimebundle_()
        t2 = time.perf_counter_ns()
        hand = handoffs_us(table[0])
        (c0, c1), = chain_ns
        return {"own": us(t2 - t0) - hand, "the magic before the share": us(c0 - t0),
                "share outside its handoffs": us(c1 - c0) - hand, "the magic after the share": us(t1 - c1),
                "mime bundle": us(t2 - t1)}

    for line, burst, label in (("t ->jax -q -o", 0, "default"), ("t ->jax -n 1 -r 1 -q -o", 0, "-n 1 -r 1, warm"),
                               ("t ->jax -n 1 -r 1 -q -o", 1000, "-n 1 -r 1 after 1000 raw handoffs")):
        rows = defaultdict(list)
        for i in range(args.rounds):
            parts = magic(line, burst)
            if i >= 3:
                for k, v in parts.items():
                    rows[k].append(v)
        print(f"--- %share {line}: {label} (µs, median of {args.rounds - 3})")
        for key, values in rows.items():
            print(f"  {key:52s} {statistics.median(values):10.1f}")

    # What no change to gpushare can remove: IPython's own dispatch of a line magic that does
    # nothing, warm and right after the default magic's timing loop (cold caches).
    ip.register_magic_function(lambda line: None, "line", "gpushare_probe_noop")
    for before, label in ((None, "warm"), ("t ->jax -q -o", "right after the default %share")):
        samples = []
        for _ in range(args.rounds):
            if before is not None:
                ip.run_line_magic("share", before)
            t0 = time.perf_counter_ns()
            ip.run_line_magic("gpushare_probe_noop", "t ->jax -q -o")
            samples.append(us(time.perf_counter_ns() - t0))
        print(f"--- IPython's dispatch of a no-op line magic, {label}: {statistics.median(samples[3:]):.1f} µs")

    from gpushare.ledger import allocator_memory

    ordinal = t.device.index or 0
    for frameworks in (("torch", "jax"), ("torch",), ("jax",)):
        for burst, label in ((0, "warm"), (1000, "after 1000 raw handoffs")):
            samples = []
            for _ in range(10):
                for _ in range(burst):
                    raw()
                t0 = time.perf_counter_ns()
                allocator_memory(ordinal, frameworks=frameworks)
                samples.append(us(time.perf_counter_ns() - t0))
            print(f"--- the ledger's allocator probe ({', '.join(frameworks)}), {label}: {statistics.median(samples):.1f} µs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
