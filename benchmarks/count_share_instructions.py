"""What `gpushare.share()` adds to the raw framework call on the CPU, counted in instructions.

Timing `share` against the raw call on a small shared VM moves by 2x from one minute to the next
(benchmarks/bench_core.py); the number of instructions executed does not depend on the host's load.
For each pair (64 Ki float32, the arrays of bench_core.py) this runs `--warmup` raw calls and shares
untimed, then counts, under callgrind, `--calls` raw calls and then `--calls` shares between two
markers, and prints instructions per call for the raw call and the share and their difference.

Run (from the repository root, with the venv that has gpushare built in it):

    python benchmarks/count_share_instructions.py [--pairs torch->numpy,numpy->torch,torch->tf,torch->jax]
        [--calls 2000] [--warmup 300] [--keep DIR] [--json FILE]

The script starts itself once per pair under
`valgrind --tool=callgrind --instr-atstart=no --dump-instr=no --callgrind-out-file=DIR/callgrind.out.%p`,
with `XDG_CACHE_HOME` pointing at a fresh empty directory (no cost model of this machine, as in CI,
so `auto` decides the way it does there); each child imports only its pair's frameworks. The markers
are callgrind's client requests (callgrind.h: CALLGRIND_ZERO_STATS, CALLGRIND_START_INSTRUMENTATION,
CALLGRIND_STOP_INSTRUMENTATION, CALLGRIND_DUMP_STATS_AT), compiled with `cc` into a small library
called through ctypes: unlike `callgrind_control -i on <pid>`, which callgrind only answers while the
process runs client code, they switch at an exact point of the loop. Each phase is dumped to its own
file and its `totals:` line read. The few hundred instructions of the marker calls themselves are
spread over `--calls` calls (well under one instruction per call at 2000).

`--keep DIR` keeps the callgrind files there for `callgrind_annotate --inclusive=yes FILE` (the
extension is stripped by maturin: build it with symbols to see the Rust side by name).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

PAIRS = ("torch->numpy", "numpy->torch", "torch->tf", "torch->jax")

SHIM = r"""
#include <valgrind/callgrind.h>
void gs_start(void) { CALLGRIND_ZERO_STATS; CALLGRIND_START_INSTRUMENTATION; }
void gs_stop(const char *what) { CALLGRIND_STOP_INSTRUMENTATION; CALLGRIND_DUMP_STATS_AT(what); }
"""


def build_shim(directory: str) -> str:
    """The marker library: callgrind's client requests behind two C functions."""
    source = os.path.join(directory, "markers.c")
    library = os.path.join(directory, "libmarkers.so")
    with open(source, "w") as f:
        f.write(SHIM)
    subprocess.run(["cc", "-O1", "-shared", "-fPIC", "-o", library, source], check=True)
    return library


def cases(pair: str):
    """(raw call, share) for `pair`, importing only its frameworks."""
    import gpushare

    src, dst = pair.split("->")
    if src == "torch":
        import torch

        x = torch.ones(256, 256)
    else:
        import numpy as np

        x = np.ones((256, 256), dtype=np.float32)
    if dst == "numpy":
        import numpy as np

        raw = lambda: np.from_dlpack(x)  # noqa: E731
    elif dst == "torch":
        import torch

        raw = lambda: torch.from_dlpack(x)  # noqa: E731
    elif dst == "jax":
        import jax

        raw = lambda: jax.dlpack.from_dlpack(x)  # noqa: E731
    elif dst == "tf":
        import tensorflow as tf
        import torch.utils.dlpack

        raw = lambda: tf.experimental.dlpack.from_dlpack(torch.utils.dlpack.to_dlpack(x))  # noqa: E731
    else:
        raise SystemExit(f"unknown pair {pair}")
    return raw, lambda: gpushare.share(x, dst)


def child(args) -> int:
    """Under callgrind: warm up, then count each phase between the markers."""
    markers = ctypes.CDLL(args.markers)
    markers.gs_stop.argtypes = [ctypes.c_char_p]
    raw, ours = cases(args.child)
    for _ in range(args.warmup):
        raw()
        ours()
    for phase, fn in (("raw", raw), ("share", ours)):
        label = f"{args.child} {phase}".encode()
        n = args.calls
        markers.gs_start()
        for _ in range(n):
            fn()
        markers.gs_stop(label)
    return 0


def totals(directory: str) -> dict[str, int]:
    """{trigger label: total instructions} of every dump in `directory`."""
    found = {}
    for name in os.listdir(directory):
        if not name.startswith("callgrind.out."):
            continue
        label = total = None
        with open(os.path.join(directory, name)) as f:
            for line in f:
                m = re.match(r"desc: Trigger: Client Request: (.*)", line)
                if m:
                    label = m.group(1).strip()
                m = re.match(r"(?:totals|summary): (\d+)", line)
                if m:
                    total = int(m.group(1))
        if label is not None and total is not None:
            found[label] = total
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", default=",".join(PAIRS), help="comma-separated SRC->DST")
    parser.add_argument("--calls", type=int, default=2000, help="counted calls of each phase")
    parser.add_argument("--warmup", type=int, default=300, help="uncounted raw calls and shares first")
    parser.add_argument("--keep", help="keep the callgrind files in this directory")
    parser.add_argument("--json", help="write the counts here")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--markers", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args)

    work = tempfile.mkdtemp(prefix="gpushare-count-")
    out = args.keep or os.path.join(work, "out")
    os.makedirs(out, exist_ok=True)
    library = build_shim(work)
    env = dict(os.environ, XDG_CACHE_HOME=os.path.join(work, "cache"), TF_CPP_MIN_LOG_LEVEL="3",
               JAX_PLATFORMS="cpu", CUDA_VISIBLE_DEVICES="")
    os.makedirs(env["XDG_CACHE_HOME"])
    rows = []
    print(f"{'pair':<14} {'raw instr/call':>15} {'share instr/call':>17} {'added':>9}")
    try:
        for pair in args.pairs.split(","):
            before = set(os.listdir(out))
            cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--dump-instr=no",
                   f"--callgrind-out-file={out}/callgrind.out.%p", sys.executable, os.path.abspath(__file__),
                   "--child", pair, "--markers", library, "--calls", str(args.calls), "--warmup", str(args.warmup)]
            done = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            if done.returncode:
                sys.stderr.write(done.stdout + done.stderr)
                raise SystemExit(f"{pair}: the child failed ({done.returncode})")
            fresh = os.path.join(work, "fresh")
            os.makedirs(fresh, exist_ok=True)
            for name in set(os.listdir(out)) - before:
                shutil.copy(os.path.join(out, name), fresh)
            counted = totals(fresh)
            shutil.rmtree(fresh)
            raw = counted[f"{pair} raw"] / args.calls
            share = counted[f"{pair} share"] / args.calls
            rows.append(dict(pair=pair, raw=raw, share=share, added=share - raw))
            print(f"{pair:<14} {raw:15.0f} {share:17.0f} {share - raw:9.0f}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(calls=args.calls, warmup=args.warmup, pairs=rows), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
