"""Across processes: hand an array to another Python process and see what that process holds.

A :class:`Worker` is a Python process gpushare starts (``multiprocessing`` spawn, so CUDA works in
it) and stops. Use it as a context manager::

    with gpushare.Worker() as w:                       # or Worker(device="cuda:1")
        r = w.share(x, path="ipc")                     # or gpushare.share(x, "torch", across=w)
        r.verdict, r.source["identity"], r.target["identity"]   # the same allocation?
        r.remote.read()                                # the worker's array, read back
        gpushare.compare(x, "torch", across=w)         # every path, one table

Each process has its own address space and, on a GPU, its own CUDA context: a raw pointer means
nothing in the other process. The verdict is judged on the *allocation identity* of both sides:

- host memory: the file behind the mapping (``/proc/self/maps``: device, inode, offset in the file).
  A POSIX shared-memory segment shows as ``/dev/shm/NAME`` + offset on both sides; anonymous
  private memory has no file, so it cannot be the same memory as anything in another process.
- device memory: the CUDA IPC handle of the allocation (``cuIpcGetMemHandle`` on the base
  ``cuMemGetAddressRange`` gives) + the offset in it. The worker maps that allocation at an address
  of its own, in a context of its own.

"shared" means both sides have the same identity (the core's one judge: crates/core/src/explain/judgement.rs);
tests prove it with a write in one process read in the other. Paths (each a row of the same table):

=============  ==============================================================================
``ipc``        CUDA IPC by the Rust core: allocation handle + offset, opened by the worker
``torch_mp``   ``torch.multiprocessing``'s own sharing (CPU: shared-memory file descriptor, which
               torch moves a private tensor into, freeing its old memory: ``auto`` takes it only
               for a tensor already shared; CUDA: the caching allocator's block handle + offset)
``shm``        a POSIX shared-memory segment in /dev/shm; the worker maps it and views it with the
               source's strides, dtype and read-only flag (gpushare.processes.rules)
``nccl``       NCCL send/recv through ``torch.distributed`` (a copy, over NVLink/PCIe/SHM)
``nccl_socket`` NCCL with ``NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1``: sockets on loopback, the
               stand-in for two hosts (run between two helper workers: NCCL reads these once per process)
``gloo``       gloo send/recv through ``torch.distributed`` (a copy over TCP loopback; CPU)
``remote``     to a worker on another host (``Worker(host="HOST:PORT")``, served by ``gpushare
               worker --listen``): gloo for host tensors, NCCL for device tensors, over the
               interface that reaches it; the row's ``link`` says what carried the bytes
               (gpushare.processes.remote)
=============  ==============================================================================

Nothing is left behind: every wait has a timeout, Ctrl-C during a wait stops the worker, a worker
that died or was killed raises :class:`~gpushare.exceptions.WorkerError`, the worker exits when
its parent goes away, and shared-memory segments are unlinked when the handoff is released.
"""

from __future__ import annotations

import collections
import multiprocessing as mp
import os
import signal
import threading
import time
import weakref
from typing import Any, Sequence

from gpushare import _native
from gpushare.processes import rules as process_rules
from gpushare.adapters import ADAPTERS
from gpushare.exceptions import GpushareError, WorkerError, gpushare_error
# Identity of memory and its judge (re-exported: part of this module's interface).
from gpushare.processes.identity import _address, cuda_identity, host_identity, same_memory  # noqa: F401
# Each process path's route: what applies, and the handoff (re-exported: part of this module's interface).
from gpushare.processes.routes import (  # noqa: F401
    MECHANISMS, PROCESS_PATHS, SOCKET_ENV, TARGETS, TRANSPORTS, RemoteArray, _framework_of, _library, _steps,
    applicability, hand_over, resolve_auto, shm_copies,
)
from gpushare.processes.worker import _serve, remove_nccl_log

# Each handoff is the core's pipeline (crates/core/src/share/process.rs) run over the path's
# transport (gpushare.processes.routes): the refusal, the timing loop, the identity judge and the
# typed report (crates/core/src/report/process.rs, rendered by crates/core/src/render/process.rs)
# are the core's, and the results are every handoff's classes (ShareResult, Comparison, Benchmark,
# whose ``worker`` names the process). This module keeps the transport: the worker process, its
# requests and replies.
ShareResult = _native.share.ShareResult
Comparison = _native.lab.Comparison
Benchmark = _native.lab.Benchmark

