"""The progress of a sweep, shown only where someone is watching and gone when the sweep ends.

- In a notebook: one line in a display of its own, rewritten in place, and emptied when the sweep
  ends, so the saved cell holds the tables and the plot only (no frozen ``0%|`` bar, no stderr box
  of ``\\r`` frames).
- On a terminal (stderr is a TTY) without ``NO_COLOR`` set: tqdm when installed, else one line
  rewritten in place and wiped.
- Anywhere else (a script with stderr redirected, CI, a pipe): nothing.
"""

from __future__ import annotations

import os
import sys
import warnings
from typing import Any

#: Characters of the bar itself.
WIDTH = 24


def _line(desc: str, n: int, total: int, post: str) -> str:
    # `gpushare bench` counts its one bar from this line's "n/total points" (crates/runner/src/cli/output.rs,
    # points_in): keep that word where it is.
    done = int(WIDTH * n / max(total, 1))
    return f"{desc} [{'#' * done}{'.' * (WIDTH - done)}] {n}/{total} points {post}".rstrip()


class NoBar:
    def set_postfix_str(self, text: str) -> None:
        pass

    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass


class TextBar:
    """One line on a terminal's stderr, rewritten in place and wiped on close."""

    def __init__(self, total: int, desc: str, stream: Any = None):
        self.total, self.desc, self.n, self.post = total, desc, 0, ""
        self.stream = stream or sys.stderr
        self._width = 0
        self._draw()

    def _draw(self) -> None:
        text = _line(self.desc, self.n, self.total, self.post)
        self._width = max(self._width, len(text))
        self.stream.write("\r" + text.ljust(self._width))
        self.stream.flush()

    def set_postfix_str(self, text: str) -> None:
        self.post = text
        self._draw()

    def update(self, n: int = 1) -> None:
        self.n += n
        self._draw()

    def close(self) -> None:
        self.stream.write("\r" + " " * self._width + "\r")
        self.stream.flush()


class DisplayBar:
    """One line in a notebook display of its own (not stderr), emptied when the sweep ends.

    The display is rewritten through its ``display_id``; on close it becomes an empty bundle, which
    JupyterLab renders as nothing and a saved notebook keeps as nothing to see."""

    def __init__(self, total: int, desc: str):
        from IPython.display import display

        self.total, self.desc, self.n, self.post = total, desc, 0, ""
        self._handle = display(self._bundle(), raw=True, display_id=True)

    def _bundle(self) -> dict:
        return {"text/plain": _line(self.desc, self.n, self.total, self.post)}

    def set_postfix_str(self, text: str) -> None:
        self.post = text
        self._handle.update(self._bundle(), raw=True)

    def update(self, n: int = 1) -> None:
        self.n += n
        self._handle.update(self._bundle(), raw=True)

    def close(self) -> None:
        self._handle.update({}, raw=True)


def in_notebook() -> bool:
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return type(shell).__name__ == "ZMQInteractiveShell"


def on_terminal(stream: Any = None) -> bool:
    stream = stream or sys.stderr
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False


def bar(total: int, desc: str, enabled: bool) -> Any:
    """A progress bar for ``total`` points: see the module docstring for where it shows."""
    if not enabled:
        return NoBar()
    if in_notebook():
        return DisplayBar(total, desc)
    if not on_terminal() or os.environ.get("NO_COLOR"):
        return NoBar()
    try:
        from tqdm import tqdm
    except ImportError:
        return TextBar(total, desc)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tqdm(total=total, desc=desc, leave=False, unit="pt")
