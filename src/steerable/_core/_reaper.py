"""The owner of tasks the loop stopped waiting for.

A tool or hook that ignores cancellation must not hold a turn hostage, so the turn cancels it
and moves on; the task is handed here, where it stays owned (its exception retrieved, never
"never retrieved") until it ends or the loop closes and cancels it once more.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

__all__ = ["Reaper"]


class Reaper:
    def __init__(self) -> None:
        # A dict as an ordered set: tasks are cancelled in the order they were adopted, not
        # by their addresses (on a durable engine each cancel is a command a replay repeats).
        self._tasks: dict[asyncio.Future[Any], None] = {}

    def adopt(self, task: asyncio.Future[Any]) -> None:
        if task.done():
            self._consume(task)
            return
        task.cancel()
        self._tasks[task] = None
        task.add_done_callback(self._consume)

    def _consume(self, task: asyncio.Future[Any]) -> None:
        self._tasks.pop(task, None)
        if not task.cancelled():
            task.exception()  # mark retrieved: the loop already reported or ignored it

    def __len__(self) -> int:
        return len(self._tasks)

    async def aclose(self, grace: float = 0.5) -> None:
        pending = list(self._tasks)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=grace)
        for task in list(self._tasks):
            _abandon(task)


def _abandon(task: asyncio.Future[Any]) -> None:
    """Let the event loop close without a task that ignores cancellation.

    ``asyncio.run`` cancels every task left at exit and waits for each: one that swallows
    ``CancelledError`` in a loop would keep the program from ever returning. After ``aclose``
    such a task is taken off the loop's task registry (nobody can await it any more) and its
    "destroyed but pending" log is silenced: the program exits promptly instead.
    """
    if isinstance(task, asyncio.Task):
        unregister = getattr(asyncio.tasks, "_unregister_task", None)
        if unregister is not None:
            unregister(task)
        with contextlib.suppress(AttributeError):
            task._log_destroy_pending = False  # type: ignore[attr-defined]
