"""The conformance matrix on the CPU: every ordered pair of the installed frameworks × 15 dtypes × 9
layouts, converted for real; each outcome must be the one gpushare predicted, failures must be the
framework's expected error (or gpushare's own refusal), values must survive, and nothing may crash.

The matrix code is shared with ``python -m tools.conformance``, which writes
``docs/compatibility.md``. One test per pair; a failure lists every non-conforming cell.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# The matrix is a developer tool at the repository root (tools/conformance), not part of the wheel.
ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from conftest import have  # noqa: E402
from tools import conformance as C  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore")

PAIRS = C.pairs(C.CPU_FRAMEWORKS)


def _available(fw: str) -> bool:
    return have(C._module(fw))


def _apart(*fws: str) -> bool:
    """Whether a framework of these crashes beside one listed before it in the matrix (Paddle after
    TF): then its pairs run in a child process, whatever this process has imported so far."""
    return bool(C.apart(C.CPU_FRAMEWORKS) & set(fws))


@pytest.mark.parametrize("src,dst", PAIRS, ids=[f"{s}-{d}" for s, d in PAIRS])
def test_pair_conforms(src, dst):
    for fw in (src, dst):
        if not _available(fw):
            pytest.skip(f"{C._module(fw)} not installed")
    cells = C.run_pair(src, dst, "cpu", isolated=_apart(src, dst))
    assert len(cells) == len(C.DTYPES) * len(C.LAYOUTS)
    bad = [c for c in cells if c.problem]
    assert not bad, f"{len(bad)} of {len(cells)} cells do not conform:\n" + "\n".join(c.describe() for c in bad)
    # Skips are only for what the source framework cannot make, and say so.
    for c in cells:
        if c.outcome == "skipped":
            assert c.reason and src in c.reason, c
        if c.outcome == "unexportable":
            assert (src, c.dtype) == ("numpy", "bfloat16"), c


def test_the_matrix_exercises_every_verdict():
    """A guard against a matrix that passes because it converts nothing: the cheap numpy pairs alone
    must share, copy, fail and refuse."""
    if not all(_available(f) for f in ("numpy", "jax", "torch")):
        pytest.skip("numpy, jax or torch not installed")
    cells = C.run_pair("numpy", "jax") + C.run_pair("numpy", "torch")
    outcomes = {c.outcome for c in cells}
    assert {"shared", "copied", "failed"} <= outcomes
    reasons = " ".join(c.predicted_reason or "" for c in cells)
    for needle in ("aligned", "jax_enable_x64", "compact", "read-only", "188023"):
        assert needle in reasons, needle


@pytest.mark.skipif(not (have("jax") and have("torch") and have("numpy")), reason="needs jax, torch and numpy")
def test_jax_x64_on_shares_64_bit_dtypes(tmp_path):
    """With jax_enable_x64 on, the 64-bit cells into JAX share (and JAX can make 64-bit sources).
    A subprocess, because x64 must be set before JAX makes any array."""
    code = (
        "import json, sys\n"
        "from tools import conformance as C\n"
        "env = C.prepare(['torch', 'jax', 'numpy'], 'cpu', jax_x64=True)\n"
        "cells = []\n"
        "for s, d in [('torch', 'jax'), ('numpy', 'jax'), ('jax', 'torch'), ('jax', 'numpy')]:\n"
        "    cells += C.run_pair(s, d, 'cpu', dtypes=C._SIXTY_FOUR_BIT, layouts=('contiguous', 'zero_d'))\n"
        "json.dump([c.__dict__ for c in cells], sys.stdout)\n"
    )
    env = dict(os.environ, JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    cells = [C.Cell(**c) for c in json.loads(out.stdout)]
    bad = [c for c in cells if c.problem]
    assert not bad, "\n".join(c.describe() for c in bad)
    into_jax = [c for c in cells if c.dst == "jax"]
    assert into_jax and all(c.outcome == "shared" for c in into_jax), [c.describe() for c in into_jax]
    assert any(c.src == "jax" and c.outcome == "shared" for c in cells)


def test_generator_writes_the_table(tmp_path):
    if not all(_available(f) for f in ("numpy", "torch")):
        pytest.skip("needs numpy and torch")
    env = C.prepare(["numpy", "torch"], "cpu")
    env.missing["cupy"] = "cupy not installed"
    cells = C.run_pair("numpy", "torch") + C.run_pair("torch", "numpy")
    text = C.render_markdown(cells, env, 1.0)
    assert "## numpy → torch" in text and "## torch → numpy" in text
    assert "| float32 | ✓ shared" in text
    assert "refused" in text and "predictions wrong: 0" in text
    assert "cupy (cupy not installed)" in text
    assert "torch cannot make negative strides" in text


def test_paddle_is_in_the_cpu_matrix_apart_from_tensorflow():
    """Paddle is a CPU framework of the matrix through its adapter alone; its pairs with TF are not
    run (both in one process crash it), and the table says so."""
    assert "paddle" in C.CPU_FRAMEWORKS and ("paddle", "torch") in PAIRS and ("torch", "paddle") in PAIRS
    assert ("tf", "paddle") not in PAIRS and ("paddle", "tf") not in PAIRS
    assert C.unpaired(C.CPU_FRAMEWORKS) == [("tf", "paddle")] and C.apart(C.CPU_FRAMEWORKS) == {"paddle"}
    env = C.Environment(device="cpu", frameworks=["tf", "paddle"])
    assert "Pairs not run: tf ↔ paddle" in C.render_markdown([], env, 1.0)


@pytest.mark.skipif(not (have("paddle") and have("numpy")), reason="needs paddle and numpy")
def test_a_pair_runs_in_its_own_process_when_asked():
    """The child process gives the same cells as this one would (the JSON round trip loses nothing)."""
    cells = C.run_pair("numpy", "paddle", "cpu", dtypes=("float32", "int64"),
                       layouts=("contiguous", "negative_stride", "read_only"), isolated=True)
    assert [(c.dtype, c.layout) for c in cells] == [
        (d, lay) for d in ("float32", "int64") for lay in ("contiguous", "negative_stride", "read_only")]
    assert not [c for c in cells if c.problem], "\n".join(c.describe() for c in cells if c.problem)
    by = {(c.dtype, c.layout): c for c in cells}
    assert by[("float32", "contiguous")].outcome == "shared"
    # Paddle 3.3 reads negative strides outside the source: refused before Paddle is called.
    assert by[("float32", "negative_stride")].outcome == "failed"
    assert "outside the source" in by[("float32", "negative_stride")].reason
    assert by[("float32", "read_only")].outcome == "shared"


def test_the_tool_is_not_in_the_package():
    """The matrix is a developer tool (tools/conformance), not shipped in the wheel."""
    import importlib.util

    import gpushare

    assert importlib.util.find_spec("gpushare.conformance") is None
    assert not (Path(gpushare.__file__).parent / "conformance.py").exists()
    assert C.__file__.startswith(str(ROOT / "tools"))


def test_cli_help_and_unknown_framework():
    out = subprocess.run(
        [sys.executable, "-m", "tools.conformance", "--help"], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert out.returncode == 0 and "--device" in out.stdout and "--frameworks" in out.stdout


@pytest.mark.gpu
def test_cuda_matrix_conforms():
    """The GPU variant: torch, jax, cupy and numba sources built on the GPU; each framework that is
    missing or has no GPU is skipped by name."""
    if not (have("torch") and __import__("torch").cuda.is_available()):
        pytest.skip("no CUDA")
    env = C.prepare(list(C.CUDA_FRAMEWORKS), "cuda")
    if len(env.frameworks) < 2:
        pytest.skip(f"fewer than two frameworks on CUDA: {env.missing}")
    cells = C.run_matrix(env)
    bad = [c for c in cells if c.problem]
    assert not bad, f"{len(bad)} of {len(cells)} cells do not conform:\n" + "\n".join(c.describe() for c in bad)


def test_errors_carry_the_prediction():
    if not all(_available(f) for f in ("numpy", "torch")):
        pytest.skip("needs numpy and torch")
    import numpy as np
    import torch

    import gpushare
    from gpushare.exceptions import ConversionError, UnsafeInputError

    with pytest.raises(ConversionError) as e:
        gpushare.share(torch.zeros(3, dtype=torch.bfloat16), "numpy")
    assert e.value.predicted[0] == "failed" and "bfloat16" in e.value.predicted[1]
    assert e.value.predicted.expected_error.lower() in e.value.framework_error.lower()
    with pytest.raises(UnsafeInputError) as e:
        gpushare.share(np.arange(4.0)[::-1], "torch")
    assert e.value.predicted[0] == "failed" and "ascontiguousarray" in e.value.predicted.fix


def test_a_wrong_prediction_shows_as_unexpected(monkeypatch):
    """Both directions: a predicted failure that works, and a predicted share that fails."""
    if not all(_available(f) for f in ("numpy", "torch")):
        pytest.skip("needs numpy and torch")
    import torch

    import gpushare
    from gpushare import advice, api, verdicts
    from gpushare.exceptions import ConversionError

    # A wrong rule stands in for the predictor of every new plan (plans made before are dropped
    # with their planner, and so are the wrong rule's after the test).
    wrong = verdicts.Prediction("failed", "a wrong rule", "none")
    monkeypatch.setattr(api.verdicts, "predictor", lambda *a: lambda info: wrong)
    try:
        advice.forget()
        r = gpushare.share(torch.ones(3), "numpy")
        assert r.verdict == "shared" and r.unexpected
        assert "UNEXPECTED share" in repr(r) and "predicted failed" in repr(r)
        advice.forget()
        monkeypatch.setattr(api.verdicts, "predictor", lambda *a: lambda info: ("shared", None))
        with pytest.raises(ConversionError, match="UNEXPECTED: gpushare predicted shared") as e:
            gpushare.share(torch.ones(3, dtype=torch.bfloat16), "numpy")
        assert e.value.predicted[0] == "shared"
    finally:
        advice.forget()


@pytest.mark.parametrize("path", ["dlpack", "capsule", "cai", "host", "copy", "pinned"])
def test_every_path_conforms(path):
    """The same matrix through each explicit path: paths that do not apply to a pair fail as
    predicted (before the framework is called), and the lab's copies are predicted as copies."""
    fws = [f for f in C.CPU_FRAMEWORKS if _available(f)]
    cells = [c for s, d in C.pairs(fws) for c in C.run_pair(s, d, "cpu", path=path, isolated=_apart(s, d))]
    bad = [c for c in cells if c.problem]
    assert not bad, f"{len(bad)} of {len(cells)} cells do not conform:\n" + "\n".join(c.describe() for c in bad[:40])


