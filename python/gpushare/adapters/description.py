"""How an adapter declares the way its arrays are described (``Adapter.describe_by``), for the Rust
core to do it without calling the adapter's ``inspect()`` (a microsecond or two of Python, on every
share, for the source and the target alike).

The declared routes, each implemented once in the core (crates/python/src/binding/declared.rs):

* :data:`EXCHANGE_API`: the DLPack C exchange API of the array's type
  (``type(x).__dlpack_c_exchange_api__``, DLPack 1.3): one C call, no capsule.
* :data:`CAPSULE`: ``x.__dlpack__(max_version=(1, 0))``, the versioned capsule, read in Rust.
* an :class:`Attributes` recipe: the array's own attributes, read by name, for a framework whose
  DLPack export costs more than its attributes do.
* a :class:`Strided` recipe: the shape, strides, dtype and address of a CUDA array whose framework
  names no device (Numba), the device the one whose memory the address is in, as the CUDA driver
  says; anything else (host memory, a zero-size array, strides that are not whole elements) goes
  to ``inspect()``.
* an :class:`ExportedCapsule` recipe: the capsule the framework's own exporter makes, read in Rust,
  the device in the framework's words, for a framework whose arrays export legacy capsules only
  through a function (TensorFlow) and whose ``inspect()`` does no more than that.
* :data:`INSPECT`: the adapter's ``inspect()`` alone.

A DLPack route (exchange API, capsule) names the device in DLPack's words (``"cpu"``, ``"cuda:0"``),
describes host and CUDA device memory only and reports the array read-only where the producer says
so or the adapter is ``immutable``. Wherever a route cannot describe an array (no such API in this
release, an export that fails, other memory, anything a recipe's answers decline) the core calls
``inspect()``, which says what is wrong with it. Declare a route only where it says what
``inspect()`` would.
"""

from __future__ import annotations

from dataclasses import dataclass

EXCHANGE_API = "exchange_api"
CAPSULE = "capsule"
INSPECT = "inspect"


@dataclass(frozen=True)
class Attributes:
    """An array described from its attributes. Attribute and method names are the array's; the
    ``*_words``, ``layout_order`` and ``dtype_code_bits`` names are methods of the adapter, asked
    once per device, layout and dtype (the core caches their answers by value)."""

    #: Dotted attribute path from the array to its device object.
    device: str
    #: Adapter method: device → ``(words, DLPack device type, id)``, or None for a device the recipe
    #: does not describe.
    device_words: str
    #: Attribute whose value (hashable, compared by value) keys ``layout_order``'s answer; an array
    #: whose value is None or missing asks every time.
    layout: str
    #: Adapter method: array → its layout's major-to-minor order, ``()`` for row-major, None to decline.
    layout_order: str
    #: Adapter method: dtype → DLPack ``(code, bits)``, or ``()`` to decline.
    dtype_code_bits: str
    #: Method of the array: the address of its data.
    pointer: str
    dtype: str = "dtype"
    shape: str = "shape"
    #: Method of the array: true once its memory was freed (the adapter then explains).
    freed: str | None = None
    #: Methods of the array: whether it is computed yet, and the wait for it (which must release
    #: the GIL), done before its address is read.
    ready: str | None = None
    wait: str | None = None


@dataclass(frozen=True)
class Strided:
    """A CUDA array described from its shape, its strides in bytes, its dtype and its data's address;
    its device is the one the CUDA driver places that address on. Names are the array's, but for
    ``dtype_code_bits``, the adapter's method (asked once per dtype, cached by value)."""

    #: Adapter method: dtype → DLPack ``(code, bits)``, or ``()`` to decline.
    dtype_code_bits: str
    #: Dotted attribute path from the array to its data's address: an int, or a ctypes integer
    #: (read by its ``value``); None or 0 for no memory.
    pointer: str
    dtype: str = "dtype"
    shape: str = "shape"
    #: Attribute: the strides in bytes, one per dimension.
    strides: str = "strides"


@dataclass(frozen=True)
class ExportedCapsule:
    """An array described from the DLPack capsule its framework's exporter makes (any device the
    capsule names), the device in the framework's own words. Names are the array's, but for
    ``exporter`` and ``declines``, which are the adapter's."""

    #: Adapter method: the exporter (array → capsule), asked once.
    exporter: str
    #: Attribute of the array: its device in the framework's words.
    device: str = "device"
    #: Method of the array called before the export, and the adapter's container of its answers
    #: that send the array to ``inspect()`` instead (dtypes whose export would abort the process).
    guard: str | None = None
    declines: str | None = None
