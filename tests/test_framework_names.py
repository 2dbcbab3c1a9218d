"""Everything framework-specific lives in that framework's adapter: no module of the
package outside ``gpushare/adapters/`` imports a framework, calls into one, or branches on a
framework's name. Adding a framework then touches its adapter (``adapters/<module>.py``) and its
rules (the core's ``explain/``), and nothing here can be missed.

Two walks of each module's syntax tree:

* **imports and calls** (:func:`framework_uses`): ``import torch``, ``from jax import numpy``,
  ``importlib.import_module("cupy")`` or ``__import__("numba")``, and ``importlib.import_module`` of
  a name that is not a constant (outside the adapters a dynamic import can only be a framework's:
  ``Adapter.load`` and ``Adapter.import_module`` are where that happens); ``sys.modules["torch"]``,
  ``sys.modules.get("jax")`` and ``"torch" in sys.modules``; every call through a name bound to a
  framework module (by those imports, by ``sys.modules`` or by an adapter's ``load()``); and every
  call of a method only frameworks' arrays or modules have (``.cpu()``, ``.numpy()``, ``.detach()``,
  ``device_put``, …: :data:`FRAMEWORK_METHODS`, which no ``Adapter`` method may share).
  ``__cuda_array_interface__``, ``__dlpack__`` and ``__dlpack_device__`` are the exchange protocols,
  every framework's alike, and fine anywhere.
* **names** (:func:`framework_literals`): string constants that are a framework's name, alias or
  module (``"jax"``, ``"tensorflow"``, ``"np"``) in a comparison, a dict key, a default or an
  argument: each is a branch on a framework outside its adapter. Docstrings are prose and skipped;
  comments never reach the tree.

The framework modules and words come from the adapters' own declarations (``ADAPTERS``: each
adapter's module, type modules, process modules, aliases and distributions), never from a list here.

NumPy is a framework like the others: it has an adapter, a user's NumPy array is shared like any
other, and ``%load_ext gpushare`` must not import it. A user's arrays are read on the host only
through the adapters (``to_numpy``/``from_numpy``, and ``adapters/host.py`` for the host route's copy
and the check of what a narrowing copy lost). One module uses NumPy as gpushare's own tool and is
allowed to, by name, in :data:`NUMPY_AS_A_TOOL`: ``machine_ceilings.py`` times ``np.copyto`` between
two buffers it allocates itself, to measure this machine's host-memory copy ceiling for the path
advice; no user's array and no handoff is involved, only its calibration sweep runs it, and it
imports NumPy inside that function. A second entry there needs the same kind of reason.

The process modules (``processes/``) were excluded, in :data:`PENDING_MODULES`, until their framework
calls moved (torch's worker steps) into adapter hooks
(``Adapter.process_steps()``, ``adapters/torch_process.py``, ``adapters/process_host.py``); they are
checked like every module now. The set must only shrink:
:func:`test_the_pending_modules_still_need_their_exclusion` fails once a module in it passes.
"""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

from gpushare.adapters import ADAPTERS, Adapter

PACKAGE = Path(__file__).resolve().parents[1] / "python" / "gpushare"

#: Modules not checked yet because their framework calls still wait to move into adapter hooks
#: (empty now). Remove a module from here as soon as it passes (a test below insists).
PENDING_MODULES: set[str] = set()

#: Modules that use NumPy as gpushare's own tool, never for a user's array (see the docstring).
NUMPY_AS_A_TOOL = {"machine_ceilings.py": "times np.copyto between its own buffers: the host-memory ceiling"}

#: Methods that only frameworks' arrays or modules have: a call of one outside the adapters handles
#: a framework's array in that framework's own terms.
FRAMEWORK_METHODS = frozenset({
    "cpu", "cuda", "numpy", "detach", "clone", "resolve_conj", "resolve_neg", "is_conj", "is_neg",
    "get_device", "device_put", "block_until_ready", "is_deleted", "is_ready", "unsafe_buffer_pointer",
    "copy_to_host", "to_device", "as_cuda_array", "asnumpy", "to_dlpack", "as_tensor", "convert_to_tensor",
    "to_tensor", "device_count", "current_device", "set_device",
})


def package_modules() -> list[str]:
    """Every module of the package outside ``adapters/``, as a path relative to the package."""
    return sorted(
        str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
        if p.relative_to(PACKAGE).parts[0] != "adapters"
    )


