"""The coding tools ``read``, ``write`` and ``edit`` done through the editor's file system.

When the client offers ``fs/read_text_file`` (``fs/write_text_file``), reading (writing) goes
through the editor: the model sees the buffers as the person sees them, unsaved changes
included, and the editor knows which files the agent changed. Each tool keeps the name,
arguments, read-only flag and permission subjects of the built-in tool it stands in for, so
permission rules, approvals and the workspace's confinement hold exactly as before: a path is
resolved and checked against the workspace before the editor is asked.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from steerable.coding import Workspace
from steerable.coding._text import unified_diff
from steerable.coding.edit import check_edit, replace_text
from steerable.coding.read import DEFAULT_LIMIT, MAX_CHARS, MAX_LINE
from steerable.errors import ToolError
from steerable.tools import FunctionTool, ToolContext, tool

__all__ = ["EditorFiles", "editor_tools"]


class EditorFiles(Protocol):
    """What these tools need of the client connection (``acp``'s ``Client`` side)."""

    async def read_text_file(self, session_id: str, path: str, line: int | None = None,
                             limit: int | None = None, **kwargs: Any) -> Any: ...

    async def write_text_file(self, session_id: str, path: str, content: str,
                              **kwargs: Any) -> Any: ...


async def _read(files: EditorFiles, ctx: ToolContext, path: str, name: str,
                line: int | None = None, limit: int | None = None) -> str:
    try:
        response = await files.read_text_file(session_id=ctx.session_id, path=path, line=line,
                                              limit=limit)
    except Exception as exc:  # the editor's refusal (no such file...) is the model's to read
        raise ToolError(f"cannot read {name} through the editor: {exc}") from None
    content = response.content
    if not isinstance(content, str):
        raise ToolError(f"the editor returned no text for {name}")
    return content


def _numbered(text: str, name: str, offset: int, limit: int) -> str:
    lines = text.splitlines()[:limit]
    if not lines:
        if offset == 1:
            return f"{name} is empty."
        raise ToolError(f"{name} has fewer than {offset} lines")
    out: list[str] = []
    used = 0
    for number, line in enumerate(lines, start=offset):
        if len(line) > MAX_LINE:
            line = line[:MAX_LINE] + f" [... line cut at {MAX_LINE} characters]"
        row = f"{number:>6}\t{line}"
        if used + len(row) + 1 > MAX_CHARS and out:
            return "\n".join(out) + (f"\n[output capped at {MAX_CHARS} characters; continue "
                                     f"with offset={number}]")
        out.append(row)
        used += len(row) + 1
    body = "\n".join(out)
    if len(lines) == limit:
        body += f"\n[more lines may follow; continue with offset={offset + limit}]"
    return body


def make_editor_read_tool(ws: Workspace, files: EditorFiles) -> FunctionTool:
    @tool(name="read", permission_subjects=ws.path_subjects, read_only=True, permission_key="path")
    async def read(path: str, ctx: ToolContext, offset: int = 1,
                   limit: int = DEFAULT_LIMIT) -> str:
        """Read a text file from the workspace (as open in the editor); lines come numbered.

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
        text = await _read(files, ctx, str(target), name, line=offset, limit=limit)
        return _numbered(text, name, offset, limit)

    return read


def make_editor_write_tool(ws: Workspace, files: EditorFiles) -> FunctionTool:
    def preview(arguments: Mapping[str, Any]) -> str:
        target = ws.resolve(str(arguments["path"]))
        name = ws.display(target)
        old = target.read_text(encoding="utf-8", errors="replace") if target.is_file() else ""
        diff = unified_diff(old, str(arguments["content"]), name)
        return f"[dry-run] write would change {name}; nothing was changed.\n{diff}"

    @tool(name="write", permission_subjects=ws.path_subjects, permission_key="path",
          preview=preview)
    async def write(path: str, content: str, ctx: ToolContext) -> str:
        """Write a whole file in the workspace, creating it (and its folders) or replacing it.

        Args:
            path: File path, relative to the workspace root.
            content: The complete new content of the file.
        """
        target = ws.resolve(path)
        name = ws.display(target)
        if target.is_dir():
            raise ToolError(f"{name} is a directory; write needs a file path")
        existed = target.exists()
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            await files.write_text_file(session_id=ctx.session_id, path=str(target),
                                        content=content)
        except Exception as exc:
            raise ToolError(f"the editor could not write {name}: {exc}") from None
        size = len(content.encode("utf-8"))
        return f"{'Overwrote' if existed else 'Created'} {name} ({size} bytes) in the editor."

    return write


def make_editor_edit_tool(ws: Workspace, files: EditorFiles) -> FunctionTool:
    def preview(arguments: Mapping[str, Any]) -> str:
        target = ws.resolve(str(arguments["path"]))
        name = ws.display(target)
        before = target.read_text(encoding="utf-8", errors="replace")
        after = replace_text(before, name, str(arguments["old_text"]),
                             str(arguments["new_text"]), bool(arguments.get("replace_all")))
        return f"[dry-run] edit would change {name}; nothing was changed.\n" + \
            unified_diff(before, after, name)

    @tool(name="edit", permission_subjects=ws.path_subjects, permission_key="path",
          preview=preview, permission_family="write")
    async def edit(path: str, old_text: str, new_text: str, ctx: ToolContext,
                   replace_all: bool = False) -> str:
        """Replace exact text in a file. old_text must match exactly once unless replace_all.

        Args:
            path: File path, relative to the workspace root.
            old_text: The exact text to replace, including indentation.
            new_text: The text to put in its place.
            replace_all: Replace every occurrence instead of requiring exactly one.
        """
        check_edit(old_text, new_text)
        target = ws.resolve(path)
        name = ws.display(target)
        if not target.is_file():
            raise ToolError(f"{name} does not exist; use write to create it")
        before = await _read(files, ctx, str(target), name)
        after = replace_text(before, name, old_text, new_text, replace_all)
        try:
            await files.write_text_file(session_id=ctx.session_id, path=str(target),
                                        content=after)
        except Exception as exc:
            raise ToolError(f"the editor could not write {name}: {exc}") from None
        count = before.count(old_text) if replace_all else 1
        return f"Edited {name}: replaced {count} occurrence{'s' if count > 1 else ''}."

    return edit


def editor_tools(ws: Workspace, files: EditorFiles, *, read: bool,
                 write: bool) -> list[FunctionTool]:
    """The editor-backed stand-ins the client's file system capabilities allow."""
    out = []
    if read:
        out.append(make_editor_read_tool(ws, files))
    if write:
        out.append(make_editor_write_tool(ws, files))
    if read and write:  # edit reads the buffer it changes
        out.append(make_editor_edit_tool(ws, files))
    return out
