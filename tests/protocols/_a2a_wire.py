"""What an A2A server sent, checked strictly against the SDK's protobuf models.

The SDK's client parses answers leniently (unknown fields are dropped), so the tests hand it an
httpx client whose transport keeps a copy of every JSON-RPC exchange; ``check`` then parses each
result with ``ParseDict`` (unknown fields refused) into the type the method answers with, and
checks the fields the protocol marks REQUIRED.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
from a2a.types import ListTasksResponse, SendMessageResponse, StreamResponse, Task
from a2a.utils.proto_utils import validate_proto_required_fields
from google.protobuf.json_format import ParseDict
from google.protobuf.message import Message

_RESULT: dict[str, type[Message]] = {
    "SendMessage": SendMessageResponse, "SendStreamingMessage": StreamResponse,
    "SubscribeToTask": StreamResponse, "GetTask": Task, "CancelTask": Task,
    "ListTasks": ListTasksResponse}


@dataclass
class Exchange:
    method: str
    chunks: list[bytes] = field(default_factory=list)

    def answers(self) -> list[dict[str, Any]]:
        """The JSON-RPC answers: one, or one per server-sent event."""
        body = b"".join(self.chunks).decode()
        if not body.lstrip().startswith("{"):
            return [json.loads(line[5:]) for line in body.splitlines()
                    if line.startswith("data:")]
        return [json.loads(body)]


class _Tee(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, into: list[bytes]) -> None:
        self.inner = inner
        self.into = into

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.inner:
            self.into.append(chunk)
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


class Recorder(httpx.AsyncBaseTransport):
    """An httpx transport that keeps a copy of each JSON-RPC exchange."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.exchanges: list[Exchange] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        if request.method != "POST" or request.url.path != "/a2a":
            return response
        exchange = Exchange(json.loads(request.content)["method"])
        self.exchanges.append(exchange)
        assert isinstance(response.stream, httpx.AsyncByteStream)
        return httpx.Response(response.status_code, headers=response.headers,
                              stream=_Tee(response.stream, exchange.chunks),
                              extensions=response.extensions)

    async def aclose(self) -> None:
        await self.inner.aclose()

    def check(self) -> int:
        """Parse every result strictly; the number of messages checked. An error answer must
        be a JSON-RPC error object."""
        checked = 0
        for exchange in self.exchanges:
            for answer in exchange.answers():
                assert answer.get("jsonrpc") == "2.0", answer
                if "error" in answer:
                    assert isinstance(answer["error"]["code"], int), answer
                    assert isinstance(answer["error"]["message"], str), answer
                    continue
                parsed = ParseDict(answer["result"], _RESULT[exchange.method]())
                validate_proto_required_fields(parsed)
                checked += 1
        return checked
