"""The process paths over torch.distributed: gloo send/recv with the parent as a rank, and NCCL
send/recv between two worker processes (``nccl``, and ``nccl_socket``, the stand-in for two hosts).
Each is a transport of gpushare.processes.routes that the core's pipeline drives; the framework's
own steps (process groups, sends, receives) are its adapter's ``process_steps()``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpushare import _native
from gpushare.exceptions import gpushare_error
from gpushare.processes.routes import (
    RemoteArray, Transport, _device_ordinal, _dtype_name, _library, _steps, _worker_ordinal,
)
from gpushare.processes.worker import _synchronize

if TYPE_CHECKING:
    from gpushare.processes import Worker

#: What NCCL needs to go over sockets on one host.
SOCKET_ENV = {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1", "NCCL_IB_DISABLE": "1", "NCCL_SOCKET_IFNAME": "lo"}


class Gloo(Transport):
    """gloo send/recv with the parent as rank 0 (gloo raises on a timeout; it does not abort the
    process as NCCL's watchdog does, so the parent can be a rank here)."""

    def _set_up(self) -> float:
        self.steps = _steps(self.path)
        _synchronize(self.obj)
        (self.key, (self.group, _store), fresh), setup = _native.processes.timed_call(
            lambda: self.worker._open_group("gloo", None, None))
        self.noted.append(f"first call includes the process group and communicator set-up "
                          f"({(setup if fresh else 0.0) * 1e3:.3g} ms for the group)")
        return setup

    def hand_over(self) -> dict:
        rid = self.worker._send("pg_recv", key=self.key, shape=tuple(self.obj.shape), dtype=_dtype_name(self.obj),
                                device=None, src=0)
        self.steps.send(self.group, self.obj, 1)
        return self.worker._recv("pg_recv", rid=rid)


def _helper(worker: Worker, ordinal: int, env: dict) -> Worker:
    """A helper worker on ``ordinal`` with ``env``, kept by ``worker`` (stopped with it) so that a
    sweep starts it once."""
    key = (ordinal, tuple(sorted(env.items())))
    helper = worker._helpers.get(key)
    if helper is None or not helper.alive:
        from gpushare.processes import Worker

        helper = Worker(f"cuda:{ordinal}", env=env, timeout=worker.timeout, start_timeout=worker.start_timeout).start()
        library = _library("nccl")
        helper._call("preload", modules=[library.module, *library.process_modules], timeout=worker.start_timeout)
        worker._helpers[key] = helper
    return helper


class Nccl(Transport):
    """NCCL send/recv between two worker processes: a sender helper on the source's GPU, which gets
    the tensor from the parent by torch.multiprocessing (zero-copy), and the receiver.

    The parent is never a rank: a rank whose peer dies blocks inside NCCL until the watchdog aborts
    the whole process, which would be the user's kernel. The parent only waits on pipes, with
    timeouts. Each handoff is acknowledged by the receiver (a one-element send back), as in the raw
    torch.distributed baseline of benchmarks/bench_processes.py; the sender times them.

    ``nccl_socket``: both ranks run with NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 (NCCL reads them once
    per process), so the receiver is a helper too and no worker-side array is kept."""

    def _set_up(self) -> float:
        steps = _steps(self.path)
        steps.register_reductions()  # for the pipe: the tensor goes as a handle, not as its bytes
        worker, obj = self.worker, self.obj
        self.src_ord = src_ord = _device_ordinal(obj)
        self.dst_ord = dst_ord = _worker_ordinal(worker, src_ord)
        self.socket = self.path == "nccl_socket"
        env = {**SOCKET_ENV} if self.socket else {}
        self.sender = sender = _helper(worker, src_ord, env)
        self.receiver = receiver = _helper(worker, dst_ord, env) if self.socket else worker
        _synchronize(obj)
        # torch.multiprocessing: the sender maps the tensor
        self.sent, to_sender = _native.processes.timed_call(lambda: sender._call("recv_object", obj=obj))
        self.key = key = f"{self.path}:{src_ord}:{dst_ord}:{sender.pid}"

        def open_group() -> None:
            store = steps.store(0, 2, True, worker.timeout)
            s_rid = sender._send("pg_init", key=key, backend="nccl", port=store.port, rank=0, world=2, device=src_ord,
                                 timeout=worker.timeout)
            r_rid = receiver._send("pg_init", key=key, backend="nccl", port=store.port, rank=1, world=2, device=dst_ord,
                                   timeout=worker.timeout)
            sender._recv("pg_init", rid=s_rid)
            receiver._recv("pg_init", rid=r_rid)
            receiver._peer_groups[key] = store  # the store lives as long as the group

        setup = _native.processes.timed_call(open_group)[1] if key not in receiver._peer_groups else 0.0
        if self.socket:
            self.noted.append("stand-in for two hosts: NCCL NET/Socket over loopback (NCCL_P2P_DISABLE=1 "
                              "NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=lo) in both ranks")
        self.noted.append(f"between a sender worker on cuda:{src_ord} (given the tensor by torch.multiprocessing, "
                          f"zero-copy, {to_sender * 1e3:.3g} ms) and the receiver on cuda:{dst_ord}; each handoff "
                          f"acknowledged")
        if setup:
            self.noted.append(f"first call includes the group and NCCL communicator set-up ({setup * 1e3:.3g} ms "
                              f"for the group)")
        return setup

    def timed_by_worker(self, repeat: int) -> tuple[dict, list[float]]:
        """``repeat + 1`` acknowledged handoffs, timed on the sender (send, and the receiver's
        acknowledgement back) by the core's loop there."""
        shape, dtype, sender, receiver = tuple(self.obj.shape), _dtype_name(self.obj), self.sender, self.receiver
        try:
            r_rid = receiver._send("pg_pingpong", key=self.key, role="recv", slot=None, shape=shape, dtype=dtype,
                                   device=self.dst_ord, peer=0, repeat=repeat + 1)
            s_rid = sender._send("pg_pingpong", key=self.key, role="send", slot=self.sent["slot"], shape=shape,
                                 dtype=dtype, device=self.src_ord, peer=1, repeat=repeat + 1)
            s_info = sender._recv("pg_pingpong", rid=s_rid)
            info = receiver._recv("pg_pingpong", rid=r_rid)
        finally:
            if sender.alive:
                sender._call("release", slot=self.sent["slot"])
        return info, s_info["seconds"]

    def hand_over(self) -> dict:
        raise gpushare_error("gpushare", f"{self.path} hands over in the workers, timed there (timed_by_worker)")

    def result(self, reply: dict) -> tuple[Any, Any, list]:
        if self.socket:
            self.receiver._call("release", slot=reply["slot"])
            return None, self.obj, []
        return RemoteArray(self.worker, reply["slot"]), self.obj, []
