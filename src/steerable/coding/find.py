"""``find``: files whose path matches a glob, .gitignore respected."""

from __future__ import annotations

import re

from steerable._messages import ToolResult
from steerable.coding._missing import missing
from steerable.coding._walk import FOUND_NOTHING, glob_to_regex, walk_files
from steerable.coding._workspace import Workspace
from steerable.errors import ToolError
from steerable.tools import FunctionTool, ToolContext, tool

__all__ = ["make_find_tool"]

MAX_RESULTS = 1000


def make_find_tool(ws: Workspace, *, max_results: int = MAX_RESULTS) -> FunctionTool:
    @tool(name="find", read_only=True, permission_key="path", permission_family="read",
          permission_subjects=ws.path_subjects)
    def find(pattern: str, ctx: ToolContext, path: str = ".") -> str | ToolResult:
        """Find files by name glob (not their contents: grep searches text). '*.py' matches
        names at any depth; 'src/**/*.py' matches paths.

        Args:
            pattern: Glob pattern; '**' crosses folders, '*' does not.
            path: Folder to search, relative to the workspace root.
        """
        if not pattern.strip():
            raise ToolError("pattern must not be empty")
        try:
            start, is_dir = ws.kind(path)
        except FileNotFoundError:
            raise missing(ws, path, ctx.refuses) from None
        if not is_dir:
            raise ToolError(f"{ws.display(start)} is not a folder")
        body = glob_to_regex(pattern.lstrip("/"))
        # A pattern without '/' names files at any depth, like .gitignore and `find -name`.
        regex = re.compile(("^" if "/" in pattern else "^(?:.*/)?") + body + "$")
        found: list[str] = []
        more = False
        for file in walk_files(ws, path, refused=ctx.refuses):
            if regex.match(file.rel):
                if len(found) == max_results:
                    more = True
                    break
                found.append(ws.display(file.path))
        if not found:
            return ToolResult(f"No files match {pattern!r} under {ws.display(start)}.",
                              metadata={FOUND_NOTHING: True})
        if more:
            found.append(f"[stopped at {max_results} results; narrow the pattern]")
        return "\n".join(found)

    return find
