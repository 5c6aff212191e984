"""The one seam between the loop and an LLM: ``stream(request)`` yielding chunks, ``aclose()``.

A provider turns an ``LLMRequest`` into a stream of chunks. Text and reasoning arrive as deltas;
tool calls arrive whole (assembling streamed argument fragments is the provider's job); a
``RetryNotice`` tells the loop a transient failure is being retried; ``StreamEnd`` carries usage
and the finish reason. Errors are raised as ``steerable.errors.ProviderError`` subclasses.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import field
from typing import Any, Protocol, runtime_checkable

from steerable._messages import Message, ToolCall, Usage
from steerable._records import Record, record

__all__ = [
    "Chunk",
    "LLMRequest",
    "LLMResponse",
    "Provider",
    "RetryNotice",
    "StreamEnd",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallChunk",
    "ToolSpec",
]


@record(kw_only=False)
class ToolSpec(Record):
    """What the model is told about a tool: its name, description and JSON schema."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    read_only: bool = False
    """The tool changes nothing (a provider may route calls by it; models are not told)."""


@record
class LLMRequest(Record):
    """One LLM call. ``messages`` starts with the agent's system message when it has one.

    Read-only: the loop passes a ``MessageView`` (built in O(1), equal to the tuple of the same
    messages); any sequence of messages works when you build a request yourself."""

    messages: Sequence[Message]
    tools: tuple[ToolSpec, ...] = ()
    model: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)


@record
class LLMResponse(Record):
    """The assembled reply to one LLM call."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    thinking: str = ""
    usage: Usage | None = None
    finish_reason: str | None = None


@record(kw_only=False)
class TextDelta(Record):
    """A piece of the answer's text."""

    text: str


@record(kw_only=False)
class ThinkingDelta(Record):
    """A piece of reasoning text, streamed apart from the answer."""

    text: str


@record(kw_only=False)
class ToolCallChunk(Record):
    """One complete tool call of the response."""

    call: ToolCall


@record(kw_only=False)
class RetryNotice(Record):
    """Yielded by a provider before it retries a failed attempt (becomes ``LLM_RETRY``)."""

    attempt: int
    reason: str
    delay: float


@record(kw_only=False)
class StreamEnd(Record):
    """The end of a response: its usage and finish reason."""

    usage: Usage | None = None
    finish_reason: str | None = None


Chunk = TextDelta | ThinkingDelta | ToolCallChunk | RetryNotice | StreamEnd


@runtime_checkable
class Provider(Protocol):
    """An LLM backend. ``stream`` is an async generator; closing it must cancel the call."""

    def stream(self, request: LLMRequest) -> AsyncIterator[Chunk]: ...

    async def aclose(self) -> None: ...
