"""``ls``: the entries of one folder, folders first marked with ``/``, files with their size
(and line count, for text files up to ``COUNT_LINES_UP_TO``), then a count by kind.

The counts are there for small models, which miscount a listing: asked "How many .txt files
are here?" or "Count the lines of each .py file" the 1.5B called ``ls`` and made a number up;
a tool that states the number leaves it only to be copied."""

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


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    value = float(n)
    for unit in ("KB", "MB", "GB"):
        value /= 1024
        if value < 1024 or unit == "GB":
            break
    return f"{value:.1f} {unit}"


def _lines(dir_fd: int, name: str, size: int) -> str:
    """", N lines" for a text file small enough to count; "" otherwise."""
    if size > COUNT_LINES_UP_TO:
        return ""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
    except OSError:
        return ""
    with os.fdopen(fd, "rb") as f:
        data = f.read(COUNT_LINES_UP_TO + 1)
    if b"\0" in data[:8192]:
        return ""  # binary
    n = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
    return f", {n} line{'' if n == 1 else 's'}"


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
        lines; the last line counts the files by kind.

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
            for entry in entries[:max_entries]:
                if entry.is_symlink():
                    rows.append(f"{entry.name} -> {os.readlink(entry.name, dir_fd=fd)}")
                elif entry.is_dir(follow_symlinks=False):
                    rows.append(f"{entry.name}/")
                    folders += 1
                else:
                    size = entry.stat(follow_symlinks=False).st_size
                    rows.append(f"{entry.name}  ({_size(size)}{_lines(fd, entry.name, size)})")
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
