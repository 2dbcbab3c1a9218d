"""The type stubs of gpushare._native (python/gpushare/_native/, one file per submodule) match the
compiled module: the same submodules, the same public names in each, and the same parameter names
and defaults-ness for every callable."""

from __future__ import annotations

import ast
import inspect
import types
from pathlib import Path

import pytest

import gpushare
from gpushare import _native

STUBS = Path(gpushare.__file__).with_name("_native")
SUBMODULES = sorted(n for n, v in vars(_native).items() if isinstance(v, types.ModuleType))


def _module(sub: str):
    return _native if sub == "" else getattr(_native, sub)


def _stub_file(sub: str) -> Path:
    return STUBS / ("__init__.pyi" if sub == "" else f"{sub}.pyi")
KEPT_DUNDERS = {"__init__", "__dlpack__", "__dlpack_device__", "__len__", "__getitem__", "__contains__", "__iter__", "__call__", "__enter__", "__exit__"}


def _params(fn: ast.FunctionDef) -> list[str]:
    a = fn.args
    names = [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    if a.vararg:
        names.append("*" + a.vararg.arg)
    if a.kwarg:  # the runtime signature names **kwargs by its bare name
        names.append(a.kwarg.arg)
    return [n for n in names if n != "self"]


def _stub(sub: str) -> tuple[dict[str, ast.FunctionDef], dict[str, dict[str, ast.FunctionDef]], set[str]]:
    tree = ast.parse(_stub_file(sub).read_text())
    functions, classes, names = {}, {}, set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            functions[node.name] = node
        elif isinstance(node, ast.ClassDef):
            classes[node.name] = {n.name: n for n in node.body if isinstance(n, ast.FunctionDef)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return functions, classes, names


def _runtime_params(obj) -> list[str] | None:
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return None
    out = []
    for p in sig.parameters.values():
        if p.name == "self":
            continue
        out.append("*" + p.name if p.kind is p.VAR_POSITIONAL else p.name)
    # A slot wrapper (``__call__`` of a native class) does not say its parameters.
    return None if out == ["*args", "kwargs"] else out


def test_the_submodules_are_the_stubs_files_and_importable_by_name():
    assert SUBMODULES == ["advice", "cuda", "errors", "lab", "paths", "processes", "share", "text"]
    assert {p.stem for p in STUBS.glob("*.pyi")} == {"__init__", *SUBMODULES}
    for sub in SUBMODULES:
        module = __import__(f"gpushare._native.{sub}", fromlist=["_"])
        assert module is getattr(_native, sub) and module.__name__ == f"gpushare._native.{sub}"


@pytest.mark.parametrize("sub", ["", *SUBMODULES])
def test_every_public_name_is_stubbed_and_exists(sub):
    functions, classes, names = _stub(sub)
    module = _module(sub)
    runtime = {n for n, v in vars(module).items() if (not n.startswith("__") or n == "__version__") and not isinstance(v, types.ModuleType)}
    assert runtime == set(functions) | set(classes) | names


@pytest.mark.parametrize("sub", ["", *SUBMODULES])
def test_function_signatures_match(sub):
    functions, _, _ = _stub(sub)
    for name, node in functions.items():
        params = _runtime_params(getattr(_module(sub), name))
        if params is not None:
            assert params == _params(node), name


@pytest.mark.parametrize("sub", ["", *SUBMODULES])
def test_class_members_match(sub):
    _, classes, _ = _stub(sub)
    for cls_name, members in classes.items():
        cls = getattr(_module(sub), cls_name)
        if issubclass(cls, BaseException):
            continue
        runtime = {m for m in vars(cls) if not m.startswith("__") or m in KEPT_DUNDERS} - {"__init__"}
        stubbed = set(members) - {"__init__"}
        assert runtime == stubbed, cls_name
        for m, node in members.items():
            target = cls if m == "__init__" else getattr(cls, m)
            if isinstance(inspect.getattr_static(cls, m, None), (property,)) or m == "__init__" and "__init__" not in vars(cls):
                continue
            params = _runtime_params(target)
            if params is not None and not any(isinstance(d, ast.Name) and d.id == "property" for d in node.decorator_list):
                assert params == _params(node), f"{cls_name}.{m}"
