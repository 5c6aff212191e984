"""The check behind ``test_turn_state_owners``: who writes which part of a turn's state.

``TurnState`` keeps its identity fields (set by its constructor only) and the fields of seven
parts (``transcript``, ``control``, ``inbound``, ``tree``, ``durability``, ``ledger``, ``asks``:
views of the state itself, each typed as its part); ``OWNERS`` in
``_core/_turn_state.py`` names the modules that may write each part's fields. This module reads
a source file's syntax tree and lists every write to a part's field (or to an identity field,
or a part replaced) made from a module that does not own it.

A write is an assignment, an augmented assignment, a ``del``, an item store (``x.f[k] = v``)
or a call of a mutating method (``x.f.append(...)``), to ``<expr>.<part>.<field>`` or to
``<alias>.<field>`` where the alias was bound from ``<expr>.<part>`` (``ctl = st.control``,
``tr, ctl = st.transcript, st.control``, ``(ctl := st.control)``) or declared with the part's
type (``def f(ctl: Control)``). Identity fields are checked on names declared or made as a
``TurnState`` (``st: TurnState``, ``st = TurnState(...)``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests._ast import parse

SRC = Path(__file__).resolve().parent.parent / "src" / "steerable"
STATE_MODULE = "_core._turn_state"

MUTATORS = frozenset({
    "append", "extend", "insert", "remove", "pop", "clear", "update", "add", "discard",
    "setdefault", "popitem", "sort", "reverse", "appendleft", "extendleft", "popleft",
})


@dataclass(frozen=True)
class Layout:
    """The parts of ``TurnState`` as its source declares them."""

    parts: dict[str, str]  # attribute on TurnState -> class name
    fields: dict[str, frozenset[str]]  # class name -> its fields
    identity: frozenset[str]  # TurnState's own fields that are not parts


@dataclass(frozen=True)
class Write:
    module: str
    line: int
    target: str  # "control.phase", "identity.turn_id", "part control"
    how: str

    def __str__(self) -> str:
        return f"steerable.{self.module}:{self.line}: {self.how} {self.target}"


def _dataclass_fields(cls: ast.ClassDef) -> dict[str, str]:
    out: dict[str, str] = {}
    for node in cls.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out[node.target.id] = ast.unparse(node.annotation)
    return out


def read_layout(source: str | None = None) -> Layout:
    """The parts are ``TurnState``'s names made as ``_Part[<one of its base classes>]()`` (each
    is the state itself, typed as that part); its own annotated fields are its identity."""
    tree = parse(source if source is not None else (SRC / "_core/_turn_state.py").read_text())
    nodes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    state = nodes["TurnState"]
    bases = {ast.unparse(b) for b in state.bases}
    parts = {}
    for node in state.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Subscript)
                and ast.unparse(node.value.func.value) == "_Part"
                and ast.unparse(node.value.func.slice) in bases):
            parts[node.targets[0].id] = ast.unparse(node.value.func.slice)
    return Layout(
        parts=parts,
        fields={cls: frozenset(_dataclass_fields(nodes[cls])) for cls in parts.values()},
        identity=frozenset(_dataclass_fields(state)),
    )


def module_name(path: Path) -> str:
    rel = path.relative_to(SRC).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def owns(module: str, owners: tuple[str, ...]) -> bool:
    return any(module == o or module.startswith(o + ".") for o in owners)


class _Scope:
    def __init__(self) -> None:
        self.aliases: dict[str, str] = {}  # local name -> part attribute
        self.states: set[str] = set()  # local names that are a TurnState


class _Finder(ast.NodeVisitor):
    def __init__(self, layout: Layout, module: str, owners: dict[str, tuple[str, ...]]) -> None:
        self.layout = layout
        self.module = module
        self.owners = owners
        self.by_class = {cls: part for part, cls in layout.parts.items()}
        self.scopes = [_Scope()]
        self.found: list[Write] = []

    # -- scopes and what names stand for ------------------------------------------------------

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._function(node)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._function(node)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._function(node)

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        scope = _Scope()
        outer = self.scopes[-1]
        scope.aliases.update(outer.aliases)  # closures see the enclosing bindings
        scope.states.update(outer.states)
        args = node.args
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
            if arg is None or arg.annotation is None:
                continue
            ann = ast.unparse(arg.annotation).strip("'\"")
            if ann in self.by_class:
                scope.aliases[arg.arg] = self.by_class[ann]
            elif ann in ("TurnState", "TurnState | None"):
                scope.states.add(arg.arg)
        self.scopes.append(scope)
        self.generic_visit(node)
        self.scopes.pop()

    def _part_of(self, expr: ast.expr) -> str | None:
        """The part ``expr`` evaluates to (``<x>.control``, an alias of one), or None."""
        if isinstance(expr, ast.Attribute) and expr.attr in self.layout.parts:
            return expr.attr
        if isinstance(expr, ast.Name):
            return self.scopes[-1].aliases.get(expr.id)
        return None

    def _bind(self, target: ast.expr, value: ast.expr | None) -> None:
        scope = self.scopes[-1]
        if isinstance(target, ast.Tuple | ast.List):
            values = value.elts if isinstance(value, ast.Tuple | ast.List) else [None] * len(target.elts)
            for t, v in zip(target.elts, values, strict=False):
                self._bind(t, v)
            return
        if not isinstance(target, ast.Name):
            return
        part = None if value is None else self._part_of(value)
        if part is not None:
            scope.aliases[target.id] = part
        else:
            scope.aliases.pop(target.id, None)
        if isinstance(value, ast.Call) and ast.unparse(value.func) == "TurnState":
            scope.states.add(target.id)

    # -- writes ---------------------------------------------------------------------------------

    def _report(self, node: ast.AST, target: str, how: str, owners: tuple[str, ...]) -> None:
        if self.module != STATE_MODULE and not owns(self.module, owners):
            self.found.append(Write(self.module, getattr(node, "lineno", 0), target, how))

    def _written(self, target: ast.expr, how: str) -> None:
        if isinstance(target, ast.Tuple | ast.List):
            for t in target.elts:
                self._written(t, how)
            return
        if isinstance(target, ast.Starred):
            self._written(target.value, how)
            return
        if isinstance(target, ast.Subscript):
            self._written(target.value, "item store into")
            return
        if not isinstance(target, ast.Attribute):
            return
        part = self._part_of(target.value)
        if part is not None:
            cls = self.layout.parts[part]
            if target.attr in self.layout.fields[cls]:
                self._report(target, f"{part}.{target.attr}", how, self.owners.get(part, ()))
            return
        if target.attr in self.layout.parts:
            self._report(target, f"part {target.attr}", how, ())
            return
        if not (isinstance(target.value, ast.Name) and target.value.id in self.scopes[-1].states):
            return
        if target.attr in self.layout.identity:
            self._report(target, f"identity.{target.attr}", how, ())
            return
        # The state holds every part's fields itself: ``st.phase = ...`` writes the part too.
        for part, cls in self.layout.parts.items():
            if target.attr in self.layout.fields[cls]:
                self._report(target, f"{part}.{target.attr}", how, self.owners.get(part, ()))

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._written(target, "assignment to")
            self._bind(target, node.value)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._written(node.target, "assignment to")
        if isinstance(node.target, ast.Name):
            ann = ast.unparse(node.annotation).strip("'\"")
            if ann in self.by_class:
                self.scopes[-1].aliases[node.target.id] = self.by_class[ann]
            else:
                self._bind(node.target, node.value)
        self.generic_visit(node)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self._bind(node.target, node.value)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._written(node.target, "augmented assignment to")
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            self._written(target, "del of")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in MUTATORS:
            self._written(func.value, f"{func.attr}() on")
        self.generic_visit(node)


def writes_outside_owners(source: str, module: str, owners: dict[str, tuple[str, ...]],
                          layout: Layout) -> list[Write]:
    finder = _Finder(layout, module, owners)
    finder.visit(parse(source))
    return finder.found


def all_modules() -> Iterator[tuple[str, str]]:
    for path in sorted(SRC.rglob("*.py")):
        yield module_name(path), path.read_text()
