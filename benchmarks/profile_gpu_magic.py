"""Where the %share magic's own work goes on a GPU: `%share t ->DST -n 1 -r 1 -q -o` and its
table's mime bundle, taken apart into the steps it runs, each timed on its own (median µs), then a
cProfile of the whole. "Own work" is wall time less the timed sample the result reports (the magic
budget's definition). A diagnostic for the magic's budget, not a benchmark of record:
`python3 benchmarks/profile_gpu_magic.py [--profile]`."""

import cProfile
import os
import pstats
import statistics
import sys
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

# --cpu: a dry run of this script where there is no GPU (numpy stands in for CuPy).
ON_GPU = "--cpu" not in sys.argv
if not ON_GPU:
    os.environ["JAX_PLATFORMS"] = "cpu"
import jax  # noqa: E402
import torch  # noqa: E402
from IPython.core.interactiveshell import InteractiveShell  # noqa: E402

import gpushare  # noqa: E402
from gpushare import _native, api, ledger  # noqa: E402
from gpushare.magics import parse_magic_line  # noqa: E402

ip = InteractiveShell.instance(history_load_length=0)
ip.history_manager.enabled = False
ip.run_line_magic("load_ext", "gpushare")
magics = ip.magics_manager.registry["GpuShare"]
DEVICE, OTHER = ("cuda", "cupy") if ON_GPU else ("cpu", "numpy")
if ON_GPU:
    import cupy  # noqa: F401
t = torch.ones(1 << 18, device=DEVICE)
ip.user_ns["t"] = t
old_jax = jax.dlpack.from_dlpack(torch.ones(1 << 18, device=DEVICE))
old_jax.block_until_ready()


def timed(fn, n=300, warm=30):
    """Median wall time of fn(), µs."""
    xs = []
    for i in range(n + warm):
        t0 = time.perf_counter_ns()
        fn()
        if i >= warm:
            xs.append(time.perf_counter_ns() - t0)
    return statistics.median(xs) / 1e3


def own(run, n=300, warm=30):
    """Median µs of wall less the timed sample the result reports, and of wall."""
    owns, walls = [], []
    for i in range(n + warm):
        t0 = time.perf_counter_ns()
        r = run()
        wall = (time.perf_counter_ns() - t0) * 1e-9
        if i >= warm:
            walls.append(wall)
            owns.append(wall - sum(r.timing.samples) * r.timing.loops)
    return statistics.median(owns) * 1e6, statistics.median(walls) * 1e6


def row(name, value, wall=None):
    extra = f"   (wall {wall:8.1f})" if wall is not None else ""
    print(f"  {name:<62} {value:8.1f} µs{extra}", flush=True)


for dst in ("jax", OTHER):
    line = f"t ->{dst} -n 1 -r 1 -q -o"
    print(f"== %share {line}")

    def full():
        table = ip.run_line_magic("share", line)
        table._repr_mimebundle_()
        return table[0]

    row("magic + mime bundle, own work", *own(full))
    row("magic without IPython's run_line_magic, own work", *own(lambda: magics.share(line)[0]))
    args, route = parse_magic_line(magics.share.parser, line, name_first=True)
    row("parse the line (remembered)", timed(lambda: parse_magic_line(magics.share.parser, line, name_first=True)))
    opts = dict(path="auto", repeat=1, number=1, observe=True)
    row("_share_line (share_chain + bind), own work", *own(lambda: magics._share_line(args, None, [dst], opts)[0]))
    for observe in (True, False):
        row(f"share_chain(observe={observe}), own work",
            *own(lambda: api.share_chain(t, [dst], name="t", path="auto", repeat=1, number=1, observe=observe)[0]))
        row(f"share(observe={observe}), own work", *own(lambda: gpushare.share(t, dst, observe=observe)))
    table = ip.run_line_magic("share", line)
    row("table mime bundle", timed(table._repr_mimebundle_))
    row("table html", timed(table._repr_html_))
    row("table json", timed(table.to_json) if hasattr(table, "to_json") else float("nan"))

print("== the observed handoff's parts")
if ON_GPU:
    row("torch.cuda.synchronize()", timed(torch.cuda.synchronize))
    row("driver mem info (cuMemGetInfo)", timed(lambda: _native.cuda.mem_info(0)))
