"""What a look at a path that does not exist answers: the names that do exist near it.

Measured with the 1.5B (the task suite's new half, 2026-12-07): asked "what's in notes", it
looked for ``notes`` with ls, read, grep and find in turn, each answering "notes does not
exist", then said the file did not exist (``notes.txt`` was there); asked when the team sync
was, it tried ``team.txt`` four times; asked to compare ``a.cfg`` and ``b.cfg`` it searched
``do.cfg`` twice. Each error named only what was not there, so the next guess was as blind as
the first. The error now also names the entries of the nearest folder that exists, the
closest first: a name is a name in every language, so this holds for any wording.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from steerable.coding._beneath import Located, open_dir
from steerable.coding._workspace import Workspace
from steerable.errors import ToolError

__all__ = ["MAX_SHOWN", "missing"]

MAX_SHOWN = 20
"""The most entries an error names (a folder of thousands must not flood the context)."""


def missing(ws: Workspace, path: str, refused: Callable[[str], bool] | None = None) -> ToolError:
    """The error for ``path``, which does not exist: it names the closest entries of the
    nearest folder above it that exists (none when that folder is outside the workspace).
    ``refused`` leaves out entries a permission rule hides, as a listing would."""
    try:
        shown = ws.display(ws.resolve(path))
    except ToolError:
        shown = path
    hint = _nearby(ws, path, refused or (lambda _subject: False))
    return ToolError(f"{shown} does not exist" + (f"; {hint}" if hint else ""))


def _nearby(ws: Workspace, path: str, refused: Callable[[str], bool]) -> str:
    parts = PurePosixPath(path.replace("\\", "/")).parts
    for depth in range(len(parts) - 1, -1, -1):
        folder = str(PurePosixPath(*parts[:depth])) if depth else "."
        try:
            names = ws.beneath(folder, lambda where: _entries(ws, where, refused))
        except (FileNotFoundError, NotADirectoryError):
            continue
        except ToolError:
            return ""  # outside the workspace, or unreadable: nothing to name
        if not names:
            return f"{folder} is empty"
        wanted = parts[depth].lower() if depth < len(parts) else ""
        return f"{folder} holds: {', '.join(_closest_first(wanted, names))}"
    return ""


def _entries(ws: Workspace, where: Located, refused: Callable[[str], bool]) -> list[str]:
    fd = open_dir(where)
    try:
        with os.scandir(fd) as it:
            return sorted(e.name + ("/" if e.is_dir(follow_symlinks=False) else "")
                          for e in it if not refused(ws.display(Path(where.path) / e.name)))
    finally:
        os.close(fd)


def _closest_first(wanted: str, names: list[str]) -> list[str]:
    """``names`` with the ones most like ``wanted`` first, at most ``MAX_SHOWN``."""
    lowered = {n.lower().rstrip("/"): n for n in names}
    close = [lowered[m] for m in difflib.get_close_matches(wanted, list(lowered), n=3,
                                                            cutoff=0.6)] if wanted else []
    rest = [n for n in names if n not in close]
    shown = [*close, *rest][:MAX_SHOWN]
    more = len(names) - len(shown)
    return shown + ([f"... {more} more"] if more > 0 else [])
