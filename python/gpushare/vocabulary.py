"""The words every result uses, as enums that are their words.

A :class:`Verdict` is a ``str``: ``r.verdict == "shared"``, ``f"{r.verdict}"``, ``json.dumps`` and a
dict keyed by the word all read it as the word, and ``gpushare.Verdict.SHARED`` names it for code
that would rather not spell it.
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
