"""The names the magics read and bind, read as Python reads them, and what a ``%%share`` cell bound.

Python folds every identifier to Unicode NFKC when it compiles code (PEP 3131): ``ｘｎ`` in a
cell is the variable ``xn`` and ``ﬁle`` is ``file``. A name the magics take from their line
(``%share ｙ ->numpy``, ``--as ｘｎ``, a template) is therefore normalised the same way before it
is looked up or bound, or the user's next line would not reach what gpushare bound.

What a ``%%share`` cell bound is read from the namespace, not from the cell's syntax: a name binds
inside ``with``, ``if``, ``for``, ``try``, a walrus, a line magic or ``exec`` alike, and only the
namespace sees them all. A snapshot taken before the cell runs tells afterwards which names hold a
new object.
"""

from __future__ import annotations

import ast
import keyword
import string
import unicodedata
import weakref
from typing import Any

from gpushare.adapters import ADAPTERS


def python_name(name: str) -> str:
    """The variable Python means by ``name``: its NFKC form, as the compiler folds identifiers."""
    return name if name.isascii() else unicodedata.normalize("NFKC", name)


def is_name(name: str) -> bool:
    """A name Python code can use as written: an identifier that is not a keyword. Checked as
    Python's tokenizer checks it, on the spelling itself (``x²`` is refused although its NFKC form
    ``x2`` is an identifier, as ``x² = 1`` is a SyntaxError)."""
    return name.isidentifier() and not keyword.iskeyword(name)


def reserved_name(name: str, hidden: Any = ()) -> str | None:
    """What binding ``name`` would replace that the user's next cells rely on, in words, or None:
    a builtin (``print``: every later ``print(1)`` would call the array), a name IPython binds
    itself (``get_ipython``, ``In``, ``_``; ``hidden``: the shell's ``user_ns_hidden``) or one of
    Python's own module names (``__builtins__``, ``__name__``). The magics refuse these without -f."""
    import builtins

    if name.startswith("__") and name.endswith("__"):
        return f"{name!r} is one of Python's own names"
    if name in hidden:
        return f"{name!r} is a name IPython binds itself"
    if hasattr(builtins, name):
        return f"{name!r} is a Python builtin"
    return None


def template_problem(template: str) -> str | None:
    """Why a name template cannot name results, or None. Only ``{name}`` and ``{dst}`` may appear,
    ``{name}`` must, and the names it makes must be usable Python names."""
    try:
        fields = list(string.Formatter().parse(template))
    except ValueError as e:
        return f"{template!r} is not a valid template ({e}); write {{{{ and }}}} for literal braces"
    used = set()
    for _, field, spec, conversion in fields:
        if field is None:
            continue
        if field not in ("name", "dst"):
            what = "a positional field" if field == "" or field.isdigit() else "an unknown field"
            return f"{template!r} has {what} {{{field}}}; a template may use only {{name}} and {{dst}}"
        if spec or conversion:
            return f"{template!r}: {{{field}}} takes no conversion or format spec"
        used.add(field)
    if "name" not in used:
        return f"{template!r} must contain {{name}}, e.g. {{name}}_{{dst}}"
    sample = template.format(name="x", dst=next(iter(ADAPTERS)))  # any framework's name will do
    if not is_name(sample):
        return f"{template!r} makes names like {sample!r}, which is not a valid Python variable name"
    return None


def result_name(template: str, name: str, dst: str) -> str:
    """The variable a template binds for ``name`` converted to ``dst``, as Python spells it."""
    return python_name(template.format(name=name, dst=dst))


def hop_name_clash(template: str, targets: list[str]) -> str | None:
    """Why ``template`` gives two hops of one chain the same name (a chain that visits a framework
    twice, as ``torch->numpy->torch->numpy`` does), or None. The name a hop gets depends on its
    target, not on which variable it converts, so this is known before the cell runs."""
    first_hop: dict[str, int] = {}
    for hop, target in enumerate(targets, 1):
        made = result_name(template, "x", target)
        if made in first_hop:
            return (
                f"the template {template!r} names hops {first_hop[made]} and {hop} (both to {target}) alike "
                f"({made!r} for a variable x): a chain binds one result per hop, so convert the second "
                "visit from its own variable"
            )
        first_hop[made] = hop
    return None


class NamespaceSnapshot:
    """The namespace's bindings before a cell runs, to tell afterwards which names the cell bound:
    those that hold an object they did not hold before (a new name, or a name given another
    object). A name rebound to the object it held, or an object changed in place, was not bound
    by the cell.

    Identity is kept without keeping the old objects alive where they allow a weak reference (the
    arrays of every framework gpushare knows do): a cell that replaces a large array does not hold
    the old one for its whole run, and an old object freed by the cell cannot pass for the new one
    that happens to get its address (as a bare id() could)."""

    __slots__ = ("_before", "_namespace")

    def __init__(self, namespace: dict[str, Any]):
        self._namespace = namespace
        before: dict[str, tuple[bool, Any]] = {}
        for name, obj in namespace.items():
            if type(obj).__weakrefoffset__:
                before[name] = (True, weakref.ref(obj))
            else:  # ints, strings, tuples: held (small, and mostly shared anyway)
                before[name] = (False, obj)
        self._before = before

    def _holds_same(self, name: str, obj: Any) -> bool:
        old = self._before.get(name)
        if old is None:
            return False
        weak, held = old
        return (held() if weak else held) is obj

    def bound(self, source: str = "") -> list[str]:
        """The names the cell bound, in the order the cell's ``source`` (Python, after IPython's
        transformations) first assigns them, then any others (bound by a line magic, ``exec`` or
        ``globals()``) in the namespace's order."""
        changed = [n for n, obj in list(self._namespace.items()) if not self._holds_same(n, obj)]
        order = {n: i for i, n in enumerate(_names_stored_in(source))}
        return sorted(changed, key=lambda n: order.get(n, len(order)))


def _names_stored_in(source: str) -> list[str]:
    """Every name ``source`` assigns to, anywhere (nested blocks, walrus, for and with targets), in
    the order they appear; none when the source does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    stores = [n for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]
    stores.sort(key=lambda n: (n.lineno, n.col_offset))
    return list(dict.fromkeys(n.id for n in stores))


__all__ = [
    "NamespaceSnapshot", "hop_name_clash", "is_name", "python_name", "reserved_name", "result_name", "template_problem",
]
