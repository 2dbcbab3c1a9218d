"""gpushare's tables fit and read in JupyterLab, measured by Chromium from the DOM.

Extends tests/test_browser.py (whose server and Chromium helpers it uses): a notebook with
``%%share`` into TensorFlow, a copy with its reason, a chain, ``--path all``, ``%sharebench``, a
comparison to a worker process and one handoff to it is executed by ``gpushare run`` and opened in JupyterLab untrusted (as a file
from disk is) and trusted (signed, so the ``<style>`` block is kept), each at 1440 and 1024 px
wide. For every ``table.gpushare`` in an output the probe page reports each cell's box, its
content's extent, its computed alignment and the width of a character in its font; the checks:

- no two cells' boxes overlap (content that runs out of its cell overlaps its neighbour);
- no cell is cut by its output area's edge (a table wider than the output scrolls out of view);
- every text column is at least ten characters wide;
- text cells are left-aligned (JupyterLab's own ``td{text-align:right}`` wins over a ``<style>`` block).

A screenshot of each notebook × trust × width is kept under ``out/test-artifacts/layout/``. The
older rendering (thirteen-column rows, alignment from the ``<style>`` block,
``overflow-wrap:anywhere``) failed these checks: see the report of the commit that added them.
"""

from __future__ import annotations

import html
import json
import os
import re
import secrets
import subprocess
import sys
import urllib.parse

import pytest

import _notebooks as nbs
import test_browser as tb

pytestmark = tb.pytestmark + [
    pytest.mark.skipif(
        not all(__import__("importlib.util").util.find_spec(m) for m in ("tensorflow", "jax")),
        reason="the notebook converts into TensorFlow and JAX",
    ),
]

NOTEBOOK = "browser_tables"
TRUSTED = "browser_tables_trusted"
WIDTHS = (1440, 1024)
ARTIFACTS = tb.ARTIFACTS / "layout"
#: Characters a text column must hold at the least.
MIN_TEXT_CHARS = 10
#: Sub-pixel rounding of borders and of the measurements.
SLACK_PX = 1.0
CELLS = [
    "import gpushare, torch\nx = torch.arange(12, dtype=torch.float32)\ni = torch.arange(12, dtype=torch.int64)",
    # TensorFlow's device string (/job:localhost/replica:0/task:0/device:CPU:0) and an int64 beside a float32.
    "%%share torch->tf\nt32 = torch.ones(3, 4)\nt64 = torch.arange(6, dtype=torch.int64)",
    # JAX without x64 narrows int64: a copy, with its reason.
    "%share i torch->jax -n 1 -r 3",
    "%%share torch->jax->numpy -n 1 -r 3\nc = torch.ones(8)",
    "%share x torch->numpy --path all -r 3",
    "%sharebench torch->numpy --sizes 4KiB,64KiB --paths dlpack,host --device cpu -r 3",
    # Every path: on a machine without CUDA the ones that cannot run are one footnote, on a GPU
    # all seven are columns; either way the table fits.
    "%sharebench torch->jax --sizes 4KiB,64KiB,1MiB --paths all -r 3",
    "gpushare.compare(x, 'jax', repeat=3)",
    "gpushare.advise(x, 'jax')",
    "gpushare.inspect(t32)",
    "%gpuinfo",
    # A comparison to a worker (a comparison as every other), and one handoff to a worker (its own table).
    "from IPython.display import display\n"
    "with gpushare.Worker(device='cpu', timeout=60) as w:\n"
    "    pc = gpushare.compare(torch.ones(1024), 'torch', across=w, repeat=2)\n"
    "    ps = w.share(torch.ones(1024), path='shm', repeat=2)\n"
    "display(pc)\nps",
]
#: Cells that fail on purpose: the error a user sees must fit too (tagged raises-exception).
ERROR_CELLS = [
    "%share x torch->jxa",
    "gpushare.share(x, 'jax', path='teleport')",
]
PROBE = "gpushare-layout-probe.html"
PROBE_NOTEBOOK_MS = 30_000
CHROMIUM_S = 300

