"""gpushare._native.lab: Every path for one array, and sizes x paths (crates/python/src/binding/lab.rs, lab_run.rs)."""

from typing import Any, Callable, Iterable, Iterator, Literal, Sequence

from gpushare._native.advice import CostPrediction

from gpushare._native.share import ShareResult, TensorInfo

def plot_style(path: str) -> tuple[str, str]: ...

class Comparison:
    @property
    def rows(self) -> list[Any]: ...
    @property
    def paths(self) -> dict[str, Any]: ...
    @property
    def results(self) -> dict[str, ShareResult]: ...
    @property
    def values(self) -> dict[str, Any]: ...
    @property
    def fastest(self) -> str | None: ...
    def __getitem__(self, key: str) -> Any: ...
    def to_dict(self) -> dict[str, Any]: ...
    def to_json(self) -> str: ...
    def to_pandas(self) -> Any: ...
    def _repr_html_(self) -> str: ...
    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]: ...

class Benchmark:
    @property
    def points(self) -> list[Any]: ...
    @property
    def interrupted(self) -> bool: ...
    @property
    def svg(self) -> str: ...
    def plot(self, ax: Any = None) -> Any: ...
    def to_dict(self) -> dict[str, Any]: ...
    def to_json(self) -> str: ...
    def to_pandas(self) -> Any: ...
    def _repr_html_(self) -> str: ...
    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]: ...

def compare_paths(
    obj: Any,
    source: Any,
    target: Any,
    paths: Sequence[str],
    auto_for: Callable[[tuple[int, int], int, TensorInfo], tuple[str, bool]],
    route_for: Callable[[str, bool, bool, TensorInfo | None], tuple[Any, Any, bool, str]],
    *,
    repeat: int,
    number: int | None,
    warmup: int,
    min_sample_time: float,
    link_for: Callable[[int | None, str], dict[str, Any] | None] | None = None,
    predict_for: Callable[[str, int, tuple[int, int]], tuple[CostPrediction | None, str]] | None = None,
) -> Comparison: ...

def bench_paths(
    source: Any,
    target: Any,
    sizes: Sequence[int],
    paths: Sequence[str],
    autos: Sequence[str],
    already_there: bool,
    make_source: Callable[[int, bool], Any],
    route_for: Callable[[str, bool, bool, TensorInfo | None], tuple[Any, Any, bool, str]],
    progress: Any,
    *,
    dtype: str,
    device: str,
    repeat: int,
    number: int | None,
    warmup: int,
    min_sample_time: float,
    link_for: Callable[[int | None, str], dict[str, Any] | None] | None = None,
    predict_for: Callable[[str, int, tuple[int, int]], tuple[CostPrediction | None, str]] | None = None,
    auto_for: Callable[[tuple[int, int], int, TensorInfo], tuple[str, bool]] | None = None,
    measure_auto: bool = False,
) -> Benchmark: ...
