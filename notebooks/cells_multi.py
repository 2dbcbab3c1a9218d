"""The cells of the notebooks that need more than one GPU or process: 05 (several GPUs) and 06
(across processes)."""

from __future__ import annotations

from cells_common import code, md

# ---------------------------------------------------------------------------------------------
# 05: several GPUs
# ---------------------------------------------------------------------------------------------

SEVERAL_GPUS = [
    md("""
# Several GPUs: the current-device trap, P2P against host staging, who sees whose memory

On a machine with two GPUs, frameworks change the *current device* behind your back: starting JAX
leaves the last GPU current. PyTorch then refuses to hand a `cuda:0` tensor to a consumer that passes
a stream. gpushare makes the source's device current for the handoff and says so. This notebook
degrades to a message on one GPU or none.
"""),
    code("""
%load_ext gpushare
import gpushare
status = gpushare._native.cuda.driver_status()
count = int(status.get("device_count") or 0) if status.get("available") else 0
enough = count >= 2
print(f"{count} CUDA device(s) here" + ("" if enough else
      ": this notebook needs two GPUs; the cells below say so and do nothing else"))
"""),
    md("## Who can see whose memory\\n`%gpuinfo` shows each pair's link (`nvidia-smi topo -m`), peer access both ways, each device's primary context and what each framework holds."),
    code("""
from gpushare.topology import topology
topology() if count else print("no CUDA here:", status.get("reason"))
"""),
    md("## The current-device trap\\nImport JAX, and see which device is current; then hand a `cuda:0` tensor to JAX."),
    code("""
if enough:
    import torch, jax, jax.dlpack
    jax.devices()
    print("current device after starting JAX:", torch.cuda.current_device())
    x = torch.arange(1 << 20, dtype=torch.float32, device="cuda:0")
    try:
        jax.dlpack.from_dlpack(x)
        print("the raw call worked here")
    except BufferError as e:
        print("the raw call fails:", e)
    r = gpushare.share(x, "jax")
    print(r.verdict, *r.notes, sep="\\n")
else:
    print("needs two GPUs")
"""),
    md("## Peer views are shared\\nNumba viewing a `cuda:1` tensor while `cuda:0` is current: the same bytes, read over peer access; Numba's label is wrong and the row says so."),
    code("""
if enough:
    try:
        from numba import cuda as ncuda
        y = torch.arange(1024, dtype=torch.float32, device="cuda:1")
        with ncuda.gpus[0]:
            r = gpushare.share(y, "numba")
        print(r.verdict, *r.notes, sep="\\n")
    except ImportError:
        print("numba is not installed")
else:
    print("needs two GPUs")
"""),
    md("## P2P against host staging\\nThe same move to `cuda:1` by gpushare's peer copy, by staging through page-locked host memory, by DLPack's `dl_device`/`copy=True`, and by the framework's own `.to` as the baseline."),
    code("""
if enough:
    big = torch.randn(64 << 20, device="cuda:0")  # 256 MiB
    display(gpushare.compare(big, "torch", device="cuda:1", repeat=5))
else:
    print("needs two GPUs")
"""),
]


# ---------------------------------------------------------------------------------------------
# 06: across processes
# ---------------------------------------------------------------------------------------------

PROCESSES = [
    md("""
# Two processes, two contexts, one allocation

A notebook and a worker, a data loader and a trainer, two ranks of `torch.distributed`: each is a
process with its own address space and, on a GPU, its own CUDA context. A pointer printed in one
means nothing in the other. CUDA IPC maps the *same physical allocation* at another address; NCCL
and gloo *copy*. gpushare shows which one happened, by the identity of the memory on both sides
(the allocation's IPC handle and the offset in it; for host memory, the shared file and offset),
and proves it with a write in one process read in the other.

Without CUDA this notebook runs the host paths (shared memory, `torch.multiprocessing`, gloo) and
says so.
"""),
    code("""
%load_ext gpushare
import torch, gpushare
cuda = torch.cuda.is_available()
device = "cuda:0" if cuda else "cpu"
print("CUDA" if cuda else "no CUDA: the host paths only", "| GPUs:", torch.cuda.device_count() if cuda else 0)
"""),
    md("""
## A worker process

`gpushare.Worker()` starts a Python process (multiprocessing *spawn*, so CUDA works in it) and stops
it when the `with` block ends, or at `w.stop()`. Every wait has a timeout; Ctrl-C stops it; a worker
that dies raises `WorkerError`.
"""),
    code("""
w = gpushare.Worker(device=device).start()
import os
print("this process:", os.getpid(), "| worker:", w.pid)
"""),
    md("""
## One allocation, two processes

A view 4 KiB into a larger tensor: on the GPU the `ipc` path exports the allocation it lies in
(`cuMemGetAddressRange`, `cuIpcGetMemHandle`) and the offset; the worker opens the handle in its own
context. Without CUDA `auto` picks `shm`, a POSIX shared-memory segment.
"""),
    code("""
base = torch.zeros(1 << 20, dtype=torch.float32, device=device)
x = base[1024:1024 + 4096]
r = gpushare.share(x, "torch", across=w)      # path="auto": ipc on a GPU, shm on the host
r
"""),
    code("""
for side in ("source", "target"):
    s = getattr(r, side)
    print(f"{side:6} pid {s['pid']}: identity {s['identity']}")
    print(f"{'':6} context {s['context']}")
"""),
    md("""
The raw addresses differ; the identity (handle + offset, or segment + offset) is the same, and each
process works in its own context on the same device. The proof: a write here, read there, and back.
"""),
    code("""
mine = r.local                       # the parent's array over the shared memory (x itself for ipc)
mine[0] = 123.0
if cuda:
    torch.cuda.synchronize()
print("worker reads", r.remote.read()[0])
r.remote.write(1, -1.0)
print("parent reads", float(mine[1]))
r.release()
"""),
    md("""
## Every path, one table

`compare(..., across=w)`: CUDA IPC by gpushare's core, `torch.multiprocessing`, shared host memory,
NCCL (two GPUs), NCCL over sockets (the stand-in for two hosts) and gloo: a comparison as every
other, with each path's first call (its one-off set-up) beside the times and the worker's side of the
memory under each row. A path that does not apply is named in the footnote with its reason.
"""),
    code("""
gpushare.compare(torch.ones(1 << 20, device=device), "torch", across=w, repeat=5)
"""),
    code("""
%sharebench torch->torch --across processes --sizes 1MiB,64MiB -r 5
"""),
    md("""
## Two GPUs: NCCL

NCCL refuses two ranks on one GPU, so its rows need a worker on another device.
"""),
    code("""
if cuda and torch.cuda.device_count() >= 2:
    with gpushare.Worker(device="cuda:1") as w2:
        display(gpushare.compare(torch.ones(1 << 24, device="cuda:0"), "torch", "ipc,nccl,nccl_socket", across=w2))
else:
    print("fewer than 2 GPUs: the footnote of the table above says why NCCL does not apply")
"""),
    code("""
pid = w.pid
w.stop()
print("worker", pid, "stopped:", not w.alive)
"""),
]
