"""Undo that covers bash: snapshots of the workspace before (and after) each tool call that may
change it, and undo, redo and rewind over them.

The store lives in steerable's data folder, one per workspace (``snapshots/<key>/``): objects
(``_snap_objects``), the scan index (``_snap_scan``) and one journal per session
(``_undo_journal``). The user's ``.git`` is never read or written. Every write of the store
happens under one lock, so sessions of several processes can share a workspace.

Undo works per turn: a step is what one turn's calls changed, path by path (each call's tree
before against its tree after). Undoing a step puts those paths back as they were before the
turn, but first checks that each is still as the turn left it; a path changed since (by the user,
by another session) is a conflict, and undo refuses, naming them, unless forced. Redo re-applies
the last undone group with the same check the other way round.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from steerable.coding._snap_objects import ObjectStore, SnapshotStoreError, StoreLock
from steerable.coding._snap_scan import Entry, Scanner, diff_trees, flatten
from steerable.coding._undo_apply import apply_entries
from steerable.coding._undo_journal import Journal, JournalState, Step
from steerable.errors import SteerableError

__all__ = [
    "NothingToUndoError",
    "SnapshotLimits",
    "SnapshotStoreError",
    "Snapshots",
    "StepInfo",
    "UndoConflictError",
    "UndoResult",
    "remove_session_snapshots",
]

_SESSION_OK = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
_PRUNE_EVERY = 24 * 3600.0

Changes = dict[str, tuple[Entry | None, Entry | None]]
_Chooser = Callable[[list[Step]], list[Step]]
_StepFilter = Callable[[Step], bool]


class UndoConflictError(SteerableError):
    """Undo (or redo) would overwrite changes made since: ``paths`` names them."""

    def __init__(self, message: str, paths: Sequence[str]) -> None:
        super().__init__(message)
        self.paths = tuple(paths)


class NothingToUndoError(SteerableError):
    """There is no step to undo (or redo) in this session."""


@dataclass(frozen=True, slots=True)
class SnapshotLimits:
    """What the snapshot store keeps: files up to ``max_file_size`` bytes (bigger ones are left
    out of snapshots, so undo never touches them), steps for ``max_age`` seconds, and at most
    ``max_store_size`` bytes of objects (oldest steps pruned first)."""

    max_file_size: int = 50 * 1024 * 1024
    max_store_size: int = 2 * 1024 * 1024 * 1024
    max_age: float = 30 * 24 * 3600.0

    def __post_init__(self) -> None:
        for name in ("max_file_size", "max_store_size", "max_age"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ValueError(f"SnapshotLimits.{name} must be a positive number, got {value!r}")


@dataclass(frozen=True, slots=True)
class StepInfo:
    """One turn's changes to the workspace, as listed by ``steerable undo --list``."""

    turn_id: str
    time: float
    files: tuple[str, ...]
    undone: bool


@dataclass(frozen=True, slots=True)
class UndoResult:
    turns: tuple[str, ...]
    """The turns undone (or redone), latest first for undo."""
    paths: tuple[str, ...]
    """The paths written or removed."""
    forced_over: tuple[str, ...] = ()
    """Paths changed since that a forced undo overwrote."""


def store_dir(data_dir: str | os.PathLike[str], workspace: str | os.PathLike[str]) -> Path:
    """The snapshot store of ``workspace`` under ``data_dir``."""
    real = os.path.realpath(workspace)
    key = hashlib.sha256(os.fsencode(real)).hexdigest()[:16]
    return Path(data_dir).expanduser() / "snapshots" / key


