"""A worker on another host, for real: two network namespaces joined by a veth pair, the worker
(``gpushare worker --listen``) in one, the caller (``gpushare.Worker(host=…)``) in the other. The
handoff's values, its row (engine, transport, both ends), and its faults: a peer killed, stopped,
or cut off by its link; a worker that never answers; an interface that does not exist."""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from _netns import VethPair, cannot_create  # noqa: E402

pytest.importorskip("torch", reason="torch not installed")

CLIENT = os.path.join(os.path.dirname(__file__), "_hosts_client.py")
#: Generous: two cores shared by several people, each process importing torch.
TIMEOUT = 60.0
#: The fault tests' engine timeout: short enough to wait for, long enough to tell from a death.
FAULT_TIMEOUT = 8.0


@pytest.fixture(scope="module")
def pair():
    why = cannot_create()
    if why:
        pytest.skip(f"two network namespaces cannot be created here: {why}")
    p = VethPair()
    try:
        p.create()
    except Exception as e:
        pytest.skip(f"two network namespaces cannot be created here: {e}")
    yield p
    p.delete()


class Listener:
    """``gpushare worker --listen`` in namespace b, stopped (and checked gone) at the end."""

    def __init__(self, pair: VethPair, port: int, timeout: float = TIMEOUT, device: str | None = None):
        self.address = f"{pair.addr_b}:{port}"
        argv = [sys.executable, "-m", "gpushare", "worker", "--listen", self.address, "--timeout", str(timeout),
                *(["--device", device] if device else [])]
        self.proc = subprocess.Popen(pair.command(pair.b, argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)
        self.lines: list[str] = []
        deadline = time.monotonic() + TIMEOUT
        while not any("listening on" in ln for ln in self.lines):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"the worker did not start: {self.lines}")
            if select.select([self.proc.stdout], [], [], 1.0)[0]:
                self.lines.append(self.proc.stdout.readline())

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.lines += self.proc.stdout.readlines()
        self.proc.stdout.close()


