"""The names the magics read and bind, read as Python reads them.

Python folds every identifier to Unicode NFKC when it compiles code (PEP 3131): ``ｘｎ`` in a
cell is the variable ``xn`` and ``ﬁle`` is ``file``. A name the magics take from their line
(``%share ｙ ->numpy``, ``--as ｘｎ``, a template) is therefore normalised the same way before it
is looked up or bound, or the user's next line would not reach what gpushare bound.
"""

from __future__ import annotations

import keyword
import string
import unicodedata

from gpushare.adapters import ADAPTERS


def python_name(name: str) -> str:
    """The variable Python means by ``name``: its NFKC form, as the compiler folds identifiers."""
    return name if name.isascii() else unicodedata.normalize("NFKC", name)


def is_name(name: str) -> bool:
    """A name Python code can use as written: an identifier that is not a keyword. Checked as
    Python's tokenizer checks it, on the spelling itself (``x²`` is refused although its NFKC form
    ``x2`` is an identifier, as ``x² = 1`` is a SyntaxError)."""
    return name.isidentifier() and not keyword.iskeyword(name)


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


__all__ = [
    "is_name", "python_name", "result_name", "template_problem",
]
