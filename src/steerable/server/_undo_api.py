"""What the server's undo endpoints do: list a session's changes, undo a turn, redo.

Kept apart from the routing (``_app``), which only checks requests and turns these answers
into responses: each method returns (HTTP status, JSON body). The work is file-system work,
done in a worker thread; a session that is busy is refused, since its files are still changing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from steerable.coding import NothingToUndoError, SnapshotHook, UndoConflictError, UndoResult
from steerable.storage.jsonl import TurnMark

__all__ = ["UndoAPI"]

Answer = tuple[int, dict[str, Any]]


class UndoAPI:
    """Undo over the snapshots ``hook`` takes; ``busy(session)`` says whether a turn runs,
    ``turns(session)`` (optional) where each saved turn starts in the conversation."""

    def __init__(self, hook: SnapshotHook, busy: Callable[[str], bool],
                 turns: Callable[[str], Sequence[TurnMark]] | None = None) -> None:
        self.hook = hook
        self._busy = busy
        self._turns = turns

    async def changes(self, session_id: str) -> Answer:
        snaps = self.hook.snapshots
        steps = await asyncio.to_thread(snaps.steps, session_id)
        marks = await asyncio.to_thread(self._turns, session_id) if self._turns else []
        starts = {m.turn_id: m.start for m in marks}
        redo = await asyncio.to_thread(snaps.redo_turns, session_id)
        return 200, {"steps": [{"turn_id": s.turn_id, "files": list(s.files), "time": s.time,
                                "undone": s.undone, "message_index": starts.get(s.turn_id)}
                               for s in steps], "redo_turns": redo}

    async def undo(self, session_id: str, turn_id: str | None, n: int | None,
                   force: bool) -> Answer:
        if turn_id is not None and n is not None:
            return 400, {"error": "give 'turn_id' or 'n', not both"}
        if n is not None and n < 1:
            return 400, {"error": "'n' must be 1 or more"}
        snaps = self.hook.snapshots
        if turn_id is not None:
            return await self._run(session_id, lambda: snaps.undo_turns(session_id, [turn_id],
                                                                        force=force))
        return await self._run(session_id, lambda: snaps.undo(session_id, n or 1, force=force))

    async def redo(self, session_id: str, force: bool) -> Answer:
        snaps = self.hook.snapshots
        return await self._run(session_id, lambda: snaps.redo(session_id, force=force))

    def restore_when_aborted(self, session_id: str) -> None:
        self.hook.restore_when_aborted(session_id)

    def cancel_restore(self, session_id: str) -> None:
        self.hook.cancel_restore(session_id)

    async def _run(self, session_id: str, work: Callable[[], UndoResult]) -> Answer:
        if self._busy(session_id):
            return 409, {"error": f"session {session_id!r} is busy: its files are still "
                                  "changing; interrupt it or wait for the turn to end"}
        try:
            result = await asyncio.to_thread(work)
        except UndoConflictError as exc:
            return 409, {"error": str(exc), "conflicts": list(exc.paths)}
        except NothingToUndoError as exc:
            return 404, {"error": str(exc)}
        return 200, {"turns": list(result.turns), "paths": list(result.paths),
                     "forced_over": list(result.forced_over)}
