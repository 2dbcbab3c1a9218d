"""The repository holds the product: its READMEs' examples paste into notebook cells as written, and
no tracked text speaks of how the work was organised (working sessions, device leases, issue
numbers, dated runs cited as sources) instead of stating the fact."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
READMES = ("README.md", "README-pypi.md")


def python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


@pytest.mark.parametrize("readme", READMES)
def test_readme_examples_paste_into_cells_as_written(readme):
    blocks = python_blocks((ROOT / readme).read_text(encoding="utf-8"))
    assert blocks, f"{readme} has no python example"
    for block in blocks:
        lines = [line for line in block.splitlines() if line.strip()]
        # A cell magic works only as a cell's first line: pasted below anything else, IPython
        # answers "Line magic function `%%share` not found".
        later = [line for line in lines[1:] if line.lstrip().startswith("%%")]
        assert not later, f"{readme}: a cell magic after the first line of a block:\n{block}"


def test_the_package_page_shows_calibrate_and_advise():
    page = (ROOT / "README-pypi.md").read_text(encoding="utf-8")
    assert "gpushare.calibrate()" in page and "gpushare.advise(" in page