#: Environment a worker always gets: NVLink multicast off (NCCL NVLS, torch symmetric memory,
#: NVSHMEM), which the shared GPU machines do not allow.
SAFE_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}

#: The worker's frameworks keep their warnings to themselves (ProcessGroupNCCL's notes on unbatched
#: send/recv reach the user's notebook through the worker's inherited stderr); errors still print.
QUIET_ENV = {"TORCH_CPP_LOG_LEVEL": "ERROR"}

DEFAULT_TIMEOUT = 60.0
START_TIMEOUT = 120.0



_LIVE: "weakref.WeakSet[Worker]" = weakref.WeakSet()


def _unguarded_main_hint(exitcode: int | None) -> str | None:
    """What to tell a script whose worker exited with code 1 before it answered: multiprocessing's
    spawn imports the script again in the worker, where a Worker started at top level raises
    ("An attempt has been made to start a new process before the current process has finished its
    bootstrapping phase") and exits with 1. None where that cannot be the cause (no script)."""
    import sys

    main = sys.modules.get("__main__")
    if exitcode != 1 or getattr(main, "__file__", None) is None:
        return None
    return (
        "If this script starts the Worker at its top level, guard that code with "
        "`if __name__ == \"__main__\":` (the worker process imports the script again, as "
        "multiprocessing's spawn does, and would start a Worker of its own)."
    )


def _release_sent_device_memory() -> None:
    """Once a worker has stopped, each imported framework whose own transport keeps what it sent of
    device memory until the receiver lets go (torch.multiprocessing's CUDA IPC) frees it."""
    for adapter in ADAPTERS.values():
        if not adapter.imported():
            continue
        steps = adapter.process_steps()
        release = getattr(steps, "release_sent", None)
        if release is not None:
            try:
                release()
            except Exception:  # nothing left to free is not a failure of stop()
                pass


