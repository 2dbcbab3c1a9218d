"""The caller's side of tests/test_hosts.py, run in the caller's network namespace:
``python tests/_hosts_client.py SCENARIO JSON-ARGS``; prints one JSON line with what it saw."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import gpushare  # noqa: E402
from gpushare.exceptions import GpushareError  # noqa: E402


def listening_ports() -> set[int]:
    """TCP ports listening in this network namespace (/proc/net is the reader's namespace's)."""
    ports = set()
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(name) as f:
                for line in f.readlines()[1:]:
                    fields = line.split()
                    if fields[3] == "0A":
                        ports.add(int(fields[1].rsplit(":", 1)[1], 16))
        except FileNotFoundError:
            pass
    return ports


def established_to(address: str) -> int:
    """Connections of this namespace still established to ``address``."""
    hexaddr = "".join(f"{int(p):02X}" for p in reversed(address.split(".")))
    n = 0
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            if fields[3] == "01" and fields[2].startswith(hexaddr + ":"):
                n += 1
    return n


def children() -> list[int]:
    me, found = os.getpid(), []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/stat") as f:
                    stat = f.read().rsplit(") ", 1)[1].split()
            except OSError:
                continue
            if int(stat[1]) == me and stat[0] != "Z":
                found.append(int(pid))
    return found


def shm() -> set[str]:
    return set(os.listdir("/dev/shm"))


def error_of(e: BaseException) -> dict:
    return {"type": type(e).__name__, "message": str(e), "engine": getattr(e, "framework_error", None)}


def handoff(a: dict) -> dict:
    x = torch.arange(a.get("n", 1 << 16), dtype=torch.float32, device=a.get("device", "cpu"))
    before = x.clone()
    with gpushare.Worker(host=a["host"], timeout=a["timeout"], iface=a.get("iface")) as w:
        r = w.share(x, repeat=a.get("repeat", 3))
        same = torch.equal(torch.as_tensor(r.remote.read()), x.cpu())
        out = {"row": r.row, "text": repr(r), "values_equal": same, "pid": w.pid}
        table = gpushare.compare(x, "torch", across=w, repeat=2)
        out["compare"] = {row["path"]: [row["verdict"], row["reason"]] for row in table.rows}
    # ``across="HOST:PORT"``: a worker connected for the one call, and let go after it.
    once = gpushare.share(x, "torch", across=a["host"])
    out["once"] = {"verdict": once.verdict, "notes": once.row["notes"]}
    out["intact"] = torch.equal(x, before)
    return out


def connect(a: dict) -> dict:
    t0 = time.monotonic()
    try:
        w = gpushare.Worker(host=a["host"], timeout=a["timeout"], iface=a.get("iface")).start()
    except GpushareError as e:
        return {"error": error_of(e), "elapsed": time.monotonic() - t0, "children": children()}
    w.stop()
    return {"error": None, "elapsed": time.monotonic() - t0}


def rendezvous(a: dict) -> dict:
    """A worker that answers but cannot reach this side's rendezvous (``iface`` names an interface
    whose address does not lead here from there): what the first handoff's error said and when,
    and what was left."""
    ports = listening_ports()
    x = torch.arange(1024, dtype=torch.float32)
    before = x.clone()
    w = gpushare.Worker(host=a["host"], timeout=a["timeout"], iface=a.get("iface")).start()
    # The worker imports torch first (within its start timeout, not the handoff's): done before
    # the clock starts, so what is timed is the group's set-up alone.
    w._call("preload", modules=["torch"], timeout=120)
    w._preloaded.add("torch")
    t0, error = time.monotonic(), None
    try:
        w.share(x)
    except GpushareError as e:
        error = error_of(e)
    return {"error": error, "elapsed": time.monotonic() - t0, "alive": w.alive, "intact": torch.equal(x, before),
            "children": children(), "new_ports": sorted(listening_ports() - ports),
            "established": established_to(a["peer"])}


def shaped(a: dict) -> dict:
    """On a link shaped to a known rate: calibrate the remote path at ``calibrate`` sizes, then
    measure ``check`` sizes (not calibrated) and set the model's prediction beside each."""
    import statistics

    from gpushare.processes import remote as process_remote

    m = gpushare.calibrate(["torch"], sizes=a["calibrate"], device="cpu", across=a["host"], shares=False,
                           save=False, repeat=3, progress=False)
    out: dict = {"checked": []}
    with gpushare.Worker(host=a["host"], timeout=a["timeout"]) as w:
        for n in a["check"]:
            x = torch.ones(n // 4)
            r = w.share(x, repeat=a.get("repeat", 5))
            r.release()
            median = r.row["timing"]["median"]
            # The remote path's fit is this peer's link (cpu->remote:HOST), no other host's.
            place = gpushare.advice.process_place("cpu", None, a["host"])
            assert place.startswith("cpu->remote:"), place
            p = m.predict("process", "remote", "torch", "torch", place, n)
            out["checked"].append({"nbytes": n, "median": median, "samples": r.row["timing"]["samples"],
                                   "predicted": None if p is None else p.seconds,
                                   "bandwidth": n / median, "notes": r.row["notes"]})
        out["ceiling"] = process_remote.link_ceiling(w)
    return out


def fault(a: dict) -> dict:
    """Handoffs until ``action`` (kill, stop, linkdown) breaks one; what the error said and when,
    what was left, and a handoff to a fresh worker afterwards."""
    ports, segments = listening_ports(), shm()
    x = torch.randn(a.get("n", 4 << 20))
    before = x.clone()
    w = gpushare.Worker(host=a["host"], timeout=a["timeout"]).start()
    w.share(x, repeat=1).release()  # the group is up: what follows is handoffs only
    pid, acted = w.pid, {}
    # The fault lands after a handoff of the loop below has finished, however slow the machine.
    first = threading.Event()

    def act() -> None:
        first.wait(120)
        time.sleep(0.2)
        acted["at"] = time.monotonic()
        if a["action"] == "kill":
            os.kill(pid, signal.SIGKILL)
        elif a["action"] == "stop":
            os.kill(pid, signal.SIGSTOP)
        else:
            from _netns import VethPair

            VethPair(a["tag"]).set_link("b", False)

    threading.Thread(target=act, daemon=True).start()
    error, handoffs, silent = None, 0, None
    deadline = time.monotonic() + 4 * a["timeout"] + 150
    while time.monotonic() < deadline:
        started = time.monotonic()
        try:
            w.share(x, repeat=2).release()
            if not w.alive:
                # The fault met the release, which lets a dead worker's array go without a word
                # after waiting its timeout: the error is this iteration's, not the next one's.
                w._send("ping")
            handoffs += 1
            first.set()
        except GpushareError as e:
            error = error_of(e)
            # How long the peer had been silent when the error came: from the fault, or from the
            # start of the handoff that met it, whichever came later.
            silent = time.monotonic() - max(acted.get("at", started), started)
            break
    elapsed = time.monotonic() - acted["at"] if "at" in acted else None
    if a["action"] == "linkdown":  # the fresh worker is behind the same link
        from _netns import VethPair

        VethPair(a["tag"]).set_link("b", True)
    out = {"error": error, "elapsed": elapsed, "silent": silent, "handoffs": handoffs, "alive": w.alive,
           "intact": torch.equal(x, before), "children": children(),
           "new_ports": sorted(listening_ports() - ports), "established": established_to(a["peer"]),
           "new_shm": sorted(shm() - segments)}
    try:
        with gpushare.Worker(host=a["fresh"], timeout=a["timeout"]) as w2:
            r = w2.share(x, repeat=1)
            out["fresh_equal"] = torch.equal(torch.as_tensor(r.remote.read()), x)
            out["fresh_verdict"] = r.verdict
    except GpushareError as e:
        out["fresh_error"] = error_of(e)
    return out


if __name__ == "__main__":
    scenario, args = sys.argv[1], json.loads(sys.argv[2])
    print(json.dumps({"handoff": handoff, "connect": connect, "fault": fault, "rendezvous": rendezvous, "shaped": shaped}[scenario](args), default=str))