#: Loads each target ({name, url, width, tables}) in a same-origin iframe of that width, waits for
#: its gpushare tables, and writes each table's cells (boxes, content extents, alignment) and its
#: output area's box as JSON into <pre id="report">.
PROBE_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>gpushare layout probe</title></head>
<body style="margin:0"><pre id="report">{}</pre><div id="frames"></div>
<script>
const LIMIT_MS = %(limit)d;
const targets = JSON.parse(decodeURIComponent(location.hash.slice(1)));
const report = {};
const sleep = ms => new Promise(r => setTimeout(r, ms));
const write = () => { document.getElementById("report").textContent = JSON.stringify(report); };
const box = r => [r.left, r.top, r.right, r.bottom];

function charWidth(doc, win, cell) {
  const probe = doc.createElement("span");
  probe.textContent = "0000000000";
  probe.style.cssText = "position:absolute;visibility:hidden;white-space:nowrap";
  probe.style.font = win.getComputedStyle(cell).font;
  doc.body.appendChild(probe);
  const w = probe.getBoundingClientRect().width / 10;
  probe.remove();
  return w;
}
function cellInfo(doc, win, c) {
  const range = doc.createRange();
  range.selectNodeContents(c);
  const rects = [...range.getClientRects()].filter(r => r.width > 0 && r.height > 0);
  const content = rects.length ? [Math.min(...rects.map(r => r.left)), Math.min(...rects.map(r => r.top)),
                                  Math.max(...rects.map(r => r.right)), Math.max(...rects.map(r => r.bottom))] : null;
  const cs = win.getComputedStyle(c);
  return {text: c.textContent.trim().slice(0, 48), num: c.classList.contains("num"), colspan: c.colSpan,
          align: cs.textAlign, box: box(c.getBoundingClientRect()), content, ch: charWidth(doc, win, c)};
}
function measure(doc, win, tables) {
  return tables.map(t => {
    const area = t.closest(".jp-OutputArea-output");
    return {classes: t.className, area: box(area.getBoundingClientRect()),
            cells: [...t.querySelectorAll("td, th")].map(c => cellInfo(doc, win, c))};
  });
}
function texts(doc) {
  // Text outputs (errors, warnings, printed tables): a line wider than the output scrolls.
  return [...doc.querySelectorAll(".jp-OutputArea-output pre")].map(p => ({
    text: p.textContent.slice(0, 80), scroll: p.scrollWidth, client: p.clientWidth,
    error: !!p.closest('[data-mime-type="application/vnd.jupyter.stderr"]') || /Error/.test(p.textContent.slice(0, 400))}));
}
async function probe(target) {
  const frame = document.createElement("iframe");
  frame.style.cssText = `width:${target.width}px;height:1800px;border:0`;
  document.getElementById("frames").appendChild(frame);
  frame.src = target.url;
  const start = performance.now();
  let seen = 0;
  try {
    while (performance.now() - start < LIMIT_MS) {
      await sleep(250);
      const doc = frame.contentDocument;
      if (!doc) continue;
      const tables = [...doc.querySelectorAll(".jp-OutputArea-output table.gpushare")];
      seen = tables.length;
      if (tables.length < target.tables) continue;
      await sleep(500);  // fonts and images settle
      return {ready: true, trusted: !doc.querySelector(".jp-OutputArea-output style") ? false : true,
              tables: measure(doc, frame.contentWindow, tables), texts: texts(doc)};
    }
    return {ready: false, seen};
  } finally {
    frame.remove();
  }
}
(async () => {
  for (const t of targets) {
    try { report[t.key] = await probe(t); } catch (e) { report[t.key] = {ready: false, error: String(e)}; }
    write();
  }
  report.done = true;
  write();
})();
</script></body></html>
""" % {"limit": PROBE_NOTEBOOK_MS}


def _execute(session: nbs.Session, base) -> "os.PathLike":
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": nbs.KERNEL, "display_name": "Python (gpushare)", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(src) for src in CELLS]
    nb.cells += [nbformat.v4.new_code_cell(src, metadata={"tags": ["raises-exception"]}) for src in ERROR_CELLS]
    source, out = base / "src" / f"{NOTEBOOK}.ipynb", base / "executed" / f"{NOTEBOOK}.ipynb"
    source.parent.mkdir()
    nbformat.write(nb, source)
    cmd = [str(nbs.gpushare_bin()), "run", str(source), "-o", str(out), "--timeout", str(nbs.CELL_TIMEOUT_S)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=session.env, timeout=nbs.NOTEBOOK_TIMEOUT_S)
    assert proc.returncode == 0 and out.exists(), f"gpushare run {NOTEBOOK} failed:\n{proc.stdout}\n{proc.stderr}"
    return out


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab serving the executed notebook twice: as written (untrusted) and signed (trusted)."""
    import nbformat
    from nbformat.sign import NotebookNotary

    session = nbs.session(tmp_path_factory)
    base = tmp_path_factory.mktemp("layout")
    executed = _execute(session, base)
    root, static, data = base / "root", base / "static", base / "data"
    for d in (root, static, data):
        d.mkdir()
    (root / f"{NOTEBOOK}.ipynb").write_bytes(executed.read_bytes())
    nb = nbformat.read(executed, as_version=4)
    # The notary trusts content, not a file: the signed copy must differ from the unsigned one.
    nb.metadata["gpushare_test"] = {"copy": "trusted"}
    NotebookNotary(data_dir=str(data)).sign(nb)
    nbformat.write(nb, root / f"{TRUSTED}.ipynb")
    (static / PROBE).write_text(PROBE_PAGE)
    tables = sum(h.count('<table class="gpushare') for h in nbs.html_outputs(nb))
    for setting, value in (("apputils-extension/notification", {"fetchNews": "false"}),
                           ("notebook-extension/tracker", {"windowingMode": "none"})):
        path = base / "settings" / "@jupyterlab" / f"{setting}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value))
    port, token = tb._free_port(), secrets.token_hex(16)
    env = {
        **session.env, "JUPYTER_CONFIG_DIR": str(base / "config"), "JUPYTER_RUNTIME_DIR": str(base / "runtime"),
        "JUPYTER_DATA_DIR": str(data),  # where the notary's secret and signatures are: the signed copy is trusted
        "JUPYTERLAB_SETTINGS_DIR": str(base / "settings"), "JUPYTERLAB_WORKSPACES_DIR": str(base / "workspaces"),
    }
    cmd = [
        sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
        f"--ServerApp.token={token}", f"--ServerApp.root_dir={root}", "--ServerApp.port_retries=0",
        "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        f"--ServerApp.extra_static_paths={static}",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    log = base / "server.log"
    with open(log, "w") as out:
        server = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=base)
    try:
        tb._wait_until_up(f"http://127.0.0.1:{port}/api/status?token={token}", server, log)
        yield {"origin": f"http://127.0.0.1:{port}", "token": token, "base": base, "log": log, "tables": tables,
               "url": f"http://127.0.0.1:{port}/lab?token={token}"}
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)