class Worker:
    """A Python process gpushare starts and stops, to hand arrays to.

    Parameters
    ----------
    device : ``"cuda:N"``: the device the worker works on (its own context there); default cuda:0
        when CUDA is usable. Give another device (``Worker(device="cuda:1")``) for two-GPU paths.
    env : extra environment for the worker (set before it imports any framework).
    timeout : seconds any one request may take before :class:`WorkerError` (default 60).
    start_timeout : seconds the worker may take to start (default 120), and to import the
        frameworks of its first handoff of a kind, as long as it works: a worker that uses no CPU
        time for ``timeout`` seconds meanwhile has stopped answering (Linux; elsewhere the
        import has ``start_timeout``).

    ``with Worker() as w:`` starts it and stops it (also on errors). Several threads may use one
    worker: replies are matched to requests, and handoffs run one at a time. ``w.stop()`` stops it by
    message, then by SIGTERM, then SIGKILL, each with a timeout. The worker exits by itself when the
    parent goes away.
    """

    def __init__(self, device: str | None = None, *, host: str | None = None, iface: str | None = None,
                 env: dict | None = None, timeout: float = DEFAULT_TIMEOUT, start_timeout: float = START_TIMEOUT):
        self.device = device
        #: ``HOST:PORT`` of a worker on another host (``gpushare worker --listen``), or None.
        self.host = host
        self.iface = iface
        self._remote_link: dict | None = None
        if host is not None:
            from gpushare.processes.remote import parse_address

            parse_address(host)  # a malformed address fails here, not at start()
            if device is not None:
                raise gpushare_error("gpushare", "a remote worker's device is chosen where it runs "
                                                 "(gpushare worker --listen HOST:PORT --device cuda:N)")
        elif iface is not None:
            raise gpushare_error("gpushare", "iface= names the interface that reaches a remote worker: give host= too")
        self.env = {**SAFE_ENV, **QUIET_ENV, **(env or {})}
        self.timeout = process_rules.check_timeout("timeout", timeout)
        self.start_timeout = process_rules.check_timeout("start_timeout", start_timeout)
        self._proc: Any = None
        self._conn: Any = None
        self._closed_reason: str | None = None
        self._groups: dict[str, Any] = {}
        self._segments: list[Any] = []
        self._preloaded: set[str] = set()
        self._helpers: dict = {}  # helper workers of the NCCL paths (stopped with this one)
        self._peer_groups: dict = {}  # NCCL groups this worker joined with a helper: their stores
        self._results: "weakref.WeakSet[ShareResult]" = weakref.WeakSet()
        # Several threads may use one worker: each request has an id, its reply comes back with it,
        # and a reply read by another thread waits in _replies for its own.
        self._lock = threading.RLock()
        self._handoff_lock = threading.RLock()
        self._next_id = 0
        self._replies: dict[int, tuple] = {}
        self._pending: dict[tuple[int, str], collections.deque] = {}

    # -- life cycle --

    def start(self) -> "Worker":
        if self.alive:
            return self
        if self.host is not None:
            return self._start_remote()
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe(duplex=True)
        # Only the child's copy of ``child`` should stay open, so the worker sees EOF when we go.
        proc = ctx.Process(target=_serve, args=(child, dict(self.env)), daemon=True, name="gpushare-worker")
        try:
            proc.start()
        except BaseException:  # nothing started (the bootstrapping error of an unguarded script)
            child.close()
            parent.close()
            raise
        self._proc = proc
        try:
            child.close()
            self._conn = parent
            self._closed_reason = None
            self._preloaded = set()
            _LIVE.add(self)
            self.info = self._call("ping", timeout=self.start_timeout)
        except GpushareError as e:
            self.stop(timeout=1.0)
            hint = _unguarded_main_hint(self._proc.exitcode)
            if hint is None:
                raise
            raise gpushare_error("worker", f"{e}. {hint}") from e
        except BaseException:
            # Ctrl-C (or any error) while the worker starts: it must not outlive the call.
            self.stop(timeout=1.0)
            raise
        return self

    def _start_remote(self) -> "Worker":
        """Connects to the worker at ``host`` (within ``timeout``: the error names the address) over
        the interface that reaches it, and asks who it is."""
        from gpushare.processes import remote as remote

        host, port = remote.parse_address(self.host)
        named = self.iface or os.environ.get(remote.GLOO_VAR)
        self.interface, self.local_address = remote.choose_interface(host, port, named, remote.GLOO_VAR)
        nccl_named = self.iface or os.environ.get(remote.NCCL_VAR)
        self.nccl_interface = (remote.choose_interface(host, port, nccl_named, remote.NCCL_VAR)[0] if nccl_named
                               else self.interface)
        self._conn, _ = remote.connect(host, port, self.timeout)
        self._proc = remote.RemoteProcess(self.host)
        self._closed_reason = None
        self._preloaded = set()
        self._remote_link = None
        _LIVE.add(self)
        try:
            self.info = self._call("ping", timeout=self.timeout)
        except WorkerError as e:
            if "stopped answering" not in str(e):
                raise
            # Connected, yet no worker answered: the listener is serving another peer (one at a
            # time; this connection waits in its queue), or it is stopped. Nothing is left of it here.
            raise gpushare_error(
                "worker", f"{self.host} accepted the connection but no worker answered within {self.timeout:g} s: "
                          f"`gpushare worker --listen` serves one peer at a time (is another connected to it?), "
                          f"or it is stopped or hung") from None
        except BaseException:
            self.stop(timeout=1.0)
            raise
        self._proc.pid = self.info["pid"]
        return self

    def _link(self) -> dict:
        """The remote worker's side of the link: its host, interface, address and device."""
        if self._remote_link is None:
            self._remote_link = self._call("link")
        return self._remote_link

    def __enter__(self) -> "Worker":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __del__(self) -> None:
        try:
            self.stop(timeout=1.0)
        except Exception:
            pass

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.is_alive() and self._closed_reason is None

    @property
    def exitcode(self) -> int | None:
        return self._proc.exitcode if self._proc is not None else None

    def stop(self, timeout: float = 5.0) -> None:
        """Stops the worker and releases what the parent holds for it (segments, process groups).
        Idempotent; never hangs longer than about ``3 × timeout``."""
        proc, conn = self._proc, self._conn
        for r in list(self._results):
            r._release_local()
        if proc is not None and proc.is_alive() and conn is not None and self._closed_reason is None:
            with self._lock:
                try:
                    conn.send((0, "exit", {}))
                    deadline = time.monotonic() + timeout
                    while conn.poll(max(deadline - time.monotonic(), 0)):
                        if conn.recv()[0] == 0:  # replies to other requests may come first
                            break
                except (OSError, EOFError, ValueError):
                    pass
        if proc is not None:
            proc.join(timeout)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout)
            if proc.is_alive():
                proc.kill()
                proc.join(timeout)
        if conn is not None:
            conn.close()
        if proc is not None and self.host is None:
            remove_nccl_log(proc.pid)  # a worker killed before its own clean-up leaves NCCL's lines
        for key in list(self._groups):
            self._close_group(key)
        for helper in list(self._helpers.values()):
            helper.stop(timeout)
        self._helpers.clear()
        self._peer_groups.clear()
        self._release_segments()
        _release_sent_device_memory()
        self._conn = None
        if self._closed_reason is None:
            self._closed_reason = "stopped"
        _LIVE.discard(self)

    def _release_segments(self) -> None:
        while self._segments:
            seg = self._segments.pop()
            seg.close()  # a view the user still holds keeps the memory; the name goes now
            seg.unlink()

    def _died(self, detail: str | None = None) -> WorkerError:
        if self.host is not None:
            return self._remote_failed(
                f"{self._who()} died: it closed the connection (killed, crashed "
                f"or exited); start a new one there and a new Worker", detail)
        if self._proc is not None:
            self._proc.join(2.0)  # the pipe closes before the process is reaped: wait for its status
        code = self._proc.exitcode if self._proc is not None else None
        if code is None:
            how = "closed its pipe and is not answering"
        elif code < 0:
            how = f"was killed by signal {signal.Signals(-code).name}"
        else:
            how = f"exited with code {code}"
        self._closed_reason = f"worker pid {self.pid} {how}"
        pid = self.pid
        self.stop(timeout=1.0)
        self._closed_reason = f"worker pid {pid} {how}"
        return gpushare_error("worker", f"the gpushare worker (pid {pid}) {how}; start a new Worker")

    # -- requests --

    def _send(self, op: str, **kwargs: Any) -> int:
        """Sends a request; its id, which _recv(op) in the same thread waits for (oldest first)."""
        if self._closed_reason is not None and self._proc is not None:
            raise gpushare_error("worker", f"this worker cannot be used: {self._closed_reason}")
        if self._proc is None:
            raise gpushare_error("worker", "this worker is not started: use `with Worker() as w:` or w.start()")
        if not self._proc.is_alive():
            raise self._died()
        with self._lock:
            self._next_id += 1
            rid = self._next_id
            try:
                self._conn.send((rid, op, kwargs))
            except (OSError, EOFError, BrokenPipeError, AttributeError):
                raise self._died() from None
            self._pending.setdefault((threading.get_ident(), op), collections.deque()).append(rid)
        return rid

    def _take_reply(self, rid: int) -> tuple | None:
        """The reply to request ``rid`` if it has come (read from the pipe, or by another thread)."""
        with self._lock:
            if rid in self._replies:
                return self._replies.pop(rid)
            if self._conn is None:
                raise gpushare_error("worker", f"this worker cannot be used: {self._closed_reason or 'stopped'}")
            # Short polls: Ctrl-C lands between them, and a dead worker is noticed at once.
            while self._conn.poll(0.05):
                try:
                    reply = self._conn.recv()
                except (EOFError, OSError):
                    raise self._died() from None
                if reply[0] == rid:
                    return reply[1:]
                self._replies[reply[0]] = reply[1:]
        return None

    def _recv(self, op: str, timeout: float | None = None, rid: int | None = None, idle: float | None = None) -> Any:
        """The reply to request ``rid`` (what _send returned), or to this thread's oldest ``op``.
        ``idle``: a request allowed a long ``timeout`` because it works (an import) ends sooner when
        the worker stops working: no reply and no CPU time used for ``idle`` seconds (a worker
        stopped or hung) is a worker that stopped answering."""
        with self._lock:
            pending = self._pending.get((threading.get_ident(), op))
            if rid is None:
                if not pending:
                    raise gpushare_error("worker", f"no {op!r} request of this thread is waiting for a reply")
                rid = pending.popleft()
            elif pending and rid in pending:
                pending.remove(rid)
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        watch = _Progress(self.pid, idle) if idle is not None and self.host is None else None
        try:
            while True:
                reply = self._take_reply(rid)
                if reply is not None:
                    break
                if not self._proc.is_alive():
                    raise self._died()
                if time.monotonic() > deadline:
                    raise self._no_answer(op, self.timeout if timeout is None else timeout)
                if watch is not None and watch.stalled():
                    raise self._stalled(op, idle)
                time.sleep(0.001)  # another thread holds the pipe: let it read
        except KeyboardInterrupt:
            # The worker's answer would arrive out of order: stop it, so nothing is left running.
            self._closed_reason = "interrupted (Ctrl-C) during a request"
            self.stop(timeout=1.0)
            raise
        return self._unpack(op, reply)

    def _unpack(self, op: str, reply: tuple) -> Any:
        """A reply's value, or the worker's error raised here."""
        if reply[0] == "ok":
            return reply[1]
        _, kind, message, tb = reply
        err = gpushare_error("worker", f"in the worker, {op} failed: {kind}: {message}")
        err.worker_traceback = tb
        raise err

    def _no_answer(self, op: str, seconds: float, detail: str | None = None) -> WorkerError:
        """The error of a request not answered within ``seconds``; the worker is stopped."""
        if self.host is not None:
            return self._remote_failed(
                f"{self._who()} stopped answering: no reply to {op!r} within "
                f"{seconds:g} s (the worker is stopped or hung, or the link or its host is down)", detail)
        self._closed_reason = f"request {op!r} timed out"
        pid = self.pid
        self.stop(timeout=1.0)
        return gpushare_error("worker", f"the gpushare worker (pid {pid}) did not answer {op!r} within {seconds:g} s; "
                                        f"it was stopped")

    def _stalled(self, op: str, seconds: float) -> WorkerError:
        """The error of a worker that stopped working on a long request; the worker is stopped."""
        self._closed_reason = f"the worker stopped answering during {op!r}"
        pid = self.pid
        self.stop(timeout=1.0)
        return gpushare_error("worker", f"the gpushare worker (pid {pid}) stopped answering: no reply to {op!r} and no "
                                        f"CPU time used for {seconds:g} s (stopped or hung); it was stopped")

    def _who(self) -> str:
        pid = self.pid
        return f"the worker at {self.host}" + (f" (pid {pid})" if pid else "")

    def _remote_failed(self, message: str, detail: str | None) -> WorkerError:
        """A remote worker's failure: the connection, groups and helpers of this side are closed."""
        self._closed_reason = message
        self.stop(timeout=0.5)
        self._closed_reason = message
        err = gpushare_error("worker", message)
        if detail:
            err.framework_error = detail  # the engine's own words (gloo's reset or timeout)
        return err

    def _peer_failed(self, op: str, error: BaseException) -> WorkerError:
        """The engine failed while the remote worker took part (gloo's send): a peer that died has
        closed its connection too, and one that stopped answering made the engine time out."""
        text = str(error).strip()
        first = text.splitlines()[0] if text else type(error).__name__
        died = any(w in text.lower() for w in ("reset by peer", "closed by peer", "connection closed", "broken pipe"))
        if not died and self._conn is not None:
            try:  # a peer that died has closed the control connection as well
                deadline = time.monotonic() + 0.3
                while time.monotonic() < deadline:
                    if self._conn.poll(0.05):
                        self._conn.recv()
            except (EOFError, OSError):
                died = True
        if died:
            return self._died(detail=first)
        return self._no_answer(op, self.timeout, detail=first)

    def _call(self, op: str, timeout: float | None = None, idle: float | None = None, **kwargs: Any) -> Any:
        rid = self._send(op, **kwargs)
        return self._recv(op, timeout, rid, idle)

    # -- public operations --

    def share(self, obj: Any, path: str = "auto", to: str | None = None, *, repeat: int = 1) -> "ShareResult":
        """Hands ``obj`` to the worker by ``path`` and reports what the worker holds. ``to`` is the
        framework the worker views it in (default: the source's). ``repeat`` > 1 times that many
        handoffs after the first (whose cost is reported apart, as ``first_call``)."""
        return _share(self, obj, path, to, repeat=repeat)

    def compare(self, obj: Any, paths: str | Sequence[str] = "all", to: str | None = None, *,
                repeat: int = 5, peer: "Worker | None" = None) -> "Comparison":
        """Every process path (or those named) for ``obj``, side by side. A path that does not
        apply is a row with the reason. ``peer``: a second worker for the NCCL socket stand-in."""
        return compare(obj, to, paths, across=self, repeat=repeat, peer=peer)

    def context(self, device: int = 0) -> dict | None:
        """The worker's CUDA context on ``device`` (its own: not the parent's)."""
        return self._call("context", device=device)

    def memory(self, device: int = 0) -> dict:
        return self._call("memory", device=device)

    def slots(self) -> list:
        return self._call("slots")

    def _open_group(self, backend: str, device_parent: int | None, device_worker: int | None) -> Any:
        """``(key, (group, store), fresh)``: the group with the worker, opened unless it already was."""
        key = f"{backend}:{device_parent}:{device_worker}"
        if key in self._groups:
            return key, self._groups[key], False
        if backend == "nccl":  # NVLink multicast off in this process too (the worker has SAFE_ENV)
            for k, v in SAFE_ENV.items():
                os.environ.setdefault(k, v)
        steps = _steps(backend)
        # A remote worker reaches this side's store at the address that reaches it, and this side's
        # gloo connects over the interface holding that address.
        where = {} if self.host is None else {"host": self.local_address}
        store = steps.store(0, 2, True, self.timeout, **where)
        rid = self._send("pg_init", key=key, backend=backend, port=store.port, rank=1, world=2,
                   device=device_worker, timeout=self.timeout, **where)
        try:
            group = steps.make_group(backend, store.port, 0, 2, device_parent, self.timeout, True, store=store,
                                     **({} if self.host is None else {"interface": self.interface}))
        except RuntimeError as e:
            if self.host is None:
                raise
            if "wait timeout" in str(e):  # the store never saw the worker's rank: not a handoff's failure
                raise self._rendezvous_failed(store.port, rid, e) from None
            raise self._peer_failed("pg_init", e) from None
        self._recv("pg_init", rid=rid)
        self._groups[key] = (group, store)
        return key, self._groups[key], True

    def _rendezvous_failed(self, port: int, rid: int, error: BaseException) -> WorkerError:
        """The worker at ``host`` answered, but did not join the group's rendezvous (this side's
        TCPStore, at the address that reaches it) within the timeout: from there that address does
        not lead here (a wrong interface, a route or firewall between the hosts), or the worker
        stopped answering. The worker's own words, if its attempt has ended, come as the detail."""
        detail = str(error).strip().splitlines()[0]
        deadline = time.monotonic() + 0.5
        try:
            while time.monotonic() < deadline:
                reply = self._take_reply(rid)
                if reply is not None:
                    if reply[0] != "ok":  # ("err", kind, message, traceback)
                        detail = f"the worker: {str(reply[2]).strip().splitlines()[0]}"
                    break
                time.sleep(0.02)
        except GpushareError:
            pass  # the worker went: its words are lost, the rendezvous's are not
        return self._remote_failed(
            f"{self._who()} did not join the rendezvous at {self.local_address}:{port} (this side's TCPStore, "
            f"on {self.interface}) within {self.timeout:g} s: from there that address does not lead here (a "
            f"wrong interface, iface= or GLOO_SOCKET_IFNAME, or a route or firewall between the hosts), or "
            f"the worker stopped answering", detail)

    def _close_group(self, key: str) -> None:
        group, _store = self._groups.pop(key)
        if self.alive:
            try:
                self._call("pg_close", key=key, timeout=5.0)
            except WorkerError:
                pass
        if hasattr(group, "shutdown"):
            try:
                group.shutdown()
            except Exception:
                pass

    def __repr__(self) -> str:
        state = "alive" if self.alive else (self._closed_reason or "not started")
        if self.host is not None:
            return f"Worker(host={self.host!r}, pid={self.pid}, {state})"
        return f"Worker(pid={self.pid}, device={self.device!r}, {state})"


