"""Across processes, measured in one run: JSON out.

    python benchmarks/bench_processes.py --out gpu-out/bench_processes.json [--sizes 1MiB,64MiB,256MiB] [--repeat 10]

What it compares, for the same tensor and in the same run:

- ``ipc`` (the Rust core's CUDA IPC: export, open in the worker, the worker's torch view) against
  ``torch_mp`` (torch.multiprocessing's CUDA sharing): first call and warm median of each. Goal:
  ipc's warm open + view no slower than torch_mp's.
- ``nccl`` through gpushare's worker against a raw ``torch.distributed`` send/recv between two
  processes started here (``init_process_group("nccl")``, ``dist.send``/``dist.recv``), each
  handoff acknowledged as gpushare's is (the receiver's completion reaches the sender). Goal:
  gpushare's NCCL path at least 0.9 of the raw bandwidth. Needs 2 GPUs (NCCL refuses two ranks on
  one GPU); with one GPU the rows carry that reason.
- ``nccl_socket``: the stand-in for two hosts (NCCL over sockets on loopback), measured and labelled.
- Without CUDA: ``shm``, ``torch_mp`` and ``gloo`` (and a raw gloo send/recv baseline).

Every process this starts is stopped before it exits; every wait has a timeout. The environment
needed on the shared GPU machines (NVLink multicast off) is set here and passed to every child.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import queue
import socket
import statistics
import sys
import time

for _k, _v in {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}.items():
    os.environ.setdefault(_k, _v)

import torch  # noqa: E402

import gpushare  # noqa: E402
from gpushare import lab, processes  # noqa: E402

TIMEOUT = 300.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _raw_rank(rank: int, port: int, backend: str, nbytes: int, repeat: int, env: dict, out: "mp.Queue") -> None:
    """One rank of the raw baseline: plain torch.distributed, default group, send/recv + a one-element
    acknowledgement per handoff (as gpushare's worker reply is one)."""
    os.environ.update(env)
    import torch.distributed as dist

    try:
        t0 = time.perf_counter()
        dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
        device = torch.device(f"cuda:{rank}") if backend == "nccl" else torch.device("cpu")
        if device.type == "cuda":
            torch.cuda.set_device(device)
        n = max(nbytes // 4, 1)
        t = torch.ones(n, device=device) if rank == 0 else torch.empty(n, device=device)
        ack = torch.zeros(1, device=device)
        times = []

        def sync() -> None:
            if device.type == "cuda":
                torch.cuda.synchronize(device)

        for i in range(repeat + 1):
            start = time.perf_counter()
            if rank == 0:
                dist.send(t, 1)
                dist.recv(ack, 1)
            else:
                dist.recv(t, 0)
                sync()
                dist.send(ack, 0)
            sync()
            times.append(time.perf_counter() - start + (start - t0 if i == 0 else 0.0))
        if rank == 1:
            assert float(t[0]) == 1.0
        out.put({"rank": rank, "first_call": times[0], "samples": times[1:]})
        dist.destroy_process_group()
    except BaseException as e:  # reported, the parent decides
        out.put({"rank": rank, "error": f"{type(e).__name__}: {e}"})


def raw_sendrecv(backend: str, nbytes: int, repeat: int, env: dict | None = None) -> dict:
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = _free_port()
    child_env = {**processes.SAFE_ENV, **(env or {})}
    procs = [ctx.Process(target=_raw_rank, args=(r, port, backend, nbytes, repeat, child_env, q), daemon=True)
             for r in (0, 1)]
    for p in procs:
        p.start()
    results = {}
    try:
        deadline = time.monotonic() + TIMEOUT
        while len(results) < 2 and time.monotonic() < deadline:
            try:
                r = q.get(timeout=1.0)
                results[r["rank"]] = r
            except queue.Empty:
                if any(p.exitcode not in (None, 0) for p in procs):
                    break
    finally:
        for p in procs:
            p.join(10)
            if p.is_alive():
                p.terminate()
                p.join(5)
            if p.is_alive():
                p.kill()
    if 0 not in results:
        return {"error": "the raw baseline did not finish: " + str(results or [p.exitcode for p in procs])}
    if "error" in results[0]:
        return {"error": results[0]["error"]}
    r = results[0]
    med = statistics.median(r["samples"])
    return {"first_call": r["first_call"], "median": med, "min": min(r["samples"]), "samples": r["samples"],
            "GBps": nbytes / med / 1e9}


def summarise(row: dict) -> dict:
    t, worker = row.get("timing") or {}, row.get("worker") or {}
    out = {"path": row["path"], "mechanism": worker.get("mechanism"), "verdict": row["verdict"], "reason": row.get("reason"),
           "bytes_moved": row.get("bytes_moved"), "first_call": t.get("first_call"), "median": t.get("median"),
           "min": t.get("min"), "repeats": len(t.get("samples") or []), "notes": row.get("notes", [])}
    if t.get("median") and worker.get("bytes_per_handoff"):
        out["GBps"] = worker["bytes_per_handoff"] / t["median"] / 1e9
    src, dst = worker.get("source") or {}, worker.get("target") or {}
    out["source_identity"], out["target_identity"] = src.get("identity"), dst.get("identity")
    out["source_context"], out["target_context"] = src.get("context"), dst.get("context")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="bench_processes.json")
    ap.add_argument("--sizes", default="1MiB,64MiB,256MiB")
    ap.add_argument("--repeat", type=int, default=10)
    args = ap.parse_args(argv)
    sizes = [lab.parse_size(s) for s in args.sizes.split(",")]
    cuda = torch.cuda.is_available()
    ngpu = torch.cuda.device_count() if cuda else 0
    report: dict = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "host": platform.node(), "python": sys.version.split()[0], "torch": torch.__version__,
        "gpushare": gpushare.__version__, "cuda": cuda, "gpus": ngpu,
        "gpu_names": [torch.cuda.get_device_name(i) for i in range(ngpu)],
        "nccl": ".".join(map(str, torch.cuda.nccl.version())) if cuda else None,
        "repeat": args.repeat, "sizes": sizes, "points": [], "goals": [],
    }
    print(f"cuda={cuda} gpus={ngpu} torch {torch.__version__}", flush=True)
    for size in sizes:
        n = max(size // 4, 1)
        point: dict = {"size": size}
        if cuda:
            x = torch.ones(n, device="cuda:0")
            with gpushare.Worker(device="cuda:0") as w:
                point["same_gpu"] = [summarise(r) for r in gpushare.compare(x, "torch", "ipc,torch_mp", across=w,
                                                                             repeat=args.repeat).rows]
            if ngpu >= 2:
                with gpushare.Worker(device="cuda:1") as w:
                    rows = gpushare.compare(x, "torch", "ipc,nccl,nccl_socket", across=w, repeat=args.repeat).rows
                    point["two_gpus"] = [summarise(r) for r in rows]
                point["raw_nccl"] = raw_sendrecv("nccl", size, args.repeat)
                point["raw_nccl_socket"] = raw_sendrecv("nccl", size, args.repeat, processes.SOCKET_ENV)
            else:
                point["two_gpus"] = "fewer than 2 GPUs: NCCL refuses two ranks on one GPU (Duplicate GPU detected)"
            del x
            torch.cuda.empty_cache()
        x = torch.ones(n)
        with gpushare.Worker(device="cpu") as w:
            point["host"] = [summarise(r) for r in gpushare.compare(x, "torch", "shm,torch_mp,gloo", across=w,
                                                                     repeat=args.repeat).rows]
        point["raw_gloo"] = raw_sendrecv("gloo", size, args.repeat)
        report["points"].append(point)
        print(json.dumps({"size": size, **{k: v for k, v in point.items() if k != "size"}}, default=str)[:2000], flush=True)

        # The goals, judged from this run's numbers.
        def row(group: str, path: str) -> dict | None:
            rows = point.get(group)
            return next((r for r in rows if r["path"] == path), None) if isinstance(rows, list) else None

        ipc, tmp = row("same_gpu", "ipc"), row("same_gpu", "torch_mp")
        if ipc and tmp and ipc["median"] and tmp["median"]:
            report["goals"].append({"size": size, "goal": "ipc open+view <= torch_mp", "ipc_s": ipc["median"],
                                    "torch_mp_s": tmp["median"], "met": ipc["median"] <= tmp["median"]})
        nccl, raw = row("two_gpus", "nccl"), point.get("raw_nccl") or {}
        if nccl and nccl.get("GBps") and raw.get("GBps"):
            ratio = nccl["GBps"] / raw["GBps"]
            report["goals"].append({"size": size, "goal": "nccl >= 0.9 x raw torch.distributed", "ratio": ratio,
                                    "gpushare_GBps": nccl["GBps"], "raw_GBps": raw["GBps"], "met": ratio >= 0.9})
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1, default=str)
    for g in report["goals"]:
        print("GOAL", json.dumps(g), flush=True)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
