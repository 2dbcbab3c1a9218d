"""The cells of the CPU notebooks, which run anywhere and in CI: 01 (the tour) and 02 (torch ->
TensorFlow, the NumPy detour against DLPack)."""

from __future__ import annotations

from cells_common import QUIET_TF, code, md


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
on this machine is named in the grey footnote with its reason; a star marks the fastest beyond the
measured spread.
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

