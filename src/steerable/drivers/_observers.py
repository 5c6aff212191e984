"""The loop's hooks as registered, and its readers of events that are not turns: ``on_event``
observers and the event log.

Each reads its own subscription in its own task, so none of them can slow a turn. Tasks start
when the loop binds to its asyncio event loop (observers registered before that wait for it),
and end when the bus closes (``aclose``).

An ``on_event`` observer that also offers ``on_event_nowait(event)`` (sync, a few microseconds,
never waiting: the OpenTelemetry hook appends the event to a batch) is called with each event
as it is emitted instead (a bus observer: ``AgentLoop.observe``), in ``seq`` order, none
dropped, with no subscription, task or hook call per event. One that raises is reported as an
ERROR event, as a failing ``on_event`` is, and still called for later events; the report is
emitted at the next loop cycle, not inside the event being emitted. ``aclose`` then awaits its
``flush()``, if it has one, for the work it handed elsewhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import Callable
from typing import Any

from steerable._core._bus import Observer, Subscription
from steerable._core._engine import Engine
from steerable._core._hook_manager import Registration
from steerable._events import ErrorEvent, Event

__all__ = ["Observers"]


class Observers:
    def __init__(self, engine: Engine, record_path: str | None) -> None:
        self._engine = engine
        self._record_path = record_path
        self._recorder: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reading: dict[Registration, tuple[Subscription, asyncio.Task[None] | None]] = {}
        self._inline: dict[Registration, Observer] = {}
        """``on_event_nowait`` observers, called inside ``emit``."""

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """The loop is bound: the event log and the observers waiting for it start."""
        self._loop = loop
        if self._record_path is not None:
            sub = self._engine.bus.subscribe(None, buffer=65536)
            # Imported only now: pathlib and the recorder cost the core's import ~4 ms.
            from steerable.drivers._recorder import record_events

            self._recorder = loop.create_task(record_events(sub, self._record_path))
        for reg, (sub, task) in list(self._reading.items()):
            if task is None:
                self._reading[reg] = (sub, loop.create_task(self._observe(reg, sub)))

    def register(self, hook: Any, priority: int, timeout: float | None) -> Registration:
        """Register ``hook`` with the engine; an ``on_event`` observer gets its own reader."""
        reg = self._engine.hooks.register(hook, priority, timeout)
        if "on_event" in reg.points:
            nowait = getattr(hook, "on_event_nowait", None)
            if callable(nowait):
                self._inline[reg] = self._engine.bus.observe(
                    self._offer(reg, nowait), getattr(hook, "event_kinds", None))
            else:
                self.add(reg, hook)
        return reg

    def _offer(self, reg: Registration, nowait: Callable[[Event], object]) -> Callable[[Event], None]:
        """What the bus calls for an ``on_event_nowait`` observer (see the module docstring)."""
        hooks = self._engine.hooks

        def offer(event: Event) -> None:
            try:
                nowait(event)
            except Exception as exc:
                # A failure on the report of its own failure is not reported again: no loop.
                if not (isinstance(event, ErrorEvent) and event.source == "observer"):
                    message = f"hook {reg.label}.on_event_nowait raised {type(exc).__name__}: {exc}"
                    asyncio.get_running_loop().call_soon(hooks.report, message, event, "observer")

        return offer

    def unregister(self, reg: Registration) -> bool:
        self.remove(reg)
        return self._engine.hooks.unregister(reg)

    def add(self, reg: Registration, hook: Any) -> None:
        kinds = getattr(hook, "event_kinds", None)
        sub = self._engine.bus.subscribe(kinds, 4096)
        task = None if self._loop is None else self._loop.create_task(self._observe(reg, sub))
        self._reading[reg] = (sub, task)

    def remove(self, reg: Registration) -> None:
        inline = self._inline.pop(reg, None)
        if inline is not None:
            inline.close()
        observed = self._reading.pop(reg, None)
        if observed is not None:
            sub, task = observed
            sub.close()
            if task is not None:
                task.cancel()

    def tasks(self) -> list[asyncio.Task[Any]]:
        out: list[asyncio.Task[Any]] = [t for _, t in self._reading.values() if t is not None]
        if self._recorder is not None:
            out.append(self._recorder)
        return out

    async def _observe(self, reg: Registration, sub: Subscription) -> None:
        async for event in sub:
            # An observer that fails on the report of its own failure must not loop forever.
            quiet = isinstance(event, ErrorEvent) and event.source == "observer"
            await self._engine.hooks.call(reg, "on_event", event, self._engine.timeouts.hook,
                                          source=None if quiet else "observer")

    async def aclose(self, grace: float) -> None:
        """After the bus closed: wait ``grace`` for the readers to end (and the inline
        observers' ``flush``), then cancel the rest."""
        flushes = [flush for reg in self._inline if callable(flush := getattr(reg.hook, "flush", None))]
        if flushes:
            # A failure here has nobody to be told: the bus is closed (as for an on_event
            # observer failing while it drains at close), so it is contained like any other.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.gather(*map(_flushed, flushes),
                                                      return_exceptions=True), grace)
        waiting = self.tasks()
        if not waiting:
            return
        await asyncio.wait(waiting, timeout=grace)
        late = [t for t in waiting if not t.done()]  # in order: each cancel may be a command
        for task in late:
            task.cancel()
        if late:
            await asyncio.wait(late, timeout=grace)


async def _flushed(flush: Callable[[], object]) -> None:
    result = flush()
    if inspect.isawaitable(result):
        await result
