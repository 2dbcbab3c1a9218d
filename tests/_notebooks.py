"""Runs the demo notebooks once per test session, shared by test_notebooks.py and test_browser.py.

Kernel start-ups and framework imports dominate these tests, so every notebook is executed once
by each runner and the executed files are reused. The gpushare kernelspec is installed into a
temporary prefix (``gpushare kernel install --prefix``) and found through ``JUPYTER_PATH``, so a
test run neither needs nor touches a kernel installed anywhere else.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
CPU_NOTEBOOKS = ("01_tour_cpu", "02_torch_to_tensorflow")
GPU_NOTEBOOKS = ("03_transfer_paths_gpu", "04_memory_and_contexts_gpu", "05_several_gpus", "06_processes", "07_tensorflow_gpu",
                 "08_path_advice_gpu", "09_pycuda_tensorflow_contexts_gpu", "10_across_hosts")
#: Parameters the runner passes to notebook 02 (fewer samples; it also proves injection works).
PARAMS = {"02_torch_to_tensorflow": ["repeat=5"]}
#: Per-cell limit, and per-notebook limit of the whole command (kernel start included): guards
#: against a hang only, far above what any cell takes on a busy 2-core machine, so that no outcome
#: depends on the machine's speed.
CELL_TIMEOUT_S = 600
NOTEBOOK_TIMEOUT_S = 1800
KERNEL = "gpushare"


def gpushare_bin() -> Path | None:
    """The console script beside this Python (``.venv/bin/gpushare``), else one on PATH."""
    here = Path(sys.executable).with_name("gpushare")
    if here.exists():
        return here
    found = shutil.which("gpushare")
    return Path(found) if found else None


@dataclass
class Run:
    """One notebook executed by one runner."""

    stem: str
    path: Path
    seconds: float
    returncode: int = 0
    log: str = ""
    nb: Any = None


@dataclass
class Session:
    prefix: Path
    workdir: Path
    env: dict[str, str]
    runs: dict[tuple[str, str], Run] = field(default_factory=dict)


_SESSION: dict[str, Session] = {}


def session(tmp_path_factory: Any) -> Session:
    """The kernelspec in a temporary prefix, installed once per test session."""
    if "s" not in _SESSION:
        exe = gpushare_bin()
        if exe is None:
            import pytest

            pytest.skip("the gpushare console script is not installed (run make develop)")
        base = tmp_path_factory.mktemp("notebooks")
        prefix = base / "prefix"
        out = subprocess.run(
            [str(exe), "kernel", "install", "--prefix", str(prefix)],
            capture_output=True, text=True, timeout=60,
        )
        assert out.returncode == 0, f"gpushare kernel install failed:\n{out.stdout}\n{out.stderr}"
        assert (prefix / "share/jupyter/kernels" / KERNEL / "kernel.json").exists(), out.stdout
        env = dict(os.environ)
        env["JUPYTER_PATH"] = str(prefix / "share/jupyter")
        env["JUPYTER_RUNTIME_DIR"] = str(base / "runtime")
        # The runner must not pick up a GPU on a machine that has one unless the notebook asks:
        # nothing is forced here, the CPU notebooks simply make CPU arrays.
        _SESSION["s"] = Session(prefix=prefix, workdir=base, env=env)
    return _SESSION["s"]


def _own_cache(s: Session, engine: str, stem: str) -> dict[str, str]:
    """The session's environment with a cache directory of this run's own: notebook 08 calibrates a
    cost model, which would otherwise change what `auto` takes in the notebooks run after it."""
    return {**s.env, "XDG_CACHE_HOME": str(s.workdir / "cache" / engine / stem)}


def run_gpushare(s: Session, stem: str) -> Run:
    """``gpushare run NOTEBOOK -o OUT --timeout S [-p …]``, once per session."""
    key = ("gpushare", stem)
    if key not in s.runs:
        import nbformat

        out = s.workdir / "gpushare" / f"{stem}.ipynb"
        out.parent.mkdir(parents=True, exist_ok=True)
        cmd = [str(gpushare_bin()), "run", str(NOTEBOOKS / f"{stem}.ipynb"), "-o", str(out),
               "--timeout", str(CELL_TIMEOUT_S)]
        for p in PARAMS.get(stem, []):
            cmd += ["-p", p]
        t0 = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True, env=_own_cache(s, "gpushare", stem),
                              timeout=NOTEBOOK_TIMEOUT_S)
        run = Run(stem, out, time.monotonic() - t0, proc.returncode, (proc.stdout + proc.stderr)[-6000:])
        if out.exists():
            run.nb = nbformat.read(out, as_version=4)
        s.runs[key] = run
    return s.runs[key]


@contextmanager
def _environ(env: dict[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def run_nbclient(s: Session, stem: str) -> Run:
    """The same notebook through nbclient (what ``jupyter nbconvert --execute`` uses), once."""
    key = ("nbclient", stem)
    if key not in s.runs:
        import nbformat
        from nbclient import NotebookClient

        nb = nbformat.read(NOTEBOOKS / f"{stem}.ipynb", as_version=4)
        client = NotebookClient(
            # iopub_timeout: output that a busy machine delivers after the reply is still waited for.
            nb, timeout=CELL_TIMEOUT_S, startup_timeout=240, kernel_name=KERNEL, iopub_timeout=60,
            resources={"metadata": {"path": str(NOTEBOOKS)}},
        )
        t0 = time.monotonic()
        with _environ(_own_cache(s, "nbclient", stem)):  # the kernelspec lookup and the kernel's environment
            client.execute()
        out = s.workdir / "nbclient" / f"{stem}.ipynb"
        out.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, out)
        s.runs[key] = Run(stem, out, time.monotonic() - t0, 0, "", nb)
    return s.runs[key]


# -- Comparing outputs across runners ----------------------------------------------------------

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_HEX = re.compile(r"0x[0-9a-fA-F]+")
_UNIT_HEADER = re.compile(r"\((?:ns|µs|us|ms|s|B|KiB|MiB|GiB|GB/s|MB/s)\)")
#: Variance warnings come and go with the machine's load.
_NOISE = re.compile(
    r";?\s*⚠ (?:[\w-]+: )?(?:noisy: .*?quiet the machine|\d+ noisy points? \([^)]*\)\.?"
    r"|noisy \(IQR > \d+% of the median[^)]*\)[^.]*\.)"
    # ...and the marks that point at them: a sweep's noisy cell, and its table's title.
    r"|; ⚠ noisy(?=\s|$)|(?<=\d) ⚠(?=\s|$)"
)
#: Whether the fastest path wins beyond the spread or ties with another depends on the load too.
_RANKING = re.compile(
    r"★ on [\w-]+, a copy: .*?when none does\)\.|★ fastest: [\w, ]*?beyond the measured spread\.|No ★[^.]*\.|[★≈](?= )"
)
#: ...and so does why `auto` left the ★ row ("auto picks dlpack: copy was faster but copies, ...").
_AUTO_WHY = re.compile(r"(auto picks [\w-]+): [^.]*\.")
_NUMBER = re.compile(
    r"[-+]?(?:\d[\d,]*)?\.?\d+(?:[eE][-+]?\d+)?\s?(?:ns|µs|us|ms|s|B|KiB|MiB|GiB|GB/s|MB/s|x|×|pt/s)?(?![\w.])"
)


def normalise(text: str) -> str:
    """Text with what differs between runs made equal: addresses, numbers with their units, the
    unit a column was given, progress bars (anything a carriage return overwrote), variance
    warnings, whitespace."""
    text = _ANSI.sub("", text)
    text = "\n".join(line.rsplit("\r", 1)[-1] for line in text.split("\n"))
    # Notes wrap at word boundaries, and where depends on the numbers in them: one line first.
    text = " ".join(text.split())
    text = _NOISE.sub("", text)
    text = _RANKING.sub("", text)
    text = _AUTO_WHY.sub(r"\1.", text)
    text = _HEX.sub("0xADDR", text)
    text = _UNIT_HEADER.sub("(UNIT)", text)
    text = _NUMBER.sub("N", text)
    return " ".join(text.split())


def _coalesce(outputs: list) -> list:
    """Consecutive stream outputs of one stream as one (runners split them differently)."""
    merged: list = []
    for o in outputs:
        if o["output_type"] == "stream" and merged and merged[-1]["output_type"] == "stream" \
                and merged[-1]["name"] == o["name"]:
            merged[-1] = {**merged[-1], "text": merged[-1]["text"] + o["text"]}
        else:
            merged.append(dict(o))
    return merged


def signature(nb: Any) -> list[tuple[str, list]]:
    """Per code cell (by id; injected parameter cells left out): each output's type, stream name or
    MIME types, and normalised text/plain (or error name and value)."""
    cells = []
    for cell in nb.cells:
        if cell.cell_type != "code" or "injected-parameters" in cell.metadata.get("tags", []):
            continue
        outs = []
        for o in _coalesce(cell.get("outputs", [])):
            kind = o["output_type"]
            if kind == "stream":
                text = normalise(o["text"])
                if text:
                    outs.append(("stream", o["name"], text))
            elif kind == "error":
                outs.append(("error", o["ename"], normalise(o["evalue"])))
            else:
                data = o["data"]
                outs.append((kind, tuple(sorted(data)), normalise(data.get("text/plain", ""))))
        cells.append((cell.get("id", ""), outs))
    return cells


def html_outputs(nb: Any) -> list[str]:
    return [
        o["data"]["text/html"]
        for c in nb.cells if c.cell_type == "code"
        for o in c.get("outputs", []) if "data" in o and "text/html" in o["data"]
    ]