def framework_modules() -> set[str]:
    """The top-level modules of every framework, as their adapters declare them."""
    return {
        m.split(".")[0]
        for a in ADAPTERS.values()
        for m in (a.module, *a.type_modules, *a.process_modules, *a.crashes_beside)
    }


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


# -- imports and calls -------------------------------------------------------------------------------


def _dotted(node: ast.AST) -> str | None:
    """``a.b.c`` of a chain of attributes on a name; None for anything else."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def _chain(node: ast.AST) -> list[ast.AST]:
    """The nodes a chain of attributes, subscripts and calls is made of, outermost first
    (``x.a[0].b().c`` down to ``x``)."""
    nodes = [node]
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
        nodes.append(node)
    return nodes


def _constant(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _top(name: str | None) -> str | None:
    return None if name is None else name.split(".")[0]


class _Walk(ast.NodeVisitor):
    def __init__(self, modules: set[str]):
        self.modules = modules
        self.bound: set[str] = set()  # names bound to a framework module (or a function of one)
        self.found: list[tuple[int, str]] = []

    def flag(self, node: ast.AST, what: str) -> None:
        self.found.append((node.lineno, what))

    # What gives a framework module: an import of one, sys.modules by its name, an adapter's load().
    def framework_module_from(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.Subscript) and _dotted(node.value) == "sys.modules":
            key = _constant(node.slice)
            return key if _top(key) in self.modules else None
        if not isinstance(node, ast.Call):
            return None
        called = _dotted(node.func)
        first = _constant(node.args[0]) if node.args else None
        if called in ("sys.modules.get", "importlib.import_module", "__import__"):
            return first if _top(first) in self.modules else None
        if isinstance(node.func, ast.Attribute) and node.func.attr == "load" and not node.args and not node.keywords:
            return f"{ast.unparse(node.func.value)}.load()"
        return None

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if _top(alias.name) in self.modules:
                self.flag(node, f"import {alias.name}")
                self.bound.add(alias.asname or alias.name.split(".")[0])

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level == 0 and _top(node.module) in self.modules:
            self.flag(node, f"from {node.module} import ...")
            self.bound |= {alias.asname or alias.name for alias in node.names}

    def visit_Assign(self, node: ast.Assign) -> None:
        if self.framework_module_from(node.value) is not None:
            self.bound |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        # "torch" in sys.modules
        if any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops) and any(
            _dotted(c) == "sys.modules" for c in node.comparators
        ) and _top(_constant(node.left)) in self.modules:
            self.flag(node, f"{node.left.value!r} in sys.modules")
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        found = self.framework_module_from(node)
        if found is not None:
            self.flag(node, f"sys.modules[{found!r}]")
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        # torch.Tensor, np.asarray(...), t.cuda.synchronize(): anything read off a framework module.
        if isinstance(node.value, ast.Name) and node.value.id in self.bound:
            self.flag(node, f"uses a framework: {ast.unparse(node)}")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        called = _dotted(node.func)
        found = self.framework_module_from(node)
        if found is not None and not found.endswith(".load()"):
            self.flag(node, f"{called}({found!r})")
        elif called == "importlib.import_module" and _constant(node.args[0] if node.args else None) is None:
            self.flag(node, "importlib.import_module of a name that is not a constant (a framework: Adapter.import_module)")
        if isinstance(node.func, ast.Name) and node.func.id in self.bound:
            self.flag(node, f"calls into a framework: {node.func.id}(...)")  # from torch import from_dlpack
        elif any(self.framework_module_from(n) is not None for n in _chain(node.func)[1:]):
            self.flag(node, f"calls into a framework: {ast.unparse(node.func)}(...)")  # adapter.load().cuda.x()
        elif isinstance(node.func, ast.Attribute) and node.func.attr in FRAMEWORK_METHODS:
            self.flag(node, f"calls a framework's method: .{node.func.attr}(...)")
        self.generic_visit(node)


def framework_uses(source: str, modules: set[str] | None = None) -> list[tuple[int, str]]:
    """``(line, what)`` of every import of a framework and every call into one in ``source``."""
    walk = _Walk(framework_modules() if modules is None else modules)
    tree = ast.parse(source)
    # Twice: the first walk binds every name (an import further down a module still binds the name
    # a function above it calls through), the second reports.
    walk.visit(tree)
    walk.found.clear()
    walk.visit(tree)
    return sorted(set(walk.found))


def uses_outside_the_adapters(module: str) -> list[tuple[int, str]]:
    source = (PACKAGE / module).read_text(encoding="utf-8")
    modules = framework_modules()
    if module in NUMPY_AS_A_TOOL:
        modules = modules - {"numpy"}
    return framework_uses(source, modules)


# -- the package --------------------------------------------------------------------------------------


CHECKED = [m for m in package_modules() if m not in PENDING_MODULES]


@pytest.mark.parametrize("module", CHECKED)
def test_no_framework_import_or_call_outside_the_adapters(module):
    found = uses_outside_the_adapters(module)
    assert not found, (
        f"{module} imports or calls into a framework {found}: move that into the framework's adapter "
        "(a method of Adapter in adapters/base.py with a generic default, overridden in adapters/<module>.py)"
    )


@pytest.mark.parametrize("module", CHECKED)
def test_no_framework_name_outside_the_adapters(module):
    found = framework_literals((PACKAGE / module).read_text(encoding="utf-8"), framework_words())
    assert not found, (
        f"{module} names frameworks in its code {found}: move that behaviour into the framework's adapter "
        "(an attribute or method of Adapter in adapters/base.py, set in adapters/<module>.py)"
    )


def test_the_pending_modules_still_need_their_exclusion():
    """PENDING_MODULES only shrinks: a module in it that passes both walks leaves it."""
    for module in sorted(PENDING_MODULES):
        assert (PACKAGE / module).exists(), f"{module} is gone: take it out of PENDING_MODULES"
        source = (PACKAGE / module).read_text(encoding="utf-8")
        assert uses_outside_the_adapters(module) or framework_literals(source, framework_words()), (
            f"{module} no longer imports, calls or names a framework: take it out of PENDING_MODULES"
        )


def test_numpy_as_a_tool_allows_numpy_alone_and_only_where_used():
    """The allowance covers NumPy, nothing else, and lapses with its use."""
    for module in NUMPY_AS_A_TOOL:
        source = (PACKAGE / module).read_text(encoding="utf-8")
        with_numpy = framework_uses(source)
        assert with_numpy, f"{module} no longer uses NumPy: take it out of NUMPY_AS_A_TOOL"
        assert not uses_outside_the_adapters(module)
        assert all("numpy" in what or "np." in what for _, what in with_numpy), with_numpy


def test_the_walk_covers_every_module_and_framework():
    """Not vacuous: the package's modules are found (subpackages included, adapters/ left out), and
    every framework's modules and words come from the adapters."""
    assert {"api.py", "paths.py", "devices.py", "magics.py"} <= set(package_modules())
    assert not [m for m in package_modules() if m.startswith("adapters")]
    assert {"torch", "jax", "jaxlib", "tensorflow", "keras", "numpy", "cupy", "numba", "paddle"} <= framework_modules()
    words = framework_words()
    assert {"torch", "pytorch", "tf", "tensorflow", "jax", "numpy", "cupy", "numba", "paddle", "paddlepaddle"} <= words


