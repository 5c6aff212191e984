"""Opening paths beneath a root so that no race can lead outside it.

Checking a resolved path and then opening it by name leaves a window: another process (a build,
an editor, a hostile script) can swap a folder for a symlink in between, and the open lands
wherever the link points. Here a path is walked one component at a time from an open descriptor
of the root: each folder is opened relative to the one before it with ``O_NOFOLLOW``, a symlink
met on the way is read and its target walked the same way, and the last component is opened
with ``O_NOFOLLOW`` too. Where the walk would leave the roots (an absolute target, a ``..``
above the root) it is judged as the kernel would judge it (``_landing``): a path that goes out
and comes back in lands inside, as ``os.path.realpath`` says; anything else is ``Outside``.
No descriptor is ever opened outside a root. Whatever is swapped meanwhile, every open is
relative to a folder already known to be inside, and no open follows a link the walk did not
check; a swap that makes an open fail is retried from the start a few times, then reported.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import BinaryIO, TypeVar

from steerable.errors import ToolError

__all__ = ["Located", "Outside", "Raced", "beneath", "entry_stat", "open_beneath", "open_dir",
           "open_regular"]

T = TypeVar("T")

_MAX_LINKS = 40
_RETRIES = 8
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC
# Errors of an open by name that mean "the entry changed under us" (a folder became a link).
RACED = frozenset({errno.ELOOP, errno.ENOTDIR, errno.EMLINK})


class Outside(ToolError):
    """The path (or a link on the way) leads outside the roots."""


class Raced(Exception):
    """An entry changed between looking at it and opening it: walk again."""


@dataclass
class Located:
    """An open folder beneath a root and a name in it (``""``: the folder itself)."""

    root: Path
    parts: list[str]
    """The physical components from the root to the folder (no links, no ``..``)."""
    name: str
    fds: list[int] = field(default_factory=list)

    @property
    def dir_fd(self) -> int:
        return self.fds[-1]

    @property
    def path(self) -> Path:
        """Where the walk arrived, as a path (for display and for rules; never for opening)."""
        return self.root.joinpath(*self.parts, *([self.name] if self.name else []))

    def close(self) -> None:
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds.clear()


def _outside(path: str, roots: Sequence[Path], why: str) -> str:
    extra = " or an allowed extra root" if len(roots) > 1 else ""
    return (f"path {path!r} is outside the workspace ({roots[0]}); {why}. Use a path inside "
            f"the workspace{extra}.")


def _start(path: str, roots: Sequence[Path]) -> tuple[Path, list[str]]:
    """The root ``path`` starts under and the components to walk from it."""
    candidate = PurePosixPath(os.path.expanduser(path))
    if not candidate.is_absolute():
        return roots[0], list(candidate.parts)
    return _landing(path, candidate, roots)


def _landing(path: str, candidate: PurePosixPath, roots: Sequence[Path]) -> tuple[Path, list[str]]:
    """The root the absolute ``candidate`` lies under and the components to walk from it.

    Named under a root: walked from there. Otherwise it is judged by where it resolves to now,
    as the kernel (and ``Workspace.resolve``, and bash in the sandbox) would: a path that leaves
    the roots and comes back in (``../ws/a``, a link to ``/tmp`` that is ``/private/tmp``, a
    link outside that points back at the root) lands inside. Only names are read out there;
    every open still happens beneath a root, and the walk checks the inside part again.
    """
    for root in roots:
        if candidate.is_relative_to(root):
            return root, list(candidate.relative_to(root).parts)
    try:
        real = PurePosixPath(os.path.realpath(candidate))
    except OSError:  # a link on the way changed while it was read
        raise Raced from None
    for root in roots:
        if real.is_relative_to(root):
            return root, list(real.relative_to(root).parts)
    raise Outside(_outside(path, roots, f"it resolves to {real}"))


def _reenter(path: str, candidate: PurePosixPath, roots: Sequence[Path],
             where: Located) -> list[str]:
    """Move ``where`` to the root the absolute ``candidate`` lands under (``_landing``); the
    components left to walk from it."""
    root, todo = _landing(path, candidate, roots)
    where.close()
    where.root = root
    where.parts = []
    where.fds.append(os.open(root, _DIR_FLAGS))
    return todo


def _walk(path: str, roots: Sequence[Path], create_dirs: bool) -> Located:
    root, todo = _start(path, roots)
    where = Located(root, [], "", [os.open(root, _DIR_FLAGS)])
    links = 0
    try:
        while todo:
            comp = todo.pop(0)
            if comp in ("", ".", "/"):
                continue
            if comp == "..":
                if not where.parts:  # above the root: judged like the absolute path it names
                    todo = _reenter(path, PurePosixPath(where.root.parent, *todo), roots, where)
                    continue
                os.close(where.fds.pop())
                where.parts.pop()
                continue
            try:
                info = os.stat(comp, dir_fd=where.dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                if not todo:
                    where.name = comp  # a file to be created
                    return where
                if not create_dirs:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(comp, dir_fd=where.dir_fd)
                todo.insert(0, comp)
                continue
            if stat.S_ISLNK(info.st_mode):
                links += 1
                if links > _MAX_LINKS:
                    raise ToolError(f"path {path!r}: too many levels of symbolic links")
                try:
                    target = os.readlink(comp, dir_fd=where.dir_fd)
                except OSError:
                    raise Raced from None  # it was a link a moment ago
                link = PurePosixPath(target)
                if link.is_absolute():
                    todo = _reenter(path, link.joinpath(*todo), roots, where)
                else:
                    todo[:0] = link.parts
                continue
            if not todo:
                where.name = comp
                return where
            if not stat.S_ISDIR(info.st_mode):
                raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), comp)
            try:
                fd = os.open(comp, _DIR_FLAGS, dir_fd=where.dir_fd)
            except OSError as exc:
                if exc.errno in RACED or exc.errno == errno.ENOENT:  # a folder a moment ago
                    raise Raced from None
                raise
            where.fds.append(fd)
            where.parts.append(comp)
        return where
    except BaseException:
        where.close()
        raise


def beneath(path: str, roots: Sequence[Path], op: Callable[[Located], T], *,
            create_dirs: bool = False) -> T:
    """Walk ``path`` beneath ``roots`` (relative paths start at the first) and run ``op`` there.

    ``op`` gets the open folder holding the last component (its descriptors close afterwards)
    and opens what it needs with ``open_beneath``. When an entry is swapped meanwhile (``Raced``)
    the walk and ``op`` run again, so ``op`` must raise ``Raced`` before it changes anything.
    With ``create_dirs`` missing folders on the way are made, each beneath its checked parent.
    """
    for _ in range(_RETRIES):
        try:
            where = _walk(path, roots, create_dirs)
        except Raced:
            continue
        try:
            return op(where)
        except Raced:
            continue
        finally:
            where.close()
    raise ToolError(f"path {path!r} kept changing while it was opened (another process is "
                    "replacing it); try again")


def open_beneath(where: Located, flags: int, mode: int = 0o666) -> int:
    """Open ``where.name`` in its folder without following a link; ``Raced`` on a swap."""
    try:
        return os.open(where.name, flags | os.O_NOFOLLOW | _CLOEXEC, mode, dir_fd=where.dir_fd)
    except OSError as exc:
        if exc.errno in RACED:
            raise Raced from None
        raise


def entry_stat(where: Located) -> os.stat_result:
    """The last component's own status (``where.name`` may be ""); ``Raced`` for a link, since
    the walk followed every link: one there now was put there since."""
    if not where.name:
        return os.fstat(where.dir_fd)
    info = os.stat(where.name, dir_fd=where.dir_fd, follow_symlinks=False)
    if stat.S_ISLNK(info.st_mode):
        raise Raced
    return info


def open_dir(where: Located) -> int:
    """A new descriptor of the folder ``where`` names (``NotADirectoryError`` if it is not)."""
    if not where.name:
        return os.dup(where.dir_fd)
    if not stat.S_ISDIR(entry_stat(where).st_mode):
        raise NotADirectoryError(where.name)
    return open_beneath(where, os.O_RDONLY | os.O_DIRECTORY)


def open_regular(where: Located) -> BinaryIO:
    """The file ``where`` names, open for reading (``IsADirectoryError`` for a folder).

    Opened without blocking, so a FIFO put in its place cannot hang the tool, and refused
    unless it is a regular file.
    """
    if not where.name:
        raise IsADirectoryError(str(where.path))
    fd = open_beneath(where, os.O_RDONLY | os.O_NONBLOCK)
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(str(where.path))
        raise ToolError(f"{where.path} is not a regular file")
    return os.fdopen(fd, "rb")
