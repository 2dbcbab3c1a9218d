"""The rules a process path follows before anything crosses to the worker: the one pipeline's
refusals and layout description, applied to the memory a worker will map.

A handoff to another process carries memory (a segment + offset, an IPC handle + offset, a
storage) and a description of the array in it. Whatever that description cannot say, the worker
cannot rebuild: a lazy conjugate or negative bit, a dtype NumPy has no type for, a strided view
given as a shape only, a read-only flag. These rules are the one-process share's own (the
adapter's ``check_source`` bits, the core's ``TensorInfo.refuse_for`` layout and dtype refusals,
the core's read-only note), so the two kinds of handoff refuse and warn alike; the space checks
are the process paths' own (a segment that does not fit /dev/shm dies of SIGBUS when touched).
"""

from __future__ import annotations

import errno
import math
import os
from typing import Any

from gpushare import _native
from gpushare.exceptions import GpushareError
from gpushare.exceptions import explained as _explained  # "<path>: <reason>. Fix: <fix>", with .reason and .fix

#: Where POSIX shared-memory segments (and torch.multiprocessing's CPU storages) live on Linux.
SHM_DIR = "/dev/shm"

#: The core's note for a target that can write memory its source holds read-only
#: (crates/core/src/explain/judgement.rs): the process paths warn in the same words.
READONLY_NOTE = "the target can write to memory the source marks read-only"


def _adapter(obj: Any) -> Any:
    from gpushare.adapters import adapter_of

    try:
        return adapter_of(obj)
    except Exception:  # not an array of a known framework: the path's own checks say what it is
        return None


def check_source(obj: Any) -> None:
    """Refuses a source whose values live partly in bits no process path carries (PyTorch's lazy
    conjugate and negative views): the adapter's rule, the one the one-process share applies."""
    adapter = _adapter(obj)
    if adapter is not None:
        adapter.check_view_bits(obj)


def nbytes_of(obj: Any) -> int:
    """Bytes of the array's elements, as the core describes it (a Python int for every framework:
    PaddlePaddle's ``numel()`` is a tensor). Arrays the core cannot describe (a sparse tensor)
    fall back to their own count."""
    adapter = _adapter(obj)
    if adapter is not None:
        try:
            return int(adapter.inspect(obj).nbytes)
        except Exception:
            pass
    if hasattr(obj, "element_size"):
        return int(obj.numel()) * int(obj.element_size())
    return int(getattr(obj, "nbytes", 0))


# ---------------------------------------------------------------------------------------------
# shm: the worker maps a segment and views it through NumPy.


def shm_host_view(obj: Any) -> Any:
    """The NumPy view of ``obj``'s host memory that the ``shm`` path hands over (no copy where the
    framework has one), or the one pipeline's refusal where NumPy cannot view it."""
    from gpushare.adapters import process_host

    try:
        host = process_host.host_view(_adapter(obj), obj)
    except Exception as e:
        raise _unviewable(obj, e) from e
    if host.dtype.hasobject:
        from gpushare.adapters import _numpy_dtype_refusal

        raise _numpy_dtype_refusal(host.dtype, "object pointers mean nothing in another process")
    return host


def _unviewable(obj: Any, error: Exception) -> Exception:
    """Why NumPy could not view ``obj``: the core's own refusal where it has one (a sparse, nested
    or meta tensor), else the dtype NumPy has no type for."""
    framework_error = f"{type(error).__name__}: {error}"
    adapter = _adapter(obj)
    if adapter is None:
        return _explained("conversion", "shm", f"NumPy cannot view a {type(obj).__name__}",
                          "hand over a NumPy array or a tensor of a known framework", framework_error)
    info = adapter.inspect(obj)  # raises the core's explanation for what DLPack cannot describe
    fix = "cast it to a dtype NumPy has first (e.g. float32)"
    if "torch_mp" in adapter.process_paths:
        fix += ", or use path='torch_mp', which carries the framework's own dtype"
    return _explained("conversion", "shm",
                      f"the worker views the segment through NumPy, which has no {info.dtype} dtype", fix,
                      framework_error)


