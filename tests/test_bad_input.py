"""Bad input to the loop's public calls: a clear error naming the argument, nothing changed."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from steerable import (
    Agent,
    AgentLoop,
    CancelMode,
    EventKind,
    Limits,
    Reply,
    ScriptedProvider,
    TurnStatus,
    tool,
)
from tests.conftest import of, wait_for

K = EventKind


def idle_loop() -> AgentLoop:
    return AgentLoop(Agent(provider=ScriptedProvider([Reply(text="hi")])))


async def test_send_checks_its_text_session_and_agent() -> None:
    loop = idle_loop()
    with pytest.raises(TypeError, match=r"^message text must be a str or a list of parts \(TextPart, ImagePart, FilePart\), got int$"):
        loop.send(5, "s")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^message text must not be empty$"):
        loop.send("  ", "s")
    for bad in ("", 7):
        with pytest.raises(ValueError, match=rf"^session_id must be a non-empty str, got {bad!r}$"):
            loop.send("hi", bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^agent must be an Agent, got str$"):
        loop.send("hi", "s", agent="main")  # type: ignore[arg-type]
    assert not loop.busy("s") and loop.session_messages("s") == []


async def test_send_runs_the_agent_it_is_given() -> None:
    loop = idle_loop()
    other = Agent(name="other", provider=ScriptedProvider([Reply(text="from other")]))
    result = await loop.send("hi", "s", agent=other)
    assert result.text == "from other"


async def test_resolve_approval_checks_its_arguments() -> None:
    loop = idle_loop()
    with pytest.raises(TypeError, match=r"^request_id must be a str, got int$"):
        loop.resolve_approval(1, True)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^approved must be a bool, got str$"):
        loop.resolve_approval("approval_1", "yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^reason must be a str, got int$"):
        loop.resolve_approval("approval_1", False, 3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^turn_id must be a str, got NoneType$"):
        loop.turn_handle(None)  # type: ignore[arg-type]


async def test_a_cancel_handle_says_what_it_asked_and_whether_it_counted() -> None:
    gate = asyncio.Event()

    async def slow(request: Any) -> Reply:
        await gate.wait()
        return Reply(tool_calls=[("note", {"text": "x"})])

    @tool(read_only=True)
    def note(text: str) -> str:
        """Note."""
        return text

    loop = AgentLoop(Agent(provider=ScriptedProvider([slow]), tools=[note]))
    sub = loop.subscribe(buffer=10_000)
    handle = loop.start_turn("go", session_id="s")
    start = await wait_for(sub, K.TURN_START)
    first = loop.cancel("s", mode=CancelMode.AFTER_MODEL)
    second = loop.cancel("s", mode=CancelMode.AFTER_TOOLS)  # weaker: adds nothing
    assert first is not None and second is not None
    assert (first.mode, first.turn_id, first.done()) == (CancelMode.AFTER_MODEL, start.turn_id,
                                                         False)
    assert (second.mode, second.turn_id) == (CancelMode.AFTER_TOOLS, start.turn_id)
    assert first.contributed is True and second.contributed is False
    gate.set()
    result = await handle
    assert result.status is TurnStatus.CANCELLED
    assert await first.wait() is True and await second.wait() is False
    assert first.done() and second.done()
    assert loop.turn_handle(start.turn_id) is None and loop.cancel("s") is None
    assert of(sub.drain_nowait(), K.TURN_END)[0].cancel_mode == "after_model"


async def test_a_refused_sub_turn_names_the_limit_it_hit() -> None:
    from steerable import ToolContext
    from steerable.errors import SubturnLimitError

    limits_hit: list[tuple[str, str]] = []

    @tool(read_only=True)
    async def nest(name: str, ctx: ToolContext) -> str:
        """Start two children."""
        try:
            ctx.spawn_subturn(name, "one")
            ctx.spawn_subturn(name, "two")
        except SubturnLimitError as exc:
            limits_hit.append((exc.limit, str(exc)))
        return "ok"

    grandkid = Agent(name="grandkid", description="deeper",
                     provider=ScriptedProvider([Reply(text="never")]))
    kid = Agent(name="kid", description="a kid", tools=[nest], subagents=[grandkid],
                provider=ScriptedProvider([Reply(tool_calls=[("nest", {"name": "grandkid"})]),
                                           Reply(text="kid done")]))
    main = Agent(name="main", subagents=[kid], tools=[nest], provider=ScriptedProvider(
        [Reply(tool_calls=[("nest", {"name": "kid"})]), Reply(text="done")]))
    loop = AgentLoop(main, limits=Limits(subturn_depth=1, subturns_per_turn=1))
    await loop.run_turn("go", session_id="s")
    await loop.wait_idle()
    kinds = {limit for limit, _ in limits_hit}
    assert kinds == {"subturns_per_turn", "subturn_depth"}
    texts = dict(limits_hit)
    assert texts["subturn_depth"] == ("Sub-turn refused: nesting depth limit reached "
                                      "(Limits.subturn_depth=1); do the task yourself.")
    assert texts["subturns_per_turn"] == (
        "Sub-turn refused: 1 sub-turns of this turn are already running "
        "(Limits.subturns_per_turn=1); wait for one to finish.")


def test_an_agent_refuses_what_is_not_a_tool_and_names_that_clash_with_built_ins() -> None:
    from steerable import tool as make_tool
    from steerable.errors import ConfigurationError

    class NotATool:
        name = "fake"

    with pytest.raises(ConfigurationError, match="is not a tool: decorate the function"):
        Agent(provider=ScriptedProvider([]), tools=[NotATool()])  # type: ignore[list-item]

    @make_tool(read_only=True)
    def spawn(task: str) -> str:
        """Clashes with the built-in."""
        return task

    kid = Agent(name="kid", description="a kid", provider=ScriptedProvider([]))
    with pytest.raises(ConfigurationError) as caught:
        Agent(provider=ScriptedProvider([]), tools=[spawn], subagents=[kid])
    assert str(caught.value) == ("a tool is named 'spawn', the name of a built-in tool of agents "
                                 "with subagents; rename it")


async def test_subscription_buffers_start_at_one_and_sequence_numbers_are_consecutive() -> None:
    loop = idle_loop()
    with pytest.raises(ValueError, match=r"subscription buffer must be an int >= 1, got 0"):
        loop.subscribe(buffer=0)
    one = loop.subscribe(buffer=1)
    every = loop.subscribe(buffer=10_000)
    result = await loop.run_turn("go", session_id="s")
    seqs = [e.seq for e in every.drain_nowait()]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    assert [e.kind for e in one.drain_nowait()] == [K.TURN_START]  # the rest did not fit
    assert result.duration > 0
    await loop.aclose()
    with pytest.raises(RuntimeError, match=r"^this AgentLoop is closed$"):
        loop.start_turn("again", session_id="s")


async def test_a_session_that_cannot_be_saved_is_an_error_on_the_turn() -> None:
    from steerable import InMemorySessionStore

    class FullDisk(InMemorySessionStore):
        def append(self, session_id: str, messages: Any, turn: Any) -> None:
            raise OSError(28, "No space left on device")

    loop = AgentLoop(Agent(provider=ScriptedProvider([Reply(text="hi")])), store=FullDisk())
    sub = loop.subscribe(buffer=10_000)
    result = await loop.run_turn("go", session_id="s")
    events = sub.drain_nowait()
    errors = [(e.source, e.message, e.turn_id) for e in of(events, K.ERROR)]
    assert ("store", "saving session 's' failed: [Errno 28] No space left on device",
            result.turn_id) in errors
    (end,) = of(events, K.TURN_END)
    assert end.duration == result.duration > 0
    # The turn's work is in its result, and it does not end green: the store failed.
    assert result.status is end.status is TurnStatus.ERROR and result.text == "hi"
    assert isinstance(result.error, OSError)
    assert end.error == "OSError: [Errno 28] No space left on device"

    # A turn that failed already keeps its own error: the store's is reported beside it.
    def broken(_request: Any) -> Reply:
        raise ValueError("the model broke")

    loop2 = AgentLoop(Agent(provider=ScriptedProvider([broken])), store=FullDisk())
    sub2 = loop2.subscribe(buffer=10_000)
    failed = await loop2.run_turn("go", session_id="s")
    assert failed.status is TurnStatus.ERROR and "the model broke" in str(failed.error)
    assert "store" in [e.source for e in of(sub2.drain_nowait(), K.ERROR)]
    await loop.aclose()
    await loop2.aclose()


async def test_a_checkpoint_that_cannot_be_deleted_is_an_error_and_the_turn_still_ends() -> None:
    from steerable import InMemorySessionStore

    class StuckCheckpoint(InMemorySessionStore):
        def delete_checkpoint(self, session_id: str) -> bool:
            raise PermissionError("read-only file system")

    store = StuckCheckpoint()
    loop = AgentLoop(Agent(provider=ScriptedProvider([Reply(text="hi")])), store=store)
    sub = loop.subscribe(buffer=10_000)
    result = await loop.run_turn("go", session_id="s")
    assert result.status is TurnStatus.COMPLETED and result.text == "hi"
    errors = [(e.source, e.message, e.turn_id) for e in of(sub.drain_nowait(), K.ERROR)]
    assert errors == [("checkpoint", "deleting the checkpoint of session 's' failed: read-only "
                       "file system; the next turn will ask to discard it", result.turn_id)]
    assert [m.content for m in store.load("s")] == ["go", "hi"]  # the turn itself was saved
