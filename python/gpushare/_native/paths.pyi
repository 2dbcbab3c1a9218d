"""gpushare._native.paths: The table of paths, `auto` over it, how each path is ordered, and the prediction of a handoff (crates/python/src/binding/paths.rs, explain.rs)."""

from typing import Any, Callable, Iterable, Iterator, Literal, Sequence

from gpushare.vocabulary import PathKind, Verdict

from gpushare._native.advice import CostModel

from gpushare._native.share import ShareResult, TensorInfo

class Prediction:
    """``(verdict, reason, fix, expected_error)``: a 4-tuple with named fields."""

    def __init__(
        self, verdict: Verdict | Literal["shared", "copied", "failed"], reason: str | None = None, fix: str | None = None,
        expected_error: str | None = None,
    ) -> None: ...
    @property
    def verdict(self) -> Verdict: ...
    @property
    def reason(self) -> str | None: ...
    @property
    def fix(self) -> str | None: ...
    @property
    def expected_error(self) -> str | None: ...
    def __len__(self) -> int: ...
    def __getitem__(self, key: int | Literal["verdict", "reason", "fix", "expected_error"]) -> str | None: ...
    def get(self, key: str, default: Any = None) -> Any: ...
    def __iter__(self) -> Iterator[str | None]: ...

class Predictor:
    """Predicts handoffs of one (source framework, target framework, path)."""

    def __init__(
        self,
        target: str,
        version: str,
        path: str,
        source_version: str = "",
        target_facts: dict[str, Any] | None = None,
        source_facts: dict[str, Any] | None = None,
        *,
        pair: Pair,
        destination: tuple[int, int] | None = None,
        model: CostModel | None = None,
    ) -> None: ...
    def __call__(self, source: TensorInfo) -> Prediction: ...
    def chosen_path(self, source: TensorInfo, nbytes: int | None = None) -> str: ...
    def follows_producer(self, source: TensorInfo) -> bool: ...

def path_table() -> list[dict[str, Any]]: ...

class Pair:
    """What two adapters declare that ``auto`` decides from, read once."""

    def __init__(
        self,
        source: str = "",
        target: str = "",
        *,
        exports_dlpack: bool = True,
        accepts_objects: bool = True,
        accepts_capsules: bool = True,
        addresses_device: bool = True,
        import_waits: bool = False,
        cai_unordered: bool = False,
        capsule_refuses_readonly: bool = False,
        shares_host_across: bool = False,
    ) -> None: ...
    @staticmethod
    def of(src: Any, dst: Any) -> Pair: ...
    @property
    def source(self) -> str: ...
    @property
    def target(self) -> str: ...
    @property
    def endpoints(self) -> tuple[bool, bool, bool, bool]: ...
    def auto(self, facts: HandoffFacts) -> tuple[str, PathKind, str | None]: ...
    def size_breaks(self, facts: HandoffFacts) -> list[int]: ...
    def ranges(self, facts: HandoffFacts) -> list[tuple[int, int | None, str, str | None]]: ...

class Planner:
    """The planner of one cost model (None: the rules alone): what ``auto`` decided with it."""

    def __init__(self, model: CostModel | None = None) -> None: ...
    @property
    def model(self) -> CostModel | None: ...
    @property
    def plans(self) -> dict[Any, Any]: ...
    @property
    def predictors(self) -> dict[Any, Any]: ...
    def move_auto(
        self, src: Any, dst: Any, source: tuple[int, int], destination: tuple[int, int], nbytes: int | None,
        producer_busy: Callable[[], bool],
    ) -> str: ...
    def share_planned(
        self, obj: Any, to: str, device: str | None = None, name: str | None = None, origin: TensorInfo | None = None,
        observe: bool = False,
    ) -> ShareResult | None: ...

def planner_in_use() -> Planner | None:
    """The planner every share plans with, if one was made since the model was last forgotten."""

def use_planner(planner: Planner | None) -> None:
    """Makes ``planner`` the one every share plans with (None: none until the next is made)."""

class HandoffFacts:
    """What ``auto`` reads of one handoff besides the two frameworks."""

    def __init__(
        self,
        source: tuple[int, int],
        destination: tuple[int, int] | None = None,
        *,
        peer_access: bool | None = None,
        across: bool = False,
        model: CostModel | None = None,
        nbytes: int | None = None,
        producer_busy: bool = False,
        source_readonly: bool | None = None,
        host_shared: bool = False,
    ) -> None: ...

def copied_by_design(kind: PathKind | Literal["share", "move", "process"], path: str) -> str | None: ...

def path_ordering(kind: PathKind | Literal["share", "move", "process"], path: str, place: str, target_takes_objects: bool = True, cai_orders: bool = True) -> tuple[str, str, bool]: ...

def path_waits(kind: PathKind | Literal["share", "move", "process"], path: str, place: str, target_takes_objects: bool = True, import_waits: bool = False) -> bool: ...