def shm_layout(view: Any, to: str, source: str | None = None) -> dict:
    """What the worker needs to rebuild ``view`` over the segment: shape, strides in bytes (a
    transposed, sliced or stepped view is not its shape alone), the dtype itself (structured and
    ml_dtypes types pickle whole; their ``str`` is raw bytes ``|V8``) and the read-only flag.

    Where the worker hands the view on to another framework, the view must pass the core's
    description and refusals for that framework, as a one-process share into it would.
    ``source``: the framework of the array handed over, named in a refusal beside the target."""
    host = _adapter(view)  # the framework of the host view itself (NumPy's)
    if host is not None and to != host.name:
        try:
            info = host.inspect(view)  # the core's dtype refusals (structured, ml_dtypes)
        except GpushareError as e:  # NumPy's words for its own export, said of this handoff
            subject = f"{_native.text.route_label(source, to)} via shm" if source else f"shm to {to}"
            raise _explained("conversion", subject,
                             f"the worker views the segment through NumPy and hands that view to {to} by DLPack: "
                             f"{e.reason}", e.fix, e.framework_error) from e
        except Exception as e:  # what the core's description has no words for (a byte order)
            raise _explained("conversion", "shm", f"{to} cannot view an array of dtype {view.dtype.str} in the worker",
                             f"make a native copy first (x.astype(x.dtype.newbyteorder('='))), or hand it "
                             f"to={host.name!r}, which carries its dtype as it is", f"{type(e).__name__}: {e}") from e
        info.refuse_for(to, "dlpack")  # and its layout ones (negative strides into torch)
    return {"shape": tuple(int(d) for d in view.shape), "strides": tuple(int(s) for s in view.strides),
            "dtype": view.dtype, "readonly": not view.flags.writeable}


# ---------------------------------------------------------------------------------------------
# ipc: the worker maps the allocation and views it through __cuda_array_interface__.


def ipc_layout(obj: Any, itemsize: int) -> dict:
    """What the worker needs to view ``obj`` in the allocation it maps: shape, strides in bytes
    (None where the view is C-contiguous, as before) and the bytes the view spans from its first
    element, which the mapping must cover. From the core's description of the array, so a
    transposed, column or stepped view is viewed as it is, not as its shape alone."""
    info = _adapter(obj).inspect(obj)
    shape, strides = [int(d) for d in info.shape], [int(s) for s in info.strides]
    if 0 in shape:
        return {"shape": tuple(shape), "strides": None, "span": 0}
    if any(s < 0 for s, d in zip(strides, shape) if d > 1):
        raise _explained("unsafe_input", "ipc",
                         f"negative strides {strides}: the worker maps the allocation from the view's first element on",
                         "make a contiguous copy first (x.contiguous(), cupy.ascontiguousarray(x))")
    span = sum((d - 1) * s for d, s in zip(shape, strides)) * itemsize + itemsize
    return {"shape": tuple(shape), "strides": None if info.contiguous else tuple(s * itemsize for s in strides),
            "span": span}


def free_bytes(directory: str = SHM_DIR) -> int | None:
    """Bytes an unprivileged process can still allocate in ``directory``'s filesystem, or None
    where it cannot be asked."""
    try:
        st = os.statvfs(directory)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def _no_room(path: str, nbytes: int, what: str, free: int | None, framework_error: str | None = None) -> Exception:
    have = "has too little room" if free is None else f"has {_native.text.format_bytes(free)} free"
    return _explained(
        "path_not_applicable", path,
        f"{what} needs {_native.text.format_bytes(nbytes)} of shared memory and {SHM_DIR} {have} "
        f"(a process touching memory past the end of {SHM_DIR} dies of SIGBUS)",
        f"give {SHM_DIR} more room (docker run --shm-size=1g, or mount -o remount,size=2G {SHM_DIR}), "
        f"release earlier handoffs (result.release()), or use another path", framework_error)


def check_shm_space(path: str, nbytes: int, what: str) -> None:
    """Refuses a handoff whose new shared memory does not fit in /dev/shm: tmpfs hands out pages
    when they are first touched, so an oversized segment is created without complaint and the
    process dies of SIGBUS on the write that finds no page (64 MiB is Docker's default)."""
    free = free_bytes(SHM_DIR)
    if free is not None and nbytes > free:
        raise _no_room(path, nbytes, what, free)


