"""Every table gpushare shows in a notebook reads in JupyterLab, trusted or not: at most
eight columns in the main row, the rest on a detail line; alignment and widths inline (JupyterLab's
``td{text-align:right}`` beats a ``<style>`` block, and an untrusted notebook has none), text at
least ten characters wide, long device strings breakable only at ``/``, ``:`` or spaces.

The structure is checked here on real results; tests/test_browser.py checks what Chromium makes of it.
"""

from __future__ import annotations

import html.parser
import os

import pytest

import gpushare

torch = pytest.importorskip("torch")

MAX_COLUMNS = 8


class _Tables(html.parser.HTMLParser):
    """Each table's header cells and every cell's tag attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[dict] = []
        self._in_head = False

    def handle_starttag(self, tag: str, attrs: list) -> None:
        a = dict(attrs)
        if tag == "table":
            self.tables.append({"classes": a.get("class", ""), "header": [], "cells": [], "wbr": 0})
        elif tag == "thead":
            self._in_head = True
        elif tag in ("td", "th") and self.tables:
            self.tables[-1]["cells"].append(a)
            if self._in_head:
                self.tables[-1]["header"].append(a)
        elif tag == "wbr" and self.tables:
            self.tables[-1]["wbr"] += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "thead":
            self._in_head = False


def tables_of(page: str) -> list[dict]:
    parser = _Tables()
    parser.feed(page)
    return parser.tables


def problems(page: str) -> list[str]:
    out = []
    for t in tables_of(page):
        if len(t["header"]) > MAX_COLUMNS:
            out.append(f"{t['classes']}: {len(t['header'])} columns in the main row")
        for cell in t["cells"]:
            style = cell.get("style") or ""
            if "colspan" in cell or "num" in (cell.get("class") or "").split():
                want = "text-align:left" if "colspan" in cell else "text-align:right"
                if want not in style:
                    out.append(f"{t['classes']}: cell {cell} lacks inline {want}")
            elif not ("text-align:left" in style and "min-width:" in style):
                out.append(f"{t['classes']}: text cell {cell} lacks inline left alignment and a minimum width")
            if "anywhere" in style or "ch;" in style:
                out.append(f"{t['classes']}: {style!r} relies on what the untrusted sanitiser drops")
    return out


def test_share_table_fits_and_breaks_devices_only_at_slashes_and_colons():
    tf = pytest.importorskip("tensorflow")
    x = torch.arange(12, dtype=torch.int64)
    page = gpushare.share(x, "tf")._repr_html_()
    assert problems(page) == []
    (table,) = tables_of(page)
    assert table["wbr"] > 0, "TensorFlow's /job:localhost/... device string has no break opportunities"
    assert "/<wbr>job:<wbr>localhost" in page
    del tf


def test_comparison_and_benchmark_tables():
    x = torch.arange(1024, dtype=torch.float32)
    c = gpushare.compare(x, "numpy", repeat=3)
    b = gpushare.bench("torch", "numpy", sizes=["4KiB"], paths="dlpack,host", repeat=3, progress=False)
    assert problems(c._repr_html_()) == []
    assert problems(b._repr_html_()) == []


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="no /proc/self/maps (not Linux)")
def test_process_tables():
    with gpushare.Worker(device="cpu", timeout=60) as w:
        c = gpushare.compare(torch.ones(1024), "torch", across=w, repeat=2)
    b = gpushare.bench("torch", "torch", sizes=["4KiB"], paths="shm,gloo", repeat=2, across="processes", device="cpu")
    for page in (c._repr_html_(), b._repr_html_()):
        assert tables_of(page), page
        assert problems(page) == []
    assert "mechanism" in c._repr_html_()  # moved to the detail line, not lost


def test_gpuinfo_tables():
    page = gpushare.gpuinfo()._repr_html_()
    assert tables_of(page)
    assert problems(page) == []
