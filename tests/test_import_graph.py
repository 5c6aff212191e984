"""No import cycles in ``steerable``: not at module level, not inside functions, not even in
``TYPE_CHECKING`` blocks (a cycle is a design bug: fix the boundary, don't hide the import).

The graph is read from the source (``ast``), so an import inside a function that a test never
runs counts too. ``from steerable import X`` is an edge to the module that defines ``X``
(the package's lazy ``_WHERE`` table); an import of a package is an edge to its ``__init__``.
A module's own package ``__init__`` re-exporting it is the normal shape of a package, not a
cycle, so the implicit import of parent packages is not an edge.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests._ast import parse

SRC = Path(__file__).resolve().parents[1] / "src"
ROOT = SRC / "steerable"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _lazy_names() -> dict[str, str]:
    tree = parse((ROOT / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) \
                and node.target.id == "_WHERE":
            assert node.value is not None
            where: dict[str, str] = ast.literal_eval(node.value)
            return where
    raise AssertionError("steerable/__init__.py has no _WHERE table")


def _resolve(name: str, package: str, level: int) -> str:
    if level == 0:
        return name
    base = package.split(".")
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, name] if name else base)


def import_graph() -> dict[str, set[str]]:
    """Module -> the ``steerable`` modules it imports, anywhere in its source."""
    paths = {_module_name(p): p for p in ROOT.rglob("*.py")}
    lazy = _lazy_names()
    graph: dict[str, set[str]] = {}
    for module, path in paths.items():
        is_package = path.name == "__init__.py"
        package = module if is_package else module.rpartition(".")[0]
        edges: set[str] = set()
        for node in ast.walk(parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                edges.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(node.module or "", package, node.level)
                for alias in node.names:
                    if base == "steerable" and alias.name in lazy:
                        edges.add(lazy[alias.name])
                    elif f"{base}.{alias.name}" in paths:
                        edges.add(f"{base}.{alias.name}")
                    else:
                        edges.add(base)
        graph[module] = {e for e in edges if e in paths and e != module}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
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


def test_the_graph_sees_imports_inside_functions_and_lazy_names() -> None:
    graph = import_graph()
    # observers import the event log writer inside a method (it costs the import time)
    assert "steerable.drivers._recorder" in graph["steerable.drivers._observers"]
    # the replay recorder takes AgentLoop from the package's lazy table
    assert "steerable.drivers._loop" in graph["steerable.replay._record"]


def test_cycles_are_found() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_of_steerable_imports_itself_back() -> None:
    found = cycles(import_graph())
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)