def no_space_error(path: str, nbytes: int, error: OSError) -> Exception:
    """The refusal for a segment whose pages could not be reserved (another process took the
    room between the check and the segment)."""
    return _no_room(path, nbytes, "the segment", free_bytes(SHM_DIR), f"{type(error).__name__}: {error}")


def unwritable_error(path: str, error: OSError) -> Exception:
    """The refusal for a segment that cannot be made at all: /dev/shm read-only (a container's
    ``--read-only`` without a tmpfs for it), not writable by this user, or missing."""
    why = "is read-only" if error.errno == errno.EROFS else \
        "is not writable by this process" if error.errno in (errno.EACCES, errno.EPERM) else "has no room for a new file"
    if error.errno == errno.ENOENT:
        why = "does not exist"
    return _explained(
        "path_not_applicable", path,
        f"{SHM_DIR} {why}, so gpushare cannot make the shared memory segment the worker maps",
        f"make {SHM_DIR} a writable tmpfs (docker run --tmpfs /dev/shm or --shm-size=1g), or use another path "
        "(torch_mp for a torch tensor, ipc for CUDA memory)", f"{type(error).__name__}: {error}")


def shm_room_problem(nbytes: int) -> str | None:
    """Why a new segment of ``nbytes`` cannot be made in /dev/shm now, in words (what ``advise``
    says of ``shm`` before recommending it): a read-only /dev/shm, or too little room; None where
    it fits or nobody can say."""
    try:
        readonly = bool(os.statvfs(SHM_DIR).f_flag & os.ST_RDONLY)
    except OSError:
        readonly = False
    if readonly:
        return (f"{SHM_DIR} is read-only, so gpushare cannot make the shared memory segment the worker maps "
                f"(make {SHM_DIR} a writable tmpfs, or use another path)")
    free = free_bytes(SHM_DIR)
    if free is None or nbytes <= free:
        return None
    return (f"the segment needs {_native.text.format_bytes(nbytes)} of shared memory and {SHM_DIR} has {_native.text.format_bytes(free)} free "
            f"(give {SHM_DIR} more room, or release earlier handoffs)")


def check_timeout(name: str, value: Any) -> float:
    """A timeout is a finite number of seconds above zero: NaN compares false with every deadline,
    so a request would never time out, and zero or less times out every request."""
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} is a number of seconds, got {value!r}") from None
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"{name} is a finite number of seconds above 0, got {value!r}")
    return seconds


def readonly_warning(source_readonly: bool, worker_writable: bool) -> str | None:
    """The core's read-only note where the worker holds a writable view of memory the source holds
    read-only (a torch tensor has no read-only flag; a NumPy array keeps it)."""
    return READONLY_NOTE if source_readonly and worker_writable else None


def warn_moved(framework: str, path: str, pid: int | None) -> None:
    """Warns, at the caller's line, that a handoff moved the caller's array to other memory and
    freed the memory it lay in (torch_mp of a tensor not yet in shared memory: torch swaps the
    storage's memory for a shared copy). Every view made of it before (x.numpy(), a DLPack import,
    an earlier share) keeps the old address: reading one reads freed memory, and at 64 MiB crashed
    the process."""
    import warnings

    from gpushare.exceptions import GpushareWarning
    from gpushare.warn_site import user_stacklevel

    warnings.warn(
        f"{path} to worker pid {pid} moved the {framework} array's storage into shared memory and freed the memory "
        "it lay in: arrays that viewed it before (NumPy arrays, DLPack imports, earlier shares of it) now read freed "
        "memory and must not be used. Call x.share_memory_() before making such views, or hand the array over by "
        "path='shm' (auto does), which leaves it where it is",
        GpushareWarning, stacklevel=user_stacklevel())


__all__ = ["check_source", "nbytes_of", "shm_host_view", "shm_layout", "ipc_layout", "free_bytes", "check_shm_space",
           "check_timeout", "readonly_warning", "no_space_error", "shm_room_problem", "unwritable_error", "warn_moved"]
