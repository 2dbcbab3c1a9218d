"""``%sharebench``: sweep sizes × transfer paths between two frameworks. Run ``%sharebench?`` for help.

Thin over :func:`gpushare.lab.bench`; ``%share NAME ->DST --path all`` (in :mod:`gpushare.magics`)
is the one-array form, over :func:`gpushare.lab.compare`.
"""

from __future__ import annotations

import warnings
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class
from IPython.core.magic_arguments import argument, kwds, magic_arguments
from IPython.display import display

from gpushare import api, arguments, devices, lab, sweep_sizes
from gpushare.adapters import framework
from gpushare.exceptions import GpushareWarning, UnknownFrameworkError
from gpushare.magics import MAX_COUNT, _check_count, parse_magic_line


def _usage_line(parser: Any) -> str:
    """``usage: %sharebench SRC->DST [...]``: the first line of the magic's usage, without the
    reST ``::`` that magic_arguments puts before it for the help."""
    lines = [ln.strip() for ln in parser.format_usage().splitlines() if ln.strip() not in ("", "::")]
    return f"usage: {lines[0]}"


@magics_class
class GpuShareLab(Magics):
    """The transfer-path laboratory's magics."""

    @magic_arguments()
    @kwds(usage=(
        "%(prog)s SRC->DST [--sizes S1,S2,…] [--dtype DTYPE] [--device DEVICE] [--paths P1,P2,…] "
        "[-n NUMBER] [-r REPEAT] [-q] [-o] [--across processes|HOST:PORT [--worker-device DEVICE]]\n"
        "  (spaces around -> are optional: torch->jax, torch -> jax)"
    ))
    @argument(
        "--sizes", default=None, metavar="S1,S2,…",
        help=f"Sizes to sweep, comma-separated (default {','.join(lab.DEFAULT_SIZES)}); KiB/MiB/GiB, KB/MB/GB or bytes.",
    )
    @argument("--dtype", default="float32", help="Element type of the arrays (default float32).")
    @argument("--device", default=None, help="cpu or cuda:N (default cuda:0 when CUDA is usable, else cpu).")
    @argument("--to-device", dest="to_device", default=None,
              help="Move to this device (cpu or cuda:N): the paths become p2p, pinned, dlpack (dl_device) and move.")
    @argument("--paths", default="all", metavar="P1,P2,…",
              help="Transfer paths to measure, comma-separated, or all (default): dlpack, capsule, cai, host, pinned, copy, shared, auto.")
    @argument("-n", dest="number", type=int, default=None, help=f"Handoffs per timing sample, 1 to {MAX_COUNT:_} (default: enough for 5 ms).")
    @argument("-r", dest="repeat", type=int, default=None, help=f"Timing samples per point, 1 to {MAX_COUNT:_} (default 5); median and min are reported.")
    @argument("--across", default=None, metavar="processes|HOST:PORT",
              help="processes: hand each array to a worker process instead, by the process paths "
                   "(ipc, torch_mp, shm, nccl, nccl_socket, gloo; see gpushare.processes); HOST:PORT: "
                   "to the worker there (`gpushare worker --listen HOST:PORT`), by the remote path.")
    @argument("--worker-device", default=None, metavar="DEVICE",
              help="With --across processes: the worker's device (default: the source's), e.g. cuda:1.")
    @argument("-q", dest="quiet", action="store_true", help="Quiet: no progress bar, no table.")
    @argument("-o", dest="output", action="store_true", help="Return the Benchmark object.")
    @line_magic
    def sharebench(self, line: str) -> Any:
        """Sweep array sizes × transfer paths from one framework to another and show the results.

        Usage::

            %sharebench SRC->DST [--sizes 4KiB,1MiB,256MiB] [--dtype float32] [--device cuda:0]
                                 [--paths all] [-n N] [-r R] [-q] [-o]

        For every size, SRC makes a 1-d array on the device and every path hands it to DST: a table
        of median times (one unit per column, the fastest at each size starred), a table of
        bandwidths, and a plot of time and bandwidth against size. A path that does not apply (pinned
        without CUDA, capsules into JAX…) is listed with the reason. Ctrl-C stops the sweep and shows
        what was measured.

        Examples
        --------
        ::

            %sharebench torch->jax
            %sharebench torch->tf --sizes 4KiB,64MiB --paths dlpack,capsule,host -r 7
            b = %sharebench cupy->torch --device cuda:0 -o
            %sharebench torch->torch --across processes --sizes 1MiB,256MiB
            %sharebench torch->torch --across processes --worker-device cuda:1 --paths ipc,nccl
            %sharebench torch->torch --across 10.0.0.2:29600 --sizes 1MiB,64MiB --paths remote
        """
        # bad flags raise UsageError with the usage line
        args, route = parse_magic_line(self.sharebench.parser, line)
        if route is None:
            raise UsageError("missing route: %sharebench SRC->DST (e.g. torch->jax)")
        try:
            source, targets = api.parse_chain(route)
        except (UnknownFrameworkError, ValueError) as e:
            raise UsageError(str(e)) from None
        if source is None or len(targets) != 1:
            raise UsageError("%sharebench needs one source and one target: SRC->DST (e.g. torch->jax)")
        for flag, value in (("-n", args.number), ("-r", args.repeat)):
            if value is not None and value < 1:
                raise UsageError(f"{flag} must be at least 1")
            _check_count(flag, value)  # 2**64 would overflow in the Rust core instead
        if args.across is not None:
            try:
                args.across = arguments.across_option(args.across)
            except ValueError as e:
                raise UsageError(str(e)) from None
        if args.worker_device is not None and args.across != "processes":
            raise UsageError("--worker-device goes with --across processes (a remote worker's device is its "
                             "own: `gpushare worker --listen HOST:PORT --device cuda:N`)")
        try:
            listed = [s for s in args.sizes.split(",") if s.strip()] if args.sizes else lab.DEFAULT_SIZES
            sizes = arguments.sizes("--sizes", listed)
            if args.across is not None:
                from gpushare import processes

                paths = processes.parse_process_paths(args.paths)
                if args.worker_device is not None:
                    devices.parse_device(args.worker_device)
            else:
                paths = lab.parse_paths(args.paths)
            if args.device is not None:
                devices.parse_device(args.device)
            # Every size must fit where the sweep makes it, checked before the first array is made.
            device = args.device or lab._default_device(framework(source))
            sweep_sizes.check_fits(sizes, [device, args.to_device or device, args.worker_device or device])
        except ValueError as e:
            raise UsageError(f"{_usage_line(self.sharebench.parser)}\n{e}") from None
        kwargs: dict[str, Any] = dict(dtype=args.dtype, device=args.device, paths=paths, progress=not args.quiet)
        if args.to_device is not None:
            kwargs["to_device"] = args.to_device
        if args.repeat is not None:
            kwargs["repeat"] = args.repeat
        if args.number is not None:
            kwargs["number"] = args.number
        if args.across is not None:
            from gpushare import processes

            kwargs.pop("progress")
            kwargs.pop("number", None)
            worker = (processes.Worker(device=args.worker_device) if args.across == "processes"
                      else processes.Worker(host=args.across))
            kwargs["across"] = worker
        try:
            with warnings.catch_warnings():
                if not args.quiet:
                    # The table shown says it was interrupted: the warning would be a second
                    # output. With -q the warning is the one output.
                    warnings.filterwarnings("ignore", message="sharebench interrupted", category=GpushareWarning)
                if args.across is not None:
                    with worker:
                        result = lab.bench(source, targets[0], sizes, **kwargs)
                else:
                    result = lab.bench(source, targets[0], sizes, **kwargs)
        except ValueError as e:  # a dtype or device the frameworks refuse
            raise UsageError(str(e)) from None
        if not args.quiet and (not args.output or result.interrupted):
            display(result)
        if result.interrupted:
            # The cell still fails (Run All stops there), but the partial table, which says it was
            # interrupted, is its one output: no warning, no traceback under it.
            raise SharebenchInterrupted(result)
        return result if args.output else None


class SharebenchInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped ``%sharebench``: the partial results are shown (``.result``), and nothing
    else is (IPython renders an exception through ``_render_traceback_``)."""

    def __init__(self, result: Any):
        super().__init__("sharebench interrupted: partial results shown above")
        self.result = result

    def _render_traceback_(self) -> list[str]:
        return []


def load(shell: Any) -> GpuShareLab:
    """Registers ``%sharebench`` on ``shell``."""
    magics = GpuShareLab(shell=shell)
    shell.register_magics(magics)
    return magics


__all__ = ["GpuShareLab", "SharebenchInterrupted", "load"]
