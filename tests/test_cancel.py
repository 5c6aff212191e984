"""Cancel modes: each mode at each kind of safe point, combining, late cancels, races."""

from __future__ import annotations

import asyncio
from typing import Any

from steerable import (
    Agent,
    AgentLoop,
    CancelMode,
    EventKind,
    HookAction,
    HookDecision,
    Limits,
    Reply,
    ScriptedProvider,
    TurnStatus,
    tool,
)
from tests.conftest import of, wait_for

K = EventKind


class Rig:
    """A loop whose model and tools wait on gates, logging what ran."""

    def __init__(self, script: list[Any], limits: Limits | None = None) -> None:
        self.ran: list[str] = []
        self.gates: dict[str, asyncio.Event] = {}
        rig = self

        @tool(read_only=True)
        async def look(name: str) -> str:
            """Read-only: waits for its gate when one is set up."""
            rig.ran.append(name)
            if name in rig.gates:
                await rig.gates[name].wait()
            return f"saw {name}"

        @tool
        async def act(name: str) -> str:
            """Mutating: waits for its gate when one is set up."""
            rig.ran.append(name)
            if name in rig.gates:
                await rig.gates[name].wait()
            return f"did {name}"

        self.provider = ScriptedProvider(script)
        self.agent = Agent(name="a", provider=self.provider, tools=[look, act])
        self.loop = AgentLoop(self.agent, limits=limits)
        self.sub = self.loop.subscribe(buffer=10_000)

    def gate(self, name: str) -> asyncio.Event:
        return self.gates.setdefault(name, asyncio.Event())

    def events(self) -> list[Any]:
        return self.sub.drain_nowait()


def gated_reply(gate: asyncio.Event, reply: Reply) -> Any:
    async def step(request: Any) -> Reply:
        await gate.wait()
        return reply

    return step


def calls(*names: tuple[str, str]) -> Reply:
    return Reply(tool_calls=[(t, {"name": n}) for t, n in names])


async def test_after_model_during_the_llm_call_stops_before_any_tool() -> None:
    model = asyncio.Event()
    rig = Rig([gated_reply(model, calls(("act", "a1"), ("act", "a2")))])
    handle = rig.loop.start_turn("go", session_id="s")
    await wait_for(rig.sub, K.LLM_REQUEST)
    cancel = rig.loop.cancel("s", mode=CancelMode.AFTER_MODEL)
    assert cancel is not None and cancel.contributed
    model.set()
    result = await handle
    assert await cancel.wait() is True
    assert result.status is TurnStatus.CANCELLED
    assert rig.ran == []  # no tool of that response started
    assert len(rig.provider.requests) == 1  # and no further LLM call
    cp = rig.loop.checkpoint("s")
    assert cp is not None and cp.stage == "tools" and cp.cancel_mode == "after_model"
    assert [c.arguments["name"] for c in cp.pending_calls] == ["a1", "a2"]
    assert result.checkpoint_id == cp.checkpoint_id
    assert rig.loop.session_messages("s") == []  # a checkpoint is not history
    events = rig.events()
    assert of(events, K.TURN_END)[0].cancel_mode == "after_model"
    assert [e.mode for e in of(events, K.INTERRUPT_RECEIVED)] == ["cancel_after_model"]
    assert of(events, K.TOOL_EXEC_SKIPPED) == []  # pending calls are kept, not skipped


async def test_after_model_while_a_tool_runs_stops_before_the_next_one() -> None:
    rig = Rig([calls(("act", "a1"), ("act", "a2"))])
    gate = rig.gate("a1")
    handle = rig.loop.start_turn("go", session_id="s")
    await wait_for(rig.sub, K.TOOL_EXEC_START)
    rig.loop.cancel("s", mode=CancelMode.AFTER_MODEL)
    gate.set()
    result = await handle
    assert result.status is TurnStatus.CANCELLED
    assert rig.ran == ["a1"]
    cp = rig.loop.checkpoint("s")
    assert cp is not None
    assert [m.content for m in cp.results] == ["did a1"]
    assert [c.arguments["name"] for c in cp.pending_calls] == ["a2"]


