"""``ls``: the entries of one folder, folders first marked with ``/``, files with their size
(and line count, for text files up to ``COUNT_LINES_UP_TO``), then a count by kind.

The counts are there for small models, which miscount a listing: asked "How many .txt files
are here?" or "Count the lines of each .py file" the 1.5B called ``ls`` and made a number up;
a tool that states the number leaves it only to be copied.

Small text files are shown with their text, under their row, while the folder's listing stays
short (``INLINE_FILE_BYTES`` a file, ``INLINE_TOTAL`` in all): a listing is often the 1.5B's
first look, and it answered from the names alone ("port?" with server.py listed: "the port
number is not specified"; "when is the team sync" with notes.txt listed: "I do not know")."""

from __future__ import annotations

import os
from pathlib import Path

from steerable.coding._beneath import Located, open_dir
from steerable.coding._missing import missing
from steerable.coding._workspace import Workspace
from steerable.errors import ToolError
from steerable.tools import FunctionTool, ToolContext, tool

__all__ = ["make_ls_tool"]

MAX_ENTRIES = 1000
COUNT_LINES_UP_TO = 256 * 1024
INLINE_FILE_BYTES = 400
"""The largest file whose text a listing shows under its row."""
INLINE_TOTAL = 1600
"""The most bytes of file text one listing shows."""


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    value = float(n)
    for unit in ("KB", "MB", "GB"):
        value /= 1024
        if value < 1024 or unit == "GB":
            break
    return f"{value:.1f} {unit}"


def _text(dir_fd: int, name: str, size: int) -> bytes | None:
    """The bytes of a text file small enough to count its lines; None otherwise."""
    if size > COUNT_LINES_UP_TO:
        return None
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        data = f.read(COUNT_LINES_UP_TO + 1)
    return None if b"\0" in data[:8192] else data


def _lines(data: bytes | None) -> str:
    """", N lines" for a text file's bytes; "" for none."""
    if data is None:
        return ""
    n = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
    return f", {n} line{'' if n == 1 else 's'}"


def _inline(data: bytes | None, budget: int) -> list[str]:
    """The rows showing a small text file's text under its row (none when it is not text,
    is empty, or does not fit ``budget`` characters)."""
    if not data or len(data) > min(INLINE_FILE_BYTES, budget):
        return []
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return []
    return [f"    | {line}" for line in text.splitlines()]


def _summary(files: list[str], folders: int) -> str:
    kinds: dict[str, int] = {}
    for name in files:
        ext = os.path.splitext(name)[1] or "(no extension)"
        kinds[ext] = kinds.get(ext, 0) + 1
    by_kind = ", ".join(f"{n} {ext}" for ext, n in sorted(kinds.items(), key=lambda kv: -kv[1]))
    counts = f"{len(files)} file{'' if len(files) == 1 else 's'}"
    if files:
        counts += f" ({by_kind})"
    return f"{counts}, {folders} folder{'' if folders == 1 else 's'}"


def make_ls_tool(ws: Workspace, *, max_entries: int = MAX_ENTRIES) -> FunctionTool:
    @tool(name="ls", permission_subjects=ws.path_subjects, read_only=True, permission_key="path",
          permission_family="read")
    def ls(ctx: ToolContext, path: str = ".") -> str:
        """List a folder of the workspace: subfolders end with '/', files show their size and
        lines (small text files their text too); the last line counts the files by kind.

        Args:
            path: Folder path, relative to the workspace root.
        """
        def listing(where: Located) -> str:
            name = ws.display(where.path)
            try:
                fd = open_dir(where)
            except FileNotFoundError:
                raise missing(ws, path, ctx.refuses) from None
            except NotADirectoryError:
                raise ToolError(f"{name} is a file, not a folder; use read to see it") from None
            try:
                return _rows(fd, where.path)
            finally:
                os.close(fd)

        def _rows(fd: int, folder: Path) -> str:
            with os.scandir(fd) as it:
                entries = sorted(
                    (e for e in it if not ctx.refuses(ws.display(folder / e.name))),
                    key=lambda e: (not e.is_dir(follow_symlinks=False), e.name))
            if not entries:
                return f"{ws.display(folder)} is empty."
            rows, files, folders = [], [], 0
            budget = INLINE_TOTAL
            for entry in entries[:max_entries]:
                if entry.is_symlink():
                    rows.append(f"{entry.name} -> {os.readlink(entry.name, dir_fd=fd)}")
                elif entry.is_dir(follow_symlinks=False):
                    rows.append(f"{entry.name}/")
                    folders += 1
                else:
                    size = entry.stat(follow_symlinks=False).st_size
                    data = _text(fd, entry.name, size)
                    rows.append(f"{entry.name}  ({_size(size)}{_lines(data)})")
                    shown = _inline(data, budget)
                    rows += shown
                    budget -= len(data or b"") if shown else 0
                    files.append(entry.name)
            if len(entries) > max_entries:
                rows.append(f"[... {len(entries) - max_entries} more entries not shown]")
            else:
                rows.append(_summary(files, folders))
            return "\n".join(rows)

        try:
            return ws.beneath(path, listing)
        except FileNotFoundError:
            raise missing(ws, path, ctx.refuses) from None

    return ls
