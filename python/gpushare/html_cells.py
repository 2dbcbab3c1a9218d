"""Table cells for the tables Python renders (the process tables, ``%gpuinfo``), laid out as the
Rust tables are, with the styles crates/core/src/render/cells.rs defines (``_native.CELL_STYLES``).

Every rule is inline: JupyterLab's own ``td{text-align:right}`` beats a ``<style>`` block, and an
untrusted notebook loses the block altogether. Its sanitiser keeps ``text-align``,
``vertical-align``, ``white-space``, ``min-width`` and ``max-width`` in px/em (not ``ch``, not
``overflow-wrap:anywhere``). Text is left-aligned and at least ten monospace characters wide,
numbers right-aligned; long identifiers break only after ``/`` and ``:`` (``<wbr>``) or at spaces;
padding is small, so a table fits a 1024-pixel window with JupyterLab's file browser open.
"""

from __future__ import annotations

import html
from typing import Iterable, Sequence

from gpushare import _native

TEXT_STYLE = _native.CELL_STYLES["text"]
NUM_STYLE = _native.CELL_STYLES["num"]
#: A number column's heading wraps at spaces: it is often wider than any number under it.
NUM_HEAD_STYLE = _native.CELL_STYLES["num_head"]
DETAIL_STYLE = _native.CELL_STYLES["detail"]
TABLE_STYLE = _native.CELL_STYLES["table"]


def breakable(text: str) -> str:
    """``text`` escaped, with ``<wbr>`` after every ``/`` and ``:`` (and breaks nowhere else but spaces)."""
    return "".join(html.escape(c) + ("<wbr>" if c in "/:" else "") for c in text)


def th(label: str, numeric: bool = False) -> str:
    if numeric:
        return f'<th class="num" style="{NUM_HEAD_STYLE}">{html.escape(label)}</th>'
    return f'<th style="{TEXT_STYLE}">{html.escape(label)}</th>'


def td(text: str, numeric: bool = False) -> str:
    if numeric:
        return f'<td class="num" style="{NUM_STYLE}">{html.escape(text)}</td>'
    return f'<td style="{TEXT_STYLE}">{breakable(text)}</td>'


def detail_row(columns: int, pairs: Iterable[tuple[str, str]]) -> str:
    """A line under a row spanning its ``columns``: ``label value · label value`` (empty values left out)."""
    items = [
        f'<span style="white-space:nowrap">{html.escape(label)}</span> {breakable(value)}'
        for label, value in pairs if value
    ]
    if not items:
        return ""
    return f'<tr class="gpushare-detail"><td colspan="{columns}" style="{DETAIL_STYLE}">{" · ".join(items)}</td></tr>'


def table(
    header: Sequence[str],
    rows: Iterable[Sequence[str]],
    *,
    numeric: Sequence[str] = (),
    details: Iterable[Iterable[tuple[str, str]]] | None = None,
    classes: str = "gpushare",
) -> str:
    """An HTML table: ``numeric`` names the right-aligned columns; ``details`` (one list of
    ``(label, value)`` per row) become a detail line under each row."""
    rows = list(rows)
    detail_lists = list(details) if details is not None else [()] * len(rows)
    head = "".join(th(h, h in numeric) for h in header)
    body = []
    for row, extra in zip(rows, detail_lists):
        body.append("<tr>" + "".join(td(c, h in numeric) for h, c in zip(header, row)) + "</tr>")
        body.append(detail_row(len(header), extra))
    return (
        f'<table class="{classes}" style="{TABLE_STYLE}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table>"
    )
