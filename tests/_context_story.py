"""Notebook 09's story in a process of its own, for tests/test_contexts_gpu.py: PyCUDA's own context
(``pycuda.autoinit``) and the primary context (``pycuda.autoprimaryctx``) each make an array that goes
to PyTorch (and TensorFlow where it has a GPU), with what each context costs. It must start in a fresh
process: the primary context's cost is measured when it is activated, which any framework started
before (JAX by the other GPU suites) would already have done.

Prints one line, ``STORY <json>``, of gpushare's reports; the test asserts on them."""

from __future__ import annotations

import importlib.util
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_FORCE_GPU_ALLOW_GROWTH", "true")

import numpy as np  # noqa: E402

import gpushare  # noqa: E402
from gpushare import _native  # noqa: E402


def main() -> None:
    out: dict = {"primary_at_start": _native.cuda.primary_context(0)}
    meter = gpushare.ContextMeter(0)
    out["meter_context"] = meter.context

    with meter.measure("import pycuda.autoinit"):
        import pycuda.autoinit
    import pycuda.driver
    import pycuda.gpuarray as gpuarray

    out["own_handle"] = int(pycuda.autoinit.context.handle)
    out["current_after_autoinit"] = _native.cuda.current_context()
    a = gpuarray.to_gpu(np.arange(1 << 16, dtype=np.float32))
    out["working_under_autoinit"] = gpushare.working_contexts(["pycuda"]).to_dict()

    with meter.measure("import pycuda.autoprimaryctx"):
        import pycuda.autoprimaryctx
    out["primary_handle_of_pycuda"] = int(pycuda.autoprimaryctx.context.handle)
    out["current_after_autoprimaryctx"] = _native.cuda.current_context()
    b = gpuarray.to_gpu(np.arange(1 << 16, dtype=np.float32))

    import torch

    with meter.measure("torch's first CUDA array"):
        torch.ones(1, device="cuda:0")
        torch.cuda.synchronize()
    tf_gpu = False
    if importlib.util.find_spec("tensorflow") is not None:
        import tensorflow as tf

        with meter.measure("TensorFlow's first GPU op"):
            tf_gpu = bool(tf.config.list_physical_devices("GPU"))
            if tf_gpu:
                tf.zeros([1]).numpy()
    out["tf_gpu"] = tf_gpu
    meter.fresh_context()
    out["costs"] = meter.to_dict()["rows"]
    targets = ["torch"] + (["tf"] if tf_gpu else [])
    out["working"] = gpushare.working_contexts(["pycuda", *targets]).to_dict()
    out["primary"] = _native.cuda.primary_context(0)

    shares, values = {}, {}
    for label, array in (("own", a), ("primary", b)):
        for target in targets:
            try:
                r = gpushare.share(array, target)
            except Exception as e:  # recorded: the test says which handoff failed and why
                shares[f"{label}->{target}"] = {"verdict": "raised", "reason": f"{type(e).__name__}: {e}"}
                continue
            shares[f"{label}->{target}"] = r.to_dict()
            values[f"{label}->{target}"] = r.value
    out["shares"] = shares

    access = gpushare.cross_context_access(0)
    out["access"] = access.to_dict()
    if access.kernels_share and "own->torch" in values:
        t = values["own->torch"]
        t[:4] = torch.tensor([-1.0, -2.0, -3.0, -4.0], device=t.device)
        torch.cuda.synchronize()
        pycuda.autoinit.context.push()  # read back in the memory's own context
        try:
            out["pycuda_reads_after_torch_wrote"] = a.get()[:4].tolist()
        finally:
            pycuda.driver.Context.pop()
    print("STORY " + json.dumps(out, default=str), flush=True)


if __name__ == "__main__":
    main()
    sys.exit(0)
