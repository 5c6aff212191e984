"""The one seam between the loop and an LLM: ``stream(request)`` yielding chunks, ``aclose()``.

A provider turns an ``LLMRequest`` into a stream of chunks. Text and reasoning arrive as deltas;
tool calls arrive whole (assembling streamed argument fragments is the provider's job); a
``RetryNotice`` tells the loop a transient failure is being retried; ``StreamEnd`` carries usage
and the finish reason. Errors are raised as ``steerable.errors.ProviderError`` subclasses.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import field
from typing import Any, Literal, Protocol, runtime_checkable

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
    "ToolChoice",
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


@record(kw_only=False)
class ToolChoice(Record):
    """What the model may do with the tools of a request (the caller decides; a provider only
    translates it into its wire form, e.g. ``tool_choice``, a JSON schema or a grammar).

    ``mode``: ``auto`` (a call optional), ``none`` (answer in words), ``required`` (a call).
    ``only``: the names the model may call (None: every tool of the request); the request still
    lists all its tools, so the prompt starts the same way on every call. ``max_tokens``: a cap
    on the reply's length. ``reason``: why (shown in ``LLM_REQUEST``, replays and traces)."""

    mode: Literal["auto", "none", "required"] = "auto"
    only: tuple[str, ...] | None = None
    max_tokens: int | None = None
    reason: str = ""

    def __post_init__(self) -> None:
        if self.mode not in ("auto", "none", "required"):
            raise ValueError(f"ToolChoice.mode must be auto, none or required, not {self.mode!r}")
        if self.only is not None and not all(isinstance(n, str) for n in self.only):
            raise TypeError("ToolChoice.only must be a tuple of tool names")

    def allows(self, name: str) -> bool:
        """Whether a call of ``name`` is allowed by this choice."""
        return self.mode != "none" and (self.only is None or name in self.only)

    def callable(self, tools: Sequence[ToolSpec]) -> tuple[ToolSpec, ...]:
        """The tools of ``tools`` the model may call."""
        return tuple(t for t in tools if self.allows(t.name))


@record
class LLMRequest(Record):
    """One LLM call. ``messages`` starts with the agent's system message when it has one.

    Read-only: the loop passes a ``MessageView`` (built in O(1), equal to the tuple of the same
    messages); any sequence of messages works when you build a request yourself."""

    messages: Sequence[Message]
    tools: tuple[ToolSpec, ...] = ()
    model: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    tool_choice: ToolChoice = field(default_factory=ToolChoice)
    answer_schema: Mapping[str, Any] | None = None
    """When set, the reply is one JSON value of this schema (a provider that can constrain its
    output does; the caller checks it either way)."""


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
