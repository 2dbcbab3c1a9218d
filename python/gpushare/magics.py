"""IPython magics: ``%share``, ``%%share`` (and the ones later parts add). Run ``%share?`` for help.

The magics are thin over :mod:`gpushare.api`. Settings are traitlets on the ``GpuShare``
configurable: ``%config GpuShare.repeat = 20``.
"""

from __future__ import annotations

import ast
import shlex
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments
from IPython.display import display
from traitlets import Bool, Float, Int, Unicode

from gpushare import api
from gpushare.adapters import adapter_of
from gpushare.exceptions import GpushareError, NotAnArrayError, UnknownFrameworkError


def _split_route(line: str) -> tuple[list[str], str | None]:
    """Takes the ``SRC->DST`` token out of a magic line: argparse would read ``->jax`` as a flag."""
    try:
        tokens = shlex.split(line)
    except ValueError as e:
        raise UsageError(f"cannot parse arguments: {e}") from None
    routes = [t for t in tokens if "->" in t]
    if len(routes) > 1:
        raise UsageError(f"one route per magic, got {routes}")
    return [t for t in tokens if "->" not in t], (routes[0] if routes else None)


def _top_level_names(cell: str) -> list[str]:
    """Names a cell binds at top level, in order (assignments, for/with targets, imports excluded)."""
    try:
        tree = ast.parse(cell)
    except SyntaxError:
        return []
    names: list[str] = []

    def collect(target: ast.AST) -> None:
        if isinstance(target, ast.Name):
            names.append(target.id)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                collect(elt)
        elif isinstance(target, ast.Starred):
            collect(target.value)

    for node in tree.body:
        if isinstance(node, ast.Assign):
            for t in node.targets:
                collect(t)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and node.target is not None:
            collect(node.target)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            collect(node.target)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if item.optional_vars is not None:
                    collect(item.optional_vars)
        elif isinstance(node, ast.NamedExpr if hasattr(ast, "NamedExpr") else ()):  # pragma: no cover
            collect(node.target)
    seen: set[str] = set()
    return [n for n in names if not (n in seen or seen.add(n))]


