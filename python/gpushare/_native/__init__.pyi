"""Type stubs for gpushare._native, the pyo3 boundary of the Rust core (crates/python/src/binding/).

Checked against the compiled module by tests/test_stubs.py (the same submodules and public names,
and the same parameters for every callable). Each submodule has its own file beside this one.
"""

from gpushare._native import errors, share, paths, lab, advice, cuda, processes, text

from typing import Any, Callable, Iterable, Iterator, Literal, Sequence

__version__: str

#: Inline styles of table cells ("table", "text", "num", "num_head", "detail"), from crates/core/src/render/cells.rs.
CELL_STYLES: dict[str, str]

def json_schema(
    kind: Literal["tensor", "share", "shares", "comparison", "benchmark", "advice"],
) -> dict[str, Any]: ...

def cli_main(argv: Sequence[str]) -> int: ...