def _stop_all() -> None:
    for w in list(_LIVE):
        try:
            w.stop(timeout=1.0)
        except Exception:
            pass


import atexit  # noqa: E402

atexit.register(_stop_all)


# ---------------------------------------------------------------------------------------------
# Handoffs: each path's transport is in gpushare.processes.routes; the core's pipeline runs it.


def _share(worker: Worker, obj: Any, path: str, to: str | None, *, repeat: int = 1, peer: Worker | None = None,
           caller_array: bool = True) -> ShareResult:
    """One handoff of ``obj``; a move of the caller's own array (not a clone) is warned of (rules.warn_moved)."""
    if path not in (*PROCESS_PATHS, "auto"):
        raise ValueError(f"unknown process path {path!r}; known: {', '.join(PROCESS_PATHS)}, auto")
    if repeat < 1:
        raise ValueError("repeat must be at least 1")
    if not worker.alive:
        worker._send("ping")  # raises the WorkerError that says why
    by_auto = path == "auto"
    why = None
    if by_auto:  # a worker on another host is reached one way
        path, why = ("remote", None) if worker.host is not None else resolve_auto(obj)
    if to is not None:
        from gpushare.adapters import framework

        to = framework(to).name  # aliases (np, pt) and typos, with a suggestion
    # One handoff at a time per worker: two threads' gloo sends to one group would be received
    # into each other's buffers (send/recv match by peer and tag, not by request).
    before = _address(obj)[0]
    with worker._handoff_lock:
        result = hand_over(worker, obj, path, to, repeat, peer, auto=by_auto)
    if caller_array and before is not None and _address(obj)[0] != before:
        process_rules.warn_moved(_framework_of(obj), path, worker.pid)
    if why:
        result.add_note(f"auto took {path}: {why}")
    worker._results.add(result)
    return result


