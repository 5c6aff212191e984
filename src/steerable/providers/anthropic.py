"""The Anthropic Messages API provider.

Differences from Chat Completions that this module absorbs: the system prompt is a top-level
``system`` field; tool results are ``tool_result`` blocks inside a user message, and roles must
alternate, so consecutive same-role messages are merged into one; ``max_tokens`` is required;
the stream is typed events (``content_block_start/delta/stop``...) with tool arguments as
``input_json_delta`` fragments, passed on as ``ToolArgsDelta`` as they come, assembled here and
yielded whole when their block stops.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import aclosing
from typing import Any

from steerable._messages import Message, ToolCall, Usage
from steerable.errors import ConfigurationError, RetryableProviderError
from steerable.providers._base import (
    Chunk,
    LLMRequest,
    StreamEnd,
    TextDelta,
    ThinkingDelta,
    ToolArgsDelta,
    ToolCallChunk,
    ToolSpec,
)
from steerable.providers._http import (
    ApiTarget,
    check_base_url,
    parse_event,
    stream_error,
    stream_events,
)
from steerable.providers._http_provider import HttpProvider
from steerable.providers._parts_wire import anthropic_blocks
from steerable.providers._retry import RetryPolicy
from steerable.providers._timeouts import ProviderTimeouts

__all__ = ["AnthropicProvider"]

DEFAULT_BASE_URL = "https://api.anthropic.com"
DEFAULT_MODEL = "claude-sonnet-4-5"
API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096


def _blocks(m: Message) -> list[dict[str, Any]]:
    if m.role == "tool":
        # A result with images or files sends them as blocks of its own (text, image and
        # document blocks are what a tool_result holds).
        result = anthropic_blocks(m.parts) if m.parts else m.text
        return [{"type": "tool_result", "tool_use_id": m.tool_call_id,
                 "content": result, "is_error": m.is_error}]
    content = m.content
    if not isinstance(content, str) and m.role == "user":
        blocks = anthropic_blocks(content)
    else:
        # The API refuses empty text blocks.
        text = m.text
        blocks = [{"type": "text", "text": text}] if text else []
    blocks.extend({"type": "tool_use", "id": c.id, "name": c.name, "input": dict(c.arguments)}
                  for c in m.tool_calls)
    return blocks


def wire_messages(messages: Sequence[Message]) -> tuple[str, list[dict[str, Any]]]:
    """The top-level system text and the alternating user/assistant messages."""
    system: list[str] = []
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system":
            system.append(m.text)
            continue
        role = "assistant" if m.role == "assistant" else "user"
        blocks = _blocks(m)
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return "\n\n".join(s for s in system if s), out


def wire_tools(tools: tuple[ToolSpec, ...]) -> list[dict[str, Any]]:
    return [{"name": t.name, "description": t.description, "input_schema": dict(t.parameters)}
            for t in tools]


FINAL_TOOL = "final_answer"
"""The tool a reply with an answer schema is given through (the API has no JSON-schema mode
for text that this provider uses; a forced tool call is what Anthropic documents for JSON)."""


def _final_tool_name(tools: tuple[ToolSpec, ...]) -> str:
    names = {t.name for t in tools}
    name = FINAL_TOOL
    while name in names:  # an agent's own tool of that name keeps it
        name += "_"
    return name


def _answer_tools(body: dict[str, Any], request: LLMRequest, name: str) -> None:
    """Offer the answer schema as one more tool and make the model call a tool: its final
    answer is then the input of ``name``, which the reply turns back into text."""
    assert request.answer_schema is not None
    answer = {"name": name, "input_schema": dict(request.answer_schema),
              "description": "Give your final answer to the user through this tool, as its "
                             "input. Call it once, when you are done with every other tool."}
    callable_tools = request.tool_choice.callable(request.tools)
    body["tools"] = [*wire_tools(callable_tools), answer]
    body["tool_choice"] = {"type": "any"} if callable_tools else {"type": "tool", "name": name}


class _Reply:
    """One streamed message: open content blocks, usage, stop reason."""

    __slots__ = (
        "_api_url",
        "blocks",
        "cache_read",
        "cache_write",
        "calls",
        "final_tool",
        "finish",
        "input_tokens",
        "model",
        "output_tokens",
        "stopped",
        "target",
    )

    def __init__(self, target: ApiTarget, final_tool: str | None = None,
                 api_url: str | None = None) -> None:
        self.target = target
        self._api_url = api_url
        self.final_tool = final_tool
        """The answer tool's name when the request had an answer schema: its input is text."""
        self.blocks: dict[int, dict[str, Any]] = {}
        self.calls = 0
        """Tool-use blocks started so far (a call's position among the reply's calls)."""
        self.input_tokens = 0
        self.output_tokens = 0
        self.cache_read = 0
        self.cache_write = 0
        self.model: str | None = None
        self.finish: str | None = None
        self.stopped = False

    def feed(self, name: str, data: Any) -> Chunk | None:
        if not isinstance(data, dict):
            raise stream_error(self.target, f"unexpected event data {str(data)[:200]!r}", None)
        if name == "content_block_delta":
            return self._delta(data.get("index", 0), data.get("delta") or {})
        if name == "content_block_start":
            block = dict(data.get("content_block") or {})
            block["fragments"] = []
            if block.get("type") == "tool_use":
                if self.final_tool is not None and block.get("name") == self.final_tool:
                    block["type"] = "answer"
                else:
                    block["position"] = self.calls
                    self.calls += 1
            self.blocks[data.get("index", 0)] = block
        elif name == "content_block_stop":
            return self._stop(data.get("index", 0))
        elif name == "message_start":
            message = data.get("message") or {}
            self.model = message.get("model") or None
            self._count(message.get("usage") or {})
        elif name == "message_delta":
            self.finish = (data.get("delta") or {}).get("stop_reason") or self.finish
            self._count(data.get("usage") or {})
        elif name == "message_stop":
            self.stopped = True
        elif name == "error":
            error = data.get("error") or {}
            raise stream_error(self.target, str(error.get("message", data)), error.get("type"))
        return None  # ping and event types added to the API later

    def _count(self, usage: Mapping[str, Any]) -> None:
        """Counts as they come: ``message_start`` has the input's, ``message_delta`` the
        running output count (and, on some servers, the input's again)."""
        for key, attr in (("input_tokens", "input_tokens"), ("output_tokens", "output_tokens"),
                          ("cache_read_input_tokens", "cache_read"),
                          ("cache_creation_input_tokens", "cache_write")):
            value = usage.get(key)
            if value is not None:
                setattr(self, attr, int(value))

    def _delta(self, index: int, delta: Mapping[str, Any]) -> Chunk | None:
        kind = delta.get("type")
        if kind == "text_delta":
            return TextDelta(delta.get("text", "")) if delta.get("text") else None
        if kind == "thinking_delta":
            return ThinkingDelta(delta.get("thinking", "")) if delta.get("thinking") else None
        if kind == "input_json_delta":
            block = self.blocks.get(index)
            if block is None:
                raise stream_error(self.target, f"tool input for unknown block {index}", None)
            piece = delta.get("partial_json")
            if isinstance(piece, str) and piece:
                block["fragments"].append(piece)
                if block["type"] == "answer":  # the answer, streamed as the text it is
                    return TextDelta(piece)
                return ToolArgsDelta(int(block.get("position", 0)), str(block.get("name", "")),
                                     piece)
        return None

    def _stop(self, index: int) -> Chunk | None:
        block = self.blocks.pop(index, None)
        if block is not None and block.get("type") == "answer" and not block["fragments"]:
            # The whole input came in the block's start: it is the answer's text.
            return TextDelta(json.dumps(block.get("input") or {}))
        if block is None or block.get("type") != "tool_use":
            return None
        raw = "".join(block["fragments"])
        arguments: Any = block.get("input") or {}
        error = None
        if raw.strip():
            try:
                arguments = json.loads(raw)
            except ValueError as exc:
                arguments, error = {}, f"arguments are not valid JSON ({exc})"
        if not isinstance(arguments, dict):
            arguments, error = {}, f"arguments must be a JSON object, got {type(arguments).__name__}"
        call_id = block.get("id") or f"toolu_{index}"
        return ToolCallChunk(ToolCall(call_id, str(block.get("name", "")), arguments, error))

    def end(self) -> StreamEnd:
        if not self.stopped:
            raise RetryableProviderError(
                "the Anthropic stream ended before the reply was complete (no message_stop)")
        # Anthropic counts cache reads and writes apart from ``input_tokens``; Usage counts
        # every prompt token in ``input_tokens``, as Chat Completions does.
        usage = Usage(self.input_tokens + self.cache_read + self.cache_write, self.output_tokens,
                      self.cache_read, self.cache_write)
        finish = self.finish
        if finish == "tool_use" and self.calls == 0:
            finish = "end_turn"  # only the answer tool was called: the reply is the answer
        return StreamEnd(usage, finish, self.model, self._api_url)


