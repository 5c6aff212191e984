"""``ls``: the entries of one folder, folders first marked with ``/``, files with their size."""

from __future__ import annotations

import os

from steerable.coding._workspace import Workspace
from steerable.errors import ToolError
from steerable.tools import FunctionTool, ToolContext, tool

__all__ = ["make_ls_tool"]

MAX_ENTRIES = 1000


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    value = float(n)
    for unit in ("KB", "MB", "GB"):
        value /= 1024
        if value < 1024 or unit == "GB":
            break
    return f"{value:.1f} {unit}"


def make_ls_tool(ws: Workspace, *, max_entries: int = MAX_ENTRIES) -> FunctionTool:
    @tool(name="ls", permission_subjects=ws.path_subjects, read_only=True, permission_key="path",
          permission_family="read")
    def ls(ctx: ToolContext, path: str = ".") -> str:
        """List a folder of the workspace: subfolders end with '/', files show their size.

        Args:
            path: Folder path, relative to the workspace root.
        """
        target = ws.resolve(path)
        name = ws.display(target)
        if not target.exists():
            raise ToolError(f"{name} does not exist")
        if not target.is_dir():
            raise ToolError(f"{name} is a file, not a folder; use read to see it")
        with os.scandir(target) as it:
            entries = sorted(
                (e for e in it if not ctx.refuses(ws.display(target / e.name))),
                key=lambda e: (not e.is_dir(follow_symlinks=False), e.name))
        if not entries:
            return f"{name} is empty."
        rows = []
        for entry in entries[:max_entries]:
            if entry.is_symlink():
                rows.append(f"{entry.name} -> {os.readlink(entry.path)}")
            elif entry.is_dir():
                rows.append(f"{entry.name}/")
            else:
                rows.append(f"{entry.name}  ({_size(entry.stat().st_size)})")
        if len(entries) > max_entries:
            rows.append(f"[... {len(entries) - max_entries} more entries not shown]")
        return "\n".join(rows)

    return ls
