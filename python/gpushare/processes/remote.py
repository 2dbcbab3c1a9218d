"""Across hosts: a worker on another machine, reached over the network, on the same transport as a
worker of this host.

``gpushare worker --listen HOST:PORT`` (:func:`listen`) serves on one machine; ``Worker(host=
"HOST:PORT")`` reaches it. The requests and replies are the local worker's, over a TCP connection
instead of a pipe (a ``multiprocessing.connection.Connection`` either way), and each peer is
served by a process of its own (gpushare.processes.worker's loop), so the engines' once-per-process
settings are that peer's. The bytes go by torch.distributed, whose rendezvous is its own
``TCPStore`` (hosted by the caller, on the address that reaches the worker): gloo for host tensors,
NCCL for device tensors when both sides have a GPU (path ``remote``).

The interface is the one holding the local address that reaches the peer (a UDP ``connect()``
reads it from the routing table without sending anything) unless one is named (``iface=``,
``--iface``, or ``GLOO_SOCKET_IFNAME``/``NCCL_SOCKET_IFNAME`` already set). Each side sets
``GLOO_SOCKET_IFNAME``, ``NCCL_SOCKET_IFNAME`` and an ``NCCL_HOSTID`` of its own: NCCL takes
hostname + boot id for a host's identity, so two network namespaces of one machine would look like
one host and NCCL would take P2P or shared memory instead of the network. The transport that
carried the bytes is read from the engine itself (NCCL's ``via NET/Socket``, ``via P2P``, ``via SHM``
lines); a same-host shortcut is never reported as the network.

Faults: a peer that dies closes its connection (and its gloo sockets), so the error comes at once
and says the peer died; a peer that stops answering (stopped, link down) sends nothing, so the
error comes at the timeout and says so. Either way the caller's array is untouched and nothing of
the handoff is left on this side (the group, its store's port, helper processes).
"""

from __future__ import annotations

import fcntl
import os
import re
import socket
import struct
import sys
import time
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

from gpushare import _native, devices
from gpushare.exceptions import gpushare_error
from gpushare.processes.routes import RemoteArray, Transport, _device_ordinal, _dtype_name, _is_cuda, _steps
from gpushare.processes.worker import _synchronize, remove_nccl_log

if TYPE_CHECKING:
    from gpushare.processes import Worker

#: The environment variables that name the interface each engine uses.
GLOO_VAR, NCCL_VAR = "GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"

#: Bytes of each gloo send of a remote handoff: well within a socket's send buffer (Linux's default
#: largest is 4 MiB), so that a send of one piece does not wait on a peer that died: gloo's wait on
#: a large send does not notice it and waits out the timeout (seen with 16 MiB and 4 MiB pieces,
#: not with 1 MiB). The cost: each piece is an operation of its own (1.5-2.5x raw gloo at >= 16 MiB
#: on a loaded 2-core VM, against 0.8-1.1x in one piece; benchmarks/bench_hosts.py).
SEND_CHUNK = 1 << 20

#: What NCCL prints of its set-up and network, to read the transport from (its own words).
NCCL_LOG_ENV = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET,P2P"}


# -- addresses and interfaces --------------------------------------------------------------------


def _connection(sock: "socket.socket") -> Connection:
    """A multiprocessing Connection that owns the connected socket's descriptor (the socket object
    closed, the descriptor kept): the worker's messages travel over it as over a pipe."""
    fd = os.dup(sock.fileno())
    sock.close()
    return Connection(fd)

