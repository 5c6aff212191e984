"""``read``: a text file with line numbers, a window of it at a time.

Huge files are read line by line up to the window, never whole; binary files are refused with
a message saying so, since bytes shown as text only waste the model's context.
"""

from __future__ import annotations

from itertools import islice
from pathlib import Path

from steerable.coding._text import is_binary
from steerable.coding._workspace import Workspace
from steerable.errors import ToolError
from steerable.tools import FunctionTool, tool

__all__ = ["make_read_tool"]

DEFAULT_LIMIT = 2000
MAX_LINE = 2000
MAX_CHARS = 60_000


def make_read_tool(ws: Workspace, *, max_chars: int = MAX_CHARS) -> FunctionTool:
    @tool(name="read", permission_subjects=ws.path_subjects, read_only=True, permission_key="path")
    def read(path: str, offset: int = 1, limit: int = DEFAULT_LIMIT) -> str:
        """Read a text file from the workspace; lines come numbered.

        Args:
            path: File path, relative to the workspace root.
            offset: First line to show (1-based).
            limit: How many lines to show at most.
        """
        if offset < 1 or limit < 1:
            raise ToolError("offset and limit must be at least 1")
        target = ws.resolve(path)
        name = ws.display(target)
        if target.is_dir():
            raise ToolError(f"{name} is a directory; use ls to list it")
        if not target.exists():
            raise ToolError(f"{name} does not exist")
        size = target.stat().st_size
        with target.open("rb") as fh:
            if is_binary(fh.read(8192)):
                raise ToolError(f"{name} is a binary file ({size} bytes); read shows text only")
        return _window(target, name, offset, limit, max_chars)

    return read


def _window(target: Path, name: str, offset: int, limit: int, max_chars: int) -> str:
    out: list[str] = []
    used = 0
    last = offset - 1
    capped = False
    more = False
    with target.open("r", encoding="utf-8", errors="replace", newline="") as fh:
        lines = islice(fh, offset - 1, None)
        for number, line in enumerate(lines, start=offset):
            if number >= offset + limit:
                more = True
                break
            text = line.rstrip("\r\n")
            if len(text) > MAX_LINE:
                text = text[:MAX_LINE] + f" [... line cut at {MAX_LINE} characters]"
            row = f"{number:>6}\t{text}"
            if used + len(row) + 1 > max_chars and out:
                capped = more = True
                break
            out.append(row)
            used += len(row) + 1
            last = number
    if not out:
        if offset == 1:
            return f"{name} is empty."
        raise ToolError(f"{name} has fewer than {offset} lines")
    body = "\n".join(out)
    if capped:
        body += (f"\n[output capped at {max_chars} characters; shown lines {offset}-{last}; "
                 f"continue with offset={last + 1}]")
    elif more:
        body += f"\n[more lines follow; continue with offset={last + 1}]"
    return body
