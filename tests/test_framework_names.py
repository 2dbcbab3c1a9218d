"""Everything framework-specific lives in that framework's adapter (issue 11): no module of the
package but ``adapters.py`` may name a framework in its code. Adding a framework then touches its
adapter (and its rules in ``src/explain/``), and nothing here can be missed.

The check walks each module's syntax tree for string constants that are a framework's name, alias
or module (``"jax"``, ``"tensorflow"``, ``"np"``): in a comparison, a dict key, a default, a call's
argument or ``sys.modules.get(...)``, each is a branch on a framework outside its adapter.
Docstrings are prose and are skipped; comments never reach the tree.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from gpushare.adapters import ADAPTERS

PACKAGE = Path(__file__).resolve().parents[1] / "python" / "gpushare"
ALLOWED = {"adapters.py"}


def framework_words() -> set[str]:
    """Names, modules, distributions and aliases; two-letter aliases ("pt", "np", "cp", "pd") only
    as names ("tf"), because they are also ordinary words in code (tqdm's unit="pt")."""
    words = set()
    for a in ADAPTERS.values():
        words |= {a.name, a.module, *a.type_modules, *a.distributions()}
        words |= {alias for alias in a.aliases if len(alias) > 2}
    return {w.lower() for w in words}


def docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def framework_literals(source: str, words: set[str]) -> list[tuple[int, str]]:
    tree = ast.parse(source)
    skip = docstrings(tree)
    return sorted(
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        and id(node) not in skip and node.value.lower() in words
    )


def test_the_words_cover_every_framework():
    words = framework_words()
    assert {"torch", "pytorch", "tf", "tensorflow", "jax", "numpy", "cupy", "numba", "paddle", "paddlepaddle"} <= words


@pytest.mark.parametrize("module", sorted(p.name for p in PACKAGE.glob("*.py") if p.name not in ALLOWED))
def test_no_framework_name_outside_the_adapters(module):
    found = framework_literals((PACKAGE / module).read_text(encoding="utf-8"), framework_words())
    assert not found, (
        f"{module} names frameworks in its code {found}: move that behaviour into the framework's adapter "
        "(an attribute or method of Adapter in adapters.py)"
    )


def test_the_check_catches_each_kind_of_branch():
    """The walk is not vacuous: each way of branching on a name is found, a docstring is not."""
    words = framework_words()
    cases = {
        'if dst.name == "jax": pass': 1,
        'x = src.name in ("numpy", "tf")': 2,
        'D = {"cupy": 1}': 1,
        'import sys\nm = sys.modules.get("torch")': 1,
        'def f(frameworks=("numba",)): pass': 1,
        'def f():\n    """Moves arrays between torch and jax."""\n    return 1': 0,
        'x = f"{name} tensorflow"': 0,  # prose in a message, not a name on its own
    }
    for code, n in cases.items():
        assert len(framework_literals(code, words)) == n, code


def test_the_cli_knows_the_adapters_names_and_aliases():
    """The CLI checks `gpushare bench SRC->DST` before it starts a kernel, from its own list
    (src/cli/bench_args.rs FRAMEWORKS): a new framework's adapter and that list must agree."""
    import re

    rust = (PACKAGE.parents[1] / "src" / "cli" / "bench_args.rs").read_text(encoding="utf-8")
    block = rust[rust.index("pub const FRAMEWORKS"):]
    block = block[: block.index("];")]
    cli = {
        name: tuple(re.findall(r'"([^"]+)"', aliases))
        for name, aliases in re.findall(r'\("([^"]+)",\s*&\[([^\]]*)\]\)', block)
    }
    assert cli == {a.name: tuple(a.aliases) for a in ADAPTERS.values()}
