"""IPython magics: ``%share``, ``%%share`` (and the ones later parts add). Run ``%share?`` for help.

The magics are thin over :mod:`gpushare.api`. Settings are traitlets on the ``GpuShare``
configurable: ``%config GpuShare.repeat = 20``.
"""

from __future__ import annotations

import argparse
import functools
import math
import shlex
import textwrap
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, kwds, magic_arguments
from IPython.display import display
from traitlets import Bool, Float, Int, TraitError, Unicode, validate

from gpushare import _native, api
from gpushare.adapters import ADAPTERS, adapter_of
from gpushare.exceptions import GpushareError, GpushareWarning, NotAnArrayError, UnknownFrameworkError
from gpushare.magic_names import (
    NamespaceSnapshot, hop_name_clash, is_name, python_name, reserved_name, result_name, template_problem,
)
from gpushare.paths import PATH_NAMES, names_of
from gpushare.warn_site import warn_every_time

#: Largest -n/-r the magics accept: beyond it no run finishes, and the Rust core counts in 64 bits
#: (2**64 would overflow there instead of being refused here).
MAX_COUNT = 10**9
#: Largest ``GpuShare.time_budget`` (seconds of timing per array): a cell of a few arrays then
#: still answers within minutes, and a typo such as 1e12 is refused instead of hanging the kernel.
MAX_TIME_BUDGET = 60.0
#: What --path and ``GpuShare.path`` accept: the path table's share and move paths (crates/core/src/paths.rs).
PATH_CHOICES = (*PATH_NAMES, *(p for p in names_of("move") if p not in PATH_NAMES), "auto", "all")


#: The arrows a route is written with (crates/core/src/route.rs): typed, and as gpushare prints it.
_ARROWS = tuple(_native.text.ARROWS)


def _split_route(line: str, parser: Any = None, name_first: bool = False) -> tuple[list[str], str | None]:
    """Takes the route out of a magic line (argparse would read ``->jax`` as a flag), written with
    or without spaces around ``->`` (or ``→``): ``torch->tf``, ``torch-> tf``, ``torch -> tf``,
    ``-> tf``, ``torch → tf``. The route's own parsing is the core's (``api.parse_chain``); this
    only finds which tokens it spans.

    ``parser`` tells which flags take a value (so ``--as x`` is not read as a positional), and
    ``name_first`` says the first positional is a variable name, never a source framework: in
    ``%share x -> tf`` the route is ``->tf``, in ``%share x torch -> tf`` it is ``torch->tf``."""
    try:
        tokens = shlex.split(line)
    except ValueError as e:
        raise UsageError(f"cannot parse arguments: {e}") from None
    takes_value: set[str] = set()
    if parser is not None:
        for action in parser._actions:
            if action.option_strings and action.nargs != 0:
                takes_value.update(action.option_strings)
    # Positional tokens (not flags and not flag values), by index.
    positional: list[int] = []
    skip = False
    for i, t in enumerate(tokens):
        if skip:
            skip = False
        elif t.startswith("-") and not t.startswith("->"):
            skip = t in takes_value
        else:
            positional.append(i)
    pos = set(positional)
    in_route = [False] * len(tokens)
    routes: list[str] = []
    i = 0
    while i < len(tokens):
        if i not in pos or not any(a in tokens[i] for a in _ARROWS):
            i += 1
            continue
        start, end = i, i
        # A bare framework before `-> DST` is the source, unless it is the variable's name.
        if tokens[i].startswith(_ARROWS) and (i - 1) in pos and not in_route[i - 1]:
            before = [j for j in positional if j < i - 1 and not in_route[j]]
            if not name_first or before:
                start = i - 1
        # `SRC->` or `->` continues with the next token; so does a next token that starts with `->`.
        while end + 1 < len(tokens) and (end + 1) in pos and (
            tokens[end].endswith(_ARROWS) or tokens[end + 1].startswith(_ARROWS)
        ):
            end += 1
        routes.append("".join(tokens[start : end + 1]))
        for j in range(start, end + 1):
            in_route[j] = True
        i = end + 1
    if len(routes) > 1:
        raise UsageError(f"one route per magic, got {routes}")
    return [t for j, t in enumerate(tokens) if not in_route[j]], (routes[0] if routes else None)