row("ledger.allocator_memory(0), every imported framework", timed(lambda: ledger.allocator_memory(0)))
for name in ledger.TRACKED_FRAMEWORKS:
    if name in sys.modules:
        row(f"  ledger.framework_memory({name!r})", timed(lambda: ledger.framework_memory(name, 0)))
row("jax from_dlpack(t)", timed(lambda: jax.dlpack.from_dlpack(t)))
row("jax from_dlpack(t).block_until_ready()", timed(lambda: jax.dlpack.from_dlpack(t).block_until_ready()))
row("block_until_ready() of an old array", timed(old_jax.block_until_ready))
if ON_GPU:
    row("cupy.from_dlpack(t)", timed(lambda: cupy.from_dlpack(t)))
    row("torch current stream", timed(lambda: torch.cuda.current_stream().cuda_stream))

print("== the observed handoff step by step, in sequence as the core runs it (median µs per step)")
# Each step timed where it runs, between the others, as crates/core/src/share/mod.rs `observe` orders them, with
# share() after them as the core's timed conversion: what each costs in context, not alone.
from gpushare import paths  # noqa: E402
from gpushare.adapters import framework  # noqa: E402

SRC, JAXA = framework("torch"), framework("jax")
pair_probe = api._pair_allocators(SRC, JAXA)
guarded = paths.route(SRC, JAXA, "dlpack")[1]
plain_import = getattr(guarded, "convert", guarded)


class Recorder:
    """What the core's StreamRecorder does, in Python: records the stream asked for."""

    __slots__ = ("obj", "streams")

    def __init__(self, obj):
        self.obj, self.streams = obj, []

    def __dlpack__(self, **kwargs):
        self.streams.append(kwargs.get("stream"))
        return self.obj.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.obj.__dlpack_device__()


def snapshot():
    if ON_GPU:
        _native.cuda.mem_info(0)
    return pair_probe(0)


for recorded in (True, False):
    steps = ("source sync", "snapshot before", "import" + (" through the recorder" if recorded else ""),
             "target sync", "snapshot after", "release the import", "source's current stream", "share() beside it")
    spent = {name: [] for name in steps}
    for i in range(330):
        ns = [time.perf_counter_ns()]
        SRC.synchronize(t)
        ns.append(time.perf_counter_ns())
        snapshot()
        ns.append(time.perf_counter_ns())
        value = plain_import(Recorder(t) if recorded else t)
        ns.append(time.perf_counter_ns())
        JAXA.synchronize(value)
        ns.append(time.perf_counter_ns())
        snapshot()
        ns.append(time.perf_counter_ns())
        del value
        ns.append(time.perf_counter_ns())
        SRC.current_stream(t)
        ns.append(time.perf_counter_ns())
        gpushare.share(t, "jax")
        ns.append(time.perf_counter_ns())
        if i >= 30:
            for name, a, b in zip(steps, ns, ns[1:]):
                spent[name].append(b - a)
    medians = {name: statistics.median(xs) / 1e3 for name, xs in spent.items()}
    for name, value in medians.items():
        row(name, value)
    row("the observation's steps, in all", sum(v for k, v in medians.items() if k != "share() beside it"))

print("== drift: the first rows again, after everything above")
row("magic ->jax + mime bundle, own work",
    *own(lambda: (lambda tb: (tb._repr_mimebundle_(), tb[0])[1])(ip.run_line_magic("share", "t ->jax -n 1 -r 1 -q -o"))))
row("share(t, 'jax', observe=True), own work", *own(lambda: gpushare.share(t, "jax", observe=True)))


def paired(a, b, blocks=15, per=20, before_a=None):
    """Median over alternating blocks of (a's own work − b's), µs: drift hits both alike.
    ``before_a`` runs before each call of ``a``, outside its timing."""
    diffs, a_own, b_own = [], [], []
    for _ in range(blocks):
        mean = []
        for fn in (a, b):
            total = 0.0
            for _ in range(per):
                if before_a is not None and fn is a:
                    before_a()
                t0 = time.perf_counter_ns()
                r = fn()
                total += (time.perf_counter_ns() - t0) * 1e-9 - sum(r.timing.samples) * r.timing.loops
            mean.append(total / per * 1e6)
        a_own.append(mean[0]), b_own.append(mean[1]), diffs.append(mean[0] - mean[1])
    return statistics.median(a_own), statistics.median(b_own), statistics.median(diffs)


