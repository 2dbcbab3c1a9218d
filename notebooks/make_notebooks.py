"""Writes the demo notebooks of gpushare from the cell lists below, so that they are reviewed as code.

    python notebooks/make_notebooks.py           # (re)write notebooks/*.ipynb, unexecuted
    python notebooks/make_notebooks.py --check   # exit 1 if a committed notebook differs

The notebooks are nbformat 4.5 with stable cell ids (``<notebook>-<nn>``), no outputs and the
``gpushare`` kernelspec, so regenerating them gives byte-identical files and a diff shows only what
a cell list changed. Run them with ``gpushare run notebooks/01_tour_cpu.ipynb -o out/``.

Conventions: a cell that is meant to fail is tagged ``raises-exception`` (``gpushare run``,
nbclient and nbmake go on after it); the cell of notebook parameters is tagged ``parameters``
(``gpushare run -p size=4096``, papermill).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent

KERNELSPEC = {"name": "gpushare", "display_name": "Python (gpushare)", "language": "python"}


def md(text: str) -> tuple[str, str, tuple[str, ...]]:
    return ("markdown", text.strip("\n"), ())


def code(text: str, *tags: str) -> tuple[str, str, tuple[str, ...]]:
    return ("code", text.strip("\n"), tags)


# Every notebook starts its imports with these two lines: TensorFlow's C++ start-up messages go to
# the process's stderr, which the kernel forwards into whichever cell is running at the time.
QUIET_TF = """\
import os
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")   # TensorFlow: no C++ log lines at import
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")  # ... and no oneDNN notice"""


# ---------------------------------------------------------------------------------------------
# 01: the tour, on CPU
# ---------------------------------------------------------------------------------------------

