"""The SSE response (server/_sse.py) driven as ASGI: the hub writes its connections itself, a
slow one does not hold the others and gets the rest once it takes it, pings while idle, HEAD,
disconnects, the server's shutdown, an iterator source."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from steerable._events import LLMDelta, TurnEnd, TurnStatus
from steerable.server import EventHub
from steerable.server._sse import PING, EventStream, EventStreams

SCOPE = {"type": "http", "method": "GET"}


def delta(seq: int) -> LLMDelta:
    return LLMDelta(turn_id="t", parent_turn_id=None, session_id="s", seq=seq, time=0.0,
                    iteration=1, text=str(seq))


def turn_end(seq: int) -> TurnEnd:
    return TurnEnd(turn_id="t", parent_turn_id=None, session_id="s", seq=seq, time=0.0,
                   status=TurnStatus.COMPLETED, text="", iterations=1)


class Connection:
    """An ASGI connection's two ends: what was sent, and a disconnect to give."""

    def __init__(self, gate: asyncio.Event | None = None) -> None:
        self.sent: list[dict[str, Any]] = []
        self.gate = gate
        self.gone = asyncio.Event()

    async def send(self, message: dict[str, Any]) -> None:
        if self.gate is not None and message.get("body"):
            await self.gate.wait()  # a client that reads slowly: the write waits
        self.sent.append(message)

    async def receive(self) -> dict[str, Any]:
        await self.gone.wait()
        return {"type": "http.disconnect"}

    def ids(self) -> list[int]:
        body = b"".join(m.get("body", b"") for m in self.sent)
        return [int(line[4:]) for line in body.split(b"\r\n") if line.startswith(b"id: ")]


async def settle() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


async def until(done: Callable[[], bool], timeout: float = 5.0) -> None:
    """Until ``done()`` holds (the hub's flush is a timer: some loop passes are not enough)."""
    async with asyncio.timeout(timeout):
        while not done():
            await asyncio.sleep(0.001)


async def test_a_slow_connection_holds_nobody_and_gets_the_rest_in_order() -> None:
    hub, streams = EventHub(lambda t: t, flush=0.001), EventStreams()
    gate = asyncio.Event()
    fast, slow = Connection(), Connection(gate)
    served = [asyncio.ensure_future(EventStream(hub.feed(hub.attach("s", None)), streams)(
        SCOPE, c.receive, c.send)) for c in (fast, slow)]
    await settle()
    for seq in range(1, 4):
        hub.publish(delta(seq))
    hub.publish(turn_end(4))
    await settle()
    assert fast.ids() == [1, 2, 3, 4] and slow.ids() == []
    hub.publish(delta(5))  # arrives while the slow one's first write still waits
    await until(lambda: fast.ids() == [1, 2, 3, 4, 5])
    assert slow.ids() == []
    gate.set()
    await until(lambda: slow.ids() == [1, 2, 3, 4, 5])  # topped up once its write was done
    for c in (fast, slow):
        c.gone.set()
    await asyncio.wait_for(asyncio.gather(*served), 5)
    assert hub.client_count() == 0  # a disconnect detaches the client


async def test_an_idle_stream_pings_and_the_servers_shutdown_ends_it_cleanly() -> None:
    hub, streams = EventHub(lambda t: t), EventStreams()
    conn = Connection()
    served = asyncio.ensure_future(EventStream(hub.feed(hub.attach("s", None)), streams,
                                               ping=0.01)(SCOPE, conn.receive, conn.send))
    await until(lambda: len(conn.sent) >= 2)  # the headers, then a ping 10 ms later
    assert conn.sent[0]["type"] == "http.response.start"
    assert dict(conn.sent[0]["headers"])[b"content-type"] == b"text/event-stream; charset=utf-8"
    assert conn.sent[1]["body"] == PING
    streams.close()
    await asyncio.wait_for(served, 5)
    assert conn.sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}
    assert hub.client_count() == 0


async def test_head_sends_the_headers_and_no_stream() -> None:
    hub = EventHub(lambda t: t)
    conn = Connection()
    await asyncio.wait_for(EventStream(hub.feed(hub.attach("s", None)), EventStreams())(
        {"type": "http", "method": "HEAD"}, conn.receive, conn.send), 5)
    assert [m["type"] for m in conn.sent] == ["http.response.start", "http.response.body"]
    assert conn.sent[1]["more_body"] is False


async def test_a_failing_write_ends_the_stream_and_detaches() -> None:
    hub = EventHub(lambda t: t)
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        if message.get("body"):
            raise OSError("connection reset")
        sent.append(message)

    never = asyncio.Event()

    async def receive() -> dict[str, Any]:
        await never.wait()
        return {}

    served = asyncio.ensure_future(EventStream(hub.feed(hub.attach("s", None)), EventStreams())(
        SCOPE, receive, send))
    await settle()
    hub.publish(turn_end(1))
    await asyncio.wait_for(served, 5)
    assert hub.client_count() == 0


async def test_an_iterator_source_is_sent_in_order_and_its_failure_raised() -> None:
    async def pieces(fail: bool) -> AsyncIterator[bytes]:
        for i in range(3):
            yield f"id: {i}\r\ndata: x\r\n\r\n".encode()
        if fail:
            raise RuntimeError("the source broke")

    conn = Connection()
    await asyncio.wait_for(EventStream(pieces(False), EventStreams())(
        SCOPE, conn.receive, conn.send), 5)
    assert conn.ids() == [0, 1, 2] and conn.sent[-1]["more_body"] is False
    with pytest.raises(RuntimeError, match="the source broke"):
        await asyncio.wait_for(EventStream(pieces(True), EventStreams())(
            SCOPE, Connection().receive, Connection().send), 5)
