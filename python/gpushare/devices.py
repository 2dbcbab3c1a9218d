"""Several GPUs: the current-device guard, device names, and moves between devices.

Frameworks change the thread's current CUDA device behind the user's back: ``import jax`` (its
backends' start) leaves the *last* GPU current. PyTorch then refuses to export a tensor of another
device to a consumer that passes a stream ("Can't export tensors on a different CUDA device index"),
and anything that says ``device="cuda"`` lands on the wrong GPU. gpushare makes the source's device
current for the handoff (through the source adapter's ``device_scope``), puts the old one back, and
says so in the result.

Moves (``share(x, to, device="cuda:1")``): ``p2p`` (a peer copy by the Rust core), ``pinned``
(staging through page-locked host memory), ``dlpack`` with ``dl_device``/``copy=True``, and
``move``: the source framework's own move (``Tensor.to``, ``jax.device_put``, CuPy), the baseline.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from gpushare import _native
from gpushare.adapters import ADAPTERS, HOST_DEVICE_TYPES, Adapter
from gpushare.exceptions import gpushare_error
from gpushare.paths import OwnCopy, names_of

Route = Callable[[Any], Any]

#: The paths of a move between devices, in table order (crates/core/src/paths.rs). ``move`` is the framework's own.
MOVE_PATHS = names_of("move")


def parse_device(device: str) -> tuple[bool, int]:
    """``"cpu"``/``"cpu:0"`` (PyTorch's spelling) → ``(True, 0)``; ``"cuda:1"``/``"gpu:1"``/``"cuda"``
    → ``(False, 1)``/…/``(False, 0)``."""
    if not isinstance(device, str):
        raise ValueError(f"unknown device {device!r}: a device is a name such as cpu or cuda:1")
    # The core's one parser (crates/core/src/shared/names.rs), which SharedBuffer reads too.
    return _native.text.parse_device(device)


def device_name(on_host: bool, ordinal: int) -> str:
    """``cpu`` or ``cuda:N``: the core's one formatter of device names."""
    return _native.text.device_name(on_host, ordinal)


def dlpack_place(on_host: bool, ordinal: int) -> tuple[int, int]:
    """A device as DLPack's ``(device_type, id)``: what the one ``auto`` takes."""
    return (1, 0) if on_host else (2, ordinal)


def already_on(source_device: tuple[int, int], destination: tuple[int, int]) -> bool:
    """Whether an array on DLPack device ``source_device`` is already where ``destination`` is:
    memory the host addresses (pageable, page-locked, managed) is the host's."""
    src_on_host, dst_on_host = int(source_device[0]) in HOST_DEVICE_TYPES, int(destination[0]) in HOST_DEVICE_TYPES
    if src_on_host or dst_on_host:
        return src_on_host and dst_on_host
    return int(source_device[1]) == int(destination[1])


def move_checks_source(path: str) -> bool:
    """Whether the pipeline checks the source (``Adapter.check_source``) before a move by ``path``:
    ``move`` checks what it hands over itself, after the framework's move (which detaches), and
    ``dlpack`` what the copying export refuses (it resolves a negative view)."""
    return path not in ("move", "dlpack")


def cuda_problem(ordinal: int) -> str | None:
    """None when CUDA device ``ordinal`` exists here, else why not (in words)."""
    status = getattr(_native.cuda, "driver_status", None)
    if status is None:
        return "this build of gpushare has no CUDA layer"
    s = status()
    if not s.get("available"):
        return f"there is no usable CUDA here ({s.get('reason') or 'the CUDA driver is unavailable'})"
    count = int(s.get("device_count") or 0)
    if ordinal >= count:
        return f"cuda:{ordinal} does not exist: {count} CUDA device{'s' if count != 1 else ''} visible here (cuda:0…cuda:{count - 1})"
    return None


#: Devices :func:`check_device` found usable, by the string asked. The driver's state is probed
#: once per process (crates/core/src/cuda/status.rs), so a device usable once stays usable; a
#: refusal is not kept. Why: every `share(x, ..., device="cuda:1")` checks its device, and the check
#: (two regular expressions, the driver's status built as a dict) took 11.4 µs of the 84 µs that
#: share added to a 256 MiB peer copy on 2x H200.
_USABLE: dict[str, tuple[bool, int]] = {}


def check_device(device: str) -> tuple[bool, int]:
    """Parses ``device`` and raises a gpushare error when it cannot be used here."""
    try:
        return _USABLE[device]
    except (KeyError, TypeError):
        pass
    try:
        on_host, ordinal = parse_device(device)
    except ValueError as e:
        raise gpushare_error("path_not_applicable", str(e)) from None
    if not on_host:
        problem = cuda_problem(ordinal)
        if problem is not None:
            raise gpushare_error("cuda", f"device={device!r} needs a CUDA device: {problem}")
    if isinstance(device, str):
        _USABLE[device] = (on_host, ordinal)
    return on_host, ordinal


def current_device() -> int | None:
    """The ordinal of the CUDA context current on this thread, as the driver says; None without one."""
    try:
        info = _native.cuda.current_context()
    except Exception:
        return None
    return None if info is None else int(info["device"])


def who_moves_current_device() -> str:
    """Which imported framework is known to change the current device, in words."""
    movers = []
    for adapter in ADAPTERS.values():
        why = getattr(adapter, "moves_current_device", None)
        if why and adapter.imported():
            movers.append(why)
    if not movers:
        setters = ", ".join(a.current_device_setter for a in ADAPTERS.values() if a.current_device_setter)
        return f"another framework or the user ({setters}) changed it"
    return "; ".join(movers)


class DeviceGuarded:
    """A route that runs with the source's device current when another device is current, and
    collects what it did for the result (``take_notes``, read by the core after a share)."""

    __slots__ = ("convert", "scope_of", "path", "source", "_notes", "ordering")

    def __init__(self, convert: Route, src: Adapter, path: str):
        self.convert, self.scope_of, self.path, self.source = convert, src.device_scope, path, src
        self._notes: list[str] = []
        # How the inner route orders the two sides' work (paths._ordered), for the stream report.
        self.ordering: str | None = getattr(convert, "ordering", None)

    def __call__(self, obj: Any) -> Any:
        scope = self.scope_of(obj)
        if scope is None:
            return self.convert(obj)
        ordinal, current, manager = scope
        with manager:
            value = self.convert(obj)
        if not self._notes:
            self._notes.append(self._note(ordinal, current))
        return value

    def _note(self, ordinal: int, current: int) -> str:
        raw = self.source.off_device_failure if self.path == "dlpack" else None
        failed = f"; the raw call would have failed: {raw}" if raw else ""
        return (
            f"cuda:{current} was current, not the source's cuda:{ordinal} ({who_moves_current_device()}){failed}. "
            f"gpushare made cuda:{ordinal} current for the handoff and made cuda:{current} current again after"
        )

    def take_notes(self) -> list[str]:
        # The inner route's own notes too (an importer that did something around the framework's call).
        inner = getattr(self.convert, "take_notes", None)
        notes, self._notes = self._notes, []
        return notes + (inner() if inner is not None else [])


def guard(src: Adapter, convert: Route, path: str) -> Route:
    """``convert`` guarded for the current device where the source framework cares about it."""
    if type(src).device_scope is Adapter.device_scope:
        return convert
    return DeviceGuarded(convert, src, path)


# -- moves -------------------------------------------------------------------------------------


def move_route(src: Adapter, dst: Adapter, path: str, device: str, already_there: bool = False) -> tuple[str, Route]:
    """The route of a move of ``src``'s arrays to ``device``, handed to ``dst``: ``path`` is one of
    :data:`MOVE_PATHS` (``auto`` is resolved before, by the one ``auto`` of crates/core/src/auto.rs). With
    ``already_there`` the arrays are on ``device`` already and ``move`` is the handoff alone.
    Raises PathNotApplicableError when the path cannot make this move."""
    from gpushare import auto
    from gpushare.paths import _shared_buffer_importer

    on_host, ordinal = check_device(device)
    target = device_name(on_host, ordinal)
    destination = dlpack_place(on_host, ordinal)
    if path in ("p2p", "pinned"):
        if not src.exports_dlpack:
            raise gpushare_error("path_not_applicable", f"{path} reads the source through DLPack and {src.name} arrays have none")
        if on_host:
            raise gpushare_error("path_not_applicable", f"{path} moves device memory to another GPU; for device='cpu' use path='dlpack' or 'move'")
        return path, guard(src, OwnCopy(src, path, target, _shared_buffer_importer(dst)), path)
    if path == "dlpack":
        take = dst.from_dlpack_on
        # Where the consumer asks the producer's export for the copy (copy=True reaches
        # __dlpack__), the producer resolves what a view of its own holds in a bit (PyTorch's
        # negative bit); a consumer that copies after a plain export would read the raw bytes.
        check = src.check_copying_export if dst.copy_by_producer else src.check_source

        def via_dlpack(obj: Any) -> Any:
            check(obj, dst.name, path)
            return take(obj, on_host, ordinal)

        return path, guard(src, via_dlpack, path)
    if path == "move":
        # The handoff after the move is the one auto's for an array where the move put it.
        _, handoff = auto.route(src, dst, destination) if src is not dst else ("", lambda x: x)
        # A lazy view whose values live partly in a bit (PyTorch's negative and conjugate bits)
        # keeps the bit through the framework's move, and no handoff by memory carries it: the
        # one-process path's refusal (the adapter's check_view_bits), applied to what is handed over.
        check_bits, detached = src.check_view_bits, src.detached
        if already_there:
            # Nothing to move (a framework's "move" to where the array lies can copy: NumPy's).
            def in_place(obj: Any) -> Any:
                obj = detached(obj)  # as the frameworks' moves do: the same memory
                check_bits(obj)
                return handoff(obj)

            return path, in_place
        moved = src.move

        def own_move(obj: Any) -> Any:
            obj = moved(obj, on_host, ordinal)
            check_bits(obj)
            return handoff(obj)

        return path, own_move
    raise gpushare_error(
        "path_not_applicable",
        f"path {path!r} does not move between devices; with device= use one of {', '.join(MOVE_PATHS)} or auto"
    )


def link_between(a: int, b: int) -> dict | None:
    """The driver's facts on the link from device ``a`` to ``b`` (``can_access``,
    ``performance_rank``, ``native_atomics``); None without CUDA."""
    try:
        return _native.cuda.peer_link(a, b)
    except Exception:
        return None
