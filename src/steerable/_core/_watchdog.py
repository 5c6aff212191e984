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

__all__ = ["IdleTimer", "bare_context"]

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
    """The idle watchdogs of one engine (one event loop, taken at first use), as entries in
    two tables, and their one timer.

    A watched call is keyed by an object of its own (the provider's stream): ``due`` holds its
    deadline (a float, which the collector does not track), ``tasks`` the task to cancel. A
    watchdog object per call was one more object the collector tracked per model call in
    flight (10,000 turns waiting on their models: 10,000 of them)."""

    __slots__ = ("due", "fired", "handle", "loop", "tasks")

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self.due: dict[object, float] = {}
        self.tasks: dict[object, asyncio.Task[object]] = {}
        self.fired: set[object] = set()
        self.handle: asyncio.TimerHandle | None = None

    def start(self, key: object, idle: float | None) -> None:
        """Watch the current task's call ``key``: cancel the task after ``idle`` seconds
        without a ``tick``. ``idle=None`` watches nothing."""
        if idle is None:
            return
        task = asyncio.current_task()
        assert task is not None  # (a model call runs in a task)
        self.loop = loop = task.get_loop()
        due = self.due[key] = loop.time() + idle
        self.tasks[key] = task
        if self.handle is None:  # otherwise armed at a deadline no later than this one's
            self.handle = loop.call_at(due, self.sweep, context=bare_context())

    def tick(self, key: object, idle: float | None) -> None:
        """``key`` sent something: its deadline moves ``idle`` seconds from now. A tick only
        moves a deadline later, so the timer never needs re-arming for it."""
        if idle is not None and key in self.due:
            self.due[key] = self.loop.time() + idle  # type: ignore[union-attr]

    def stop(self, key: object, exc: BaseException | None = None) -> bool:
        """Stop watching ``key`` (the timer, if armed for it, finds nothing). True when
        ``exc`` is this watchdog's own cancel (taken back from the task: the caller raises
        its timeout instead). Only our own cancel is a timeout; a hard abort stays a
        cancellation."""
        self.due.pop(key, None)
        task = self.tasks.pop(key, None)
        if key not in self.fired:
            return False
        self.fired.discard(key)
        return type(exc) is asyncio.CancelledError and task is not None \
            and task.uncancel() == 0

    def sweep(self) -> None:
        assert self.loop is not None
        self.handle = None
        now = self.loop.time()
        earliest: float | None = None
        for key, due in list(self.due.items()):
            if now >= due:
                del self.due[key]
                self.fired.add(key)
                self.tasks[key].cancel()
            elif earliest is None or due < earliest:
                earliest = due
        if earliest is not None:
            self.handle = self.loop.call_at(earliest, self.sweep, context=bare_context())
