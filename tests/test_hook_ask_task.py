"""A hook's own model call (``ctx.ask``) works with a provider whose stream holds a cancel scope
across a wait, as httpx does: the hook manager runs a hook eagerly in the caller's task up to
its first wait and then in a task of its own, and a scope must be left in the task that
entered it (the coding agent's evidence recheck failed this way with the local model)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import anyio

from steerable import Agent, AgentLoop, EventKind, Reply, ScriptedProvider
from steerable._hooks import Hook, HookAction, HookDecision, HookResult, LLMResponseContext
from steerable.providers._base import LLMRequest, ToolChoice


class ScopedProvider(ScriptedProvider):
    """Streams from inside an anyio cancel scope that spans a wait, like an HTTP stream."""

    async def stream(self, request: LLMRequest) -> AsyncIterator[Any]:
        with anyio.CancelScope():
            await asyncio.sleep(0)
            async for chunk in super().stream(request):
                yield chunk


class AskAfter(Hook):
    async def after_llm(self, ctx: LLMResponseContext) -> HookResult:
        if ctx.response.text != "first":
            return None
        again = await ctx.ask(LLMRequest(messages=ctx.request.messages,
                                         tool_choice=ToolChoice("none")), "check")
        return HookDecision(HookAction.MODIFY, text=f"checked: {again.text}")


async def test_a_hook_asks_the_model_through_a_provider_with_a_cancel_scope() -> None:
    provider = ScopedProvider([Reply(text="first"), Reply(text="second")])
    loop = AgentLoop(Agent(provider=provider))
    loop.register_hook(AskAfter(), timeout=30)
    sub = loop.subscribe()
    try:
        result = await loop.run_turn("hi", session_id="s")
    finally:
        await loop.aclose()
    errors = [e for e in sub.drain_nowait() if e.kind is EventKind.ERROR]
    assert not errors, [getattr(e, "message", e) for e in errors]
    assert result.text == "checked: second"