async def test_after_model_inside_a_parallel_group_leaves_queued_calls_pending() -> None:
    rig = Rig([calls(("look", "r1"), ("look", "r2"), ("look", "r3"))],
              limits=Limits(parallel_tools=1))
    gate = rig.gate("r1")
    handle = rig.loop.start_turn("go", session_id="s")
    await wait_for(rig.sub, K.TOOL_EXEC_START)
    rig.loop.cancel("s", mode=CancelMode.AFTER_MODEL)
    gate.set()
    result = await handle
    assert result.status is TurnStatus.CANCELLED
    assert rig.ran == ["r1"]
    cp = rig.loop.checkpoint("s")
    assert cp is not None and [c.arguments["name"] for c in cp.pending_calls] == ["r2", "r3"]


async def test_after_tools_during_the_llm_call_runs_the_first_group_then_stops() -> None:
    model = asyncio.Event()
    rig = Rig([gated_reply(model, calls(("look", "r1"), ("look", "r2"), ("act", "a1")))])
    handle = rig.loop.start_turn("go", session_id="s")
    await wait_for(rig.sub, K.LLM_REQUEST)
    rig.loop.cancel("s", mode=CancelMode.AFTER_TOOLS)
    model.set()
    result = await handle
    assert result.status is TurnStatus.CANCELLED
    assert sorted(rig.ran) == ["r1", "r2"]  # the read-only group, not the mutating call
    cp = rig.loop.checkpoint("s")
    assert cp is not None and cp.cancel_mode == "after_tools"
    assert [c.arguments["name"] for c in cp.pending_calls] == ["a1"]


async def test_after_tools_lets_the_running_group_finish() -> None:
    rig = Rig([calls(("look", "r1"), ("look", "r2"), ("act", "a1")), Reply(text="never")])
    gate = rig.gate("r1")
    handle = rig.loop.start_turn("go", session_id="s")
    await wait_for(rig.sub, K.TOOL_EXEC_START)
    rig.loop.cancel("s", mode=CancelMode.AFTER_TOOLS)
    await asyncio.sleep(0)
    gate.set()
    result = await handle
    assert result.status is TurnStatus.CANCELLED
    assert sorted(rig.ran) == ["r1", "r2"]
    assert len(rig.provider.requests) == 1


async def test_a_safe_point_cancel_before_the_first_call_makes_no_call() -> None:
    rig = Rig([Reply(text="never")])
    handle = rig.loop.start_turn("go", session_id="s")
    rig.loop.cancel("s", mode=CancelMode.AFTER_TOOLS)  # nothing is in flight yet
    result = await handle
    assert result.status is TurnStatus.CANCELLED
    assert rig.provider.requests == []
    cp = rig.loop.checkpoint("s")
    assert cp is not None and cp.stage == "model" and cp.iteration == 0


async def test_a_final_answer_ends_the_turn_normally_and_the_cancel_did_not_contribute() -> None:
    model = asyncio.Event()
    rig = Rig([gated_reply(model, Reply(text="done"))])
    handle = rig.loop.start_turn("go", session_id="s")
    await wait_for(rig.sub, K.LLM_REQUEST)
    cancel = rig.loop.cancel("s", mode=CancelMode.AFTER_TOOLS)
    assert cancel is not None and cancel.contributed  # provisional: it raised the level
    model.set()
    result = await handle
    assert result.status is TurnStatus.COMPLETED
    assert await cancel.wait() is False and cancel.contributed is False
    assert rig.loop.checkpoint("s") is None
    assert of(rig.events(), K.TURN_END)[0].cancel_mode is None


async def test_immediate_is_a_hard_abort_and_drops_the_checkpoint() -> None:
    rig = Rig([calls(("act", "a1"))])
    rig.gate("a1")
    handle = rig.loop.start_turn("go", session_id="s")
    await wait_for(rig.sub, K.TOOL_EXEC_START)
    assert rig.loop.checkpoint("s") is not None  # written after the response
    cancel = rig.loop.cancel()  # the default mode, the only active turn
    assert cancel is not None
    result = await handle
    assert result.status is TurnStatus.ABORTED
    assert await cancel.wait() is True
    assert rig.loop.checkpoint("s") is None
    assert rig.loop.session_messages("s") == []
    events = rig.events()
    assert of(events, K.TURN_END)[0].cancel_mode == "immediate"
    assert [e.mode for e in of(events, K.INTERRUPT_RECEIVED)] == ["hard"]


