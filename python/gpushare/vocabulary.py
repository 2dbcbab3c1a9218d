"""The words every result uses, as enums that are their words.

A :class:`Verdict` and a :class:`PathKind` are ``str``: ``r.verdict == "shared"``, ``f"{r.verdict}"``,
``json.dumps`` and a dict keyed by the word all read them as the word, and
``gpushare.Verdict.SHARED`` names one for code that would rather not spell it. Where gpushare takes
one, the member and its word are alike.
"""

from __future__ import annotations

import enum


class Verdict(str, enum.Enum):
    """What a handoff did with the memory: ``shared`` (the target reads the source's memory),
    ``copied`` (the target holds a copy of its own) or ``failed`` (no array came out; a path that
    cannot run here is failed and not ``applicable``)."""

    SHARED = "shared"
    COPIED = "copied"
    FAILED = "failed"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


class PathKind(str, enum.Enum):
    """Which kind of handoff a path makes (the path table's kind): ``share`` (within one device:
    the target gets the source's memory, or a copy of it, where it lies), ``move`` (to another
    device, ``device=``) or ``process`` (to another process, ``across=``)."""

    SHARE = "share"
    MOVE = "move"
    PROCESS = "process"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)
