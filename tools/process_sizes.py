"""Whether a process path's handoff time grows with the array's size or with the time it was
measured at (on 2x H200, torch's `ipc` read 210 -> 403 µs and `torch_mp` 358 -> 701 µs from 16 KiB to
32 MiB, measured in that order, while CuPy's `ipc` stayed flat). Sweeps the sizes upward, downward,
and upward again through one worker and prints each path's median per size.
A diagnostic: `python3 -m tools.process_sizes --device cuda:0 --frameworks torch,cupy`.
"""

import argparse
import sys

import gpushare

SIZES = [16 << 10, 256 << 10, 4 << 20, 32 << 20]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--frameworks", default="torch")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    worker = gpushare.Worker().start()
    try:
        for name in args.frameworks.split(","):
            for label, order in (("up", SIZES), ("down", SIZES[::-1]), ("up", SIZES)):
                d = gpushare.bench(name, name, order, device=args.device, across=worker, repeat=args.repeat).to_dict()
                cells = {}
                for p in d["points"]:
                    if p.get("timing"):
                        cells.setdefault(p["path"], {})[p["size"]] = p["timing"]["median"] * 1e6
                for path, by_size in sorted(cells.items()):
                    print(f"{name:6s} {label:4s} {path:9s} " + "  ".join(f"{s >> 10:>6} KiB {by_size[s]:8.1f}" for s in SIZES if s in by_size))
    finally:
        worker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
