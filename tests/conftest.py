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


# -- The browser tests (tests/test_browser*.py) ------------------------------------------------
#: Set by `make test`, which installs headless Chromium first (`make browser-deps`): there the
#: browser tests must run, and a missing browser fails them instead of skipping them.
REQUIRE_BROWSER = os.environ.get("GPUSHARE_REQUIRE_BROWSER", "") not in ("", "0")
#: What `make browser-deps` printed while installing the browser (kept for the failure message).
BROWSER_DEPS_LOG = os.environ.get("GPUSHARE_BROWSER_DEPS_LOG", "")
BROWSER_TESTS = ("test_browser.py", "test_browser_layout.py")


def chromium() -> str | None:
    import shutil

    return shutil.which("chromium") or shutil.which("chromium-browser")


def browser_missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    if chromium() is None:
        return "chromium not installed"
    if not have("jupyterlab"):
        return "jupyterlab not installed"
    return None


def _install_log_tail(lines: int = 15) -> str:
    if not BROWSER_DEPS_LOG or not os.path.isfile(BROWSER_DEPS_LOG):
        return "(make browser-deps left no log)"
    with open(BROWSER_DEPS_LOG, encoding="utf-8", errors="replace") as f:
        tail = f.read().splitlines()[-lines:]
    return f"the end of {BROWSER_DEPS_LOG}:\n" + "\n".join(tail)


@pytest.fixture(scope="session")
def browser_available():
    """Skip (condition named) where the browser is missing, or fail saying why under `make test`.
    Session-scoped so that it runs before any module fixture starts JupyterLab."""
    why = browser_missing()
    if why is None:
        return
    if REQUIRE_BROWSER:
        pytest.fail(f"the browser tests cannot run: {why}. `make test` requires them; "
                    f"`make browser-deps` installs the browser. {_install_log_tail()}", pytrace=False)
    pytest.skip(why)


def pytest_terminal_summary(terminalreporter):
    """Under `make test`, one line that says whether the browser tests ran, so a log shows it."""
    if not REQUIRE_BROWSER:
        return
    counts: dict[str, int] = {}
    for outcome in ("passed", "failed", "error", "skipped"):
        for report in terminalreporter.stats.get(outcome, []):
            if any(f"/{name}" in f"/{report.nodeid}" for name in BROWSER_TESTS):
                counts[outcome] = counts.get(outcome, 0) + 1
    said = ", ".join(f"{n} {k}" for k, n in counts.items()) or "none collected"
    terminalreporter.write_line(f"browser tests (headless Chromium {chromium() or 'missing'}): {said}")
