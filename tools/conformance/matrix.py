"""What the conformance matrix is made of: its axes (frameworks, dtypes, layouts) and the records it
produces (:class:`Cell`, one conversion; :class:`Environment`, where the matrix ran)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from gpushare.adapters import ADAPTERS

from .examples import EXAMPLE_LAYOUTS, EXAMPLE_SHAPE, SIXTY_FOUR_BIT


#: The repository root: ``python -m tools.conformance`` runs from there (so do its child processes).
ROOT = Path(__file__).resolve().parents[2]

#: The CPU matrix runs every framework whose arrays can live on the host (its adapter says so).
CPU_FRAMEWORKS = tuple(name for name, a in ADAPTERS.items() if a.host_arrays)
#: The CUDA matrix's default: every framework that can hold device memory (its adapter says so);
#: those the GPU machine lacks are skipped by name (docs/compatibility-cuda.md).
CUDA_FRAMEWORKS = tuple(name for name, a in ADAPTERS.items() if a.addresses_device)

DTYPES = (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "bfloat16", "float32", "float64", "complex64", "complex128",
)
LAYOUTS = EXAMPLE_LAYOUTS
LAYOUT_DESCRIPTIONS = {
    "contiguous": "a (4, 6) array, C order, 64-byte aligned",
    "transposed": "`x.T` of the (4, 6) array: strides (1, 6)",
    "sliced": "`x[1:3, 2:]`: a strided view 8 elements past the start",
    "negative_stride": "`x[:, ::-1]`",
    "zero_stride": "a (4, 6) broadcast of one row: strides (0, 1)",
    "zero_d": "a 0-d array (64-byte aligned)",
    "zero_size": "a (0, 6) array",
    "misaligned": "`x.ravel()[1:]`: one element past a 64-byte boundary",
    "read_only": "a contiguous array flagged read-only",
}
_SIXTY_FOUR_BIT = SIXTY_FOUR_BIT
SHAPE = EXAMPLE_SHAPE
#: Every framework gpushare has an adapter for (the matrix knows no framework by itself).
ALL_FRAMEWORKS = tuple(ADAPTERS)


@dataclass
class Cell:
    src: str
    dst: str
    dtype: str
    layout: str
    #: "shared", "copied", "failed", "skipped", or "unexportable" (the source framework cannot
    #: export this dtype over DLPack at all, so there is nothing to predict from).
    outcome: str
    predicted: str | None = None
    reason: str | None = None
    predicted_reason: str | None = None
    fix: str | None = None
    expected_error: str | None = None
    framework_error: str | None = None
    #: Why this cell does not conform; None when it does.
    problem: str | None = None
    seconds: float = 0.0
    path: str = "auto"
    #: The state the target framework was in, where its builders run it in several
    #: (``target_states``: PyCUDA without a context of its own, and with the primary one); None: one.
    state: str | None = None

    def describe(self) -> str:
        via = ("" if self.path == "auto" else f" via {self.path}") + ("" if self.state is None else f" ({self.state})")
        head = f"{self.src}→{self.dst}{via} {self.dtype:<10} {self.layout:<15}"
        return (
            f"{head} outcome={self.outcome} predicted={self.predicted}: {self.problem}"
            f"\n    reason: {self.reason}\n    predicted reason: {self.predicted_reason}"
            + (f"\n    framework said: {self.framework_error}" if self.framework_error else "")
        )


@dataclass
class Environment:
    device: str
    frameworks: list[str]
    versions: dict[str, str] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)
    jax_x64: bool = False
    #: Frameworks that crash beside one already imported here: their pairs run in another process.
    elsewhere: dict[str, str] = field(default_factory=dict)
