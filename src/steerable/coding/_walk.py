"""Walking the workspace the way a developer expects: .gitignore respected, .git skipped,
symlinks never followed out of the allowed roots.

The .gitignore support covers what repositories use in practice: comments, ``!`` negation,
``/``-anchored and unanchored patterns, trailing ``/`` for directories only, ``*``, ``?``,
``[...]`` and ``**``, and a .gitignore in every directory (deeper files win, last rule wins).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from steerable.coding._beneath import Located, entry_stat, open_dir, open_regular
from steerable.coding._workspace import Workspace
from steerable.errors import ToolError

__all__ = ["FOUND_NOTHING", "IgnoreRules", "WalkedFile", "glob_to_regex", "read_walked",
           "walk_files"]

FOUND_NOTHING = "found_nothing"
"""Metadata key of a search result that matched nothing (``grep``, ``find``): the tool policy
does not count such a search as a look at the workspace."""

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

    def load(self, rel: str, text: str) -> None:
        """Add the rules of the .gitignore ``text`` found in folder ``rel`` (once per folder)."""
        if rel in self._by_dir:
            return
        rules: list[_Rule] = []
        for line in text.splitlines():
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


@dataclass(frozen=True, slots=True)
class WalkedFile:
    """A file met on a walk: its path (for display and rules) and how to open it safely."""

    path: Path
    rel: str
    """Relative to where the walk started ('/'-separated; a file walked alone: its name)."""
    dir_fd: int
    """The open folder holding it; valid until the walk moves on."""
    name: str
    link: bool
    """A symbolic link: open it with ``read_walked``, which follows it only inside the roots."""


def _gitignore_text(dir_fd: int) -> str:
    try:
        fd = os.open(".gitignore", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
    except OSError:
        return ""
    with os.fdopen(fd, "rb") as fh:
        return fh.read(1 << 20).decode("utf-8", "replace")


@dataclass
class _Start:
    fd: int
    """The open folder the walk starts in (the file's folder when one file is walked)."""
    path: Path
    single: str
    """"" or the one file to walk."""
    gitignores: list[tuple[str, str]]
    """(folder relative to the workspace root, .gitignore text) for the folders down to it."""


def _open_start(ws: Workspace, path: str) -> _Start:
    def opened(where: Located) -> _Start:
        inside = where.root == ws.root
        # where.fds[i] is the folder where.parts[:i]: read the .gitignore of each from it.
        texts = [("/".join(where.parts[:i]), _gitignore_text(fd))
                 for i, fd in enumerate(where.fds)] if inside else []
        if stat.S_ISDIR(entry_stat(where).st_mode):
            fd = open_dir(where)
            if inside and where.name:
                texts.append(("/".join([*where.parts, where.name]), _gitignore_text(fd)))
            return _Start(fd, where.path, "", texts)
        return _Start(os.dup(where.dir_fd), where.path.parent, where.name, texts)

    return ws.beneath(path, opened)


def walk_files(
    ws: Workspace, path: str, *, respect_gitignore: bool = True,
    refused: Callable[[str], bool] | None = None,
) -> Iterator[WalkedFile]:
    """Every file under ``path`` (sorted per folder), skipping ignored and escaping paths.

    Folders are opened beneath the one above them (``os.fwalk``, no links followed), so a folder
    swapped for a link during the walk is not entered. ``refused`` (given the path as permission
    rules see it) leaves out files and whole folders that a deny or ask rule names.
    """
    try:
        start = _open_start(ws, path)
    except FileNotFoundError:
        raise ToolError(f"{path} does not exist") from None
    try:
        rules = IgnoreRules()
        use_rules = respect_gitignore and start.path.is_relative_to(ws.root)
        for folder, text in start.gitignores:
            rules.load(folder, text)  # the .gitignore files above the start apply to it too
        if start.single:
            if refused is None or not refused(ws.display(start.path / start.single)):
                # Not a link when the walk ended; read_walked opens it without following one.
                yield WalkedFile(start.path / start.single, start.single, start.fd, start.single,
                                 False)
            return
        yield from _walk_tree(ws, start.fd, start.path, rules if use_rules else None, refused)
    finally:
        os.close(start.fd)


def _walk_tree(ws: Workspace, top_fd: int, start: Path, rules: IgnoreRules | None,
               refused: Callable[[str], bool] | None) -> Iterator[WalkedFile]:
    for folder, dirs, files, dir_fd in os.fwalk(".", dir_fd=top_fd, follow_symlinks=False):
        here = start if folder == "." else start / folder.removeprefix("./")
        rel_here = here.relative_to(ws.root).as_posix() if rules is not None else ""
        rel_here = "" if rel_here == "." else rel_here
        if rules is not None:
            rules.load(rel_here, _gitignore_text(dir_fd))
        keep = []
        for d in sorted(dirs):
            rel = f"{rel_here}/{d}" if rel_here else d
            if d in ALWAYS_SKIPPED or (rules is not None and rules.ignored(rel, True)):
                continue
            if refused is not None and refused(ws.display(here / d)):
                continue
            keep.append(d)
        dirs[:] = keep
        for f in sorted(files):
            rel = f"{rel_here}/{f}" if rel_here else f
            if rules is not None and rules.ignored(rel, False):
                continue
            if refused is not None and refused(ws.display(here / f)):
                continue
            try:
                mode = os.stat(f, dir_fd=dir_fd, follow_symlinks=False).st_mode
            except OSError:
                continue  # gone since the folder was listed
            walked = f if folder == "." else f"{folder.removeprefix('./')}/{f}"
            yield WalkedFile(here / f, walked, dir_fd, f, stat.S_ISLNK(mode))


def read_walked(ws: Workspace, file: WalkedFile, max_bytes: int) -> bytes | None:
    """The content of a walked file, or None when it is not a regular file inside the roots,
    is bigger than ``max_bytes`` or cannot be read."""
    def read(where: Located) -> bytes | None:
        with open_regular(where) as fh:
            if os.fstat(fh.fileno()).st_size > max_bytes:
                return None
            return fh.read(max_bytes + 1)

    try:
        if file.link:  # followed only beneath the roots, like any path a tool is given
            return ws.beneath(ws.display(file.path), read)
        fd = os.open(file.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=file.dir_fd)
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fd).st_mode) or os.fstat(fd).st_size > max_bytes:
                return None
            return fh.read(max_bytes + 1)
    except (OSError, ToolError):
        return None
