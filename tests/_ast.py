"""``ast.parse`` for tests that read the project's source while other threads may run.

On CPython 3.11 before 3.11.8 (CI's Python is 3.11.7) every conversion of a parsed tree into
Python objects shares one recursion counter, and a conversion the garbage collector interrupts
(a finalizer may hand the GIL to another thread) lets a second one in: both then fail with
"AST constructor recursion depth mismatch" (gh-106905). With the collector off while this one
converts, it cannot be interrupted, so it never leaves the counter off for another, and another
that it interrupts finds the counter as it left it.
"""

from __future__ import annotations

import ast
import gc

__all__ = ["parse"]


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return ast.parse(source, filename=filename)
    finally:
        if was_enabled:
            gc.enable()
