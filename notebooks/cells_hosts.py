"""Notebook 10's cells: a worker on another host, reached over the network (torch.distributed)."""

from __future__ import annotations

from cells_common import code, md

ACROSS_HOSTS = [
    md("""
# Across hosts: a worker on another machine

The question after "which way is fastest within this process, or to another process here?" is
"what does it cost to hand this tensor to the process on the *other node*?". `gpushare worker
--listen HOST:PORT` serves on that node; `gpushare.Worker(host="HOST:PORT")` reaches it. The bytes
go by torch.distributed, as they do across hosts in training: gloo for host tensors, NCCL for
device tensors when both sides have a GPU (path `remote`). Each row says which engine and transport
carried them (read from the engine itself), both ends of the link, and the bandwidth against the
link's ceiling.

This notebook starts the worker on this machine, on 127.0.0.1, so that it runs anywhere: the link
is then the loopback interface. On a cluster, run `gpushare worker --listen 0.0.0.0:29600` on the
other node and set `address` below to that node's address.
"""),
    code("""
address = None       # HOST:PORT of a worker started elsewhere; None starts one on this machine
""", "parameters"),
    code("""
%load_ext gpushare
import socket, subprocess, sys
import torch, gpushare

two_gpus = torch.cuda.is_available() and torch.cuda.device_count() >= 2
server = None
if address is None:
    with socket.socket() as s:          # a free port on loopback
        s.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{s.getsockname()[1]}"
    # With two GPUs the worker receives device tensors on the second one (NCCL needs a GPU each side).
    argv = [sys.executable, "-m", "gpushare", "worker", "--listen", address, *(["--device", "cuda:1"] if two_gpus else [])]
    server = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(server.stdout.readline().strip())
"""),
    md("""
## A host tensor: gloo over the link

The worker is reached within its timeout (an error names the address when nobody answers). The
row says what every handoff's row says (verdict, bytes moved, time, bandwidth) and the link: the
engine, the transport in its own words, and both ends (host, interface, address). The first handoff
to a worker also measures the link's ceiling, once per peer (a note sets the handoff against it).
"""),
    code("""
w = gpushare.Worker(host=address, timeout=60).start()
x = torch.arange(1 << 20, dtype=torch.float32)
r = w.share(x, repeat=5)
r
"""),
    code("""
print("values equal on the other side:", torch.equal(torch.as_tensor(r.remote.read()), x))
print("link:", r.link["engine"], "|", r.link["transport"], "|", r.link["local"], "->", r.link["remote"])
r.release()
"""),
    md("""
## A device tensor: NCCL, and the transport NCCL says it used

Both sides need a GPU. Two processes of one machine look like one host to NCCL, which would then
take P2P or shared memory; gpushare gives each side a host id of its own, so NCCL goes by the
network, and the row reads the transport from NCCL's own channel lines. A same-host shortcut is
never reported as the network.
"""),
    code("""
if two_gpus:
    rd = w.share(x.to("cuda:0"), repeat=5)
    display(rd)
    print("NCCL:", rd.link["transport"], "| network:", rd.link["network"])
    print("\\n".join(rd.link["evidence"][:2]))
    rd.release()
else:
    print("skipped: a device tensor needs a GPU on each side (here: two GPUs, the worker on cuda:1)")
"""),
    md("""
## Every process path, one table

The paths of one host (CUDA IPC, shared memory, gloo on loopback, ...) cannot reach another host:
their rows say why.
"""),
    code("""
gpushare.compare(x, "torch", across=w, repeat=3)
"""),
    md("""
A listening worker serves one peer at a time (each by a process of its own, whose engines are that
peer's): this one is let go before the next connects. The magics take the same `--across`, and
connect for the one line.
"""),
    code("""
w.stop()
%share x ->torch --across {address} -r 3
"""),
    md("""
## Calibrated: predictions for the remote path

`calibrate(across=...)` (`gpushare calibrate --across HOST:PORT`) fits the remote path like any
other: `fixed + bytes / bandwidth`, bounded by the link's ceiling. Its fit takes the *mean* of each
size's samples, not the median: a small message's time over the network is bimodal (fast, or one
kernel timer tick later), and the median jumps between the two modes from one sweep to the next.
The model is saved for this machine, as every calibration is.
"""),
    code("""
m = gpushare.calibrate(["torch"], sizes=["64KiB", "1MiB", "16MiB"], device="cpu", across=address,
                       shares=False, repeat=3, progress=False)
w = gpushare.Worker(host=address, timeout=60).start()
gpushare.advise(x, "torch", across=w)
"""),
    md("""
## A sweep, with the model's line over the measured points

Sizes the calibration did not measure, each predicted before it ran.
"""),
    code("""
import matplotlib.pyplot as plt

b = gpushare.bench("torch", "torch", ["16KiB", "256KiB", "4MiB", "32MiB"], paths=["remote"], across=w, repeat=5)
points = [p for p in b.to_dict()["points"] if p.get("timing")]
grid = [1 << k for k in range(12, 26)]
line = [m.predict("process", "remote", "torch", "torch", "cpu->process", n) for n in grid]
fig, ax = plt.subplots(figsize=(6, 3.5))
ax.loglog([n for n, p in zip(grid, line) if p], [p.seconds for p in line if p], "-", label="model")
ax.loglog([p["size"] for p in points], [p["timing"]["median"] for p in points], "o", label="measured (median)")
ax.set_xlabel("bytes"); ax.set_ylabel("seconds per handoff"); ax.set_title(f"torch → worker at {address}")
ax.legend(); plt.show()
b
"""),
    code("""
w.stop()
if server is not None:
    server.terminate()
    print("worker exit code", server.wait(30))
"""),
]
