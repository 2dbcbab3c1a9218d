"""The conformance matrix on the CPU: every ordered pair of the installed frameworks × 15 dtypes × 9
layouts, converted for real; each outcome must be the one gpushare predicted, failures must be the
framework's expected error (or gpushare's own refusal), values must survive, and nothing may crash.

The matrix code is shared with ``python -m gpushare.conformance``, which writes
``docs/compatibility.md``. One test per pair; a failure lists every non-conforming cell.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import have
from gpushare import conformance as C

pytestmark = pytest.mark.filterwarnings("ignore")

PAIRS = C.pairs(C.CPU_FRAMEWORKS)


def _available(fw: str) -> bool:
    return have(C._MODULES[fw])


@pytest.mark.parametrize("src,dst", PAIRS, ids=[f"{s}-{d}" for s, d in PAIRS])
def test_pair_conforms(src, dst):
    for fw in (src, dst):
        if not _available(fw):
            pytest.skip(f"{C._MODULES[fw]} not installed")
    cells = C.run_pair(src, dst, "cpu")
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
        pytest.skip("needs numpy, jax and torch")
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
        "from gpushare import conformance as C\n"
        "env = C.prepare(['torch', 'jax', 'numpy'], 'cpu', jax_x64=True)\n"
        "cells = []\n"
        "for s, d in [('torch', 'jax'), ('numpy', 'jax'), ('jax', 'torch'), ('jax', 'numpy')]:\n"
        "    cells += C.run_pair(s, d, 'cpu', dtypes=C._SIXTY_FOUR_BIT, layouts=('contiguous', 'zero_d'))\n"
        "json.dump([c.__dict__ for c in cells], sys.stdout)\n"
    )
    env = dict(os.environ, JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
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


def test_cli_help_and_unknown_framework():
    out = subprocess.run(
        [sys.executable, "-m", "gpushare.conformance", "--help"], capture_output=True, text=True, timeout=60
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
    from gpushare import api, verdicts
    from gpushare.exceptions import ConversionError

    monkeypatch.setattr(api.verdicts, "predict", lambda *a: verdicts.Prediction("failed", "a wrong rule", "none"))
    r = gpushare.share(torch.ones(3), "numpy")
    assert r.verdict == "shared" and r.unexpected
    assert "UNEXPECTED share" in repr(r) and "predicted failed" in repr(r)
    monkeypatch.setattr(api.verdicts, "predict", lambda *a: verdicts.Prediction("shared", None))
    with pytest.raises(ConversionError, match="UNEXPECTED: gpushare predicted shared") as e:
        gpushare.share(torch.ones(3, dtype=torch.bfloat16), "numpy")
    assert e.value.predicted[0] == "shared"


@pytest.mark.parametrize("path", ["dlpack", "capsule", "cai", "host", "copy", "pinned"])
def test_every_path_conforms(path):
    """The same matrix through each explicit path: paths that do not apply to a pair fail as
    predicted (before the framework is called), and the lab's copies are predicted as copies."""
    fws = [f for f in C.CPU_FRAMEWORKS if _available(f)]
    cells = [c for s, d in C.pairs(fws) for c in C.run_pair(s, d, "cpu", path=path)]
    bad = [c for c in cells if c.problem]
    assert not bad, f"{len(bad)} of {len(cells)} cells do not conform:\n" + "\n".join(c.describe() for c in bad[:40])
