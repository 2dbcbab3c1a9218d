"""The building blocks of the demo notebooks' cell lists (see make_notebooks.py, which writes them):
a cell is ``(kind, source, tags)``, made by :func:`md` or :func:`code`."""

from __future__ import annotations


def md(text: str) -> tuple[str, str, tuple[str, ...]]:
    return ("markdown", text.strip("\n"), ())


def code(text: str, *tags: str) -> tuple[str, str, tuple[str, ...]]:
    return ("code", text.strip("\n"), tags)


# Every notebook starts its imports with these two lines: TensorFlow's C++ start-up messages go to
# the process's stderr, which the kernel forwards into whichever cell is running at the time.
QUIET_TF = """\
import os
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")   # TensorFlow: no C++ log lines at import
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")  # ... and no oneDNN notice"""