def client(pair: VethPair, scenario: str, **args) -> dict:
    done = subprocess.run(pair.command(pair.a, [sys.executable, CLIENT, scenario, json.dumps(args)]),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_host_tensor_goes_by_gloo_over_the_veth_and_the_row_says_so(pair):
    w = Listener(pair, 29611)
    try:
        out = client(pair, "handoff", host=w.address, timeout=TIMEOUT, n=1 << 16)
    finally:
        w.stop()
    row = out["row"]
    assert out["values_equal"] and out["intact"]
    assert row["path"] == "remote" and row["verdict"] == "copied"
    assert "another host" in row["reason"]
    assert row["bytes_moved"] == row["worker"]["nbytes"] == 4 << 16
    assert len(row["timing"]["samples"]) == 3 and row["timing"]["median"] > 0
    link = row["worker"]["link"]
    assert link["engine"] == "gloo" and link["network"] is True
    assert link["transport"] == f"TCP over {pair.if_a}"
    assert (link["local"]["interface"], link["local"]["address"]) == (pair.if_a, pair.addr_a)
    assert (link["remote"]["interface"], link["remote"]["address"]) == (pair.if_b, pair.addr_b)
    assert "link" in out["text"] and pair.if_b in out["text"]
    # In a table, the paths of one host are rows that say why they cannot reach it.
    assert out["compare"]["remote"][0] == "copied"
    assert out["compare"]["shm"][0] == "failed" and "on another" in out["compare"]["shm"][1]
    assert out["once"]["verdict"] == "copied" and any("started for this call" in n for n in out["once"]["notes"])
    # The worker served that peer by a process of its own, which exited with the connection.
    assert any("serving" in ln for ln in w.lines) and any("done (exit code 0)" in ln for ln in w.lines)


def test_a_worker_that_never_answers_is_an_error_naming_its_address_within_the_timeout(pair):
    address = f"{pair.addr_b}:29619"  # nobody listens there
    out = client(pair, "connect", host=address, timeout=5.0)
    assert out["error"]["type"] == "WorkerError"
    assert address in out["error"]["message"]
    assert 4.0 <= out["elapsed"] <= 5.0 + 10.0
    assert out["children"] == []


def test_calibrate_across_fits_the_remote_path_to_a_worker_in_the_other_namespace(pair, tmp_path):
    w = Listener(pair, 29615)
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    try:
        done = subprocess.run(pair.command(pair.a, [sys.executable, "-m", "gpushare", "calibrate", "-f", "torch", "--across",
                                                    w.address, "--sizes", "4KiB,256KiB,4MiB", "-r", "3"]),
                              capture_output=True, text=True, timeout=600, env=env)
    finally:
        w.stop()
    assert done.returncode == 0, done.stderr[-3000:]
    assert "1 paths fitted by this run" in done.stdout
    assert "fitted on the mean of each size's samples" in done.stdout
    model = json.loads((tmp_path / "gpushare" / "model.json").read_text())
    assert "remote" in json.dumps(model)
    # One connection (and one worker process there) per round of sweeps, each let go at its end.
    assert sum("serving" in ln for ln in w.lines) == 3
    assert sum("done (exit code 0)" in ln for ln in w.lines) == 3


#: The shaped link's rate (tc tbf), in bits per second: well under what the veth carries
#: unshaped on a 2-core machine whose cores another job keeps busy, so that the shaping, not the
#: machine, sets the rate.
SHAPED_BITS = 400_000_000


@pytest.mark.skipif(shutil.which("tc") is None, reason="tc (iproute2) not installed: the link cannot be shaped")
def test_on_a_shaped_link_the_rate_is_reached_and_the_model_predicts_sizes_it_was_not_calibrated_at(pair):
    w = Listener(pair, 29614)
    pair.shape("a", f"{SHAPED_BITS // 1_000_000}mbit")  # the caller's egress: the direction the bytes go
    try:
        out = client(pair, "shaped", host=w.address, timeout=TIMEOUT, calibrate=[1 << 20, 8 << 20, 32 << 20],
                     check=[2 << 20, 16 << 20, 64 << 20])
    finally:
        pair.unshape("a")
        w.stop()
    rate = SHAPED_BITS / 8
    ceiling = out["ceiling"]["bandwidth"]
    for c in out["checked"]:
        assert c["bandwidth"] <= ceiling, c  # no row above the link's ceiling
        assert any("link ceiling" in n for n in c["notes"]), c["notes"]
        if c["nbytes"] >= 64 << 20:
            assert c["bandwidth"] >= 0.9 * rate, (c, rate)
        # Sizes the calibration did not measure, predicted within 15 % of the measured median.
        assert c["predicted"] is not None and abs(c["predicted"] - c["median"]) <= 0.15 * c["median"], c
    # The probe measured the shaped link, not the machine (handoffs within the token bucket's
    # burst may go faster, and raise the ceiling: no row stands above it).
    assert 0.85 * rate <= out["ceiling"]["measured"] <= 1.1 * rate


def test_a_worker_behind_a_route_that_goes_nowhere_is_an_error_naming_it_within_the_timeout(pair):
    # A route to the worker's network through the peer, which forwards nothing: the connection's
    # packets are dropped (no refusal comes back), so only the timeout ends the wait.
    pair.route("a", "203.0.113.0/24", pair.addr_b)
    address = "203.0.113.5:29618"
    out = client(pair, "connect", host=address, timeout=3.0)
    assert out["error"]["type"] == "WorkerError"
    assert address in out["error"]["message"]
    assert out["elapsed"] <= 3.0 + 10.0
    assert out["children"] == []


def test_a_worker_that_cannot_reach_the_rendezvous_is_an_error_naming_both_ends_at_the_timeout(pair):
    # iface="lo": this side's store listens on 127.0.0.1, which from the worker's namespace is its
    # own loopback, where nobody listens. The worker answers, but never joins the group.
    w = Listener(pair, 29617, 5.0)
    try:
        out = client(pair, "rendezvous", host=w.address, timeout=5.0, iface="lo", peer=pair.addr_b)
    finally:
        w.stop()
    message = out["error"]["message"]
    assert out["error"]["type"] == "WorkerError"
    assert w.address in message and "did not join the rendezvous at 127.0.0.1:" in message
    assert "wrong interface" in message and "no reply to" not in message
    assert out["elapsed"] <= 5.0 + 10.0
    assert out["intact"] and not out["alive"]
    assert out["children"] == [] and out["new_ports"] == [] and out["established"] == 0


def test_a_wrong_interface_names_the_variable_and_the_interfaces_found(pair):
    w = Listener(pair, 29612)
    try:
        out = client(pair, "connect", host=w.address, timeout=TIMEOUT, iface="nosuch0")
    finally:
        w.stop()
    message = out["error"]["message"]
    assert "GLOO_SOCKET_IFNAME=nosuch0" in message
    assert pair.if_a in message and "lo" in message


def _fault(pair: VethPair, action: str, port: int) -> dict:
    w, fresh = Listener(pair, port, FAULT_TIMEOUT), Listener(pair, port + 1, TIMEOUT)
    try:
        out = client(pair, "fault", host=w.address, fresh=fresh.address, timeout=FAULT_TIMEOUT, action=action,
                     tag=pair.a[2:-1], peer=pair.addr_b)
    finally:
        if action == "linkdown":
            pair.set_link("b", True)
        w.stop()
        fresh.stop()
    # Nothing of the broken handoff is left on the caller's side, its array is as it was, and the
    # next handoff, to a fresh worker, works.
    assert out["intact"] and not out["alive"]
    assert out["children"] == [] and out["new_ports"] == [] and out["new_shm"] == []
    assert out["established"] == 0
    assert out.get("fresh_error") is None and out["fresh_equal"] and out["fresh_verdict"] == "copied"
    assert out["handoffs"] >= 1
    return out


def test_a_peer_killed_mid_handoff_is_an_error_at_once_saying_it_died(pair):
    out = _fault(pair, "kill", 29621)
    assert out["error"]["type"] == "WorkerError" and "died" in out["error"]["message"]
    # At once: its death is seen, not its silence (the words say so; the timeout never ran out).
    assert out["elapsed"] < FAULT_TIMEOUT


def test_a_stopped_peer_is_an_error_at_the_timeout_saying_it_stopped_answering(pair):
    out = _fault(pair, "stop", 29623)
    assert out["error"]["type"] == "WorkerError" and "stopped answering" in out["error"]["message"]
    # Not before the timeout (the upper bound only guards against a hang).
    assert FAULT_TIMEOUT - 2.0 <= out["silent"] <= FAULT_TIMEOUT + 60.0


def test_a_link_down_is_an_error_at_the_timeout_saying_the_peer_stopped_answering(pair):
    out = _fault(pair, "linkdown", 29625)
    assert out["error"]["type"] == "WorkerError" and "stopped answering" in out["error"]["message"]
    assert FAULT_TIMEOUT - 2.0 <= out["silent"] <= FAULT_TIMEOUT + 60.0


def test_the_transport_is_read_from_nccl_s_own_channel_lines():
    from gpushare.processes.remote import nccl_transport

    net = ["vm:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] [send] via NET/Socket/0",
           "vm:2:2 [1] NCCL INFO Channel 00/0 : 0[0] -> 1[1] [receive] via NET/Socket/0",
           "vm:1:1 [0] NCCL INFO NET/Socket : Using [0]vgsa:198.18.0.1<0>"]
    assert nccl_transport(net) == ("NET/Socket", True, net[:2])
    # Two namespaces of one machine without distinct host ids: NCCL's own words say it went around
    # the network, and the row must not call that a network transfer.
    shortcut = ["NCCL INFO Channel 00/1 : 0[0] -> 1[1] via P2P/CUMEM/read", "NCCL INFO Channel 01/0 : 0 -> 1 via SHM/direct/direct"]
    transport, network, _ = nccl_transport(shortcut)
    assert not network and "P2P" in transport and "SHM" in transport
    assert nccl_transport(net[:1] + shortcut[:1])[1] is False
    assert nccl_transport(["NCCL INFO Bootstrap : Using eth0"]) == (None, False, [])


def test_addresses_are_checked_before_anything_connects():
    from gpushare.exceptions import GpushareError
    from gpushare.processes.remote import parse_address

    assert parse_address("10.0.0.2:29600") == ("10.0.0.2", 29600)
    assert parse_address("[::1]:29600") == ("::1", 29600)
    for bad in ("10.0.0.2", "10.0.0.2:0", ":29600", "a:b:1"):
        with pytest.raises(GpushareError):
            parse_address(bad)
    import gpushare

    with pytest.raises(GpushareError, match="give host= too"):
        gpushare.Worker(iface="eth0")


def _gpus() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def _nccl_over_the_veth(pair, monkeypatch, port: int, worker_device: str, client_device: str) -> None:
    # Both ranks of one machine: only a distinct NCCL_HOSTID per side (set by gpushare) keeps NCCL
    # off P2P and SHM; IB is kept out so that the veth is the only way between the two.
    monkeypatch.setenv("NCCL_IB_DISABLE", "1")
    w = Listener(pair, port, device=worker_device)
    try:
        out = client(pair, "handoff", host=w.address, timeout=TIMEOUT, n=1 << 20, device=client_device)
    finally:
        w.stop()
    row = out["row"]
    assert out["values_equal"] and out["intact"]
    assert row["verdict"] == "copied" and "another host" in row["reason"]
    link = row["worker"]["link"]
    assert link["engine"] == "nccl"
    assert link["transport"] == "NET/Socket" and link["network"] is True, link
    assert any("via NET/Socket" in line for line in link["evidence"])
    assert link["local"]["interface"] == pair.if_a and link["remote"]["interface"] == pair.if_b


@pytest.mark.skipif(_gpus() < 2, reason="needs two CUDA devices (one per namespace)")
def test_a_device_tensor_goes_by_nccl_over_the_network_as_nccl_says(pair, monkeypatch):
    _nccl_over_the_veth(pair, monkeypatch, 29631, "cuda:1", "cuda:0")


@pytest.mark.skipif(_gpus() < 1, reason="no CUDA")
def test_one_gpu_seen_from_two_namespaces_is_two_hosts_to_nccl(pair, monkeypatch):
    """NCCL refuses two ranks on one GPU of one host ("Duplicate GPU detected"), and it knows a host
    by its host id: with the distinct NCCL_HOSTID gpushare gives each side, both ranks on the one
    GPU are two hosts to it, and the bytes cross the veth (a machine with one GPU runs the network
    path for real)."""
    _nccl_over_the_veth(pair, monkeypatch, 29633, "cuda:0", "cuda:0")


def test_the_remote_path_is_fitted_on_the_mean_of_a_bimodal_time_the_others_on_the_median():
    from gpushare.advice import fitted_time

    # A small gloo message on a 250 Hz kernel: fast, or one timer tick (4 ms) later, in any mix.
    samples = [0.0003, 0.0004, 0.0041, 0.0042, 0.0043]
    timing = {"median": 0.0041, "samples": samples}
    assert fitted_time({"path": "remote", "timing": timing}) == pytest.approx(sum(samples) / 5)
    assert fitted_time({"path": "gloo", "timing": timing}) == 0.0041
    assert fitted_time({"path": "remote", "timing": {"median": 0.002}}) == 0.002  # no samples kept: the median
