"""The paths a required call may name: the ones that exist (and the ones the request names).

Measured with the 1.5B (the task suite's new half, 2026-12-07): asked "what's in notes" it
called ``ls notes``, ``read notes``, ``grep`` and ``find`` in turn, and asked when the team sync
was it tried ``team.txt`` twice, each error naming ``notes.txt`` as the file that was there; the
error did not change its next call. A required call is written under a JSON schema (the
provider's grammar), so its path can be held to the paths that exist: the model then picks
among them rather than guessing again. Only a workspace small enough to list is held (a long
enum is a long grammar, and a big tree is not what a small model is asked about); a file the
request names is allowed too until a call on it failed, so a question about a file that is not
there still gets its honest "does not exist".
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from steerable._messages import Message

__all__ = ["PATHS_LIMIT", "PATH_PARAMETERS", "failed_paths", "held_paths", "workspace_paths"]

PATHS_LIMIT = 200
"""The most files and folders a workspace may hold for a required call's paths to be held."""

PATH_PARAMETERS: Mapping[tuple[str, str], tuple[str, ...]] = {
    ("read", "path"): ("files",), ("edit", "path"): ("files",),
    ("ls", "path"): ("folders",), ("find", "path"): ("folders",),
    ("grep", "path"): ("folders", "files"),
}
"""Which coding tool's parameter names an existing file or folder (``write`` creates one)."""

_SKIPPED = frozenset({"node_modules", "__pycache__"})


def workspace_paths(root: Path, limit: int = PATHS_LIMIT) -> dict[str, list[str]] | None:
    """The workspace's files and folders (``.`` first), relative, sorted, hidden folders
    skipped; None when there are more than ``limit``."""
    files: list[str] = []
    folders: list[str] = ["."]
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIPPED)
        rel = os.path.relpath(folder, root)
        if rel != ".":
            folders.append(rel)
        files.extend(n if rel == "." else os.path.join(rel, n) for n in sorted(names))
        if len(files) + len(folders) > limit:
            return None
    return {"files": files, "folders": folders}


def failed_paths(turn: Sequence[Message]) -> set[str]:
    """The paths of this exchange's calls whose result was an error."""
    paths = {c.id: c.arguments.get("path") for m in turn if m.role == "assistant"
             for c in m.tool_calls}
    return {p for m in turn if m.role == "tool" and m.is_error
            for p in [paths.get(m.tool_call_id or "")] if isinstance(p, str)}


def held_paths(tools: Iterable[str], paths: Mapping[str, list[str]] | None,
               named: Iterable[str], failed: set[str]) -> tuple[tuple[str, str, tuple[str, ...]],
                                                                ...]:
    """``ToolChoice.values`` for a required call of ``tools``: each path parameter held to the
    existing paths of its kind, plus the ``named`` ones no call has failed on yet; nothing
    when the workspace was too big to list."""
    if paths is None:
        return ()
    extra = [n for n in named if n not in failed]
    held = []
    for tool in tools:
        for (name, param), kinds in PATH_PARAMETERS.items():
            if name != tool:
                continue
            allowed = [p for kind in kinds for p in paths.get(kind, [])]
            allowed += [n for n in extra if n not in allowed]
            if allowed:
                held.append((tool, param, tuple(allowed)))
    return tuple(held)
