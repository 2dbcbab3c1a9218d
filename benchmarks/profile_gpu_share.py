"""Where a share's time goes on a GPU: each step of the pipeline timed on its own (µs per call), next
to the raw framework calls, and a cProfile of the API's share. A diagnostic for bench_core's GPU
budgets, not a benchmark of record. Run on the GPU machine:
`python3 benchmarks/profile_gpu_share.py`."""

import cProfile
import ctypes
import os
import pstats
import statistics
import sys
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import cupy  # noqa: E402
import jax  # noqa: E402
import numba.cuda as numba_cuda  # noqa: E402
import torch  # noqa: E402

import gpushare  # noqa: E402
from gpushare import _native, api, ledger, paths, verdicts  # noqa: E402
from gpushare.adapters import framework  # noqa: E402


def us(fn, n=2000):
    for _ in range(max(20, n // 20)):
        fn()
    samples = []
    for _ in range(7):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        samples.append((time.perf_counter() - t0) / n * 1e6)
    return statistics.median(samples)


# JAX's backends start on first use and make the last GPU current; torch exports only from the
# current device: on a machine with several GPUs, start JAX first and make cuda:0 current again.
jax.devices()
torch.cuda.set_device(0)
t = torch.ones(1 << 18, device="cuda")
c = cupy.ones(1 << 18, dtype=cupy.float32)
jt = jax.dlpack.from_dlpack(t)
jt.block_until_ready()
T, J, C = framework("torch"), framework("jax"), framework("cupy")
print("exchange API on cupy.ndarray:", hasattr(type(c), "__dlpack_c_exchange_api__"),
      "on jax.Array:", hasattr(type(jt), "__dlpack_c_exchange_api__"), flush=True)

lib = ctypes.CDLL("libcuda.so.1")
ptr = ctypes.c_uint64(t.data_ptr())
attrs8 = (ctypes.c_int * 8)(1, 2, 9, 11, 12, 10, 8, 17)  # CONTEXT, MEMORY_TYPE, DEVICE_ORDINAL, RANGE_*, BUFFER_ID, IS_MANAGED, MEMPOOL
attrs3 = (ctypes.c_int * 3)(1, 2, 9)
slots = (ctypes.c_uint64 * 8)()
data8 = (ctypes.c_void_p * 8)(*[ctypes.addressof(slots) + 8 * i for i in range(8)])
ctx = ctypes.c_void_p()
state_flags, state_active = ctypes.c_uint(), ctypes.c_int()


def retain_release():
    lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0)
    lib.cuDevicePrimaryCtxRelease_v2(0)


routes = {name: paths.route(src, dst, "dlpack")[1] for name, (src, dst) in
          {"torch->cupy": (T, C), "cupy->torch": (C, T), "torch->jax": (T, J), "jax->torch": (J, T)}.items()}
rows = {
    "raw torch->cupy": lambda: cupy.from_dlpack(t),
    "raw cupy->torch": lambda: torch.from_dlpack(c),
    "raw torch->jax": lambda: jax.dlpack.from_dlpack(t),
    "raw jax->torch": lambda: torch.from_dlpack(jt),
    "share torch->cupy": lambda: gpushare.share(t, "cupy"),
    "share cupy->torch": lambda: gpushare.share(c, "torch"),
    "share torch->jax": lambda: gpushare.share(t, "jax"),
    "share jax->torch": lambda: gpushare.share(jt, "torch"),
    "raw torch->numba": lambda: numba_cuda.as_cuda_array(t),
    "share torch->numba": lambda: gpushare.share(t, "numba"),
    "share torch->numba path=cai": lambda: gpushare.share(t, "numba", path="cai"),
    "share torch->torch (pipeline, no conversion)": lambda: gpushare.share(t, "torch"),
    **{f"route {k} (guarded)": (lambda r=r, x=x: r(x)) for (k, r), x in zip(routes.items(), (t, c, t, jt))},
    **{f"route {k} inner": (lambda r=r, x=x: getattr(r, "convert", r)(x)) for (k, r), x in zip(routes.items(), (t, c, t, jt))},
    "torch.cuda.current_device()": torch.cuda.current_device,
    "describe_declared torch": lambda: _native.share.describe_declared(t, T),
    "jax adapter inspect": lambda: J.inspect(jt),
    "cupy adapter inspect": lambda: C.inspect(c),
    "cupy __dlpack__": lambda: c.__dlpack__(max_version=(1, 0)),
    "_native.cuda.pointer_attributes": lambda: _native.cuda.pointer_attributes(t.data_ptr()),
    "ctypes cuPointerGetAttributes x8": lambda: lib.cuPointerGetAttributes(8, attrs8, data8, ptr),
    "ctypes cuPointerGetAttributes x3": lambda: lib.cuPointerGetAttributes(3, attrs3, data8, ptr),
    "ctypes cuDevicePrimaryCtxGetState": lambda: lib.cuDevicePrimaryCtxGetState(0, ctypes.byref(state_flags), ctypes.byref(state_active)),
    "ctypes primary retain+release": retain_release,
    "ctypes cuCtxGetCurrent": lambda: lib.cuCtxGetCurrent(ctypes.byref(ctx)),
    "torch adapter synchronize": lambda: T.synchronize(t),
    "cupy adapter synchronize": lambda: C.synchronize(c),
    "jax adapter synchronize": lambda: J.synchronize(jt),
    "torch current_stream": lambda: T.current_stream(t),
    "share torch->jax observe": lambda: gpushare.share(t, "jax", observe=True),
    "share_chain torch->jax observe + html": lambda: api.ShareTable(gpushare.share_chain(t, ["jax"], observe=True))._repr_html_()
    if hasattr(gpushare, "share_chain") else None,
    "html of one row (observed)": (lambda r=gpushare.share(t, "jax", observe=True): api.ShareTable([r])._repr_html_()),
    "plan torch->torch identity": (lambda p=_native.share.SharePlan(T, T, "dlpack", lambda x: x, None): p.run(t)),
    "plan torch->torch identity observe": (lambda p=_native.share.SharePlan(T, T, "dlpack", lambda x: x, None, ledger.allocator_memory): p.run(t, observe=True)),
    "plan torch->jax observe": (lambda p=_native.share.SharePlan(T, J, "dlpack", jax.dlpack.from_dlpack, None, ledger.allocator_memory): p.run(t, observe=True)),
    "plan torch->jax observe, no allocators": (lambda p=_native.share.SharePlan(T, J, "dlpack", jax.dlpack.from_dlpack, None): p.run(t, observe=True)),
    "plan torch->jax": (lambda p=_native.share.SharePlan(T, J, "dlpack", jax.dlpack.from_dlpack, None): p.run(t)),
    "raw torch->jax + block_until_ready": lambda: jax.dlpack.from_dlpack(t).block_until_ready(),
    "inspect(t) (origin)": lambda: gpushare.inspect(t),
    "share_chain torch->jax observe": lambda: gpushare.share_chain(t, ["jax"], observe=True),
    "cuda_mem_info": lambda: _native.cuda.mem_info(0),
    "allocator_memory(0)": lambda: ledger.allocator_memory(0),
    **{f"probe {fw}": (lambda fw=fw: ledger.framework_memory(fw, 0)) for fw in ("torch", "jax", "cupy")},
}

# The pieces of one share cupy->torch, where each can be called alone (this wheel's API; a piece an
# older wheel lacks prints n/a, so the same script compares two wheels on one machine).
def _pieces() -> dict:
    out = {}
    try:
        out["describe cupy (declared)"] = lambda: _native.share.describe_declared(c, C)
        out["describe torch (declared)"] = lambda: _native.share.describe_declared(t, T)
    except AttributeError:
        pass
    info = C.inspect(c)
    made = verdicts.predictor(C, T, "auto")
    if made is not None:
        out["predict cupy->torch (auto)"] = lambda: made(info)
    out["api.share cupy->torch path=dlpack"] = lambda: gpushare.share(c, "torch", path="dlpack")
    plain = _native.share.SharePlan(C, T, "dlpack", torch.from_dlpack, None)
    out["plan cupy->torch, raw import as the route"] = lambda: plain.run(c)
    out["plan cupy->torch identity (no import)"] = (lambda p=_native.share.SharePlan(C, C, "dlpack", lambda x: x, None): p.run(c))
    out["cupy.cuda.get_current_stream()"] = cupy.cuda.get_current_stream
    out["torch.cuda.current_stream()"] = torch.cuda.current_stream
    return out


rows.update(_pieces())
for name, fn in rows.items():
    slow = any(w in name for w in ("observe", "html", "probe", "allocator"))
    try:
        print(f"{name:<46} {us(fn, 300 if slow else 2000):9.2f} µs", flush=True)
    except Exception as e:  # a piece this wheel does not have
        print(f"{name:<46} n/a ({type(e).__name__}: {str(e)[:60]})", flush=True)

# A JAX array fresh from DLPack (as a share's target is): what each attribute the Rust description
# reads costs on it, over the import and the wait for it.
fresh = lambda: jax.dlpack.from_dlpack(t)  # noqa: E731
base = us(lambda: fresh().block_until_ready(), 1000)
print(f"{'fresh jax: import + block_until_ready':<46} {base:9.2f} µs")
for attr, read in {
    "is_deleted()": lambda a: a.is_deleted(),
    "sharding": lambda a: a.sharding,
    "sharding._device": lambda a: a.sharding._device,
    "device": lambda a: a.device,
    "_pjrt_layout": lambda a: a._pjrt_layout,
    "dtype": lambda a: a.dtype,
    "shape": lambda a: a.shape,
    "unsafe_buffer_pointer()": lambda a: a.unsafe_buffer_pointer(),
    "jax adapter inspect": J.inspect,
}.items():
    cost = us(lambda read=read: read(fresh().block_until_ready()), 1000) - base
    print(f"{'fresh jax: + ' + attr:<46} {cost:9.2f} µs", flush=True)

for label in ("share torch->numba", "share jax->torch", "share torch->jax", "share torch->cupy", "share cupy->torch",
              "share_chain torch->jax observe + html"):
    fn = rows[label]
    print(f"\n=== cProfile: {label}", flush=True)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(2000 if "observe" not in label else 300):
        fn()
    prof.disable()
    pstats.Stats(prof, stream=sys.stdout).sort_stats("tottime").print_stats(25)
    pstats.Stats(prof, stream=sys.stdout).sort_stats("cumulative").print_stats(25)