# -- The GPU run, replayed without a GPU ------------------------------------------------------------
#
# What the matrix saw on an NVIDIA H200 (driver 580, CUDA 13.0; torch 2.11.0+cu130, jax 0.11.2,
# cupy 14.2.0, numba 0.68.0; jax_enable_x64 off), for the cells the rules got wrong before. Each
# source is rebuilt as gpushare describes it (device memory, the address the run printed) and the
# prediction must be the outcome the framework gave, in the framework's own words where it failed.

_H200_BASE = 0x7FD8AD000200  # an allocation start; the run's misaligned int64 began at ...208
_DTYPES = {"bool": (6, 8), "int8": (0, 8), "int16": (0, 16), "int32": (0, 32), "int64": (0, 64),
           "uint8": (1, 8), "uint16": (1, 16), "uint32": (1, 32), "uint64": (1, 64), "float16": (2, 16),
           "float32": (2, 32), "float64": (2, 64), "complex64": (5, 64), "complex128": (5, 128)}
_H200_VERSIONS = {"torch": "2.11.0+cu130", "jax": "0.11.2", "cupy": "14.2.0", "numba": "0.68.0"}
_XLA_ALIGN = "JaxRuntimeError: INTERNAL: Address of buffer 0 must be a multiple of 10, but was 0x7fd8ad000208 [executable_name='jit_convert_element_type']"
_CAI_STRIDES = ("JaxRuntimeError: UNIMPLEMENTED: Only arrays with trivial (compact) striding are supported; i.e., "
                "arrays whose striding represents a transposition of the underlying buffer but not broadcasting.")


