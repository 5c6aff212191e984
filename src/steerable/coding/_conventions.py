"""Project instructions: the ``AGENTS.md`` (or ``CLAUDE.md``) files a project already has.

One file per folder: ``AGENTS.md``, or ``CLAUDE.md`` where the folder has no ``AGENTS.md``. The
root's file applies everywhere, a nested one to the files below its folder. A file may import
another with ``@path`` (relative to the importing file; ``~/`` and absolute paths too), as
Claude Code reads them; imports nest up to ``MAX_IMPORT_DEPTH`` deep.

A cloned repository is not trusted: every file is opened beneath the workspace root (no link or
``..`` leads out of it), an import that would leave it is refused and listed, a cycle is read
once, and the text taken into the prompt is capped.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from steerable.coding._beneath import Located, open_regular
from steerable.coding._walk import walk_files
from steerable.coding._workspace import Workspace
from steerable.errors import ToolError

__all__ = ["CONVENTION_NAMES", "ConventionFile", "Conventions", "load_conventions"]

CONVENTION_NAMES = ("AGENTS.md", "CLAUDE.md")
"""In order of preference within one folder."""
MAX_IMPORT_DEPTH = 5
MAX_FILE_BYTES = 256 * 1024
MAX_TOTAL_CHARS = 96 * 1024
"""What the prompt may take in all; files past it are listed as skipped, never cut mid-way."""

# ``@path`` at the start of a line or after a space; an email address (``a@b.c``) is not one.
# A code span is blanked with a NUL (not a space), so text right after it is no line start.
_IMPORT = re.compile(r"(?:(?<=\s)|^)@([^\s\x00@`'\"<>()\[\]]+)")
_CODE_SPAN = re.compile(r"`[^`]*`")


@dataclass(frozen=True, slots=True)
class ConventionFile:
    """A file taken into the prompt."""

    path: str
    """Relative to the workspace root ('/'-separated)."""
    scope: str
    """The folder it applies below ('.' for the whole workspace)."""
    imported_by: str | None = None
    chars: int = 0


@dataclass(frozen=True, slots=True)
class Conventions:
    files: tuple[ConventionFile, ...] = ()
    skipped: tuple[tuple[str, str], ...] = ()
    """(path as written, why it was not read)."""
    text: str = ""
    """The section for the system prompt ('' when the project has no instructions)."""


@dataclass
class _Reader:
    ws: Workspace
    files: list[ConventionFile] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    parts: list[str] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)
    total: int = 0

    def take(self, rel: str, raw: bytes | None, scope: str, imported_by: str | None,
             depth: int) -> None:
        if raw is None or len(raw) > MAX_FILE_BYTES:
            self.skipped.append((rel, f"not a readable file under {MAX_FILE_BYTES // 1024} KB"))
            return
        text = raw.decode("utf-8", "replace").strip()
        if self.total + len(text) > MAX_TOTAL_CHARS:
            self.skipped.append((rel, f"over the {MAX_TOTAL_CHARS // 1024} K characters the "
                                      "prompt takes from project instructions"))
            return
        self.seen.add(rel)
        self.total += len(text)
        self.files.append(ConventionFile(rel, scope, imported_by, len(text)))
        if imported_by is not None:
            title = f"{rel} (imported by {imported_by})"
        else:
            title = rel + (" (applies everywhere)" if scope == "." else
                           f" (applies to files under {scope}/)")
        self.parts.append(f"## {title}\n\n{text}")
        self.imports(rel, text, scope, depth)

    def imports(self, rel: str, text: str, scope: str, depth: int) -> None:
        for target in import_targets(text):
            where = self.locate(rel, target)
            if where is None:
                continue
            if where in self.seen:
                continue  # a cycle, or a file two others import: its text is in once
            if depth >= MAX_IMPORT_DEPTH:
                self.skipped.append((target, f"imports nest deeper than {MAX_IMPORT_DEPTH}"))
                continue
            self.take(where, self.read(where), scope, rel, depth + 1)

    def locate(self, importer: str, target: str) -> str | None:
        """The import's path relative to the root, or None (listed when refused)."""
        path = Path(os.path.expanduser(target))
        if not path.is_absolute():
            path = self.ws.root / Path(importer).parent / path
        try:
            resolved = self.ws.resolve(str(path))
        except ToolError:
            self.skipped.append((target, f"imported by {importer}: outside the workspace"))
            return None
        if not resolved.is_file():
            if "/" in target or "." in target:  # "@alice" is a person, not a missing file
                self.skipped.append((target, f"imported by {importer}: no such file"))
            return None
        return self.ws.display(resolved)

    def read(self, rel: str) -> bytes | None:
        def op(where: Located) -> bytes:
            with open_regular(where) as fh:
                return fh.read(MAX_FILE_BYTES + 1)

        try:
            return self.ws.beneath(rel, op)
        except (OSError, ToolError):
            return None


def import_targets(text: str) -> list[str]:
    """The ``@path`` imports of a Markdown text, outside code fences and code spans."""
    found: list[str] = []
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            continue
        if fenced:
            continue
        for match in _IMPORT.finditer(_CODE_SPAN.sub("\0", line)):
            target = match.group(1).rstrip(".,;:!?")
            if target and target not in found:
                found.append(target)
    return found


def _per_folder(ws: Workspace) -> list[tuple[str, str]]:
    """(folder, file name) of the one instruction file of each folder, root first."""
    chosen: dict[str, str] = {}
    for walked in walk_files(ws, "."):
        if walked.name not in CONVENTION_NAMES:
            continue
        folder = os.path.dirname(walked.rel) or "."
        current = chosen.get(folder)
        if current is None or CONVENTION_NAMES.index(walked.name) < CONVENTION_NAMES.index(current):
            chosen[folder] = walked.name
    return sorted(chosen.items(), key=lambda item: (item[0] != ".", item[0]))


def load_conventions(workspace: Workspace | str | os.PathLike[str]) -> Conventions:
    """Read the project's instruction files (see the module's description)."""
    ws = workspace if isinstance(workspace, Workspace) else Workspace(workspace)
    ws = Workspace(ws.root)  # imports stay inside the workspace itself, not the extra roots
    reader = _Reader(ws)
    for folder, name in _per_folder(ws):
        rel = name if folder == "." else f"{folder}/{name}"
        if rel in reader.seen:
            continue  # already taken in as another file's import
        reader.take(rel, reader.read(rel), folder, None, 0)
    if not reader.parts:
        return Conventions(skipped=tuple(reader.skipped))
    text = ("# Project instructions\n\nThe project's own instructions; a file applies to the "
            "files below its folder.\n\n" + "\n\n".join(reader.parts))
    return Conventions(tuple(reader.files), tuple(reader.skipped), text)
