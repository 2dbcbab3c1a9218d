"""Shared fixtures: real frameworks on CPU and a real IPython shell whose failures raise."""

from __future__ import annotations

import importlib.util
import os
import tempfile

import pytest

# TensorFlow logs at import; keep test output readable.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# Let JAX share one GPU with the other frameworks instead of taking 75 % of it at first use.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
# A cache of the session's own: a cost model (or ceilings) the developer calibrated in ~/.cache
# would change what `auto` takes and make the tests depend on the machine's history.
_CACHE = tempfile.TemporaryDirectory(prefix="gpushare-test-cache-")  # removed when the session ends
os.environ["XDG_CACHE_HOME"] = _CACHE.name


def have(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def require(module: str):
    """Skip mark naming the condition: the framework is not installed."""
    return pytest.mark.skipif(not have(module), reason=f"{module} not installed")


@pytest.fixture(scope="session")
def ip():
    """A real InteractiveShell with gpushare loaded (history off so tests leave no files)."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance(history_load_length=0)
    shell.history_manager.enabled = False
    shell.run_line_magic("load_ext", "gpushare")
    return shell


@pytest.fixture
def run(ip):
    """Runs a cell and raises what it raised, as a notebook run would fail."""

    def _run(code: str):
        result = ip.run_cell(code, store_history=False, silent=False)
        result.raise_error()
        return result.result

    return _run
