"""The one seam between the loop and an LLM: ``stream(request)`` yielding chunks, ``aclose()``.

A provider turns an ``LLMRequest`` into a stream of chunks. Text and reasoning arrive as deltas;
tool calls arrive whole (assembling streamed argument fragments is the provider's job), after
``ToolArgsDelta`` pieces of their arguments as the model writes them (optional: a provider
that gets calls whole sends none); a ``RetryNotice`` tells the loop a transient failure is being retried; ``StreamEnd`` carries usage
and the finish reason. Errors are raised as ``steerable.errors.ProviderError`` subclasses.

The loop reads every provider through ``SecretGuard`` (``guard_secrets`` is it as a generator),
which regroups the text so that no secret is cut between two deltas (see ``steerable._secrets.StreamGuard``). A provider whose
text was cut that way already (a replay of a recorded run) says so with ``text_guarded``.
Argument pieces are regrouped the same way, one guard per call.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterable, Mapping, Sequence
from dataclasses import field
from typing import Any, Literal, Protocol, runtime_checkable

from steerable._messages import Message, ToolCall, Usage
from steerable._records import Record, record
from steerable._secrets import StreamGuard, json_forms

__all__ = [
    "Chunk",
    "LLMRequest",
    "LLMResponse",
    "Provider",
    "RetryNotice",
    "SecretGuard",
    "StreamEnd",
    "TextDelta",
    "ThinkingDelta",
    "ToolArgsDelta",
    "ToolCallChunk",
    "ToolChoice",
    "ToolSpec",
    "guard_secrets",
    "text_guarded",
]


@record(kw_only=False)
class ToolSpec(Record):
    """What the model is told about a tool: its name, description and JSON schema."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    read_only: bool = False
    """The tool changes nothing (a provider may route calls by it; models are not told)."""


Variant = tuple[str, tuple[tuple[str, tuple[str, ...]], ...]]
"""A tool's name and the values some of its parameters may take on one call (``ToolChoice``)."""


@record(kw_only=False)
class ToolChoice(Record):
    """What the model may do with the tools of a request (the caller decides; a provider only
    translates it into its wire form, e.g. ``tool_choice``, a JSON schema or a grammar).

    ``mode``: ``auto`` (a call optional), ``none`` (answer in words), ``required`` (a call).
    ``only``: the names the model may call (None: every tool of the request); the request still
    lists all its tools, so the prompt starts the same way on every call. ``max_tokens``: a cap
    on the reply's length. ``reason``: why (shown in ``LLM_REQUEST``, replays and traces).
    ``values``: for a required call, the values some parameters may take, as (tool, ((parameter,
    allowed values), ...)) variants: a tool with variants may be called as one of them (a
    ``path`` and the ``old_text`` lines of that file), a tool without any as it is. The tools
    are listed unchanged; a provider that holds a required call to a grammar holds it to these
    values (others ignore them)."""

    mode: Literal["auto", "none", "required"] = "auto"
    only: tuple[str, ...] | None = None
    max_tokens: int | None = None
    reason: str = ""
    values: tuple[Variant, ...] = ()

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
class ToolArgsDelta(Record):
    """A piece of a tool call's arguments (raw JSON text) while the model writes them; the
    whole call still follows as a ``ToolCallChunk`` (becomes ``TOOL_CALL_DELTA``)."""

    index: int
    """The call's position in the reply (0 for the first call)."""
    name: str
    """The tool's name ("" while the provider has not been told it yet)."""
    text: str


@record(kw_only=False)
class RetryNotice(Record):
    """Yielded by a provider before it retries a failed attempt (becomes ``LLM_RETRY``)."""

    attempt: int
    reason: str
    delay: float


@record(kw_only=False)
class StreamEnd(Record):
    """The end of a response: its usage and finish reason, and for pricing the call (see
    ``steerable._pricing``) the model that answered and the API it was asked through."""

    usage: Usage | None = None
    finish_reason: str | None = None
    model: str | None = None
    """The model the server says answered (None: the request's model is meant)."""
    api_url: str | None = None
    """The provider's API base URL (None: the price is looked up by the model's name alone)."""


Chunk = TextDelta | ThinkingDelta | ToolCallChunk | ToolArgsDelta | RetryNotice | StreamEnd


@runtime_checkable
class Provider(Protocol):
    """An LLM backend. ``stream`` is an async generator; closing it must cancel the call."""

    def stream(self, request: LLMRequest) -> AsyncGenerator[Chunk, None]: ...

    async def aclose(self) -> None: ...


def text_guarded(provider: object) -> bool:
    """Whether ``provider`` streams text already cut by ``guard_secrets`` (``text_guarded =
    True`` on it), so reading it through the guard again must be skipped."""
    return getattr(provider, "text_guarded", False) is True


