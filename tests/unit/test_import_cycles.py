"""The package's import graph has no cycles, between modules or between folders: each layer imports only those
below it (docs/architecture.md), and inside backends/ session/ -> readiness/ -> os/."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _modules() -> dict[str, Path]:
    found = {}
    for path in (ROOT / "ptyd").rglob("*.py"):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


@functools.cache
def _imports(path: Path) -> list[ast.Import | ast.ImportFrom]:
    """The module's import statements, at any depth (lazy ones, ``TYPE_CHECKING`` ones), parsed once."""
    return [node for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Import | ast.ImportFrom)]


def _graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Every import of a ptyd module, at run time or only for the type checker, lazy ones included."""
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in _imports(path):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                continue
            graph[name].update(t for t in targets if t in modules and t != name)
    return graph


def _folder_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Which folder imports which: a module stands for its folder (its package), save the modules at the root of
    ptyd/, which stand for themselves. The root holds what every layer stands on (protocol, errors, config) beside
    the entry point that composes the layers (cli), so taken as one folder it would tie every layer to itself.
    ``from a.b import c`` is an import of the module ``a.b.c`` where there is one, else of ``a.b``."""

    def node(name: str) -> str:
        if modules[name].name == "__init__.py" or name.count(".") == 1:
            return name
        return name.rpartition(".")[0]

    graph: dict[str, set[str]] = {node(name): set() for name in modules}
    for name, path in modules.items():
        for stmt in _imports(path):
            if isinstance(stmt, ast.ImportFrom) and stmt.module and stmt.level == 0:
                module = stmt.module
                targets = [f"{module}.{a.name}" if f"{module}.{a.name}" in modules else module for a in stmt.names]
            elif isinstance(stmt, ast.Import):
                targets = [alias.name for alias in stmt.names]
            else:
                continue
            graph[node(name)].update(node(t) for t in targets if t in modules and node(t) != node(name))
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles_in_ptyd() -> None:
    assert _cycles(_graph(_modules())) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycles_between_folders_of_ptyd() -> None:
    assert _cycles(_folder_graph(_modules())) == []


def test_the_backends_layers_import_one_way() -> None:
    """session/ -> readiness/ -> os/, never back: a folder imports nothing of a layer above its own."""
    graph = _folder_graph(_modules())
    layers = ["ptyd.backends.session", "ptyd.backends.readiness", "ptyd.backends.os"]

    def layer(folder: str) -> int | None:
        return next((i for i, top in enumerate(layers) if folder == top or folder.startswith(top + ".")), None)

    upward = []
    for folder, targets in graph.items():
        for target in targets:
            here, there = layer(folder), layer(target)
            if here is not None and there is not None and there < here:
                upward.append((folder, target))
    assert upward == []
    assert "ptyd.backends.readiness" in graph["ptyd.backends.session"]
    assert "ptyd.backends.os" in graph["ptyd.backends.readiness"]
