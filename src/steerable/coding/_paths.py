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

An edit quotes the text it replaces, and the 1.5B quoted text the file never had
(``print('Hello, world!')`` in a calc.py of two functions; ``debug: false`` for
``"debug": false``), again after reading the file, the closest text in the error: a required
edit of a file the policy knows (named by the request, or read) is held to quoting one of the
file's own lines, one that occurs once (so the edit cannot fail on it).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from steerable._messages import Message
from steerable.providers._base import Variant

__all__ = ["LINES_LIMIT", "PATHS_LIMIT", "PATH_PARAMETERS", "QUOTING", "failed_paths",
           "file_lines", "held_values", "workspace_paths"]

PATHS_LIMIT = 200
"""The most files and folders a workspace may hold for a required call's paths to be held."""

PATH_PARAMETERS: Mapping[tuple[str, str], tuple[str, ...]] = {
    ("read", "path"): ("files",), ("edit", "path"): ("files",),
    ("ls", "path"): ("folders",), ("find", "path"): ("folders",),
    ("grep", "path"): ("folders", "files"),
}
"""Which coding tool's parameter names an existing file or folder (``write`` creates one)."""

QUOTING: Mapping[str, str] = {"edit": "old_text"}
"""The tools that change a file by quoting its text, and the parameter that quotes it."""
LINES_LIMIT = 200
"""The longest file (in lines; and 200 bytes a line) whose lines an edit's quote is held to."""

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


def file_lines(root: Path, path: str, limit: int = LINES_LIMIT) -> list[str] | None:
    """The lines of the text file ``path`` that an edit can quote alone: each non-blank line
    that occurs once, in order; None when the file is missing, binary or too long to hold."""
    try:
        data = (root / path).read_bytes()
    except OSError:
        return None
    if len(data) > limit * 200 or b"\x00" in data[:8192]:
        return None
    try:
        lines = data.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        return None
    if len(lines) > limit:
        return None
    counts: dict[str, int] = {}
    for line in lines:
        counts[line] = counts.get(line, 0) + 1
    return [ln for ln in lines if ln.strip() and counts[ln] == 1]


def failed_paths(turn: Sequence[Message]) -> set[str]:
    """The paths of this exchange's calls whose result was an error."""
    paths = {c.id: c.arguments.get("path") for m in turn if m.role == "assistant"
             for c in m.tool_calls}
    return {p for m in turn if m.role == "tool" and m.is_error
            for p in [paths.get(m.tool_call_id or "")] if isinstance(p, str)}


def held_values(tools: Iterable[str], paths: Mapping[str, list[str]] | None,
                named: Iterable[str], failed: set[str],
                quoted: Mapping[str, Sequence[str]] | None = None) -> tuple[Variant, ...]:
    """``ToolChoice.values`` for a required call of ``tools``: each path parameter held to the
    existing paths of its kind, plus the ``named`` ones no call has failed on yet; a quoting
    tool (``edit``) on a file of ``quoted`` (path -> its lines, ``file_lines``) held to that
    file's lines. Nothing when the workspace was too big to list."""
    if paths is None:
        return ()
    extra = [n for n in named if n not in failed]
    quotes: dict[str, tuple[str, ...]] = {f: tuple(lines) for f, lines in (quoted or {}).items()
                                          if lines}
    held: list[Variant] = []
    for tool in tools:
        for (name, param), kinds in PATH_PARAMETERS.items():
            if name != tool:
                continue
            allowed = [p for kind in kinds for p in paths.get(kind, [])]
            quote = QUOTING.get(tool)
            if quote is None:
                allowed += [n for n in extra if n not in allowed]
            else:  # one variant per file it knows, the quote held to the file's lines
                held.extend((tool, ((param, (f,)), (quote, lines))) for f, lines in quotes.items())
                allowed = [p for p in allowed if p not in quotes]
            if allowed:
                held.append((tool, ((param, tuple(allowed)),)))
    return tuple(held)
