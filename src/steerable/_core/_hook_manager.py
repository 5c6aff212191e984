"""Runs hooks in priority order, each under a timeout, containing whatever they do wrong.

Every hook call runs as its own task (sync hooks in a worker thread), so a hook that hangs, even
one that ignores cancellation, costs the turn its timeout and nothing more: the task is handed
to the reaper and the turn goes on. Timeouts and exceptions are reported as ERROR events;
interceptors fall back to CONTINUE, approvers to a denial.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import itertools
from collections.abc import Callable, Coroutine, Generator
from typing import Any

from steerable._core._reaper import Reaper
from steerable._events import ErrorSource
from steerable._hooks import HOOK_POINTS, HookAction, HookDecision, hook_points
from steerable._records import Record, record
from steerable._threads import run_in_daemon_thread

__all__ = ["HookFailure", "HookManager", "Registration"]


@record(kw_only=False)
class Registration(Record):
    """A registered hook and what it is registered for."""

    hook: Any
    priority: int
    order: int
    timeout: float | None
    points: frozenset[str]

    @property
    def label(self) -> str:
        return getattr(self.hook, "name", None) or type(self.hook).__name__


@record(kw_only=False)
class HookFailure(Record):
    """A hook call that timed out or raised; the caller decides what that means."""

    message: str


class HookManager:
    def __init__(self, reaper: Reaper, report: Callable[[str, Any, ErrorSource], None]) -> None:
        self._reaper = reaper
        self._report = report
        self._order = itertools.count()
        self._regs: list[Registration] = []
        self._by_point: dict[str, tuple[Registration, ...]] = dict.fromkeys(HOOK_POINTS, ())

    def register(self, hook: Any, priority: int, timeout: float | None) -> Registration:
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise TypeError(f"hook priority must be an int, got {type(priority).__name__}")
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0
        ):
            raise ValueError(f"hook timeout must be a positive number of seconds, got {timeout!r}")
        points = hook_points(hook)
        reg = Registration(hook, priority, next(self._order), timeout, points)
        self._regs.append(reg)
        self._reindex()
        return reg

    def unregister(self, reg: Registration) -> bool:
        if reg not in self._regs:
            return False
        self._regs.remove(reg)
        self._reindex()
        return True

    def _reindex(self) -> None:
        ordered = sorted(self._regs, key=lambda r: (-r.priority, r.order))
        self._by_point = {p: tuple(r for r in ordered if p in r.points) for p in HOOK_POINTS}

    def at(self, point: str) -> tuple[Registration, ...]:
        return self._by_point[point]

    def report(self, message: str, ctx: Any, source: ErrorSource) -> None:
        """Report a hook's failure met outside ``call`` (an inline observer's) as ``call``
        reports its own."""
        self._report(message, ctx, source)

    async def call(
        self, reg: Registration, point: str, ctx: Any, default_timeout: float,
        *, source: ErrorSource | None = "hook",
    ) -> Any | HookFailure:
        """Call one hook method; return its value, or a HookFailure after reporting it.

        ``ctx`` (a hook context, or the event for ``on_event``) says which turn the report is
        about and ``source`` what to call the failure in the ERROR event; ``source=None``
        keeps it quiet (used to break observer feedback loops).
        """
        fn = getattr(reg.hook, point)
        timeout = reg.timeout if reg.timeout is not None else default_timeout
        if _is_async(getattr(fn, "__func__", fn)):
            started = _start_eagerly(fn(ctx))
            if not isinstance(started, asyncio.Future):  # done without waiting: no task, no timer
                if started.error is None and started.value is None:
                    return None  # (an observer, a hook that lets the call go on: most calls)
                return await self._settled(reg, point, ctx, started, source)
            task: asyncio.Future[Any] = started
        else:
            task = asyncio.ensure_future(run_in_daemon_thread(_call_sync, fn, ctx))
        try:
            done, _ = await asyncio.wait((task,), timeout=timeout)
        except asyncio.CancelledError:
            self._reaper.adopt(task)
            raise
        if not done:
            self._reaper.adopt(task)
            message = f"hook {reg.label}.{point} timed out after {timeout:g} s"
            if source is not None:
                self._report(message, ctx, source)
            return HookFailure(message)
        exc = task.exception()
        return await self._settled(reg, point, ctx, _Outcome(task.result() if exc is None else None, exc),
                                   source)

    async def _settled(self, reg: Registration, point: str, ctx: Any, outcome: _Outcome,
                       source: ErrorSource | None) -> Any | HookFailure:
        if outcome.error is not None:
            exc = outcome.error
            message = f"hook {reg.label}.{point} raised {type(exc).__name__}: {exc}"
            if source is not None:
                self._report(message, ctx, source)
            return HookFailure(message)
        value = outcome.value
        if inspect.isawaitable(value):  # a sync method returning a coroutine
            value = await value
        return value

    def coerce(self, reg: Registration, point: str, value: Any, ctx: Any) -> HookDecision | None:
        """Check a hook's return value; garbage is reported and treated as CONTINUE."""
        if value is None or isinstance(value, HookDecision):
            return value
        if point == "approve_tool" and isinstance(value, bool):
            return None if value else HookDecision(HookAction.DENY_TOOL, reason="denied")
        self._report(
            f"hook {reg.label}.{point} returned {type(value).__name__}; expected None or "
            "HookDecision (ignored)",
            ctx,
            "hook",
        )
        return None