def _url(lab: dict, name: str, workspace: str) -> str:
    return f"{lab['origin']}/lab/workspaces/{workspace}/tree/{name}.ipynb?reset&token={lab['token']}"


def _probe(lab: dict, name: str) -> dict:
    targets = [{"key": f"{name}@{w}", "url": _url(lab, name, f"layout-{name}-{w}"), "width": w, "tables": lab["tables"]}
               for w in WIDTHS]
    url = f"{lab['origin']}/static/{PROBE}#" + urllib.parse.quote(json.dumps(targets))
    profile = lab["base"] / f"chromium-{name}"
    cmd = [tb.CHROMIUM, "--headless", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run", "--hide-scrollbars",
           f"--user-data-dir={profile}", "--window-size=1800,1800",
           f"--virtual-time-budget={PROBE_NOTEBOOK_MS * len(targets) + 10_000}", "--dump-dom", url]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.insert(1, "--no-sandbox")
    dom = subprocess.run(cmd, capture_output=True, text=True, timeout=CHROMIUM_S)
    assert dom.returncode == 0, dom.stderr[-3000:]
    found = re.search(r'<pre id="report">(.*?)</pre>', dom.stdout, re.S)
    assert found, f"the probe page did not load:\n{dom.stdout[:2000]}"
    report = json.loads(html.unescape(found.group(1)))
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / f"{name}.json").write_text(json.dumps(report, indent=1))
    for t in targets:
        assert report.get(t["key"], {}).get("ready"), (
            f"{t['key']} did not render its {lab['tables']} gpushare tables: {report.get(t['key'])}; "
            f"server log:\n{lab['log'].read_text()[-2000:]}"
        )
    return report