def magic_full(dst):
    return lambda: (lambda tb: (tb._repr_mimebundle_(), tb[0])[1])(ip.run_line_magic("share", f"t ->{dst} -n 1 -r 1 -q -o"))


def magic_direct(dst):
    return lambda: (lambda tb: (tb._repr_mimebundle_(), tb[0])[1])(magics.share(f"t ->{dst} -n 1 -r 1 -q -o"))


print("== paired, alternating blocks (a own, b own, a − b), µs")
for dst in ("jax", OTHER):
    print(f"  {dst}: run_line_magic vs magics.share direct   %8.1f %8.1f %8.1f" % paired(magic_full(dst), magic_direct(dst)))
    print(f"  {dst}: magic direct vs share(observe=True)      %8.1f %8.1f %8.1f"
          % paired(magic_direct(dst), lambda: gpushare.share(t, dst, observe=True)))
    print(f"  {dst}: share(observe=True) vs share()           %8.1f %8.1f %8.1f"
          % paired(lambda: gpushare.share(t, dst, observe=True), lambda: gpushare.share(t, dst)))

    print(f"  {dst}: magic, its last result unbound first vs magic  %8.1f %8.1f %8.1f"
          % paired(magic_full(dst), magic_full(dst), before_a=lambda: ip.user_ns.pop(f"t_{dst}", None)))

print("== releasing a target array made from t (300 each, median µs)")
for name, make in (("jax", lambda: jax.dlpack.from_dlpack(t)), (OTHER, lambda: gpushare.share(t, OTHER).value)):
    arrays = [make() for _ in range(300)]
    if name == "jax":
        jax.block_until_ready(arrays)
    xs = []
    while arrays:
        t0 = time.perf_counter_ns()
        arrays.pop()
        xs.append(time.perf_counter_ns() - t0)
    row(f"del a {name} array made from torch's t", statistics.median(xs) / 1e3)

print("== the collector and JAX's live arrays around 300 magics ->jax")
import gc  # noqa: E402

collections = {0: 0, 1: 0, 2: 0}
spent = [0.0]
started = [0]


def on_gc(phase, info):
    if phase == "start":
        started[0] = time.perf_counter_ns()
    else:
        collections[info["generation"]] += 1
        spent[0] += (time.perf_counter_ns() - started[0]) * 1e-9


live_before = len(jax.live_arrays())
gc.callbacks.append(on_gc)
t0 = time.perf_counter()
for _ in range(300):
    magic_full("jax")()
elapsed = time.perf_counter() - t0
gc.callbacks.remove(on_gc)
print(f"  300 magics: {elapsed * 1e6 / 300:.1f} µs each; collections by generation {collections}, "
      f"{spent[0] * 1e6 / 300:.1f} µs each in the collector; live JAX arrays {live_before} → {len(jax.live_arrays())}; "
      f"gc objects {len(gc.get_objects())}")
t0 = time.perf_counter()
gc.collect()
print(f"  gc.collect(): {(time.perf_counter() - t0) * 1e3:.1f} ms, live JAX arrays then {len(jax.live_arrays())}")
row("share(t, 'jax', observe=True) after gc.collect(), own work", *own(lambda: gpushare.share(t, "jax", observe=True)))
gc.freeze()
row("share(t, 'jax', observe=True) after gc.freeze(), own work", *own(lambda: gpushare.share(t, "jax", observe=True)))
row("magic ->jax + mime bundle after gc.freeze(), own work", *own(magic_full("jax")))
gc.unfreeze()

if "--profile" in sys.argv:
    for dst in ("jax", OTHER):
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(500):
            ip.run_line_magic("share", f"t ->{dst} -n 1 -r 1 -q -o")._repr_mimebundle_()
        pr.disable()
        print(f"== cProfile, 500 × %share t ->{dst}, by own time")
        pstats.Stats(pr).sort_stats("tottime").print_stats(22)
