"""Background summarisation of long sessions after a turn (SESSION_SUMMARIZE)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

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


async def test_the_summary_request_holds_the_exact_transcript_and_the_agents_settings() -> None:
    from steerable import tool
    from steerable.errors import ProviderError

    @tool(read_only=True)
    def look(path: str) -> str:
        """Look."""
        return "seen " + LONG

    asked: list[LLMRequest] = []

    def summarise(request: LLMRequest) -> Reply:
        asked.append(request)
        return Reply(text="  short  ")

    script = [Reply(text="thinking", tool_calls=[("look", {"path": "a"})]), Reply(text=LONG),
              Reply(text=LONG), summarise]
    policy = SummaryPolicy(at_tokens=250, keep_exchanges=1, prompt="Summarise this.")
    loop = AgentLoop(Agent(provider=ScriptedProvider(script), tools=[look], summary=policy,
                           model="m1", params={"temperature": 0.1}))
    sub = loop.subscribe(kinds=[K.SESSION_SUMMARIZE])
    await loop.run_turn("q1", session_id="s")
    await loop.run_turn("q2", session_id="s")
    await loop.wait_idle()
    (request,) = asked
    assert (request.model, request.params) == ("m1", {"temperature": 0.1})
    assert [(m.role, m.content) for m in request.messages] == [
        ("system", "Summarise this."),
        ("user", "<conversation>\nuser: q1\nassistant: thinking\n"
                 'assistant called look({"path": "a"})\n'
                 f"tool result (look): seen {LONG}\nassistant: {LONG}\n</conversation>")]
    [event] = sub.drain_nowait()
    assert event.summary == "short" and event.messages_summarized == 4
    assert loop.session_messages("s")[0].content == "[Summary of the earlier conversation]\nshort"

    # A provider failure while summarising is an ERROR on the turn, and nothing is rewritten.
    def broken(request: LLMRequest) -> Reply:
        raise ProviderError("summary service down")

    failing = AgentLoop(Agent(provider=ScriptedProvider([Reply(text=LONG), Reply(text=LONG),
                                                         broken]),
                                 summary=SummaryPolicy(at_tokens=150, keep_exchanges=1)))
    errors = failing.subscribe(kinds=[K.ERROR])
    await failing.run_turn("q1", session_id="s")
    last = await failing.run_turn("q2", session_id="s")
    await failing.wait_idle()
    (error,) = errors.drain_nowait()
    assert (error.source, error.turn_id, error.session_id) == ("summarize", last.turn_id, "s")
    assert error.message == "summarising session 's' failed: summary service down"
    assert [m.content for m in failing.session_messages("s")] == ["q1", LONG, "q2", LONG]
    await loop.aclose()
    await failing.aclose()


async def test_a_file_store_session_is_summarised_off_the_event_loop(tmp_path) -> None:
    from steerable.storage import JSONLSessionStore

    store = JSONLSessionStore(tmp_path)
    script = [Reply(text=LONG), Reply(text=LONG), Reply(text=LONG), summary_reply]
    loop = AgentLoop(Agent(provider=ScriptedProvider(script),
                           summary=SummaryPolicy(at_tokens=250, keep_exchanges=1)), store=store)
    sub = loop.subscribe(kinds=[K.SESSION_SUMMARIZE, K.ERROR])
    for question in ("q1", "q2", "q3"):
        await loop.run_turn(question, session_id="s")
    await loop.wait_idle()
    assert [e.kind for e in sub.drain_nowait()] == [K.SESSION_SUMMARIZE]
    saved = [m.content for m in store.load("s")]
    assert saved[0].startswith("[Summary of the earlier conversation]\nThey asked 2")
    assert saved[1:] == ["q3", LONG]
    await loop.aclose()


async def test_a_summary_keeps_what_another_writer_appended_while_it_swapped() -> None:
    """The store is shared (another process writes it too): messages appended between the
    summary's check and its rewrite stay, after the rewritten history."""
    from steerable import InMemorySessionStore, Message

    class Shared(InMemorySessionStore):
        def replace(self, session_id: str, messages: Any, *, base: int | None = None) -> None:
            # another writer appends just before the rewrite lands
            self.append(session_id, [Message("user", "elsewhere"),
                                     Message("assistant", "ok")], None)
            super().replace(session_id, messages, base=base)

    script = [Reply(text=LONG), Reply(text=LONG), Reply(text=LONG), summary_reply]
    loop = AgentLoop(Agent(provider=ScriptedProvider(script),
                           summary=SummaryPolicy(at_tokens=250, keep_exchanges=1)),
                     store=Shared())
    for q in ("q1", "q2", "q3"):
        await loop.run_turn(q, session_id="s")
    await loop.wait_idle()
    saved = loop.session_messages("s")
    assert saved[0].content.startswith("[Summary of the earlier conversation]")
    assert [m.content for m in saved[1:]] == ["q3", LONG, "elsewhere", "ok"]
    await loop.aclose()


async def test_a_summary_written_while_a_turn_runs_waits_for_that_turn() -> None:
    """The summary's answer comes while a turn of its session is still running: it is not
    applied under that turn; once the turn is saved the session is summarised afresh."""
    from steerable import tool

    started, gate, tool_gate = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def held_summary(request: LLMRequest) -> Reply:
        started.set()
        await gate.wait()
        return Reply(text="stale summary")

    @tool(read_only=True)
    async def wait() -> str:
        """Wait."""
        await tool_gate.wait()
        return "waited"

    provider = ScriptedProvider([Reply(text=LONG), Reply(text=LONG), held_summary,
                                 Reply(tool_calls=[("wait", {})]), Reply(text="next"),
                                 Reply(text="fresh summary")])
    loop = AgentLoop(Agent(provider=provider, tools=[wait],
                           summary=SummaryPolicy(at_tokens=150, keep_exchanges=1)))
    sub = loop.subscribe(kinds=[K.SESSION_SUMMARIZE, K.TOOL_EXEC_START])
    await loop.run_turn("q1", session_id="s")
    await loop.run_turn("q2", session_id="s")
    await asyncio.wait_for(started.wait(), 5)
    handle = loop.start_turn("q3", session_id="s")
    await asyncio.wait_for(sub.__anext__(), 5)  # q3's tool runs: the turn is running
    gate.set()
    for _ in range(10):
        await asyncio.sleep(0)  # the summary's answer is in, and judged
    assert loop.session_messages("s")[0].content == "q1"  # not rewritten under q3
    tool_gate.set()
    await handle
    await loop.wait_idle()
    assert [e.summary for e in sub.drain_nowait() if e.kind is K.SESSION_SUMMARIZE] == [
        "fresh summary"]
    assert "stale" not in loop.session_messages("s")[0].content
    provider.assert_consumed()
    await loop.aclose()
