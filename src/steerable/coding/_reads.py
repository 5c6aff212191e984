"""Every look the tool policy takes at the workspace, through one object it must use.

The policy judges a request by the files (which names exist, what a change request changed,
whether a file still parses). Those are reads of the world, and where the policy must decide
the same way twice (in a Temporal workflow, replayed on another worker after a crash, when the
files have long changed) each read must be one the engine records. So the policy holds no path
of the workspace: it holds a ``WorkspaceReads``, and a look that does not go through it has
nothing to look at.

- ``DirectReads(root)``: the local engine's; each read runs in a worker thread.
- ``RecordedReads(read)``: for a policy in a workflow; each read is ``read(name)(*args)``
  (``steerable.temporal.workflow_read``): an activity whose JSON result the history keeps, so a
  replay reads what the first run read. ``read_functions(root)`` are the worker's side of the
  same reads (``TemporalWorker(reads=...)``).

Each read is declared once in ``_READS`` (its function and its JSON form), so the two sides
cannot drift apart. Arguments are JSON values (strings, lists of strings).
"""

from __future__ import annotations

import asyncio
import functools
import os
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from steerable.coding._changes import Snapshot, named_targets, still_parses
from steerable.coding._paths import file_lines, workspace_paths
from steerable.coding._workspace import Workspace

__all__ = [
    "READ_PREFIX",
    "DirectReads",
    "RecordedReads",
    "WorkspaceReads",
    "entry_names",
    "read_functions",
    "snapshot_from_json",
    "snapshot_to_json",
]

READ_PREFIX = "workspace."
"""The worker's reads are named ``workspace.<read>`` (beside other reads a worker may have)."""


def entry_names(where: Workspace | str | os.PathLike[str], limit: int = 2000) -> list[str]:
    """Names (and stems) of the workspace's files and folders, a bounded walk."""
    root = where.root if isinstance(where, Workspace) else Path(where)
    names: set[str] = set()
    for _, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d != "node_modules"]
        for name in (*dirs, *files):
            low = name.lower()
            names.add(low)
            stem = low.rsplit(".", 1)[0]
            if len(stem) >= 3:
                names.add(stem)
        if len(names) >= limit:
            break
    return sorted(names)


def _relative(root: Path, path: str) -> str | None:
    """``path`` relative to the workspace root, or None when it leads outside."""
    base = root.resolve()
    try:
        return str((base / path).resolve().relative_to(base))
    except (ValueError, OSError):
        return None


def _non_empty_file(root: Path, path: str) -> str | None:
    """The relative path of the non-empty file ``path`` names (None: none, or outside)."""
    rel = _relative(root, path)
    if rel is None:
        return None
    try:
        full = root / rel
        return rel if full.is_file() and full.stat().st_size > 0 else None
    except OSError:
        return None


def snapshot_to_json(snap: Snapshot) -> dict[str, Any]:
    return {"names": list(snap.names), "files": {p: list(s) for p, s in snap.files.items()},
            "texts": dict(snap.texts)}


def snapshot_from_json(raw: dict[str, Any]) -> Snapshot:
    # Stamps back to tuples: a list never equals a tuple, so every file would look changed.
    return Snapshot(tuple(raw["names"]), {p: (s[0], s[1]) for p, s in raw["files"].items()},
                    dict(raw["texts"]))


def _same(value: Any) -> Any:
    return value


@dataclass(frozen=True, slots=True)
class _Read:
    fn: Callable[..., Any]
    """Called with the workspace root, then the read's arguments."""
    to_json: Callable[[Any], Any] = _same
    from_json: Callable[[Any], Any] = _same


def _start(root: Path, text: str) -> Snapshot:
    return Snapshot.take(root, named_targets(text, root))


def _snapshot(root: Path, names: Sequence[str]) -> Snapshot:
    return Snapshot.take(root, names)


_READS: dict[str, _Read] = {
    "names": _Read(entry_names),
    "start": _Read(_start, snapshot_to_json, snapshot_from_json),
    "snapshot": _Read(_snapshot, snapshot_to_json, snapshot_from_json),
    "parses": _Read(still_parses),
    "relative": _Read(_relative),
    "non_empty_file": _Read(_non_empty_file),
    "paths": _Read(workspace_paths),
    "lines": _Read(file_lines),
}


class WorkspaceReads(ABC):
    """The policy's looks at the workspace (module doc); ``_read`` is how one is made."""

    @abstractmethod
    async def _read(self, name: str, *args: Any) -> Any:
        """The value of the read ``name`` (a key of ``_READS``) with ``args``."""

    async def names(self) -> list[str]:
        """Names (and stems) of the workspace's files and folders."""
        return cast(list[str], await self._read("names"))

    async def start(self, text: str) -> Snapshot:
        """The workspace now, with the text of the files ``text`` names (what a change request
        is judged against)."""
        return cast(Snapshot, await self._read("start", text))

    async def snapshot(self, names: Sequence[str]) -> Snapshot:
        """The workspace now, with the text of the files ``names``."""
        return cast(Snapshot, await self._read("snapshot", list(names)))

    async def parses(self, name: str) -> bool:
        """Whether the file ``name`` parses now (one that is gone or unreadable does)."""
        return cast(bool, await self._read("parses", name))

    async def relative(self, path: str) -> str | None:
        """``path`` relative to the workspace root (None: it leads outside)."""
        return cast("str | None", await self._read("relative", path))

    async def paths(self) -> dict[str, list[str]] | None:
        """The workspace's files and folders (None: too many to list, ``_paths``)."""
        return cast("dict[str, list[str]] | None", await self._read("paths"))

    async def lines(self, path: str) -> list[str] | None:
        """The lines of the file ``path`` an edit may quote (None: none, ``_paths``)."""
        return cast("list[str] | None", await self._read("lines", path))

    async def non_empty_file(self, path: str) -> str | None:
        """The relative path of the non-empty file ``path`` names (None: none is there)."""
        return cast("str | None", await self._read("non_empty_file", path))


class DirectReads(WorkspaceReads):
    """The reads of the workspace at ``root``, each in a worker thread."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    async def _read(self, name: str, *args: Any) -> Any:
        return await asyncio.to_thread(_READS[name].fn, self.root, *args)


class RecordedReads(WorkspaceReads):
    """The reads made as ``read(READ_PREFIX + name)(*args)``, whose JSON result is decoded:
    ``RecordedReads(steerable.temporal.workflow_read)`` in a workflow, over a worker that
    registered ``read_functions(root)``."""

    def __init__(self, read: Callable[[str], Callable[..., Awaitable[Any]]]) -> None:
        self._call = read

    async def _read(self, name: str, *args: Any) -> Any:
        return _READS[name].from_json(await self._call(READ_PREFIX + name)(*args))


def _encoded(read: _Read, root: Path, *args: Any) -> Any:
    return read.to_json(read.fn(root, *args))


def read_functions(root: str | os.PathLike[str]) -> dict[str, Callable[..., Any]]:
    """The worker's side of ``RecordedReads``: each read of the workspace at ``root`` by its
    name, returning its JSON form."""
    base = Path(root)
    return {READ_PREFIX + name: functools.partial(_encoded, read, base)
            for name, read in _READS.items()}
