"""The cells of the one-GPU notebooks: 03 (transfer paths), 04 (memory, streams and contexts) and 07
(TensorFlow on a GPU)."""

from __future__ import annotations

from cells_common import QUIET_TF, code, md


# ---------------------------------------------------------------------------------------------
# 03: transfer paths on a GPU
# ---------------------------------------------------------------------------------------------

PATHS_GPU = [
    md("""
# Transfer paths on a GPU: torch, JAX, CuPy

Seven ways to move an array from one framework to another, each named the same in magics, the API,
tables and JSON:

| path | what it does |
|---|---|
| `dlpack` | the array-API protocol: the consumer's `from_dlpack(obj)` |
| `capsule` | legacy explicit capsule: `to_dlpack` → `from_dlpack(capsule)` (JAX no longer takes them) |
| `cai` | `__cuda_array_interface__` (CuPy, Numba, PyTorch) |
| `host` | the naive route through NumPy on the host |
| `pinned` | host staging through page-locked memory, copied by gpushare's Rust core |
| `copy` | a device-to-device copy, then a zero-copy handoff |
| `shared` | a `gpushare.SharedBuffer`: memory owned by gpushare, handed to every framework |

This notebook is meant for a machine with a CUDA GPU. Without one it still runs top to bottom, at
CPU sizes, and says what it skipped.
"""),
    code("""
import torch
import jax
import jax.numpy as jnp
import gpushare

HAVE_CUDA = torch.cuda.is_available() and any(d.platform == "gpu" for d in jax.devices())
try:
    import cupy
    HAVE_CUPY = HAVE_CUDA and cupy.cuda.runtime.getDeviceCount() > 0
except Exception:  # not installed, or no driver
    HAVE_CUPY = False

device = "cuda:0" if HAVE_CUDA else "cpu"
sizes = "4KiB,1MiB,64MiB,256MiB" if HAVE_CUDA else "4KiB,64KiB,1MiB"
nbytes = 64 << 20 if HAVE_CUDA else 1 << 20
print(f"device {device}; JAX: {jax.devices()}; CuPy: {'yes' if HAVE_CUPY else 'no'}; sweep {sizes}")
"""),
    md("""
## One array, every path: `%share x ->jax --path all`

Read the table by columns: the verdict (`shared` moves no bytes), bytes moved, the median time with
its minimum and IQR, and the bandwidth of the copying paths. Expect `dlpack` to share in
microseconds whatever the size (on a GPU XLA aliases the pointer; it has no alignment rule there),
`capsule` to be a row with JAX's refusal, and `host` to pay two trips over PCIe.
"""),
    code("""
x = torch.ones(nbytes // 4, device=device)
%share x ->jax --path all -r 10
"""),
    md("""
## Memory everyone owns: `gpushare.SharedBuffer`

A `SharedBuffer` is memory allocated by gpushare's Rust core (256-byte aligned, on the device you
name) and handed to each framework by DLPack. Every view is the same memory; the buffer lives as
long as any view does. On a GPU, a write through one framework must be ordered before another reads
it: the frameworks queue work on different streams.
"""),
    code("""
buf = gpushare.SharedBuffer((nbytes // 4,), "float32", device)
s_torch, s_jax = buf.to("torch"), buf.to("jax")
s_torch.fill_(3.0)
if HAVE_CUDA:
    torch.cuda.synchronize()  # torch wrote on its stream; JAX reads on its own: order them first
print("jax sees", float(s_jax[0]), "| same address:", gpushare.inspect(s_jax).data_ptr == gpushare.inspect(s_torch).data_ptr)
%share s_torch ->jax --path shared
"""),
    md("""
## Sizes × paths: `%sharebench`

Each size gets a fresh array; each path is warmed up once, then timed in 5 samples of at least
5 ms each.
Small sizes show the fixed cost of a path (Python calls, a stream wait); large ones show its
bandwidth. A zero-copy path is flat.
"""),
    code("%sharebench torch->jax --sizes {sizes} --device {device}"),
    md("""
## CuPy

CuPy takes torch's memory by DLPack or by `__cuda_array_interface__`; both alias it. Its DLPack
import passes CuPy's current stream, and the producer orders its work before it with an event (no
host wait). CuPy has no CPU arrays, so without a GPU this part is skipped.
"""),
    code("""
if HAVE_CUPY:
    display(gpushare.compare(x, "cupy"))
    c = cupy.ones(nbytes // 4, dtype=cupy.float32)
    display(gpushare.compare(c, "jax"))
else:
    print("CuPy needs a CUDA GPU: skipped")
"""),
    md("""
## Choosing

- Between GPU frameworks, `dlpack` shares: microseconds at any size. Prefer it.
- Copy on purpose with `copy` (device to device) rather than `host`, which crosses PCIe twice.
- `pinned` is the way to stage through the host when you must: page-locked memory is copied by DMA
  at full PCIe speed, where pageable memory goes through the driver's own staging buffer.
- Memory several frameworks use for a long time is clearest as a `SharedBuffer`.
"""),
]


