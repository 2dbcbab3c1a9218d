"""Reading and writing gpushare's cache files (the cost model, the machine's ceilings) as data that
may be anything.

A cache file lives in the user's cache directory, where anything can stand in its place: a FIFO
(whose plain ``open`` waits for a writer forever), a link to ``/dev/zero`` (whose ``read`` never
ends and ends in MemoryError), a directory, a file truncated by a full disk. Only a regular file of
a bounded size is read, and the open never blocks (``O_NONBLOCK``; the type is checked on the open
descriptor, so nothing can be swapped in between). A file that cannot be used is named in one
warning, once per state of the file, and treated as absent.

Writing goes through a temporary file beside the cache that is removed whatever fails, and says
in a warning when nothing was saved, and why.
"""

from __future__ import annotations

import os
import stat
import warnings
from pathlib import Path

from gpushare.exceptions import GpushareWarning

#: The largest cache file read. A calibrated model of every pair, path and place with its sweeps'
#: points is a few hundred KiB; anything past this is not one of gpushare's files.
MAX_BYTES = 32 << 20


class Unusable(Exception):
    """A cache file that exists but cannot be read as one: ``str(e)`` says why."""


def read_text(path: Path, limit: int = MAX_BYTES) -> str | None:
    """The text of the cache file ``path``; None when there is none. Raises :class:`Unusable` for
    one that is not a regular file, is larger than ``limit`` bytes, cannot be read or is not UTF-8.
    Never blocks."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except (FileNotFoundError, NotADirectoryError):  # nothing there (or no directory to hold it)
        return None
    except OSError as e:
        raise Unusable(f"it cannot be opened ({e.strerror or e})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Unusable(f"it is {_kind(st.st_mode)}, not a regular file")
        if st.st_size > limit:
            raise Unusable(f"it holds {st.st_size} bytes, more than the {limit} a cache file may")
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            total += len(chunk)
            if total > limit:  # grew while read
                raise Unusable(f"it holds more than the {limit} bytes a cache file may")
            chunks.append(chunk)
    except OSError as e:
        raise Unusable(f"it cannot be read ({e.strerror or e})") from None
    finally:
        os.close(fd)
    try:
        return b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError as e:
        raise Unusable(f"it is not UTF-8 text ({e.reason} at byte {e.start})") from None


def _kind(mode: int) -> str:
    for test, words in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                        (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return words
    return "not a regular file"


_WARNED: set[tuple[str, int | None, int | None]] = set()


def state(path: Path) -> tuple[int, int] | None:
    """``(mtime_ns, size)`` of what stands at ``path`` (links followed), None when nothing does:
    a change of either is a new file to read."""
    try:
        st = path.stat()
    except (OSError, ValueError):
        return None
    return (st.st_mtime_ns, st.st_size)


def warn_unusable(path: Path, what: str, why: str, consequence: str) -> None:
    """Warns that the cache file ``path`` (``what``: "cost model", "ceilings") is ignored and why,
    once per state of the file: every handoff reads the model, and one warning says it."""
    seen = state(path)
    key = (str(path), *(seen or (None, None)))
    if key in _WARNED:
        return
    _WARNED.add(key)
    from gpushare import warn_site

    warnings.warn(f"gpushare ignores the {what} cache {path}: {why}; {consequence}", GpushareWarning,
                  stacklevel=warn_site.user_stacklevel())


def write_text(path: Path, text: str, what: str, consequence: str) -> bool:
    """Writes ``text`` to the cache file ``path`` by a temporary file beside it and a rename, so a
    reader never sees half a file; True when saved. When it cannot be (a read-only or full cache
    directory, a directory where the file should be), warns which file was not saved and why, and
    leaves no temporary file behind."""
    tmp = path.with_name(f"{path.stem}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_dir():
            raise IsADirectoryError(f"{path} is a directory")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
        return True
    except OSError as e:
        try:
            tmp.unlink()
        except OSError:
            pass
        from gpushare import warn_site

        why = e.strerror or str(e)
        warnings.warn(f"gpushare could not save the {what} to {path} ({why}), so nothing was saved: {consequence}",
                      GpushareWarning, stacklevel=warn_site.user_stacklevel())
        return False


__all__ = ["MAX_BYTES", "Unusable", "read_text", "state", "warn_unusable", "write_text"]