class AnthropicProvider(HttpProvider):
    """Anthropic Messages over httpx with server-sent events.

    ``api_key`` falls back to ``ANTHROPIC_API_KEY``, ``base_url`` to ``ANTHROPIC_BASE_URL`` then
    Anthropic's own, ``model`` to ``ANTHROPIC_MODEL`` then ``claude-sonnet-4-5``. ``max_tokens``
    (required by the API) may also come per request in ``params``.
    """

    def __init__(
        self,
        *,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeouts: ProviderTimeouts | None = None,
        retry: RetryPolicy | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        env = os.environ if environ is None else environ
        self.model = model or env.get("ANTHROPIC_MODEL") or DEFAULT_MODEL
        self.base_url = check_base_url(
            base_url or env.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL)
        self._api_key = api_key if api_key is not None else env.get("ANTHROPIC_API_KEY")
        self._headers = dict(headers or {})
        super().__init__(timeouts, retry)
        self.max_tokens = max_tokens
        if not self._api_key:  # known now, so said now
            raise ConfigurationError(
                "no Anthropic API key: set ANTHROPIC_API_KEY (in Python: api_key=)")

    def __repr__(self) -> str:  # never show the key
        return f"<AnthropicProvider model={self.model!r} base_url={self.base_url!r}>"

    def _request_headers(self) -> dict[str, str]:
        assert self._api_key is not None
        return {"x-api-key": self._api_key, "anthropic-version": API_VERSION,
                "Accept": "text/event-stream", **self._headers}

    def _body(self, request: LLMRequest, model: str) -> dict[str, Any]:
        system, messages = wire_messages(request.messages)
        body: dict[str, Any] = {"model": model, "max_tokens": self.max_tokens,
                                "messages": messages, "stream": True}
        if system:
            body["system"] = system
        if request.answer_schema is not None:
            _answer_tools(body, request, _final_tool_name(request.tools))
        elif request.tools:
            body["tools"] = wire_tools(request.tools)
            # The tools stay listed when none may be called: the prompt starts the same way
            # as on the calls before, so the API's prompt cache keeps it. ("required" is not
            # sent as "any": the API refuses a forced tool use with extended thinking on.)
            if request.tool_choice.mode == "none":
                body["tool_choice"] = {"type": "none"}
        body.update(request.params)
        return body

    async def _attempt(self, request: LLMRequest) -> AsyncGenerator[Chunk, None]:
        model = request.model or self.model
        headers = self._request_headers()
        target = ApiTarget(api="Anthropic", url=f"{self.base_url}/v1/messages", model=model,
                           key_hint="ANTHROPIC_API_KEY (in Python: api_key=)")
        final = None if request.answer_schema is None else _final_tool_name(request.tools)
        reply = _Reply(target, final, self.base_url)
        events = stream_events(self._http(), target, headers, self._body(request, model),
                               self.timeouts)
        async with aclosing(events):
            async for event in events:
                if reply.stopped:
                    continue  # read to the end so the connection can be reused
                chunk = reply.feed(event.event, parse_event(target, event))
                if chunk is not None:
                    yield chunk
        yield reply.end()