def parse_address(text: str, what: str = "host") -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` for IPv6) → ``(host, port)``; a gpushare error otherwise."""
    if not isinstance(text, str):
        raise gpushare_error("gpushare", f"{what} is 'HOST:PORT', got {text!r}")
    m = re.fullmatch(r"\[([^\]]+)\]:(\d+)|([^:\s]+):(\d+)", text.strip())
    if m is None:
        raise gpushare_error("gpushare", f"{what} is 'HOST:PORT' (e.g. '10.0.0.2:29600'), got {text!r}")
    host, port = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
    if not 0 < int(port) < 65536:
        raise gpushare_error("gpushare", f"{what}: port {port} is not in 1..65535")
    return host, int(port)


def interfaces() -> dict[str, str | None]:
    """This network namespace's interfaces and each one's IPv4 address (None: it has none)."""
    found: dict[str, str | None] = {}
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _, name in socket.if_nameindex():
            try:  # SIOCGIFADDR: the interface's IPv4 address
                raw = fcntl.ioctl(s.fileno(), 0x8915, struct.pack("256s", name.encode()[:15]))
                found[name] = socket.inet_ntoa(raw[20:24])
            except OSError:
                found[name] = None
    return found


def _listed(found: dict[str, str | None]) -> str:
    return ", ".join(f"{n} ({a or 'no IPv4 address'})" for n, a in found.items()) or "none"


def local_address_to(host: str, port: int) -> str:
    """The local address the routing table picks to reach ``host`` (a UDP connect() sends nothing)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        try:
            s.connect((host, port))
        except OSError as e:
            raise gpushare_error("worker", f"no route to {host}:{port} from this host: {e}") from None
        return s.getsockname()[0]


def choose_interface(peer: str, port: int, named: str | None, variable: str, local: str | None = None
                     ) -> tuple[str, str]:
    """``(interface, its address)`` for reaching ``peer``: ``named`` (checked: it must exist and
    hold an IPv4 address), else the one holding the local address of the route to the peer.
    ``variable``: the engine's variable, which an error names with the interfaces found."""
    found = interfaces()
    if named:
        address = found.get(named)
        if address is None:
            why = "has no IPv4 address" if named in found else "is no interface of this host"
            raise gpushare_error("worker", f"{variable}={named} {why}; interfaces found: {_listed(found)}")
        return named, address
    local = local or local_address_to(peer, port)
    name = next((n for n, a in found.items() if a == local), None)
    if name is None:
        raise gpushare_error("worker", f"no interface holds {local}, the address that reaches {peer}; name one "
                                       f"({variable} or iface=); interfaces found: {_listed(found)}")
    return name, local


def host_id(interface: str, address: str) -> str:
    """This side's ``NCCL_HOSTID``: distinct for two namespaces of one machine, whose hostname and
    boot id are the same (their addresses differ)."""
    return f"{socket.gethostname()}/{interface}/{address}"


def link_env(interface: str, address: str) -> dict[str, str]:
    """What makes the engines of this side use ``interface``, as another host."""
    return {GLOO_VAR: interface, NCCL_VAR: interface, "NCCL_HOSTID": host_id(interface, address), **NCCL_LOG_ENV}


# -- NCCL's own account of the transport ---------------------------------------------------------

_VIA = re.compile(r"via (NET/[A-Za-z]+(?:/\d+)?|P2P(?:/[A-Za-z]+)?|SHM(?:/[A-Za-z]+)?|CollNet\S*)")


def nccl_transport(lines: list[str]) -> tuple[str | None, bool, list[str]]:
    """``(transport, over the network, the lines it was read from)`` from NCCL INFO lines: each
    ``Channel … via X`` names what carried a channel. Any P2P or SHM channel is a same-host shortcut."""
    evidence = [ln.strip() for ln in lines if _VIA.search(ln)]
    kinds = sorted({re.sub(r"/\d+$", "", _VIA.search(ln).group(1)) for ln in evidence})
    if not kinds:
        return None, False, []
    network = all(k.startswith("NET/") or k.startswith("CollNet") for k in kinds)
    return "+".join(kinds), network, evidence[:8]


# -- the connection -------------------------------------------------------------------------------

class RemoteProcess:
    """The worker process on the other host, as much of ``multiprocessing.Process`` as a Worker
    asks of it: alive while the connection is open; stopping it closes the connection (its
    process, on the other host, then exits)."""

    def __init__(self, address: str):
        self.address = address
        self.pid: int | None = None
        self.exitcode = None
        self.open = True

    def is_alive(self) -> bool:
        return self.open

    def join(self, timeout: float | None = None) -> None:
        pass

    def terminate(self) -> None:
        self.open = False

    kill = terminate


def connect(host: str, port: int, timeout: float) -> tuple[Connection, str]:
    """A connection to the worker at ``host:port``, retried until ``timeout`` (it may still be
    starting); the error names the address. Returns it and the local address it leaves from."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise gpushare_error(
                "worker", f"no gpushare worker answered at {host}:{port} within {timeout:g} s ({last}); start one "
                          f"there with `gpushare worker --listen {host}:{port}`")
        try:
            sock = socket.create_connection((host, port), timeout=min(left, 5.0))
            break
        except OSError as e:  # refused (not listening yet), unreachable, timed out
            last = e
            time.sleep(min(0.2, max(deadline - time.monotonic(), 0)))
    sock.settimeout(None)
    keepalive(sock, timeout)
    local = sock.getsockname()[0]
    return _connection(sock), local


def closed(conn: Connection | None) -> bool:
    """Whether the other end closed ``conn``; what waits to be read there stays unread."""
    if conn is None or conn.closed:
        return True
    with socket.socket(fileno=os.dup(conn.fileno())) as s:
        try:
            return s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
        except BlockingIOError:
            return False
        except OSError:
            return True


def keepalive(sock: socket.socket, timeout: float) -> None:
    """TCP keepalive: a connection whose other side went silent (host down, link down) is closed
    by the kernel after about ``timeout`` s, so a process blocked reading it is not stuck for ever."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    idle = max(int(timeout), 1)
    for opt, value in (("TCP_KEEPIDLE", idle), ("TCP_KEEPINTVL", 1), ("TCP_KEEPCNT", 3)):
        if hasattr(socket, opt):
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, opt), value)


# -- the serving side (`gpushare worker --listen`) -----------------------------------------------

def _serve_peer(conn: Connection, env: dict) -> None:
    """One peer's worker process: the local worker's loop over the peer's connection. It dies with
    the listener (a worker whose listener was killed would otherwise hold its peer's connection)."""
    import ctypes
    import signal

    from gpushare.processes.worker import _serve

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    _serve(conn, env)


def listen(address: str, device: str | None = None, timeout: float = 60.0, iface: str | None = None,
           once: bool = False, out: Any = None) -> None:
    """Serves handoffs from one remote peer at a time on ``address`` (``HOST:PORT``), each peer by
    a fresh worker process whose engines use the interface that reaches the peer (or ``iface``).
    Stops on SIGINT/SIGTERM, or after the first peer with ``once``."""
    import multiprocessing as mp
    import signal

    from gpushare.processes import QUIET_ENV, SAFE_ENV
    from gpushare.processes.rules import check_timeout

    out = out or sys.stdout
    timeout = check_timeout("timeout", timeout)
    host, port = parse_address(address, "--listen")
    ordinal = _device_arg(device)
    if iface:
        choose_interface(host, port, iface, GLOO_VAR)  # a wrong name fails now, not at the first peer
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    server = socket.socket(family, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        server.bind((host, port))
    except OSError as e:
        server.close()
        raise gpushare_error("worker", f"cannot listen on {host}:{port}: {e.strerror or e}") from None
    server.listen(1)
    stopping = []

    def stop(signum: int, _frame: Any) -> None:
        stopping.append(signum)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    print(f"gpushare worker listening on {host}:{port} (pid {os.getpid()}, device "
          f"{'cpu' if ordinal is None else f'cuda:{ordinal}'}, timeout {timeout:g} s)", file=out, flush=True)
    ctx = mp.get_context("spawn")
    child = None
    try:
        while True:
            sock, peer = server.accept()
            keepalive(sock, timeout)
            local = sock.getsockname()[0]
            try:
                name, addr = choose_interface(peer[0], peer[1], iface, GLOO_VAR, local=local)
            except Exception as e:  # the peer is told why when it asks
                print(f"gpushare worker: peer {peer[0]}: {e}", file=out, flush=True)
                sock.close()
                continue
            env = {**SAFE_ENV, **QUIET_ENV, **link_env(name, addr), "GPUSHARE_LINK_ADDRESS": addr,
                   "GPUSHARE_WORKER_DEVICE": "" if ordinal is None else str(ordinal),
                   "GPUSHARE_WORKER_TIMEOUT": str(timeout)}
            conn = _connection(sock)
            child = ctx.Process(target=_serve_peer, args=(conn, env), daemon=True, name="gpushare-remote-worker")
            child.start()
            conn.close()  # the child holds the connection now
            print(f"gpushare worker: serving {peer[0]} from {name} {addr} (pid {child.pid})", file=out, flush=True)
            child.join()
            remove_nccl_log(child.pid)
            print(f"gpushare worker: {peer[0]} done (exit code {child.exitcode})", file=out, flush=True)
            child = None
            if once:
                break
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
        if child is not None and child.is_alive():
            child.terminate()
            child.join(5)
            if child.is_alive():
                child.kill()
                child.join(5)


def _device_arg(device: str | None) -> int | None:
    """``--device``: the GPU's ordinal, or None for host tensors only; spelled as everywhere else
    (``cuda:1``, ``gpu:1``, ``cuda``, ``cpu``, ``cpu:0``)."""
    if device is None or not device.strip():
        return None
    try:
        on_host, ordinal = devices.parse_device(device)
    except ValueError as e:
        raise gpushare_error("gpushare", f"--device: {e}") from None
    return None if on_host else ordinal


def main(argv: list[str] | None = None) -> int:
    """``--listen HOST:PORT [--device cuda:N] [--timeout S] [--iface NAME] [--once]``: what
    ``gpushare worker`` runs."""
    import argparse

    p = argparse.ArgumentParser(prog="gpushare worker", description="Serve handoffs from a remote peer")
    p.add_argument("--listen", required=True, metavar="HOST:PORT")
    p.add_argument("--device", default=None)
    p.add_argument("--timeout", type=float, default=60.0)
    p.add_argument("--iface", default=None)
    p.add_argument("--once", action="store_true")
    a = p.parse_args(argv)
    from gpushare.exceptions import GpushareError

    try:
        listen(a.listen, a.device, a.timeout, a.iface, a.once)
    except GpushareError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


# -- the caller's side: the `remote` path ---------------------------------------------------------

class Remote(Transport):
    """torch.distributed send/recv to a worker on another host, each handoff acknowledged: gloo for
    a host tensor (:class:`RemoteGloo`), NCCL for a device tensor (:class:`RemoteNccl`)."""

    link: dict | None = None

    def library_unavailable(self) -> str | None:
        if getattr(self.worker, "host", None) is None:
            return ("remote hands to a worker on another host, Worker(host='HOST:PORT'); this worker runs on "
                    "this host (use gloo or nccl)")
        return super().library_unavailable()

    def _side(self, interface: str, address: str) -> dict:
        return {"host": socket.gethostname(), "interface": interface, "address": address}

    def _remote_side(self) -> dict:
        remote = self.worker._link()
        return {k: remote.get(k) for k in ("host", "interface", "address")}

    def result(self, reply: dict) -> tuple[Any, Any, list]:
        return RemoteArray(self.worker, reply["slot"]), self.obj, []


class RemoteGloo(Remote):
    """gloo with the caller as rank 0 (gloo raises on a reset or a timeout; it does not abort the
    process), the worker as rank 1; the caller times each handoff."""

    def _set_up(self) -> float:
        w = self.worker
        self.steps = _steps(self.path)
        _synchronize(self.obj)
        # The group stays the worker's alone (looked up at each handoff): once the worker is stopped,
        # nothing holds it or its store's port open, even an error's traceback through this transport.
        (self.key, _group, fresh), setup = _native.processes.timed_call(lambda: w._open_group("gloo", None, None))
        self.link = {"engine": "gloo", "transport": f"TCP over {w.interface}", "network": True,
                     "local": self._side(w.interface, w.local_address), "remote": self._remote_side(), "evidence": []}
        self.noted.append(f"first call includes the process group and gloo's connections "
                          f"({(setup if fresh else 0.0) * 1e3:.3g} ms for the group)")
        return setup

    def hand_over(self) -> dict:
        w = self.worker
        flat = self.obj.contiguous().view(-1)
        chunk = max(SEND_CHUNK // flat.element_size(), 1)
        rid = w._send("pg_recv", key=self.key, shape=tuple(self.obj.shape), dtype=_dtype_name(self.obj),
                      device=None, src=0, chunk=chunk)
        group = w._groups[self.key][0]
        # gloo's wait() on a send does not notice a peer that died mid-send: it waits out its
        # timeout. Sent in pieces that fit in the socket's buffer, no wait blocks on the peer, a
        # dead one shows at the next piece (its connection closed, or gloo's reset), and the bytes
        # arrive as one tensor all the same (the worker receives the pieces into views of it).
        try:
            for start in range(0, flat.numel(), chunk):
                if closed(w._conn):
                    self.steps.abort(group)
                    raise w._died(detail="the worker's connection closed while gloo was sending")
                self.steps.send(group, flat[start:start + chunk], 1)
        except RuntimeError as e:  # gloo's own words: reset by the peer, or its timeout
            self.steps.abort(group)
            raise w._peer_failed("pg_recv", e) from None
        return w._recv("pg_recv", rid=rid)


class RemoteNccl(Remote):
    """NCCL between a helper worker on the caller's GPU (given the tensor by torch.multiprocessing,
    zero-copy) and the remote worker, as ``nccl`` does between two workers of one host: a rank whose
    peer dies blocks inside NCCL until its watchdog aborts the process, so the caller is never one.
    The sender times the handoffs; the transport is read from both ranks' NCCL INFO lines."""

    def nccl_unavailable(self) -> str | None:
        why = super().nccl_unavailable()
        if why is None and self.worker._link().get("device") is None:
            why = (f"the worker at {self.worker.host} has no GPU (started without --device cuda:N): NCCL needs one "
                   f"on both sides; hand a host tensor (gloo)")
        return why

    def _set_up(self) -> float:
        from gpushare.processes.collectives import _helper

        w, obj = self.worker, self.obj
        steps = self.steps = _steps(self.path)
        steps.register_reductions()  # for the pipe: the tensor goes as a handle, not as its bytes
        _synchronize(obj)
        self.src_ord, self.dst_ord = _device_ordinal(obj), w._link()["device"]
        self.sender = sender = _helper(w, self.src_ord, link_env(w.nccl_interface, w.local_address))
        self.sent, to_sender = _native.processes.timed_call(lambda: sender._call("recv_object", obj=obj))
        self.key = key = f"remote:nccl:{self.src_ord}:{sender.pid}"

        def open_group() -> None:
            store = steps.store(0, 2, True, w.timeout, host=w.local_address)
            s_rid = sender._send("pg_init", key=key, backend="nccl", port=store.port, rank=0, world=2,
                                 device=self.src_ord, timeout=w.timeout, host=w.local_address)
            r_rid = w._send("pg_init", key=key, backend="nccl", port=store.port, rank=1, world=2,
                            device=self.dst_ord, timeout=w.timeout, host=w.local_address)
            _both(w, ("pg_init", r_rid), sender, ("pg_init", s_rid))
            w._peer_groups[key] = store  # the store lives as long as the group

        setup = _native.processes.timed_call(open_group)[1] if key not in w._peer_groups else 0.0
        self.noted.append(f"between a sender worker on cuda:{self.src_ord} of this host (given the tensor by "
                          f"torch.multiprocessing, zero-copy, {to_sender * 1e3:.3g} ms) and the worker at {w.host} "
                          f"on cuda:{self.dst_ord}; each handoff acknowledged")
        if setup:
            self.noted.append(f"first call includes the group and NCCL communicator set-up ({setup * 1e3:.3g} ms)")
        return setup

    def timed_by_worker(self, repeat: int) -> tuple[dict, list[float]]:
        """``repeat + 1`` acknowledged handoffs, timed on the sender by the core's loop there."""
        w, sender = self.worker, self.sender
        shape, dtype = tuple(self.obj.shape), _dtype_name(self.obj)
        try:
            r_rid = w._send("pg_pingpong", key=self.key, role="recv", slot=None, shape=shape, dtype=dtype,
                            device=self.dst_ord, peer=0, repeat=repeat + 1)
            s_rid = sender._send("pg_pingpong", key=self.key, role="send", slot=self.sent["slot"], shape=shape,
                                 dtype=dtype, device=self.src_ord, peer=1, repeat=repeat + 1)
            info, s_info = _both(w, ("pg_pingpong", r_rid), sender, ("pg_pingpong", s_rid))
        finally:
            if sender.alive:
                sender._call("release", slot=self.sent["slot"])
        # NCCL connects send/recv channels at the first handoff: its lines are there now.
        transport, network, evidence = nccl_transport(sender._call("nccl_log") + w._call("nccl_log"))
        self.link = {"engine": "nccl", "transport": transport or "unknown (NCCL printed no channel lines)",
                     "network": network, "local": self._side(w.nccl_interface, w.local_address),
                     "remote": self._remote_side(), "evidence": evidence}
        if transport is not None and not network:
            self.noted.append(f"NCCL took a same-host shortcut ({transport}), not the network: as NCCL sees "
                              f"them, both sides are on one machine")
        return info, s_info["seconds"]

    def hand_over(self) -> dict:
        raise gpushare_error("gpushare", "remote (NCCL) hands over in the workers, timed there (timed_by_worker)")


# -- the link's ceiling ----------------------------------------------------------------------------

#: The link ceilings measured in this process, by peer (``HOST:PORT``): each peer's is measured
#: once, at its first handoff (or calibration), and raised only by a handoff that went faster.
_CEILINGS: dict[str, dict] = {}

#: The probe's sizes: a first send of the smallest sets the size of the timed ones, which take
#: about :data:`CEILING_SECONDS` each on the link as far as that first one saw it, between these.
CEILING_MIN_BYTES, CEILING_MAX_BYTES, CEILING_SECONDS, CEILING_REPEAT = 4 << 20, 64 << 20, 0.25, 3


def link_ceiling(worker: Worker, refresh: bool = False) -> dict:
    """The ceiling of the link to ``worker`` (on another host), in bytes per second: the fastest
    of :data:`CEILING_REPEAT` raw gloo sends of one host buffer in one piece, each acknowledged
    (no pieces: what torch.distributed itself reaches on that link), measured once
    per peer in this process and cached. ``{"bandwidth", "measured", "nbytes", "seconds", "how",
    "raised"}``: ``measured`` is the probe's, ``bandwidth`` the ceiling, which a handoff that went
    faster than the probe raises to its own (``raised``; a link shaped by a token bucket lets a
    small message through faster than its rate, in one burst)."""
    key = worker.host
    if key in _CEILINGS and not refresh:
        return _CEILINGS[key]
    w = worker
    wkey, (group, _store), _ = w._open_group("gloo", None, None)
    steps = _steps("gloo")

    def sends(nbytes: int, repeat: int) -> list[float]:
        # The worker's side is the acknowledged handoff of the two-worker paths (pg_pingpong): each
        # send is timed here until the worker's one-element reply, so no byte is counted as sent
        # while it still sits in a socket buffer.
        buf, ack = steps.empty((nbytes,), "uint8", None), steps.ack(None)
        rid = w._send("pg_pingpong", key=wkey, role="recv", slot=None, shape=(nbytes,), dtype="uint8",
                      device=None, peer=0, repeat=repeat)
        def one_send() -> RuntimeError | None:
            try:
                group.send([buf], 1, 0).wait()
                steps.recv(group, ack, 1, 1)
            except RuntimeError as e:  # the peer's failure, said below in gpushare's words
                return e
            return None

        times = []
        for _ in range(repeat):
            failed, seconds = _native.processes.timed_call(one_send)  # the core's clock, as every handoff's
            if failed is not None:
                steps.abort(group)
                raise w._peer_failed("pg_pingpong", failed) from None
            times.append(seconds)
        reply = w._recv("pg_pingpong", rid=rid)
        w._call("release", slot=reply["slot"])
        return times

    first = sends(CEILING_MIN_BYTES, 1)[0]
    nbytes = int(min(max(CEILING_MIN_BYTES / max(first, 1e-9) * CEILING_SECONDS, CEILING_MIN_BYTES), CEILING_MAX_BYTES))
    best = min(sends(nbytes, CEILING_REPEAT))
    _CEILINGS[key] = found = {
        "bandwidth": nbytes / best, "measured": nbytes / best, "nbytes": nbytes, "seconds": best, "raised": None,
        "how": f"raw gloo send of {_native.text.format_bytes(nbytes)} in one piece, fastest of {CEILING_REPEAT}, once for this peer"}
    return found


def against_ceiling(worker: Worker, bandwidth: float | None) -> str | None:
    """The note that sets a remote handoff's bandwidth against its link's ceiling; a handoff faster
    than the probe raises the ceiling to its own (the bytes crossed the link at that rate), so no
    row stands above the ceiling it is set against."""
    ceiling = _CEILINGS.get(worker.host)
    if ceiling is None or not bandwidth:
        return None
    if bandwidth > ceiling["bandwidth"]:
        if ceiling["raised"] is None:
            ceiling["how"] += "; raised to a handoff that went faster"
        ceiling["bandwidth"] = ceiling["raised"] = bandwidth
    return (f"link ceiling {ceiling['bandwidth'] / 1e9:.3g} GB/s ({ceiling['how']}): this handoff reached "
            f"{bandwidth / ceiling['bandwidth']:.0%} of it")


def remote_transport(worker: Worker, obj: Any, path: str, asked: str | None, peer: Worker | None = None) -> Remote:
    """The ``remote`` path's transport for ``obj``: NCCL for a device tensor, gloo for a host one."""
    cls = RemoteNccl if _is_cuda(obj) else RemoteGloo
    return cls(worker, obj, path, asked, peer)


def _both(a: Worker, a_req: tuple[str, int], b: Worker, b_req: tuple[str, int]) -> tuple[Any, Any]:
    """The replies of two workers' requests, waited for together: a peer that dies is noticed at
    once even while the other waits inside NCCL."""
    import threading

    for w, (op, rid) in ((a, a_req), (b, b_req)):  # answered here, not by _recv
        with w._lock:
            pending = w._pending.get((threading.get_ident(), op))
            if pending and rid in pending:
                pending.remove(rid)
    got: dict[int, Any] = {}
    deadline = time.monotonic() + max(a.timeout, b.timeout)
    while len(got) < 2:
        for i, (w, (op, rid)) in enumerate(((a, a_req), (b, b_req))):
            if i in got:
                continue
            if not w._proc.is_alive():
                raise w._died()
            reply = w._take_reply(rid)
            if reply is not None:
                got[i] = w._unpack(op, reply)
        if len(got) < 2 and time.monotonic() > deadline:
            late = a if 0 not in got else b
            raise late._no_answer(a_req[0] if late is a else b_req[0], late.timeout)
        time.sleep(0.002)
    return got[0], got[1]