def test_no_adapter_method_is_called_a_framework_method():
    """A call of an adapter's method (``dst.from_numpy``, ``src.to_numpy``, ``adapter.synchronize``)
    is how the rest of the package reaches a framework: it must never read as a framework's own."""
    methods = {name for name, _ in inspect.getmembers(Adapter)}
    assert not FRAMEWORK_METHODS & methods


def test_the_import_walk_catches_each_way_into_a_framework():
    """The walk is not vacuous: each way of importing or calling a framework is found, the exchange
    protocols and gpushare's own adapters are not."""
    cases = {
        "import torch": 1,
        "import jax.numpy as jnp": 1,
        "from tensorflow.python.ops import gen_sync_ops": 1,
        "import numpy as np\ndef f(x):\n    return np.asarray(x)": 2,  # the import and the call
        "def f():\n    import cupy\n    return cupy.cuda.runtime.getDeviceCount()": 2,
        "import importlib\nm = importlib.import_module('paddle')": 1,
        "import importlib\ndef f(name):\n    return importlib.import_module(name)": 1,
        "m = __import__('numba')": 1,
        "import sys\nx = sys.modules['jaxlib']": 1,
        "import sys\nt = sys.modules.get('torch')\nt.cuda.synchronize()": 2,  # the lookup and the call
        "import sys\nok = 'tensorflow' in sys.modules": 1,
        "def f(adapter):\n    adapter.load().cuda.synchronize()": 1,
        "def f(adapter):\n    mod = adapter.load()\n    return mod.zeros(3)": 1,
        "def f(x):\n    return x.detach().cpu().numpy()": 3,
        "def f(x):\n    return jax.device_put(x)": 1,
        # Fine: protocols, gpushare's adapters, modules that are not frameworks, other loads.
        "def f(x):\n    return x.__cuda_array_interface__['data'][0], x.__dlpack__(), x.__dlpack_device__()": 0,
        "from gpushare.adapters import framework\ndef f(x):\n    return framework(x).to_numpy(x)": 0,
        "import sys\nip = sys.modules.get('IPython')\nip.get_ipython()": 0,
        "import json\ndef f(p):\n    d = json.load(p)\n    return d.get('a')": 0,
        "def f(src, dst, x):\n    return dst.from_numpy(src.to_numpy(x), True, 0)": 0,
    }
    for code, n in cases.items():
        assert len(framework_uses(code)) == n, (code, framework_uses(code))


