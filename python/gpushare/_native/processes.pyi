"""gpushare._native.processes: Handoffs to another process (crates/python/src/binding/process*.rs)."""

from typing import Any, Callable, Iterable, Iterator, Sequence

from gpushare._native.advice import CostPrediction
from gpushare._native.lab import Benchmark, Comparison
from gpushare._native.share import ShareResult, TensorInfo, Timing

class ProcessSide:
    """One side of a handoff to another process, described by memory identity."""

    @property
    def pid(self) -> int | None: ...
    @property
    def framework(self) -> str | None: ...
    @property
    def identity(self) -> dict[str, Any] | None: ...
    @property
    def context(self) -> dict[str, Any] | None: ...
    def to_dict(self) -> dict[str, Any]: ...
    def __getitem__(self, key: str) -> Any: ...
    def get(self, key: str, default: Any = None) -> Any: ...
    def keys(self) -> Any: ...
    def __contains__(self, key: str) -> bool: ...

class WorkerInfo:
    """The worker process that held a result's arrays (``host`` None on this host)."""

    @property
    def pid(self) -> int | None: ...
    @property
    def host(self) -> str | None: ...
    @property
    def framework(self) -> str | None: ...
    def to_dict(self) -> dict[str, Any]: ...
    def __getitem__(self, key: str) -> Any: ...
    def get(self, key: str, default: Any = None) -> Any: ...
    def keys(self) -> Any: ...
    def __contains__(self, key: str) -> bool: ...

def same_memory(a: dict[str, Any] | None, b: dict[str, Any] | None) -> tuple[bool, str]: ...

def measure_handoffs(
    handoff: Callable[[], Any], release: Callable[[Any], Any], repeat: int, first_extra: float = 0.0
) -> tuple[Any, dict[str, Any]]: ...

def timed_call(call: Callable[[], Any]) -> tuple[Any, float]: ...

def handoff(transport: Any, repeat: int = 1, predicted: CostPrediction | None = None, auto: bool = False) -> ShareResult: ...

def route_refusal(transport: Any) -> str | None: ...

WARM_UP_HANDOFFS: int

def compare_paths(
    lab: Any,
    source: Any,
    names: Sequence[str],
    repeat: int,
    keep: bool,
    described: tuple[TensorInfo, str],
) -> Comparison: ...

def bench_paths(
    lab: Any,
    sizes: Sequence[int],
    names: Sequence[str],
    repeat: int,
    source_framework: str,
    target_framework: str,
    dtype: str,
    device: str,
) -> Benchmark: ...

def refusal(
    path: str,
    framework: str,
    to: str | None,
    targets: Sequence[str],
    library: str | None,
    on_device: bool,
    source_device: int | None,
    worker_device: int | None,
    library_unavailable: Callable[[], str | None],
    nccl_unavailable: Callable[[], str | None],
    ipc_refusal: Callable[[], str | None],
    strided: bool = False,
) -> str | None: ...