def _cuda_source(fw, dtype, layout):
    from gpushare import _native

    code, bits = _DTYPES[dtype]
    isz = bits // 8
    shape, strides, ptr = [4, 6], [6, 1], _H200_BASE
    if layout == "sliced":
        shape, ptr = [2, 4], _H200_BASE + 8 * isz
    elif layout == "zero_stride":
        strides = [0, 1]
    elif layout == "zero_d":
        shape, strides = [], []
    elif layout == "misaligned":
        shape, strides, ptr = [23], [1], _H200_BASE + isz
    if fw == "numba" and layout != "sliced":
        strides = None  # Numba's __cuda_array_interface__ gives no strides for these
    return _native.share.tensor_info_from_fields(fw, "cuda:0", ptr, shape, strides, code, bits, 2, 0, False)


def _h200_predict(src, dst, dtype, layout):
    from gpushare import _native, auto
    from gpushare.adapters import ADAPTERS

    predictor = _native.paths.Predictor(
        dst, _H200_VERSIONS[dst], "auto", _H200_VERSIONS[src],
        target_facts={"keeps_64_bit": lambda: False} if dst == "jax" else None,
        source_facts={"current_device": lambda: 0} if src == "torch" else None,
        pair=auto.pair(ADAPTERS[src], ADAPTERS[dst]),
    )
    verdict, reason, fix, expected_error = predictor(_cuda_source(src, dtype, layout))
    return {"verdict": verdict, "reason": reason, "fix": fix, "expected_error": expected_error}