async def test_cancels_combine_and_the_strongest_wins() -> None:
    rig = Rig([calls(("act", "a1"), ("act", "a2"), ("act", "a3"))])
    gate = rig.gate("a1")
    handle = rig.loop.start_turn("go", session_id="s")
    await wait_for(rig.sub, K.TOOL_EXEC_START)
    weak = rig.loop.cancel("s", mode=CancelMode.AFTER_TOOLS)
    strong = rig.loop.cancel("s", mode=CancelMode.AFTER_MODEL)
    again = rig.loop.cancel("s", mode=CancelMode.AFTER_MODEL)
    weaker = rig.loop.cancel("s", mode=CancelMode.AFTER_TOOLS)
    assert weak and strong and again and weaker
    assert (again.contributed, weaker.contributed) == (False, False)  # changed nothing
    gate.set()
    result = await handle
    assert result.status is TurnStatus.CANCELLED
    assert [await h.wait() for h in (weak, strong, again, weaker)] == [True, True, False, False]
    assert of(rig.events(), K.TURN_END)[0].cancel_mode == "after_model"


async def test_immediate_escalates_a_pending_safe_point_cancel() -> None:
    rig = Rig([calls(("act", "a1"))])
    rig.gate("a1")  # never opened: only a hard abort ends this tool
    handle = rig.loop.start_turn("go", session_id="s")
    await wait_for(rig.sub, K.TOOL_EXEC_START)
    soft = handle.cancel(CancelMode.AFTER_TOOLS)
    hard = handle.cancel(CancelMode.IMMEDIATE)
    assert hard.contributed
    result = await handle
    assert result.status is TurnStatus.ABORTED
    assert await soft.wait() and await hard.wait()
    assert rig.loop.checkpoint("s") is None


async def test_a_cancel_names_its_session_and_leaves_the_others_running() -> None:
    rig = Rig([calls(("look", "x")), calls(("look", "y")), Reply(text="s done")])
    rig.gate("x")
    rig.gate("y")
    s = rig.loop.start_turn("go", session_id="s")
    await wait_for(rig.sub, K.TOOL_EXEC_START)
    t = rig.loop.start_turn("go", session_id="t")
    await wait_for(rig.sub, K.TOOL_EXEC_START)
    cancel = rig.loop.cancel("t", mode=CancelMode.IMMEDIATE)
    assert cancel is not None and cancel.contributed
    assert (await t).status is TurnStatus.ABORTED  # immediate, without checkpoints
    assert not s.done()  # the other session's turn is untouched
    rig.gates["x"].set()
    result = await s
    assert (result.status, result.text) == (TurnStatus.COMPLETED, "s done")
    await rig.loop.aclose()


async def test_cancel_after_the_turn_ended() -> None:
    rig = Rig([Reply(text="done")])
    handle = rig.loop.start_turn("go", session_id="s")
    await handle
    assert rig.loop.cancel("s", mode=CancelMode.AFTER_MODEL) is None
    assert rig.loop.cancel() is None
    late = handle.cancel(CancelMode.IMMEDIATE)
    assert late.contributed is False
    assert await asyncio.wait_for(late.wait(), 1) is False


async def test_a_cancel_racing_with_the_end_of_the_turn_never_changes_a_finished_result() -> None:
    """A cancel asked for while the turn saves its result is too late: it reports so."""
    rig = Rig([Reply(text="done")])
    handles: list[Any] = []

    class CancelOnEnd:
        def on_event(self, event: Any) -> None:
            if event.kind is K.STATE_CHANGED and event.new == "done":
                handles.append(rig.loop.cancel("s", mode=CancelMode.IMMEDIATE))

    rig.loop.register_hook(CancelOnEnd())
    result = await rig.loop.run_turn("go", session_id="s")
    await rig.loop.wait_idle()
    await asyncio.sleep(0.05)
    assert result.status is TurnStatus.COMPLETED
    assert [m.content for m in rig.loop.session_messages("s")] == ["go", "done"]
    for h in handles:  # None (already gone) or a handle that did not contribute
        assert h is None or await h.wait() is False


