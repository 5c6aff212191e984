"""AgentLoop's public surface: sessions, busy sessions, control resolution, statistics."""

from __future__ import annotations

import asyncio

import pytest

import steerable
from steerable import (
    Agent,
    AgentLoop,
    EventKind,
    Message,
    Reply,
    ScriptedProvider,
    TurnPhase,
    TurnStatus,
)
from steerable.errors import ConfigurationError, SessionBusyError
from tests.conftest import make_loop, wait_for

K = EventKind


def test_public_names_are_exported_and_sorted() -> None:
    assert steerable.__all__ == sorted(steerable.__all__)
    for name in steerable.__all__:
        assert hasattr(steerable, name), name
    for contract in ("Agent", "AgentLoop", "tool", "ScriptedProvider", "Reply", "EventKind", "TurnStatus",
                     "HookDecision", "HookAction", "Message"):
        assert contract in steerable.__all__


async def test_one_active_turn_per_session() -> None:
    loop, _, _ = make_loop([Reply(text="a", delay=0.05), Reply(text="b"), Reply(text="c")])
    handle = loop.start_turn("one", session_id="s")
    with pytest.raises(SessionBusyError, match="already has an active turn"):
        loop.start_turn("two", session_id="s")
    other = loop.start_turn("elsewhere", session_id="t")
    await handle, await other
    assert (await loop.run_turn("three", session_id="s")).status is TurnStatus.COMPLETED


async def test_control_methods_resolve_the_session() -> None:
    loop, _, sub = make_loop([Reply(text="a", delay=0.2), Reply(text="b", delay=0.2)])
    h1 = loop.start_turn("one", session_id="s1")
    assert loop.active_turn() is not None and loop.active_turn().session_id == "s1"
    h2 = loop.start_turn("two", session_id="s2")
    with pytest.raises(ValueError, match="pass session_id"):
        loop.inject_steering("which one?")
    with pytest.raises(ValueError):
        loop.interrupt_hard()
    assert loop.interrupt_hard("s2") is True
    assert (await h2).status is TurnStatus.ABORTED
    assert loop.inject_steering("for s1")  # only one active now
    info = loop.active_turn("s1")
    assert info is not None and info.turn_id == h1.turn_id and info.steering_pending == 1
    assert info.phase in (TurnPhase.IDLE, TurnPhase.THINKING)
    assert loop.active_turn("nope") is None
    await h1


async def test_new_session_id_when_none_given() -> None:
    loop, _, _ = make_loop([Reply(text="a")])
    result = await loop.run_turn("go")
    assert result.session_id.startswith("session_")
    assert loop.session_messages(result.session_id)[0] == Message("user", "go")
    assert loop.session_messages("unknown") == []


async def test_handle_controls_and_result() -> None:
    loop, _, sub = make_loop([Reply(text="a", delay=0.05), Reply(text="b")])
    handle = loop.start_turn("go", session_id="s")
    assert not handle.done()
    with pytest.raises(asyncio.InvalidStateError):
        handle.result()
    assert handle.inject_steering("more")
    result = await handle
    assert handle.done() and handle.result() is result
    assert result.turn_id == handle.turn_id and result.session_id == "s"
    assert "TurnHandle" in repr(handle)


async def test_statistics_counts_turns() -> None:
    loop, _, _ = make_loop([Reply(text="a"), Reply(text="b")])
    await loop.run_turn("1", session_id="s")
    await loop.run_turn("2", session_id="s")
    stats = loop.statistics()
    assert stats.turns_started == stats.turns_finished == 2 and stats.active_turns == 0
    assert stats.subscribers == 1


async def test_aclose_aborts_running_turns() -> None:
    loop, _, sub = make_loop([Reply(text="never", delay=10)])
    handle = loop.start_turn("go", session_id="s")
    await wait_for(sub, K.LLM_REQUEST)
    await loop.aclose()
    assert (await handle).status is TurnStatus.ABORTED
    await loop.aclose()  # twice is fine


async def test_async_context_manager() -> None:
    async with AgentLoop(Agent(provider=ScriptedProvider([Reply(text="x")]))) as loop:
        assert (await loop.run_turn("go")).text == "x"


def test_constructor_validation() -> None:
    provider = ScriptedProvider([])
    with pytest.raises(ConfigurationError):
        AgentLoop("agent")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="max_iterations"):
        Agent(provider=provider, max_iterations=0)
    with pytest.raises(ConfigurationError, match="stream"):
        Agent(provider=object())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="not a tool"):
        Agent(provider=provider, tools=[print])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match="store"):
        AgentLoop(Agent(provider=provider), store={})  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        steerable.Limits(parallel_tools=0)
    with pytest.raises(ValueError):
        steerable.Timeouts(hook=-1)
    with pytest.raises(ValueError):
        Message("robot", "hi")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Message("user", 5)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Message("tool", "x")  # a tool result needs its call id


async def test_control_arguments_are_validated() -> None:
    loop, _, _ = make_loop([])
    with pytest.raises(TypeError):
        loop.inject_steering(5)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        loop.inject_follow_up("   ")
    with pytest.raises(TypeError):
        loop.resolve_approval("id", "yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        loop.interrupt_graceful(hint=3)  # type: ignore[arg-type]
