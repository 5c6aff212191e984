"""Workspace confinement: every path a coding tool touches must resolve inside the workspace.

Tools open what they touch through ``Workspace.beneath`` (see ``_beneath``), which walks the
path from the root one component at a time, so a folder swapped for a symlink while the tool
runs cannot lead it outside. ``resolve`` is the same judgement made on names, for permission
rules and messages.

A path is joined to the workspace root (absolute paths are taken as they are), then resolved
with every symlink followed. The resolved path must lie under the real workspace root or one of
the allowed extra roots; ``..`` that climbs out for good, an absolute path elsewhere and a symlink whose
target is elsewhere are all refused the same way. Checking the *resolved* path is what makes
symlinks safe: a link inside the tree that points at ``/etc`` resolves to ``/etc``.

``WriteGate`` is the last line of the coding agent's policy (``steerable.coding.policy``): a
turn whose request asks for no change is closed, and the tools that change files check it
themselves, so no call the model makes, approved or not, can change a file in such a turn.
The gate is decided where the turn runs; a call run by another process (a Temporal activity)
brings its turn's verdict with it (``WriteGate.applied``, ``steerable.tools.CarriedState``).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, TypeVar

from steerable.coding._beneath import Located, beneath, entry_stat
from steerable.errors import ConfigurationError, ToolError

T = TypeVar("T")

__all__ = ["Workspace", "WriteGate"]

# The verdict a call brought from where its turn runs: (gate, turn id, refusal). Held in the
# call's context, so concurrent calls of other turns on the same worker do not see it, and a
# sync tool's worker thread (which runs in a copy of the context) does.
_BROUGHT: ContextVar[tuple[WriteGate, str, str | None] | None] = ContextVar(
    "steerable_write_gate_brought", default=None)


class WriteGate:
    """Which turns may change files: every turn unless closed, or, once ``close_by_default``
    was called (by the policy), only the turns opened. Failing safe: a turn the policy never
    got to read (its hook failed or timed out) stays closed."""

    def __init__(self) -> None:
        self._closed: dict[str, str] = {}
        self._opened: set[str] = set()
        self._default: str | None = None

    def close_by_default(self, why: str) -> None:
        self._default = why

    def close(self, turn_id: str, why: str) -> None:
        self._opened.discard(turn_id)
        self._closed[turn_id] = why

    def open(self, turn_id: str) -> None:
        self._closed.pop(turn_id, None)
        if self._default is not None:
            self._opened.add(turn_id)

    def forget(self, turn_id: str) -> None:
        """The turn ended: drop what was said about it."""
        self._closed.pop(turn_id, None)
        self._opened.discard(turn_id)

    def refusal(self, turn_id: str) -> str | None:
        """Why ``turn_id`` may not change files, or None when it may."""
        brought = _BROUGHT.get()
        if brought is not None and brought[0] is self and brought[1] == turn_id:
            return brought[2]
        if turn_id in self._closed:
            return self._closed[turn_id]
        return None if turn_id in self._opened else self._default

    def export(self, turn_id: str) -> str | None:
        """The verdict on ``turn_id`` to send with a call run elsewhere (``CarriedState``)."""
        return self.refusal(turn_id)

    @contextmanager
    def applied(self, turn_id: str, value: object) -> Iterator[None]:
        """Judge ``turn_id`` by ``value`` (what ``export`` said where the turn runs) within:
        this process may never have seen the turn. A value that is no verdict closes it."""
        why = value if value is None or isinstance(value, str) else (
            f"the turn's verdict came in an unknown form ({type(value).__name__})")
        token = _BROUGHT.set((self, turn_id, why))
        try:
            yield
        finally:
            _BROUGHT.reset(token)

    def check(self, turn_id: str) -> None:
        """Raise ``ToolError`` when ``turn_id`` may not change files."""
        why = self.refusal(turn_id)
        if why is not None:
            raise ToolError(f"nothing was changed: {why}")


def _check(path: str) -> None:
    if not isinstance(path, str) or not path.strip():
        raise ToolError("path must be a non-empty string (relative to the workspace root)")
    if "\x00" in path:
        raise ToolError("path must not contain a NUL character")


class Workspace:
    """The root the coding tools work in, plus any extra roots they may also use."""

    def __init__(self, root: str | os.PathLike[str],
                 extra_roots: Iterable[str | os.PathLike[str]] = ()) -> None:
        real = Path(os.path.realpath(root))
        if not real.is_dir():
            raise ConfigurationError(f"workspace {os.fspath(root)!r} is not a directory")
        self.root = real
        self.extra_roots: tuple[Path, ...] = tuple(
            Path(os.path.realpath(os.path.expanduser(p))) for p in extra_roots
        )
        self.gate = WriteGate()

    @property
    def roots(self) -> tuple[Path, ...]:
        return (self.root, *self.extra_roots)

    def contains(self, resolved: Path) -> bool:
        return any(resolved == r or resolved.is_relative_to(r) for r in self.roots)

    def beneath(self, path: str, op: Callable[[Located], T], *, create_dirs: bool = False) -> T:
        """Run ``op`` on ``path`` opened beneath the roots (``_beneath.beneath``)."""
        _check(path)
        try:
            return beneath(path, self.roots, op, create_dirs=create_dirs)
        except FileNotFoundError:
            raise  # each tool says "does not exist" in its own words
        except OSError as exc:
            raise ToolError(f"{path}: {exc.strerror or exc}") from None

    def kind(self, path: str) -> tuple[Path, bool]:
        """Where ``path`` leads beneath the roots, and whether it is a folder.

        ``FileNotFoundError`` when it does not exist."""
        return self.beneath(path, lambda w: (w.path, stat.S_ISDIR(entry_stat(w).st_mode)))

    def resolve(self, path: str) -> Path:
        """The real path ``path`` names, or a ``ToolError`` if it leaves the allowed roots."""
        _check(path)
        candidate = Path(os.path.expanduser(path))
        if not candidate.is_absolute():
            candidate = self.root / candidate
        # realpath follows symlinks as far as they exist, so a dangling link or a path through a
        # linked directory is judged by where it really lands.
        try:
            resolved = Path(os.path.realpath(candidate))
        except OSError as exc:  # a link changed while it was being read
            raise ToolError(f"path {path!r} could not be resolved: {exc.strerror}") from None
        if not self.contains(resolved):
            raise ToolError(
                f"path {path!r} is outside the workspace ({self.root}); it resolves to "
                f"{resolved}. Use a path inside the workspace"
                + (" or an allowed extra root" if self.extra_roots else "") + "."
            )
        return resolved

    def path_subjects(self, arguments: Mapping[str, Any], key: str = "path") -> list[str]:
        """The path a call touches, as permission rules see it: resolved, then shown relative to
        the root, so ``./a/../secrets/k`` and an absolute path both read ``secrets/k``."""
        raw = arguments.get(key, ".")
        return [self.display(self.resolve(str(raw)))]

    def display(self, resolved: Path) -> str:
        """How to show ``resolved`` to the model: relative to the root when inside it."""
        if resolved == self.root:
            return "."
        if resolved.is_relative_to(self.root):
            return resolved.relative_to(self.root).as_posix()
        return str(resolved)

    def __repr__(self) -> str:
        return f"<Workspace {self.root} extra={[str(p) for p in self.extra_roots]}>"
