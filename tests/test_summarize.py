"""Background summarisation of long sessions after a turn (SESSION_SUMMARIZE)."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from steerable import (
    Agent,
    AgentLoop,
    EventKind,
    LLMRequest,
    Reply,
    ScriptedProvider,
    SummaryPolicy,
)
from tests.conftest import assert_history_consistent

K = EventKind
LONG = "x" * 400  # ~100 tokens a message


def summary_reply(request: LLMRequest) -> Reply:
    transcript = request.messages[-1].content
    assert request.tools == () and "<conversation>" in transcript
    return Reply(text=f"They asked {transcript.count('user:')} questions.")


async def test_long_session_is_summarised_after_a_turn() -> None:
    script = [Reply(text=LONG), Reply(text=LONG), Reply(text=LONG), summary_reply]
    provider = ScriptedProvider(script)
    loop = AgentLoop(Agent(provider=provider, summary=SummaryPolicy(at_tokens=250, keep_exchanges=1)))
    sub = loop.subscribe(kinds=[K.SESSION_SUMMARIZE])
    await loop.run_turn("q1", session_id="s")
    await loop.run_turn("q2", session_id="s")
    last = await loop.run_turn("q3", session_id="s")
    await loop.wait_idle()
    [event] = sub.drain_nowait()
    assert event.messages_summarized == 4 and event.summary == "They asked 2 questions."
    assert event.turn_id == last.turn_id
    saved = loop.session_messages("s")
    assert saved[0].content.startswith("[Summary of the earlier conversation]\nThey asked 2")
    assert [m.content for m in saved[1:]] == ["q3", LONG]
    assert_history_consistent(saved)
    provider.assert_consumed()
    await loop.aclose()


async def test_a_turn_during_a_summary_gets_a_fresh_summary_not_a_stale_one() -> None:
    started, gate = asyncio.Event(), asyncio.Event()

    async def slow_summary(request: LLMRequest) -> Reply:
        started.set()
        await gate.wait()
        return Reply(text="stale summary")

    provider = ScriptedProvider([Reply(text=LONG), Reply(text=LONG), slow_summary, Reply(text="next"),
                                 Reply(text="fresh summary")])
    loop = AgentLoop(Agent(provider=provider, summary=SummaryPolicy(at_tokens=150, keep_exchanges=1)))
    sub = loop.subscribe(kinds=[K.SESSION_SUMMARIZE])
    await loop.run_turn("q1", session_id="s")
    await loop.run_turn("q2", session_id="s")
    await asyncio.wait_for(started.wait(), 5)  # the summary request is in flight
    handle = loop.start_turn("q3", session_id="s")
    gate.set()
    await handle
    await loop.wait_idle()  # the stale summary was judged, and q3's end summarised afresh
    provider.assert_consumed()
    assert [e.summary for e in sub.drain_nowait()] == ["fresh summary"]
    saved = loop.session_messages("s")
    assert "stale" not in saved[0].content and [m.content for m in saved[1:]] == ["q3", "next"]
    await loop.aclose()


async def test_short_sessions_are_left_alone_and_policy_is_validated() -> None:
    provider = ScriptedProvider([Reply(text="short")])
    loop = AgentLoop(Agent(provider=provider, summary=SummaryPolicy(at_tokens=10_000)))
    await loop.run_turn("q", session_id="s")
    provider.assert_consumed()  # no summary request was made
    with pytest.raises(ValueError):
        SummaryPolicy(at_tokens=0)


async def test_one_summary_at_a_time_per_session() -> None:
    # A turn that ends while its session's summary is in flight starts no second summary: two
    # would race to rewrite the same history.
    started, gate, second = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def held_summary(request: LLMRequest) -> Reply:
        started.set()
        await gate.wait()
        return Reply(text="stale summary")

    def later_summary(request: LLMRequest) -> Reply:
        second.set()
        return Reply(text="fresh summary")

    provider = ScriptedProvider([Reply(text=LONG), Reply(text=LONG), held_summary,
                                 Reply(text="next"), later_summary])
    loop = AgentLoop(Agent(provider=provider, summary=SummaryPolicy(at_tokens=150, keep_exchanges=1)))
    await loop.run_turn("q1", session_id="s")
    await loop.run_turn("q2", session_id="s")
    await asyncio.wait_for(started.wait(), 5)
    await loop.run_turn("q3", session_id="s")  # long enough to summarise, but one is running
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(second.wait(), 0.5)  # explicit bound: a second one would start now
    assert not second.is_set()
    gate.set()
    await loop.wait_idle()  # the held summary is judged stale and redone once, from fresh history
    assert second.is_set()
    provider.assert_consumed()
    await loop.aclose()
