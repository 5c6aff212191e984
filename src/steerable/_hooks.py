"""Hook values: the actions a hook can take, its decision, and the context each hook point gets.

A hook is any object with a subset of ``on_event``, ``before_llm``, ``after_llm``,
``before_tool``, ``approve_tool``, ``after_tool`` and ``before_compress`` (sync or async), each
taking one context argument. It returns None to continue or a ``HookDecision``.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from steerable._events import CompressReason
from steerable._messages import Message, ToolCall, ToolResult
from steerable.providers._base import LLMRequest, LLMResponse

__all__ = [
    "HOOK_POINTS",
    "CompressContext",
    "HookAction",
    "HookDecision",
    "LLMRequestContext",
    "LLMResponseContext",
    "ToolCallContext",
    "ToolResultContext",
]

HOOK_POINTS = (
    "on_event",
    "before_llm",
    "after_llm",
    "before_tool",
    "approve_tool",
    "after_tool",
    "before_compress",
)


class HookAction(enum.StrEnum):
    CONTINUE = "continue"
    MODIFY = "modify"
    DENY_TOOL = "deny_tool"
    RESPOND = "respond"
    ABORT_TURN = "abort_turn"
    HARD_ABORT = "hard_abort"


@dataclass(frozen=True, slots=True)
class HookDecision:
    """What a hook wants. Changes travel in the keyword fields that fit its hook point:

    - ``before_llm`` MODIFY: ``messages``, ``model``, ``tools`` (tools, specs or names), ``params``
    - ``after_llm`` MODIFY: ``text`` and/or ``tool_calls=[(name, args), ...]``
    - ``before_tool`` MODIFY: ``arguments``; RESPOND: ``result`` (the tool is not run)
    - ``after_tool`` MODIFY: ``result`` (and ``is_error``)
    - DENY_TOOL: ``reason``
    """

    action: HookAction
    messages: Sequence[Message] | None = field(default=None, kw_only=True)
    model: str | None = field(default=None, kw_only=True)
    tools: Sequence[Any] | None = field(default=None, kw_only=True)
    params: Mapping[str, Any] | None = field(default=None, kw_only=True)
    text: str | None = field(default=None, kw_only=True)
    tool_calls: Sequence[tuple[str, Mapping[str, Any]]] | None = field(default=None, kw_only=True)
    arguments: Mapping[str, Any] | None = field(default=None, kw_only=True)
    result: str | None = field(default=None, kw_only=True)
    is_error: bool | None = field(default=None, kw_only=True)
    reason: str = field(default="", kw_only=True)

    def __post_init__(self) -> None:
        if not isinstance(self.action, HookAction):
            try:
                object.__setattr__(self, "action", HookAction(self.action))
            except ValueError:
                raise ValueError(
                    f"HookDecision action must be a HookAction, got {self.action!r}"
                ) from None
        if self.messages is not None and not all(isinstance(m, Message) for m in self.messages):
            raise TypeError("HookDecision.messages must be a list of Message")
        if self.arguments is not None and not isinstance(self.arguments, Mapping):
            raise TypeError("HookDecision.arguments must be a dict")
        if self.result is not None and not isinstance(self.result, str):
            raise TypeError("HookDecision.result must be a str")
        if self.text is not None and not isinstance(self.text, str):
            raise TypeError("HookDecision.text must be a str")


@dataclass(slots=True, kw_only=True)
class _HookContext:
    turn_id: str
    session_id: str
    parent_turn_id: str | None
    iteration: int


@dataclass(slots=True, kw_only=True)
class LLMRequestContext(_HookContext):
    """For ``before_llm``: ``request`` is what will be sent (after earlier hooks' changes)."""

    request: LLMRequest


@dataclass(slots=True, kw_only=True)
class LLMResponseContext(_HookContext):
    """For ``after_llm``: ``response`` is the assembled reply."""

    request: LLMRequest
    response: LLMResponse


@dataclass(slots=True, kw_only=True)
class ToolCallContext(_HookContext):
    """For ``before_tool`` and ``approve_tool``: ``call.arguments`` is a dict."""

    call: ToolCall
    read_only: bool
    dry_run: bool = False
    _ask_human: Callable[[], Awaitable[tuple[bool, str]]] | None = None

    async def ask_human(self) -> tuple[bool, str]:
        """Emit APPROVAL_REQUESTED and wait for ``resolve_approval`` (used by HumanApprover)."""
        if self._ask_human is None:
            raise RuntimeError("this context cannot ask a human (not inside an approval)")
        return await self._ask_human()


@dataclass(slots=True, kw_only=True)
class ToolResultContext(_HookContext):
    """For ``after_tool``: the call and the result the model will read."""

    call: ToolCall
    result: ToolResult


@dataclass(slots=True, kw_only=True)
class CompressContext(_HookContext):
    """For ``before_compress``: ABORT_TURN here ends the turn instead of compressing."""

    messages: tuple[Message, ...]
    reason: CompressReason
    tokens: int
