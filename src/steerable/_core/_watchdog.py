"""An idle timeout that costs one float store per tick, and no timer of its own.

``asyncio.timeout(...).reschedule`` moves a timer on the loop's heap each time, which at one
reschedule per streamed chunk became a third of the per-iteration overhead. Here each chunk
only records the time. The watchdogs of one event loop share one timer (``_Sweeper``): armed
at the earliest deadline among them, it fires the ones really silent that long and re-arms for
the next; a model call then costs no timer (with 10,000 turns waiting on their models, half the
loop's timer heap was these). The timer stays exact: a tick only moves a deadline later, and a
watchdog that starts now has the latest deadline of all, so neither needs an earlier timer.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import weakref
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


class _Sweeper:
    """The one timer of the watchdogs of one event loop."""

    __slots__ = ("dogs", "handle", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.dogs: set[IdleWatchdog] = set()
        self.handle: asyncio.TimerHandle | None = None

    def add(self, dog: IdleWatchdog) -> None:
        self.dogs.add(dog)
        if self.handle is None:  # otherwise armed at a deadline no later than this one's
            self.handle = self.loop.call_at(dog._last + dog._idle, self.sweep,  # type: ignore[operator]
                                            context=bare_context())

    def sweep(self) -> None:
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


_sweepers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Sweeper] = \
    weakref.WeakKeyDictionary()


def _sweeper(loop: asyncio.AbstractEventLoop) -> _Sweeper:
    sweeper = _sweepers.get(loop)
    if sweeper is None:
        sweeper = _sweepers[loop] = _Sweeper(loop)
    return sweeper


class IdleWatchdog:
    """``async with IdleWatchdog(idle) as dog: ... dog.tick() ...`` raises TimeoutError after
    ``idle`` seconds without a tick. ``idle=None`` disables it."""

    __slots__ = ("_fired", "_idle", "_last", "_loop", "_sweeper", "_task")

    def __init__(self, idle: float | None) -> None:
        self._idle = idle
        self._fired = False
        self._last = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sweeper: _Sweeper | None = None
        self._task: asyncio.Task[object] | None = None

    def tick(self) -> None:
        if self._loop is not None:
            self._last = self._loop.time()

    def _fire(self) -> None:
        assert self._task is not None
        self._fired = True
        self._task.cancel()

    async def __aenter__(self) -> IdleWatchdog:
        if self._idle is not None:
            self._loop = loop = asyncio.get_running_loop()
            self._task = asyncio.current_task()
            self._last = loop.time()
            self._sweeper = _sweeper(loop)
            self._sweeper.add(self)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._sweeper is not None:
            self._sweeper.dogs.discard(self)  # its timer, if armed for this one, finds nothing
        # Only our own cancel becomes a timeout; a hard abort stays a cancellation.
        if self._fired and exc_type is asyncio.CancelledError and self._task is not None \
                and self._task.uncancel() == 0:
            raise TimeoutError from exc
