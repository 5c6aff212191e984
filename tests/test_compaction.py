"""Context compression: on overflow (reported or foreseen), drop whole exchanges, retry once."""

from __future__ import annotations

from steerable import (
    Agent,
    AgentLoop,
    EventKind,
    HookAction,
    HookDecision,
    Reply,
    ScriptedProvider,
    TurnStatus,
    tool,
)
from steerable.errors import ContextOverflowError
from tests.conftest import assert_history_consistent, of, wait_for

K = EventKind


@tool(read_only=True)
def look(path: str) -> str:
    """Look."""
    return "x" * 50


async def history_loop(extra_script, **agent_kw):
    script = []
    for i in range(4):
        script += [Reply(tool_calls=[("look", {"path": str(i)})]), Reply(text=f"answer {i}")]
    provider = ScriptedProvider(script + extra_script)
    loop = AgentLoop(Agent(provider=provider, tools=[look], instructions="sys", **agent_kw))
    for i in range(4):
        await loop.run_turn(f"question {i}", session_id="s")
    return loop, provider, loop.subscribe()


async def test_overflow_from_provider_compresses_and_retries_once() -> None:
    loop, provider, sub = await history_loop([Reply(error=ContextOverflowError("too long")), Reply(text="fits now")])
    before = len(loop.session_messages("s"))
    result = await loop.run_turn("question 4", session_id="s")
    assert result.status is TurnStatus.COMPLETED and result.text == "fits now"
    compress = of(sub.drain_nowait(), K.CONTEXT_COMPRESS)[0]
    assert compress.reason == "overflow" and compress.messages_after < compress.messages_before
    retry = provider.requests[-1].messages
    assert retry[0].role == "system" and retry[1].role == "user"  # starts at an exchange
    assert retry[-1].content == "question 4"
    saved = loop.session_messages("s")
    assert len(saved) < before + 2 and saved[-2].content == "question 4"
    assert_history_consistent(saved)


async def test_second_overflow_is_an_error() -> None:
    loop, _, _ = await history_loop([Reply(error=ContextOverflowError("too long")),
                                     Reply(error=ContextOverflowError("still too long"))])
    result = await loop.run_turn("question 4", session_id="s")
    assert result.status is TurnStatus.ERROR and "still too long" in str(result.error)
    assert_history_consistent(loop.session_messages("s"))


async def test_before_compress_hook_can_abort() -> None:
    class Veto:
        def before_compress(self, ctx):
            assert ctx.reason == "overflow" and ctx.tokens > 0
            return HookDecision(HookAction.ABORT_TURN, reason="keep my history")

    loop, _, _ = await history_loop([Reply(error=ContextOverflowError("too long"))])
    loop.register_hook(Veto())
    before = loop.session_messages("s")
    result = await loop.run_turn("question 4", session_id="s")
    assert result.status is TurnStatus.ABORTED
    assert loop.session_messages("s")[: len(before)] == before


async def test_estimate_over_window_compresses_before_calling() -> None:
    loop, provider, sub = await history_loop([Reply(text="ok")], context_window=120)
    result = await loop.run_turn("question 4", session_id="s")
    assert result.status is TurnStatus.COMPLETED
    assert of(sub.drain_nowait(), K.CONTEXT_COMPRESS)[0].reason == "estimate"


async def test_abort_after_compression_keeps_the_compressed_snapshot() -> None:
    loop, _, sub = await history_loop([Reply(error=ContextOverflowError("too long")), Reply(text="x", delay=10)])
    handle = loop.start_turn("question 4", session_id="s")
    await wait_for(sub, K.CONTEXT_COMPRESS)
    await wait_for(sub, K.LLM_REQUEST)  # the retry is in flight
    loop.interrupt_hard("s")
    result = await handle
    assert result.status is TurnStatus.ABORTED
    saved = loop.session_messages("s")
    assert all(m.content != "question 4" for m in saved)  # nothing of the turn
    assert all(m.content != "question 0" for m in saved)  # but the compression stands
    assert_history_consistent(saved)
