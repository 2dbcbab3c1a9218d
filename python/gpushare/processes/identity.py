"""Identity of memory, asked in the process that holds it. Whether two processes' identities name
the same physical memory (the verdict of a handoff across processes) is the core's judge.

Host memory is named by the file behind the mapping (``/proc/self/maps``), device memory by the
CUDA IPC handle of its allocation; see :mod:`gpushare.processes`.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct
from typing import Any

try:
    import fcntl
except ImportError:  # not a POSIX system: no ioctl, and no /proc/self/maps either
    fcntl = None  # type: ignore[assignment]

from gpushare import _native
from gpushare.exceptions import GpushareError


def described(value: Any) -> dict:
    """``gpushare.inspect(value).to_dict()``, asked in the process that holds ``value``: one side of a
    handoff to a worker as a share reports it. An array ``inspect`` refuses although it is in hand (a
    NumPy array of a dtype NumPy cannot export through DLPack, which ``shm`` hands over) is described
    by its adapter through a view of its memory (``Adapter.described_through_its_memory``)."""
    from gpushare.adapters import adapter_of
    from gpushare.api import inspect

    try:
        return inspect(value).to_dict()
    except GpushareError as refused:
        try:
            report = adapter_of(value).described_through_its_memory(value)
        except GpushareError:
            report = None
        if report is None:
            raise refused
        return report


def host_identity(ptr: int) -> dict | None:
    """What backs host address ``ptr``: the mapping's file (``/dev/shm/NAME`` for a shared-memory
    segment, ``""`` for anonymous memory), its device and inode, and the offset of ``ptr`` in the
    file. None where ``/proc/self/maps`` does not exist (not Linux)."""
    if _procmap_query_works:
        try:
            return _queried_identity(ptr)
        except OSError as e:
            if e.errno in (errno.ENOTTY, errno.EINVAL, errno.EOPNOTSUPP):
                _no_procmap_query()  # a kernel before 6.11: read the list from now on
            # Anything else (a name longer than the buffer, an unreadable list): the list says.
    try:
        line = _maps_line(ptr)
    except OSError:
        return None
    if line is not None:
        parts = line.split(None, 5)
        lo, hi = (int(x, 16) for x in parts[0].split("-"))
        if lo <= ptr < hi:
            path = parts[5].strip() if len(parts) > 5 else ""
            shared = parts[1][3] == "s"
            deleted = path.endswith(" (deleted)")
            inode = int(parts[4])
            return {
                "kind": "host",
                "file": path[: -len(" (deleted)")] if deleted else path,
                "unlinked": deleted,
                "mapping": "shared" if shared else "private",
                "dev": parts[3],
                "inode": inode,
                "offset": int(parts[2], 16) + (ptr - lo),
                "address": ptr,
            }
    return {"kind": "host", "file": None, "unlinked": False, "mapping": "unknown", "dev": None,
            "inode": 0, "offset": None, "address": ptr}


# Linux 6.11's PROCMAP_QUERY ioctl on /proc/self/maps: the one mapping that holds an address, found
# by the kernel's own lookup. Why: writing out /proc/self/maps costs the kernel about 3 µs a line
# up to the one asked for, and a small segment is mapped among a framework's libraries, near the end
# of a list of a few thousand lines: on the 2-core CPU a 16 KiB `shm` handoff took 0.65-1.0 ms
# against 0.2-0.4 ms at 4 MiB and up (`gpushare.bench("torch", "torch", across=worker)`, both
# sides naming their memory every handoff), a cost that came from the check, not the path.
# struct procmap_query (include/uapi/linux/fs.h): size, query_flags, query_addr, vma_start,
# vma_end, vma_flags, vma_page_size, vma_offset, inode, dev_major, dev_minor, vma_name_size,
# build_id_size, vma_name_addr, build_id_addr.
_PROCMAP_QUERY_LAYOUT = struct.Struct("=9Q4I2Q")
_PROCMAP_QUERY = (3 << 30) | (_PROCMAP_QUERY_LAYOUT.size << 16) | (ord("f") << 8) | 17  # _IOWR('f', 17, ...)
_VMA_SHARED = 0x08
_procmap_query_works = fcntl is not None and os.path.exists("/proc/self/maps")


def _no_procmap_query() -> None:
    global _procmap_query_works
    _procmap_query_works = False


def _queried_identity(ptr: int) -> dict:
    """:func:`host_identity` asked of the kernel by PROCMAP_QUERY (OSError ENOTTY before 6.11)."""
    name = ctypes.create_string_buffer(4096)
    query = bytearray(_PROCMAP_QUERY_LAYOUT.pack(_PROCMAP_QUERY_LAYOUT.size, 0, ptr, 0, 0, 0, 0, 0, 0, 0, 0,
                                                 len(name), 0, ctypes.addressof(name), 0))
    fd = os.open("/proc/self/maps", os.O_RDONLY)
    try:
        fcntl.ioctl(fd, _PROCMAP_QUERY, query, True)
    except OSError as e:
        if e.errno != errno.ENOENT:
            raise
        # No mapping holds ptr.
        return {"kind": "host", "file": None, "unlinked": False, "mapping": "unknown", "dev": None,
                "inode": 0, "offset": None, "address": ptr}
    finally:
        os.close(fd)
    (_, _, _, lo, _, flags, _, offset, inode, major, minor, name_size, _, _, _) = _PROCMAP_QUERY_LAYOUT.unpack(query)
    # The kernel names a mapping as /proc/self/maps does: the file's path (" (deleted)" once
    # unlinked), "[heap]", "[stack]", or nothing for anonymous memory.
    path = os.fsdecode(name.raw[: max(name_size - 1, 0)]) if name_size else ""
    deleted = path.endswith(" (deleted)")
    return {
        "kind": "host",
        "file": path[: -len(" (deleted)")] if deleted else path,
        "unlinked": deleted,
        "mapping": "shared" if flags & _VMA_SHARED else "private",
        "dev": f"{major:02x}:{minor:02x}",
        "inode": inode,
        "offset": offset + (ptr - lo),
        "address": ptr,
    }


def _maps_line(ptr: int) -> str | None:
    """The line of ``/proc/self/maps`` of the last mapping that starts at or below ``ptr`` (the one
    that holds it, if any does), read a page at a time and only as far as that line.

    Why: every handoff of a host array to a worker asks for an identity on both sides, and the
    kernel lists the mappings by address. Parsing each line from the top (about 3 µs each) cost
    1.6 ms for a 4 KiB segment, which the kernel maps among a framework's libraries near the end
    of the list, and 55 µs for one of 1 MiB, mapped below them: on the 2-core CPU handoffs of
    1-16 KiB took 2-6x those of 1 MiB and more. A page's lines are bisected on their start address,
    and reading stops at the first page that begins past ``ptr`` (the whole list, read at once,
    cost 0.5 ms whatever the address)."""
    fd = os.open("/proc/self/maps", os.O_RDONLY)
    try:
        found, tail = None, b""
        while chunk := os.read(fd, 4096):
            lines = (tail + chunk).split(b"\n")
            tail = lines.pop()  # a line the next page completes
            if not lines:
                continue
            if int(lines[0].split(b"-", 1)[0], 16) > ptr:
                break  # this page starts past ptr: the line before it was the last at or below
            first, last = 1, len(lines)
            while first < last:  # the last line of this page that starts at or below ptr
                mid = (first + last) // 2
                if int(lines[mid].split(b"-", 1)[0], 16) <= ptr:
                    first = mid + 1
                else:
                    last = mid
            found = lines[first - 1]
            if first < len(lines):
                break  # a later line of this page starts past ptr
        else:
            if tail and int(tail.split(b"-", 1)[0], 16) <= ptr:
                found = tail
    finally:
        os.close(fd)
    return None if found is None else os.fsdecode(found)


def cuda_identity(ptr: int, nbytes: int, export: bool = True) -> dict | None:
    """The allocation device address ``ptr`` lies in, as this process sees it: base, size, offset,
    owning context (and whether it is the primary one), and, with ``export``, the allocation's CUDA
    IPC handle (or why legacy IPC cannot export it). None without CUDA."""
    attrs = _native.cuda.pointer_attributes(ptr)
    if not attrs or attrs.get("memory_type") in (None, "pageable_host"):
        return None
    ident = {
        "kind": "cuda",
        "address": ptr,
        "device": attrs.get("device_ordinal"),
        "context": attrs.get("context"),
        "context_is_primary": attrs.get("context_is_primary"),
        "base": attrs.get("range_start"),
        "size": attrs.get("range_size"),
        "offset": ptr - attrs["range_start"] if attrs.get("range_start") else None,
        "memory_type": attrs.get("memory_type"),
        "handle": None,
        "ipc_refusal": None,
    }
    if export:
        try:
            ident["handle"] = _native.cuda.ipc_export(ptr, nbytes)["handle"].hex()
        except GpushareError as e:
            ident["ipc_refusal"] = str(e)
    return ident


def _identity_of(value: Any, nbytes: int, export: bool = True) -> dict | None:
    ptr, is_cuda = _address(value)
    if ptr is None:
        return None
    return cuda_identity(ptr, nbytes, export) if is_cuda else host_identity(ptr)


def _address(value: Any) -> tuple[int | None, bool]:
    if hasattr(value, "data_ptr") and hasattr(value, "is_cuda"):  # torch
        try:
            return int(value.data_ptr()), bool(value.is_cuda)
        except RuntimeError:  # no storage of its own (sparse, nested): no one address to name
            return None, bool(value.is_cuda)
    cai = getattr(value, "__cuda_array_interface__", None)
    if cai is not None:
        return int(cai["data"][0]), True
    ai = getattr(value, "__array_interface__", None)
    if ai is not None:
        return int(ai["data"][0]), False
    return None, False


def same_memory(a: dict | None, b: dict | None) -> tuple[bool, str]:
    """Whether two identities (each from its own process) name the same physical memory, and why:
    the core's (crates/core/src/explain/identity.rs), which its one judge reads."""
    return _native.processes.same_memory(a, b)
