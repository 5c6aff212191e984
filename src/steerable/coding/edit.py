"""``edit``: replace an exact piece of text in a file.

The old text must occur exactly once unless ``replace_all`` is set: an edit that could land in
two places is refused with the line numbers of each, so the model can add context to pick one.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from steerable.coding._beneath import Located
from steerable.coding._text import MAX_SHOWN_DIFF, cap_text, unified_diff
from steerable.coding._workspace import Workspace
from steerable.coding.write import atomic_write, current_text
from steerable.errors import ToolError
from steerable.tools import FunctionTool, ToolContext, tool

__all__ = ["check_edit", "closest_text", "make_edit_tool", "replace_text"]


def _line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


_NEAR_LINES = 5000  # a longer file is not searched for the closest text
_NEAR_RATIO = 0.6


def closest_text(text: str, wanted: str) -> tuple[int, str] | None:
    """The run of ``text``'s lines most like ``wanted`` (as many lines), with its first line
    number: what a failed edit's ``old_text`` most likely meant (a quote or a space off).
    None when nothing is close or the file is too long to search."""
    lines, size = text.splitlines(), max(1, len(wanted.strip("\n").splitlines()))
    if not wanted.strip() or len(lines) > _NEAR_LINES:
        return None
    best: tuple[float, int] = (_NEAR_RATIO, -1)
    matcher = difflib.SequenceMatcher(autojunk=False)
    matcher.set_seq2(wanted.strip("\n"))
    for i in range(max(1, len(lines) - size + 1)):
        matcher.set_seq1("\n".join(lines[i:i + size]))
        if matcher.real_quick_ratio() > best[0] and matcher.quick_ratio() > best[0]:
            ratio = matcher.ratio()
            if ratio > best[0]:
                best = (ratio, i)
    if best[1] < 0:
        return None
    return best[1] + 1, "\n".join(lines[best[1]:best[1] + size])


def check_edit(old_text: str, new_text: str) -> None:
    if not old_text:
        raise ToolError("old_text must not be empty; use write to create or replace a file")
    if old_text == new_text:
        raise ToolError("old_text and new_text are the same; nothing to change")


def replace_text(before: str, name: str, old_text: str, new_text: str, replace_all: bool) -> str:
    """``before`` with ``old_text`` replaced (once, unless ``replace_all``); a ``ToolError`` the
    model can act on when it is missing or ambiguous. Shared with the editor-backed edit."""
    count = before.count(old_text)
    if count == 0:
        hint = ""
        if old_text.strip() and old_text.strip() in before:
            hint = " (it does occur with different surrounding whitespace)"
        near = closest_text(before, old_text)
        shown = "" if near is None else (f"; the closest text, at line {near[0]}, is:\n"
                                         f"{near[1]}")
        raise ToolError(f"old_text was not found in {name}{hint}; read the file and copy the "
                        f"text exactly, including indentation{shown}")
    if count > 1 and not replace_all:
        lines, start = [], 0
        for _ in range(count):
            start = before.index(old_text, start)
            lines.append(str(_line_of(before, start)))
            start += len(old_text)
        raise ToolError(f"old_text occurs {count} times in {name} (at lines {', '.join(lines)}); "
                        "include more surrounding text to make it unique, or set replace_all")
    return before.replace(old_text, new_text) if replace_all else \
        before.replace(old_text, new_text, 1)


def _apply(ws: Workspace, where: Located, old_text: str, new_text: str,
           replace_all: bool) -> tuple[str, str, str]:
    """Work out the edit without writing: (name, old content, new content)."""
    name = ws.display(where.path)
    check_edit(old_text, new_text)
    before = current_text(where, name)
    if before is None:
        raise ToolError(f"{name} does not exist; use write to create it")
    return name, before, replace_text(before, name, old_text, new_text, replace_all)


def _missing(ws: Workspace, path: str) -> ToolError:
    return ToolError(f"{ws.display(ws.resolve(path))} does not exist; use write to create it")


def make_edit_tool(ws: Workspace) -> FunctionTool:
    def preview(arguments: Mapping[str, Any]) -> str:
        def diff(where: Located) -> str:
            name, before, after = _apply(ws, where, str(arguments["old_text"]),
                                         str(arguments["new_text"]),
                                         bool(arguments.get("replace_all", False)))
            return f"[dry-run] edit would change {name}; nothing was changed.\n" + \
                unified_diff(before, after, name)

        try:
            return ws.beneath(str(arguments["path"]), diff)
        except FileNotFoundError:
            raise _missing(ws, str(arguments["path"])) from None

    @tool(name="edit", permission_subjects=ws.path_subjects, permission_key="path", preview=preview,
          permission_family="write")
    def edit(path: str, old_text: str, new_text: str, ctx: ToolContext,
             replace_all: bool = False) -> str:
        """Replace exact text in a file. old_text must match exactly once unless replace_all.

        Args:
            path: File path, relative to the workspace root.
            old_text: The exact text to replace, including indentation.
            new_text: The text to put in its place.
            replace_all: Replace every occurrence instead of requiring exactly one.
        """
        ws.gate.check(ctx.turn_id)

        def change(where: Located) -> tuple[str, str, str]:
            name, before, after = _apply(ws, where, old_text, new_text, replace_all)
            atomic_write(where, after)
            return name, before, after

        try:
            name, before, after = ws.beneath(path, change)
        except FileNotFoundError:
            raise _missing(ws, path) from None
        ctx.progress("", diff=cap_text(unified_diff(before, after, name), MAX_SHOWN_DIFF))
        count = before.count(old_text) if replace_all else 1
        first = _line_of(before, before.index(old_text))
        plural = "s" if count > 1 else ""
        return f"Edited {name}: replaced {count} occurrence{plural} (first at line {first})."

    edit.carried = (ws.gate,)  # its verdict comes with a call run elsewhere
    return edit
