"""``write``: create or replace a whole file; parent folders are made as needed.

The new content goes to a temporary file beside the target and is renamed over it, so a crash
never leaves a half-written file; an existing file keeps its permission bits. Folders are made,
the file is created and renamed, all relative to folders opened beneath the workspace
(``Workspace.beneath``): a link swapped in meanwhile cannot redirect the write outside.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Mapping
from typing import Any

from steerable.coding._beneath import Located, entry_stat, open_regular
from steerable.coding._text import MAX_SHOWN_DIFF, cap_text, decode_text, unified_diff
from steerable.coding._workspace import Workspace
from steerable.errors import ToolError
from steerable.tools import FunctionTool, ToolContext, tool

__all__ = ["atomic_write", "current_text", "make_write_tool"]


def atomic_write(where: Located, content: str) -> None:
    """Replace ``where.name`` in its folder with ``content`` (a new file, then a rename)."""
    try:
        info = entry_stat(where)
        mode: int | None = stat.S_IMODE(info.st_mode) if stat.S_ISREG(info.st_mode) else None
    except FileNotFoundError:
        mode = None
    tmp = f".{where.name}.{secrets.token_hex(6)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                 | getattr(os, "O_CLOEXEC", 0), 0o666, dir_fd=where.dir_fd)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(content)
            if mode is not None:
                os.fchmod(fh.fileno(), mode)
        # rename replaces a link at the name itself; it never writes through one.
        os.replace(tmp, where.name, src_dir_fd=where.dir_fd, dst_dir_fd=where.dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=where.dir_fd)
        raise


def current_text(where: Located, name: str) -> str | None:
    """The text the file holds now, None when there is none; refuses folders and binaries."""
    if not where.name:
        raise ToolError(f"{name} is a directory")
    try:
        fh = open_regular(where)
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise ToolError(f"{name} is a directory") from None
    with fh:
        text = decode_text(fh.read())
    if text is None:
        raise ToolError(f"{name} is a binary file; write and edit change text files only")
    return text


def make_write_tool(ws: Workspace) -> FunctionTool:
    def preview(arguments: Mapping[str, Any]) -> str:
        def diff(where: Located) -> str:
            name = ws.display(where.path)
            old = current_text(where, name)
            action = "create" if old is None else "overwrite"
            body = unified_diff(old or "", str(arguments["content"]), name)
            return f"[dry-run] write would {action} {name}; nothing was changed.\n{body}"

        try:
            return ws.beneath(str(arguments["path"]), diff)
        except FileNotFoundError:  # a folder on the way does not exist yet
            name = ws.display(ws.resolve(str(arguments["path"])))
            body = unified_diff("", str(arguments["content"]), name)
            return f"[dry-run] write would create {name}; nothing was changed.\n{body}"

    @tool(name="write", permission_subjects=ws.path_subjects, permission_key="path", preview=preview)
    def write(path: str, content: str, ctx: ToolContext) -> str:
        """Write a whole file in the workspace, creating it (and its folders) or replacing it.

        Args:
            path: File path, relative to the workspace root.
            content: The complete new content of the file.
        """
        ws.gate.check(ctx.turn_id)

        def replace(where: Located) -> tuple[str, str | None]:
            name = ws.display(where.path)
            before = current_text(where, name)
            atomic_write(where, content)
            return name, before

        try:
            name, before = ws.beneath(path, replace, create_dirs=True)
        except FileNotFoundError:  # missing folders are made: another process removed one
            raise ToolError(f"{path}: a folder on the way was removed while writing; nothing "
                            "was written") from None
        # The change as a diff, for the person watching (a progress event: the model's answer
        # stays short).
        ctx.progress("", diff=cap_text(unified_diff(before or "", content, name), MAX_SHOWN_DIFF))
        lines = content.count("\n") + (0 if content.endswith("\n") or not content else 1)
        verb = "Overwrote" if before is not None else "Created"
        size = len(content.encode("utf-8"))
        return (f"{verb} {name} ({lines} line{'' if lines == 1 else 's'}, "
                f"{size} byte{'' if size == 1 else 's'}).")

    write.carried = (ws.gate,)  # its verdict comes with a call run elsewhere
    return write