def parse_magic_line(parser: Any, line: str, name_first: bool = False) -> tuple[argparse.Namespace, str | None]:
    """A magic line's arguments and route (see :func:`_split_route`), parsed by ``parser``.

    A notebook re-runs the same lines, and parsing one costs tens of microseconds of shlex and
    argparse, more than the rest of a share on a CPU; so a line's parse is remembered. Parsing is a
    function of the line and the parser alone, and errors are raised again every time (only
    successful parses are kept). Each call gets its own copy of the arguments."""
    args, route = _parse_magic_line_cached(parser, line, name_first)
    return argparse.Namespace(**vars(args)), route


@functools.lru_cache(maxsize=256)
def _parse_magic_line_cached(parser: Any, line: str, name_first: bool) -> tuple[argparse.Namespace, str | None]:
    rest, route = _split_route(line, parser, name_first=name_first)
    return parser.parse_args(rest), route


def _check_count(flag: str, value: int | None) -> None:
    if value is not None and not 1 <= value <= MAX_COUNT:
        raise UsageError(f"{flag} must be at least 1 and at most {MAX_COUNT:_}, got {value}")


def _append_doc(text: str) -> Any:
    """Appends ``text`` to a function's docstring (before magic_arguments turns it into the help)."""

    def deco(func: Any) -> Any:
        doc = (func.__doc__ or "").rstrip()
        # Indented as the docstring's body, which the help dedents.
        body = [ln for ln in doc.splitlines()[1:] if ln.strip()]
        indent = min((len(ln) - len(ln.lstrip()) for ln in body), default=0)
        func.__doc__ = doc + "\n\n" + textwrap.indent(text, " " * indent)
        return func

    return deco


