"""A gpushare table and plot, as a person sees them: JupyterLab serves executed notebooks on loopback
and headless Chromium renders them. The DOM must hold ``<table class="gpushare">`` inside an output
area (rendered as a table, not shown as text), and a screenshot is kept under
``out/test-artifacts/`` for a human to look at.

The notebooks are executed by ``gpushare run`` and opened as a user would open them from ``out/``:
not trusted, so JupyterLab sanitises their HTML (``<style>`` blocks, inline ``<svg>`` and
``image/svg+xml`` outputs are dropped). One is the tour (shared with tests/test_notebooks.py); the
tour has no ``%sharebench``, so a small notebook made here runs one sweep and one ``%share``. In it
the plot must be a decoded image and the tables' inline styles must reach the computed style. A copy
of that notebook with its output rewritten to an older rendering (inline SVG, styles in a
``<style>`` block only) must fail those same checks, so they are known to be able to fail.

Computed styles and ``naturalWidth`` exist only in the browser: a probe page, served by the same
server (same origin), loads each notebook in an iframe, measures it, and writes a JSON report into
its own DOM, which ``--dump-dom`` hands back, under virtual time like the table check.
"""

from __future__ import annotations

import base64
import html
import html.parser
import importlib.util
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

import _notebooks as nbs
from conftest import chromium

CHROMIUM = chromium()
ARTIFACTS = nbs.ROOT / "out" / "test-artifacts"
NOTEBOOK = "01_tour_cpu"
#: The small notebook this file writes: one sweep (its plot and tables) and one %share table.
BENCH = "browser_bench"
#: That notebook with its outputs rewritten to an older rendering (the negative control).
OLD = "browser_bench_old_rendering"
BENCH_CELLS = [
    "import torch\nx = torch.arange(12, dtype=torch.float32)",
    "%share x torch->numpy -n 1 -r 3",
    "%sharebench torch->numpy --sizes 4KiB,64KiB --paths dlpack,host --device cpu -r 3",
]
PROBE = "gpushare-browser-probe.html"
SERVER_START_S = 90
CHROMIUM_S = 120
VIRTUAL_TIME_MS = 30_000
#: Per notebook in the probe: JupyterLab's start, the notebook's rendering and the image decoding.
PROBE_NOTEBOOK_MS = 30_000