# ---------------------------------------------------------------------------------------------
# 04: memory, streams and contexts on a GPU
# ---------------------------------------------------------------------------------------------

MEMORY_GPU = [
    md("""
# Memory, streams and contexts on a GPU

Several frameworks in one process share one GPU. That works when they agree on three things:

1. **memory**: JAX claims 75 % of the GPU at its first operation unless told not to, TensorFlow nearly all of it;
2. **streams**: work queued on torch's stream must be ordered before JAX or CuPy reads it;
3. **contexts**: a pointer is valid in the CUDA context that allocated it; the frameworks all use the device's primary context.

This notebook shows each on a GPU. Without one it runs top to bottom and says what it skipped.
"""),
    code("""
import os
import torch
import jax
import jax.numpy as jnp
import gpushare
from gpushare.ledger import driver_mem_info

HAVE_CUDA = torch.cuda.is_available()
print("CUDA:", "yes" if HAVE_CUDA else "no")
"""),
    md("""
## `%gpuinfo`

Frameworks found (versions and DLPack support; GPUs and allocators only of frameworks already
imported, since asking JAX or TensorFlow about a GPU would start their runtime), the CUDA driver
and devices (ordinal, UUID, PCI bus, and the physical index when `CUDA_VISIBLE_DEVICES` remaps
it), contexts, memory, and the memory settings in force.
"""),
    code("%gpuinfo"),
    md("""
## JAX's preallocation

At its first operation JAX reserves 75 % of the GPU's memory for its own pool; torch or CuPy
allocating afterwards then runs out early. The gpushare kernel sets
`XLA_PYTHON_CLIENT_PREALLOCATE=false` (and TensorFlow's `TF_FORCE_GPU_ALLOW_GROWTH=true`) in its
kernelspec, so JAX grows on demand. The driver's free-memory figure, before and after JAX starts,
shows the difference. (Nothing above has started JAX: `%gpuinfo` never does.)
"""),
    code("""
print("XLA_PYTHON_CLIENT_PREALLOCATE =", os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE"))
JAX_GPU = False
if HAVE_CUDA:
    torch.zeros(1, device="cuda:0")  # torch creates the primary context: the driver's figures start here
    free0, total = driver_mem_info(0)
    JAX_GPU = any(d.platform == "gpu" for d in jax.devices())  # JAX starts its runtime here
    jnp.ones(1024).block_until_ready()
    free1, _ = driver_mem_info(0)
    print(f"JAX's start-up took {(free0 - free1) / 2**20:.0f} MiB of {total / 2**30:.0f} GiB; "
          f"preallocation would have taken {0.75 * total / 2**30:.0f} GiB")
else:
    print("no CUDA: nothing to preallocate")

device = "cuda:0" if JAX_GPU else "cpu"  # where the handoffs below run
n = (64 << 20) // 4 if JAX_GPU else 1024
print("handoffs below run on", device)
"""),
    md("""
## The memory ledger of a handoff

`ShareResult.memory` compares the driver's figure and each framework allocator's before and after
one handoff (the converted array still alive). A shared handoff costs nothing; a copy shows up in
the target's allocator. Here the copy is JAX narrowing torch's int64 to int32 (`jax_enable_x64` is
off). On the CPU there is no ledger: `memory` is `None`.
"""),
    code("""
x = torch.ones(n, device=device)
shared = %share x ->jax -o
shared
"""),
    code("""
i = torch.arange(n, device=device)
copied = %share i ->jax -o
copied
"""),
    code("""
for label, table in (("shared", shared), ("copied", copied)):
    memory = table[0].memory
    print(f"{label:7}", memory["summary"] if memory else "no ledger without CUDA")
"""),
    md("""
## Streams

DLPack orders work with a stream argument: the consumer passes the stream it will read on, and the
producer makes that stream wait for its own work (an event, not a host wait). `ShareResult.streams`
records what the consumer asked for. torch's own default for `__dlpack__` is `-1`, "do not
synchronise", since [pytorch#163242](https://github.com/pytorch/pytorch/pull/163242): a consumer that
relies on it reads memory torch may still be writing.
"""),
    code("""
shared[0].streams or "no stream report without CUDA"
"""),
    md("Produced on a side stream, the handoff needs a real wait:"),
    code("""
if JAX_GPU:
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        z = torch.ones(n, device=device) * 2
        r = gpushare.share(z, "jax")
    print(r.streams)
else:
    print("no CUDA: no streams")
"""),
    md("""
## The separate-context problem

torch, CuPy, Numba, JAX and TensorFlow all work in the device's *primary* context, so their
pointers are valid in each other's kernels. Code that creates its own context (PyCUDA's
`make_context`, some C++ libraries) allocates memory the frameworks do not own.
`gpushare.separate_context_report()` allocates in such a private context and hands the pointer to
each framework through `__cuda_array_interface__`: what each one did, in the driver's words. No
kernel touches that memory (a fault would poison the context).
"""),
    code("""
from gpushare.exceptions import CudaError

try:
    report = gpushare.separate_context_report(frameworks=("torch", "cupy", "jax"))
except CudaError as e:
    report = None
    print(e)
report
"""),
]


