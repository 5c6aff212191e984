"""Resume: a cancelled or crashed turn continues on any loop over the same store, without
requesting a checkpointed response or running a checkpointed tool again."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import pytest

from steerable import (
    Agent,
    AgentLoop,
    CancelMode,
    EventKind,
    InMemorySessionStore,
    Message,
    Reply,
    ScriptedProvider,
    ToolContext,
    TurnStatus,
    tool,
)
from steerable.errors import CheckpointError
from steerable.storage import JSONLSessionStore
from tests.conftest import assert_history_consistent, of, wait_for

K = EventKind


class Tools:
    """`act` (mutating) and `look` (read-only) that count runs and record ``ctx.resumed``."""

    def __init__(self) -> None:
        self.runs: list[tuple[str, bool]] = []
        self.gates: dict[str, asyncio.Event] = {}
        me = self

        @tool
        async def act(name: str, ctx: ToolContext) -> str:
            """Do something."""
            me.runs.append((name, ctx.resumed))
            if name in me.gates:
                await me.gates[name].wait()
            return f"did {name}"

        @tool(read_only=True)
        async def look(name: str, ctx: ToolContext) -> str:
            """Look at something."""
            me.runs.append((name, ctx.resumed))
            return f"saw {name}"

        self.tools = [act, look]

    def names(self) -> list[str]:
        return [n for n, _ in self.runs]


def make(store: Any, script: list[Any], tools: Tools, name: str = "a") -> tuple[AgentLoop, ScriptedProvider]:
    provider = ScriptedProvider(script)
    return AgentLoop(Agent(name=name, provider=provider, tools=tools.tools), store=store), provider


def calls(*names: tuple[str, str]) -> Reply:
    return Reply(tool_calls=[(t, {"name": n}) for t, n in names])


@pytest.fixture(params=["memory", "jsonl"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    return InMemorySessionStore() if request.param == "memory" else JSONLSessionStore(tmp_path)


async def test_resume_after_a_cancel_runs_only_what_is_pending(store: Any) -> None:
    tools = Tools()
    store.append("s", [Message("user", "earlier"), Message("assistant", "ok")], None)
    gate = tools.gates.setdefault("a1", asyncio.Event())
    first, p1 = make(store, [calls(("act", "a1"), ("act", "a2"))], tools)
    sub = first.subscribe()
    handle = first.start_turn("go", session_id="s")
    await wait_for(sub, K.TOOL_EXEC_START)
    first.cancel("s", mode=CancelMode.AFTER_MODEL)
    gate.set()
    cancelled = await handle
    assert cancelled.status is TurnStatus.CANCELLED
    await first.aclose()

    second, p2 = make(store, [Reply(text="all done")], tools)
    sub2 = second.subscribe()
    resumed = second.resume("s")
    assert resumed is not None
    result = await resumed
    assert result.status is TurnStatus.COMPLETED and result.text == "all done"
    assert tools.names() == ["a1", "a2"]  # a1 was not run again
    assert tools.runs[1] == ("a2", False)  # it never started before: not a re-run
    assert len(p1.requests) == 1 and len(p2.requests) == 1  # the response was not re-requested
    sent = p2.requests[0].messages
    assert [m.content for m in sent if m.role == "tool"] == ["did a1", "did a2"]
    history = second.session_messages("s")
    assert_history_consistent(history)
    assert [m.content for m in history] == ["earlier", "ok", "go", "", "did a1", "did a2",
                                            "all done"]
    assert second.checkpoint("s") is None
    events = sub2.drain_nowait()
    assert of(events, K.TURN_START)[0].resumed_from == cancelled.turn_id
    assert result.resumed_from == cancelled.turn_id
    assert [e.tool_name for e in of(events, K.TOOL_EXEC_START)] == ["act"]
    assert second.resume("s") is None  # nothing pending any more


async def test_a_resumed_turn_cancelled_after_tools_runs_its_first_pending_group(
        store: Any) -> None:
    """A group whose results the checkpoint holds is not a group that ran now: a resumed
    turn told at once to stop after its tools runs the first group still pending, then stops
    (without a model call)."""
    tools = Tools()
    gate = tools.gates.setdefault("a1", asyncio.Event())
    first, _ = make(store, [calls(("act", "a1"), ("act", "a2"), ("act", "a3"))], tools)
    sub = first.subscribe()
    handle = first.start_turn("go", session_id="s")
    await wait_for(sub, K.TOOL_EXEC_START)
    first.cancel("s", mode=CancelMode.AFTER_TOOLS)
    gate.set()
    assert (await handle).status is TurnStatus.CANCELLED
    assert tools.names() == ["a1"]
    await first.aclose()

    second, provider = make(store, [Reply(text="all done")], tools)
    resumed = second.resume("s")
    assert resumed is not None
    second.cancel("s", mode=CancelMode.AFTER_TOOLS)  # before the resumed turn first runs
    assert (await resumed).status is TurnStatus.CANCELLED
    assert tools.names() == ["a1", "a2"] and provider.requests == []
    cp = second.checkpoint("s")
    assert cp is not None and [c.arguments["name"] for c in cp.pending_calls] == ["a3"]
    await second.aclose()


async def test_steering_and_follow_ups_queued_at_the_cancel_survive_it(store: Any) -> None:
    tools = Tools()
    first, _ = make(store, [], tools)
    handle = first.start_turn("go", session_id="s")
    first.inject_steering("be quick", "s")
    first.inject_follow_up("then tidy up", "s")
    first.cancel("s", mode=CancelMode.AFTER_TOOLS)
    cancelled = await handle
    assert cancelled.status is TurnStatus.CANCELLED
    second, provider = make(store, [Reply(text="quick")], tools)
    result = await second.resume("s")  # type: ignore[misc]
    assert [m.content for m in provider.requests[0].messages] == ["go", "be quick"]
    assert result.follow_ups == ("then tidy up",)


async def test_resume_from_a_checkpoint_taken_while_a_tool_ran(tmp_path: Path) -> None:
    """What a killed process leaves (a copy of the files taken mid-tool): the running call
    runs again and knows it; completed ones do not."""
    live, crashed = tmp_path / "live", tmp_path / "crashed"
    tools = Tools()
    gate = tools.gates.setdefault("a2", asyncio.Event())
    loop, _ = make(JSONLSessionStore(live),
                   [calls(("act", "a1"), ("act", "a2"), ("act", "a3")), Reply(text="done")], tools)
    sub = loop.subscribe()
    handle = loop.start_turn("go", session_id="s")
    seen: list[Any] = []
    await wait_for(sub, K.TOOL_EXEC_START, seen=seen)
    await wait_for(sub, K.TOOL_EXEC_START, seen=seen)  # a2 runs now
    shutil.copytree(live, crashed)  # the state a kill -9 would leave
    gate.set()
    await handle
    await loop.aclose()

    tools2 = Tools()
    again, provider = make(JSONLSessionStore(crashed), [Reply(text="done after crash")], tools2)
    cp = again.checkpoint("s")
    assert cp is not None and cp.reason == "interrupted"
    assert [c.arguments["name"] for c in cp.pending_calls] == ["a2", "a3"]
    result = await again.resume("s")  # type: ignore[misc]
    assert result.status is TurnStatus.COMPLETED
    assert tools2.runs == [("a2", True), ("a3", False)]
    assert len(provider.requests) == 1
    assert_history_consistent(again.session_messages("s"))


async def test_resume_with_another_agent_is_refused_unless_forced(store: Any) -> None:
    tools = Tools()
    first, _ = make(store, [calls(("act", "a1"))], tools)
    handle = first.start_turn("go", session_id="s")
    first.cancel("s", mode=CancelMode.AFTER_MODEL)
    assert (await handle).status is TurnStatus.CANCELLED

    @tool
    async def other(x: str) -> str:
        """Other."""
        return x

    stranger = AgentLoop(Agent(name="b", provider=ScriptedProvider([]), tools=[other]),
                         store=store)
    with pytest.raises(CheckpointError, match="force=True"):
        stranger.resume("s")
    assert stranger.checkpoint("s") is not None  # refusing loses nothing
    # Same name, other tools: still refused.
    renamed = AgentLoop(Agent(name="a", provider=ScriptedProvider([]), tools=[other]),
                        store=store)
    with pytest.raises(CheckpointError, match="tools"):
        renamed.resume("s")


async def test_resume_without_a_checkpoint_is_none() -> None:
    tools = Tools()
    loop, _ = make(InMemorySessionStore(), [Reply(text="x")], tools)
    assert loop.resume("nothing") is None
    assert loop.checkpoint("nothing") is None


async def test_a_checkpoint_whose_turn_is_already_saved_is_dropped(store: Any) -> None:
    """A process killed between saving the turn and deleting its checkpoint."""
    tools = Tools()
    loop, _ = make(store, [Reply(text="done")], tools)
    saved: list[Any] = []

    class Snapshot:
        def before_llm(self, ctx: Any) -> None:
            saved.append(store.load_checkpoint("s"))

    loop.register_hook(Snapshot())
    await loop.run_turn("go", session_id="s")
    await loop.wait_idle()
    await asyncio.sleep(0.01)
    assert saved and saved[0] is not None
    store.save_checkpoint(saved[0])  # as if the delete never happened
    assert loop.resume("s") is None
    assert loop.checkpoint("s") is None
    assert [m.content for m in loop.session_messages("s")] == ["go", "done"]  # once


async def test_a_session_changed_under_a_checkpoint_is_refused(store: Any) -> None:
    tools = Tools()
    loop, _ = make(store, [calls(("act", "a1"))], tools)
    handle = loop.start_turn("go", session_id="s")
    loop.cancel("s", mode=CancelMode.AFTER_MODEL)
    await handle
    store.append("s", [Message("user", "sneaked in")], None)
    with pytest.raises(CheckpointError, match="changed since"):
        loop.resume("s")


async def test_a_cancelled_resumed_turn_can_be_resumed_again(store: Any) -> None:
    tools = Tools()
    script = [calls(("act", "a1")), calls(("act", "a2")), Reply(text="end")]
    loop, provider = make(store, script, tools)
    handle = loop.start_turn("go", session_id="s")
    loop.cancel("s", mode=CancelMode.AFTER_MODEL)
    first = await handle
    for _ in range(2):
        resumed = loop.resume("s")
        assert resumed is not None
        loop.cancel("s", mode=CancelMode.AFTER_MODEL)
        r = await resumed
        if r.status is not TurnStatus.CANCELLED:
            break
    final = await loop.resume("s") if loop.checkpoint("s") else r  # type: ignore[misc]
    assert final.status is TurnStatus.COMPLETED
    assert tools.names() == ["a1", "a2"]
    assert len(provider.requests) == 3
    cp_ids = {first.checkpoint_id}
    assert all(i and i.startswith(first.turn_id) for i in cp_ids)  # origin id kept
    assert_history_consistent(loop.session_messages("s"))


async def test_a_turn_survives_a_crash_right_after_start_turn_returned(tmp_path: Path) -> None:
    live, crashed = tmp_path / "live", tmp_path / "crashed"
    tools = Tools()
    store = JSONLSessionStore(live)
    store.append("s", [Message("user", "earlier"), Message("assistant", "ok")], None)
    loop, _ = make(store, [Reply(text="first")], tools)
    handle = loop.start_turn("go", session_id="s")
    shutil.copytree(live, crashed)  # killed before the turn's task ever ran
    await handle
    await loop.aclose()
    again, provider = make(JSONLSessionStore(crashed), [Reply(text="after the crash")], tools)
    cp = again.checkpoint("s")
    assert cp is not None and cp.base_count is None and cp.iteration == 0
    result = await again.resume("s")  # type: ignore[misc]
    assert result.text == "after the crash"
    assert [m.content for m in again.session_messages("s")] == [
        "earlier", "ok", "go", "after the crash"]
    assert [m.content for m in provider.requests[0].messages] == ["earlier", "ok", "go"]


async def test_a_corrupt_checkpoint_blocks_new_turns_with_a_clear_error(tmp_path: Path) -> None:
    store = JSONLSessionStore(tmp_path)
    store.append("s", [Message("user", "hi"), Message("assistant", "hello")], None)
    store.checkpoint_path("s").write_text("this is not json\n{}\n")
    tools = Tools()
    loop, _ = make(store, [Reply(text="fresh")], tools)
    with pytest.raises(CheckpointError) as info:
        loop.start_turn("next", session_id="s")
    assert str(store.checkpoint_path("s")) in str(info.value)
    assert "discard_checkpoint=True" in str(info.value)
    with pytest.raises(CheckpointError):
        loop.resume("s")
    assert [m.content for m in loop.session_messages("s")] == ["hi", "hello"]
    result = await loop.run_turn("next", session_id="s", discard_checkpoint=True)
    assert result.text == "fresh" and not store.checkpoint_path("s").exists()


async def test_a_forced_resume_goes_on_under_another_agent(store: Any) -> None:
    tools = Tools()
    first, _ = make(store, [calls(("act", "a1"))], tools)
    handle = first.start_turn("go", session_id="s")
    first.cancel("s", mode=CancelMode.AFTER_MODEL)
    assert (await handle).status is TurnStatus.CANCELLED

    @tool
    async def other(x: str) -> str:
        """Other."""
        return x

    provider = ScriptedProvider([Reply(text="done under b")])
    forcer = AgentLoop(Agent(name="b", provider=provider, tools=[other]), store=store)
    resumed = forcer.resume("s", force=True)
    assert resumed is not None
    result = await resumed
    assert result.status is TurnStatus.COMPLETED and result.text == "done under b"
    assert tools.runs == []  # the first agent's pending call is not this agent's tool
    assert forcer.checkpoint("s") is None


@pytest.mark.parametrize("tools_before", [True, False])
async def test_a_resumed_turn_ends_at_its_limit_as_the_uninterrupted_one_would(
        store: Any, tools_before: bool) -> None:
    """Whether the response before the last allowed call asked for tools decides
    ``MAX_ITERATIONS`` against ``COMPLETED``: the checkpoint carries it across a resume."""
    loops: list[AgentLoop] = []

    def first_reply(_request: Any) -> Reply:
        # Steering that arrives during the first call: without it a text answer ends the turn.
        loops[-1].inject_steering("and then?", "s")
        if len(loops) == 2:
            loops[-1].cancel("s", mode=CancelMode.AFTER_MODEL)  # before the next model call
        return calls(("act", "a1")) if tools_before else Reply(text="thinking")

    def start(script: list[Any], tools: Tools, store: Any = None) -> AgentLoop:
        loops.append(AgentLoop(Agent(name="a", provider=ScriptedProvider(script),
                                     tools=tools.tools, max_iterations=2), store=store))
        return loops[-1]

    whole = start([first_reply, Reply(text="the end")], Tools())
    expected = (await whole.start_turn("go", session_id="s")).status
    await whole.aclose()
    assert expected is (TurnStatus.MAX_ITERATIONS if tools_before else TurnStatus.COMPLETED)

    tools = Tools()
    first = start([first_reply], tools, store)
    assert (await first.start_turn("go", session_id="s")).status is TurnStatus.CANCELLED
    await first.aclose()
    checkpoint = store.load_checkpoint("s")
    assert checkpoint is not None and checkpoint.iteration == 1
    assert checkpoint.last_had_tools is tools_before
    second = start([Reply(text="the end")], tools, store)
    resumed = await second.resume("s")  # type: ignore[misc]
    assert resumed.status is expected and resumed.text == "the end"
    await second.aclose()
