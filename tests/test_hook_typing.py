"""Hooks that are hard to misuse: a typed base class, misspelt methods refused, decisions with
fields that do nothing or malformed values reported (ERROR) and ignored, approvals on the same
chain as every other point."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from steerable import (
    Agent,
    AgentLoop,
    EventKind,
    Hook,
    HookAction,
    HookDecision,
    LLMResponseContext,
    Reply,
    ScriptedProvider,
    Timeouts,
    ToolCallContext,
    ToolResultContext,
    TurnStatus,
    tool,
)
from tests.conftest import make_loop, of

K = EventKind


@tool
def mark(x: str) -> str:
    """Mark."""
    return f"marked {x}"


class Misspelt:
    def befor_tool(self, ctx: Any) -> None:
        return None


class MisspeltBeside:
    def after_tool(self, ctx: Any) -> None:
        return None

    def beforeTool(self, ctx: Any) -> None:
        return None


class TypedMisspelt(Hook):
    def after_tol(self, ctx: ToolResultContext) -> None:
        return None


@pytest.mark.parametrize("hook", [Misspelt(), MisspeltBeside(), TypedMisspelt()])
def test_a_near_miss_of_a_hook_method_is_refused_by_name(hook: Any) -> None:
    loop, _, _ = make_loop([])
    with pytest.raises(TypeError, match=r"looks like the hook method '(before_tool|after_tool)'"):
        loop.register_hook(hook)


def test_a_hook_subclass_with_nothing_overridden_is_refused() -> None:
    loop, _, _ = make_loop([])
    with pytest.raises(TypeError, match="implements no hook method"):
        loop.register_hook(Hook())


async def test_only_overridden_methods_of_a_hook_subclass_run() -> None:
    seen: list[str] = []

    class Audit(Hook):
        async def before_tool(self, ctx: ToolCallContext) -> HookDecision | None:
            seen.append(f"before {ctx.call.name}")
            return HookDecision(HookAction.MODIFY, arguments={"x": "changed"})

    loop, provider, sub = make_loop([Reply(tool_calls=[("mark", {"x": "a"})]), Reply(text="ok")],
                                    tools=[mark])
    loop.register_hook(Audit())
    result = await loop.run_turn("go", session_id="s")
    assert result.status is TurnStatus.COMPLETED and seen == ["before mark"]
    assert of(sub.drain_nowait(), K.TOOL_EXEC_END)[0].content == "marked changed"
    # The base's approve_tool (which would answer None = allow) was never registered as an
    # approver: with no approver the call just ran; no ERROR either.
    assert provider.requests


async def test_fields_that_do_not_apply_are_an_error_event_and_the_rest_still_applies() -> None:
    class Mixed(Hook):
        def before_tool(self, ctx: ToolCallContext) -> HookDecision:
            return HookDecision(HookAction.MODIFY, arguments={"x": "b"}, text="nothing reads me")

    loop, _, sub = make_loop([Reply(tool_calls=[("mark", {"x": "a"})]), Reply(text="ok")],
                             tools=[mark])
    loop.register_hook(Mixed())
    result = await loop.run_turn("go", session_id="s")
    events = sub.drain_nowait()
    assert result.status is TurnStatus.COMPLETED
    (error,) = of(events, K.ERROR)
    assert error.source == "hook" and "before_tool modify: text does not apply here" in error.message
    assert of(events, K.TOOL_EXEC_END)[0].content == "marked b"


async def test_malformed_tool_calls_from_after_llm_are_reported_and_ignored() -> None:
    class Broken(Hook):
        def after_llm(self, ctx: LLMResponseContext) -> HookDecision:
            return HookDecision(HookAction.MODIFY, tool_calls=[("mark",)])  # type: ignore[list-item]

    loop, _, sub = make_loop([Reply(text="fine")])
    loop.register_hook(Broken())
    result = await loop.run_turn("go", session_id="s")
    assert result.status is TurnStatus.COMPLETED and result.text == "fine"
    (error,) = of(sub.drain_nowait(), K.ERROR)
    assert "tool_calls must be a list of (name, arguments dict)" in error.message


async def test_approvals_follow_the_chain_priority_and_their_own_timeout() -> None:
    order: list[str] = []

    class Slow(Hook):
        async def approve_tool(self, ctx: ToolCallContext) -> bool:
            order.append("slow")
            await asyncio.sleep(10)
            return True

    class Yes(Hook):
        def approve_tool(self, ctx: ToolCallContext) -> bool:
            order.append("yes")
            return True

    provider = ScriptedProvider([Reply(tool_calls=[("mark", {"x": "a"})]), Reply(text="ok")])
    loop = AgentLoop(Agent(provider=provider, tools=[mark]), timeouts=Timeouts(approval=0.2))
    sub = loop.subscribe()
    loop.register_hook(Yes(), priority=5)
    loop.register_hook(Slow(), priority=1)
    result = await loop.run_turn("go", session_id="s")
    events = sub.drain_nowait()
    assert result.status is TurnStatus.COMPLETED and order == ["yes", "slow"]
    (skipped,) = of(events, K.TOOL_EXEC_SKIPPED)
    assert skipped.reason == "denied" and "timed out after 0.2 s" in skipped.detail
    assert "timed out" in of(events, K.ERROR)[0].message


async def test_an_approver_answering_garbage_denies() -> None:
    class Garbage:
        def approve_tool(self, ctx: Any) -> str:
            return "sure"

    loop, _, sub = make_loop([Reply(tool_calls=[("mark", {"x": "a"})]), Reply(text="ok")],
                             tools=[mark])
    loop.register_hook(Garbage())
    await loop.run_turn("go", session_id="s")
    events = sub.drain_nowait()
    assert of(events, K.TOOL_EXEC_SKIPPED)[0].reason == "denied"
    assert "treated as a denial" in of(events, K.ERROR)[0].message
