"""The event bus: non-blocking fan-out to bounded, per-subscriber buffers.

``emit`` runs on the loop's thread, appends the event to every matching subscriber's buffer and
returns; it never awaits. A full buffer drops the event and counts the drop per kind, for that
subscription and loop-wide, so a subscriber that never reads costs memory bounded by its buffer
and nothing else. Subscribers are indexed by kind, so a filtered subscription costs nothing for
the kinds it does not want.

An ``Observer`` is the other kind of reader: a function ``emit`` calls with the event, for
readers of the library's own whose work per event is a few microseconds and never waits (the
server's SSE hub). It costs a call per event where a subscription costs a buffer, a task and a
wake-up per loop cycle; it sees every event in ``seq`` order, as it is emitted, and none is
ever dropped. An observer that raises is detached at once (the error kept on it), so a bug in
one cannot break a turn. Anything that may be slow or may wait reads a subscription.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType

from steerable._events import Event, EventKind

__all__ = ["EventBus", "Observer", "Subscription"]


class Subscription:
    """An async-iterable view of the events a loop emits. ``close()`` is synchronous."""

    __slots__ = ("_buffer", "_bus", "_capacity", "_closed", "_dropped", "_kinds", "_waiter")

    def __init__(self, bus: EventBus, kinds: frozenset[EventKind] | None, capacity: int) -> None:
        self._bus = bus
        self._kinds = kinds
        self._capacity = capacity
        self._buffer: deque[Event] = deque()
        self._closed = False
        self._waiter: asyncio.Future[None] | None = None
        self._dropped: dict[EventKind, int] = {}

    @property
    def kinds(self) -> frozenset[EventKind] | None:
        return self._kinds

    @property
    def dropped(self) -> Mapping[EventKind, int]:
        """Events this subscription lost because its buffer was full, per kind."""
        return MappingProxyType(self._dropped)

    @property
    def closed(self) -> bool:
        return self._closed

    def _offer(self, event: Event) -> None:
        if len(self._buffer) >= self._capacity:
            kind = event.kind
            self._dropped[kind] = self._dropped.get(kind, 0) + 1
            self._bus._count_drop(kind)
            return
        self._buffer.append(event)
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    def __len__(self) -> int:
        """Events buffered and not yet read."""
        return len(self._buffer)

    def get_nowait(self) -> Event | None:
        """The next buffered event, or None when the buffer is empty."""
        return self._buffer.popleft() if self._buffer else None

    def drain_nowait(self) -> list[Event]:
        """Every buffered event, emptying the buffer."""
        events = list(self._buffer)
        self._buffer.clear()
        return events

    def close(self) -> None:
        """Stop receiving; iteration ends after the events already buffered. Idempotent."""
        self._bus.on_loop(self._close_here)

    def _close_here(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._bus._remove(self)
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> Event:
        while True:
            if self._buffer:
                return self._buffer.popleft()
            if self._closed:
                raise StopAsyncIteration
            if self._waiter is not None:
                raise RuntimeError("another task is already iterating this subscription")
            waiter = asyncio.get_running_loop().create_future()
            self._waiter = waiter
            try:
                await waiter
            finally:
                if self._waiter is waiter:
                    self._waiter = None

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        kinds = "all" if self._kinds is None else ",".join(sorted(self._kinds))
        return f"<Subscription kinds={kinds} buffered={len(self._buffer)} closed={self._closed}>"


class Observer:
    """A function called with each event of the kinds it wants, inside ``emit`` (see the module
    docstring). ``close()`` detaches it; so does an exception it raises (kept in ``error``)."""

    __slots__ = ("_bus", "_closed", "_fn", "_kinds", "error")

    def __init__(self, bus: EventBus, kinds: frozenset[EventKind] | None,
                 fn: Callable[[Event], object]) -> None:
        self._bus = bus
        self._kinds = kinds
        self._fn = fn
        self._closed = False
        self.error: Exception | None = None

    @property
    def kinds(self) -> frozenset[EventKind] | None:
        return self._kinds

    @property
    def closed(self) -> bool:
        return self._closed

    def _offer(self, event: Event) -> None:
        try:
            self._fn(event)
        except Exception as exc:  # detached, not raised: emit runs inside a turn's own code
            self.error = exc
            self._close_here()

    def close(self) -> None:
        """Stop being called. Idempotent; from another thread it takes effect on the loop's."""
        self._bus.on_loop(self._close_here)

    def _close_here(self) -> None:
        if not self._closed:
            self._closed = True
            self._bus._remove(self)


