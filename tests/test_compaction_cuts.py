"""Where compression cuts: which exchanges go, exactly, for each way it is asked to cut."""

from __future__ import annotations

import asyncio

from steerable import (
    Agent,
    AgentLoop,
    CancelMode,
    EventKind,
    InMemorySessionStore,
    Message,
    Reply,
    ScriptedProvider,
    ToolCall,
    TurnStatus,
    tool,
)
from steerable._core._compaction import estimate_tokens
from steerable.errors import ContextOverflowError
from tests.conftest import assert_history_consistent, of, wait_for

K = EventKind


@tool(read_only=True)
def look(path: str) -> str:
    """Look."""
    return "x" * 50


def questions(messages) -> list[str]:
    return [m.content for m in messages if m.role == "user"]


async def loop_with_history(turns: int, extra_script, **agent_kw):
    """A loop whose session "s" holds ``turns`` exchanges of 4 messages (user, call, result,
    answer), and whose script continues with ``extra_script``."""
    script = []
    for i in range(turns):
        script += [Reply(tool_calls=[("look", {"path": str(i)})]), Reply(text=f"answer {i}")]
    provider = ScriptedProvider(script + extra_script)
    loop = AgentLoop(Agent(provider=provider, tools=[look], instructions="sys", **agent_kw))
    for i in range(turns):
        await loop.run_turn(f"question {i}", session_id="s")
    return loop, provider


async def test_an_overflow_without_a_window_drops_the_older_half_of_the_exchanges() -> None:
    # Six exchanges (five saved + the new one): five cut points, the middle one (the third)
    # is taken.
    loop, provider = await loop_with_history(5, [Reply(error=ContextOverflowError("long")),
                                                 Reply(text="fits")])
    sub = loop.subscribe()
    result = await loop.run_turn("question 5", session_id="s")
    assert result.status is TurnStatus.COMPLETED
    assert questions(provider.requests[-1].messages) == ["question 3", "question 4",
                                                         "question 5"]
    event = of(sub.drain_nowait(), K.CONTEXT_COMPRESS)[0]
    assert (event.messages_before, event.messages_after) == (21, 9)
    assert questions(loop.session_messages("s")) == ["question 3", "question 4", "question 5"]


async def test_an_overflow_with_one_older_exchange_drops_it() -> None:
    loop, provider = await loop_with_history(1, [Reply(error=ContextOverflowError("long")),
                                                 Reply(text="fits")])
    result = await loop.run_turn("question 1", session_id="s")
    assert result.status is TurnStatus.COMPLETED
    assert [m.role for m in provider.requests[-1].messages] == ["system", "user"]
    assert questions(loop.session_messages("s")) == ["question 1"]


async def test_an_overflow_on_the_only_exchange_is_an_error_and_drops_nothing() -> None:
    loop, _ = await loop_with_history(0, [Reply(error=ContextOverflowError("far too long")),
                                          Reply(text="never reached")])
    sub = loop.subscribe()
    result = await loop.run_turn("question 0", session_id="s")
    assert result.status is TurnStatus.ERROR and "far too long" in str(result.error)
    assert not of(sub.drain_nowait(), K.CONTEXT_COMPRESS)


async def test_a_window_nothing_fits_in_keeps_only_the_current_exchange() -> None:
    # Even the current exchange alone is over the target: all the older ones go anyway.
    question = "question 3 " + "q" * 100
    loop, provider = await loop_with_history(3, [Reply(text="ok")], context_window=10)
    result = await loop.run_turn(question, session_id="s")
    assert result.status is TurnStatus.COMPLETED
    assert [m.content for m in provider.requests[-1].messages] == ["sys", question]