H200_CELLS = (
    # XLA's convert kernel (x64 off) takes only 16-byte aligned inputs: one int64 into an allocation fails ...
    *[(s, "jax", dt, "misaligned", "failed", _XLA_ALIGN) for s in ("torch", "cupy") for dt in ("int64", "uint64", "float64")],
    # ... complex128 one element in is 16-byte aligned, and narrows by copying; what does not narrow shares.
    *[(s, "jax", "complex128", "misaligned", "copied", None) for s in ("torch", "cupy")],
    *[(s, "jax", dt, "misaligned", "shared", None) for s in ("torch", "cupy") for dt in ("int8", "float32", "complex64")],
    # jnp.asarray of a __cuda_array_interface__ keeps 64-bit dtypes (a view) and raises on strided views.
    *[("numba", "jax", dt, lay, "shared", None) for dt in ("int64", "uint64", "float64", "complex128")
      for lay in ("contiguous", "zero_d", "misaligned")],
    *[("numba", "jax", dt, "sliced", "failed", _CAI_STRIDES) for dt in _DTYPES],
    # Numba views a broadcast (its own __cuda_array_interface__ then calls it C-contiguous).
    *[(s, "numba", dt, "zero_stride", "shared", None) for s in ("torch", "cupy") for dt in ("int8", "float32", "complex128")],
)


@pytest.mark.parametrize("src,dst,dtype,layout,outcome,said", H200_CELLS,
                         ids=[f"{c[0]}-{c[1]}-{c[2]}-{c[3]}" for c in H200_CELLS])
def test_h200_outcomes_are_predicted(src, dst, dtype, layout, outcome, said):
    p = _h200_predict(src, dst, dtype, layout)
    assert p["verdict"] == outcome, p
    if said is not None:
        assert p["expected_error"] and p["expected_error"].lower() in said.lower(), p
        assert p["fix"], p


def test_numba_view_of_a_broadcast_is_judged_shared():
    """Numba's __cuda_array_interface__ describes its view of a (4, 6) broadcast as C-contiguous, so
    the target seems to reach past the source; it starts inside the live source, so it is a view."""
    from gpushare import _native

    src = _cuda_source("torch", "float32", "zero_stride")
    numba_view = _native.share.tensor_info_from_fields("numba", "cuda:0", _H200_BASE, [4, 6], None, 2, 32, 2, 0, False)
    r = _native.share.ShareResult(None, src, numba_view, "cai", [1e-6])
    assert r.verdict == "shared"
    assert any("Numba's __cuda_array_interface__" in n for n in r.notes), r.notes
    elsewhere = _native.share.tensor_info_from_fields("numba", "cuda:0", _H200_BASE + (1 << 20), [4, 6], None, 2, 32, 2, 0, False)
    r = _native.share.ShareResult(None, src, elsewhere, "cai", [1e-6])
    assert r.verdict == "copied" and "own copy" in r.reason


def test_generator_names_the_device():
    env = C.Environment(device="cuda", frameworks=["torch", "jax"], versions={"torch": "2.11.0", "jax": "0.11.2"})
    p = _h200_predict("torch", "jax", "int64", "misaligned")
    cell = C.Cell("torch", "jax", "int64", "misaligned", outcome="failed", predicted=p["verdict"],
                  predicted_reason=p["reason"], fix=p["fix"], expected_error=p["expected_error"])
    text = C.render_markdown([cell], env, 1.0)
    assert text.startswith("# Compatibility: what each conversion does on CUDA\n")
    assert "`python -m tools.conformance --device cuda`" in text
    assert "✗ failed (unaligned for XLA GPU)" in text and "16-byte aligned inputs" in text
    cpu = C.render_markdown([], C.Environment(device="cpu", frameworks=[]), 1.0)
    assert cpu.startswith("# Compatibility: what each conversion does\n") and "XLA GPU" not in cpu
    assert C.default_output("cpu") == "docs/compatibility.md"
    assert C.default_output("cuda") == "docs/compatibility-cuda.md"
