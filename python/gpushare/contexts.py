"""The separate-context problem, made visible.

PyTorch, CuPy, Numba, JAX and TensorFlow all work in the device's *primary* CUDA context, so their
pointers are valid in each other's kernels. Code that creates its own context (PyCUDA's
``make_context``, some C++ libraries) allocates memory that belongs to a context the frameworks do
not use. :func:`separate_context_report` allocates in such a private context (through the Rust
core), hands the pointer to each framework through ``__cuda_array_interface__`` and reports what each
one did with it, in the driver's words. No kernel touches that memory: a kernel launched in the
primary context on memory of another context may fault, and a fault poisons the whole context.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any, Sequence

from gpushare import _native
from gpushare.exceptions import FrameworkNotInstalledError, gpushare_error


class _CudaArrayView:
    """A float32 vector over a raw device pointer, described by ``__cuda_array_interface__`` v3."""

    def __init__(self, ptr: int, n: int):
        self.__cuda_array_interface__ = {
            "shape": (n,),
            "typestr": "<f4",
            "data": (ptr, False),
            "version": 3,
            "strides": None,
            "stream": None,  # nothing is pending on it: the Rust core synchronised the allocation
        }


@dataclass
class ContextRow:
    framework: str
    outcome: str  # "aliased", "copied", "refused", "not installed"
    target_ptr: int | None = None
    target_context: int | None = None
    target_context_is_primary: bool | None = None
    detail: str = ""


@dataclass
class SeparateContextReport:
    """What each framework did with memory from a private context."""

    ptr: int
    nbytes: int
    private_context: int
    private_context_is_primary: bool | None
    current_context: dict | None
    rows: list[ContextRow] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ptr": self.ptr,
            "nbytes": self.nbytes,
            "private_context": self.private_context,
            "private_context_is_primary": self.private_context_is_primary,
            "current_context": self.current_context,
            "rows": [vars(r) for r in self.rows],
        }

    def _lines(self) -> list[list[str]]:
        out = []
        for r in self.rows:
            ctx = "n/a" if r.target_context is None else f"{r.target_context:#x}"
            if r.target_context_is_primary is not None:
                ctx += " primary" if r.target_context_is_primary else " NOT primary"
            ptr = "n/a" if r.target_ptr is None else f"{r.target_ptr:#x}"
            out.append([r.framework, r.outcome, ptr, ctx, r.detail])
        return out

    def __repr__(self) -> str:
        head = (
            f"memory {self.ptr:#x} ({self.nbytes} B) allocated in private context {self.private_context:#x} "
            f"(primary: {self.private_context_is_primary}); this thread's context: "
            f"{(self.current_context or {}).get('handle', 'none')}"
        )
        rows = [["framework", "outcome", "target ptr", "target ctx", "detail"], *self._lines()]
        widths = [max(len(r[c]) for r in rows) for c in range(5)]
        body = "\n".join("  ".join(cell.ljust(widths[c]) for c, cell in enumerate(r)).rstrip() for r in rows)
        return f"{head}\n{body}"

    def _repr_html_(self) -> str:
        cells = "".join(
            "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in self._lines()
        )
        return (
            f"<p>memory <code>{self.ptr:#x}</code> in private context <code>{self.private_context:#x}</code> "
            f"(primary: {self.private_context_is_primary})</p><table class=\"gpushare\"><thead><tr>"
            "<th>framework</th><th>outcome</th><th>target ptr</th><th>target ctx</th><th>detail</th>"
            f"</tr></thead><tbody>{cells}</tbody></table>"
        )


def separate_context_report(
    nbytes: int = 1 << 20, frameworks: Sequence[str] | None = None, ordinal: int = 0
) -> SeparateContextReport:
    """Allocates ``nbytes`` in a private (non-primary) context and hands it to each framework
    (default: every framework that imports ``__cuda_array_interface__``)."""
    from gpushare.adapters import ADAPTERS, framework

    if frameworks is None:
        frameworks = [a.name for a in ADAPTERS.values() if a.imports_cai]
    status = _native.cuda.driver_status()
    if not status["available"]:
        raise gpushare_error("no_cuda", str(status.get("reason")))
    alloc = _native.cuda.PrivateContextAllocation(nbytes, ordinal)
    attrs = _native.cuda.pointer_attributes(alloc.ptr) or {}
    report = SeparateContextReport(
        ptr=alloc.ptr,
        nbytes=nbytes,
        private_context=alloc.context,
        private_context_is_primary=attrs.get("context_is_primary"),
        current_context=_native.cuda.current_context(),
    )
    view = _CudaArrayView(alloc.ptr, nbytes // 4)
    for fw in frameworks:
        adapter = framework(fw)
        try:
            adapter.load()
        except FrameworkNotInstalledError:
            report.rows.append(ContextRow(fw, "not installed"))
            continue
        try:
            value = adapter.from_cai(view)
            ptr = adapter.data_pointer(value)
        except Exception as e:  # the framework's own refusal is the finding
            report.rows.append(ContextRow(fw, "refused", detail=f"{type(e).__name__}: {e}"[:300]))
            continue
        t = _native.cuda.pointer_attributes(ptr) or {}
        aliased = ptr == alloc.ptr
        report.rows.append(
            ContextRow(
                fw,
                "aliased" if aliased else "copied",
                ptr,
                t.get("context"),
                t.get("context_is_primary"),
                "kept the private context's memory: its kernels run in the primary context, so they may fault"
                if aliased
                else "copied into its own (primary-context) memory",
            )
        )
        del value
    # Keep the allocation alive until every framework's view is gone.
    report._allocation = alloc  # type: ignore[attr-defined]
    return report


@dataclass
class WorkingContext:
    """The context a framework works in on one device, as the driver reports it."""

    framework: str
    #: The context owning memory the framework just allocated (0: a pool/VMM allocation, which has
    #: no owning context), None where it could not allocate.
    context: int | None = None
    is_primary: bool | None = None
    #: This thread's current context right after the allocation.
    current: dict | None = None
    detail: str = ""

    @property
    def context_text(self) -> str:
        """The context of its memory as a table shows it: ``0x… primary``, ``0x… NOT primary``,
        ``none (pool/VMM)`` or ``n/a``."""
        if self.context is None:
            return "n/a"
        if self.context == 0:
            return "none (pool/VMM)"
        return f"{self.context:#x} " + ("primary" if self.is_primary else "NOT primary")

    def _cells(self) -> list[str]:
        ctx = self.context_text
        cur = "none" if not self.current else (
            f"{int(self.current['handle']):#x} " + ("primary" if self.current.get("is_primary") else "NOT primary"))
        return [self.framework, ctx, cur, self.detail]


_WORKING_HEAD = ["framework", "context of its own allocation", "this thread's context after", "detail"]


@dataclass
class WorkingContexts:
    device: int
    primary: dict | None
    rows: list[WorkingContext] = field(default_factory=list)

    def of(self, framework: str) -> WorkingContext:
        return next(r for r in self.rows if r.framework == framework)

    def to_dict(self) -> dict[str, Any]:
        return {"device": self.device, "primary": self.primary, "rows": [vars(r) for r in self.rows]}

    def _head(self) -> str:
        p = self.primary or {}
        state = f"{int(p['handle']):#x}" if p.get("active") else "inactive"
        return f"cuda:{self.device}'s primary context: {state}"

    def __repr__(self) -> str:
        rows = [_WORKING_HEAD, *(r._cells() for r in self.rows)]
        widths = [max(len(r[c]) for r in rows) for c in range(len(_WORKING_HEAD))]
        body = "\n".join("  ".join(cell.ljust(widths[c]) for c, cell in enumerate(r)).rstrip() for r in rows)
        return f"{self._head()}\n{body}"

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{html.escape(h)}</th>" for h in _WORKING_HEAD)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r._cells()) + "</tr>" for r in self.rows)
        return (f"<p>{html.escape(self._head())}</p><table class=\"gpushare\"><thead><tr>{head}</tr></thead>"
                f"<tbody>{body}</tbody></table>")


def working_contexts(frameworks: Sequence[str], device: int = 0) -> WorkingContexts:
    """Each framework allocates a small array of its own on CUDA device ``device``; the driver says
    which context owns it (and whether it is the primary one) and which context is current on this
    thread afterwards. Allocating may start the framework's GPU runtime, as its first array would."""
    from gpushare.adapters import framework

    status = _native.cuda.driver_status()
    if not status["available"]:
        raise gpushare_error("no_cuda", str(status.get("reason")))
    report = WorkingContexts(device, None)
    for fw in frameworks:
        adapter = framework(fw)
        try:
            adapter.load()
        except FrameworkNotInstalledError:
            report.rows.append(WorkingContext(fw, detail="not installed"))
            continue
        try:
            value = adapter.ones(256, "float32", False, device)
            adapter.synchronize(value)
            # Its description's address (TensorFlow's tensors have no __cuda_array_interface__).
            attributes = _native.cuda.pointer_attributes(adapter.inspect(value).data_ptr) or {}
        except Exception as e:  # the framework's own refusal is the finding
            report.rows.append(WorkingContext(fw, detail=f"{type(e).__name__}: {e}"[:300]))
            continue
        report.rows.append(WorkingContext(
            fw, attributes.get("context"), attributes.get("context_is_primary"), _native.cuda.current_context(),
            f"{attributes.get('memory_type')} memory at {int(attributes.get('range_start') or 0):#x}",
        ))
        del value
    report.primary = _native.cuda.primary_context(device)
    return report
