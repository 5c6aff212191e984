"""Every test that parses source does it through ``tests._ast.parse`` (see there: on CI's
Python two conversions at once fail, gh-106905)."""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
_DIRECT = re.compile(r"\bast\.parse\(|PyCF_ONLY_AST")


def test_no_test_parses_source_directly() -> None:
    direct = [f"{path.relative_to(TESTS)}:{n}"
              for path in TESTS.rglob("*.py") if path.name not in ("_ast.py", "test_ast_use.py")
              for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
              if _DIRECT.search(line)]
    assert direct == [], f"parse through tests._ast.parse: {direct}"