# ---------------------------------------------------------------------------------------------
# 07: TensorFlow on a GPU
# ---------------------------------------------------------------------------------------------

TF_GPU = [
    md("""
# TensorFlow on a GPU: CuPy, Numba and PyTorch in and out, with no NumPy in between

TensorFlow's DLPack differs from everyone else's in three ways, and each one breaks a raw call:

- its `from_dlpack` takes only a legacy capsule (`"dltensor"`), while CuPy 14 exports versioned
  ones;
- its `__dlpack__` refuses the CUDA stream that PyTorch and CuPy pass when they import;
- it runs its GPU work on streams of its own, which it does not expose, so neither side can make
  the other wait the DLPack way.

Numba has no DLPack at all, only `__cuda_array_interface__`, which TensorFlow does not read. This
notebook shows what gpushare does about each, on the GPU, and what TensorFlow's memory settings
do next to PyTorch's. Without a GPU that TensorFlow sees it says so and stops early.
"""),
    code(QUIET_TF + """
import os
import torch
import tensorflow as tf
import gpushare

HAVE_TF_GPU = torch.cuda.is_available() and bool(tf.config.list_physical_devices("GPU"))
try:
    import cupy
    import numba.cuda
    HAVE_CUPY = HAVE_TF_GPU and cupy.cuda.runtime.getDeviceCount() > 0
except Exception:  # not installed, or no driver
    HAVE_CUPY = False
print("TensorFlow", tf.__version__, "GPUs:", tf.config.list_physical_devices("GPU"))
print("torch", torch.__version__, "CUDA:", torch.cuda.is_available(), "| CuPy and Numba:", HAVE_CUPY)
if not HAVE_TF_GPU:
    print("TensorFlow sees no GPU here: the cells below print what they skip.")
"""),
    md("""
## CuPy → TensorFlow → CuPy

`gpushare.share` shows the verdict (the same pointer on both sides), the path `auto` chose, and
how the two sides' work was ordered. CuPy's versioned capsule is forwarded to TensorFlow as a
legacy one: the same tensor, no copy.
"""),
    code("""
if HAVE_CUPY:
    c = cupy.arange(1 << 20, dtype=cupy.float32)
    into_tf = gpushare.share(c, "tf", observe=True)
    display(into_tf)
    print("ordering:", into_tf.streams["wait"])
    back = gpushare.share(into_tf.value, "cupy", observe=True)
    display(back)
    print("ordering:", back.streams["wait"])
    c[5] = -1
    print("a write through CuPy, read by TensorFlow:", float(into_tf.value[5]))
else:
    print("skipped: needs CuPy on a GPU TensorFlow sees")
"""),
    md("""
## Numba → TensorFlow → Numba

Numba speaks only `__cuda_array_interface__`. Into TensorFlow, gpushare makes a DLPack capsule over
the Numba array's memory (the capsule keeps the array alive); out of TensorFlow, it describes the
tensor by a `__cuda_array_interface__` of its own.
"""),
    code("""
if HAVE_CUPY:
    import numpy as np
    n = numba.cuda.to_device(np.arange(1 << 20, dtype=np.float32))
    into_tf = gpushare.share(n, "tf", observe=True)
    display(into_tf)
    back = gpushare.share(into_tf.value, "numba", observe=True)
    display(back)
    print("ordering into TensorFlow:", into_tf.streams["wait"])
    print("ordering out of TensorFlow:", back.streams["wait"])
else:
    print("skipped: needs Numba on a GPU TensorFlow sees")
"""),
    md("""
## TensorFlow → PyTorch without NumPy

`torch.from_dlpack(t)` fails on a GPU tensor: PyTorch passes its stream and TensorFlow's
`__dlpack__` refuses any. gpushare hands PyTorch TensorFlow's capsule without one. That is safe
because TensorFlow's export waits for the kernels that produce the tensor before it returns: the
tensor below is exported while 200 additions are still queued, and PyTorch reads the finished
values.
"""),
    code("""
if HAVE_TF_GPU:
    with tf.device("/GPU:0"):
        t = tf.zeros([16 << 20])
        for _ in range(200):
            t = t + 1.0
    try:
        torch.from_dlpack(t)
    except Exception as e:
        print("raw torch.from_dlpack:", type(e).__name__, str(e)[:120])
    r = gpushare.share(t, "torch", observe=True)
    display(r)
    print("ordering:", r.streams["wait"])
    print("min value PyTorch reads:", r.value.min().item(), "(200 expected)")
else:
    print("skipped: TensorFlow sees no GPU")
"""),
    md("""
### The detour against the handoff, timed

`%share t ->torch --path all` times every path from TensorFlow to PyTorch: `host` is the NumPy
detour (`torch.from_numpy(t.numpy()).cuda()`), `dlpack` and `capsule` move a pointer.
"""),
    code("""
with tf.device("/GPU:0" if HAVE_TF_GPU else "/CPU:0"):
    t = tf.ones([16 << 20] if HAVE_TF_GPU else [1 << 16])
%share t ->torch --path all
"""),
    md("""
## Contexts and memory: TensorFlow next to PyTorch

Both frameworks run in the device's primary context here (`%gpuinfo` reads it from the driver),
and each allocator reports what it holds. TensorFlow without `TF_FORCE_GPU_ALLOW_GROWTH=true`
maps nearly all the GPU's memory at start; with it, TensorFlow grows as it needs. Each setting is
tried in a fresh process below, because TensorFlow reads it once.
"""),
    code("%gpuinfo"),
    code("""
import subprocess, sys
probe = '''
import os, torch, tensorflow as tf
free0, total = torch.cuda.mem_get_info()
x = tf.ones([1 << 20])
free1, _ = torch.cuda.mem_get_info()
growth = os.environ.get("TF_FORCE_GPU_ALLOW_GROWTH")
print(f"TF_FORCE_GPU_ALLOW_GROWTH={growth}: a 4 MiB tensor took {(free0 - free1) >> 20} MiB of {total >> 20} MiB from the device")
'''
if HAVE_TF_GPU:
    for growth in ("true", "false"):
        env = dict(os.environ, TF_FORCE_GPU_ALLOW_GROWTH=growth, TF_CPP_MIN_LOG_LEVEL="3")
        out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=180)
        print(out.stdout.strip() or out.stderr.strip()[-300:])
else:
    print("skipped: TensorFlow sees no GPU")
"""),
]