TOUR = [
    md("""
# A tour of gpushare (CPU)

Arrays move between frameworks through [DLPack](https://dmlc.github.io/dlpack/latest/): the
consumer gets a pointer to the producer's memory, and either keeps it (the memory is **shared**) or
**copies** it, silently. gpushare shows which one happened, decided from addresses and extents (never
from the absence of an exception), and why.

This notebook runs on any machine in well under a minute: PyTorch, JAX, TensorFlow and NumPy on
the CPU. It covers

1. sharing a cell's arrays (`%%share`), one variable (`%share`) and a chain of hops;
2. proof by writing: one write through torch, seen through every other framework;
3. the three reasons a CPU handoff copies, each named in its row;
4. every transfer path for one array (`--path all`), and a sweep of sizes with its plot (`%sharebench`);
5. two failures explained, one refused before it could crash the kernel;
6. `gpushare.inspect` and the result objects.
"""),
    md("""
The **Python (gpushare)** kernel loads the extension at start-up; in any other IPython kernel
`%load_ext gpushare` turns it on, which the cell below does only where it is needed. Loading imports
no framework: gpushare finds frameworks through `sys.modules` and the type of the array at hand.
"""),
    code("""
if "gpushare" not in get_ipython().extension_manager.loaded:
    %load_ext gpushare
import sys
[m for m in ("torch", "jax", "tensorflow") if m in sys.modules]
"""),
    code(QUIET_TF + """
import numpy as np
import torch
import jax
import jax.numpy as jnp
import tensorflow as tf
import gpushare
"""),
    md("""
## A cell's arrays: `%%share torch->tf`

`%%share SRC->DST` runs the cell, converts every `SRC` array the cell bound (anywhere in it: inside
`with`, `if` or `for` too), and binds each result as `NAME_DST`. Nothing is bound unless every conversion worked. One row per variable:
shape, dtype, each side's device in the framework's own words, both data pointers, the verdict, the
time of the handoff and, when it copied, why. (A single handoff's time includes one-time costs,
such as the first use of a framework pair: `-r 20` gives a median.)

Into TensorFlow the only way is the legacy capsule (`tf.experimental.dlpack.from_dlpack` takes
nothing else), so the path is `capsule`.
"""),
    code("""
%%share torch->tf
x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
w = torch.randn(256, 256)
"""),
    md("""
## One variable: `%share x ->jax`

The line form converts one variable. Leave the source out and gpushare infers it from the
variable; write it (`%share x torch->jax`) and gpushare checks it. JAX takes any object with
`__dlpack__`, so the path is `dlpack`.
"""),
    code("%share x ->jax"),
    md("""
## A chain: identity across every hop

`%share y torch->jax->tf` hands `y` to JAX, then JAX's array to TensorFlow. Each hop is a row and
binds `y_jax`, `y_tf`. A hop that shares its input but not the *first* source's memory would say
`shared (not origin)`; here both hops keep torch's address.
"""),
    code("""
y = torch.linspace(0, 1, 8)
%share y torch->jax->tf
"""),
    md("""
## Proof by writing

Equal pointers are evidence; a write is proof. One write through torch, read back through every
other framework. (JAX promises its arrays never change: writing under its feet is undefined
behaviour in real code. Here it is the experiment.)
"""),
    code("""
x[0, 0] = 42.0
y[0] = -1.0
print("x[0, 0] via torch:", x[0, 0].item(), "| tf:", x_tf[0, 0].numpy(), "| jax:", x_jax[0, 0].item())
print("y[0]    via torch:", y[0].item(), "| jax:", y_jax[0].item(), "| tf (through jax):", y_tf[0].numpy())
"""),
    md("""
## Why copies happen

On the CPU a DLPack handoff is normally free. Three things make it copy, or share with a catch.

### 1. JAX narrows 64-bit types

torch's default integer type is `int64`. With `jax_enable_x64` off (JAX's default), JAX turns
int64, uint64, float64 and complex128 into a **new 32-bit buffer** after import
([jax#11895](https://github.com/jax-ml/jax/issues/11895)): the dtype column shows `int64→int32`.
"""),
    code("""
i = torch.arange(5)
%share i ->jax
"""),
    md("""
The fix is the one the row names. `jax_enable_x64` is global and best set once at start-up; it is
switched on and off here only to show the difference.
"""),
    code("""
jax.config.update("jax_enable_x64", True)
%share i ->jax
jax.config.update("jax_enable_x64", False)
"""),
    md("""
### 2. XLA's CPU client wants 64-byte alignment

JAX on the CPU shares a buffer only if its address is a multiple of 64; otherwise it copies
silently. torch allocates 64-byte-aligned memory; NumPy's `malloc` often gives 16. So numpy→jax
may copy where torch→jax shares. `floats_at` places an array at a chosen distance from a 64-byte
boundary, so the outcome below does not depend on the allocator's luck.
"""),
    code('''
def floats_at(offset, n=256):
    """n float32 in fresh memory, starting `offset` bytes past a 64-byte boundary."""
    raw = np.zeros(4 * n + 64, dtype=np.uint8)
    start = -raw.ctypes.data % 64 + offset
    return raw[start:start + 4 * n].view(np.float32)
'''),
    code("""
%%share numpy->jax
aligned = floats_at(0)
misaligned = floats_at(16)
"""),
    md("""
### 3. Read-only memory: shared, with a warning

NumPy marks memory read-only; torch has no read-only tensors and ignores the flag. The handoff
shares, and the torch tensor can write to memory NumPy promised nobody would. gpushare shares it,
and warns (`GpushareWarning`, a `UserWarning`).
"""),
    code("""
ro = np.arange(6, dtype=np.float32)
ro.flags.writeable = False
%share ro ->torch
"""),
    md("""
## Every path for one array: `--path all`

`%share w ->jax --path all` hands `w` to JAX by every transfer path gpushare knows and times each:
DLPack (`auto`'s choice here), the legacy capsule, the CUDA array interface, the host round trip
through NumPy, pinned memory, gpushare's own copy and a `SharedBuffer`. A path that does not apply
on this machine is a row with the reason; a star marks the fastest beyond the measured spread.
"""),
    code("%share w ->jax --path all"),
    md("""
## A sweep: `%sharebench`

`%sharebench SRC->DST` makes arrays of each size and hands every one over by every path: a table of
median times (the fastest at each size starred), a table of bandwidths, and a plot of both against
size. The sizes here are small, to keep the tour fast on a CPU; the default sweep goes to 256 MiB.
"""),
    code("%sharebench torch->jax --sizes 4KiB,256KiB,4MiB -r 3"),
    md("""
## When a conversion fails, gpushare says why

A failed conversion raises (so a notebook run fails where it should), leaves the namespace as it
was, and explains in one message: the reason, the framework's own words and the fix. The two cells
below are meant to fail; they are tagged `raises-exception`, which `gpushare run`, nbclient and
nbmake accept.

### Negative strides into torch: refused before torch is called

`torch.from_dlpack` on an array with negative strides **aborted the process** in torch 2.12
([pytorch#188023](https://github.com/pytorch/pytorch/issues/188023)). gpushare refuses such input
before torch sees it, so the kernel lives.
"""),
    code("""
rev = np.arange(10.0)[::-1]
%share rev ->torch
""", "raises-exception"),
    md("The fix costs one visible copy:"),
    code("""
rev_c = np.ascontiguousarray(rev)
%share rev_c ->torch
"""),
    md("""
### A transposed tensor into TensorFlow

TensorFlow takes only compact row-major memory (`Invalid strides array from DLPack`). JAX would
take this transpose, torch and NumPy any non-negative strides.
"""),
    code("""
t = torch.arange(6.0).reshape(2, 3).T
%share t ->tf
""", "raises-exception"),
    md("""
The error is an object too: `ConversionError` carries `.reason`, `.fix` and `.framework_error`.
"""),
    code("""
from gpushare.exceptions import ConversionError

try:
    gpushare.share(t, "tf")
except ConversionError as e:
    print("reason:         ", e.reason)
    print("fix:            ", e.fix)
    print("framework said: ", e.framework_error)
"""),
    code("""
t_c = t.contiguous()
%share t_c ->tf
"""),
    md("""
## `gpushare.inspect`: what an array is

Everything DLPack says about an array, read from a capsule without consuming it: dtype, shape,
strides in elements, device, address, bytes spanned, contiguity, alignment, read-only flag, and on
a GPU the CUDA driver's view of the pointer. The transpose `t` is not contiguous; `misaligned` is
16-byte aligned, which is why JAX copied it.
"""),
    code("gpushare.inspect(t)"),
    code("gpushare.inspect(misaligned)"),
    md("""
## Results are objects

`-o` returns the table instead of showing it: a `ShareTable` of `ShareResult`s, indexable by
position or variable name. Raw seconds and bytes stay in the data; `.to_dict()`, `.to_pandas()` and
the JSON form (`application/vnd.gpushare+json`) carry every field. `-r 20` takes 20 timing samples.
"""),
    code("""
res = %share x ->jax -r 20 -o
r = res["x"]
print(r.verdict, r.path, f"median {r.timing.median * 1e6:.1f} µs over {len(r.timing.samples)} samples")
"""),
    code("""
res.to_pandas()[["name", "verdict", "source_data_ptr", "target_data_ptr", "median_s", "min_s"]]
"""),
]


