"""Time `gpushare run` against `jupyter execute` (nbclient) on the same notebook and machine.

A 20-cell notebook of trivial cells is executed alternately by both runners, each time in a
fresh kernel from the same `python3` kernelspec, and written to disk. What is measured is
everything a user waits for: start-up of the runner, kernel launch and handshake, the cells,
writing the notebook, and kernel shutdown. The goal is a ratio of at most 0.8.

    python benchmarks/bench_runner.py [--gpushare target/release/gpushare] [--repeat 7]

Run it with the Python whose Jupyter stack should be compared (it provides the kernel and
`jupyter-execute`).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def trivial_notebook(cells: int) -> dict:
    sources = []
    for i in range(cells):
        # A mix of the three commonest outputs: nothing, a stream, an execute_result.
        sources.append([f"x{i} = {i}", f"print({i})", f"{i} * 2"][i % 3])
    return {
        "cells": [
            {"cell_type": "code", "execution_count": None, "id": f"c{i:03d}", "metadata": {}, "outputs": [], "source": s}
            for i, s in enumerate(sources)
        ],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def default_binary() -> Path:
    for profile in ("release", "debug"):
        candidate = ROOT / "target" / profile / "gpushare"
        if candidate.exists():
            return candidate
    sys.exit("no gpushare binary: run `cargo build --release -p gpushare-runner` first")


def timed(cmd: list[str], env: dict[str, str], cwd: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr.decode(errors='replace')}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpushare", type=Path, default=None, help="gpushare binary [target/release, else target/debug]")
    parser.add_argument("--repeat", type=int, default=7, help="runs of each runner (alternating)")
    parser.add_argument("--cells", type=int, default=20, help="cells in the notebook")
    args = parser.parse_args()

    binary = (args.gpushare or default_binary()).resolve()
    jupyter_execute = shutil.which("jupyter-execute", path=str(Path(sys.executable).parent)) or shutil.which("jupyter-execute")
    if jupyter_execute is None:
        sys.exit("jupyter-execute not found (pip install nbclient)")

    import json

    with tempfile.TemporaryDirectory(prefix="gpushare-bench-") as tmp:
        work = Path(tmp)
        nb_path = work / "trivial.ipynb"
        nb_path.write_text(json.dumps(trivial_notebook(args.cells)))
        env = dict(os.environ, GPUSHARE_PYTHON=sys.executable, GPUSHARE_SYS_PREFIX=sys.prefix)
        runners = {
            "gpushare run": [str(binary), "run", str(nb_path), "-o", str(work / "out-gpushare.ipynb")],
            "jupyter execute": [jupyter_execute, str(nb_path), "--output", "out-nbclient"],
        }
        # One untimed run each: warms the page cache and .pyc files for both.
        for cmd in runners.values():
            timed(cmd, env, work)
        times: dict[str, list[float]] = {name: [] for name in runners}
        for _ in range(args.repeat):
            for name, cmd in runners.items():
                times[name].append(timed(cmd, env, work))

    print(f"{args.cells}-cell notebook, {args.repeat} runs each, {os.cpu_count()} CPUs, {sys.executable}")
    print(f"gpushare: {binary}")
    print(f"{'runner':<16} {'median':>9} {'min':>9} {'max':>9}")
    for name, ts in times.items():
        print(f"{name:<16} {statistics.median(ts):>8.3f}s {min(ts):>8.3f}s {max(ts):>8.3f}s")
    ratio = statistics.median(times["gpushare run"]) / statistics.median(times["jupyter execute"])
    verdict = "meets" if ratio <= 0.8 else "misses"
    print(f"ratio (median gpushare / median nbclient): {ratio:.2f}  ({verdict} the 0.8 goal)")


if __name__ == "__main__":
    main()
