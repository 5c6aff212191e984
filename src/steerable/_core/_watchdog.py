"""An idle timeout that costs one float store per tick, and no timer of its own.

``asyncio.timeout(...).reschedule`` moves a timer on the loop's heap each time, which at one
reschedule per streamed chunk became a third of the per-iteration overhead. Here each chunk
only records the time. The watchdogs of one engine (one event loop) share one timer
(``IdleTimer``): armed at the earliest deadline among them, it fires the ones really silent
that long and re-arms for the next. A model call then adds no timer to the loop's heap (with
10,000 turns waiting on their models, half of it was these). The timer stays exact: a tick
only moves a deadline later, and a watchdog that starts now has the latest deadline of all,
so neither needs an earlier timer.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from types import TracebackType

__all__ = ["IdleTimer", "IdleWatchdog", "bare_context"]

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


class IdleTimer:
    """The one timer of the watchdogs of one engine (one event loop, taken at first use)."""

    __slots__ = ("dogs", "handle", "loop")

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self.dogs: set[IdleWatchdog] = set()
        self.handle: asyncio.TimerHandle | None = None

    def add(self, dog: IdleWatchdog) -> None:
        self.dogs.add(dog)
        if self.handle is None:  # otherwise armed at a deadline no later than this one's
            self.loop = loop = dog._loop
            assert loop is not None and dog._idle is not None
            self.handle = loop.call_at(dog._last + dog._idle, self.sweep,
                                       context=bare_context())

    def sweep(self) -> None:
        assert self.loop is not None
        self.handle = None
        now = self.loop.time()
        earliest: float | None = None
        for dog in list(self.dogs):
            due = dog._last + dog._idle  # type: ignore[operator]
            if now >= due:
                self.dogs.discard(dog)
                dog._fire()
            elif earliest is None or due < earliest:
                earliest = due
        if earliest is not None:
            self.handle = self.loop.call_at(earliest, self.sweep, context=bare_context())


class IdleWatchdog:
    """``async with IdleWatchdog(idle, timer) as dog: ... dog.tick() ...`` raises TimeoutError
    after ``idle`` seconds without a tick. ``idle=None`` disables it. ``timer``: the engine's."""

    __slots__ = ("_fired", "_idle", "_last", "_loop", "_task", "_timer")

    def __init__(self, idle: float | None, timer: IdleTimer) -> None:
        self._idle = idle
        self._timer = timer
        self._fired = False
        self._last = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[object] | None = None

    def tick(self) -> None:
        if self._loop is not None:
            self._last = self._loop.time()

    def _fire(self) -> None:
        assert self._task is not None
        self._fired = True
        self._task.cancel()

    def start(self) -> None:
        """Arm it (what ``async with`` does on entry)."""
        if self._idle is not None:
            self._loop = loop = asyncio.get_running_loop()
            self._task = asyncio.current_task()
            self._last = loop.time()
            self._timer.add(self)

    def stop(self) -> None:
        """Disarm it (what ``async with`` does on exit, before ``timed_out``)."""
        if self._loop is not None:
            self._timer.dogs.discard(self)  # the timer, if armed for this one, finds nothing

    def timed_out(self, exc: BaseException) -> None:
        """Raise TimeoutError from ``exc`` if ``exc`` is this watchdog's own cancel. Only our
        own cancel becomes a timeout; a hard abort stays a cancellation."""
        if self._fired and type(exc) is asyncio.CancelledError and self._task is not None \
                and self._task.uncancel() == 0:
            raise TimeoutError from exc

    async def __aenter__(self) -> IdleWatchdog:
        self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
        if exc is not None:
            self.timed_out(exc)
