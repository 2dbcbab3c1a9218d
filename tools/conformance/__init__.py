"""The conformance matrix: every ordered pair of frameworks × dtypes × layouts, converted for real
with :func:`gpushare.share`, each outcome (shared, copied, failed) checked against the prediction
that gpushare made before converting.

A developer tool, not part of the wheel: run it from the repository root (with gpushare
importable) to regenerate the compatibility table users read::

    python -m tools.conformance [--json cells.json]          # writes docs/compatibility.md
    python -m tools.conformance --device cuda                # writes docs/compatibility-cuda.md
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
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from gpushare.adapters import (
    ADAPTERS,
    EXAMPLE_LAYOUTS,
    EXAMPLE_SHAPE,
    SIXTY_FOUR_BIT,
    NotConstructible,
    framework,
)

#: The repository root: ``python -m tools.conformance`` runs from there (so do its child processes).
ROOT = Path(__file__).resolve().parents[2]

#: The CPU matrix runs every framework whose arrays can live on the host (its adapter says so).
CPU_FRAMEWORKS = tuple(name for name, a in ADAPTERS.items() if a.host_arrays)
#: The CUDA matrix's default: the frameworks the GPU machine has (docs/compatibility-cuda.md).
CUDA_FRAMEWORKS = ("torch", "jax", "cupy", "numba")

DTYPES = (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "bfloat16", "float32", "float64", "complex64", "complex128",
)
LAYOUTS = EXAMPLE_LAYOUTS
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
_SIXTY_FOUR_BIT = SIXTY_FOUR_BIT
SHAPE = EXAMPLE_SHAPE
#: Every framework gpushare has an adapter for (the matrix knows no framework by itself).
ALL_FRAMEWORKS = tuple(ADAPTERS)


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
    #: Frameworks that crash beside one already imported here: their pairs run in another process.
    elsewhere: dict[str, str] = field(default_factory=dict)


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
        env.versions[fw] = str(getattr(mod, "__version__", "?"))
    import gpushare

    env.versions["gpushare"] = str(getattr(gpushare, "__version__", "?"))
    env.jax_x64 = framework("jax").x64_enabled()
    return env


# -- building sources ------------------------------------------------------------------------------


def build(fw: str, dtype: str, layout: str, device: str = "cpu") -> Any:
    """An array of framework `fw` with `dtype` and `layout`, made in `fw` itself (its adapter's
    ``example``); raises NotConstructible where that framework cannot make it."""
    return framework(fw).example(dtype, layout, on_host=device == "cpu")


def to_numpy(fw: str, x: Any) -> Any:
    """The values of an array as NumPy (bfloat16 as float32), for comparing source and target."""
    return framework(fw).readback(x)


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
    return [run_cell(src, dst, dt, lay, device, path) for dt in dtypes for lay in layouts]


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
    ("reading outside the source", "refused"),
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
    command = "python -m tools.conformance" + ("" if env.device == "cpu" else f" --device {env.device}")
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
    apart = unpaired(env.frameworks)
    if apart:
        lines.append("- Pairs not run: " + ", ".join(f"{a} ↔ {b}" for a, b in apart) + " (the two crash, SIGSEGV, "
                     "when imported into one process; each one's other pairs ran in a process without the other).")
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
    ("refused", "gpushare refuses it: the target is known to abort the process on some versions (pytorch#188023), "
     "or to read outside the source (Paddle 3.3 with negative strides)", "any"),
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
        prog="python -m tools.conformance",
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
                        help=f"comma-separated frameworks (default: {','.join(CPU_FRAMEWORKS)} on cpu; "
                        f"{','.join(CUDA_FRAMEWORKS)} on cuda); unavailable ones are skipped by name")
    parser.add_argument("--paths", default="auto",
                        help="comma-separated transfer paths to run (default: auto; also host, copy, pinned, dlpack, capsule, cai)")
    parser.add_argument("--jax-x64", action="store_true",
                        help="run with jax_enable_x64 on (64-bit dtypes then share into JAX)")
    # How run_pair runs one pair in a child process (a framework that crashes beside another).
    parser.add_argument("--pair", help=argparse.SUPPRESS)
    parser.add_argument("--dtypes", help=argparse.SUPPRESS)
    parser.add_argument("--layouts", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    default = CPU_FRAMEWORKS if args.device == "cpu" else CUDA_FRAMEWORKS
    frameworks = [f.strip() for f in args.frameworks.split(",")] if args.frameworks else list(default)
    env = prepare(frameworks, args.device, jax_x64=True if args.jax_x64 else None)
    for fw, why in env.missing.items():
        print(f"skipping {fw}: {why}", file=sys.stderr)
    t0 = time.perf_counter()
    paths = [p.strip() for p in args.paths.split(",")]
    if args.pair:
        src, dst = args.pair.split(",")
        dtypes = args.dtypes.split(",") if args.dtypes else DTYPES
        layouts = args.layouts.split(",") if args.layouts else LAYOUTS
        cells = [c for path in paths for c in run_pair(src, dst, env.device, dtypes, layouts, path)]
    else:
        cells = run_matrix(env, progress=lambda line: print(line, file=sys.stderr), paths=paths)
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
