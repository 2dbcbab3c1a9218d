"""What TensorFlow's GPU build does at the DLPack seam, measured on a GPU.

Run after `source scripts/gpu_tf_env.sh` (scripts/gpu_run.sh does it when WITH_TF is set):
`python3 -m tools.tf_gpu_seam`. It prints facts, not verdicts: how long to_dlpack waits for pending
TensorFlow work, whether a consumer on another stream can read a TensorFlow result before
TensorFlow wrote it, which capsule each producer hands over, what TensorFlow's memory settings do,
and how every pair with tf fares through gpushare (tracebacks in full for anything that is not a
gpushare error).
"""
from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import time
import traceback

RESULTS: dict = {}


def capsule_name(cap) -> str:
    get = ctypes.pythonapi.PyCapsule_GetName
    get.restype, get.argtypes = ctypes.c_char_p, [ctypes.py_object]
    return get(cap).decode()


def section(title: str) -> None:
    print(f"\n--- {title}", flush=True)


def readiness(tf, torch) -> None:
    """A chain of TensorFlow ops on 256 MiB is queued, then exported at once: does to_dlpack wait?"""
    section("to_dlpack and pending TensorFlow work")
    n, steps = 64 << 20, 400
    for trial in range(3):
        with tf.device("/GPU:0"):
            y = tf.zeros([n])
            tf.test.experimental.sync_devices()
            t0 = time.perf_counter()
            for _ in range(steps):
                y = y + 1.0
            t_enqueue = time.perf_counter() - t0
            cap = tf.experimental.dlpack.to_dlpack(y)
            t_export = time.perf_counter() - t0 - t_enqueue
        t = torch.utils.dlpack.from_dlpack(cap)
        low = t.min().item()  # torch's stream, no ordering with TensorFlow's
        tf.test.experimental.sync_devices()
        t_done = time.perf_counter() - t0
        after = t.min().item()
        row = dict(enqueue_ms=t_enqueue * 1e3, export_ms=t_export * 1e3, total_ms=t_done * 1e3,
                   torch_min_at_once=low, torch_min_after_sync=after, expected=float(steps))
        RESULTS.setdefault("readiness", []).append(row)
        print(json.dumps(row), flush=True)
    # The cost of waiting for TensorFlow when it is idle.
    with tf.device("/GPU:0"):
        x = tf.ones([1024])
    tf.test.experimental.sync_devices()
    for label, fn in (("sync_devices", tf.test.experimental.sync_devices),):
        t0 = time.perf_counter()
        for _ in range(200):
            fn()
        RESULTS[f"{label}_idle_us"] = (time.perf_counter() - t0) / 200 * 1e6
        print(label, "idle", round(RESULTS[f"{label}_idle_us"], 1), "µs", flush=True)
    try:
        from tensorflow.python.ops import gen_sync_ops

        with tf.device(x.device):
            t0 = time.perf_counter()
            for _ in range(200):
                gen_sync_ops.SyncDevice()
            RESULTS["SyncDevice_idle_us"] = (time.perf_counter() - t0) / 200 * 1e6
        print("SyncDevice (one device) idle", round(RESULTS["SyncDevice_idle_us"], 1), "µs", flush=True)
    except Exception as e:
        print("gen_sync_ops.SyncDevice:", type(e).__name__, e)


def capsules(tf, torch, jax, cupy) -> None:
    section("capsules each producer hands over")
    import jax.numpy as jnp

    arrays = {"torch": torch.ones(4, device="cuda"), "jax": jnp.ones(4), "cupy": cupy.ones(4)}
    with tf.device("/GPU:0"):
        arrays["tf"] = tf.ones([4])
    for name, a in arrays.items():
        for label, call in (
            ("__dlpack__()", lambda a=a: a.__dlpack__()),
            ("__dlpack__(max_version=(1,0))", lambda a=a: a.__dlpack__(max_version=(1, 0))),
            ("__dlpack__(max_version=(0,8))", lambda a=a: a.__dlpack__(max_version=(0, 8))),
            ("__dlpack__(stream=None)", lambda a=a: a.__dlpack__(stream=None)),
            ("toDlpack()", lambda a=a: a.toDlpack()),
        ):
            try:
                print(f"{name:6} {label:32} -> {capsule_name(call())}")
            except Exception as e:
                print(f"{name:6} {label:32} !! {type(e).__name__}: {str(e)[:160]}")
        try:
            print(f"{name:6} __dlpack_device__() -> {a.__dlpack_device__()}")
        except Exception as e:
            print(f"{name:6} __dlpack_device__ !! {type(e).__name__}: {e}")
    section("raw imports into TensorFlow")
    for name, a in arrays.items():
        if name == "tf":
            continue
        for label, call in (("__dlpack__()", lambda a=a: a.__dlpack__()), ("toDlpack()", lambda a=a: a.toDlpack())):
            try:
                t = tf.experimental.dlpack.from_dlpack(call())
                print(f"{name}->tf via {label}: ok on {t.device}")
            except Exception as e:
                print(f"{name}->tf via {label}: {type(e).__name__}: {str(e)[:200]}")
                if isinstance(e, KeyError):
                    traceback.print_exc()
    section("raw TensorFlow into consumers, legacy capsule")
    with tf.device("/GPU:0"):
        t = tf.range(8, dtype=tf.float32)
    for name, imp in (("torch", torch.utils.dlpack.from_dlpack), ("cupy", cupy.from_dlpack), ("jax", jax.dlpack.from_dlpack)):
        try:
            out = imp(tf.experimental.dlpack.to_dlpack(t))
            print(f"tf->{name} capsule: ok {type(out).__name__}")
        except Exception as e:
            print(f"tf->{name} capsule: {type(e).__name__}: {str(e)[:200]}")