pytestmark = [
    # Chromium and JupyterLab: a skip naming what is missing, or under `make test` a failure.
    pytest.mark.usefixtures("browser_available"),
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
    bench = _run_bench_notebook(session, base)
    shutil.copy(bench, root / f"{BENCH}.ipynb")
    _write_old_rendering(bench, root / f"{OLD}.ipynb")
    static = base / "static"
    static.mkdir()
    (static / PROBE).write_text(PROBE_PAGE)
    settings = base / "settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    # No "get notified about Jupyter news?" toast over the screenshot.
    (settings / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false"}))
    # Every cell rendered whether or not it is in view: the probe measures outputs below the fold.
    tracker = base / "settings" / "@jupyterlab" / "notebook-extension"
    tracker.mkdir(parents=True)
    (tracker / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
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
        # The probe page: served from /static/ (not /files/, whose sandbox CSP would give it an
        # opaque origin, unable to read the JupyterLab iframe it loads).
        f"--ServerApp.extra_static_paths={static}",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    with open(log, "w") as out:
        server = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=base)
    try:
        _wait_until_up(f"http://127.0.0.1:{port}/api/status?token={token}", server, log)
        yield {
            "url": f"http://127.0.0.1:{port}/lab/tree/{NOTEBOOK}.ipynb?token={token}",
            "origin": f"http://127.0.0.1:{port}",
            "token": token,
            "base": base,
            "log": log,
        }
    finally:
        server.terminate()  # the server shuts its kernels down on SIGTERM
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)



def _run_bench_notebook(session: nbs.Session, base: Path) -> Path:
    """The small notebook, written with nbformat and executed by ``gpushare run`` on the gpushare kernel."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": nbs.KERNEL, "display_name": "Python (gpushare)", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(src) for src in BENCH_CELLS]
    source, out = base / "src" / f"{BENCH}.ipynb", base / "executed" / f"{BENCH}.ipynb"
    source.parent.mkdir()
    nbformat.write(nb, source)
    cmd = [str(nbs.gpushare_bin()), "run", str(source), "-o", str(out), "--timeout", str(nbs.CELL_TIMEOUT_S)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=session.env, timeout=nbs.NOTEBOOK_TIMEOUT_S)
    assert proc.returncode == 0 and out.exists(), f"gpushare run {BENCH} failed:\n{proc.stdout}\n{proc.stderr}"
    return out


_PLOT_IMG = re.compile(r'<img class="gpushare-plot"[^>]*src="data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)"\s*/?>')


def _html_outputs(nb: dict) -> list[str]:
    return [
        "".join(o["data"]["text/html"]) if isinstance(o["data"]["text/html"], list) else o["data"]["text/html"]
        for cell in nb["cells"] if cell["cell_type"] == "code"
        for o in cell.get("outputs", []) if "text/html" in o.get("data", {})
    ]


def _plot_svgs(nb_path: Path) -> list[str]:
    """The sweep's SVG, decoded from the ``<img>`` of the executed notebook's HTML output."""
    nb = json.loads(nb_path.read_text())
    return [base64.b64decode(m).decode() for h in _html_outputs(nb) for m in _PLOT_IMG.findall(h)]


def _write_old_rendering(executed: Path, dest: Path) -> None:
    """The same outputs as an older gpushare rendered them: the SVG inline in the HTML and
    the tables styled by the ``<style>`` block alone (no ``style=`` attributes)."""
    nb = json.loads(executed.read_text())
    for cell in nb["cells"]:
        for o in cell.get("outputs", []):
            data = o.get("data", {})
            if "text/html" not in data:
                continue
            h = "".join(data["text/html"]) if isinstance(data["text/html"], list) else data["text/html"]
            h = _PLOT_IMG.sub(lambda m: base64.b64decode(m.group(1)).decode(), h)
            h = re.sub(r'(<(?:table|th|td)\b[^>]*?) style="[^"]*"', r"\1", h)
            data["text/html"] = h
    dest.write_text(json.dumps(nb))


#: Loads each notebook of the URL's fragment (a JSON list of {name, url}) in a same-origin iframe,
#: waits for its gpushare tables (and the plot image to finish loading), and writes what the browser
#: computed as JSON into <pre id="report">. A notebook that never renders is reported as not ready.
PROBE_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>gpushare browser probe</title></head>
<body style="margin:0"><pre id="report">{}</pre><div id="frames"></div>
<script>
const LIMIT_MS = %(limit)d;
const targets = JSON.parse(decodeURIComponent(location.hash.slice(1)));
const report = {};
const sleep = ms => new Promise(r => setTimeout(r, ms));
const write = () => { document.getElementById("report").textContent = JSON.stringify(report); };

function cellInfo(el) {
  const cs = el.ownerDocument.defaultView.getComputedStyle(el);
  return {text: el.textContent.trim().slice(0, 40), classes: el.className,
          inlineColor: el.style.color, inlineWeight: el.style.fontWeight, inlineBackground: el.style.backgroundColor,
          color: cs.color, fontWeight: cs.fontWeight, background: cs.backgroundColor};
}
function tableInfo(t) {
  const verdict = td => /\\b(shared|copied|failed)\\b/.test(td.className);
  const cells = [...t.querySelectorAll("td")];
  const plain = cells.find(td => !verdict(td) && !td.style.color && !td.style.fontWeight && !td.style.backgroundColor);
  return {classes: t.className, verdicts: cells.filter(verdict).map(cellInfo), plain: plain ? cellInfo(plain) : null};
}
function measure(doc, outputs) {
  const imgs = outputs.flatMap(o => [...o.querySelectorAll("img")]);
  return {
    ready: true,
    outputs: outputs.length,
    styleBlocks: outputs.reduce((n, o) => n + o.querySelectorAll("style").length, 0),
    inlineSvgs: outputs.reduce((n, o) => n + o.querySelectorAll("svg").length, 0),
    images: imgs.map(i => ({classes: i.className, complete: i.complete, naturalWidth: i.naturalWidth,
                            naturalHeight: i.naturalHeight, width: i.getBoundingClientRect().width,
                            src: (i.getAttribute("src") || "").slice(0, 26)})),
    text: outputs.map(o => o.innerText).join("\\n"),
    tables: outputs.flatMap(o => [...o.querySelectorAll("table.gpushare")]).map(tableInfo),
  };
}
async function probe(target) {
  const frame = document.createElement("iframe");
  frame.style.cssText = "width:1800px;height:1700px;border:0";
  document.getElementById("frames").appendChild(frame);
  frame.src = target.url;
  const start = performance.now();
  let seen = null;
  try {
    while (performance.now() - start < LIMIT_MS) {
      await sleep(250);
      const doc = frame.contentDocument;
      if (!doc) continue;
      const outputs = [...doc.querySelectorAll(".jp-OutputArea-output")].filter(o => o.querySelector("table.gpushare"));
      seen = {ready: false, title: doc.title, notebooks: doc.querySelectorAll(".jp-Notebook").length,
              outputs: doc.querySelectorAll(".jp-OutputArea-output").length};
      if (!outputs.some(o => o.querySelector("table.gpushare-bench"))) continue;
      if (!outputs.some(o => o.querySelector("table.gpushare:not(.gpushare-bench)"))) continue;
      const pending = outputs.flatMap(o => [...o.querySelectorAll("img")]).filter(i => !i.complete);
      if (pending.length && performance.now() - start < LIMIT_MS - 2000) continue;
      return {...measure(doc, outputs), waitedMs: Math.round(performance.now() - start)};
    }
    return {...(seen || {ready: false, title: "no document"}), waitedMs: Math.round(performance.now() - start)};
  } finally {
    frame.remove();  // JupyterLab goes quiet, so the rest of the virtual time passes at once
  }
}
(async () => {
  for (const t of targets) {
    try { report[t.name] = await probe(t); } catch (e) { report[t.name] = {ready: false, error: String(e)}; }
    write();
  }
  report.done = true;
  write();
})();
</script></body></html>
""" % {"limit": PROBE_NOTEBOOK_MS}


def _chromium(lab: dict, *args: str, url: str | None = None, budget_ms: int = VIRTUAL_TIME_MS) -> subprocess.CompletedProcess:
    profile = lab["base"] / "chromium-profile"
    cmd = [
        CHROMIUM, "--headless", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
        "--hide-scrollbars", f"--user-data-dir={profile}", "--window-size=1800,1800",
        f"--virtual-time-budget={budget_ms}", *args, url or lab["url"],
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


def _probe(lab: dict, names: list[str]) -> dict:
    """What the browser computed for each notebook (see PROBE_PAGE)."""
    targets = [
        # A workspace of its own per notebook, so one JupyterLab does not reopen the other's tabs.
        {"name": n, "url": f"{lab['origin']}/lab/workspaces/probe-{i}/tree/{n}.ipynb?reset&token={lab['token']}"}
        for i, n in enumerate(names)
    ]
    url = f"{lab['origin']}/static/{PROBE}#" + urllib.parse.quote(json.dumps(targets))
    dom = _chromium(lab, "--dump-dom", url=url, budget_ms=PROBE_NOTEBOOK_MS * len(names) + 10_000)
    assert dom.returncode == 0, dom.stderr[-3000:]
    found = re.search(r'<pre id="report">(.*?)</pre>', dom.stdout, re.S)
    assert found, f"the probe page did not load:\n{dom.stdout[:2000]}"
    report = json.loads(html.unescape(found.group(1)))
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "jupyterlab_probe.json").write_text(json.dumps(report, indent=1))
    for n in names:
        assert report.get(n, {}).get("ready"), (
            f"{n} did not render its gpushare outputs in time: {report.get(n)}; "
            f"server log:\n{lab['log'].read_text()[-2000:]}"
        )
    return report


def _problems(r: dict, axis_labels: list[str]) -> list[str]:
    """What a user would see wrong in one notebook's gpushare outputs, by kind: ``plot:`` (no
    decoded image), ``text:`` (the plot's words run together as text), ``style:`` (a table's inline
    styles lost in sanitising)."""
    out = []
    plots = [i for i in r["images"] if "gpushare-plot" in i["classes"].split()]
    if not plots:
        out.append(f"plot: no <img class=gpushare-plot> in the outputs ({r['inlineSvgs']} inline <svg>)")
    for i in plots:
        if not (i["complete"] and i["naturalWidth"] > 0 and i["naturalHeight"] > 0 and i["width"] > 0):
            out.append(f"plot: the image did not decode or has no size: {i}")
    for label in axis_labels:
        if label in r["text"]:
            out.append(f"text: the plot's label {label!r} is shown as text")
    for t in r["tables"]:
        if not t["verdicts"]:
            continue
        base = t["plain"]
        assert base is not None, f"no unstyled cell to compare with in {t}"
        for v in t["verdicts"]:
            if not v["inlineColor"]:
                out.append(f"style: verdict cell {v['text']!r} of {t['classes']} has no inline colour")
            elif v["color"] != v["inlineColor"]:
                out.append(f"style: verdict cell {v['text']!r} computes {v['color']}, not its inline {v['inlineColor']}")
            if v["color"] == base["color"]:
                out.append(f"style: verdict cell {v['text']!r} has the unstyled colour {base['color']}")
            if int(v["fontWeight"]) < 600 or v["fontWeight"] == base["fontWeight"]:
                out.append(f"style: verdict cell {v['text']!r} is not bold ({v['fontWeight']} vs {base['fontWeight']})")
    return out


def test_plot_and_table_styles_survive_an_untrusted_notebook(lab):
    """%sharebench's plot is a decoded image, and verdict colours and weight come from the inline
    styles; the same notebook as an older gpushare rendered it fails these checks."""
    root = lab["base"] / "root"
    svgs = _plot_svgs(root / f"{BENCH}.ipynb")
    assert len(svgs) == 1, f"{len(svgs)} plot images in the executed {BENCH}"
    axis_labels = [html.unescape(t) for t in re.findall(r'<text class="axis-label"[^>]*>([^<]+)</text>', svgs[0])]
    assert "size (bytes)" in axis_labels, axis_labels
    report = _probe(lab, [BENCH, OLD])

    for name in (BENCH, OLD):
        r = report[name]
        # The sanitiser ran (an untrusted notebook): a trusted one would keep the <style> block and
        # pass the style checks without any inline style.
        assert r["styleBlocks"] == 0, f"{name}: a <style> block survived, so the notebook was trusted"
        classes = [t["classes"] for t in r["tables"] if t["verdicts"]]
        assert any("gpushare-bench" in c for c in classes) and any("gpushare-bench" not in c for c in classes), (
            f"{name}: expected verdict cells in the sweep's table and in the %share table: {r['tables']}"
        )

    assert _problems(report[BENCH], axis_labels) == []
    old = _problems(report[OLD], axis_labels)
    for kind in ("plot:", "text:", "style:"):
        assert any(p.startswith(kind) for p in old), f"the old rendering passed the {kind[:-1]} checks: {old}"