def test_a_bad_module_fails_the_walk():
    """What the parametrised test does with a module that calls into torch and branches on JAX."""
    bad = (
        "import sys\n"
        "def to_host(x, target):\n"
        "    torch = sys.modules.get('torch')\n"
        "    if torch is not None and isinstance(x, torch.Tensor):\n"
        "        x = x.detach().cpu()\n"
        "    if target == 'jax':\n"
        "        return x.numpy()\n"
        "    return x\n"
    )
    uses = framework_uses(bad)
    assert [line for line, _ in uses] == [3, 4, 5, 5, 7], uses
    assert framework_literals(bad, framework_words()) == [(3, "torch"), (6, "jax")]


def test_the_check_catches_each_kind_of_branch():
    """The walk of names is not vacuous: each way of branching on a name is found, a docstring is not."""
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


def _bench_args() -> Path:
    """The CLI's argument checks: crates/runner/ since the workspace split, src/cli/ before it."""
    root = PACKAGE.parents[1]
    for candidate in ("crates/runner/src/cli/bench_args.rs", "src/cli/bench_args.rs"):
        if (root / candidate).exists():
            return root / candidate
    raise AssertionError("bench_args.rs not found under crates/runner/src/cli/ or src/cli/")


def test_the_cli_knows_the_adapters_names_and_aliases():
    """The CLI checks `gpushare bench SRC->DST` before it starts a kernel, from FRAMEWORKS, which
    crates/runner/build.rs generates from the adapters' registry and classes: no list is kept by hand
    (adding a framework touches its adapter alone), and the generated list of the newest
    build is the adapters' names and aliases."""
    import re

    rust = _bench_args().read_text(encoding="utf-8")
    block = rust[rust.index("pub const FRAMEWORKS"):]
    block = block[: block.index(";")]
    assert 'include!(concat!(env!("OUT_DIR"), "/frameworks.rs"))' in block, block
    root = PACKAGE.parents[1]
    generated = sorted(root.glob("target/*/build/gpushare-runner-*/out/frameworks.rs"), key=lambda p: p.stat().st_mtime)
    assert generated, "no build of the runner under target/: build it (cargo build -p gpushare-runner) first"
    text = generated[-1].read_text(encoding="utf-8")
    cli = {
        name: tuple(re.findall(r'"([^"]+)"', aliases))
        for name, aliases in re.findall(r'\("([^"]+)",\s*&\[([^\]]*)\]\)', text)
    }
    assert cli == {a.name: tuple(a.aliases) for a in ADAPTERS.values()}

# -- the binding (Rust) ------------------------------------------------------------------------------
#
# The binding (crates/python/src/) runs every share and calls back into the adapters: it must not
# choose a route or a check by a framework's name (how an array is described is
# declared by the adapter, ``Adapter.describe_by`` and ``Adapter.source_flags``, and implemented once
# in binding/declared.rs). Two checks of its string literals: no framework's name, and none of the
# attribute or method names the adapters declare (those reach the binding from the declaration,
# never typed into it).

BINDING = PACKAGE.parents[1] / "crates" / "python" / "src"