class Snapshots:
    """The snapshots of one workspace, kept under ``data_dir/snapshots``."""

    def __init__(self, workspace: str | os.PathLike[str], data_dir: str | os.PathLike[str], *,
                 limits: SnapshotLimits | None = None) -> None:
        self.workspace = Path(os.path.realpath(workspace))
        if not self.workspace.is_dir():
            raise ValueError(f"workspace {os.fspath(workspace)!r} is not a folder")
        self.limits = limits or SnapshotLimits()
        self.root = store_dir(data_dir, self.workspace)
        self.objects = ObjectStore(self.root)
        own = os.path.realpath(Path(data_dir).expanduser())  # a data folder inside the workspace
        self._scanner = Scanner(self.workspace, self.objects, self.root / "index",
                                max_file_size=self.limits.max_file_size,
                                skip=lambda path: path == own)
        self._lock_path = self.root / "lock"
        self._next_prune = 0.0

    # -- taking snapshots -----------------------------------------------------------------------

    def lock(self) -> StoreLock:
        return StoreLock(self._lock_path)

    def snapshot(self, session_id: str, turn_id: str, call_id: str, tool: str,
                 phase: str = "before") -> str:
        """Snapshot the workspace for a call (``phase`` "before" or "after") and return the tree."""
        if phase not in ("before", "after"):
            raise ValueError(f"phase must be 'before' or 'after', got {phase!r}")
        journal = self._journal(session_id)
        with self.lock():
            self._init_store()
            tree = self._scanner.snapshot()
            journal.append({"op": "snap", "turn": turn_id, "call": call_id, "tool": tool,
                            "phase": phase, "tree": tree, "time": time.time()})
        if time.time() >= self._next_prune:
            self.prune_if_due()
        return tree

    def open_call(self, session_id: str, call_id: str) -> str | None:
        """The turn of ``call_id`` if its "before" snapshot is in the journal and its "after"
        is not (taken by another process, a worker that ran the call's ``before_tool``)."""
        turn = None
        for rec in self._journal(session_id).records():
            if rec["op"] == "snap" and rec.get("call") == call_id:
                turn = None if rec.get("phase") == "after" else str(rec["turn"])
        return turn

    @property
    def skipped(self) -> tuple[str, ...]:
        """Files the last snapshot left out for being over ``limits.max_file_size``."""
        return tuple(self._scanner.skipped)

    def _init_store(self) -> None:
        marker = self.root / "workspace"
        if not marker.exists():
            marker.write_text(str(self.workspace) + "\n")
            # A new store has nothing to prune: the first pruning is due a day from now, not
            # in the middle of the first snapshot.
            (self.root / "pruned").touch()

    def _journal(self, session_id: str) -> Journal:
        if not session_id or not set(session_id) <= _SESSION_OK or session_id[0] in ".-":
            raise ValueError(f"invalid session id {session_id!r}")
        return Journal(self.root / "sessions" / f"{session_id}.jsonl")

    # -- reading the steps ----------------------------------------------------------------------

    def steps(self, session_id: str) -> list[StepInfo]:
        """The session's steps that changed something, oldest first."""
        state = self._journal(session_id).state()
        with self.lock():
            current = None if all(c.after for s in state.steps.values() for c in s.calls) \
                else self._scanner.snapshot()
            out = []
            for step in state.steps.values():
                changes = self._changes(step, state, current)
                if changes:
                    out.append(StepInfo(step.turn_id, step.time, tuple(sorted(changes)),
                                        step.undone))
        return out

    def sessions(self) -> list[str]:
        """Sessions with a journal in this store, the most recently written first."""
        folder = self.root / "sessions"
        if not folder.is_dir():
            return []
        paths = sorted(folder.glob("*.jsonl"), key=lambda p: p.stat().st_mtime, reverse=True)
        return [p.stem for p in paths]

    def _changes(self, step: Step, state: JournalState, current: str | None) -> Changes:
        """path -> (entry before the turn, entry after it) for each path the turn changed."""
        merged: Changes = {}
        for call in step.calls:
            after = call.after or state.undo_trees.get(step.turn_id) or current
            if after is None:
                continue
            for path, (before, now) in diff_trees(self.objects, call.before, after).items():
                first = merged[path][0] if path in merged else before
                merged[path] = (first, now)
        return {p: pair for p, pair in merged.items() if pair[0] != pair[1]}

    # -- undo, redo, rewind ---------------------------------------------------------------------

    def undo(self, session_id: str, n: int = 1, *, force: bool = False) -> UndoResult:
        """Undo the session's last ``n`` steps (latest first)."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"n must be a positive int, got {n!r}")
        return self._undo(session_id, lambda done: done[-n:], force)

    def undo_turns(self, session_id: str, turn_ids: Iterable[str], *,
                   force: bool = False) -> UndoResult:
        """Undo the steps of the given turns (an undo button per turn)."""
        wanted = set(turn_ids)
        return self._undo(session_id, lambda done: [s for s in done if s.turn_id in wanted],
                          force)

    def undo_since(self, session_id: str, since: float, *, force: bool = False) -> UndoResult:
        """Undo every step that started after ``since`` (rewinding the code to a turn)."""
        return self._undo(session_id, lambda done: [s for s in done if s.time > since], force)

    def _undo(self, session_id: str, choose: _Chooser, force: bool) -> UndoResult:
        journal = self._journal(session_id)
        with self.lock():
            state = journal.state()
            current = self._scanner.snapshot()
            done = [s for s in state.steps.values() if not s.undone]
            changed = [(s, c) for s in done if (c := self._changes(s, state, current))]
            by_step = dict(changed)
            chosen = [s for s in choose([s for s, _ in changed]) if s in by_step]
            if not chosen:
                raise NothingToUndoError(f"session {session_id} has no change left to undo")
            result = self._restore(current, [(s, by_step[s], False) for s in reversed(chosen)],
                                   force, "undo")
            journal.append({"op": "undo", "turns": list(result.turns), "from": current,
                            "time": time.time()})
        return result

    def redo_turns(self, session_id: str) -> list[str]:
        """The turns ``redo`` would bring back (empty: nothing to redo)."""
        redo = self._journal(session_id).state().redo
        return list(redo[-1][0]) if redo else []

    def redo(self, session_id: str, *, force: bool = False) -> UndoResult:
        """Re-apply the last undone group of steps."""
        journal = self._journal(session_id)
        with self.lock():
            state = journal.state()
            if not state.redo:
                raise NothingToUndoError(f"session {session_id} has nothing to redo")
            turns, _ = state.redo[-1]
            current = self._scanner.snapshot()
            steps = [state.steps[t] for t in reversed(turns)]
            plan = [(s, self._changes(s, state, current), True) for s in steps]
            result = self._restore(current, plan, force, "redo")
            journal.append({"op": "redo", "turns": turns, "time": time.time()})
        return result

    def _restore(self, current: str, plan: list[tuple[Step, Changes, bool]], force: bool,
                 verb: str) -> UndoResult:
        """Apply each step's changes (forward for redo, backward for undo) to the current tree,
        checking first that every path is as the step expects."""
        now_flat = flatten(self.objects, current)
        virtual: dict[str, Entry | None] = {}
        conflicts: list[str] = []
        for _step, changes, forward in plan:
            for path, (before, after) in changes.items():
                expected, wanted = (before, after) if forward else (after, before)
                now = virtual[path] if path in virtual else now_flat.get(path)
                if now != expected and path not in conflicts:
                    conflicts.append(path)
                virtual[path] = wanted
        if conflicts and not force:
            shown = ", ".join(sorted(conflicts)[:20]) + (" ..." if len(conflicts) > 20 else "")
            raise UndoConflictError(
                f"cannot {verb}: {len(conflicts)} file(s) changed since the agent's turn: "
                f"{shown}. Save what you need, then use --force to overwrite them.", conflicts)
        _refuse_links(virtual, now_flat, verb)
        paths = apply_entries(str(self.workspace), self.objects, virtual, now_flat)
        return UndoResult(tuple(s.turn_id for s, _, _ in plan), tuple(paths),
                          tuple(sorted(conflicts)))

    # -- pruning and removal --------------------------------------------------------------------

    def delete_session(self, session_id: str) -> bool:
        """Remove the session's journal and the objects nothing else uses."""
        journal = self._journal(session_id)
        with self.lock():
            try:
                journal.path.unlink()
            except FileNotFoundError:
                return False
            self._collect()
        return True

    def prune_if_due(self) -> None:
        """Prune at most once a day per store (the first snapshot after that does it)."""
        marker = self.root / "pruned"
        try:
            last = marker.stat().st_mtime
        except FileNotFoundError:
            last = 0.0
        if time.time() - last >= _PRUNE_EVERY:
            self.prune()
        else:
            self._next_prune = last + _PRUNE_EVERY

    def prune(self, *, now: float | None = None) -> int:
        """Drop steps older than ``limits.max_age``, then the oldest steps while the objects
        take more than ``limits.max_store_size``; returns the number of objects removed."""
        now = time.time() if now is None else now
        removed = 0
        with self.lock():
            self._drop_steps(lambda step: now - step.time > self.limits.max_age)
            removed += self._collect()
            while self.objects.size() > self.limits.max_store_size:
                oldest = self._oldest_steps()
                if not oldest:
                    break
                self._drop_steps(_among(oldest))
                removed += self._collect()
            marker = self.root / "pruned"
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.touch()
        self._next_prune = time.time() + _PRUNE_EVERY
        return removed

    def _journals(self) -> list[Journal]:
        folder = self.root / "sessions"
        return [Journal(p) for p in folder.glob("*.jsonl")] if folder.is_dir() else []

    def _oldest_steps(self) -> set[tuple[str, float]]:
        steps = sorted((s.time, s.turn_id) for j in self._journals()
                       for s in j.state().steps.values())
        cut = max(1, len(steps) // 10)  # a tenth at a time: pruning is rare, a store large
        return {(turn, t) for t, turn in steps[:cut]}

    def _drop_steps(self, drop: _StepFilter) -> None:
        for journal in self._journals():
            records = journal.records()
            state = journal.state()
            gone = {t for t, s in state.steps.items() if drop(s)}
            if not gone:
                continue
            kept = [r for r in records if not (r["op"] == "snap" and r.get("turn") in gone)]
            if any(r["op"] == "snap" for r in kept):
                journal.rewrite(kept)
            else:
                journal.path.unlink(missing_ok=True)

    def _collect(self) -> int:
        """Delete the objects no journal reaches, and temporaries of killed writers."""
        trees = [t for j in self._journals() for t in j.state().trees()]
        keep = self._scanner.reachable_from(iter(trees))
        removed = 0
        for digest, path in list(self.objects.all_objects()):
            if digest not in keep:
                path.unlink(missing_ok=True)
                removed += 1
        for stray in self.objects.stray_temporaries():
            stray.unlink(missing_ok=True)
        self._scanner.forget(lambda digest: digest in keep)
        return removed


def _refuse_links(target: dict[str, Entry | None], now: dict[str, Entry], verb: str) -> None:
    """Refuse, even when forced, to write below a folder that is now a symlink and stays one:
    the write would land wherever the link points, maybe outside the workspace."""
    under: dict[str, str] = {}  # path -> the symlink above it
    for path, wanted in target.items():
        if wanted is None and path not in now:
            continue  # nothing there to remove, nothing to write
        parts = path.split("/")
        for depth in range(1, len(parts)):
            folder = "/".join(parts[:depth])
            link = now.get(folder)
            if link is not None and link[0] == "l" and target.get(folder, link) == link:
                under[path] = folder
                break
    if under:
        shown = ", ".join(f"{p} (below the symlink {f})" for p, f in list(under.items())[:5])
        raise UndoConflictError(
            f"cannot {verb}: {len(under)} path(s) lie below a folder that is now a symlink: "
            f"{shown}; put the folder back first", sorted(under))


def _among(steps: set[tuple[str, float]]) -> _StepFilter:
    return lambda step: (step.turn_id, step.time) in steps


def remove_session_snapshots(data_dir: str | os.PathLike[str], session_id: str) -> int:
    """Remove ``session_id``'s snapshots from every workspace's store; how many stores had it."""
    base = Path(data_dir).expanduser() / "snapshots"
    count = 0
    if not base.is_dir():
        return 0
    for store in sorted(base.iterdir()):
        marker = store / "workspace"
        journal = store / "sessions" / f"{session_id}.jsonl"
        if not journal.exists():
            continue
        try:
            workspace = marker.read_text().strip()
        except OSError:
            workspace = ""
        if workspace and os.path.isdir(workspace) and store_dir(data_dir, workspace) == store:
            count += Snapshots(workspace, data_dir).delete_session(session_id)
        else:  # the folder is gone: so is any use for its store
            journal.unlink()
            count += 1
    return count