async def test_a_hook_can_cancel_at_the_response_it_sees() -> None:
    rig = Rig([calls(("act", "a1"))])

    class StopAfterModel:
        def after_llm(self, ctx: Any) -> HookDecision:
            rig.loop.cancel(ctx.session_id, mode=CancelMode.AFTER_MODEL)
            return HookDecision(HookAction.CONTINUE)

    rig.loop.register_hook(StopAfterModel())
    result = await rig.loop.run_turn("go", session_id="s")
    assert result.status is TurnStatus.CANCELLED
    assert rig.ran == []


async def test_a_new_turn_on_a_session_with_a_checkpoint_needs_discard() -> None:
    rig = Rig([Reply(text="never"), Reply(text="fresh")])
    handle = rig.loop.start_turn("go", session_id="s")
    rig.loop.cancel("s", mode=CancelMode.AFTER_MODEL)
    assert (await handle).status is TurnStatus.CANCELLED
    try:
        rig.loop.start_turn("other", session_id="s")
    except ValueError as exc:
        assert "resume" in str(exc) and "discard_checkpoint=True" in str(exc)
    else:
        raise AssertionError("expected ValueError")
    result = await rig.loop.run_turn("other", session_id="s", discard_checkpoint=True)
    assert result.text == "never"
    assert rig.loop.checkpoint("s") is None
    assert [m.content for m in rig.loop.session_messages("s")] == ["other", "never"]


async def test_without_checkpoints_a_cancelled_turn_is_saved_like_an_interrupted_one() -> None:
    rig = Rig([calls(("act", "a1"), ("act", "a2"))])
    rig.loop = AgentLoop(rig.agent, checkpoints=False)
    rig.sub = rig.loop.subscribe(buffer=10_000)
    gate = rig.gate("a1")
    handle = rig.loop.start_turn("go", session_id="s")
    await wait_for(rig.sub, K.TOOL_EXEC_START)
    rig.loop.cancel("s", mode=CancelMode.AFTER_MODEL)
    gate.set()
    result = await handle
    assert result.status is TurnStatus.CANCELLED and result.checkpoint_id is None
    assert rig.loop.checkpoint("s") is None
    history = rig.loop.session_messages("s")
    assert [m.content for m in history] == [
        "go", "", "did a1", "Tool call skipped: the turn was cancelled before this tool started."]
    assert [e.reason for e in of(rig.events(), K.TOOL_EXEC_SKIPPED)] == ["cancelled"]
    rig.loop.start_turn("again", session_id="s")  # nothing pending: no discard needed


async def test_a_failing_checkpoint_write_is_reported_and_the_turn_goes_on() -> None:
    from steerable import InMemorySessionStore

    class Full(InMemorySessionStore):
        def save_checkpoint(self, checkpoint: Any) -> None:
            raise OSError("No space left on device")

    provider = ScriptedProvider([calls(("act", "a1")), Reply(text="done")])

    @tool
    async def act(name: str) -> str:
        """Act."""
        return "ok"

    loop = AgentLoop(Agent(name="a", provider=provider, tools=[act]), store=Full())
    sub = loop.subscribe(buffer=1000)
    result = await loop.run_turn("go", session_id="s")
    assert result.status is TurnStatus.COMPLETED
    errors = [e for e in sub.drain_nowait() if e.kind is K.ERROR]
    assert errors and all(e.source == "checkpoint" for e in errors)
    assert "No space left on device" in errors[0].message
    assert [m.content for m in loop.session_messages("s")][-1] == "done"


async def test_a_composite_stops_at_the_next_boundary_on_a_safe_point_cancel() -> None:
    from steerable import SequentialAgent

    gate = asyncio.Event()
    first = Agent(name="first", provider=ScriptedProvider([gated_reply(gate, Reply(text="one"))]))
    second = Agent(name="second", provider=ScriptedProvider([]))  # never reached
    loop = AgentLoop(SequentialAgent(name="seq", agents=[first, second]))
    sub = loop.subscribe(buffer=1000)
    handle = loop.start_turn("go", session_id="s")
    await wait_for(sub, K.LLM_REQUEST)
    cancel = loop.cancel("s", mode=CancelMode.AFTER_TOOLS)
    gate.set()
    result = await handle
    assert result.status is TurnStatus.CANCELLED
    assert cancel is not None and await cancel.wait() is True
    assert loop.checkpoint("s") is None  # composites keep no checkpoint: saved as it stands
    assert [m.content for m in loop.session_messages("s")] == ["go", "one"]
