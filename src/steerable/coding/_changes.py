"""What a change request changed in the workspace, seen from the files rather than the calls.

The tool policy judges a change by the workspace itself, for three reasons:

- a successful ``bash`` call is no change by itself (``ls`` or ``cat`` succeed and change
  nothing), and a command that did change files (``sed -i``, ``rm``) did so whatever it printed;
- a command that rewrote a file must not do it silently: its result tells the model (and the
  events) which files it changed, with a short diff of the files the request names, so a
  ``sed`` that emptied or broke a file is seen and can be repaired;
- a change is *done* when every file the request names has changed (names are names in every
  language, so this needs no words of the request); the policy then stops offering calls.

``Stamps`` are (size, mtime_ns) per file from a bounded walk, so a check costs a ``stat`` per
file and never reads the workspace; only the named files (few, small) keep their text for a diff.
"""

from __future__ import annotations

import difflib
import json
import os
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from steerable.coding._evidence import path_names

__all__ = [
    "Snapshot",
    "broken_files",
    "change_report",
    "changed_paths",
    "named_targets",
    "stamps",
    "still_parses",
    "syntax_error",
]

Stamp = tuple[int, int]
WALK_LIMIT = 5000
"""Files stamped at most (a workspace larger than that is judged on its first files)."""
TEXT_LIMIT = 64_000
"""Bytes of a named file kept for a diff."""
DIFF_LINES = 24


def stamps(root: Path, limit: int = WALK_LIMIT) -> dict[str, Stamp]:
    """(size, mtime_ns) of the workspace's files by relative path, hidden folders skipped."""
    found: dict[str, Stamp] = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "node_modules"
                         and d != "__pycache__")
        for name in sorted(files):
            path = os.path.join(folder, name)
            try:
                st = os.stat(path)
            except OSError:
                continue
            found[os.path.relpath(path, root)] = (st.st_size, st.st_mtime_ns)
            if len(found) >= limit:
                return found
    return found


def changed_paths(before: Mapping[str, Stamp], after: Mapping[str, Stamp]) -> list[str]:
    """The paths created, removed or modified between two stamps, sorted."""
    return sorted(p for p in {*before, *after} if before.get(p) != after.get(p))


def named_targets(text: str, root: Path) -> tuple[str, ...]:
    """The file names ``text`` writes out (``notes.txt``, ``src/app.py``) that stay inside the
    workspace, as relative paths, in order, without repeats."""
    out: list[str] = []
    base = root.resolve()
    for name in path_names(text):
        try:
            rel = (base / name).resolve().relative_to(base)
        except (ValueError, OSError):
            continue  # outside the workspace: not a target of a change in it
        if str(rel) != "." and str(rel) not in out:
            out.append(str(rel))
    return tuple(out)


def _read_text(path: Path) -> str | None:
    try:
        if path.stat().st_size > TEXT_LIMIT:
            return None
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


@dataclass
class Snapshot:
    """The workspace at one moment: every file's stamp, and the text of the named files."""

    names: tuple[str, ...] = ()
    files: dict[str, Stamp] = field(default_factory=dict)
    texts: dict[str, str | None] = field(default_factory=dict)

    @classmethod
    def take(cls, root: Path, names: Iterable[str] = ()) -> Snapshot:
        names = tuple(names)
        return cls(names, stamps(root), {n: _read_text(root / n) for n in names})

    def changed(self, now: Snapshot) -> list[str]:
        """What changed from this snapshot to ``now``."""
        moved = set(changed_paths(self.files, now.files))
        for name in self.names:
            was, is_now = self.texts.get(name), now.texts.get(name)
            if was is not None and is_now is not None:
                # A named file's kept text decides: an edit within the same mtime tick is a
                # change, and a rewrite with the same bytes is none (the 1.5B's `sed -i` whose
                # pattern matched nothing ended a change request as done, the file as it was).
                if was == is_now:
                    moved.discard(name)
                else:
                    moved.add(name)
            elif was != is_now:
                moved.add(name)
        return sorted(moved)

    def targets_done(self, now: Snapshot) -> bool:
        """Every named file changed (created, edited or removed) since this snapshot."""
        moved = set(self.changed(now))
        return bool(self.names) and all(n in moved for n in self.names)


def change_report(before: Snapshot, now: Snapshot) -> str:
    """What a command changed, for its result: every changed path, and a short diff of each
    named file it changed ("" when it changed nothing)."""
    moved = before.changed(now)
    if not moved:
        return ""
    lines = ["[files this command changed in the workspace: "
             + ", ".join(_what(p, before, now) for p in moved[:20])
             + (f" and {len(moved) - 20} more" if len(moved) > 20 else "") + "]"]
    for name in moved:
        old, new = before.texts.get(name), now.texts.get(name)
        if name not in before.names or old is None or new is None:
            continue
        diff = list(difflib.unified_diff(old.splitlines(), new.splitlines(), f"a/{name}",
                                         f"b/{name}", n=1, lineterm=""))
        lines += diff[:DIFF_LINES] + (["..."] if len(diff) > DIFF_LINES else [])
    return "\n".join(lines)


def syntax_error(path: str, text: str) -> str | None:
    """Why ``text`` does not parse as the file ``path`` names by its suffix (Python, JSON,
    TOML); None when it parses or the suffix has no parser here."""
    suffix = os.path.splitext(path)[1].lower()
    try:
        if suffix == ".py":
            compile(text, path, "exec", dont_inherit=True)
        elif suffix == ".json":
            json.loads(text)
        elif suffix == ".toml":
            tomllib.loads(text)
    except SyntaxError as exc:
        return f"{type(exc).__name__} at line {exc.lineno}: {exc.msg}"
    except ValueError as exc:  # json.JSONDecodeError and tomllib.TOMLDecodeError
        return str(exc).splitlines()[0]
    return None


def broken_files(before: Snapshot, now: Snapshot) -> dict[str, str]:
    """The files of ``before.names`` that parsed (or did not exist) then and no longer parse:
    a change broke them. Path -> why."""
    broken = {}
    for name in before.names:
        old, new = before.texts.get(name), now.texts.get(name)
        if new is None or old == new:
            continue
        if name in before.files and (old is None or syntax_error(name, old) is not None):
            continue  # unreadable or already broken before: not this change's doing
        why = syntax_error(name, new)
        if why is not None:
            broken[name] = why
    return broken


def still_parses(root: Path, name: str) -> bool:
    """Whether the file ``name`` parses now (a file that is gone or unreadable counts)."""
    text = _read_text(root / name)
    return text is None or syntax_error(name, text) is None


def _what(path: str, before: Snapshot, now: Snapshot) -> str:
    if path not in now.files:
        return f"{path} (removed)"
    if path not in before.files:
        return f"{path} (created, {now.files[path][0]} bytes)"
    old, new = before.files[path][0], now.files[path][0]
    return f"{path} ({old} -> {new} bytes{', now empty' if new == 0 else ''})"
