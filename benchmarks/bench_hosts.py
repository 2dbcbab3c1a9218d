"""A worker on another host, measured in one run: gpushare's ``remote`` handoff (gloo) against raw
torch.distributed send/recv over the same link, and against a ``tc tbf``-shaped rate.

    python benchmarks/bench_hosts.py [--sizes 1MiB,16MiB,64MiB,256MiB] [--calibrate 256KiB,4MiB,32MiB]
                                     [--repeat 10] [--rate 2gbit] [--out F]

Two network namespaces joined by a veth pair stand for two hosts (root; iproute2's ``ip`` and
``tc``, or pyroute2 without them): ``gpushare worker --listen`` in one, the caller in the other.

- gpushare: ``Worker(host=…).share(x, repeat=N)``, the median of N acknowledged handoffs, against
  the link's ceiling (``gpushare.processes.remote.link_ceiling``, measured at the first handoff) and
  the prediction of a model calibrated first (``gpushare.calibrate(across=…)``) at ``--calibrate``
  sizes, in the first round.
- raw: a gloo process group of two processes started here, one per namespace, on their own
  ``TCPStore``, each send acknowledged by a 4-byte reply, as gpushare's handoff is. Goal:
  gpushare's median within 1.1x of raw at each size.
- shaped: the caller's end of the veth limited by ``tc qdisc … tbf rate RATE``; gpushare's
  throughput at >= 64 MiB against that rate. Goal: at least 0.9 of it.

Prints a table; ``--out`` writes the numbers as JSON. Everything it creates (namespaces,
processes) is removed before it exits.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from _netns import VethPair, cannot_create  # noqa: E402

UNITS = {"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30}


def parse_size(text: str) -> int:
    t = text.strip().lower()
    for unit, factor in UNITS.items():
        if t.endswith(unit):
            return int(float(t[: -len(unit)]) * factor)
    return int(t)


def parse_rate(text: str) -> float:
    """``tc``'s rate (``2gbit``, ``500mbit``) in bytes per second."""
    t = text.strip().lower()
    for unit, factor in (("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3)):
        if t.endswith(unit):
            return float(t[: -len(unit)]) * factor / 8
    raise SystemExit(f"--rate: {text!r} is not a tc rate such as 2gbit or 500mbit")


# -- what runs in the namespaces (this file, with a role) ------------------------------------------

def gpushare_side(host: str, sizes: list[int], repeat: int, calibrate: list[int]) -> dict:
    import torch

    import gpushare
    from gpushare.processes import remote as process_remote

    model = None
    if calibrate:  # first: the listener serves one peer at a time, and calibrate connects its own
        model = gpushare.calibrate(["torch"], sizes=calibrate, device="cpu", across=host, shares=False, save=False,
                                   progress=False)
    out = {}
    with gpushare.Worker(host=host, timeout=120) as w:
        for size in sizes:
            x = torch.ones(size // 4)
            r = w.share(x, repeat=repeat)
            p = model.predict("process", "remote", "torch", "torch", "cpu->process", size) if model else None
            out[size] = {"median": r.timing["median"], "min": r.timing["min"], "transport": r.link["transport"],
                         "ceiling": process_remote.link_ceiling(w)["bandwidth"],
                         "predicted": None if p is None else p.seconds}
            r.release()
    return out


def raw_side(rank: int, store: str, iface: str, sizes: list[int], repeat: int) -> dict:
    """One rank of a plain gloo pair: rank 0 sends and waits for a 4-byte acknowledgement."""
    os.environ["GLOO_SOCKET_IFNAME"] = iface
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    host, port = store.rsplit(":", 1)
    s = dist.TCPStore(host, int(port), 2, rank == 0, timeout=timedelta(seconds=120))
    pg = dist.ProcessGroupGloo(s, rank, 2, timedelta(seconds=120))
    out = {}
    for size in sizes:
        t, ack = torch.ones(size // 4), torch.zeros(1)
        times = []
        for _ in range(repeat + 1):
            t0 = time.perf_counter()
            if rank == 0:
                pg.send([t], 1, 0).wait()
                pg.recv([ack], 1, 1).wait()
            else:
                pg.recv([t], 0, 0).wait()
                pg.send([ack], 0, 1).wait()
            times.append(time.perf_counter() - t0)
        rest = sorted(times[1:])
        out[size] = {"median": rest[len(rest) // 2], "min": rest[0]}
    return out


# -- the run --------------------------------------------------------------------------------------

def run_in(pair: VethPair, ns: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen(pair.command(ns, [sys.executable, os.path.abspath(__file__), *args]),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def result_of(proc: subprocess.Popen, timeout: float = 1200) -> dict:
    out, err = proc.communicate(timeout=timeout)
    if proc.returncode != 0:
        raise SystemExit(f"a side failed:\n{err[-3000:]}")
    return {int(k): v for k, v in json.loads(out.strip().splitlines()[-1]).items()}


def start_worker(pair: VethPair, port: int) -> subprocess.Popen:
    argv = [sys.executable, "-m", "gpushare", "worker", "--listen", f"{pair.addr_b}:{port}", "--timeout", "120"]
    proc = subprocess.Popen(pair.command(pair.b, argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if select.select([proc.stdout], [], [], 1.0)[0] and "listening on" in proc.stdout.readline():
            return proc
    stop(proc)
    raise SystemExit("the worker did not start")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def best(runs: list[dict]) -> dict:
    """Per size, the run with the lowest median (the rounds alternate gpushare and raw, so a burst
    of load from elsewhere on the machine does not land on one side only)."""
    return {s: min((r[s] for r in runs), key=lambda v: v["median"]) for s in runs[0]}


def measure(pair: VethPair, sizes: list[int], repeat: int, port: int, rounds: int, calibrate: list[int] = ()
            ) -> tuple[dict, dict]:
    mine, raw = [], []
    for i in range(rounds):
        m, r = measure_once(pair, sizes, repeat, port + 2 * i, list(calibrate) if i == 0 else [])
        if i > 0:  # the prediction is the first round's (one calibration per run)
            for size in m:
                m[size]["predicted"] = mine[0][size]["predicted"]
        mine.append(m)
        raw.append(r)
    return best(mine), best(raw)


def measure_once(pair: VethPair, sizes: list[int], repeat: int, port: int, calibrate: list[int]) -> tuple[dict, dict]:
    spec = ",".join(map(str, sizes))
    worker = start_worker(pair, port)
    try:
        mine = result_of(run_in(pair, pair.a, "gpushare", f"{pair.addr_b}:{port}", spec, str(repeat),
                                ",".join(map(str, calibrate))))
    finally:
        stop(worker)
    store = f"{pair.addr_a}:{port + 1}"
    r0 = run_in(pair, pair.a, "raw", "0", store, pair.if_a, spec, str(repeat))
    r1 = run_in(pair, pair.b, "raw", "1", store, pair.if_b, spec, str(repeat))
    try:
        raw = result_of(r0)
        result_of(r1)
    finally:
        for p in (r0, r1):
            if p.poll() is None:
                p.kill()
    return mine, raw


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="1MiB,16MiB,64MiB,256MiB")
    p.add_argument("--calibrate", default="256KiB,4MiB,32MiB",
                   help="sizes the model is calibrated at, before the first round (none: '')")
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--rate", default="2gbit", help="the tc tbf rate of the shaped run")
    p.add_argument("--rounds", type=int, default=2, help="alternating rounds of gpushare and raw; the best of each")
    p.add_argument("--out", default=None)
    a = p.parse_args()
    why = cannot_create()
    if why:
        raise SystemExit(f"two network namespaces cannot be created here: {why}")
    sizes = [parse_size(s) for s in a.sizes.split(",")]
    pair = VethPair().create()
    report: dict = {"sizes": sizes, "repeat": a.repeat}
    try:
        calibrate = [parse_size(s) for s in a.calibrate.split(",") if s.strip()]
        mine, raw = measure(pair, sizes, a.repeat, 29700, a.rounds, calibrate)
        report["veth"] = {"gpushare": mine, "raw": raw}
        print(f"veth {pair.if_a} -> {pair.if_b} (transport: {mine[sizes[0]]['transport']}); medians, best of "
              f"{a.rounds} alternating rounds; goal: gpushare within 1.1x of raw")
        print(f"{'size':>10} {'gpushare':>12} {'GB/s':>7} {'ceiling':>8} {'of it':>6} {'predicted':>12} {'error':>7} "
              f"{'raw gloo':>12} {'GB/s':>7} {'ratio':>6}")
        for s in sizes:
            g, r, c, pred = mine[s]["median"], raw[s]["median"], mine[s]["ceiling"], mine[s]["predicted"]
            shown = (f"{pred * 1e3:>9.3f} ms {(pred - g) / g:>+7.0%}" if pred is not None else f"{'-':>12} {'-':>7}")
            print(f"{s >> 10:>7} KiB {g * 1e3:>9.3f} ms {s / g / 1e9:>7.3f} {c / 1e9:>8.3f} {s / g / c:>6.0%} {shown} "
                  f"{r * 1e3:>9.3f} ms {s / r / 1e9:>7.3f} {g / r:>6.2f}")
        big = [s for s in sizes if s >= 64 << 20]
        if big:
            pair.shape("a", a.rate)
            rate = parse_rate(a.rate)
            shaped, shaped_raw = measure(pair, big, max(a.repeat // 2, 3), 29720, a.rounds)
            report["shaped"] = {"rate": a.rate, "bytes_per_s": rate, "gpushare": shaped, "raw": shaped_raw}
            print(f"\nshaped by tc tbf rate {a.rate} ({rate / 1e6:.0f} MB/s) on {pair.if_a}")
            print(f"{'size':>10} {'gpushare':>12} {'MB/s':>8} {'of rate':>8} {'raw MB/s':>9} {'of rate':>8}")
            for s in big:
                bw, rbw = s / shaped[s]["median"], s / shaped_raw[s]["median"]
                print(f"{s >> 20:>7} MiB {shaped[s]['median'] * 1e3:>9.1f} ms {bw / 1e6:>8.1f} {bw / rate:>8.2f} "
                      f"{rbw / 1e6:>9.1f} {rbw / rate:>8.2f}")
    finally:
        pair.delete()
    if a.out:
        with open(a.out, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "gpushare":
        print(json.dumps(gpushare_side(sys.argv[2], [int(s) for s in sys.argv[3].split(",")], int(sys.argv[4]),
                                       [int(s) for s in sys.argv[5].split(",") if s])))
    elif len(sys.argv) > 1 and sys.argv[1] == "raw":
        print(json.dumps(raw_side(int(sys.argv[2]), sys.argv[3], sys.argv[4],
                                  [int(s) for s in sys.argv[5].split(",")], int(sys.argv[6]))))
    else:
        main()
