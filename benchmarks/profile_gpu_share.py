"""Where a share's time goes on a GPU: each step of the pipeline timed on its own (µs per call), next
to the raw framework call. A diagnostic for bench_core's GPU budgets, not a benchmark of record."""

import os
import statistics
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import warnings  # noqa: E402

import cupy  # noqa: E402
import jax  # noqa: E402
import torch  # noqa: E402

import gpushare  # noqa: E402
from gpushare import _native, api, ledger, verdicts  # noqa: E402
from gpushare.adapters import framework  # noqa: E402


def us(fn, n=2000):
    for _ in range(50):
        fn()
    samples = []
    for _ in range(7):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        samples.append((time.perf_counter() - t0) / n * 1e6)
    return statistics.median(samples)


t = torch.ones(1 << 18, device="cuda")
c = cupy.ones(1 << 18, dtype=cupy.float32)
jt = jax.dlpack.from_dlpack(t)
T, J, C = framework("torch"), framework("jax"), framework("cupy")
ident = lambda x: x  # noqa: E731
cupy_import = cupy.from_dlpack
plans = {
    "plan torch->torch identity, no prediction": _native.SharePlan(T, T, "dlpack", ident, None),
    "plan torch->torch identity, prediction": _native.SharePlan(T, T, "dlpack", ident, verdicts.predictor(T, T, "dlpack")),
    "plan torch->cupy, no prediction": _native.SharePlan(T, C, "dlpack", cupy_import, None),
    "plan torch->cupy, prediction": _native.SharePlan(T, C, "dlpack", cupy_import, verdicts.predictor(T, C, "dlpack")),
}
rows = {
    "raw torch->jax": lambda: jax.dlpack.from_dlpack(t),
    "raw torch->cupy": lambda: cupy.from_dlpack(t),
    "inspect_torch": lambda: _native.inspect_torch(t),
    "jax adapter inspect": lambda: J.inspect(jt),
    "cupy adapter inspect": lambda: C.inspect(c),
    "cupy __dlpack__": lambda: c.__dlpack__(max_version=(1, 0)),
    "cuda_pointer_attributes": lambda: _native.cuda_pointer_attributes(t.data_ptr()),
    **{name: (lambda p=p: p.run(t)) for name, p in plans.items()},
    "plan torch->jax, no prediction": (lambda p=_native.SharePlan(T, J, "dlpack", jax.dlpack.from_dlpack, None): p.run(t)),
    "raw torch->jax + unsafe_buffer_pointer": lambda: jax.dlpack.from_dlpack(t).unsafe_buffer_pointer(),
    "raw torch->jax + jax inspect": lambda: J.inspect(jax.dlpack.from_dlpack(t)),
    "raw jax->torch": lambda: torch.from_dlpack(jt),
    "share jax->torch": lambda: gpushare.share(jt, "torch"),
    "share torch->cupy": lambda: gpushare.share(t, "cupy"),
    "share torch->jax": lambda: gpushare.share(t, "jax"),
    "share torch->jax observe": lambda: gpushare.share(t, "jax", observe=True),
    "cuda_mem_info": lambda: _native.cuda_mem_info(0),
    **{f"probe {fw}": (lambda fw=fw: ledger.framework_memory(fw, 0)) for fw in ("torch", "jax", "cupy")},
    "torch sync": lambda: torch.cuda.synchronize(t.device),
    "html of one row": lambda: api.ShareTable([gpushare.share(t, "jax")])._repr_html_(),
}

for name, fn in rows.items():
    print(f"{name:<44} {us(fn, 300 if 'observe' in name or 'html' in name or 'probe' in name else 2000):9.2f} µs", flush=True)