def rust_string_literals(source: str) -> list[tuple[int, str]]:
    """``(line, text)`` of each string literal in Rust ``source``, comments (doc comments included)
    and character literals skipped. Escapes are kept as written; raw strings are read too."""
    found, i, line, n = [], 0, 1, len(source)
    while i < n:
        c = source[i]
        if source.startswith("//", i):
            end = source.find("\n", i)
            i = n if end < 0 else end
        elif source.startswith("/*", i):
            end = source.find("*/", i + 2)
            end = n if end < 0 else end + 2
            line += source.count("\n", i, end)
            i = end
        elif c == "r" and re.match(r'r#*"', source[i:]) and (i == 0 or not (source[i - 1].isalnum() or source[i - 1] == "_")):
            hashes = re.match(r'r(#*)"', source[i:]).group(1)
            start = i + 2 + len(hashes)
            end = source.find('"' + hashes, start)
            end = n if end < 0 else end
            found.append((line, source[start:end]))
            line += source.count("\n", i, end)
            i = end + 1 + len(hashes)
        elif c == '"':
            j = i + 1
            while j < n and source[j] != '"':
                j += 2 if source[j] == "\\" else 1
            found.append((line, source[i + 1:j]))
            line += source.count("\n", i, j)
            i = j + 1
        elif c == "'":
            # A character literal ('"', '\'', 'x'), else a lifetime ('a, 'py, 'static).
            if source.startswith("\\", i + 1):
                i = source.find("'", i + 3) + 1
            elif i + 2 < n and source[i + 2] == "'":
                i += 3
            else:
                i += 1
        else:
            if c == "\n":
                line += 1
            i += 1
    return found


def declared_names() -> set[str]:
    """The attribute and method names adapters declare for the binding to read (their
    ``describe_by`` recipe, ``source_flags``), the recipe's generic defaults (``dtype``, ``shape``) aside."""
    from dataclasses import fields, is_dataclass

    names = set()
    for a in ADAPTERS.values():
        recipe = a.describe_by
        if is_dataclass(recipe):
            for f in fields(recipe):
                value = getattr(recipe, f.name)
                if isinstance(value, str) and value != f.default:
                    names |= set(value.split("."))
        names |= {flag.removesuffix("()") for flag in a.source_flags}
    return names


def rust_framework_choices(source: str) -> list[tuple[int, str]]:
    words, declared = framework_words(), declared_names()
    return [
        (line, text) for line, text in rust_string_literals(source)
        if text.lower() in words or text in declared
    ]


def binding_sources() -> list[Path]:
    return sorted(BINDING.rglob("*.rs"))


def test_the_binding_chooses_nothing_by_a_framework_name():
    assert binding_sources(), f"no Rust sources under {BINDING}"
    found = {
        str(p.relative_to(BINDING)): hits
        for p in binding_sources()
        if (hits := rust_framework_choices(p.read_text(encoding="utf-8")))
    }
    assert not found, (
        f"the binding names frameworks, or attributes an adapter declares, in its code {found}: declare the "
        "behaviour on the adapter (Adapter.describe_by, Adapter.source_flags, or a new declaration in "
        "adapters/base.py) and implement it generically in crates/python/src/binding/declared.rs"
    )


def test_the_rust_walk_catches_a_route_chosen_by_name():
    """Not vacuous: what the binding once did (a describer chosen by the adapter's name,
    torch's flags read by name) is caught; comments, doc comments, character literals and generic
    words are not."""
    assert declared_names() >= {"requires_grad", "is_conj", "is_neg", "unsafe_buffer_pointer", "_pjrt_layout"}
    bad = (
        'let describe = match name.as_str() {\n'
        '    "torch" => Describe::Torch,\n'
        '    "jax" => Describe::Jax,\n'
        '    _ => Describe::Adapter,\n'
        '};\n'
        'let clean = !obj.getattr(intern!(py, "requires_grad"))?.is_truthy()?;\n'
        'let p = obj.call_method0(intern!(py, r"unsafe_buffer_pointer"))?;\n'
    )
    assert rust_framework_choices(bad) == [
        (2, "torch"), (3, "jax"), (6, "requires_grad"), (7, "unsafe_buffer_pointer"),
    ]
    fine = (
        '/// PyTorch\'s route: "torch" tensors.\n'
        '// the "jax" route, once\n'
        "fn f<'py>(q: char) -> bool { q == '\"' || q == '\\'' }\n"
        'let d = if cpu { "cpu" } else { "cuda:0" }; let url = "https://x/torch";\n'
        '/* "numpy" */ let s = intern!(py, "shape");\n'
    )
    assert rust_framework_choices(fine) == []
    assert [t for _, t in rust_string_literals(fine)] == ["cpu", "cuda:0", "https://x/torch", "shape"]
