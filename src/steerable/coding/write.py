"""``write``: create or replace a whole file; parent folders are made as needed.

The new content goes to a temporary file beside the target and is renamed over it, so a crash
never leaves a half-written file; an existing file keeps its permission bits.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from steerable.coding._text import read_text, unified_diff
from steerable.coding._workspace import Workspace
from steerable.errors import ToolError
from steerable.tools import FunctionTool, ToolContext, tool

__all__ = ["atomic_write", "make_write_tool"]


def atomic_write(target: Path, content: str) -> None:
    mode = target.stat().st_mode & 0o7777 if target.exists() else None
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(content)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _old_text(target: Path, name: str) -> str:
    if target.is_dir():
        raise ToolError(f"{name} is a directory; write needs a file path")
    if not target.exists():
        return ""
    old = read_text(target)
    if old is None:
        raise ToolError(f"{name} is a binary file; write replaces text files only")
    return old


def make_write_tool(ws: Workspace) -> FunctionTool:
    def preview(arguments: Mapping[str, Any]) -> str:
        target = ws.resolve(str(arguments["path"]))
        name = ws.display(target)
        action = "overwrite" if target.exists() else "create"
        diff = unified_diff(_old_text(target, name), str(arguments["content"]), name)
        return f"[dry-run] write would {action} {name}; nothing was changed.\n{diff}"

    @tool(name="write", permission_subjects=ws.path_subjects, permission_key="path", preview=preview)
    def write(path: str, content: str, ctx: ToolContext) -> str:
        """Write a whole file in the workspace, creating it (and its folders) or replacing it.

        Args:
            path: File path, relative to the workspace root.
            content: The complete new content of the file.
        """
        ws.gate.check(ctx.turn_id)
        target = ws.resolve(path)
        name = ws.display(target)
        existed = target.exists()
        _old_text(target, name)
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(target, content)
        lines = content.count("\n") + (0 if content.endswith("\n") or not content else 1)
        verb = "Overwrote" if existed else "Created"
        size = len(content.encode("utf-8"))
        return (f"{verb} {name} ({lines} line{'' if lines == 1 else 's'}, "
                f"{size} byte{'' if size == 1 else 's'}).")

    return write