async def test_a_window_cut_stops_at_the_first_exchange_that_fits_exactly() -> None:
    # The target is three quarters of the window; pick the window whose target is exactly the
    # estimate of the history from "question 2" on: that cut fits (<=), an earlier one does not.
    probe, _ = await loop_with_history(4, [])
    history = [*probe.session_messages("s"), Message("user", "question 4")]
    from_q2 = estimate_tokens(history[8:])
    window = next(w for w in range(from_q2, 4 * from_q2) if w * 3 // 4 == from_q2)
    assert estimate_tokens(history[4:]) > from_q2 and estimate_tokens(history) > window

    loop, provider = await loop_with_history(4, [Reply(text="ok")], context_window=window)
    assert (await loop.run_turn("question 4", session_id="s")).status is TurnStatus.COMPLETED
    assert questions(provider.requests[-1].messages) == ["question 2", "question 3", "question 4"]


async def test_a_history_that_does_not_start_with_a_user_message_can_lose_its_head() -> None:
    # A session written by something else (an imported transcript) may start with the
    # assistant: its first "exchange" is that lone message, and it can be dropped on its own.
    store = InMemorySessionStore()
    store.append("s", [Message("assistant", "welcome back " + "w" * 200)], None)
    provider = ScriptedProvider([Reply(error=ContextOverflowError("long")), Reply(text="hi")])
    loop = AgentLoop(Agent(provider=provider, instructions="sys"), store=store)
    result = await loop.run_turn("question 0", session_id="s")
    assert result.status is TurnStatus.COMPLETED
    assert [m.content for m in provider.requests[0].messages][1].startswith("welcome back")
    assert [m.content for m in provider.requests[-1].messages] == ["sys", "question 0"]
    saved = loop.session_messages("s")
    assert [m.content for m in saved] == ["question 0", "hi"]
    assert_history_consistent(saved)


async def test_a_cut_inside_the_turn_keeps_the_turns_later_steering() -> None:
    # Two steering messages arrive while a tool runs: the turn's own part of the history then
    # holds three cut points, and the middle one of the five is in the turn itself.
    gate = asyncio.Event()

    @tool
    async def act(name: str) -> str:
        """Do."""
        await gate.wait()
        return f"did {name}"

    store = InMemorySessionStore()
    store.append("s", [Message("user", "earlier"), Message("assistant", "ok")], None)
    provider = ScriptedProvider([Reply(tool_calls=[("act", {"name": "a"})]),
                                 Reply(error=ContextOverflowError("long")), Reply(text="done")])
    loop = AgentLoop(Agent(provider=provider, tools=[act], instructions="sys"), store=store)
    sub = loop.subscribe()
    handle = loop.start_turn("go", session_id="s")
    await wait_for(sub, K.TOOL_EXEC_START)
    loop.inject_steering("first steer", "s")
    loop.inject_steering("second steer", "s")
    gate.set()
    result = await handle
    assert result.status is TurnStatus.COMPLETED
    sent = [m.content for m in provider.requests[-1].messages if m.role == "user"]
    assert sent == ["first steer", "second steer"]
    assert_history_consistent(loop.session_messages("s"))


async def test_two_compressions_in_one_turn_are_both_kept_by_a_resume() -> None:
    gate = asyncio.Event()

    @tool
    async def act(name: str) -> str:
        """Do."""
        if name == "second":
            await gate.wait()
        return f"did {name}"

    store = InMemorySessionStore()
    for i in range(3):
        store.append("s", [Message("user", f"u{i}"), Message("assistant", f"a{i}")], None)
    first = ScriptedProvider([Reply(error=ContextOverflowError("long")),
                              Reply(tool_calls=[("act", {"name": "first"})]),
                              Reply(error=ContextOverflowError("long again")),
                              Reply(tool_calls=[("act", {"name": "second"})])])
    loop = AgentLoop(Agent(provider=first, tools=[act]), store=store)
    sub = loop.subscribe()
    handle = loop.start_turn("go", session_id="s")
    await wait_for(sub, K.TOOL_EXEC_START)
    await wait_for(sub, K.TOOL_EXEC_START)
    assert [m.content for m in first.requests[-1].messages if m.role == "user"] == ["go"]
    loop.cancel("s", mode=CancelMode.AFTER_MODEL)
    gate.set()
    assert (await handle).status is TurnStatus.CANCELLED
    await loop.aclose()

    second = ScriptedProvider([Reply(text="done")])
    again = AgentLoop(Agent(provider=second, tools=[act]), store=store)
    result = await again.resume("s")  # type: ignore[misc]
    assert result.status is TurnStatus.COMPLETED
    assert [m.content for m in second.requests[0].messages] == [
        "go", "", "did first", "", "did second"]
    assert [m.content for m in again.session_messages("s")] == [
        "go", "", "did first", "", "did second", "done"]


async def test_an_overflow_with_a_window_cuts_to_three_quarters_of_it() -> None:
    probe, _ = await loop_with_history(8, [])
    history = [*probe.session_messages("s"), Message("user", "question 8")]
    # It fits, just (the request holds the system message too): no compression foreseen.
    window = estimate_tokens([Message("system", "sys"), *history])
    target = window * 3 // 4
    cut = next(c for c in range(4, 33, 4) if estimate_tokens(history[c:]) <= target)
    # A cut short of the last exchange, and past the oldest one (all that cutting to the
    # whole window would drop): the target decides where.
    assert 4 < cut < 32

    loop, provider = await loop_with_history(8, [Reply(error=ContextOverflowError("long")),
                                                 Reply(text="ok")], context_window=window)
    assert (await loop.run_turn("question 8", session_id="s")).status is TurnStatus.COMPLETED
    sent = [m.content for m in provider.requests[-1].messages[1:]]
    assert sent == [m.content for m in history[cut:]]


def test_the_estimate_is_a_token_for_four_characters_with_sixteen_per_message() -> None:
    # The rule every window and summary threshold is counted in: a change of it moves every cut.
    assert estimate_tokens([]) == 0
    assert estimate_tokens([Message("user", "x" * 24)]) == (24 + 16) // 4 == 10
    call = ToolCall("c1", "look", {"path": "a"})  # "look" + '{"path": "a"}': 4 + 13 characters
    assert estimate_tokens([Message("assistant", "ab", tool_calls=(call,))]) == \
        (2 + 16 + 4 + 13) // 4 == 8
    assert estimate_tokens([Message("user", "x" * 7)] * 2) == (2 * (7 + 16)) // 4 == 11
