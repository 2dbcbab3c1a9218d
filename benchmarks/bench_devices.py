"""Moves between two GPUs and through the host, in one run, against their speed targets.

    python benchmarks/bench_devices.py [--json OUT.json] [--repeat 20]

Measures on cuda:0 → cuda:1: torch's own copy (``b.copy_(a)``), gpushare ``p2p`` (the Rust core's
peer copy into its own memory; the core call and the whole ``share``) at 256 MiB and 1 GiB,
gpushare ``pinned`` staging, and the host link itself (raw page-locked H2D and D2H by torch).
States the NVLink per-direction limit it compares against (``nvidia-smi topo -m`` links × the
per-link rate) and checks the targets: the p2p copy at parity with torch's (within 2 %:
both drive the same copy engine, whose own ceiling is 0.85-0.87 of NVLink's nominal rate, so "faster
than torch" is not a goal), ``share(device=…)`` around that copy losing at most 3 % of its bandwidth,
and pinned staging at ≥ 0.85 of the host-link bandwidth (the slower of H2D and D2H, since staging
crosses both) at 256 MiB and above.
Each figure: median of ``--repeat`` timed copies after 3 warm-ups, each synchronised. The core's
peer copy and ``share(device=…)`` are timed in alternation (core, share, share, core, …: ABBA) and
compared as the median of each pair's ratio: measured one block after the other, a copy engine
that drifts by a few percent within seconds (698-745 µs for one 256 MiB copy on one host) moved the
ratio by as much as the 3 % it is meant to judge. ``--pairs`` sets how many alternations.
The 3 % target compares the two until the moved values are usable on cuda:1: the core's copy and
the wait for the stream it was queued on, against ``share()`` alone, which returns once the copy
has landed; that every share left both devices idle is checked after each call (untimed) and is
part of the target. The earlier form, each call followed by a synchronise of both devices, is
reported beside it (``share_vs_p2p_both_synchronised``): there share pays two synchronises that
wait for nothing, while the core's first one is its copy's own wait.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

SIZES = {"256MiB": 256 << 20, "1GiB": 1 << 30}


def timed(fn, sync, repeat: int) -> float:
    for _ in range(3):
        fn()
    sync()
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        sync()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def timed_pairs(first, second, sync, pairs: int, waits=None, idle=None) -> tuple[float, float, float, list[list[str]]]:
    """``first`` and ``second`` timed in alternation (ABBA) after 3 warm-ups of each: (median of ``first``,
    median of ``second``, median of the pairs' ratio first/second, and for each of the two the
    calls that left work pending, as the devices it was on). Alternating puts both under the same
    drift of the copy engine and the host.

    Each call's timed region ends with its own wait, ``waits`` (both ``sync`` by default); then,
    untimed, ``idle()`` names the devices whose current stream still has work (a call whose wait
    left work pending is counted, and where) and ``sync`` settles everything before the next call."""
    first_wait, second_wait = waits or (sync, sync)
    for _ in range(3):
        first()
        sync()
        second()
        sync()
    a, b, pending = [], [], [[], []]
    calls = ((0, first, first_wait, a), (1, second, second_wait, b))
    for n in range(pairs):
        # ABBA: the two swap places every other pair, so that neither always runs first after the
        # settling synchronise (a fixed order would put any cost of that position on one side).
        for i, fn, wait, samples in (calls if n % 2 == 0 else calls[::-1]):
            t0 = time.perf_counter()
            fn()
            wait()
            samples.append(time.perf_counter() - t0)
            busy = idle() if idle is not None else []
            if busy:  # the devices whose current stream still had work
                pending[i].append(", ".join(busy))
            sync()
    return statistics.median(a), statistics.median(b), statistics.median(x / y for x, y in zip(a, b)), pending


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default="bench_devices.json")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--pairs", type=int, default=60, help="alternations of the core's copy and share(device=)")
    args = ap.parse_args()

    import torch

    import gpushare
    from gpushare import _native, advice, topology
    from gpushare.adapters import framework

    if torch.cuda.device_count() < 2:
        print("bench_devices: fewer than 2 GPUs here; nothing to measure")
        json.dump({"skipped": "fewer than 2 GPUs"}, open(args.json, "w"))
        return 0
    sync = lambda: (torch.cuda.synchronize(0), torch.cuda.synchronize(1))  # noqa: E731
    kind = topology.nvidia_smi_links().get((0, 1))
    major = torch.cuda.get_device_capability(0)[0]
    limit = topology.nvlink_limit_Bps(kind, major)
    out: dict = {
        "devices": [torch.cuda.get_device_name(i) for i in range(2)],
        "link": kind, "link_words": topology.link_words(kind),
        "nvlink_limit_Bps_per_direction": limit,
        "limit_rule": "links × 25 GB/s per direction (NVLink3/4), 50 GB/s (NVLink5)",
        "peer_access": [torch.cuda.can_device_access_peer(0, 1), torch.cuda.can_device_access_peer(1, 0)],
        "repeat": args.repeat, "pairs": args.pairs, "sizes": {},
    }
    for name, nbytes in SIZES.items():
        n = nbytes // 4
        a = torch.randn(n, device="cuda:0")
        b = torch.empty(n, device="cuda:1")
        row: dict = {"bytes": nbytes}
        # The host's speed in this process (seconds of a fixed piece of Python work): share(device=)
        # adds 12-16 µs of host work to the copy at the host's usual speed and about 40 in a process
        # on a vCPU 1.7x slower (tools/move_spread.py, 2x H200), so a
        # ratio is read beside it.
        row["host_speed_us"] = advice.host_speed() * 1e6  # not "_s": those keys become bandwidths below
        row["torch_copy_s"] = timed(lambda: b.copy_(a), sync, args.repeat)
        stream = torch.cuda.current_stream(0).cuda_stream
        copy_of = _native.share.SharedBuffer._copy_of
        copy_source = framework("torch").copy_source  # what the p2p route reads its source from
        keep = []

        def p2p_core():
            keep.clear()
            keep.append(copy_of(copy_source(a), "p2p", stream, "cuda:1"))

        def share_move():
            keep.clear()
            keep.append(gpushare.share(a, "torch", device="cuda:1", path="p2p"))

        # Both followed by a synchronise of both devices (the benchmark's earlier form, kept to compare):
        # share() returns with the copy landed, so for it both synchronises wait for nothing, while
        # the core's first one is its copy's own wait.
        row["p2p_core_s"], row["p2p_share_s"], core_per_share_synced, _ = timed_pairs(
            p2p_core, share_move, sync, args.pairs)
        # Until the values are usable on cuda:1: each call and the wait it leaves its caller. The
        # core's copy is queued on cuda:0's current stream, which the caller waits for; share()
        # waits itself (the report times the copy to its end), and every time it returns both
        # devices' streams must be idle, or the target fails (pending_after; pending_on names the
        # devices whose stream still had work).
        s0, s1 = torch.cuda.current_stream(0), torch.cuda.current_stream(1)
        row["p2p_core_usable_s"], row["p2p_share_usable_s"], core_per_share, pending = timed_pairs(
            p2p_core, share_move, sync, args.pairs, waits=(s0.synchronize, lambda: None),
            idle=lambda: [name for name, s in (("cuda:0", s0), ("cuda:1", s1)) if not s.query()])
        row["pending_after"] = {"p2p core": len(pending[0]), "share": len(pending[1])}
        row["pending_on"] = {"p2p core": pending[0], "share": pending[1]}

        def pinned_core():
            keep.clear()
            keep.append(copy_of(copy_source(a), "pinned", stream, "cuda:1"))

        row["pinned_core_s"] = timed(pinned_core, sync, max(args.repeat // 4, 3))
        host = torch.empty(n, pin_memory=True)
        row["h2d_raw_s"] = timed(lambda: a.copy_(host, non_blocking=True), sync, args.repeat)
        row["d2h_raw_s"] = timed(lambda: host.copy_(a, non_blocking=True), sync, args.repeat)
        keep.clear()
        # Correctness of what was timed: the last p2p result holds a's values on cuda:1.
        r = gpushare.share(a, "torch", device="cuda:1", path="p2p")
        row["p2p_correct"] = bool(torch.equal(r.value.cpu(), a.cpu())) and r.value.device.index == 1
        for k in [k for k in row if k.endswith("_s")]:
            row[k[: -len("_s")] + "_GBps"] = nbytes / row[k] / 1e9
        host_link = min(row["h2d_raw_GBps"], row["d2h_raw_GBps"])
        row["targets"] = {
            "p2p_vs_torch": row["p2p_core_GBps"] / row["torch_copy_GBps"],
            # Time ratio core/share of each alternation, the median, until the values are usable on
            # cuda:1: share's bandwidth against the core's.
            "share_vs_p2p": core_per_share,
            "share_vs_p2p_of_medians": row["p2p_share_usable_GBps"] / row["p2p_core_usable_GBps"],
            # The earlier form: both calls followed by a synchronise of both devices.
            "share_vs_p2p_both_synchronised": core_per_share_synced,
            "p2p_vs_nvlink": None if not limit else row["p2p_core_GBps"] * 1e9 / limit,
            "pinned_vs_host_link": row["pinned_core_GBps"] / host_link,
        }
        row["met"] = {
            "p2p at parity with torch (>= 0.98x)": row["targets"]["p2p_vs_torch"] >= 0.98,
            "p2p >= 0.85 NVLink": None if not limit else row["targets"]["p2p_vs_nvlink"] >= 0.85,
            "share(device=) loses <= 3 % of p2p": row["targets"]["share_vs_p2p"] >= 0.97 and not pending[1],
            "pinned >= 0.85 host link": row["targets"]["pinned_vs_host_link"] >= 0.85,
        }
        out["sizes"][name] = row
        del a, b, host, r
        gpushare.lab.empty_cache()
        torch.cuda.empty_cache()
    print(f"link cuda:0→cuda:1: {out['link_words']}; NVLink limit per direction: "
          f"{'unknown' if not limit else f'{limit / 1e9:.0f} GB/s'}")
    for name, row in out["sizes"].items():
        print(f"{name}: torch copy {row['torch_copy_GBps']:.0f} GB/s | p2p core {row['p2p_core_GBps']:.0f} GB/s, "
              f"share {row['p2p_share_GBps']:.0f} GB/s (until usable: core {row['p2p_core_usable_GBps']:.0f}, "
              f"share {row['p2p_share_usable_GBps']:.0f}) | pinned {row['pinned_core_GBps']:.1f} GB/s | "
              f"host link H2D {row['h2d_raw_GBps']:.1f} D2H {row['d2h_raw_GBps']:.1f} GB/s | correct {row['p2p_correct']}")
        print(f"  host speed {row['host_speed_us']:.1f} µs of fixed Python work "
              "(24-33 at the usual speed of the 2x H200 hosts, 40-52 in a slow process)")
        print(f"  targets: {row['met']}  ratios: { {k: (None if v is None else round(v, 3)) for k, v in row['targets'].items()} }"
              f"  calls that left work pending: {row['pending_after']} (on {row['pending_on']})")
    json.dump(out, open(args.json, "w"), indent=2)
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
