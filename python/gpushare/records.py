"""The vocabulary every result shares: attributes, as ``ShareResult`` has, not nested dicts.

A row of a :class:`~gpushare.Comparison` or a point of a :class:`~gpushare.Benchmark` across
processes, and a worker's side of a handoff, is a :class:`Record`: ``c.paths["shm"].timing.median``,
``r.target.pid``. (Within a process they are typed: ``gpushare.PathRow``.) Nested objects are
records too, lists hold records. Item access (``row["timing"]["median"]``) still works for code
written against the dicts these used to be, and ``to_dict()`` gives the plain JSON form back.

A field that has no value (the time of a path that failed) is ``None``; every ``to_pandas()`` frame
has the one missing-value convention of crates/python/src/binding/frames.rs.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator


def wrap(value: Any) -> Any:
    """``value`` for reading by attribute: a dict as a :class:`Record`, a list's dicts too."""
    if isinstance(value, dict):
        return Record(value)
    if isinstance(value, list):
        return [wrap(v) for v in value]
    return value


class Record:
    """A JSON object read by attribute (and, for older code, by key)."""

    __slots__ = ("_data",)

    def __init__(self, data: dict):
        object.__setattr__(self, "_data", data)

    def __getattr__(self, name: str) -> Any:
        try:
            return wrap(self._data[name])
        except KeyError:
            raise AttributeError(f"{type(self).__name__} has no field {name!r}; it has {', '.join(self._data)}") from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("results are read-only")

    def __getitem__(self, key: str) -> Any:
        return wrap(self._data[key])

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Record):
            return self._data == other._data
        return isinstance(other, dict) and self._data == other

    __hash__ = None  # type: ignore[assignment]  # mutable underneath, like the dict it reads

    def keys(self) -> Iterable[str]:
        return self._data.keys()

    def get(self, key: str, default: Any = None) -> Any:
        return wrap(self._data.get(key, default))

    def __dir__(self) -> list[str]:
        return sorted(set(self._data) | {"to_dict", "get", "keys"})

    def to_dict(self) -> dict:
        return self._data

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in self._data.items() if not isinstance(v, (dict, list)))
        return f"Record({fields})"


def records(items: Iterable[dict]) -> list[Record]:
    return [Record(d) for d in items]
