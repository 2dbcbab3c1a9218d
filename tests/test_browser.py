"""A gpushare table, as a person sees it: JupyterLab serves an executed notebook on loopback and
headless Chromium renders it. The DOM must hold ``<table class="gpushare">`` inside an output
area (rendered as a table, not shown as text), and a screenshot is kept under
``out/test-artifacts/`` for a human to look at.

The notebook is the tour executed by ``gpushare run`` (shared with tests/test_notebooks.py), opened
as a user would open it from ``out/``: not trusted, so JupyterLab sanitises its HTML.
"""

from __future__ import annotations

import html.parser
import importlib.util
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

import _notebooks as nbs

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARTIFACTS = nbs.ROOT / "out" / "test-artifacts"
NOTEBOOK = "01_tour_cpu"
SERVER_START_S = 90
CHROMIUM_S = 120
VIRTUAL_TIME_MS = 30_000

pytestmark = [
    pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed"),
    pytest.mark.skipif(importlib.util.find_spec("jupyterlab") is None, reason="jupyterlab not installed"),
    pytest.mark.skipif(
        not all(importlib.util.find_spec(m) for m in ("torch", "jax", "tensorflow", "nbformat")),
        reason="the tour notebook needs torch, jax, tensorflow and nbformat",
    ),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_until_up(url: str, server: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + SERVER_START_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"jupyter lab exited with {server.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    pytest.fail(f"jupyter lab did not answer within {SERVER_START_S} s:\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab on 127.0.0.1:PORT with a token, serving a temporary copy of the executed tour.
    Its config, runtime, settings and workspace directories are temporary too."""
    session = nbs.session(tmp_path_factory)
    run = nbs.run_gpushare(session, NOTEBOOK)
    assert run.returncode == 0 and run.path.exists(), f"gpushare run {NOTEBOOK} failed:\n{run.log}"
    base = tmp_path_factory.mktemp("lab")
    root = base / "root"
    root.mkdir()
    shutil.copy(run.path, root / f"{NOTEBOOK}.ipynb")
    settings = base / "settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    # No "get notified about Jupyter news?" toast over the screenshot.
    (settings / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false"}))
    port, token = _free_port(), secrets.token_hex(16)
    env = {
        **session.env,  # JUPYTER_PATH: the gpushare kernelspec the notebook names
        "JUPYTER_CONFIG_DIR": str(base / "config"),
        "JUPYTER_RUNTIME_DIR": str(base / "runtime"),
        "JUPYTERLAB_SETTINGS_DIR": str(base / "settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(base / "workspaces"),
    }
    log = base / "server.log"
    cmd = [
        sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
        f"--ServerApp.token={token}", f"--ServerApp.root_dir={root}", "--ServerApp.port_retries=0",
        "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    with open(log, "w") as out:
        server = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=base)
    try:
        _wait_until_up(f"http://127.0.0.1:{port}/api/status?token={token}", server, log)
        yield {"url": f"http://127.0.0.1:{port}/lab/tree/{NOTEBOOK}.ipynb?token={token}", "base": base, "log": log}
    finally:
        server.terminate()  # the server shuts its kernels down on SIGTERM
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)


def _chromium(lab: dict, *args: str) -> subprocess.CompletedProcess:
    profile = lab["base"] / "chromium-profile"
    cmd = [
        CHROMIUM, "--headless", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
        "--hide-scrollbars", f"--user-data-dir={profile}", "--window-size=1800,1800",
        f"--virtual-time-budget={VIRTUAL_TIME_MS}", *args, lab["url"],
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.insert(1, "--no-sandbox")  # Chromium's sandbox refuses to run as root
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=CHROMIUM_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"chromium did not finish within {CHROMIUM_S} s")


class _TablesInOutputs(html.parser.HTMLParser):
    """Counts ``<table class="gpushare …">`` elements and those inside a JupyterLab output area."""

    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[tuple[str, list[str]]] = []
        self.tables = self.in_output = 0
        self.cells: list[str] = []
        self._in_table_cell = False

    def handle_starttag(self, tag: str, attrs: list) -> None:
        classes = (dict(attrs).get("class") or "").split()
        if tag == "table" and "gpushare" in classes:
            self.tables += 1
            if any("jp-OutputArea-output" in c for _, cs in self.stack for c in cs):
                self.in_output += 1
        if tag in ("td", "th") and any(t == "table" and "gpushare" in cs for t, cs in self.stack):
            self._in_table_cell = True
        if tag not in self.VOID:
            self.stack.append((tag, classes))

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th"):
            self._in_table_cell = False
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                del self.stack[i:]
                break

    def handle_data(self, data: str) -> None:
        if self._in_table_cell and data.strip():
            self.cells.append(data.strip())


def test_gpushare_table_renders_in_jupyterlab(lab):
    dom = _chromium(lab, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-3000:]
    page = dom.stdout
    assert "jp-Notebook" in page, f"JupyterLab did not render the notebook:\n{page[:2000]}"
    parser = _TablesInOutputs()
    parser.feed(page)
    assert parser.in_output > 0, (
        f"{parser.tables} gpushare tables, none inside an output area; server log:\n{lab['log'].read_text()[-2000:]}"
    )
    # Rendered as a table of cells, not as escaped markup in a text output.
    assert "&lt;table class=\"gpushare" not in page
    assert "torch→tf" in parser.cells and any(c.startswith("shared") for c in parser.cells)

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / f"jupyterlab_{NOTEBOOK}.html").write_text(page)
    shot = ARTIFACTS / f"jupyterlab_{NOTEBOOK}.png"
    shot.unlink(missing_ok=True)
    result = _chromium(lab, f"--screenshot={shot}")
    assert result.returncode == 0 and shot.exists() and shot.stat().st_size > 10_000, result.stderr[-3000:]
