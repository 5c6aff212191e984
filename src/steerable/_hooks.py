"""Hook values: the actions a hook can take, its decision, and the context each hook point gets.

A hook is any object with a subset of ``on_event``, ``before_llm``, ``after_llm``,
``before_tool``, ``approve_tool``, ``after_tool`` and ``before_compress`` (sync or async), each
taking one context argument. It returns None to continue or a ``HookDecision``.
"""

from __future__ import annotations

import enum
import functools
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import field
from typing import Any

from steerable._events import CompressReason, Event
from steerable._messages import Message, ToolCall, ToolResult
from steerable._records import Record, record, state
from steerable.providers._base import LLMRequest, LLMResponse, ToolChoice

__all__ = [
    "APPLICABLE_FIELDS",
    "HOOK_POINTS",
    "CompressContext",
    "Hook",
    "HookAction",
    "HookDecision",
    "HookResult",
    "LLMRequestContext",
    "LLMResponseContext",
    "ToolCallContext",
    "ToolResultContext",
    "hook_points",
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


@record(kw_only=False)
class HookDecision(Record):
    """What a hook wants. Changes travel in the keyword fields that fit its hook point:

    - ``before_llm`` MODIFY: ``messages``, ``model``, ``tools`` (tools, specs or names), ``params``,
      ``tool_choice`` (what the model may do with the tools)
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
    tool_choice: ToolChoice | None = field(default=None, kw_only=True)
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
        if self.tool_calls is not None and not (
            isinstance(self.tool_calls, Sequence) and not isinstance(self.tool_calls, str)
            and all(isinstance(c, tuple | list) and len(c) == 2 and isinstance(c[0], str)
                    and isinstance(c[1], Mapping) for c in self.tool_calls)
        ):
            raise TypeError("HookDecision.tool_calls must be a list of (name, arguments dict)")
        if self.model is not None and not isinstance(self.model, str):
            raise TypeError("HookDecision.model must be a str")
        if self.params is not None and not isinstance(self.params, Mapping):
            raise TypeError("HookDecision.params must be a dict")
        if self.tool_choice is not None and not isinstance(self.tool_choice, ToolChoice):
            raise TypeError("HookDecision.tool_choice must be a ToolChoice")
        if self.is_error is not None and not isinstance(self.is_error, bool):
            raise TypeError("HookDecision.is_error must be a bool")
        if not isinstance(self.reason, str):
            raise TypeError("HookDecision.reason must be a str")

    def fields_set(self) -> tuple[str, ...]:
        """The change fields this decision carries (``reason`` aside)."""
        return tuple(name for name in _CHANGE_FIELDS if getattr(self, name) is not None)


_CHANGE_FIELDS = ("messages", "model", "tools", "params", "tool_choice", "text", "tool_calls", "arguments",
                  "result", "is_error")

# Which change fields each (point, action) reads; anything else in a decision does nothing there.
APPLICABLE_FIELDS: Mapping[tuple[str, HookAction], frozenset[str]] = {
    ("before_llm", HookAction.MODIFY): frozenset({"messages", "model", "tools", "params",
                                                      "tool_choice"}),
    ("after_llm", HookAction.MODIFY): frozenset({"text", "tool_calls"}),
    ("before_tool", HookAction.MODIFY): frozenset({"arguments"}),
    ("before_tool", HookAction.RESPOND): frozenset({"result", "is_error"}),
    ("after_tool", HookAction.MODIFY): frozenset({"result", "is_error"}),
}


HookResult = HookDecision | None
"""What an interceptor returns: None (go on) or a decision."""


class Hook:
    """A typed base for hooks: override the methods of the points you need (sync or async).

    Only the overridden methods are called; the others cost nothing. Any object with some of
    these methods is a hook as well (the base class is for type checkers and readers).
    Registration refuses a hook whose method name is a near miss of one of these
    (``befor_tool``), which would otherwise never be called.
    """

    def on_event(self, event: Event) -> Awaitable[None] | None:
        """Observe every event (fed from a subscription: it never slows the loop)."""
        return None

    def before_llm(self, ctx: LLMRequestContext) -> Awaitable[HookResult] | HookResult:
        """MODIFY ``messages``/``model``/``tools``/``params``/``tool_choice``; ABORT_TURN;
        HARD_ABORT."""
        return None

    def after_llm(self, ctx: LLMResponseContext) -> Awaitable[HookResult] | HookResult:
        """MODIFY ``text``/``tool_calls``; ABORT_TURN; HARD_ABORT."""
        return None

    def before_tool(self, ctx: ToolCallContext) -> Awaitable[HookResult] | HookResult:
        """MODIFY ``arguments``; RESPOND ``result``; DENY_TOOL ``reason``; ABORT_TURN."""
        return None

    def approve_tool(
        self, ctx: ToolCallContext
    ) -> Awaitable[HookResult | bool] | HookResult | bool:
        """True/None to allow, False or DENY_TOOL to refuse; a failure or timeout refuses."""
        return None

    def after_tool(self, ctx: ToolResultContext) -> Awaitable[HookResult] | HookResult:
        """MODIFY ``result``/``is_error``; ABORT_TURN; HARD_ABORT."""
        return None

    def before_compress(self, ctx: CompressContext) -> Awaitable[HookResult] | HookResult:
        """ABORT_TURN to end the turn instead of compressing."""
        return None


def hook_points(hook: object) -> frozenset[str]:
    """The hook points ``hook`` implements (a ``Hook`` subclass: the methods it overrides).

    Raises TypeError for a near miss of a hook method's name, or when there is none at all.
    """
    cls = type(hook)
    points = frozenset(
        p for p in HOOK_POINTS
        if callable(getattr(hook, p, None))
        and not (isinstance(hook, Hook) and getattr(cls, p, None) is getattr(Hook, p))
    )
    names = {n for n in dir(cls) if not n.startswith("_")}
    names |= {n for n in getattr(hook, "__dict__", {}) if not n.startswith("_")}
    for name in sorted(names - set(HOOK_POINTS)):
        close = _near_miss(name)
        if close and callable(inspect.getattr_static(hook, name, None)):
            raise TypeError(
                f"{cls.__name__}.{name} looks like the hook method {close!r} misspelt; it would "
                f"never be called. Hook methods: {', '.join(HOOK_POINTS)}")
    if not points:
        raise TypeError(f"{cls.__name__} implements no hook method; expected one of "
                        + ", ".join(HOOK_POINTS))
    return points


@functools.lru_cache(maxsize=1024)
def _near_miss(name: str) -> str | None:
    """The hook method ``name`` looks like a misspelling of, if any. Kept per name: a hook made
    per loop (the OpenTelemetry hook's ten public names) registers the same names again, and
    difflib costs ~10 us a name."""
    import difflib  # for misspelt hook methods: when a hook registers, not at import

    close = difflib.get_close_matches(name, HOOK_POINTS, n=1, cutoff=0.8)
    return close[0] if close else None


AskModel = Callable[[LLMRequest, str], Awaitable[LLMResponse]]
"""Makes one model call of a hook's own (``LLMRequestContext.ask``)."""


@state(kw_only=True)
class _HookContext:
    """What every hook context says: the turn it is for."""

    turn_id: str
    session_id: str
    parent_turn_id: str | None
    iteration: int


@state(kw_only=True)
class _AskingContext(_HookContext):
    """A context whose hook may call the model itself (``ask``)."""

    _ask: AskModel | None = None

    async def ask(self, request: LLMRequest, purpose: str) -> LLMResponse:
        """Make one model call of the hook's own with the agent's provider (a classification,
        a check): it is seen as ``LLM_REQUEST``/``LLM_RESPONSE`` with ``purpose`` set, so
        events, replays and traces show it, and its tokens count in the turn's usage."""
        if self._ask is None:
            raise RuntimeError("this context cannot call the model")
        return await self._ask(request, purpose)


@state(kw_only=True)
class LLMRequestContext(_AskingContext):
    """For ``before_llm``: ``request`` is what will be sent (after earlier hooks' changes)."""

    request: LLMRequest


@state(kw_only=True)
class LLMResponseContext(_AskingContext):
    """For ``after_llm``: ``response`` is the assembled reply."""

    request: LLMRequest
    response: LLMResponse


@state(kw_only=True)
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


@state(kw_only=True)
class ToolResultContext(_HookContext):
    """For ``after_tool``: the call and the result the model will read. ``read_only`` and
    ``dry_run`` are the call's, as ``before_tool`` saw them: a hook that pairs the two points
    (undo's snapshots) can tell from this context alone whether the call may have changed
    anything, wherever its ``before_tool`` ran."""

    call: ToolCall
    result: ToolResult
    read_only: bool = False
    dry_run: bool = False


@state(kw_only=True)
class CompressContext(_HookContext):
    """For ``before_compress``: ABORT_TURN here ends the turn instead of compressing."""

    messages: tuple[Message, ...]
    reason: CompressReason
    tokens: int
