"""The provider's total timeout holds whatever the server does, a byte at a time included.

A raw socket server trickles one byte every 20 ms (well inside the read timeout) at three
places: in the headers, in an error body, and inside an event that never ends. Each attempt
must fail at its total budget, not run on for as long as the server likes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from steerable import Agent, AgentLoop, TurnStatus
from steerable.errors import ProviderError
from steerable.providers import ProviderTimeouts, RetryPolicy
from steerable.providers.openai import OpenAIProvider

HEAD_OK = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
HEAD_500 = b"HTTP/1.1 500 Internal Server Error\r\ncontent-type: application/json\r\n" \
           b"content-length: 100000\r\n\r\n"


async def trickler(prefix: bytes, trickled: bytes) -> AsyncIterator[int]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(prefix)
            for byte in trickled * 1000:
                writer.write(bytes([byte]))
                await writer.drain()
                await asyncio.sleep(0.02)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()


@pytest.mark.parametrize(("prefix", "trickled"), [
    (b"", HEAD_OK),                                 # the headers themselves, a byte at a time
    (HEAD_500, b'{"error": {"message": "slow"}}'),  # an error body that never ends
    (HEAD_OK, b"data: {\"choices\": "),             # an event that never ends
], ids=["headers", "error-body", "event"])
async def test_total_timeout_holds_against_a_trickling_server(prefix: bytes, trickled: bytes) -> None:
    async for port in trickler(prefix, trickled):
        provider = OpenAIProvider(
            model="m", api_key="k", base_url=f"http://127.0.0.1:{port}/v1",
            timeouts=ProviderTimeouts(connect=2, read=5, total=0.5),
            retry=RetryPolicy(max_attempts=1))
        loop = AgentLoop(Agent(provider=provider))
        started = time.monotonic()
        result = await loop.run_turn("hi", session_id="s")
        elapsed = time.monotonic() - started
        await loop.aclose()
        await provider.aclose()
        assert result.status is TurnStatus.ERROR and isinstance(result.error, ProviderError)
        assert "total timeout (0.5 s)" in str(result.error)
        assert elapsed < 3  # before the fix this ran for as long as the server trickled (20 s+)
