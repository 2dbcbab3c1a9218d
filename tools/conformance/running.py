"""Running the conformance matrix: importing the frameworks, building each source in its framework,
converting it for real with :func:`gpushare.share` and judging the outcome against gpushare's
prediction; pairs of frameworks that crash in one process run in a child process."""

from __future__ import annotations

import json
import os
import sys
import time
import warnings
from typing import Any, Callable, Iterable, Sequence

from gpushare.adapters import ADAPTERS, framework

from . import examples
from .examples import NotConstructible
from .matrix import ALL_FRAMEWORKS, DTYPES, LAYOUTS, ROOT, Cell, Environment


# -- frameworks ------------------------------------------------------------------------------------


def installed(fw: str) -> bool:
    return framework(fw).installed()


def _module(fw: str) -> str:
    return framework(fw).module


def _distribution_version(fw: str) -> str:
    """A framework's version without importing it (for one that runs in another process)."""
    import importlib.metadata

    for dist in framework(fw).distributions():
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "?"


def prepare(frameworks: Sequence[str], device: str = "cpu", jax_x64: bool | None = None) -> Environment:
    """Imports the frameworks that are installed (others are reported missing, by name); one that
    would crash beside a framework imported before it is not imported here: its pairs run in a
    process of their own (see ``run_pair``). ``jax_x64`` sets ``jax_enable_x64`` (None leaves JAX's
    own setting)."""
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
        if fw not in ADAPTERS:
            raise SystemExit(f"unknown framework {fw!r}; known: {', '.join(ALL_FRAMEWORKS)}")
        adapter = framework(fw)
        if not adapter.installed():
            env.missing[fw] = f"{adapter.module} not installed"
            continue
        conflict = adapter.import_conflict()
        if conflict is not None:
            env.elsewhere[fw] = conflict
            env.frameworks.append(fw)
            env.versions[fw] = _distribution_version(fw)
            continue
        try:
            mod = adapter.load()
            if device == "cuda" and not adapter.has_gpu():
                raise RuntimeError(f"{fw} sees no GPU")
        except Exception as e:  # a framework without a GPU (or broken) is skipped by name
            env.missing[fw] = f"{fw} unavailable on {device}: {type(e).__name__}: {e}"
            continue
        if fw == "jax" and jax_x64 is not None:
            mod.config.update("jax_enable_x64", jax_x64)
        env.frameworks.append(fw)
        # PyCUDA names its version VERSION_TEXT, not __version__.
        env.versions[fw] = str(getattr(mod, "__version__", None) or getattr(mod, "VERSION_TEXT", "?"))
    import gpushare

    env.versions["gpushare"] = str(getattr(gpushare, "__version__", "?"))
    env.jax_x64 = framework("jax").x64_enabled()
    return env


# -- building sources ------------------------------------------------------------------------------


def build(fw: str, dtype: str, layout: str, device: str = "cpu") -> Any:
    """An array of framework `fw` with `dtype` and `layout`, made in `fw` itself (its builders'
    ``example``, builders/<module>.py); raises NotConstructible where that framework cannot make it."""
    return examples.example(framework(fw), dtype, layout, on_host=device == "cpu")


def to_numpy(fw: str, x: Any) -> Any:
    """The values of an array as NumPy (bfloat16 as float32), for comparing source and target."""
    return examples.readback(framework(fw), x)


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
                cell.predicted, cell.predicted_reason = p.verdict, p.reason
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
             layouts: Iterable[str] = LAYOUTS, path: str = "auto", isolated: bool | None = None) -> list[Cell]:
    """Every cell of one pair. A framework that would crash beside one already imported here
    (PaddlePaddle beside TensorFlow: ``Adapter.import_conflict``) is not imported: the pair runs in
    a fresh interpreter instead (``isolated=True`` asks for that anyway), and its cells come back
    as JSON."""
    dtypes, layouts = tuple(dtypes), tuple(layouts)
    if isolated is None:
        isolated = any(framework(fw).import_conflict() for fw in (src, dst))
    if isolated:
        return _run_pair_in_child(src, dst, device, dtypes, layouts, path)
    cells: list[Cell] = []
    # A target whose rules read a fact that can be either way here (PyCUDA's current context) runs
    # every cell in each state, so the failure and the share are both checked.
    for state, make in examples.target_states(framework(dst)):
        with make():
            for dt in dtypes:
                for lay in layouts:
                    cell = run_cell(src, dst, dt, lay, device, path)
                    cell.state = state
                    cells.append(cell)
    return cells


def _run_pair_in_child(src: str, dst: str, device: str, dtypes: Sequence[str], layouts: Sequence[str],
                       path: str) -> list[Cell]:
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cells.json")
        cmd = [sys.executable, "-m", "tools.conformance", "--device", device, "--frameworks", f"{src},{dst}",
               "--pair", f"{src},{dst}", "--dtypes", ",".join(dtypes), "--layouts", ",".join(layouts),
               "--paths", path, "--out", "-", "--json", out]
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1800)
        if not os.path.exists(out):
            raise RuntimeError(
                f"the {src}→{dst} matrix in its own process ended with {proc.returncode} and wrote no cells:\n"
                + proc.stderr[-3000:]
            )
        with open(out, encoding="utf-8") as f:
            return [Cell(**c) for c in json.load(f)["cells"]]


def conflict(a: str, b: str) -> bool:
    """Whether two frameworks crash when imported into one process (their adapters say)."""
    fa, fb = framework(a), framework(b)
    return fb.module in fa.crashes_beside or fa.module in fb.crashes_beside


def pairs(frameworks: Sequence[str]) -> list[tuple[str, str]]:
    """Every ordered pair, except those of two frameworks that cannot live in one process."""
    return [(s, d) for s in frameworks for d in frameworks if s != d and not conflict(s, d)]


def apart(frameworks: Sequence[str]) -> set[str]:
    """The frameworks that crash beside one listed before them: ``prepare`` leaves them out of this
    process, and their pairs run in a child process (Paddle after TF in the CPU matrix)."""
    return {fw for i, fw in enumerate(frameworks) if any(conflict(fw, o) for o in frameworks[:i])}


def unpaired(frameworks: Sequence[str]) -> list[tuple[str, str]]:
    """The pairs ``pairs`` leaves out, each once."""
    return [(s, d) for i, s in enumerate(frameworks) for d in frameworks[i + 1:] if conflict(s, d)]


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
