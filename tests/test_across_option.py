"""``--across HOST:PORT`` on ``%share`` and ``%sharebench``, against a real ``gpushare worker
--listen`` on 127.0.0.1 (one network namespace: the remote path's gloo goes over loopback), and the
one parser every entry point reads ``--across`` with. ``gpushare calibrate --across`` runs between
two network namespaces in tests/test_hosts.py."""

from __future__ import annotations

import json
import select
import signal
import socket
import subprocess
import sys
import time

import pytest
from IPython.core.error import UsageError

pytest.importorskip("torch", reason="torch not installed")

#: Generous: a shared machine, each process importing torch.
TIMEOUT = 60.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def worker():
    """``gpushare worker --listen 127.0.0.1:PORT``, stopped (and checked gone) at the end."""
    address = f"127.0.0.1:{_free_port()}"
    proc = subprocess.Popen([sys.executable, "-m", "gpushare", "worker", "--listen", address, "--timeout",
                             str(TIMEOUT)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    deadline = time.monotonic() + TIMEOUT
    while not any("listening on" in ln for ln in lines):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"the worker did not start: {lines}")
        if select.select([proc.stdout], [], [], 1.0)[0]:
            lines.append(proc.stdout.readline())
    yield address, lines
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
    lines += proc.stdout.readlines()
    proc.stdout.close()


def test_share_across_host_port_hands_the_array_to_that_worker(worker, ip, run):
    address, _ = worker
    run("import torch; xa = torch.arange(4096, dtype=torch.float32)")
    r = run(f"%share xa ->torch --across {address} -r 2 -o")
    assert r.row["path"] == "remote" and r.verdict == "copied"
    assert r.link["engine"] == "gloo" and r.row["worker"]["link"]["transport"] == "TCP over lo"
    assert len(r.row["timing"]["samples"]) == 2 and r.row["bytes_moved"] == 4 * 4096
    assert any("started for this call" in n for n in r.row["notes"])
    # Nothing is bound: the worker (and the array it received) is gone after the line.
    assert "xa_torch" not in ip.user_ns
    assert run("bool(torch.equal(xa, torch.arange(4096, dtype=torch.float32)))")  # the caller's array, intact


def test_share_across_with_path_all_is_the_process_paths_table(worker, run):
    address, _ = worker
    run("import torch; xb = torch.ones(256)")
    t = run(f"%share xb torch->torch --across {address} --path all -r 2 -o")
    verdicts = {row["path"]: row["verdict"] for row in t.rows}
    assert verdicts["remote"] == "copied"
    assert verdicts["shm"] == "failed" and verdicts["gloo"] == "failed"  # this host's paths, not another's


def test_sharebench_across_host_port_sweeps_the_remote_path(worker, run):
    address, _ = worker
    b = run(f"%sharebench torch->torch --across {address} --sizes 4KiB,64KiB --paths remote -r 2 -q -o")
    points = b.to_dict()["points"]
    assert [(p["path"], p["size"], p["verdict"]) for p in points] == [("remote", 4096, "copied"),
                                                                      ("remote", 65536, "copied")]
    assert all(p["worker"]["link"]["engine"] == "gloo" for p in points)


@pytest.mark.parametrize("line, says", [
    ("%share xc ->torch --across nowhere", "'processes' (a worker process of this host) or 'HOST:PORT'"),
    ("%share xc ->torch --across 127.0.0.1:0", "--across: port 0 is not in 1..65535"),
    ("%share xc ->torch --across 10.0.0.2:29600 --as y", "--as does not go with --across"),
    ("%share xc ->torch --across 10.0.0.2:29600 -p dlpack", "unknown process path 'dlpack'"),
    ("%share xc ->torch --across processes -p shm,ipc", "-p names one process path with --across, or all"),
    ("%sharebench torch->torch --across planets", "'processes' (a worker process of this host) or 'HOST:PORT'"),
    ("%sharebench torch->torch --across 10.0.0.2:29600 --worker-device cuda:1", "--worker-device goes with --across processes"),
])
def test_bad_across_lines_are_usage_errors_before_anything_connects(run, line, says):
    run("import torch; xc = torch.ones(4)")
    with pytest.raises(UsageError) as e:
        run(line)
    assert says in str(e.value)


def test_one_parser_reads_across_for_every_entry_point():
    from gpushare import arguments

    assert arguments.across_option("processes") == arguments.across_option(" process ") == "processes"
    assert arguments.across_option("10.0.0.2:29600") == "10.0.0.2:29600"
    assert arguments.across_option("[::1]:29600") == "[::1]:29600"
    for bad in ("10.0.0.2", "h:0", "h:70000", ":1", 5):
        with pytest.raises(ValueError):
            arguments.across_option(bad)
    assert arguments.is_remote("10.0.0.2:29600") and not arguments.is_remote("processes")


def test_gpushare_bench_across_host_port_sweeps_the_remote_path(worker, tmp_path):
    address, _ = worker
    out = tmp_path / "bench.json"
    done = subprocess.run([sys.executable, "-m", "gpushare", "bench", "torch->torch", "--across", address, "--paths",
                           "remote", "--sizes", "4KiB,64KiB", "--json", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    data = json.loads(out.read_text())["data"]
    assert [(p["path"], p["size"], p["verdict"]) for p in data["points"]] == [("remote", 4096, "copied"),
                                                                             ("remote", 65536, "copied")]
    assert all(p["worker"]["link"]["transport"] == "TCP over lo" for p in data["points"])


@pytest.mark.parametrize("argv, says", [
    (["bench", "torch->torch", "--across", "nowhere"], "known: processes, or HOST:PORT"),
    (["bench", "torch->torch", "--across", "10.0.0.2:0"], "is not a port"),
    (["bench", "torch->torch", "--across", "10.0.0.2:29600", "--worker-device", "cuda:1"],
     "--worker-device goes with --across processes"),
    (["calibrate", "--across", "::1:29600"], "IPv6 address in brackets"),
])
def test_the_commands_refuse_a_bad_across_in_one_line(argv, says):
    done = subprocess.run([sys.executable, "-m", "gpushare", *argv], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and says in done.stderr, done.stderr


def test_a_second_peer_of_a_busy_worker_is_told_it_serves_one_peer_at_a_time(worker):
    import gpushare
    from gpushare.exceptions import GpushareError

    address, _ = worker
    with gpushare.Worker(host=address, timeout=TIMEOUT):
        with pytest.raises(GpushareError) as e:
            gpushare.Worker(host=address, timeout=3.0).start()
    assert address in str(e.value) and "one peer at a time" in str(e.value)
    with gpushare.Worker(host=address, timeout=TIMEOUT) as w:  # once the first is gone, the next is served
        assert w.alive


def test_advise_across_host_port_predicts_the_remote_path_without_connecting():
    import torch

    import gpushare

    port = _free_port()  # nobody listens there: advise runs nothing
    a = gpushare.advise(torch.ones(1024), "torch", across=f"127.0.0.1:{port}")
    rows = {row["path"]: row for row in a.rows}
    assert rows["remote"]["verdict"] == "copied"
    assert rows["shm"]["verdict"] == "failed" and "on another" in rows["shm"]["reason"]
