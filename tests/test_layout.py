"""The size rules of the house (STYLE.md): every module under 600 lines, every function under 60.

A long function is the sign of a missing seam, a long module of a second concept; both are
found here, by name, rather than in review.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._ast import parse

SRC = Path(__file__).resolve().parent.parent / "src"
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 60


def oversized(root: Path) -> Iterator[str]:
    """Each module and function under ``root`` that breaks a size rule, as ``path:line: why``.

    A function's length runs from its ``def`` line to its last line (the docstring counts; the
    decorators do not); nested functions count within their enclosing function and alone.
    """
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        name = path.relative_to(root)
        lines = len(text.splitlines())
        if lines > MAX_MODULE_LINES:
            yield f"{name}: module of {lines} lines (at most {MAX_MODULE_LINES})"
        for node in ast.walk(parse(text, filename=str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                assert node.end_lineno is not None
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    yield (f"{name}:{node.lineno}: function {node.name} of {length} lines "
                           f"(at most {MAX_FUNCTION_LINES})")


def test_modules_and_functions_keep_to_their_sizes() -> None:
    offenders = list(oversized(SRC))
    assert not offenders, "split these along a seam:\n" + "\n".join(offenders)


@pytest.mark.parametrize(("body", "expected"), [
    ("x = 1\n" * MAX_MODULE_LINES, []),
    ("x = 1\n" * (MAX_MODULE_LINES + 1), ["big.py: module of 601 lines (at most 600)"]),
    ("def f():\n" + "    x = 1\n" * (MAX_FUNCTION_LINES - 1), []),
    ("async def g():\n" + "    x = 1\n" * MAX_FUNCTION_LINES,
     ["big.py:1: function g of 61 lines (at most 60)"]),
    ("class C:\n    @property\n    def h(self):\n" + "        x = 1\n" * MAX_FUNCTION_LINES,
     ["big.py:3: function h of 61 lines (at most 60)"]),
])
def test_the_check_names_each_offender(tmp_path: Path, body: str, expected: list[str]) -> None:
    (tmp_path / "big.py").write_text(body, encoding="utf-8")
    assert list(oversized(tmp_path)) == expected
