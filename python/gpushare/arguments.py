"""The checks every entry point runs on its arguments, in one place.

An argument of the wrong kind used to reach Python's or pyo3's internals and fail there, in their
words (``repeat=1.5``: "'float' object cannot be interpreted as an integer"; ``sizes=[2**64]``: an
OverflowError from the core; ``queued="2ms"``: a comparison of str and int). Each check here names
the argument, what it takes and what it got, as a TypeError (the wrong kind of value) or a
ValueError (the right kind, out of range), and returns the value in the form the core takes.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Sequence

#: The most handoffs a count (``repeat``, ``number``, ``warmup``) may ask for: the core counts
#: them in 32 bits, and a billion handoffs is days of work anyway.
MAX_COUNT = (1 << 31) - 1

#: The largest array size an argument may name, in bytes: the core's sizes are 64-bit, and no
#: machine holds 2⁶³ bytes.
MAX_BYTES = (1 << 63) - 1


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def count(name: str, value: Any, *, minimum: int = 1, optional: bool = True) -> int | None:
    """A whole number of handoffs, at least ``minimum`` and at most :data:`MAX_COUNT`; None stays
    None where ``optional``."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} is a whole number (at least {minimum}), got {_shown(value)}")
    value = int(value)
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value}")
    if value > MAX_COUNT:
        raise ValueError(f"{name} must be at most {MAX_COUNT}, got {value}")
    return value


def seconds(name: str, value: Any, *, positive: bool = False, optional: bool = True) -> float | None:
    """A finite number of seconds (above 0 where ``positive``, else at least 0); None stays None
    where ``optional``. A duration written as text (``"2ms"``) is refused with the number it means."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        hint = " (write seconds as a number: 2e-3 for 2 ms)" if isinstance(value, str) else ""
        raise TypeError(f"{name} is a number of seconds, got {_shown(value)}{hint}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} is a finite number of seconds, got {value}")
    if value < 0 or (positive and value == 0):
        raise ValueError(f"{name} must be {'above' if positive else 'at least'} 0 seconds, got {value}")
    return value


def timing(repeat: Any, number: Any, warmup: Any, budget: Any) -> tuple[int | None, int | None, int, float | None]:
    """``share``'s timing arguments, checked: ``repeat`` and ``number`` whole numbers of at least 1
    (or None), ``warmup`` a whole number of at least 0, ``budget`` a finite number of seconds above
    0 (or None: an infinite budget would never end)."""
    if repeat is None and number is None and budget is None and type(warmup) is int and warmup == 0:
        return None, None, 0, None  # the common share: nothing to check
    return (count("repeat", repeat), count("number", number), count("warmup", warmup, minimum=0, optional=False),  # type: ignore[return-value]
            seconds("budget", budget, positive=True))


def size(name: str, value: Any) -> int:
    """A size in bytes: a whole number or a size written as text (``"4KiB"``, ``"1.5 MB"``), from
    0 to :data:`MAX_BYTES`."""
    from gpushare import lab

    if isinstance(value, bool) or not isinstance(value, (numbers.Integral, str)):
        if isinstance(value, numbers.Real) and math.isfinite(value) and float(value).is_integer():
            value = int(value)
        else:
            raise TypeError(f"{name} is a size in bytes (a whole number, or text such as '4KiB'), got {_shown(value)}")
    try:
        n = lab.parse_size(value if isinstance(value, str) else int(value))
    except (ValueError, OverflowError) as e:
        raise ValueError(f"{name}: {e}") from None
    if n > MAX_BYTES:
        raise ValueError(f"{name} must be at most {MAX_BYTES} bytes, got {n}")
    return n


def sizes(name: str, values: Any) -> list[int]:
    """Sizes in bytes (see :func:`size`): a list, or text of sizes separated by commas."""
    if isinstance(values, str):
        values = [v for v in values.split(",") if v.strip()]
    if isinstance(values, (bytes, dict)) or not isinstance(values, Sequence) and not hasattr(values, "__iter__"):
        raise TypeError(f"{name} is a list of sizes (or text such as '4KiB,1MiB'), got {_shown(values)}")
    return [size(f"{name}[{i}]", v) for i, v in enumerate(values)]


def names(name: str, values: Any) -> list[str] | None:
    """Framework names: a list of names, or one text of names separated by commas (``"torch,numpy"``);
    None stays None."""
    if values is None:
        return None
    if isinstance(values, str):
        return [v.strip() for v in values.split(",") if v.strip()]
    if isinstance(values, (bytes, dict)) or not hasattr(values, "__iter__"):
        raise TypeError(f"{name} is a list of framework names (or text such as 'torch,numpy'), got {_shown(values)}")
    out = list(values)
    for v in out:
        if not isinstance(v, str):
            raise TypeError(f"{name} holds framework names, and {_shown(v)} is not one")
    return out


def adapter(name: str, value: Any) -> Any:
    """A framework's adapter, given the adapter or the framework's name (``"torch"``)."""
    from gpushare.adapters import Adapter, framework

    if isinstance(value, Adapter):
        return value
    if isinstance(value, str):
        return framework(value)
    raise TypeError(f"{name} is a framework's name or adapter (gpushare.adapters.framework('torch')), got {_shown(value)}")


def across(value: Any) -> Any:
    """Where a handoff goes to another process: a :class:`gpushare.Worker`, ``"process"``
    (``"processes"``, True: a worker started for the call), ``"HOST:PORT"`` (the remote worker
    there, connected for the call) or None (this process)."""
    if value is None:
        return None
    from gpushare.processes import Worker

    if isinstance(value, Worker) or value is True or value in ("process", "processes"):
        return value
    if isinstance(value, str) and ":" in value:
        return across_option(value, "across")
    raise ValueError(f"across is a gpushare.Worker, 'process' or 'HOST:PORT' of a remote worker, got {_shown(value)}")


def across_option(text: Any, name: str = "--across") -> str:
    """The text of ``--across`` (the magics, ``gpushare calibrate``'s Python half): ``"processes"``
    (``process`` too) for a worker process of this host, or ``"HOST:PORT"`` (``[v6]:PORT``) of a
    worker on another host (``gpushare worker --listen``), checked and returned as given. One
    parser, so that every entry point accepts and refuses the same texts in the same words."""
    if not isinstance(text, str):
        raise ValueError(f"{name} is 'processes' or 'HOST:PORT' of a remote worker, got {_shown(text)}")
    value = text.strip()
    if value in ("process", "processes"):
        return "processes"
    if ":" not in value:
        raise ValueError(f"{name} is 'processes' (a worker process of this host) or 'HOST:PORT' of a worker on "
                         f"another host (`gpushare worker --listen HOST:PORT`), got {_shown(text)}")
    from gpushare.exceptions import GpushareError
    from gpushare.processes.remote import parse_address

    try:
        parse_address(value, name)
    except GpushareError as e:  # what is wrong with the address, as a ValueError like every check here
        raise ValueError(str(e)) from None
    return value


def is_remote(across: Any) -> bool:
    """Whether a checked ``across`` names a worker on another host (``HOST:PORT``)."""
    return isinstance(across, str) and across not in ("process", "processes")


__all__ = ["MAX_BYTES", "MAX_COUNT", "across", "across_option", "adapter", "is_remote", "count", "names", "seconds", "size", "sizes", "timing"]
