"""Server-sent events as an ASGI response: ``text/event-stream`` with keep-alive comments, an
end when the client goes away, and a clean end when the server shuts down.

A response is fed in one of two ways. A ``Feed`` writes the connection itself: the server's
event hub writes every client of a session from one callback per wake-up, each write an ASGI
``send`` run without a task of its own (a send that has to wait, because the client reads
slowly, goes on in a task and the feed is told when it is done). An async iterator of bytes is
read by a task per connection (the runners without a hub). sse-starlette, used before, reads
an iterator in a task per connection and wraps each send in a cancel scope: with 100 clients
that was a task step and ~5 us per client at every wake-up, which put the fan-out above 3x the
loop on short turns (docs/performance.md, 2026-12-08).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from types import CoroutineType
from typing import Any, Protocol

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from steerable._core._hook_manager import _carry_on

__all__ = ["EventStream", "EventStreams", "Feed", "Writer"]

PING = b": ping\r\n\r\n"
"""A comment line: clients ignore it, proxies see traffic (sse-starlette sent the same, with
the time after ``ping``)."""


class Writer:
    """One connection's ASGI ``send``, for its body. ``write`` sends without a task when the
    connection takes the bytes at once (the common case); otherwise the send goes on in a task
    (``busy``) and ``on_ready`` is called once it is done. A send that fails ends the stream."""

    __slots__ = ("_send", "busy", "ended", "on_ready")

    def __init__(self, send: Send, ended: asyncio.Future[None]) -> None:
        self._send = send
        self.ended = ended
        """Done when the stream must end: a send failed, or the server is shutting down."""
        self.busy: asyncio.Future[Any] | None = None
        self.on_ready: Callable[[], object] | None = None

    @property
    def ready(self) -> bool:
        """Whether ``write`` may be called: no send under way and the stream not ended."""
        return self.busy is None and not self.ended.done()

    def write(self, data: bytes) -> None:
        """Send ``data`` (call only when ``ready``)."""
        sending = self._send({"type": "http.response.body", "body": data, "more_body": True})
        if type(sending) is CoroutineType:
            # Run it here up to its first wait (it has none while the socket takes the bytes):
            # a task would cost a loop cycle per connection and write.
            try:
                first = sending.send(None)
            except StopIteration:
                return
            except Exception:  # the connection is gone (ASGI 2.4 servers raise OSError)
                self.end()
                return
            busy = asyncio.ensure_future(_carry_on(sending, first))
        else:
            busy = asyncio.ensure_future(sending)
        self.busy = busy
        busy.add_done_callback(self._written)

    def _written(self, task: asyncio.Future[Any]) -> None:
        self.busy = None
        if task.cancelled() or task.exception() is not None:
            self.end()
        elif self.on_ready is not None and not self.ended.done():
            self.on_ready()

    def end(self) -> None:
        if not self.ended.done():
            self.ended.set_result(None)

    async def wait_ready(self) -> None:
        """Until no send is under way (the stream may have ended meanwhile)."""
        while self.busy is not None:
            await asyncio.wait((self.busy,))


class Feed(Protocol):
    """A source that writes its connection itself (``EventHub``'s clients)."""

    def open(self, writer: Writer) -> None:
        """Start writing to ``writer`` (what is already due, at once)."""

    def close(self) -> None:
        """Stop writing (the connection is gone or ending)."""


class EventStreams:
    """The open event streams of one app, so the server can end them as it shuts down: an open
    stream would otherwise hold the graceful shutdown until its timeout."""

    def __init__(self) -> None:
        self._open: set[Writer] = set()
        self.closing = False

    def close(self) -> None:
        """End every open stream, and any opened from now on. Call it on the loop's thread
        (``loop.call_soon_threadsafe(streams.close)`` from a signal handler)."""
        self.closing = True
        for writer in list(self._open):
            writer.end()

    def add(self, writer: Writer) -> None:
        self._open.add(writer)
        if self.closing:
            writer.end()

    def discard(self, writer: Writer) -> None:
        self._open.discard(writer)


class EventStream(Response):
    """A ``text/event-stream`` response over ``source`` (see the module docstring); a comment
    every ``ping`` seconds keeps idle connections open through proxies."""

    media_type = "text/event-stream"

    def __init__(self, source: Feed | AsyncIterator[bytes], streams: EventStreams, *,
                 ping: float = 15.0, headers: Mapping[str, str] | None = None) -> None:
        self.source = source
        self.streams = streams
        self.ping = ping
        self.status_code = 200
        self.background = None
        # What sse-starlette sent: no caching by default, no buffering by nginx.
        self.init_headers({"Cache-Control": "no-store", **(headers or {}),
                           "Connection": "keep-alive", "X-Accel-Buffering": "no"})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code,
                    "headers": self.raw_headers})
        if scope.get("method") == "HEAD":  # headers only: an endless body would never end
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        writer = Writer(send, asyncio.get_running_loop().create_future())
        self.streams.add(writer)
        source = self.source
        pump = None
        if isinstance(source, AsyncIterator):
            pump = asyncio.ensure_future(_pull(source, writer))
        else:
            source.open(writer)
        listen = asyncio.ensure_future(_disconnected(receive))
        try:
            await self._serve(writer, listen, pump)
        finally:
            self.streams.discard(writer)
            if pump is None:
                source.close()  # type: ignore[union-attr]  # (the Feed branch)
            for task in (listen, pump, writer.busy):
                if task is not None:
                    task.cancel()
        if not listen.done() and writer.busy is None:  # ended here, the client still there
            with contextlib.suppress(OSError):  # gone meanwhile (ASGI 2.4 servers raise it)
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        error = pump.exception() if pump is not None and pump.done() and not pump.cancelled() \
            else None
        if error is not None:
            raise error  # the source failed

    async def _serve(self, writer: Writer, listen: asyncio.Future[None],
                     pump: asyncio.Future[None] | None) -> None:
        """Until the client goes, the stream ends or the source does; pings meanwhile."""
        waiting = [listen, writer.ended] if pump is None else [listen, writer.ended, pump]
        while True:
            done, _ = await asyncio.wait(waiting, timeout=self.ping or None,
                                         return_when=asyncio.FIRST_COMPLETED)
            if done:
                return
            if writer.ready:
                writer.write(PING)


async def _pull(source: AsyncIterator[bytes], writer: Writer) -> None:
    """Write what ``source`` yields, one send at a time."""
    try:
        async for piece in source:
            await writer.wait_ready()
            if writer.ended.done():
                return
            writer.write(piece)
        await writer.wait_ready()  # the last piece sent before the stream ends
    finally:
        aclose = getattr(source, "aclose", None)
        if aclose is not None:
            await aclose()


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