def share_across(obj: Any, to: str | None, across: Any, *, path: str = "auto", repeat: int = 1) -> ShareResult:
    """``gpushare.share(x, to, across=worker)``: the handoff to a worker process."""
    worker, owned = _worker_for(across, obj)
    try:
        result = _share(worker, obj, path, to, repeat=repeat)
    finally:
        if owned:
            worker.stop()
    if owned:
        result.add_note(
            "the worker was started for this call and stopped after it (its array is gone); keep one with "
            "`with gpushare.Worker() as w: gpushare.share(x, to, across=w)`")
        result.remote = None
    return result


def _worker_for(across: Any, obj: Any = None) -> tuple[Worker, bool]:
    if isinstance(across, Worker):
        return across, False
    if across in ("process", "processes", True):
        return Worker().start(), True
    if isinstance(across, str) and ":" in across:  # HOST:PORT of `gpushare worker --listen`
        return Worker(host=across).start(), True
    raise ValueError(f"across is a gpushare.Worker, 'process' or 'HOST:PORT' of a remote worker, got {across!r}")


# The tables: every path for one array, and sizes × paths (gpushare.processes.tables).
from gpushare.processes.tables import bench, compare, parse_process_paths  # noqa: E402,F401

__all__ = [
    "MECHANISMS", "PROCESS_PATHS", "RemoteArray",
    "Worker", "bench", "compare", "cuda_identity", "host_identity", "same_memory",
]


class _Progress:
    """Whether a local worker still works: the CPU time the kernel counts for it (Linux's
    /proc/<pid>/stat) grew within the last ``idle`` seconds. Where the kernel does not say, it
    never calls the worker stalled (the request's own timeout still holds)."""

    def __init__(self, pid: int | None, idle: float):
        self.pid, self.idle = pid, idle
        self.ticks = self._ticks()
        self.since = time.monotonic()
        self.next_look = self.since + 0.1

    def _ticks(self) -> int | None:
        if self.pid is None:
            return None
        try:
            with open(f"/proc/{self.pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            return int(fields[11]) + int(fields[12])  # utime + stime (fields 14 and 15)
        except (OSError, IndexError, ValueError):
            return None

    def stalled(self) -> bool:
        now = time.monotonic()
        if self.ticks is None or now < self.next_look:
            return False
        self.next_look = now + 0.1
        ticks = self._ticks()
        if ticks is None:
            return False
        if ticks != self.ticks:
            self.ticks, self.since = ticks, now
            return False
        return now - self.since > self.idle