def _call_sync(fn: Callable[[Any], Any], ctx: Any) -> Any:
    return fn(ctx)


class _Outcome:
    """What a hook call ended with: its value, or the exception it raised."""

    __slots__ = ("error", "value")

    def __init__(self, value: Any, error: BaseException | None) -> None:
        self.value = value
        self.error = error


def _is_async(fn: Any) -> bool:
    """Whether a hook method is ``async def``: asked on every hook call (an observer's, once
    per event), so kept per function (``inspect`` unwraps and checks flags: ~1 us a time)."""
    try:
        return _is_async_kept(fn)
    except TypeError:  # an unhashable callable: asked each time
        return inspect.iscoroutinefunction(fn)


@functools.lru_cache(maxsize=512)
def _is_async_kept(fn: Any) -> bool:
    return inspect.iscoroutinefunction(fn)


def _start_eagerly(coro: Coroutine[Any, Any, Any]) -> _Outcome | asyncio.Future[Any]:
    """Run a hook's coroutine up to its first wait, in a copy of the caller's context (as a task
    would). Most hook calls (an observer appending an event, a check that returns at once) end
    there: they cost a function call instead of a task, a timer and a ``wait`` (~20 us each).
    A coroutine that waits is handed to a task that carries on from that point, so the caller's
    timeout still bounds it."""
    context = contextvars.copy_context()
    try:
        first = context.run(coro.send, None)
    except StopIteration as stop:
        return _Outcome(stop.value, None)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # a hook's error (even its own CancelledError) is contained
        return _Outcome(None, exc)
    return asyncio.get_running_loop().create_task(_carry_on(coro, first), context=context)


async def _carry_on(coro: Coroutine[Any, Any, Any], first: Any) -> Any:
    return await _Resumed(coro, first)


class _Resumed:
    """Awaitable that goes on driving a coroutine which already yielded ``first`` to the event
    loop: what the task sends or throws in is passed through, what the coroutine yields goes out."""

    __slots__ = ("coro", "first")

    def __init__(self, coro: Coroutine[Any, Any, Any], first: Any) -> None:
        self.coro = coro
        self.first = first

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, value = self.coro, self.first
        self.first = None
        while True:
            try:
                sent = yield value
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:
                try:
                    value = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    value = coro.send(sent)
                except StopIteration as stop:
                    return stop.value
