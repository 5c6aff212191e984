"""Conversation values: messages, tool calls, tool results and token usage.

Plain frozen data with no behaviour beyond validation; the wire and storage forms live with the
providers and stores that need them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import field
from typing import Any, Literal, get_args

from steerable._parts import Part, as_content, text_of
from steerable._records import Record, record

__all__ = ["Message", "Role", "ToolCall", "ToolResult", "Usage", "usage_to_dict"]

Role = Literal["system", "user", "assistant", "tool"]
_ROLES = frozenset(get_args(Role))


@record(kw_only=False)
class ToolCall(Record):
    """One tool call the model declared.

    ``arguments`` is always a dict. When the model sent text that is not a JSON object,
    ``arguments`` is empty and ``arguments_error`` says why; the loop answers such a call with an
    error result instead of running the tool.
    """

    id: str
    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    arguments_error: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise TypeError(f"ToolCall.id must be a non-empty str, got {self.id!r}")
        if not isinstance(self.name, str):
            raise TypeError(f"ToolCall.name must be a str, got {type(self.name).__name__}")
        if not isinstance(self.arguments, Mapping):
            raise TypeError(
                f"ToolCall.arguments must be a dict, got {type(self.arguments).__name__}"
            )


@record(kw_only=False)
class ToolResult(Record):
    """What a tool returns to the model. A tool may also return a plain ``str``, an
    ``ImagePart``/``FilePart``, or a list of text and parts.

    ``content`` is the text; ``parts`` are images and files returned with it (a screenshot, a
    chart), sent after the text to models that can read them and shown as placeholders
    (``[image: image/png, 12 KB]``) where only text goes (events, text-only models)."""

    content: str
    is_error: bool = False
    metadata: Mapping[str, Any] = field(default_factory=dict)
    parts: tuple[Part, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.content, str):
            raise TypeError(
                f"ToolResult.content must be a str, got {type(self.content).__name__}"
            )
        if self.parts:
            object.__setattr__(self, "parts", as_content(self.parts))


@record(kw_only=False)
class Usage(Record):
    """Tokens (and, where the model's price is known, the cost) of one LLM call or a sum of them.

    ``input_tokens`` counts every prompt token, those read from the provider's prompt cache
    included; ``cached_tokens`` is the part read from that cache and ``cache_write_tokens`` the
    part written to it (Anthropic bills those apart). ``cost_usd`` is None when no call of the
    sum had a known price; a sum with some calls unpriced holds the cost of the priced ones.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float | None = None

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        cost = self.cost_usd if other.cost_usd is None else (
            other.cost_usd if self.cost_usd is None else self.cost_usd + other.cost_usd)
        return Usage(
            self.input_tokens + other.input_tokens, self.output_tokens + other.output_tokens,
            self.cached_tokens + other.cached_tokens,
            self.cache_write_tokens + other.cache_write_tokens, cost,
        )


def usage_to_dict(usage: Usage) -> dict[str, Any]:
    """The JSON form of ``usage``: the two counts every provider reports, then the cache counts
    and the cost only when there are any (so a run without them reads as before)."""
    out: dict[str, Any] = {"input_tokens": usage.input_tokens,
                           "output_tokens": usage.output_tokens}
    if usage.cached_tokens:
        out["cached_tokens"] = usage.cached_tokens
    if usage.cache_write_tokens:
        out["cache_write_tokens"] = usage.cache_write_tokens
    if usage.cost_usd is not None:
        out["cost_usd"] = usage.cost_usd
    return out


@record(kw_only=False)
class Message(Record):
    """One message of a conversation.

    ``Message(role, content)``. Assistant messages may carry ``tool_calls``; tool results have
    role ``tool``, the ``tool_call_id`` they answer and the tool ``name``.

    ``content`` is a string, or a list of parts (``TextPart``, ``ImagePart``, ``FilePart``),
    kept as a tuple. Code that wants text reads ``message.text`` (see ``steerable._parts``).
    """

    role: Role
    content: str | Sequence[Part] = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    is_error: bool = False

    def __post_init__(self) -> None:
        if self.role not in _ROLES:
            raise ValueError(
                f"Message role must be one of {sorted(_ROLES)}, got {self.role!r}"
            )
        if type(self.content) is not str:
            object.__setattr__(self, "content", as_content(self.content))
        if not isinstance(self.tool_calls, tuple):
            object.__setattr__(self, "tool_calls", tuple(self.tool_calls))
        if self.tool_calls and self.role != "assistant":
            raise ValueError("only assistant messages can carry tool_calls")
        if self.role == "tool" and not self.tool_call_id:
            raise ValueError("a tool message needs the tool_call_id it answers")

    @property
    def text(self) -> str:
        """The content as text: itself when a string; for parts, the text parts and a short
        placeholder per image or file."""
        content = self.content
        return content if type(content) is str else text_of(content)

    @property
    def parts(self) -> tuple[Part, ...]:
        """The content parts (empty for a string content)."""
        content = self.content
        return () if isinstance(content, str) else tuple(content)
