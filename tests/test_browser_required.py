"""Under `make test` the browser tests run or fail saying why; elsewhere they skip naming the
condition. Checked in a real pytest process whose PATH holds no browser."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import require

HERE = Path(__file__).resolve().parent


def _pytest_without_a_browser(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    empty = tmp_path / "bin"
    empty.mkdir()
    run_env = {k: v for k, v in os.environ.items() if not k.startswith("GPUSHARE_REQUIRE_BROWSER")}
    run_env.update(PATH=str(empty), **env)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
         str(HERE / "test_browser.py"), str(HERE / "test_browser_layout.py")],
        capture_output=True, text=True, env=run_env, cwd=tmp_path, timeout=600,
    )


# The browser tests skip without these (a framework not installed) before they look for a browser.
@require("torch")
@require("jax")
@require("tensorflow")
@require("nbformat")
def test_a_missing_browser_fails_the_browser_tests_under_make_test_and_says_why(tmp_path):
    log = tmp_path / "browser-deps.log"
    log.write_text("E: Unable to locate package chromium\n")
    proc = _pytest_without_a_browser(tmp_path, GPUSHARE_REQUIRE_BROWSER="1", GPUSHARE_BROWSER_DEPS_LOG=str(log))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "the browser tests cannot run: chromium not installed" in out, out
    assert "E: Unable to locate package chromium" in out, out  # apt-get's own words reach the run
    assert " skipped" not in out.splitlines()[-1], out
    assert "browser tests (headless Chromium missing): " in out, out


def test_elsewhere_a_missing_browser_skips_them_naming_the_condition(tmp_path):
    proc = _pytest_without_a_browser(tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "not installed" in out, out  # chromium, or a framework the browser tests need
    assert "error" not in out.splitlines()[-1] and "failed" not in out.splitlines()[-1], out