@magics_class
class GpuShare(Magics):
    """gpushare's magics and their defaults (``%config GpuShare``)."""

    repeat = Int(None, allow_none=True, min=1, max=MAX_COUNT, help=(
        "Default -r: timing samples per conversion. None: as many as time_budget allows."
    )).tag(config=True)
    number = Int(None, allow_none=True, min=1, max=MAX_COUNT, help=(
        "Default -n: conversions per timing sample. None: chosen so a sample is long enough to time."
    )).tag(config=True)
    time_budget = Float(0.05, min=1e-4, max=MAX_TIME_BUDGET, help=(
        "Seconds of timing per array, as %timeit measures: a warm-up, then auto-ranged samples until "
        "the budget is spent (-n/-r pin those counts). A cell of a few arrays answers well under a second."
    )).tag(config=True)
    observe_gpu = Bool(True, help=(
        "On a GPU, record the memory ledger and the DLPack stream report of each handoff (one extra, "
        "untimed handoff)."
    )).tag(config=True)
    path = Unicode("auto", help=f"Default transfer path (--path): {', '.join(PATH_CHOICES)}.").tag(config=True)
    name_template = Unicode(
        "{name}_{dst}", help="How %%share names results: {name} is the variable, {dst} the framework."
    ).tag(config=True)
    quiet = Bool(False, help="Default -q: do not display the table.").tag(config=True)

    @validate("path")
    def _valid_path(self, proposal: Any) -> str:
        if proposal["value"] not in PATH_CHOICES:
            raise TraitError(f"unknown transfer path {proposal['value']!r}; known: {', '.join(PATH_CHOICES)}")
        return proposal["value"]

    @validate("time_budget")
    def _valid_time_budget(self, proposal: Any) -> float:
        # The bounds do not catch NaN (every comparison with it is false), which the timing loop
        # then refused at the first share with a bare ValueError.
        if not math.isfinite(proposal["value"]):
            raise TraitError(
                f"time_budget is seconds of timing per array, from 0.0001 to {MAX_TIME_BUDGET:g}, "
                f"got {proposal['value']!r}"
            )
        return proposal["value"]

    @validate("name_template")
    def _valid_template(self, proposal: Any) -> str:
        problem = template_problem(proposal["value"])
        if problem is not None:
            raise TraitError(f"name_template: {problem}")
        return proposal["value"]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # Names this object bound, with the id of what it bound: rebinding them (a rerun cell) is
        # silent, replacing anything else warns.
        self._bound: dict[str, int] = {}

    #: The %config defaults, appended to %share's help.
    _DEFAULTS_DOC = (
        "Defaults (``%config GpuShare``; checked when set)::\n\n"
        + "".join(
            f"    GpuShare.{n} = {t.default_value!r}{note}\n"
            for n, t, note in (
                ("repeat", repeat, "   # None: auto, as many samples as time_budget allows"),
                ("number", number, "   # None: auto, calls per sample chosen so one is long enough to time"),
                ("time_budget", time_budget, f"   # seconds of timing per array, at most {MAX_TIME_BUDGET:g}"),
                ("observe_gpu", observe_gpu, "   # on a GPU: memory ledger and DLPack streams"),
                ("path", path, f"   # {', '.join(PATH_CHOICES)}"),
                ("name_template", name_template, "   # {name}: the variable, {dst}: the target framework"),
                ("quiet", quiet, "   # True: no table, as -q"),
            )
        )
    )

    def _run(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (UnknownFrameworkError, ValueError) as e:
            raise UsageError(str(e)) from None

    def _show(self, table: api.ShareTable, args: Any, bound: list[str]) -> Any:
        quiet = args.quiet or self.quiet
        if not quiet and not args.output:
            display(table)
        if not quiet:
            # What the table does not show: the variables the user now has.
            print(f"bound: {', '.join(bound)}")
        return table if args.output else None

    def _plan_bindings(self, names: dict[str, str], sources: set[str], force: bool) -> list[str]:
        """Checks the names about to be bound (result name → what it holds, for messages) before any
        is bound: usable Python names and the source replaced only with -f. Returns the existing
        variables (not bound by an earlier %share) they replace, which warn at binding unless -f."""
        hidden = getattr(self.shell, "user_ns_hidden", {})
        for new, what in names.items():
            if not is_name(new):
                raise UsageError(f"cannot bind {what} to {new!r}: not a valid Python variable name")
            reserved = None if force else reserved_name(new, hidden)
            if reserved is not None:
                raise UsageError(
                    f"cannot bind {what} to {new!r}: {reserved}, and replacing it breaks the cells that follow; "
                    "choose another name with --as, or pass -f (--force) to replace it"
                )
        ns = self.shell.user_ns
        replaced = [n for n in names if n in ns and self._bound.get(n) != id(ns[n])]
        clobbered = [n for n in replaced if n in sources]
        if clobbered and not force:
            raise UsageError(
                f"binding {', '.join(clobbered)} would replace the array being converted; "
                "pass -f (--force) to replace it, or choose another name with --as"
            )
        return replaced

    def _bind_checked(self, bindings: dict[str, Any], replaced: list[str], force: bool) -> list[str]:
        """Binds after every conversion worked; warns (every time: no once-per-place registry) about
        the existing variables it replaces unless -f. Returns the names for the 'bound:' line."""
        if replaced and not force:
            ns = self.shell.user_ns
            kinds = ", ".join(f"{n} (a {type(ns[n]).__name__})" for n in replaced)
            warn_every_time(
                f"%share replaces existing variables: {kinds}; pass -f (--force) to do so without this warning",
                GpushareWarning,
            )
        self._bind(bindings)
        return [f"{n} (replaced)" if n in replaced else n for n in bindings]

    @magic_arguments()
    @kwds(usage=(
        "%(prog)s NAME [SRC]->DST[->DST2…] [--as NEW] [-p PATH] [-n NUMBER] [-r REPEAT] [-f] [-q] [-o]\n"
        "  %(prog)s NAME [SRC]->DST --across processes|HOST:PORT [-p PATH|all] [-r REPEAT] [-q] [-o]\n"
        "  %%%%%(prog)s SRC->DST[->DST2…] [--as TEMPLATE] [-p PATH] [-n NUMBER] [-r REPEAT] [-f] [-q] [-o]\n"
        "  (spaces around -> are optional: torch->tf, torch-> tf, torch -> tf, ->tf, -> tf)"
    ))
    @argument("name", nargs="?", help="Line form: the variable to convert. The route SRC->DST (or ->DST) "
              "is read apart from the other arguments; SRC is inferred when left out.")
    @argument("--path", "-p", default=None, metavar="PATH",
              help=f"Transfer path: {', '.join(PATH_CHOICES)}. Default: %%config GpuShare.path ('auto').")
    @argument("--as", dest="as_", default=None, metavar="NEW|TEMPLATE",
              help="Line form: the new variable's name. Cell form: a template with {name} and {dst}. "
                   "Default: %%config GpuShare.name_template ('{name}_{dst}').")
    @argument("-n", dest="number", type=int, default=None,
              help=f"Conversions per timing sample (loops), 1 to {MAX_COUNT:_}. Default: %%config "
                   "GpuShare.number (None: auto-ranged so a sample is long enough to time).")
    @argument("-r", dest="repeat", type=int, default=None,
              help=f"Timing samples (repeats), 1 to {MAX_COUNT:_}; median and min are reported. Default: "
                   "%%config GpuShare.repeat (None: as many as GpuShare.time_budget, 0.05 s, allows).")
    @argument("--device", default=None, metavar="DEVICE",
              help="Move to this device on the way (cpu or cuda:N); paths p2p, pinned, dlpack, move, auto.")
    @argument("-f", "--force", dest="force", action="store_true",
              help="Replace existing variables, the source array included, without a warning.")
    @argument("--across", default=None, metavar="processes|HOST:PORT",
              help="Line form: hand the array to a worker started for this line instead: 'processes' (a "
                   "worker process of this host) or HOST:PORT (`gpushare worker --listen HOST:PORT` on another "
                   "host); -p is then a process path (remote, gloo, shm, ...) or all. Binds nothing: the "
                   "worker, and the array it received, are gone after the line (gpushare.share(x, to, across=w) "
                   "keeps them).")
    @argument("--advise", action="store_true",
              help="Line form: predict each applicable path's verdict and time (the cost model of "
                   "gpushare.calibrate) and recommend one, converting nothing (gpushare.advise).")
    @argument("-q", dest="quiet", action="store_true",
              help="Quiet: no table, no 'bound:' line. Default: %%config GpuShare.quiet (False).")
    @argument("-o", dest="output", action="store_true", help="Return the result object.")
    @_append_doc(_DEFAULTS_DOC)
    @line_cell_magic
    def share(self, line: str, cell: str | None = None) -> Any:
        """Convert arrays between frameworks and show what happened.

        Usage, cell form::

            %%share SRC->DST[->DST2…] [--path P] [--as TEMPLATE] [-n N] [-r R] [-f] [-q] [-o]

        runs the cell, then converts every SRC array the cell bound (a name given a new object,
        anywhere: inside with/if/for/try, a walrus, a line magic) and binds ``NAME_DST`` (for every
        hop of a chain). Nothing is bound unless every conversion worked.
        Arguments and the template are checked before the cell runs.

        Usage, line form::

            %share NAME [SRC]->DST[->…] [--as NEW] [--path P] [-n N] [-r R] [-f] [-q] [-o]

        SRC is inferred when left out, checked when given. The line after the table names what was
        bound. Replacing the array being converted needs -f; replacing another existing variable
        warns unless -f.

        Examples
        --------
        ::

            %%share torch->tf
            x = torch.randn(4096, 4096)

            %share x ->jax --as xj
            %share x torch -> jax -> tf -r 20
            %share x ->torch --across 10.0.0.2:29600
            %share x ->torch --across 10.0.0.2:29600 --path all
        """
        __tracebackhide__ = True  # an error of the user's cell is shown from the user's line
        args, route = parse_magic_line(self.share.parser, line, name_first=cell is None)
        if route is None:
            raise UsageError("missing route: write SRC->DST (e.g. torch->tf) or ->DST")
        source, targets = self._run(api.parse_chain, route)
        repeat = args.repeat if args.repeat is not None else self.repeat
        number = args.number if args.number is not None else self.number
        if (repeat is not None and repeat < 1) or (number is not None and number < 1):
            raise UsageError("-n and -r must be at least 1")
        _check_count("-r", repeat)
        _check_count("-n", number)
        if args.across is not None:
            return self._share_across(args, source, targets, cell, args.repeat)
        path = args.path or self.path
        if path not in PATH_CHOICES:
            raise UsageError(f"unknown transfer path {path!r}; known: {', '.join(PATH_CHOICES)}")
        opts: dict[str, Any] = dict(path=path, repeat=repeat, number=number, observe=self.observe_gpu)
        if args.device is not None:
            opts["device"] = args.device
        if repeat is None or number is None:
            # Measured as %timeit does: warm, auto-ranged, within the budget; -n/-r pin what they name.
            opts.update(budget=self.time_budget, warmup=1)
        elif (repeat, number) != (1, 1):
            opts.update(warmup=1)
        if args.advise:
            return self._advise(args, source, targets, cell, opts)
        if opts["path"] == "all":
            return self._compare(args, source, targets, cell, opts)
        if cell is None:
            return self._share_line(args, source, targets, opts)
        return self._share_cell(args, source, targets, cell, opts)

    def _share_across(self, args: Any, source: str | None, targets: list[str], cell: str | None,
                      repeat: int | None) -> Any:
        """``--across``: the handoff (or, with ``--path all``, every process path) to a worker
        started for this line, as ``gpushare.share(x, to, across=...)`` and ``gpushare.compare``."""
        from gpushare import arguments, lab, processes

        if cell is not None or not args.name or len(targets) != 1:
            raise UsageError("--across: %share NAME [SRC]->DST --across processes|HOST:PORT [-p PATH|all]")
        for flag, given in (("--as", args.as_), ("--device", args.device), ("--advise", args.advise or None),
                            ("-n", args.number)):
            if given is not None:
                raise UsageError(f"{flag} does not go with --across (the worker's array is its own, and is "
                                 "gone after the line)")
        try:
            across = arguments.across_option(args.across)
            path = args.path or "auto"
            if path != "all":
                named = processes.parse_process_paths(path)
                if len(named) != 1:  # one handoff takes one path; `all` compares them
                    raise ValueError(f"-p names one process path with --across, or all to compare them; got {path!r}")
                path = named[0]
        except ValueError as e:
            raise UsageError(str(e)) from None
        obj = self._lookup(args.name)
        if source is not None and adapter_of(obj).name != source:  # SRC, when given, is checked
            raise UsageError(f"{args.name} is a {adapter_of(obj).name} array, not {source}")
        if path == "all":
            result = self._run(lab.compare, obj, targets[0], paths="all", across=across,
                               **({"repeat": repeat} if repeat is not None else {}))
        else:
            result = self._run(processes.share_across, obj, targets[0], across, path=path, repeat=repeat or 1)
        if not (args.quiet or self.quiet) and not args.output:
            display(result)
        return result if args.output else None

    def _lookup(self, name: str) -> Any:
        """The variable ``name`` means, spelt as the user wrote it (``ｙ`` is Python's ``y``)."""
        ns, key = self.shell.user_ns, python_name(name)
        if key not in ns:
            also = f" (Python reads it as {key!r})" if key != name else ""
            raise UsageError(f"no variable named {name!r} in the namespace{also}")
        return ns[key]

    def _share_line(self, args: Any, source: str | None, targets: list[str], opts: dict) -> Any:
        if not args.name:
            raise UsageError("line form: %share NAME [SRC]->DST (or use %%share as a cell magic)")
        if args.as_ is not None and len(targets) > 1:
            raise UsageError("--as names one result; a chain binds NAME_DST for every hop")
        if args.as_ is not None and not is_name(args.as_):
            raise UsageError(f"--as {args.as_!r} is not a valid Python variable name")
        obj = self._lookup(args.name)
        name = python_name(args.name)  # what the user's code calls it, and the table shows
        names = [
            python_name(args.as_) if args.as_ is not None else result_name(self.name_template, name, t) for t in targets
        ]
        clash = hop_name_clash(self.name_template, targets) if args.as_ is None else None
        if clash is not None:
            raise UsageError(clash)
        replaced = self._plan_bindings({n: _native.text.route_label(name, t) for n, t in zip(names, targets)}, {name}, args.force)
        results = api.share_chain(obj, targets, source=source, name=name, **opts)
        bindings = {n: r.value for n, r in zip(names, results)}
        bound = self._bind_checked(bindings, replaced, args.force)
        return self._show(api.ShareTable(results), args, bound)

    def _share_cell(self, args: Any, source: str | None, targets: list[str], cell: str, opts: dict) -> Any:
        __tracebackhide__ = True
        if args.name:
            raise UsageError("cell form takes no NAME: it converts what the cell binds")
        template = args.as_ if args.as_ is not None else self.name_template
        problem = template_problem(template)
        if problem is not None:
            raise UsageError(f"--as for %%share is a template: {problem}")
        if len(targets) > 1 and "{dst}" not in template:
            raise UsageError(f"a chain binds one result per hop: the template {template!r} needs {{dst}}")
        clash = hop_name_clash(template, targets)
        if clash is not None:
            raise UsageError(clash)
        ns = self.shell.user_ns
        before = NamespaceSnapshot(ns)
        # Errors in the user's cell propagate as they are: the cell failed, not gpushare.
        ran = self._exec_cell(cell)
        names = before.bound(ran)
        picked = []
        for n in names:
            try:
                adapter = adapter_of(ns[n])
            except NotAnArrayError:
                continue
            if source is None or adapter.name == source:
                picked.append(n)
        if not picked:
            want = f"{source} arrays" if source else "arrays"
            raise UsageError(f"the cell bound no {want} (names bound: {', '.join(names) or 'none'})")
        planned = {result_name(template, n, t): (n, t) for n in picked for t in targets}
        if len(planned) < len(picked) * len(targets):
            raise UsageError(f"the template {template!r} gives two results the same name")
        replaced = self._plan_bindings({k: _native.text.route_label(n, t) for k, (n, t) in planned.items()}, set(picked), args.force)
        results = []
        bindings: dict[str, Any] = {}
        for n in picked:
            hops = api.share_chain(ns[n], targets, source=source, name=n, **opts)
            results.extend(hops)
            for r in hops:
                bindings[result_name(template, n, r.target.framework)] = r.value
        # Bind only after every conversion succeeded: a failure leaves the namespace as it was.
        bound = self._bind_checked(bindings, replaced, args.force)
        return self._show(api.ShareTable(results), args, bound)

    def _exec_cell(self, cell: str) -> str:
        """Runs the cell's body as IPython runs a cell: transformed, compiled under a cell name that
        linecache knows (so a traceback shows the user's line, numbered as in the cell whose first
        line is ``%%share``), in the user's namespace. Returns the Python it ran."""
        __tracebackhide__ = True
        shell = self.shell
        source = "\n" + shell.transform_cell(cell)
        filename = shell.compile.cache(source, shell.execution_count, raw_code="\n" + cell)
        code = shell.compile(source, filename, "exec")
        exec(code, shell.user_global_ns, shell.user_ns)
        return source

    def _advise(self, args: Any, source: str | None, targets: list[str], cell: str | None, opts: dict) -> Any:
        if cell is not None or not args.name or len(targets) != 1:
            raise UsageError("--advise: %share NAME [SRC]->DST --advise [--device DEVICE]")
        from gpushare import advice

        result = self._run(advice.advise, self._lookup(args.name), targets[0], device=opts.get("device"), source=source)
        if not (args.quiet or self.quiet) and not args.output:
            display(result)
        return result if args.output else None

    def _compare(self, args: Any, source: str | None, targets: list[str], cell: str | None, opts: dict) -> Any:
        compare = getattr(api, "compare", None)
        if compare is None:
            raise UsageError("--path all needs gpushare.compare, which this build lacks")
        if cell is not None or not args.name or len(targets) != 1:
            raise UsageError("--path all: %share NAME [SRC]->DST --path all")
        obj = self._lookup(args.name)
        # compare() picks its own defaults (several samples per path) unless -n/-r were given.
        timing = {k: v for k, v in (("repeat", opts["repeat"]), ("number", opts["number"])) if v is not None}
        result = compare(obj, targets[0], paths="all", source=source, device=opts.get("device"), **timing)
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
        self._bound.update((n, id(v)) for n, v in bindings.items())


def _drop_refused_config(shell: Any) -> None:
    """While the extension is not loaded, IPython stores ``%config GpuShare.repeat = 0`` unchecked
    (no GpuShare exists to check it); the bad value would then make every ``%load_ext gpushare``
    fail with a traitlets traceback, and leave a half-built GpuShare among the shell's configurables.
    Each stored value is checked on a throwaway instance (no shell: not registered, not configured);
    a refused one is removed from the shell's config and named in a warning, and the default stays,
    as a value refused after loading keeps the last good one."""
    config = getattr(shell, "config", None)
    if config is None or "GpuShare" not in config:
        return
    section = config["GpuShare"]
    probe = GpuShare()
    traits = GpuShare.class_traits(config=True)
    for name in [n for n in section if n in traits]:  # unknown names: traitlets warns about them
        value = section[name]
        try:
            setattr(probe, name, value)
        except TraitError as e:
            del section[name]
            warn_every_time(
                f"%config GpuShare.{name} = {value!r}, set before %load_ext gpushare, is refused: {e}; "
                f"GpuShare.{name} keeps its default {traits[name].default_value!r}",
                GpushareWarning,
            )


def load(shell: Any) -> list[Magics]:
    """Registers every gpushare magic; returns the Magics instances so unloading can remove them."""
    from gpushare import lab_magics  # %sharebench, the transfer-path lab

    _drop_refused_config(shell)
    magics = GpuShare(shell=shell, parent=shell)
    shell.register_magics(magics)
    if magics not in shell.configurables:
        shell.configurables.append(magics)
    return [magics, lab_magics.load(shell)]


__all__ = ["GpuShare", "GpushareError", "load"]