# ---------------------------------------------------------------------------------------------
# 02: torch -> TensorFlow, the NumPy detour against DLPack
# ---------------------------------------------------------------------------------------------

TORCH_TO_TF = [
    md("""
# PyTorch → TensorFlow: the NumPy detour or DLPack

The line people write first is

```python
tf.constant(x.cpu().numpy())
```

It always copies: once on the CPU, and on a GPU at least twice (device → host → device, through
pageable memory). TensorFlow's DLPack import takes torch's memory as it is:

```python
tf.experimental.dlpack.from_dlpack(torch.utils.dlpack.to_dlpack(x))
```

gpushare calls these the `host` and `capsule` paths. This notebook times both on the device you
have: the CPU here, a GPU where TensorFlow sees one.
"""),
    md("""
Parameters (`gpushare run 02_torch_to_tensorflow.ipynb -p size=4096`): `size` is the side of a
square float32 matrix (1024 → 4 MiB); `device` is `"cpu"`, `"cuda"` or `"auto"` (a GPU when both
torch and TensorFlow see one); `repeat` is the number of timing samples per path.
"""),
    code("""
size = 1024
device = "auto"
repeat = 20
""", "parameters"),
    code(QUIET_TF + """
import torch
import tensorflow as tf
import gpushare

if device == "auto":
    device = "cuda" if torch.cuda.is_available() and tf.config.list_physical_devices("GPU") else "cpu"
bench_device = "cuda:0" if device == "cuda" else "cpu"
x = torch.randn(size, size, device=device)
print(f"x: {tuple(x.shape)} float32 on {x.device}, {x.nbytes / 2**20:g} MiB")
"""),
    md("""
## The detour, by hand

Its result lives at a different address: the data was copied (`gpushare.inspect` reads the
address through DLPack, for any framework).
"""),
    code("""
naive = tf.constant(x.cpu().numpy())
print("same memory as x:", gpushare.inspect(naive).data_ptr == gpushare.inspect(x).data_ptr)
"""),
    md("""
## Every path, timed

`%share x ->tf --path all` tries every transfer path that could apply, times each (`-r` samples,
synchronising both sides around every handoff, so a GPU time is the whole handoff and not only its
launch), and lists them side by side with the fastest starred. `host` is the detour above;
`capsule` is DLPack. A path that does not apply here is a row with its reason, not a gap:
`dlpack` (TensorFlow takes only capsules), `cai` and `pinned` (CUDA only), `shared` (needs a
`gpushare.SharedBuffer`).
"""),
    code("""
paths = %share x ->tf --path all -r {repeat} -o
paths
"""),
    md("""
The rows are data (`paths["host"]`, `paths.to_pandas()`), with raw seconds and bytes:
"""),
    code("""
host, capsule = paths["host"], paths["capsule"]
h, c = host["timing"]["median"], capsule["timing"]["median"]
print(f"{x.nbytes / 2**20:g} MiB on {device}: host {h * 1e3:.3f} ms ({host['bytes_moved']} bytes copied), "
      f"capsule {c * 1e3:.3f} ms ({capsule['bytes_moved']} bytes copied): DLPack is {h / c:.0f}x faster")
"""),
    md("""
On a GPU, TensorFlow's import takes no stream and runs on streams of its own: by hand, synchronise
the producer first (`torch.cuda.current_stream().synchronize()`). gpushare waits for torch's
queued work before every handoff into TensorFlow, and its stream report says so.
"""),
    md("""
## Across sizes

The capsule handoff costs the same at every size: it moves a pointer. The detour grows with the
bytes. `%sharebench` sweeps sizes × paths, with a table and a plot.
"""),
    code("%sharebench torch->tf --sizes 4KiB,1MiB,16MiB --paths capsule,host --device {bench_device}"),
    md("""
## Choosing

- Use DLPack (`capsule` into TensorFlow). It is free of copies on the CPU and on the GPU.
- On a GPU, synchronise the producer's stream first: TensorFlow's import does not (gpushare does).
- TensorFlow refuses non-row-major layouts: call `.contiguous()` first, and pay that copy knowingly.
- The detour is only right when the data must pass through the host anyway.
"""),
]


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
status = gpushare._native.cuda_driver_status()
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


