"""The package's layering: every module imports, no import circle (module-level or inside functions), and no
import runs upward through the layers docs/development.md describes."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import pytest

import userdp

SRC = Path(userdp.__file__).resolve().parent

# bottom to top; a module may import from its own layer or below
LAYERS = [
    {"errors", "noise", "privacy"},
    {"data", "text", "metrics", "datasets"},
    {"engines"},
    {"dem", "distinct", "heatmaps", "vocabulary"},
    {"releases", "audit", "plan"},
    {"cli", "report"},
]
RANK = {name: i for i, layer in enumerate(LAYERS) for name in layer}


def _modules() -> dict[str, Path]:
    out = {"userdp": SRC / "__init__.py"}
    for info in pkgutil.walk_packages([str(SRC)], prefix="userdp."):
        rel = info.name.split(".")[1:]
        path = SRC.joinpath(*rel)
        out[info.name] = path / "__init__.py" if info.ispkg else path.with_suffix(".py")
    return out


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """The userdp modules ``name`` imports anywhere in its file (a package's submodule when that is what a
    ``from package import x`` names)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("userdp")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if not mod.startswith("userdp"):
                continue
            subs = {f"{mod}.{a.name}" for a in node.names if f"{mod}.{a.name}" in MODULES}
            found |= subs or {mod}
            if subs and len(subs) < len(node.names):
                found.add(mod)
    return {m for m in found if m in MODULES and m != name}


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_every_module_imports(name):
    if name.startswith("userdp.engines.spark"):
        pytest.importorskip("pyspark")
    importlib.import_module(name)


def _layer(name: str) -> int | None:
    parts = name.split(".")
    return RANK.get(parts[1]) if len(parts) > 1 else None


def test_no_import_circles():
    """Tarjan's strongly connected components of the import graph: every one is a single module."""
    index, low, stack, on, circles, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(sorted(comp))

    for v in GRAPH:
        if v not in index:
            visit(v)
    assert circles == []


def test_no_import_runs_upward():
    assert set(RANK) == {n.split(".")[1] for n in MODULES if n.count(".") >= 1}, "a top-level module has no layer"
    upward = [
        (a, b)
        for a, targets in GRAPH.items()
        for b in targets
        if _layer(a) is not None and _layer(b) is not None and _layer(b) > _layer(a)
    ]
    assert upward == []


def test_the_check_can_fail():
    """The circle check finds a circle that is there (a graph with one added edge back down)."""
    saved = GRAPH["userdp.errors"]
    GRAPH["userdp.errors"] = saved | {"userdp.noise"}
    try:
        if "userdp.errors" in GRAPH["userdp.noise"]:
            with pytest.raises(AssertionError):
                test_no_import_circles()
        with pytest.raises(AssertionError):
            GRAPH["userdp.errors"] = saved | {"userdp.cli.main"}
            test_no_import_runs_upward()
    finally:
        GRAPH["userdp.errors"] = saved
