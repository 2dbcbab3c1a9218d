"""What CUDA contexts cost in device memory, measured by the driver around the steps that make them.

A context reserves device memory of its own when it is created, memory no framework's allocator
counts; the only measure is the driver's free-memory figure before and after. Asking for it needs a
current context, and asking through the primary context would activate it (a context whose own cost
is one of the things to measure), so :class:`ContextMeter` reads through a context of gpushare's own
that is pushed only for each reading: nobody's current context changes and nothing is activated.

    meter = gpushare.ContextMeter()
    with meter.measure("import pycuda.autoinit"):
        import pycuda.autoinit
    meter                      # one row per step: the memory it took, the contexts before and after

Each row says, in the driver's words, what happened to the contexts: which context is current on
this thread before and after (and whether it is the device's primary context), and whether the
primary context was active before and after. The figure is device-wide: another process allocating
meanwhile would show up in it (the row cannot tell), and the driver counts in pages of 2 MiB.
"""

from __future__ import annotations

import html
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator

from gpushare import _native
from gpushare.exceptions import gpushare_error


def _context_of(info: dict | None) -> str:
    if not info:
        return "none"
    return f"{int(info['handle']):#x} ({'primary' if info.get('is_primary') else 'NOT primary'})"


def _primary_of(state: dict | None) -> str:
    if not state or not state.get("active"):
        return "inactive"
    return f"active {int(state['handle']):#x}"


@dataclass
class ContextCost:
    """One measured step: the device's free memory and the contexts before and after it."""

    label: str
    free_before: int
    free_after: int
    total: int
    current_before: dict | None = None
    current_after: dict | None = None
    primary_before: dict | None = None
    primary_after: dict | None = None

    @property
    def taken(self) -> int:
        """Bytes of device memory the step took (negative: it gave some back)."""
        return self.free_before - self.free_after

    @property
    def primary_activated(self) -> bool:
        return not (self.primary_before or {}).get("active") and bool((self.primary_after or {}).get("active"))

    @property
    def new_current_context(self) -> dict | None:
        """The context current after the step, where it differs from the one before."""
        before = (self.current_before or {}).get("handle")
        after = self.current_after
        return after if after and after.get("handle") != before else None

    @property
    def what_happened(self) -> str:
        """The contexts' change, as the driver reports it."""
        parts = []
        if self.primary_activated:
            parts.append(f"the primary context {int(self.primary_after['handle']):#x} was activated")
        new = self.new_current_context
        if new is not None:
            kind = "the primary context" if new.get("is_primary") else "a context that is NOT the primary one"
            parts.append(f"{kind} {int(new['handle']):#x} became current on this thread")
        if not parts:
            active = (self.primary_after or {}).get("active")
            parts.append("no new context: the primary context was already active" if active else "no new context")
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label, "taken": self.taken, "free_before": self.free_before, "free_after": self.free_after,
            "total": self.total, "current_before": self.current_before, "current_after": self.current_after,
            "primary_before": self.primary_before, "primary_after": self.primary_after,
            "primary_activated": self.primary_activated, "what_happened": self.what_happened,
        }

    def _cells(self) -> list[str]:
        return [
            self.label,
            _native.text.format_bytes(self.taken, signed=True),
            f"{_context_of(self.current_before)} → {_context_of(self.current_after)}",
            f"{_primary_of(self.primary_before)} → {_primary_of(self.primary_after)}",
            self.what_happened,
        ]


_HEAD = ["step", "device memory taken", "this thread's context", "primary context", "what the driver shows"]


@dataclass
class ContextMeter:
    """Measures steps on CUDA device ``device`` (an ordinal); see the module's docstring.

    The meter's own context is made once, when the meter is (it costs what a context costs, before
    the first row); :meth:`close` destroys it."""

    device: int = 0
    rows: list[ContextCost] = field(default_factory=list)

    def __post_init__(self) -> None:
        status = _native.cuda.driver_status()
        if not status["available"]:
            raise gpushare_error("no_cuda", f"no CUDA: {status.get('reason')}")
        self._meter = _native.cuda.MemoryMeter(self.device)

    @property
    def context(self) -> int:
        """The meter's own context (never the primary one, never left current)."""
        return self._meter.context

    def _state(self) -> tuple[int, int, dict | None, dict | None]:
        free, total = self._meter.read()
        current = _native.cuda.current_context()
        if current is not None and current.get("device") != self.device:
            current = None  # a context of another device is not this device's story
        return free, total, current, _native.cuda.primary_context(self.device)

    @contextmanager
    def measure(self, label: str) -> Iterator[ContextCost]:
        """Measures the ``with`` block: the row is filled in when it ends (also when it raises)."""
        free, total, current, primary = self._state()
        row = ContextCost(label, free, free, total, current, current, primary, primary)
        try:
            yield row
        finally:
            row.free_after, row.total, row.current_after, row.primary_after = self._state()
            self.rows.append(row)

    def fresh_context(self, label: str = "a context of gpushare's own (cuCtxCreate), destroyed again") -> ContextCost:
        """What one more context of its own costs on this device, measured on one gpushare creates
        with ``cuCtxCreate`` and default flags (what ``make_context`` does) and destroys again."""
        current, primary = _native.cuda.current_context(), _native.cuda.primary_context(self.device)
        step = self._meter.fresh_context_cost()
        row = ContextCost(label, step["free_before"], step["free_after"], step["total"], current, current, primary, primary)
        self.rows.append(row)
        return row

    def close(self) -> None:
        self._meter.close()

    def to_dict(self) -> dict[str, Any]:
        return {"device": self.device, "meter_context": self.context, "rows": [r.to_dict() for r in self.rows]}

    def __repr__(self) -> str:
        rows = [_HEAD, *(r._cells() for r in self.rows)]
        widths = [max(len(r[c]) for r in rows) for c in range(len(_HEAD))]
        body = "\n".join("  ".join(cell.ljust(widths[c]) for c, cell in enumerate(r)).rstrip() for r in rows)
        return f"device memory taken per step on cuda:{self.device} (the driver's free memory before and after)\n{body}"

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{html.escape(h)}</th>" for h in _HEAD)
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r._cells()) + "</tr>" for r in self.rows
        )
        return (
            f"<p>Device memory taken per step on <code>cuda:{self.device}</code> (the driver's free memory "
            f"before and after, read through gpushare's own context <code>{self.context:#x}</code>)</p>"
            f'<table class="gpushare"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
        )
