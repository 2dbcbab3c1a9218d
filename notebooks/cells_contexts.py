"""The cells of notebook 09: PyCUDA's two ways into a GPU (`pycuda.autoinit`'s own context,
`pycuda.autoprimaryctx`'s primary context) handing arrays to PyTorch and TensorFlow, what each
context costs, and the claim that TensorFlow's context handle can be handed to PyCUDA.
Runs on a GPU with PyCUDA and TensorFlow; elsewhere it runs top to bottom and says what it skipped.

Every statement about contexts, sharing and memory in the outputs is gpushare's report or the
driver's answer; the markdown says what is being asked, never what the answer is."""

from __future__ import annotations

from cells_common import QUIET_TF, code, md

CONTEXT_STORY = [
    md("""
# PyCUDA and TensorFlow on one GPU: contexts, shared bytes, and what each context costs

One of the documents gpushare started from says that PyCUDA and TensorFlow on one GPU can end up in
different CUDA contexts, and that **TensorFlow's context handle can be handed to PyCUDA** to put them
in the same one. PyCUDA has two ways into a GPU:

* `import pycuda.autoinit` makes a context of PyCUDA's own (`make_default_context()`, `cuCtxCreate`);
* `import pycuda.autoprimaryctx` retains the device's *primary* context, the one PyTorch, JAX, CuPy
  and TensorFlow work in.

This notebook makes one array in each of PyCUDA's contexts and hands both to PyTorch and TensorFlow.
gpushare reports, per side, which context the memory belongs to and whether it is the primary one,
whether the bytes are shared (its verdict compares pointers), what each context costs in device
memory (the driver's free memory before and after), and whether kernels of the primary context can
really reach memory of PyCUDA's own context. The last part sets the document's claim against what
TensorFlow actually offers. Without a GPU and PyCUDA the notebook runs top to bottom and says what
it skipped.
"""),
    code(QUIET_TF + """
import importlib.util
import numpy as np
import gpushare
from gpushare import _native

driver = _native.cuda.driver_status()
HAVE_PYCUDA = importlib.util.find_spec("pycuda") is not None
HAVE_TF = importlib.util.find_spec("tensorflow") is not None
RUN = driver["available"] and HAVE_PYCUDA
print("CUDA driver:", driver["version_string"] if driver["available"] else f"no CUDA ({driver['reason']})")
print("PyCUDA:", "installed" if HAVE_PYCUDA else "not installed", "| TensorFlow:", "installed" if HAVE_TF else "not installed")
if not RUN:
    print("no CUDA or no PyCUDA here: the GPU parts below are skipped")
"""),
    md("""
## 1. PyCUDA's own context, and what it costs

`gpushare.ContextMeter` reads the device's free memory through a small context of gpushare's own,
pushed only for each reading, so measuring activates nothing and changes nobody's current context.
Each `measure` block is one row: the memory the step took and what the driver shows about this
thread's current context and the device's primary context before and after. No framework in this
process has touched the GPU yet (the first row's "before" shows what the driver had).
"""),
    code("""
if RUN:
    meter = gpushare.ContextMeter(0)
    with meter.measure("import pycuda.autoinit"):
        import pycuda.autoinit
    import pycuda.driver
    import pycuda.gpuarray as gpuarray

    a = gpuarray.to_gpu(np.arange(1 << 20, dtype=np.float32))  # 4 MiB, made in autoinit's context
    own_context = pycuda.autoinit.context.handle
    display(meter)
    display(gpushare.working_contexts(["pycuda"]))
else:
    print("skipped: no CUDA or no PyCUDA")
"""),
    md("""
## 2. The primary context, and the frameworks that join it

`import pycuda.autoprimaryctx` retains the device's primary context and pushes it on top of
autoinit's: PyCUDA's next array is made there. PyTorch and TensorFlow then start on the same device.
One more row measures a context gpushare makes with `cuCtxCreate` and destroys again, for comparison
with autoinit's.
"""),
    code("""
TF_GPU = False
if RUN:
    with meter.measure("import pycuda.autoprimaryctx"):
        import pycuda.autoprimaryctx
    b = gpuarray.to_gpu(np.arange(1 << 20, dtype=np.float32))  # 4 MiB, made in the primary context

    import torch
    with meter.measure("PyTorch's first CUDA array"):
        torch.ones(1, device="cuda:0")
        torch.cuda.synchronize()
    if HAVE_TF:
        import tensorflow as tf
        try:
            with meter.measure("TensorFlow's first GPU op"):
                TF_GPU = bool(tf.config.list_physical_devices("GPU"))
                if TF_GPU:
                    tf.zeros([1]).numpy()
        except Exception as e:  # shown, and the TensorFlow parts below skipped
            TF_GPU = False
            print("TensorFlow could not start on the GPU:", type(e).__name__, e)
        print("TensorFlow", tf.__version__, "GPU:", "yes" if TF_GPU else "no (a CPU build, or its CUDA libraries are missing)")
    meter.fresh_context()
    display(meter)
    working = gpushare.working_contexts(["pycuda", "torch"] + (["tf"] if TF_GPU else []))
    display(working)
else:
    print("skipped: no CUDA or no PyCUDA")
"""),
    md("""
## 3. Each array to PyTorch and TensorFlow

`a` lives in autoinit's context, `b` in the primary context. Each goes to PyTorch and to TensorFlow
by `gpushare.share` (PyCUDA exports only `__cuda_array_interface__`; TensorFlow imports only DLPack
capsules, so gpushare makes one over the interface). Each table's `contexts` line is the driver's
owner of the memory on either side; the verdict is `shared` only if the target's pointer is the
source's.
"""),
    code("""
results = {}
if RUN:
    for label, array in (("a (autoinit's context)", a), ("b (primary context)", b)):
        for target in ["torch"] + (["tf"] if TF_GPU else []):
            try:
                results[label, target] = r = gpushare.share(array, target)
            except gpushare.GpushareError as e:
                print(f"{label} -> {target}: {type(e).__name__}: {e}")
                continue
            display(r)
    for (label, target), r in results.items():
        d = r.to_dict()
        src, dst = d["source"]["cuda"] or {}, d["target"]["cuda"] or {}
        print(f"{label:23} -> {target:5} {d['verdict']:7} same pointer: {d['source']['data_ptr'] == d['target']['data_ptr']}; "
              f"memory's context {int(src.get('context') or 0):#x} (primary: {src.get('context_is_primary')}) "
              f"-> {int(dst.get('context') or 0):#x} (primary: {dst.get('context_is_primary')})")
else:
    print("skipped: no CUDA or no PyCUDA")
"""),
    md("""
## 4. Do the bytes really cross contexts?

gpushare's verdict compares pointers, and one process has one address space for all its contexts:
the verdict says whether the target holds the source's address, not whether a kernel of the target's
context can use it. Whether a kernel of the primary context, where PyTorch and TensorFlow run, can
read and write memory that autoinit's context allocated is the driver's business.
`gpushare.cross_context_access()` tries it in a child process (a kernel that faults would leave this
process's primary context unusable): gpushare's own kernel, in the primary context, reads and writes
memory of a context of its own, and a copy in the primary context reads it, every byte checked.
Only if that worked does the next cell write through PyTorch into `a` and read it back with PyCUDA
in autoinit's context, and let TensorFlow sum it.
"""),
    code("""
access = gpushare.cross_context_access(0) if RUN else None
access if access is not None else print("skipped: no CUDA or no PyCUDA")
"""),
    code("""
if RUN and access.kernels_share and ("a (autoinit's context)", "torch") in results:
    t = results["a (autoinit's context)", "torch"].value
    t[:4] = torch.tensor([-1.0, -2.0, -3.0, -4.0], device=t.device)  # a PyTorch kernel, primary context
    torch.cuda.synchronize()
    pycuda.autoinit.context.push()  # read back in the memory's own context
    try:
        back = a.get()[:6]
    finally:
        pycuda.driver.Context.pop()
    print("written by PyTorch, read by PyCUDA in autoinit's context:", back)
    if ("a (autoinit's context)", "tf") in results:
        x = results["a (autoinit's context)", "tf"].value
        print("summed by TensorFlow on", x.device, ":", float(tf.reduce_sum(x[:6])), "expected", float(back.sum()))
elif RUN:
    print("not tried in this process:", access.summary)
else:
    print("skipped: no CUDA or no PyCUDA")
"""),
    md("""
## 5. The claim: "hand TensorFlow's context handle to PyCUDA"

What does TensorFlow offer? The cell below lists every name in TensorFlow's public Python API that
mentions a context or CUDA, and what `tf.config.experimental.get_device_details` says about the GPU.
What does PyCUDA accept? Its `Context` objects come from `make_context`, `retain_primary_context` or
`Context.attach()` (the *current* context); the cell tries to build one from a handle. Then the
driver: which context TensorFlow's memory belongs to, which is current on this thread after
TensorFlow's first op, and which one `pycuda.autoprimaryctx` gave PyCUDA.
"""),
    code("""
import types

def public_api(module, prefix, seen):
    for name in dir(module):
        if name.startswith("_") or name == "compat":
            continue
        yield f"{prefix}.{name}"
        try:  # a lazy submodule whose package is missing (tf.keras without Keras) raises on any look
            value = getattr(module, name)
            inner = value.__name__ if issubclass(type(value), types.ModuleType) else ""
        except Exception:
            continue
        if inner.startswith("tensorflow._api.") and inner not in seen:
            seen.add(inner)
            yield from public_api(value, f"{prefix}.{name}", seen)

if HAVE_TF:
    import tensorflow as tf
    names = list(public_api(tf, "tf", set()))
    print(f"TensorFlow {tf.__version__}: {len(names)} public names; those mentioning a context or CUDA:")
    for n in names:
        if "context" in n.lower() or "cuda" in n.lower():
            print("   ", n)
    if TF_GPU:
        print("get_device_details:", tf.config.experimental.get_device_details(tf.config.list_physical_devices("GPU")[0]))
else:
    print("skipped: TensorFlow not installed")
"""),
    code("""
if RUN:
    primary = _native.cuda.primary_context(0)
    try:
        pycuda.driver.Context(primary["handle"])
        print("PyCUDA made a Context from a handle")
    except Exception as e:
        print("PyCUDA's Context from a handle:", type(e).__name__, "-", e)
    print("the device's primary context (driver):      ", hex(primary["handle"]))
    print("this thread's current context (driver):     ", _native.cuda.current_context())
    print("PyCUDA's context from pycuda.autoprimaryctx:", hex(pycuda.autoprimaryctx.context.handle),
          "= primary" if pycuda.autoprimaryctx.context.handle == primary["handle"] else "NOT the primary one")
    print("PyCUDA's context from pycuda.autoinit:      ", hex(own_context),
          "= primary" if own_context == primary["handle"] else "NOT the primary one")
    if TF_GPU:
        tf_row = working.of("tf")
        print("TensorFlow's own memory belongs to:         ", tf_row.context_text)
else:
    print("skipped: no CUDA or no PyCUDA")
"""),
    md("""
## What this run showed

Collected from the reports above (nothing here is typed in by hand).
"""),
    code("""
if RUN:
    for row in meter.rows:
        print(f"{row.label:36} took {row.taken / 2**20:+7.0f} MiB: {row.what_happened}")
    for (label, target), r in results.items():
        print(f"{label:23} -> {target:5}: {r.verdict}")
    print("cross-context access:", access.summary)
else:
    print("skipped: no CUDA or no PyCUDA")
"""),
]