def contexts_and_memory(tf) -> None:
    section("TensorFlow's context and memory")
    cuda = ctypes.CDLL("libcuda.so.1")
    ctx, primary, dev = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_int()
    cuda.cuCtxGetCurrent(ctypes.byref(ctx))
    cuda.cuDeviceGet(ctypes.byref(dev), 0)
    cuda.cuDevicePrimaryCtxRetain(ctypes.byref(primary), dev)
    cuda.cuDevicePrimaryCtxRelease(dev)
    print("current context after TF ops:", hex(ctx.value or 0), "primary:", hex(primary.value or 0))
    print("tf memory info GPU:0", tf.config.experimental.get_memory_info("GPU:0"))
    code = (
        "import os, tensorflow as tf, torch;"
        "free0,total=torch.cuda.mem_get_info();"
        "x=tf.ones([1<<20]) ;"
        "free1,_=torch.cuda.mem_get_info();"
        "print('growth', os.environ.get('TF_FORCE_GPU_ALLOW_GROWTH'), 'TF took', (free0-free1)>>20, 'MiB of', total>>20, 'for a 4 MiB tensor', tf.config.experimental.get_memory_info('GPU:0'))"
    )
    for growth in ("true", "false"):
        env = dict(os.environ, TF_FORCE_GPU_ALLOW_GROWTH=growth)
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
        print(r.stdout.strip() or r.stderr.strip()[-600:])


def pairs() -> None:
    section("every pair with tf through gpushare (auto, capsule, dlpack)")
    import cupy
    import jax.numpy as jnp
    import numba.cuda
    import tensorflow as tf
    import torch

    import gpushare

    with tf.device("/GPU:0"):
        tft = tf.range(1 << 18, dtype=tf.float32)
    sources = {
        "tf": tft,
        "torch": torch.arange(1 << 18, dtype=torch.float32, device="cuda"),
        "jax": jnp.arange(1 << 18, dtype=jnp.float32),
        "cupy": cupy.arange(1 << 18, dtype=cupy.float32),
        "numba": numba.cuda.to_device(__import__("numpy").arange(1 << 18, dtype="float32")),
    }
    for src, arr in sources.items():
        targets = ["torch", "jax", "cupy", "numba"] if src == "tf" else ["tf"]
        for dst in targets:
            for path in ("auto", "capsule", "dlpack", "cai"):
                try:
                    r = gpushare.share(arr, dst, path=path)
                    print(f"{src}->{dst} {path}: {r.verdict} ({r.path}) ptr {r.source.data_ptr:#x}->{r.target.data_ptr:#x} predicted={getattr(r.prediction, 'verdict', r.prediction)} "
                          f"reason={r.reason!r} streams={getattr(r, 'streams', None)}")
                except gpushare.GpushareError as e:
                    print(f"{src}->{dst} {path}: {type(e).__name__}: {str(e)[:240]}")
                except Exception:
                    print(f"{src}->{dst} {path}: NOT A GPUSHARE ERROR")
                    traceback.print_exc()


def import_order() -> None:
    """TensorFlow's CUDA 12 runtime beside JAX's CUDA 13 one: does the import order matter?"""
    section("import order: TensorFlow first, then JAX")
    code = "import tensorflow, jax; print('jax devices with TF imported first:', jax.devices())"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180)
    print(r.stdout.strip())
    print("\n".join(line for line in r.stderr.splitlines() if "jax" in line.lower() or "cuda" in line.lower())[-1500:])


def main() -> None:
    import jax

    jax.devices()  # before TensorFlow: see import_order()
    import tensorflow as tf
    import torch

    print("tf", tf.__version__, tf.config.list_physical_devices("GPU"), tf.sysconfig.get_build_info().get("cuda_version"))
    import cupy
    import jax

    torch.ones(1, device="cuda")
    readiness(tf, torch)
    capsules(tf, torch, jax, cupy)
    contexts_and_memory(tf)
    import_order()
    pairs()
    out = os.environ.get("OUT")
    if out:
        with open(os.path.join(out, "tf_gpu_seam.json"), "w") as f:
            json.dump(RESULTS, f, indent=1)


if __name__ == "__main__":
    main()
