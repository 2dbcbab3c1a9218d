"""Where a warning gpushare emits points: the user's line.

A warning names a file and line; Python's default filter shows it once per place, and a reader goes
there to see what caused it. gpushare's warnings come from deep inside the package, and when a
magic runs them IPython's machinery stands between the package and the user's cell, so a fixed
``stacklevel`` pointed at ``IPython/core/interactiveshell.py``. The user's line is the first frame
outside gpushare and IPython: the cell line of ``%share x ->torch`` (or of ``%%share``), or the
line of a script that called :func:`gpushare.share`.
"""

from __future__ import annotations

import os
import sys
import warnings
from types import FrameType

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))

# File name → whether its frames are gpushare's or IPython's, not the user's. Cached: abspath
# costs microseconds, and a share that warns (a writable view of read-only memory) walks these
# frames every time.
_NOT_USERS: dict[str, bool] = {}


def _ipython_dir() -> str | None:
    ipython = sys.modules.get("IPython")
    location = getattr(ipython, "__file__", None)
    return os.path.dirname(os.path.abspath(location)) + os.sep if location else None


def _not_users(filename: str) -> bool:
    known = _NOT_USERS.get(filename)
    if known is None:
        path = os.path.abspath(filename)
        ipython = _ipython_dir()
        # The package and its subpackages (gpushare.processes warns too).
        known = path.startswith(_PACKAGE_DIR + os.sep) or (ipython is not None and path.startswith(ipython))
        # IPython's magic decorators compile wrappers under this name.
        known = known or filename.startswith("<decorator-gen-")
        _NOT_USERS[filename] = known
    return known


def user_stacklevel() -> int:
    """The ``stacklevel`` that makes the caller's ``warnings.warn`` point at the user's line."""
    frame: FrameType | None = sys._getframe(1)
    level = 1
    while frame is not None and _not_users(frame.f_code.co_filename):
        frame, level = frame.f_back, level + 1
    return level


def user_frame() -> FrameType | None:
    """The frame of the user's line (None if every frame is gpushare's or IPython's)."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and _not_users(frame.f_code.co_filename):
        frame = frame.f_back
    return frame


def warn_every_time(message: str, category: type[Warning]) -> None:
    """Warns at the user's line, every time (no once-per-place registry): for warnings about
    something each run does anew, such as replacing a variable."""
    frame = user_frame()
    if frame is None:
        warnings.warn(message, category, stacklevel=2)
        return
    module = frame.f_globals.get("__name__", "__main__")
    try:
        warnings.warn_explicit(
            message, category, frame.f_code.co_filename, frame.f_lineno,
            module=module, registry=None, module_globals=frame.f_globals,
        )
    except ImportError:
        # The module's loader cannot give its source: ``python -c`` runs ``__main__`` under the
        # built-in importer, whose get_source raises ImportError ("'__main__' is not a built-in
        # module") out of warn_explicit itself. The warning is shown without its source line.
        warnings.warn_explicit(message, category, frame.f_code.co_filename, frame.f_lineno, module=module, registry=None)


__all__ = ["user_frame", "user_stacklevel", "warn_every_time"]