class _ArgsGuards:
    """One ``StreamGuard`` per tool call being written. Arguments are JSON text, where a secret
    holding a quote, a backslash or a control character is written escaped: the escaped forms
    are guarded too, so those are never cut either."""

    __slots__ = ("guards", "names", "secrets")

    def __init__(self, secrets: tuple[str, ...]) -> None:
        self.secrets = tuple(json_forms(secrets))
        self.guards: dict[int, StreamGuard] = {}
        self.names: dict[int, str] = {}

    def feed(self, chunk: ToolArgsDelta) -> ToolArgsDelta:
        guard = self.guards.get(chunk.index)
        if guard is None:
            guard = self.guards[chunk.index] = StreamGuard(self.secrets)
        if chunk.name:
            self.names[chunk.index] = chunk.name
        return ToolArgsDelta(chunk.index, chunk.name, guard.feed(chunk.text))

    def flush(self) -> list[Chunk]:
        """What every call holds back: final once a whole call (or the end) arrives."""
        out: list[Chunk] = [ToolArgsDelta(i, self.names.get(i, ""), held)
                            for i, g in self.guards.items() if (held := g.flush())]
        return out

    def reset(self) -> None:
        self.guards.clear()
        self.names.clear()


class SecretGuard:
    """``guard_secrets`` one chunk at a time, for a reader that takes the chunks itself (the
    loop's model call: an async generator between it and the provider was three objects the
    collector tracks per call in flight, and one more generator step per chunk).

    ``feed(chunk)`` gives what comes out for it (often the chunk itself), ``end()`` what the
    guards still hold when the stream ends without a ``StreamEnd``."""

    __slots__ = ("arguments", "known", "text", "thinking")

    def __init__(self, secrets: Iterable[str]) -> None:
        self.known = tuple(secrets)
        # Each guard made at its first piece: most replies have no reasoning and no tool
        # arguments, and each guard is an object the collector tracks.
        self.text: StreamGuard | None = None
        self.thinking: StreamGuard | None = None
        self.arguments: _ArgsGuards | None = None

    def feed(self, chunk: Chunk) -> Sequence[Chunk]:
        if type(chunk) is TextDelta:
            held = self.thinking.flush() if self.thinking is not None else ""
            text = self.text
            if text is None:
                text = self.text = StreamGuard(self.known)
            released = TextDelta(text.feed(chunk.text))
            return (ThinkingDelta(held), released) if held else (released,)
        if type(chunk) is ThinkingDelta:
            held = self.text.flush() if self.text is not None else ""
            thinking = self.thinking
            if thinking is None:
                thinking = self.thinking = StreamGuard(self.known)
            piece = thinking.feed(chunk.text)
            # A piece held back whole still gives an empty delta: the idle watchdog sees it.
            out: Chunk = ThinkingDelta(piece) if piece else TextDelta("")
            return (TextDelta(held), out) if held else (out,)
        if type(chunk) is ToolArgsDelta:
            arguments = self.arguments
            if arguments is None:
                arguments = self.arguments = _ArgsGuards(self.known)
            return (arguments.feed(chunk),)
        if type(chunk) is RetryNotice:  # what the guards hold is void
            self.text = self.thinking = None
            if self.arguments is not None:
                self.arguments.reset()
        elif type(chunk) is StreamEnd:
            if self.text is not None or self.thinking is not None or self.arguments is not None:
                return [*self.end(), chunk]
        elif type(chunk) is ToolCallChunk and self.arguments is not None:
            return [*self.arguments.flush(), chunk]
        return (chunk,)

    def end(self) -> list[Chunk]:
        return _flushed(self.arguments, self.thinking, self.text)


async def guard_secrets(stream: AsyncGenerator[Chunk, None],
                        secrets: Iterable[str]) -> AsyncGenerator[Chunk, None]:
    """``stream`` with its text, reasoning and tool arguments regrouped so no secret of
    ``secrets`` (nor any credential shape) is split between two deltas; held text comes out
    before ``StreamEnd`` (or at the end), held arguments before the next whole tool call, and
    a ``RetryNotice`` voids both. Reasoning held back comes out when the answer's text begins
    (and the other way round): the switch ends a block. A piece held back whole still yields
    an empty delta (which makes no event), so the loop's idle watchdog sees the provider
    alive. Other chunks pass as they come. (``SecretGuard`` does the work.)"""
    guard = SecretGuard(secrets)
    # try/finally, not ``async with aclosing(...)``: its object and bound ``__aexit__`` lived
    # as long as the call (two objects the collector tracks per model call in flight).
    try:
        async for chunk in stream:
            for piece in guard.feed(chunk):
                yield piece
    finally:
        await stream.aclose()

    for held_chunk in guard.end():
        yield held_chunk


def _flushed(arguments: _ArgsGuards | None, thinking: StreamGuard | None,
             text: StreamGuard | None) -> list[Chunk]:
    """What the guards hold, at the end. (A function of its own, not a closure: the closure's
    cells were four objects for the collector per model call in flight.)"""
    out: list[Chunk] = arguments.flush() if arguments is not None else []
    if thinking is not None and (held := thinking.flush()):
        out.append(ThinkingDelta(held))
    if text is not None and (held := text.flush()):
        out.append(TextDelta(held))
    return out
