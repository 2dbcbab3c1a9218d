"""Predictions made before a conversion, checked against what happened afterwards.

``predict`` returns ``(verdict, reason)`` for a planned handoff, or None where gpushare makes no
prediction; ``share`` stores it on the result, which shows an outcome that differs from it as
"UNEXPECTED" rather than hiding it.
"""

from __future__ import annotations

from typing import Any


def predict(src: Any, dst: Any, src_info: Any, path: str) -> tuple[str, str | None] | None:
    """The predicted verdict and reason for converting ``src_info`` to ``dst`` by ``path``."""
    return None
