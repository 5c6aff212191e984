"""Walking the workspace the way a developer expects: .gitignore respected, .git skipped,
symlinks never followed out of the allowed roots.

The .gitignore support covers what repositories use in practice: comments, ``!`` negation,
``/``-anchored and unanchored patterns, trailing ``/`` for directories only, ``*``, ``?``,
``[...]`` and ``**``, and a .gitignore in every directory (deeper files win, last rule wins).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from steerable.coding._workspace import Workspace

__all__ = ["IgnoreRules", "glob_to_regex", "walk_files"]

ALWAYS_SKIPPED = frozenset({".git", ".hg", ".svn"})


def glob_to_regex(pattern: str) -> str:
    """Translate a gitignore-style glob (``*`` stays inside one folder, ``**`` crosses them)."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            if pattern.startswith("**/", i):
                out.append("(?:.*/)?")
                i += 3
                continue
            if pattern.startswith("**", i):
                out.append(".*")
                i += 2
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = pattern.find("]", i + 2)
            if end == -1:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1:end].replace("\\", "\\\\")
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body}]")
                i = end
        elif c == "\\" and i + 1 < n:
            i += 1
            out.append(re.escape(pattern[i]))
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


@dataclass(frozen=True, slots=True)
class _Rule:
    regex: re.Pattern[str]
    negate: bool
    dir_only: bool
    base: str
    """The folder of the .gitignore, relative to the workspace root ('' for the root)."""


def _parse_line(line: str, base: str) -> _Rule | None:
    line = line.rstrip("\n").rstrip("\r")
    if not line.strip() or line.startswith("#"):
        return None
    if not line.endswith("\\ "):
        line = line.rstrip(" ")
    negate = line.startswith("!")
    if negate or line.startswith(("\\!", "\\#")):
        line = line[1:]
    dir_only = line.endswith("/")
    line = line.rstrip("/")
    if not line:
        return None
    anchored = "/" in line
    line = line.lstrip("/")
    body = glob_to_regex(line)
    regex = re.compile(("^" if anchored else "^(?:.*/)?") + body + "$")
    return _Rule(regex, negate, dir_only, base)


class IgnoreRules:
    """The .gitignore rules met so far on a walk, by folder."""

    def __init__(self) -> None:
        self._by_dir: dict[str, list[_Rule]] = {}

    def load(self, folder: Path, rel: str, before: str = "") -> None:
        """Read ``folder``'s .gitignore; ``before``: rules that come first (so the file's own
        win), such as a repository's ``.git/info/exclude`` for its root."""
        if rel in self._by_dir:
            return
        rules: list[_Rule] = []
        try:
            text = (folder / ".gitignore").read_text(encoding="utf-8", errors="replace")
        except OSError:
            text = ""
        for line in [*before.splitlines(), *text.splitlines()]:
            rule = _parse_line(line, rel)
            if rule is not None:
                rules.append(rule)
        self._by_dir[rel] = rules

    def ignored(self, rel: str, is_dir: bool) -> bool:
        """Is ``rel`` (relative to the workspace root, '/'-separated) ignored?"""
        verdict = False
        parts = rel.split("/")
        # Rules of shallower .gitignore files first, so deeper ones (and later lines) win.
        for depth in range(len(parts)):
            base = "/".join(parts[:depth])
            sub = "/".join(parts[depth:])
            for rule in self._by_dir.get(base, ()):
                if rule.dir_only and not is_dir:
                    continue
                if rule.regex.match(sub):
                    verdict = not rule.negate
        return verdict


def walk_files(
    ws: Workspace, start: Path, *, respect_gitignore: bool = True,
    refused: Callable[[str], bool] | None = None,
) -> Iterator[Path]:
    """Every file under ``start`` (sorted per folder), skipping ignored and escaping paths.

    ``refused`` (given the path as permission rules see it) leaves out files and whole folders
    that a deny or ask rule names.
    """
    rules = IgnoreRules()
    root = ws.root
    inside_root = start == root or start.is_relative_to(root)
    if respect_gitignore and inside_root:
        # The .gitignore files of the folders above ``start`` apply to it too.
        rel_parts = start.relative_to(root).parts
        for depth in range(len(rel_parts) + 1):
            rules.load(root.joinpath(*rel_parts[:depth]), "/".join(rel_parts[:depth]))
    if start.is_file():
        if refused is None or not refused(ws.display(start)):
            yield start
        return
    for folder, dirs, files in os.walk(start, followlinks=False):
        here = Path(folder)
        rel_here = here.relative_to(root).as_posix() if inside_root else ""
        rel_here = "" if rel_here == "." else rel_here
        if respect_gitignore and inside_root:
            rules.load(here, rel_here)
        keep = []
        for d in sorted(dirs):
            if d in ALWAYS_SKIPPED:
                continue
            rel = f"{rel_here}/{d}" if rel_here else d
            if respect_gitignore and inside_root and rules.ignored(rel, True):
                continue
            if refused is not None and refused(ws.display(here / d)):
                continue
            keep.append(d)
        dirs[:] = keep
        for f in sorted(files):
            path = here / f
            rel = f"{rel_here}/{f}" if rel_here else f
            if respect_gitignore and inside_root and rules.ignored(rel, False):
                continue
            if path.is_symlink() and not ws.contains(Path(os.path.realpath(path))):
                continue
            if refused is not None and refused(ws.display(path)):
                continue
            yield path