def _overlap(a: list[float], b: list[float]) -> bool:
    return min(a[2], b[2]) - max(a[0], b[0]) > SLACK_PX and min(a[3], b[3]) - max(a[1], b[1]) > SLACK_PX


def layout_problems(tables: list[dict]) -> list[str]:
    """What a reader would see wrong, one line each (see the module docstring)."""
    out = []
    for t in tables:
        name = t["classes"]
        cells = t["cells"]
        left, right = t["area"][0], t["area"][2]
        for i, c in enumerate(cells):
            extent = c["box"] if c["content"] is None else [
                min(c["box"][0], c["content"][0]), min(c["box"][1], c["content"][1]),
                max(c["box"][2], c["content"][2]), max(c["box"][3], c["content"][3])]
            if extent[2] > right + SLACK_PX or extent[0] < left - SLACK_PX:
                out.append(f"cut: {name}: {c['text']!r} reaches {extent[2]:.0f} px, the output ends at {right:.0f}")
            for d in cells[i + 1:]:
                if _overlap(extent, d["box"]) or (d["content"] and _overlap(d["content"], c["box"])):
                    out.append(f"overlap: {name}: {c['text']!r} and {d['text']!r}")
            if c["num"]:
                continue
            if c["align"] not in ("left", "start", "-webkit-left"):
                out.append(f"align: {name}: text {c['text']!r} is aligned {c['align']}")
            width = c["box"][2] - c["box"][0]
            if c["colspan"] == 1 and width + SLACK_PX < MIN_TEXT_CHARS * c["ch"]:
                out.append(f"narrow: {name}: {c['text']!r} is {width / c['ch']:.1f} characters wide")
    return out


def _screenshots(lab: dict, name: str) -> None:
    for w in WIDTHS:
        shot = ARTIFACTS / f"{name}_{w}px.png"
        shot.unlink(missing_ok=True)
        result = tb._chromium(lab, f"--screenshot={shot}", f"--window-size={w},3200",
                              url=_url(lab, name, f"shot-{name}-{w}"))
        assert result.returncode == 0 and shot.exists() and shot.stat().st_size > 10_000, result.stderr[-3000:]


@pytest.mark.parametrize("name", [NOTEBOOK, TRUSTED], ids=["untrusted", "trusted"])
def test_tables_fit_and_read(lab, name):
    report = _probe(lab, name)
    kinds = set()
    for w in WIDTHS:
        r = report[f"{name}@{w}"]
        assert r["trusted"] == (name == TRUSTED), f"{name} at {w} px: trusted={r['trusted']}"
        kinds |= {k for t in r["tables"] for k in t["classes"].split()}
        problems = layout_problems(r["tables"]) + [
            f"text output scrolls: {t['text']!r} is {t['scroll']} px in {t['client']} px"
            for t in r.get("texts", []) if t["scroll"] > t["client"] + SLACK_PX]
        assert problems == [], f"{name} at {w} px:\n" + "\n".join(problems[:40])
        assert any(t["error"] for t in r.get("texts", [])), f"{name} at {w} px: the error outputs were not measured"
    # Every kind of table was measured: %share, --path all, %sharebench, compare, advise, inspect,
    # %gpuinfo, a handoff to a worker (the comparison to a worker is a gpushare-comparison).
    assert {"gpushare-comparison", "gpushare-bench", "gpushare-processes", "gpushare-advice", "gpushare-inspect",
            "gpushare-gpuinfo-frameworks"} <= kinds, kinds
    _screenshots(lab, name)
