"""PaddlePaddle's cases (tests/paddle_cases.py) in a process of their own.

PaddlePaddle 3.3 and TensorFlow 2.20 crash (SIGSEGV) when both are imported into one process, and
the other test modules import TensorFlow at collection; so the Paddle cases run in a fresh
interpreter with only Paddle, PyTorch, NumPy and JAX.
"""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.skipif(importlib.util.find_spec("paddle") is None, reason="framework not installed: paddle")
def test_paddle_cases_pass_in_their_own_process():
    cases = Path(__file__).with_name("paddle_cases.py")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(cases)],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and "failed" not in proc.stdout, proc.stdout[-2000:]