@magics_class
class GpuShare(Magics):
    """gpushare's magics and their defaults (``%config GpuShare``)."""

    repeat = Int(None, allow_none=True, min=1, help=(
        "Default -r: timing samples per conversion. None: as many as time_budget allows."
    )).tag(config=True)
    number = Int(None, allow_none=True, min=1, help=(
        "Default -n: conversions per timing sample. None: chosen so a sample is long enough to time."
    )).tag(config=True)
    time_budget = Float(0.05, min=1e-4, help=(
        "Seconds of timing per array, as %timeit measures: a warm-up, then auto-ranged samples until "
        "the budget is spent (-n/-r pin those counts). A cell of a few arrays answers well under a second."
    )).tag(config=True)
    observe_gpu = Bool(True, help=(
        "On a GPU, record the memory ledger and the DLPack stream report of each handoff (one extra, "
        "untimed handoff)."
    )).tag(config=True)
    path = Unicode("auto", help="Default transfer path (--path).").tag(config=True)
    name_template = Unicode(
        "{name}_{dst}", help="How %%share names results: {name} is the variable, {dst} the framework."
    ).tag(config=True)
    quiet = Bool(False, help="Default -q: do not display the table.").tag(config=True)

    def _run(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (UnknownFrameworkError, ValueError) as e:
            raise UsageError(str(e)) from None

    def _show(self, table: api.ShareTable, args: Any) -> Any:
        if not (args.quiet or self.quiet) and not args.output:
            display(table)
        return table if args.output else None

    @magic_arguments()
    @argument("name", nargs="?", help="%%share: the variable to convert (line form only).")
    @argument("--path", "-p", default=None, help="Transfer path: auto, dlpack, capsule, cai, host, pinned, copy, shared, all.")
    @argument("--as", dest="as_", default=None, metavar="NEW|TEMPLATE",
              help="Line form: the new variable's name. Cell form: a template with {name} and {dst}.")
    @argument("-n", dest="number", type=int, default=None, help="Conversions per timing sample (loops).")
    @argument("-r", dest="repeat", type=int, default=None, help="Timing samples (repeats); median and min are reported.")
    @argument("-q", dest="quiet", action="store_true", help="Quiet: do not display the table.")
    @argument("-o", dest="output", action="store_true", help="Return the result object.")
    @line_cell_magic
    def share(self, line: str, cell: str | None = None) -> Any:
        """Convert arrays between frameworks and show what happened.

        Usage, cell form::

            %%share SRC->DST[->DST2…] [--path P] [--as TEMPLATE] [-n N] [-r R] [-q] [-o]

        runs the cell, then converts every SRC array the cell bound at top level and binds
        ``NAME_DST`` (for every hop of a chain). Nothing is bound unless every conversion worked.

        Usage, line form::

            %share NAME [SRC]->DST[->…] [--as NEW] [--path P] [-n N] [-r R] [-q] [-o]

        SRC is inferred when left out, checked when given.

        Examples
        --------
        ::

            %%share torch->tf
            x = torch.randn(4096, 4096)

            %share x ->jax --as xj
            %share x torch->jax->tf -r 20
        """
        rest, route = _split_route(line)
        args = self.share.parser.parse_args(rest)
        if route is None:
            raise UsageError("missing route: write SRC->DST (e.g. torch->tf) or ->DST")
        source, targets = self._run(api.parse_chain, route)
        repeat = args.repeat if args.repeat is not None else self.repeat
        number = args.number if args.number is not None else self.number
        if (repeat is not None and repeat < 1) or (number is not None and number < 1):
            raise UsageError("-n and -r must be at least 1")
        opts: dict[str, Any] = dict(path=args.path or self.path, repeat=repeat, number=number, observe=self.observe_gpu)
        if repeat is None or number is None:
            # Measured as %timeit does: warm, auto-ranged, within the budget; -n/-r pin what they name.
            opts.update(budget=self.time_budget, warmup=1)
        elif (repeat, number) != (1, 1):
            opts.update(warmup=1)
        if opts["path"] == "all":
            return self._compare(args, source, targets, cell, opts)
        if cell is None:
            return self._share_line(args, source, targets, opts)
        return self._share_cell(args, source, targets, cell, opts)

    def _lookup(self, name: str) -> Any:
        ns = self.shell.user_ns
        if name not in ns:
            raise UsageError(f"no variable named {name!r} in the namespace")
        return ns[name]

    def _share_line(self, args: Any, source: str | None, targets: list[str], opts: dict) -> Any:
        if not args.name:
            raise UsageError("line form: %share NAME [SRC]->DST (or use %%share as a cell magic)")
        if args.as_ is not None and len(targets) > 1:
            raise UsageError("--as names one result; a chain binds NAME_DST for every hop")
        obj = self._lookup(args.name)
        results = api.share_chain(obj, targets, source=source, name=args.name, **opts)
        bindings = {}
        for r in results:
            new = args.as_ if args.as_ is not None else self.name_template.format(name=args.name, dst=r.target.framework)
            bindings[new] = r.value
        self._bind(bindings)
        return self._show(api.ShareTable(results), args)

    def _share_cell(self, args: Any, source: str | None, targets: list[str], cell: str, opts: dict) -> Any:
        if args.name:
            raise UsageError("cell form takes no NAME: it converts what the cell binds")
        template = args.as_ if args.as_ is not None else self.name_template
        if "{name}" not in template:
            raise UsageError("--as for %%share is a template and must contain {name}, e.g. {name}_{dst}")
        names = _top_level_names(cell)
        # Errors in the user's cell propagate as they are: the cell failed, not gpushare.
        self.shell.ex(self.shell.transform_cell(cell))
        ns = self.shell.user_ns
        picked = []
        for n in names:
            if n not in ns:
                continue
            try:
                adapter = adapter_of(ns[n])
            except NotAnArrayError:
                continue
            if source is None or adapter.name == source:
                picked.append(n)
        if not picked:
            want = f"{source} arrays" if source else "arrays"
            raise UsageError(f"the cell bound no {want} at top level (names bound: {', '.join(names) or 'none'})")
        results = []
        bindings: dict[str, Any] = {}
        for n in picked:
            hops = api.share_chain(ns[n], targets, source=source, name=n, **opts)
            results.extend(hops)
            for r in hops:
                bindings[template.format(name=n, dst=r.target.framework)] = r.value
        # Bind only after every conversion succeeded: a failure leaves the namespace as it was.
        self._bind(bindings)
        return self._show(api.ShareTable(results), args)

    def _compare(self, args: Any, source: str | None, targets: list[str], cell: str | None, opts: dict) -> Any:
        compare = getattr(api, "compare", None)
        if compare is None:
            raise UsageError("--path all needs gpushare.compare, which this build lacks")
        if cell is not None or not args.name or len(targets) != 1:
            raise UsageError("--path all: %share NAME [SRC]->DST --path all")
        obj = self._lookup(args.name)
        # compare() picks its own defaults (several samples per path) unless -n/-r were given.
        timing = {k: v for k, v in (("repeat", opts["repeat"]), ("number", opts["number"])) if v is not None}
        result = compare(obj, targets[0], paths="all", source=source, **timing)
        if not (args.quiet or self.quiet) and not args.output:
            display(result)
        return result if args.output else None

    @magic_arguments()
    @argument("--import", dest="import_frameworks", action="store_true",
              help="Import every installed framework to report its version and DLPack support "
                   "(never starts a framework's GPU runtime).")
    @argument("-o", dest="output", action="store_true", help="Return the GpuInfo object.")
    @line_magic
    def gpuinfo(self, line: str) -> Any:
        """Frameworks found (versions, DLPack support), the CUDA driver and devices, contexts,
        peer access, memory per framework allocator and the memory settings in force.

        Usage::

            %gpuinfo [--import] [-o]
        """
        from gpushare.gpuinfo import gpuinfo

        args = self.gpuinfo.parser.parse_args(line.split())
        info = gpuinfo(import_frameworks=args.import_frameworks)
        if args.output:
            return info
        display(info)
        return None

    def _bind(self, bindings: dict[str, Any]) -> None:
        self.shell.user_ns.update(bindings)


def load(shell: Any) -> list[Magics]:
    """Registers every gpushare magic; returns the Magics instances so unloading can remove them."""
    from gpushare import lab_magics  # %sharebench, the transfer-path lab

    magics = GpuShare(shell=shell, parent=shell)
    shell.register_magics(magics)
    if magics not in shell.configurables:
        shell.configurables.append(magics)
    return [magics, lab_magics.load(shell)]


__all__ = ["GpuShare", "GpushareError", "load"]
