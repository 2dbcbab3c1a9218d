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

The code is split by what it does: :mod:`.matrix` (axes and records), :mod:`.examples` and
:mod:`.builders` (each framework's sources), :mod:`.running` (running cells, pairs and the matrix)
and :mod:`.report` (the Markdown table); this module is the command line and re-exports their
names, so ``tools.conformance.run_pair`` and the rest keep their paths.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict
from typing import Sequence

from gpushare.adapters import ADAPTERS, framework

from .examples import EXAMPLE_LAYOUTS, EXAMPLE_SHAPE, SIXTY_FOUR_BIT, NotConstructible
from .matrix import (
    _SIXTY_FOUR_BIT, ALL_FRAMEWORKS, CPU_FRAMEWORKS, CUDA_FRAMEWORKS, DTYPES, LAYOUT_DESCRIPTIONS, LAYOUTS, ROOT,
    SHAPE, Cell, Environment,
)
from .report import default_output, render_markdown, short_reason, title
from .running import (
    _module, apart, build, conflict, installed, pairs, prepare, run_cell, run_matrix, run_pair, to_numpy, unpaired,
)

__all__ = [
    "ADAPTERS", "ALL_FRAMEWORKS", "CPU_FRAMEWORKS", "CUDA_FRAMEWORKS", "DTYPES", "EXAMPLE_LAYOUTS", "EXAMPLE_SHAPE",
    "LAYOUTS", "LAYOUT_DESCRIPTIONS", "ROOT", "SHAPE", "SIXTY_FOUR_BIT", "Cell", "Environment", "NotConstructible",
    "apart", "build", "conflict", "default_output", "framework", "installed", "main", "pairs", "prepare",
    "render_markdown", "run_cell", "run_matrix", "run_pair", "short_reason", "title", "to_numpy", "unpaired",
    "_SIXTY_FOUR_BIT", "_module",
]


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
