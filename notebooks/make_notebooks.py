"""Writes the demo notebooks of gpushare from their cell lists, so that they are reviewed as code.

    python notebooks/make_notebooks.py           # (re)write notebooks/*.ipynb, unexecuted
    python notebooks/make_notebooks.py --check   # exit 1 if a committed notebook differs

The notebooks are nbformat 4.5 with stable cell ids (``<notebook>-<nn>``), no outputs and the
``gpushare`` kernelspec, so regenerating them gives byte-identical files and a diff shows only what
a cell list changed. Run them with ``gpushare run notebooks/01_tour_cpu.ipynb -o out/``.

Conventions: a cell that is meant to fail is tagged ``raises-exception`` (``gpushare run``,
nbclient and nbmake go on after it); the cell of notebook parameters is tagged ``parameters``
(``gpushare run -p size=4096``, papermill).

The cell lists live beside this script: cells_cpu.py (01, 02), cells_gpu.py (03, 04, 07) and
cells_multi.py (05, 06), cells_advice.py (08), cells_contexts.py (09), cells_hosts.py (10), built with md()
and code() from cells_common.py.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent
# The cell lists live in modules beside this script; it is also loaded by file path (tests), where
# its folder is not on sys.path.
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from cells_cpu import TORCH_TO_TF, TOUR  # noqa: E402
from cells_gpu import MEMORY_GPU, PATHS_GPU, TF_GPU  # noqa: E402
from cells_multi import PROCESSES, SEVERAL_GPUS  # noqa: E402
from cells_advice import PATH_ADVICE  # noqa: E402
from cells_contexts import CONTEXT_STORY  # noqa: E402
from cells_hosts import ACROSS_HOSTS  # noqa: E402

KERNELSPEC = {"name": "gpushare", "display_name": "Python (gpushare)", "language": "python"}


NOTEBOOKS = {
    "01_tour_cpu": TOUR,
    "02_torch_to_tensorflow": TORCH_TO_TF,
    "03_transfer_paths_gpu": PATHS_GPU,
    "04_memory_and_contexts_gpu": MEMORY_GPU,
    "05_several_gpus": SEVERAL_GPUS,
    "06_processes": PROCESSES,
    "07_tensorflow_gpu": TF_GPU,
    "08_path_advice_gpu": PATH_ADVICE,
    "09_pycuda_tensorflow_contexts_gpu": CONTEXT_STORY,
    "10_across_hosts": ACROSS_HOSTS,
}


def build(stem: str, cells: list) -> nbformat.NotebookNode:
    nb = new_notebook()
    nb.nbformat, nb.nbformat_minor = 4, 5
    nb.metadata = {
        "kernelspec": dict(KERNELSPEC),
        "language_info": {"name": "python"},
    }
    for index, (kind, source, tags) in enumerate(cells):
        cell = new_markdown_cell(source) if kind == "markdown" else new_code_cell(source)
        cell.id = f"{stem.split('_')[0]}-{index:02d}"
        if tags:
            cell.metadata["tags"] = list(tags)
        nb.cells.append(cell)
    nbformat.validate(nb)
    return nb


def render(nb: nbformat.NotebookNode) -> str:
    return nbformat.writes(nb) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if a notebook on disk differs")
    parser.add_argument("--out", type=Path, default=HERE, help="directory to write (default: here)")
    args = parser.parse_args(argv)
    stale = []
    for stem, cells in NOTEBOOKS.items():
        path = args.out / f"{stem}.ipynb"
        text = render(build(stem, cells))
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(path.name)
        else:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path}")
    if stale:
        print(f"out of date (run python notebooks/make_notebooks.py): {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())