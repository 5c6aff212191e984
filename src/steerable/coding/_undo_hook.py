"""The hook that takes undo's snapshots: before and after every tool call that may change the
workspace, whatever the tool (write, edit, bash, an MCP tool not marked read-only).

A call's two snapshots are paired through the journal, not only this object's memory: with
several processes on one store (Temporal workers), the ``after_tool`` of a call whose
``before_tool`` ran elsewhere still takes its "after" snapshot.

It sits on the hook chain rather than inside the tools, so a tool added later is covered
without knowing about undo. Register it with a low priority, so it runs after hooks that
rewrite arguments, and a generous timeout: the first snapshot of a big tree reads every file.
Its methods are synchronous: the loop runs them in a worker thread, off the event loop.

With ``restore_on_abort`` (or after ``restore_when_aborted(session)``), a turn that ends
``aborted`` also has its files put back, by force: a hard abort then takes back everything the
turn did, files included, and not only its messages.
"""

from __future__ import annotations

import logging
import threading

from steerable._events import Event, EventKind, TurnStatus
from steerable._hooks import Hook, HookResult, ToolCallContext, ToolResultContext
from steerable.coding._undo import NothingToUndoError, Snapshots, UndoResult

__all__ = ["SNAPSHOT_HOOK_PRIORITY", "SNAPSHOT_HOOK_TIMEOUT", "SnapshotHook"]

log = logging.getLogger("steerable.undo")

SNAPSHOT_HOOK_PRIORITY = -1000
"""Runs after every other ``before_tool`` hook: the snapshot is of the call that will run."""

SNAPSHOT_HOOK_TIMEOUT = 300.0


class SnapshotHook(Hook):
    """Snapshots into ``snapshots`` around each call that may change the workspace."""

    name = "undo-snapshots"
    event_kinds = (EventKind.TURN_END,)

    def __init__(self, snapshots: Snapshots, *, restore_on_abort: bool = False) -> None:
        self.snapshots = snapshots
        self.restore_on_abort = restore_on_abort
        self._lock = threading.Lock()
        self._open: dict[str, tuple[str, str]] = {}  # call id -> (session id, step's turn id)
        self._restore_next: set[str] = set()
        self._restoring = threading.Lock()  # one restore at a time, each turn's once
        self._handled: set[str] = set()
        self.restored: dict[str, UndoResult] = {}
        """Turn id -> what was put back after it was aborted."""

    def before_tool(self, ctx: ToolCallContext) -> HookResult:
        if ctx.read_only or ctx.dry_run:
            return None
        # A sub-turn's changes belong to the turn that spawned it: one undo takes both back.
        turn = ctx.parent_turn_id or ctx.turn_id
        self.snapshots.snapshot(ctx.session_id, turn, ctx.call.id, ctx.call.name, "before")
        with self._lock:
            self._open[ctx.call.id] = (ctx.session_id, turn)
        return None

    def after_tool(self, ctx: ToolResultContext) -> HookResult:
        with self._lock:
            opened = self._open.pop(ctx.call.id, None)
        if opened is None and not (ctx.read_only or ctx.dry_run):
            # Its before_tool ran in another process (a Temporal worker: the hooks of one call
            # are two activities, each on any worker): the journal they share has it.
            turn = self.snapshots.open_call(ctx.session_id, ctx.call.id)
            opened = None if turn is None else (ctx.session_id, turn)
        if opened is not None:
            self.snapshots.snapshot(opened[0], opened[1], ctx.call.id, ctx.call.name, "after")
        return None

    def restore_when_aborted(self, session_id: str) -> None:
        """Put back the files of this session's turn if it ends aborted (a hard abort)."""
        with self._lock:
            self._restore_next.add(session_id)

    def cancel_restore(self, session_id: str) -> None:
        """Forget ``restore_when_aborted`` (the abort it was for did not happen)."""
        with self._lock:
            self._restore_next.discard(session_id)

    def on_event(self, event: Event) -> None:
        if event.kind is not EventKind.TURN_END or event.parent_turn_id is not None:
            return
        with self._lock:
            # Calls that never reported back (denied, aborted): the turn is over.
            for call_id in [c for c, (_, t) in self._open.items() if t == event.turn_id]:
                del self._open[call_id]
        if getattr(event, "status", None) is TurnStatus.ABORTED:
            self.restore_aborted(event.session_id, event.turn_id)
        else:
            self.cancel_restore(event.session_id)

    def restore_aborted(self, session_id: str, turn_id: str) -> UndoResult | None:
        """Put back the files of the aborted turn ``turn_id`` if that was asked for
        (``restore_on_abort``, or ``restore_when_aborted``); once per turn, whoever calls
        first: the observer, or a front end that must not exit before it is done (it waits
        for a restore under way). None: not asked, or the turn changed no file."""
        with self._restoring:
            if turn_id in self._handled:
                return self.restored.get(turn_id)
            self._handled.add(turn_id)
            with self._lock:
                asked = self.restore_on_abort or session_id in self._restore_next
                self._restore_next.discard(session_id)
            if not asked:
                return None
            try:
                result = self.snapshots.undo_turns(session_id, [turn_id], force=True)
            except NothingToUndoError:
                return None  # the turn changed no file
            self.restored[turn_id] = result
        log.info("aborted turn %s: put back %d path(s)", turn_id, len(result.paths))
        return result