# 06: across processes (issue 14)
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
NCCL (two GPUs), NCCL over sockets (the stand-in for two hosts) and gloo. A path that does not apply
is a row with the reason.
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
    print("fewer than 2 GPUs: the NCCL rows above carry the reason")
"""),
    code("""
pid = w.pid
w.stop()
print("worker", pid, "stopped:", not w.alive)
"""),
]


NOTEBOOKS = {
    "01_tour_cpu": TOUR,
    "02_torch_to_tensorflow": TORCH_TO_TF,
    "03_transfer_paths_gpu": PATHS_GPU,
    "04_memory_and_contexts_gpu": MEMORY_GPU,
    "05_several_gpus": SEVERAL_GPUS,
    "06_processes": PROCESSES,
    "07_tensorflow_gpu": TF_GPU,
}


def build(stem: str, cells: list) -> nbformat.NotebookNode:
    nb = new_notebook()
    nb.nbformat, nb.nbformat_minor = 4, 5
    nb.metadata = {
        "kernelspec": dict(KERNELSPEC),
        "language_info": {"name": "python"},
    }
    for index, (kind, source, tags) in enumerate(cells):
        cell = new_markdown_cell(source) if kind == "markdown" else new_code_cell(source)
        cell.id = f"{stem.split('_')[0]}-{index:02d}"
        if tags:
            cell.metadata["tags"] = list(tags)
        nb.cells.append(cell)
    nbformat.validate(nb)
    return nb


def render(nb: nbformat.NotebookNode) -> str:
    return nbformat.writes(nb) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if a notebook on disk differs")
    parser.add_argument("--out", type=Path, default=HERE, help="directory to write (default: here)")
    args = parser.parse_args(argv)
    stale = []
    for stem, cells in NOTEBOOKS.items():
        path = args.out / f"{stem}.ipynb"
        text = render(build(stem, cells))
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(path.name)
        else:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path}")
    if stale:
        print(f"out of date (run python notebooks/make_notebooks.py): {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
