"""The conformance matrix: every ordered pair of frameworks × dtypes × layouts, converted for real
with :func:`gpushare.share`, each outcome (shared, copied, failed) checked against the prediction
that gpushare made before converting.

Run it to regenerate the compatibility table users read::

    python -m gpushare.conformance [--json cells.json]          # writes docs/compatibility.md
    python -m gpushare.conformance --device cuda                # writes docs/compatibility-cuda.md
                                   [--frameworks torch,jax,cupy,numba] [--out FILE | --out -]

``tests/test_conformance.py`` runs the same matrix (one test per framework pair) and fails on any cell
whose outcome differs from its prediction, whose failure is not the framework's expected error, whose
shared or copied values differ from the source's, or that raised anything but a gpushare error.

A cell is *skipped*, with its reason, only when the layout or dtype cannot be made in the source
framework (negative strides in PyTorch, a transposed view in JAX, int64 in JAX with x64 off).
Frameworks that are not installed are skipped by name.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import platform
import sys
import time
import warnings
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable, Sequence

CPU_FRAMEWORKS = ("torch", "tf", "jax", "numpy")
CUDA_FRAMEWORKS = ("torch", "jax", "cupy", "numba")
ALL_FRAMEWORKS = ("torch", "tf", "jax", "numpy", "cupy", "numba")

DTYPES = (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "bfloat16", "float32", "float64", "complex64", "complex128",
)
LAYOUTS = (
    "contiguous", "transposed", "sliced", "negative_stride", "zero_stride", "zero_d", "zero_size",
    "misaligned", "read_only",
)
LAYOUT_DESCRIPTIONS = {
    "contiguous": "a (4, 6) array, C order, 64-byte aligned",
    "transposed": "`x.T` of the (4, 6) array: strides (1, 6)",
    "sliced": "`x[1:3, 2:]`: a strided view 8 elements past the start",
    "negative_stride": "`x[:, ::-1]`",
    "zero_stride": "a (4, 6) broadcast of one row: strides (0, 1)",
    "zero_d": "a 0-d array (64-byte aligned)",
    "zero_size": "a (0, 6) array",
    "misaligned": "`x.ravel()[1:]`: one element past a 64-byte boundary",
    "read_only": "a contiguous array flagged read-only",
}
_MODULES = {"torch": "torch", "tf": "tensorflow", "jax": "jax", "numpy": "numpy", "cupy": "cupy", "numba": "numba"}
_SIXTY_FOUR_BIT = ("int64", "uint64", "float64", "complex128")
SHAPE = (4, 6)


class NotConstructible(Exception):
    """The layout or dtype cannot be made in the source framework: the cell is skipped with this reason."""


@dataclass
class Cell:
    src: str
    dst: str
    dtype: str
    layout: str
    #: "shared", "copied", "failed", "skipped", or "unexportable" (the source framework cannot
    #: export this dtype over DLPack at all, so there is nothing to predict from).
    outcome: str
    predicted: str | None = None
    reason: str | None = None
    predicted_reason: str | None = None
    fix: str | None = None
    expected_error: str | None = None
    framework_error: str | None = None
    #: Why this cell does not conform; None when it does.
    problem: str | None = None
    seconds: float = 0.0
    path: str = "auto"

    def describe(self) -> str:
        via = "" if self.path == "auto" else f" via {self.path}"
        head = f"{self.src}→{self.dst}{via} {self.dtype:<10} {self.layout:<15}"
        return (
            f"{head} outcome={self.outcome} predicted={self.predicted}: {self.problem}"
            f"\n    reason: {self.reason}\n    predicted reason: {self.predicted_reason}"
            + (f"\n    framework said: {self.framework_error}" if self.framework_error else "")
        )


@dataclass
class Environment:
    device: str
    frameworks: list[str]
    versions: dict[str, str] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)
    jax_x64: bool = False


# -- frameworks ------------------------------------------------------------------------------------


def installed(fw: str) -> bool:
    return importlib.util.find_spec(_MODULES[fw]) is not None


def prepare(frameworks: Sequence[str], device: str = "cpu", jax_x64: bool | None = None) -> Environment:
    """Imports the frameworks that are installed (others are reported missing, by name).
    ``jax_x64`` sets ``jax_enable_x64`` (None leaves JAX's own setting)."""
    if device == "cpu":
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
    else:
        # Several frameworks on one GPU: JAX would take 75% of it and TF nearly all at first use.
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        os.environ.setdefault("TF_FORCE_GPU_ALLOW_GROWTH", "true")
    if jax_x64 is not None and "jax" not in sys.modules:
        os.environ["JAX_ENABLE_X64"] = "1" if jax_x64 else "0"
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    env = Environment(device=device, frameworks=[])
    for fw in frameworks:
        if fw not in _MODULES:
            raise SystemExit(f"unknown framework {fw!r}; known: {', '.join(ALL_FRAMEWORKS)}")
        if not installed(fw):
            env.missing[fw] = f"{_MODULES[fw]} not installed"
            continue
        try:
            mod = __import__(_MODULES[fw])
            if device == "cuda":
                _check_cuda(fw)
        except Exception as e:  # a framework without a GPU (or broken) is skipped by name
            env.missing[fw] = f"{fw} unavailable on {device}: {type(e).__name__}: {e}"
            continue
        if fw == "jax" and jax_x64 is not None:
            mod.config.update("jax_enable_x64", jax_x64)
        env.frameworks.append(fw)
        env.versions[fw] = str(getattr(mod, "__version__", "?"))
    import gpushare
    from gpushare import verdicts

    env.versions["gpushare"] = str(getattr(gpushare, "__version__", "?"))
    env.jax_x64 = verdicts.jax_x64()
    return env


def _check_cuda(fw: str) -> None:
    if fw == "torch":
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError("torch.cuda.is_available() is False")
    elif fw == "jax":
        import jax

        jax.devices("gpu")
    elif fw == "cupy":
        import cupy

        cupy.cuda.runtime.getDeviceCount()
    elif fw == "numba":
        from numba import cuda

        if not cuda.is_available():
            raise RuntimeError("numba.cuda.is_available() is False")
    elif fw == "tf":
        import tensorflow as tf

        if not tf.config.list_physical_devices("GPU"):
            raise RuntimeError("TensorFlow sees no GPU")


# -- building sources ------------------------------------------------------------------------------


def _np_dtype(dtype: str) -> Any:
    import numpy as np

    if dtype == "bfloat16":
        try:
            import ml_dtypes
        except ImportError:
            raise NotConstructible("numpy has no bfloat16 without ml_dtypes") from None
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(dtype)


def _values(dtype: str, n: int) -> Any:
    """Distinct small values in `dtype` (so a transposed or reversed read is told apart)."""
    import numpy as np

    v = np.arange(n) % 7 + 1
    if dtype == "bool":
        return (np.arange(n) % 3 == 0)
    return v.astype(_np_dtype(dtype))


def _aligned_numpy(shape: tuple[int, ...], dtype: str, extra: int = 0) -> Any:
    """A NumPy array whose data starts on a 64-byte boundary (np.zeros is often only 16-aligned),
    with `extra` spare elements behind it."""
    import numpy as np

    dt = _np_dtype(dtype)
    n = int(np.prod(shape)) if shape else 1
    raw = np.zeros((n + extra) * dt.itemsize + 64, dtype=np.uint8)
    off = (-raw.ctypes.data) % 64
    flat = raw[off : off + (n + extra) * dt.itemsize].view(dt)
    flat[:] = _values(dtype, n + extra)
    return flat


def _plain_view(base: Any, layout: str) -> Any:
    """The views every strided array library makes the same way (NumPy, CuPy, PyTorch) of a
    compact 2-d ``base``; None for the layouts each builds its own way."""
    if layout == "contiguous":
        return base
    if layout == "transposed":
        return base.T
    if layout == "sliced":
        return base[1:3, 2:]
    if layout == "negative_stride":
        return base[:, ::-1]
    if layout == "zero_size":
        return base[:0]
    return None


def _build_numpy(dtype: str, layout: str) -> Any:
    import numpy as np

    n = SHAPE[0] * SHAPE[1]
    if layout == "misaligned":
        return _aligned_numpy((n,), dtype, extra=1)[1:]
    flat = _aligned_numpy(SHAPE, dtype)
    base = flat.reshape(SHAPE)
    view = _plain_view(base, layout)
    if view is not None:
        return view
    if layout == "zero_stride":
        # as_strided, not broadcast_to: broadcast_to returns a read-only view, which would test the
        # read-only rule instead of the stride rule.
        return np.lib.stride_tricks.as_strided(base[0], shape=SHAPE, strides=(0, base.itemsize), writeable=True)
    if layout == "zero_d":
        return flat[:1].reshape(())
    if layout == "read_only":
        base.flags.writeable = False
        return base
    raise AssertionError(layout)


def _build_torch(dtype: str, layout: str, device: str) -> Any:
    import torch

    dev = "cuda" if device == "cuda" else "cpu"
    n = SHAPE[0] * SHAPE[1]
    if layout == "negative_stride":
        raise NotConstructible("torch cannot make negative strides (torch.flip copies)")
    if layout == "read_only":
        raise NotConstructible("torch has no read-only tensors")
    if dtype == "bfloat16":
        flat = torch.tensor(_values("float32", n + 1), device=dev).to(torch.bfloat16)
    else:
        # clone(): from_numpy would alias NumPy's malloc'd (often only 16-byte aligned) memory;
        # torch's own allocator aligns to 64 bytes, which is what a torch user gets.
        flat = torch.from_numpy(_values(dtype, n + 1)).to(dev).clone()
    if layout == "misaligned":
        return flat[1:]  # torch allocations are 64-byte aligned, so one element in is not
    base = flat[:n].reshape(SHAPE)
    view = _plain_view(base, layout)  # negative strides were refused above
    if view is not None:
        return view
    if layout == "zero_stride":
        return base[0].expand(*SHAPE)
    if layout == "zero_d":
        return base[0, 0].clone()
    raise AssertionError(layout)


def _build_jax(dtype: str, layout: str, device: str) -> Any:
    import jax
    import jax.numpy as jnp

    if dtype in _SIXTY_FOUR_BIT and not jax.config.jax_enable_x64:
        raise NotConstructible(f"jax holds no {dtype} with jax_enable_x64 off")
    if layout in ("transposed", "sliced", "negative_stride", "zero_stride", "misaligned"):
        raise NotConstructible(
            "layout not constructible in jax: its arrays are compact, row-major and aligned on export"
        )
    if layout == "read_only":
        raise NotConstructible("every jax array is immutable: the contiguous column is the read-only case")
    target = jax.devices("gpu" if device == "cuda" else "cpu")[0]
    n = SHAPE[0] * SHAPE[1]
    values = _values("float32" if dtype == "bfloat16" else dtype, n).reshape(SHAPE)
    if layout == "zero_d":
        values = values[0, 0]
    elif layout == "zero_size":
        values = values[:0]
    return jax.device_put(jnp.asarray(values, dtype=dtype), target)


def _build_tf(dtype: str, layout: str, device: str) -> Any:
    import tensorflow as tf

    if layout in ("transposed", "sliced", "negative_stride", "zero_stride", "misaligned"):
        raise NotConstructible(
            "layout not constructible in tf: its tensors are compact and row-major (slices copy)"
        )
    if layout == "read_only":
        raise NotConstructible("every tf tensor is immutable: the contiguous column is the read-only case")
    n = SHAPE[0] * SHAPE[1]
    values = _values("float32" if dtype == "bfloat16" else dtype, n).reshape(SHAPE)
    if layout == "zero_d":
        values = values[0, 0]
    elif layout == "zero_size":
        values = values[:0]
    with tf.device("GPU:0" if device == "cuda" else "CPU:0"):
        t = tf.constant(values)
        return tf.cast(t, tf.bfloat16) if dtype == "bfloat16" else tf.identity(t)


def _build_cupy(dtype: str, layout: str, device: str) -> Any:
    import cupy

    if device != "cuda":
        raise NotConstructible("cupy arrays live on the GPU")
    if layout == "read_only":
        raise NotConstructible("cupy has no read-only arrays")
    if dtype == "bfloat16":
        raise NotConstructible("cupy builds no bfloat16 arrays (ml_dtypes arrays stay on the host)")
    host = _build_numpy(dtype, "contiguous")
    n = SHAPE[0] * SHAPE[1]
    if layout == "misaligned":
        flat = cupy.asarray(_aligned_numpy((n,), dtype, extra=1))
        return flat[1:]
    base = cupy.asarray(host)
    view = _plain_view(base, layout)
    if view is not None:
        return view
    if layout == "zero_stride":
        return cupy.broadcast_to(base[0], SHAPE)
    if layout == "zero_d":
        return base[0, 0].copy()
    raise AssertionError(layout)


def _build_numba(dtype: str, layout: str, device: str) -> Any:
    from numba import cuda

    if device != "cuda":
        raise NotConstructible("numba device arrays live on the GPU")
    if layout == "read_only":
        raise NotConstructible("numba device arrays cannot be read-only")
    if layout == "zero_stride":
        # DeviceNDArray would take strides (0, itemsize), but Numba's __cuda_array_interface__ then says
        # C-contiguous (is_contiguous ignores zero strides): no consumer could read it right.
        raise NotConstructible("numba device arrays export a zero stride view as C-contiguous, so it is not built")
    if layout == "negative_stride":
        raise NotConstructible(f"numba device arrays cannot take a {layout.replace('_', ' ')} view")
    if dtype == "bfloat16":
        raise NotConstructible("numba has no bfloat16")
    n = SHAPE[0] * SHAPE[1]
    if layout == "misaligned":
        return cuda.to_device(_aligned_numpy((n,), dtype, extra=1))[1:]
    base = cuda.to_device(_build_numpy(dtype, "contiguous"))
    if layout == "contiguous":
        return base
    if layout == "transposed":
        # Numba's `.T` is not a view: it runs a transpose kernel into a new compact array (and that
        # kernel fails to compile with NumPy 2.5). A transposed view is the same memory with swapped
        # strides, which DeviceNDArray takes as it is.
        from numba.cuda.cudadrv.devicearray import DeviceNDArray

        isz = base.dtype.itemsize
        return DeviceNDArray(shape=(SHAPE[1], SHAPE[0]), strides=(isz, SHAPE[1] * isz), dtype=base.dtype,
                             gpu_data=base.gpu_data)
    if layout == "sliced":
        return base[1:3, 2:]
    if layout == "zero_d":
        return cuda.to_device(_build_numpy(dtype, "zero_d"))
    if layout == "zero_size":
        return cuda.to_device(_build_numpy(dtype, "zero_size"))
    raise AssertionError(layout)


def build(fw: str, dtype: str, layout: str, device: str = "cpu") -> Any:
    """An array of framework `fw` with `dtype` and `layout`, made in `fw` itself; raises
    NotConstructible where that framework cannot make it."""
    if fw == "numpy":
        if device == "cuda":
            raise NotConstructible("numpy arrays live on the host")
        return _build_numpy(dtype, layout)
    return {"torch": _build_torch, "jax": _build_jax, "tf": _build_tf, "cupy": _build_cupy, "numba": _build_numba}[
        fw
    ](dtype, layout, device)


def to_numpy(fw: str, x: Any) -> Any:
    """The values of an array as NumPy (bfloat16 as float32), for comparing source and target."""
    import numpy as np

    if fw == "torch":
        x = x.detach().cpu()
        if str(x.dtype) == "torch.bfloat16":
            x = x.float()
        out = x.numpy()
    elif fw == "tf":
        out = x.numpy()
    elif fw == "cupy":
        out = x.get()
    elif fw == "numba":
        try:
            out = x.copy_to_host()
        except Exception:  # e.g. negative strides ("D->H copy not implemented for negative strides")
            out = _numba_through_cai(x)
    else:
        out = np.asarray(x)
    out = np.asarray(out)
    if out.dtype.name == "bfloat16":
        out = out.astype(np.float32)
    return out


def _numba_through_cai(x: Any) -> Any:
    """A Numba view that copy_to_host cannot read, read through another framework's
    ``__cuda_array_interface__`` import: CuPy takes any strides; torch only non-negative ones
    (negative strides are what gpushare refuses to hand to torch)."""
    try:
        import cupy
    except ImportError:
        cupy = None
    if cupy is not None:
        return cupy.asarray(x).get()
    if any(s < 0 for s in x.strides):
        raise NotImplementedError("reading a Numba view with negative strides needs CuPy")
    import torch

    return torch.as_tensor(x, device="cuda").cpu().numpy()


# -- running ---------------------------------------------------------------------------------------


def _same_values(a: Any, b: Any) -> bool:
    import numpy as np

    if a.shape != b.shape:
        return False
    if a.size == 0:
        return True
    try:
        return bool(np.array_equal(a.astype(b.dtype), b))
    except (TypeError, ValueError):
        return bool(np.array_equal(a, b))


def run_cell(src: str, dst: str, dtype: str, layout: str, device: str = "cpu", path: str = "auto") -> Cell:
    """Builds one source, shares it with `dst` through gpushare by `path`, and checks the outcome
    against gpushare's prediction."""
    import gpushare
    from gpushare.exceptions import GpushareError

    cell = Cell(src, dst, dtype, layout, outcome="skipped", path=path)
    try:
        obj = build(src, dtype, layout, device)
    except NotConstructible as e:
        cell.reason = str(e)
        return cell
    except Exception as e:  # noqa: BLE001 - a framework that cannot build it here: say so, go on
        cell.reason = f"could not build in {src}: {type(e).__name__}: {e}"
        return cell
    try:
        gpushare.inspect(obj)
    except GpushareError as e:
        # The source framework cannot export this dtype at all (NumPy with ml_dtypes' bfloat16):
        # there is no DLPack tensor to predict from, and share refuses cleanly.
        cell.outcome = "unexportable"
        cell.reason = getattr(e, "reason", None) or str(e)
        cell.framework_error = getattr(e, "framework_error", None)
        return cell
    t0 = time.perf_counter()
    prediction: Any = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            r = gpushare.share(obj, dst, path=path)
        except GpushareError as e:
            cell.outcome = "failed"
            cell.reason = getattr(e, "reason", None) or str(e)
            cell.framework_error = getattr(e, "framework_error", None)
            prediction = getattr(e, "predicted", None)
            if prediction is not None:
                cell.predicted, cell.predicted_reason = prediction[0], prediction[1]
                cell.fix = getattr(prediction, "fix", None)
                cell.expected_error = getattr(prediction, "expected_error", None)
        except Exception as e:  # noqa: BLE001 - anything but a gpushare error is a defect
            cell.outcome = "failed"
            cell.reason = f"{type(e).__name__}: {e}"
            cell.problem = f"raised {type(e).__name__}, not a gpushare error"
        else:
            cell.outcome, cell.reason = r.verdict, r.reason
            p = r.prediction
            if p is not None:
                cell.predicted, cell.predicted_reason = p["verdict"], p.get("reason")
            if r.unexpected:
                cell.problem = "the result itself says UNEXPECTED"
            try:
                if not _same_values(to_numpy(src, obj), to_numpy(dst, r.value)):
                    cell.problem = "the target's values differ from the source's"
            except Exception as e:  # noqa: BLE001
                cell.problem = f"could not read the values back: {type(e).__name__}: {e}"
    cell.seconds = time.perf_counter() - t0
    if cell.problem is None:
        if cell.predicted is None:
            cell.problem = "no prediction was made"
        elif cell.predicted != cell.outcome:
            cell.problem = f"predicted {cell.predicted}, got {cell.outcome}"
        elif (
            cell.outcome == "failed"
            and cell.expected_error
            and cell.framework_error
            and cell.expected_error.lower() not in cell.framework_error.lower()
        ):
            cell.problem = f"failed as predicted, but not with the expected error {cell.expected_error!r}"
    return cell


def run_pair(src: str, dst: str, device: str = "cpu", dtypes: Iterable[str] = DTYPES,
             layouts: Iterable[str] = LAYOUTS, path: str = "auto") -> list[Cell]:
    layouts = tuple(layouts)
    return [run_cell(src, dst, dt, lay, device, path) for dt in dtypes for lay in layouts]


def pairs(frameworks: Sequence[str]) -> list[tuple[str, str]]:
    return [(s, d) for s in frameworks for d in frameworks if s != d]


def run_matrix(env: Environment, progress: Callable[[str], None] | None = None,
               paths: Sequence[str] = ("auto",)) -> list[Cell]:
    cells: list[Cell] = []
    for path in paths:
        for s, d in pairs(env.frameworks):
            t0 = time.perf_counter()
            got = run_pair(s, d, env.device, path=path)
            cells.extend(got)
            if progress:
                bad = sum(c.problem is not None for c in got)
                via = "" if path == "auto" else f" via {path}"
                progress(f"{s}→{d}{via}: {len(got)} cells, {bad} not conforming, {time.perf_counter() - t0:.1f} s")
    return cells


# -- rendering -------------------------------------------------------------------------------------

_TAGS = (
    ("does not narrow", "x64 kept"),
    ("16-byte", "unaligned for XLA GPU"),
    ("Numba's __cuda_array_interface__ describes", "CAI drops strides"),
    ("trivial (compact) striding", "strides"),
    ("raises rather than copying", "strides"),
    ("jax_enable_x64", "x64"),
    ("aligned", "unaligned"),
    ("188023", "refused"),
    ("compact row-major", "strides"),
    ("compact layouts", "strides"),
    ("byte_offset", "byte_offset"),
    ("legacy capsule", "read-only export"),
    ("cannot import dtype", "dtype"),
    ("can mutate a read-only", "writable view"),
    ("zero-size", "no storage"),
    ("device", "device"),
)


def short_reason(text: str | None) -> str:
    if not text:
        return ""
    for needle, tag in _TAGS:
        if needle in text:
            return tag
    return text[:24]


def _cell_text(c: Cell) -> str:
    if c.outcome == "skipped":
        return "–"
    if c.outcome == "unexportable":
        return "n/a (export)"
    mark = {"shared": "✓ shared", "copied": "copied", "failed": "✗ failed"}[c.outcome]
    why = short_reason(c.predicted_reason if c.predicted == c.outcome else c.reason)
    text = f"{mark} ({why})" if why else mark
    if c.problem:
        text += " **†**"
    return text


def render_markdown(cells: Sequence[Cell], env: Environment, seconds: float) -> str:
    from collections import Counter, OrderedDict

    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    counts = Counter(c.outcome for c in cells)
    bad = [c for c in cells if c.problem]
    command = "python -m gpushare.conformance" + ("" if env.device == "cpu" else f" --device {env.device}")
    lines = [
        f"# {title(env.device)}",
        "",
        f"<!-- Generated by `{command}`; do not edit by hand. -->",
        "",
        f"Every ordered pair of frameworks × {len(DTYPES)} dtypes × {len(LAYOUTS)} layouts, each source built "
        f"{'on the CPU' if env.device == 'cpu' else 'in ' + env.device.upper() + ' memory'} and converted for real "
        "with `gpushare.share(x, to)` (path `auto`: DLPack; a legacy capsule into TensorFlow"
        + ("" if env.device == "cpu" else "; `__cuda_array_interface__` into and out of Numba")
        + ") and judged by addresses. Before each conversion "
        "gpushare predicted the outcome from the source's DLPack layout and the target's version and settings "
        "(the rules of `src/explain.rs`); a cell marked **†** is one where the prediction was wrong, the values "
        "differ, or the error was not the one expected.",
        "",
        f"- Run: {now}, device `{env.device}`, {platform.python_implementation()} {platform.python_version()} on "
        f"{platform.system()} {platform.machine()}, in {seconds:.1f} s.",
        "- Versions: " + ", ".join(f"{k} {v}" for k, v in env.versions.items()) + ".",
        f"- Settings: `jax_enable_x64` = {env.jax_x64}.",
    ]
    if env.missing:
        lines.append("- Not run: " + "; ".join(f"{k} ({v})" for k, v in env.missing.items()) + ".")
    lines += [
        f"- Cells: {len(cells)}; shared {counts['shared']}, copied {counts['copied']}, failed {counts['failed']}, "
        f"skipped {counts['skipped']} (layout or dtype not constructible in the source), not exportable "
        f"{counts['unexportable']}; **predictions wrong: {len(bad)}**.",
        "",
        "## Legend",
        "",
        "| mark | meaning |",
        "|---|---|",
        "| ✓ shared | the target views the source's memory (no bytes moved) |",
        "| copied | the target holds a copy; the short reason says why |",
        "| ✗ failed | the conversion raised; the short reason says why, the notes below give the fix |",
        "| – | not constructible in the source framework (see *skipped* below the pair) |",
        "| n/a (export) | the source framework cannot export this dtype over DLPack at all |",
        "",
        *_legend(env.device),
        "",
        "Layouts: " + "; ".join(f"**{k}** {v}" for k, v in LAYOUT_DESCRIPTIONS.items()) + ".",
        "",
        _alignment_note(env.device),
        "",
    ]
    if bad:
        lines += ["## Cells where the prediction was wrong", ""]
        lines += ["```"] + [c.describe() for c in bad] + ["```", ""]
    by_pair: "OrderedDict[tuple[str, str, str], list[Cell]]" = OrderedDict()
    for c in cells:
        by_pair.setdefault((c.src, c.dst, c.path), []).append(c)
    lines += ["## Summary", "", "| pair | shared | copied | failed | skipped | wrong |", "|---|---|---|---|---|---|"]
    for (s, d, p), group in by_pair.items():
        k = Counter(c.outcome for c in group)
        wrong = sum(c.problem is not None for c in group)
        via = "" if p == "auto" else f" (path {p})"
        lines.append(f"| {s} → {d}{via} | {k['shared']} | {k['copied']} | {k['failed']} | "
                     f"{k['skipped'] + k['unexportable']} | {wrong} |")
    lines.append("")
    for (s, d, p), group in by_pair.items():
        lines += [f"## {s} → {d}" + ("" if p == "auto" else f" (path {p})"), ""]
        grid = {(c.dtype, c.layout): c for c in group}
        layouts = [lay for lay in LAYOUTS if any((dt, lay) in grid for dt in DTYPES)]
        lines.append("| dtype | " + " | ".join(lay.replace("_", " ") for lay in layouts) + " |")
        lines.append("|---|" + "---|" * len(layouts))
        for dt in DTYPES:
            row = [grid[(dt, lay)] for lay in layouts if (dt, lay) in grid]
            if row:
                lines.append(f"| {dt} | " + " | ".join(_cell_text(c) for c in row) + " |")
        notes: dict[str, str] = {}
        skips: dict[str, list[str]] = {}
        for c in group:
            if c.outcome in ("copied", "failed") and c.predicted_reason:
                text = _generic(c.predicted_reason.rstrip(".") + "." + (f" Fix: {c.fix}." if c.fix else ""))
                notes.setdefault(text, short_reason(c.predicted_reason))
            elif c.outcome == "unexportable":
                skips.setdefault(f"cannot export: {c.framework_error or c.reason}", []).append(c.dtype)
            elif c.outcome == "skipped":
                skips.setdefault(c.reason or "", []).append(f"{c.dtype}/{c.layout}")
        if notes:
            lines += ["", "Why:", ""] + [f"- **{tag}**: {text}" for text, tag in notes.items()]
        if skips:
            lines += ["", "Skipped:", ""]
            for reason, which in skips.items():
                lines.append(f"- {reason} ({_summarise(which)})")
        lines.append("")
    return "\n".join(lines)


_LEGEND = (
    ("x64", "JAX narrows 64-bit dtypes to 32 bits when `jax_enable_x64` is off: enable it to share", "any"),
    ("x64 kept", "`jnp.asarray` of a `__cuda_array_interface__` keeps a 64-bit dtype even with `jax_enable_x64` "
     "off (the DLPack path would copy it to 32 bits)", "gpu"),
    ("unaligned", "XLA's CPU client views only 64-byte aligned memory and copies the rest", "cpu"),
    ("unaligned for XLA GPU", "XLA's GPU kernels take only 16-byte aligned inputs: JAX's narrowing kernel (x64 off) "
     "fails on such memory, and an array JAX shares there cannot be computed on", "gpu"),
    ("strides", "the target cannot express these strides (TF: C order only; JAX: transposes of compact only, "
     "by DLPack or `__cuda_array_interface__`)", "any"),
    ("CAI drops strides", "shared, but Numba's `__cuda_array_interface__` describes a broadcast view as "
     "C-contiguous, so whatever reads it back from Numba that way reads past the source", "gpu"),
    ("read-only export", "NumPy will not export a read-only array through a legacy capsule (JAX, TF ask for one)", "any"),
    ("dtype", "the target has no such dtype", "any"),
    ("refused", "gpushare refuses it: the target is known to abort the process on some versions (pytorch#188023)", "any"),
    ("writable view", "shared, but the target can write to memory the source holds read-only", "any"),
    ("no storage", "zero-size: there is nothing to share or copy", "any"),
)


def _legend(device: str) -> list[str]:
    where = "cpu" if device == "cpu" else "gpu"
    return ["| short reason | meaning |", "|---|---|"] + [
        f"| {tag} | {meaning} |" for tag, meaning, on in _LEGEND if on in ("any", where)
    ]


def title(device: str) -> str:
    """The page title, which names the device the sources were built on."""
    return "Compatibility: what each conversion does" + ("" if device == "cpu" else f" on {device.upper()}")


def default_output(device: str) -> str:
    """Where the generator writes by default: ``docs/compatibility.md`` for the CPU matrix,
    ``docs/compatibility-<device>.md`` for another device (``docs/compatibility-cuda.md``)."""
    return "docs/compatibility.md" if device == "cpu" else f"docs/compatibility-{device}.md"


def _alignment_note(device: str) -> str:
    if device == "cpu":
        return (
            "NumPy sources are allocated 64-byte aligned here so that the columns are deterministic; a plain "
            "`np.zeros(...)` is often only 16-byte aligned and then behaves like the *misaligned* column "
            "(into JAX on the CPU: copied). PyTorch's CPU allocator always aligns to 64 bytes."
        )
    return (
        "Device sources start at the beginning of an allocation (PyTorch, CuPy and Numba allocations are at "
        "least 256-byte aligned), except the *misaligned* column: one element in, so 1, 2, 4, 8 or 16 bytes past "
        "a boundary. JAX's GPU import views any address, but XLA's GPU kernels take only 16-byte aligned "
        "inputs: a 64-bit array JAX must narrow (x64 off) fails there instead of copying, and an array it shares "
        "there cannot be computed on."
    )


def _generic(text: str) -> str:
    """A reason without the cell's own address, shape and strides, so one note stands for the row."""
    import re

    text = re.sub(r"0x[0-9a-f]+", "0x…", text)
    text = re.sub(r" ?\(shape \[[^\]]*\], strides \[[^\]]*\]\)", "", text)
    text = re.sub(r" \[[-0-9, ]*\]", "", text)
    return text.replace("|", "\\|")


def _summarise(items: list[str]) -> str:
    if len(items) > 6:
        return f"{len(items)} cells"
    return ", ".join(items)


# -- command line ----------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m gpushare.conformance",
        description="Run the conformance matrix (frameworks × dtypes × layouts), check every outcome "
        "against gpushare's prediction, and write the compatibility table.",
    )
    parser.add_argument("--out",
                        help="write the Markdown table here (default: docs/compatibility.md on cpu, "
                        "docs/compatibility-<device>.md otherwise, e.g. docs/compatibility-cuda.md; "
                        "'-' writes none)")
    parser.add_argument("--json", help="write every cell as JSON here")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="where the source arrays are built (default: cpu)")
    parser.add_argument("--frameworks",
                        help="comma-separated frameworks (default: torch,tf,jax,numpy on cpu; "
                        "torch,jax,cupy,numba on cuda); unavailable ones are skipped by name")
    parser.add_argument("--paths", default="auto",
                        help="comma-separated transfer paths to run (default: auto; also host, copy, pinned, dlpack, capsule, cai)")
    parser.add_argument("--jax-x64", action="store_true",
                        help="run with jax_enable_x64 on (64-bit dtypes then share into JAX)")
    args = parser.parse_args(argv)
    default = CPU_FRAMEWORKS if args.device == "cpu" else CUDA_FRAMEWORKS
    frameworks = [f.strip() for f in args.frameworks.split(",")] if args.frameworks else list(default)
    env = prepare(frameworks, args.device, jax_x64=True if args.jax_x64 else None)
    for fw, why in env.missing.items():
        print(f"skipping {fw}: {why}", file=sys.stderr)
    t0 = time.perf_counter()
    cells = run_matrix(env, progress=lambda line: print(line, file=sys.stderr),
                       paths=[p.strip() for p in args.paths.split(",")])
    seconds = time.perf_counter() - t0
    bad = [c for c in cells if c.problem]
    out = default_output(args.device) if args.out is None else args.out
    if args.out is None and not cells:
        print(f"no framework ran on {args.device}: {out} left as it is", file=sys.stderr)
        out = "-"
    if out != "-":
        if args.out is None and not os.path.isdir(os.path.dirname(out)):
            out = os.path.basename(out)  # not run from the repository root: write beside it
        with open(out, "w", encoding="utf-8") as f:
            f.write(render_markdown(cells, env, seconds))
        print(f"wrote {out}", file=sys.stderr)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"environment": asdict(env), "seconds": seconds, "cells": [asdict(c) for c in cells]}, f, indent=1)
    from collections import Counter

    counts = Counter(c.outcome for c in cells)
    print(f"{len(cells)} cells in {seconds:.1f} s: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
          + f"; predictions wrong: {len(bad)}")
    for c in bad:
        print(c.describe())
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
