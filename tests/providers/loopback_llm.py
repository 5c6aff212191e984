"""A scripted HTTP/1.1 server on 127.0.0.1 that speaks the OpenAI and Anthropic wire formats.

Written on asyncio streams so a test controls every byte: it can delay the first byte, cut a
stream mid-way, hang until the client goes away, and count the connections that are open.
Each request takes the next scripted ``Step``; a request with no step left gets a 500 and is
recorded in ``unexpected`` so the test fails loudly.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden",
            404: "Not Found", 429: "Too Many Requests", 500: "Internal Server Error",
            502: "Bad Gateway", 529: "Overloaded"}


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class Step:
    """One scripted response: a plain body, or a stream of SSE frames sent chunked."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None
    frames: Sequence[bytes] = ()
    first_byte_delay: float = 0.0
    frame_delay: float = 0.0
    cut_after: int | None = None
    """Close the socket abruptly after this many frames (no terminating chunk)."""
    hang_after: int | None = None
    """Stop sending after this many frames and wait until the client closes."""


def sse(data: Any, event: str | None = None) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {text}\n\n".encode()


def stream(frames: Iterable[bytes], **options: Any) -> Step:
    return Step(headers={"content-type": "text/event-stream"}, frames=list(frames), **options)


def json_response(status: int, body: Any, headers: dict[str, str] | None = None) -> Step:
    return Step(status=status, headers={"content-type": "application/json", **(headers or {})},
                body=json.dumps(body).encode())


def html_page(status: int) -> Step:
    page = b"<!DOCTYPE html><html><body><h1>Welcome to nginx!</h1></body></html>"
    return Step(status=status, headers={"content-type": "text/html"}, body=page)


# --- OpenAI Chat Completions frames -------------------------------------------------------

