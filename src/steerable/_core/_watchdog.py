"""An idle timeout that costs one float store per tick.

``asyncio.timeout(...).reschedule`` moves a timer on the loop's heap each time, which at one
reschedule per streamed chunk became a third of the per-iteration overhead. Here each chunk
only records the time; the single timer, when it fires, checks whether the stream was really
silent that long and otherwise re-arms itself for the remaining time.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from types import TracebackType

__all__ = ["IdleWatchdog", "bare_context"]

_local = threading.local()


def bare_context() -> contextvars.Context:
    """An empty context for loop callbacks that read no context variable (timers): handing
    it to ``call_at`` spares the copy of the caller's context every call would make (an object
    the collector tracks, per live turn). One per thread: a Context cannot be entered twice at
    once, and two event loops in two threads may run such callbacks at the same moment; one
    loop runs its callbacks one after the other."""
    ctx: contextvars.Context | None = getattr(_local, "ctx", None)
    if ctx is None:
        ctx = _local.ctx = contextvars.Context()
    return ctx


class IdleWatchdog:
    """``async with IdleWatchdog(idle) as dog: ... dog.tick() ...`` raises TimeoutError after
    ``idle`` seconds without a tick. ``idle=None`` disables it."""

    __slots__ = ("_fired", "_handle", "_idle", "_last", "_loop", "_task")

    def __init__(self, idle: float | None) -> None:
        self._idle = idle
        self._fired = False
        self._handle: asyncio.TimerHandle | None = None
        self._last = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[object] | None = None

    def tick(self) -> None:
        if self._loop is not None:
            self._last = self._loop.time()

    def _check(self) -> None:
        assert self._loop is not None and self._idle is not None and self._task is not None
        due = self._last + self._idle
        if self._loop.time() < due:
            self._handle = self._loop.call_at(due, self._check, context=bare_context())
            return
        self._fired = True
        self._task.cancel()

    async def __aenter__(self) -> IdleWatchdog:
        if self._idle is not None:
            self._loop = asyncio.get_running_loop()
            self._task = asyncio.current_task()
            self._last = self._loop.time()
            self._handle = self._loop.call_at(self._last + self._idle, self._check,
                                              context=bare_context())
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._handle is not None:
            self._handle.cancel()
        # Only our own cancel becomes a timeout; a hard abort stays a cancellation.
        if self._fired and exc_type is asyncio.CancelledError and self._task is not None \
                and self._task.uncancel() == 0:
            raise TimeoutError from exc
