"""Whether a CUDA IPC handoff's cost follows the size of the allocation the handle maps rather than
the array's: a 1 MiB torch view handed to a worker by `ipc` and `torch_mp`, carved from allocations of
2 MiB to 8 GiB (a worker maps the whole allocation). A diagnostic for the cost model's process paths
(docs/gpu-results.md, sixth session): `python3 scripts/probe_ipc_allocation_size.py`."""

import sys

import torch

import gpushare


def main() -> int:
    if not torch.cuda.is_available():
        print("probe_ipc_allocation_size: no CUDA")
        return 0
    with gpushare.Worker() as worker:
        for alloc_mib in (2, 64, 1024, 8192, 2, 64):
            big = torch.ones(alloc_mib << 18, device="cuda:0")  # float32: alloc_mib MiB
            view = big[: 1 << 18]  # 1 MiB at the allocation's start
            cells = []
            for path in ("ipc", "torch_mp"):
                d = gpushare.share(view, "torch", across=worker, path=path, repeat=15).to_dict()
                t = d.get("timing") or {}
                cells.append(f"{path} {t.get('median', float('nan')) * 1e6:7.1f} µs")
            print(f"allocation {alloc_mib:5d} MiB, 1 MiB view: " + "   ".join(cells), flush=True)
            del big, view
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
