"""``read``: a text file with line numbers, a window of it at a time.

Huge files are read line by line up to the window, never whole; binary files are refused with
a message saying so, since bytes shown as text only waste the model's context. The file is
opened beneath the workspace (``Workspace.beneath``), so a link swapped in meanwhile cannot
make it read something outside.
"""

from __future__ import annotations

import io
import os
from itertools import islice
from typing import BinaryIO

from steerable.coding._beneath import Located, open_regular
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

        def show(where: Located) -> str:
            name = ws.display(where.path)
            try:
                fh = open_regular(where)
            except IsADirectoryError:
                raise ToolError(f"{name} is a directory; use ls to list it") from None
            except FileNotFoundError:
                raise ToolError(f"{name} does not exist") from None
            with fh:
                size = os.fstat(fh.fileno()).st_size
                if is_binary(fh.read(8192)):
                    raise ToolError(f"{name} is a binary file ({size} bytes); read shows text only")
                fh.seek(0)
                return _window(fh, name, offset, limit, max_chars)

        try:
            return ws.beneath(path, show)
        except FileNotFoundError:
            raise ToolError(f"{ws.display(ws.resolve(path))} does not exist") from None

    return read


def _window(raw: BinaryIO, name: str, offset: int, limit: int, max_chars: int) -> str:
    out: list[str] = []
    used = 0
    last = offset - 1
    capped = False
    more = False
    fh = io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline="")
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
    fh.detach()  # the caller closes the file
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