_Reader = Subscription | Observer


class EventBus:
    """Owns the sequence counter and the subscriptions of one loop."""

    def __init__(self) -> None:
        self._seq = 0
        self._subs: list[_Reader] = []
        self._by_kind: dict[EventKind, tuple[_Reader, ...]] = dict.fromkeys(EventKind, ())
        self._dropped: dict[EventKind, int] = {}
        self.emitted = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """Remember the loop (and its thread) that emits; close() from elsewhere goes through it."""
        self._loop = loop
        self._loop_thread = threading.get_ident()

    def next_seq(self) -> int:
        self._seq += 1
        return self._seq

    @property
    def last_seq(self) -> int:
        """The seq of the event numbered last (0 before any)."""
        return self._seq

    def listens(self, kind: EventKind) -> bool:
        """Whether any subscription or observer wants events of ``kind``."""
        return bool(self._by_kind[kind])

    def emit(self, event: Event) -> None:
        self.emitted += 1
        for sub in self._by_kind[event.kind]:
            sub._offer(event)

    def subscribe(self, kinds: Iterable[EventKind] | None = None, buffer: int = 256) -> Subscription:
        if isinstance(buffer, bool) or not isinstance(buffer, int) or buffer < 1:
            raise ValueError(f"subscription buffer must be an int >= 1, got {buffer!r}")
        sub = Subscription(self, _kinds(kinds, "subscribe"), buffer)
        self._subs.append(sub)
        self._reindex()
        return sub

    def observe(self, fn: Callable[[Event], object],
                kinds: Iterable[EventKind] | None = None) -> Observer:
        """Call ``fn`` with every event (or those of ``kinds``) inside ``emit``: see ``Observer``."""
        observer = Observer(self, _kinds(kinds, "observe"), fn)
        self._subs.append(observer)
        self._reindex()
        return observer

    def _remove(self, sub: _Reader) -> None:
        if sub in self._subs:
            self._subs.remove(sub)
            self._reindex()

    def _reindex(self) -> None:
        self._by_kind = {
            kind: tuple(s for s in self._subs if s._kinds is None or kind in s._kinds)
            for kind in EventKind
        }

    def _count_drop(self, kind: EventKind) -> None:
        self._dropped[kind] = self._dropped.get(kind, 0) + 1

    @property
    def dropped(self) -> dict[EventKind, int]:
        return dict(self._dropped)

    @property
    def subscriber_count(self) -> int:
        """Subscriptions and observers."""
        return len(self._subs)

    def close(self) -> None:
        for sub in list(self._subs):
            sub._close_here()

    def on_loop(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` now on the loop's thread, or soon on it from another thread (readers'
        tables are only changed there)."""
        loop = self._loop
        if loop is not None and not loop.is_closed() and self._loop_thread != threading.get_ident():
            loop.call_soon_threadsafe(fn)
        else:
            fn()


def _kinds(kinds: Iterable[EventKind] | None, method: str) -> frozenset[EventKind] | None:
    if kinds is None:
        return None
    # A lone kind is a common slip; accept it.
    listed: Iterable[EventKind | str] = [kinds] if isinstance(kinds, EventKind | str) else kinds
    try:
        return frozenset(EventKind(k) for k in listed)
    except ValueError as exc:
        raise ValueError(f"unknown event kind in {method}(kinds=...): {exc}") from None
