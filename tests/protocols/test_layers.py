"""The protocol front ends sit beside the CLI and the server: they import downward only, and
nothing below them (nor the server) imports them; only the CLI launches them."""

from __future__ import annotations

import ast
from pathlib import Path

from tests._ast import parse

SRC = Path(__file__).resolve().parents[2] / "src" / "steerable"


def imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_protocols_import_downward_and_only_the_cli_imports_them() -> None:
    modules = list(SRC.rglob("*.py"))
    assert any("protocols" in p.parts for p in modules)
    for path in modules:
        names = imported(path)
        part = path.relative_to(SRC).parts[0]
        if part == "protocols":
            upward = {n for n in names if n.startswith(("steerable.cli", "steerable.server"))}
            assert not upward, f"{path} imports {upward}"
        elif part != "cli":
            inward = {n for n in names if n.startswith("steerable.protocols")}
            assert not inward, f"{path} imports {inward}"
