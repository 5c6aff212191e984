"""The one seam between the loop and an LLM: ``stream(request)`` yielding chunks, ``aclose()``.

A provider turns an ``LLMRequest`` into a stream of chunks. Text and reasoning arrive as deltas;
tool calls arrive whole (assembling streamed argument fragments is the provider's job); a
``RetryNotice`` tells the loop a transient failure is being retried; ``StreamEnd`` carries usage
and the finish reason. Errors are raised as ``steerable.errors.ProviderError`` subclasses.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from steerable._messages import Message, ToolCall, Usage

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


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """What the model is told about a tool: its name, description and JSON schema."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    read_only: bool = False
    """The tool changes nothing (a provider may route calls by it; models are not told)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LLMRequest:
    """One LLM call. ``messages`` starts with the agent's system message when it has one.

    Read-only: the loop passes a ``MessageView`` (built in O(1), equal to the tuple of the same
    messages); any sequence of messages works when you build a request yourself."""

    messages: Sequence[Message]
    tools: tuple[ToolSpec, ...] = ()
    model: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class LLMResponse:
    """The assembled reply to one LLM call."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    thinking: str = ""
    usage: Usage | None = None
    finish_reason: str | None = None


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ThinkingDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ToolCallChunk:
    call: ToolCall


@dataclass(frozen=True, slots=True)
class RetryNotice:
    """Yielded by a provider before it retries a failed attempt (becomes ``LLM_RETRY``)."""

    attempt: int
    reason: str
    delay: float


@dataclass(frozen=True, slots=True)
class StreamEnd:
    usage: Usage | None = None
    finish_reason: str | None = None


Chunk = TextDelta | ThinkingDelta | ToolCallChunk | RetryNotice | StreamEnd


@runtime_checkable
class Provider(Protocol):
    """An LLM backend. ``stream`` is an async generator; closing it must cancel the call."""

    def stream(self, request: LLMRequest) -> AsyncIterator[Chunk]: ...

    async def aclose(self) -> None: ...
