"""Where the %share magic's own work goes on a GPU: `%share t ->jax -n 1 -r 1 -q -o` (and its table's
mime bundle) under variants, each as wall time less the timed sample its result reports. A
diagnostic for issue 11's magic budget, not a benchmark of record:
`python3 benchmarks/profile_gpu_magic.py`."""

import os
import statistics
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402,F401
import torch  # noqa: E402
from IPython.core.interactiveshell import InteractiveShell  # noqa: E402

import gpushare  # noqa: E402

ip = InteractiveShell.instance(history_load_length=0)
ip.history_manager.enabled = False
ip.run_line_magic("load_ext", "gpushare")
t = torch.ones(1 << 18, device="cuda")
ip.user_ns["t"] = t


def own(run, n=150):
    owns, walls = [], []
    for i in range(n + 30):
        t0 = time.perf_counter_ns()
        r = run()
        wall = (time.perf_counter_ns() - t0) * 1e-9
        timing = r.timing
        if i >= 30:
            walls.append(wall)
            owns.append(wall - sum(timing.samples) * timing.loops)
    return statistics.median(walls) * 1e6, statistics.median(owns) * 1e6


def magic(line, drop=False):
    def run():
        table = ip.run_line_magic("share", line)
        table._repr_mimebundle_()
        if drop:
            ip.user_ns.pop("t_jax", None)
        return table[0]
    return run


variants = {
    "magic as users run it": magic("t ->jax -n 1 -r 1 -q -o"),
    "magic, its bound t_jax dropped after each": magic("t ->jax -n 1 -r 1 -q -o", drop=True),
    "share(observe=True, budget=0.2, repeat=1, number=1)": lambda: gpushare.share(t, "jax", observe=True, budget=0.2, repeat=1, number=1),
    "share(observe=True) once": lambda: gpushare.share(t, "jax", observe=True),
    "share(observe=False, budget=0.2, repeat=1, number=1)": lambda: gpushare.share(t, "jax", budget=0.2, repeat=1, number=1),
    "share() once": lambda: gpushare.share(t, "jax"),
}
variants_off = {"magic, observe_gpu off": magic("t ->jax -n 1 -r 1 -q -o")}
for name, run in variants.items():
    wall, o = own(run)
    print(f"{name:<58} wall {wall:8.1f} µs  besides the timed sample {o:8.1f} µs", flush=True)
ip.run_line_magic("config", "GpuShare.observe_gpu = False")
for name, run in variants_off.items():
    wall, o = own(run)
    print(f"{name:<58} wall {wall:8.1f} µs  besides the timed sample {o:8.1f} µs", flush=True)
ip.run_line_magic("config", "GpuShare.observe_gpu = True")
ip.user_ns["c"] = __import__("cupy").ones(1 << 18, dtype="float32")
wall, o = own(lambda: (lambda tb: (tb._repr_mimebundle_(), tb[0])[1])(ip.run_line_magic("share", "t ->cupy -n 1 -r 1 -q -o")))
print(f"{'magic t ->cupy':<58} wall {wall:8.1f} µs  besides the timed sample {o:8.1f} µs", flush=True)