def _oa_chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    return sse({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "m",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


def openai_frames(
    texts: Sequence[str] = (),
    *,
    tool_fragments: Sequence[dict[str, Any]] = (),
    reasoning: Sequence[str] = (),
    finish: str = "stop",
    usage: tuple[int, int] | None = (11, 7),
    usage_extra: dict[str, Any] | None = None,
    end_extra: dict[str, Any] | None = None,
    done: bool = True,
) -> list[bytes]:
    frames = [_oa_chunk({"role": "assistant", "content": ""})]
    frames += [_oa_chunk({"reasoning_content": r}) for r in reasoning]
    frames += [_oa_chunk({"content": t}) for t in texts]
    frames += [_oa_chunk({"tool_calls": [f]}) for f in tool_fragments]
    frames.append(_oa_chunk({}, finish))
    if usage is not None:
        frames.append(sse({"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [],
                           "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1],
                                     "total_tokens": sum(usage), **(usage_extra or {})},
                           **(end_extra or {})}))
    if done:
        frames.append(sse("[DONE]"))
    return frames


def openai_call_fragments(index: int, call_id: str, name: str, arguments: str,
                          pieces: int = 3) -> list[dict[str, Any]]:
    """One tool call split the way OpenAI streams it: id and name first, then argument bits."""
    size = max(1, -(-len(arguments) // pieces))
    out: list[dict[str, Any]] = [{"index": index, "id": call_id, "type": "function",
                                  "function": {"name": name, "arguments": ""}}]
    out += [{"index": index, "function": {"arguments": arguments[i:i + size]}}
            for i in range(0, len(arguments), size)]
    return out


# --- Anthropic Messages frames -------------------------------------------------------------

def anthropic_frames(
    texts: Sequence[str] = (),
    *,
    tool_uses: Sequence[tuple[str, str, Sequence[str]]] = (),
    thinking: Sequence[str] = (),
    stop_reason: str = "end_turn",
    usage: tuple[int, int] = (21, 9),
    cache: tuple[int, int] | None = None,
    stop: bool = True,
) -> list[bytes]:
    start_usage = {"input_tokens": usage[0], "output_tokens": 1}
    if cache is not None:  # (read, written): counted apart from input_tokens, as the API does
        start_usage |= {"cache_read_input_tokens": cache[0],
                        "cache_creation_input_tokens": cache[1]}
    frames = [sse({"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": "claude",
        "stop_reason": None, "usage": start_usage}},
        "message_start"), sse({"type": "ping"}, "ping")]
    index = 0
    if thinking:
        frames.append(sse({"type": "content_block_start", "index": index,
                           "content_block": {"type": "thinking", "thinking": ""}},
                          "content_block_start"))
        frames += [sse({"type": "content_block_delta", "index": index,
                        "delta": {"type": "thinking_delta", "thinking": t}},
                       "content_block_delta") for t in thinking]
        frames.append(sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
        index += 1
    if texts:
        frames.append(sse({"type": "content_block_start", "index": index,
                           "content_block": {"type": "text", "text": ""}}, "content_block_start"))
        frames += [sse({"type": "content_block_delta", "index": index,
                        "delta": {"type": "text_delta", "text": t}}, "content_block_delta")
                   for t in texts]
        frames.append(sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
        index += 1
    for call_id, name, parts in tool_uses:
        frames.append(sse({"type": "content_block_start", "index": index, "content_block": {
            "type": "tool_use", "id": call_id, "name": name, "input": {}}},
            "content_block_start"))
        frames += [sse({"type": "content_block_delta", "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": p}},
                       "content_block_delta") for p in parts]
        frames.append(sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
        index += 1
    frames.append(sse({"type": "message_delta", "delta": {"stop_reason": stop_reason},
                       "usage": {"output_tokens": usage[1]}}, "message_delta"))
    if stop:
        frames.append(sse({"type": "message_stop"}, "message_stop"))
    return frames


# --- the server ----------------------------------------------------------------------------

class LoopbackServer:
    def __init__(self) -> None:
        self.steps: deque[Step] = deque()
        self.requests: list[Request] = []
        self.unexpected: list[Request] = []
        self.open_connections = 0
        self.connections_total = 0
        self.last_close: float | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._handlers: set[asyncio.Task[None]] = set()
        self._changed = asyncio.Event()
        self._server: asyncio.Server | None = None
        self.url = ""

    async def start(self) -> LoopbackServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    def add(self, *steps: Step) -> None:
        self.steps.extend(steps)

    async def aclose(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        if self._handlers:  # let each handler see its aborted connection and finish
            await asyncio.wait(self._handlers, timeout=2.0)
        await self._server.wait_closed()

    async def wait_closed_connections(self, timeout: float = 2.0) -> None:
        """Wait until no connection is open (bounded; raises TimeoutError)."""
        async with asyncio.timeout(timeout):
            while self.open_connections:
                self._changed.clear()
                await self._changed.wait()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.open_connections += 1
        self.connections_total += 1
        self._writers.add(writer)
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            while True:
                request = await _read_request(reader)
                if request is None:
                    break
                self.requests.append(request)
                if self.steps:
                    step = self.steps.popleft()
                else:
                    self.unexpected.append(request)
                    step = json_response(500, {"error": {"message": "no scripted response"}})
                if not await self._respond(step, reader, writer):
                    break
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._writers.discard(writer)
            self._handlers.discard(task)
            writer.close()
            self.open_connections -= 1
            self.last_close = time.monotonic()
            self._changed.set()

    async def _respond(self, step: Step, reader: asyncio.StreamReader,
                       writer: asyncio.StreamWriter) -> bool:
        """Send one response; False when the connection must end."""
        if step.first_byte_delay and await _client_left(reader, step.first_byte_delay):
            return False
        head = [f"HTTP/1.1 {step.status} {_REASONS.get(step.status, 'Status')}"]
        head += [f"{k}: {v}" for k, v in step.headers.items()]
        if step.body is not None:
            head.append(f"content-length: {len(step.body)}")
            writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + step.body)
            await writer.drain()
            return True
        head.append("transfer-encoding: chunked")
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode())
        for i, frame in enumerate(step.frames):
            if i == step.cut_after:
                await writer.drain()
                writer.transport.abort()
                return False
            if i == step.hang_after:
                await writer.drain()
                await _client_left(reader, 30.0)
                return False
            if step.frame_delay:
                await asyncio.sleep(step.frame_delay)
            writer.write(b"%x\r\n%s\r\n" % (len(frame), frame))
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True


async def _client_left(reader: asyncio.StreamReader, wait: float) -> bool:
    """Wait up to ``wait`` seconds; True if the client closed the connection meanwhile."""
    try:
        async with asyncio.timeout(wait):
            return await reader.read(1) == b""
    except TimeoutError:
        return False


async def _read_request(reader: asyncio.StreamReader) -> Request | None:
    line = await reader.readline()
    if not line:
        return None
    method, path, _ = line.decode().split(" ", 2)
    headers: dict[str, str] = {}
    while (raw := await reader.readline()) not in (b"\r\n", b"\n", b""):
        name, _, value = raw.decode().partition(":")
        headers[name.strip().lower()] = value.strip()
    data = await reader.readexactly(int(headers.get("content-length", "0")))
    body = json.loads(data) if data else None
    return Request(method, path, headers, body)


@contextlib.asynccontextmanager
async def running_server() -> Any:
    server = await LoopbackServer().start()
    try:
        yield server
    finally:
        await server.aclose()
