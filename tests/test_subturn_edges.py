"""Sub-turn edges: slots given back, dry runs cascading only down, no child for an ending turn,
and steering a child through its handle."""

from __future__ import annotations

import asyncio
from typing import Any

from steerable import (
    Agent,
    AgentLoop,
    EventKind,
    InMemorySessionStore,
    Limits,
    Reply,
    ScriptedProvider,
    ToolContext,
    TurnStatus,
    tool,
)
from steerable.errors import SubturnError
from tests.conftest import of, wait_for

K = EventKind
wrote: list[str] = []


@tool
def write(path: str) -> str:
    """Write."""
    wrote.append(path)
    return f"wrote {path}"


def kid(*script: Reply, **kw: Any) -> Agent:
    return Agent(name="kid", description="a kid", tools=[write],
                 provider=ScriptedProvider(list(script)), **kw)


def ask(task: str) -> Reply:
    return Reply(tool_calls=[("subagent", {"agent": "kid", "task": task})])


async def test_a_finished_child_gives_its_active_turn_slot_back() -> None:
    child = kid(Reply(text="one"), Reply(text="two"))
    main = Agent(name="main", subagents=[child],
                 provider=ScriptedProvider([ask("first"), ask("second"), Reply(text="done")]))
    loop = AgentLoop(main, limits=Limits(active_turns=2))
    sub = loop.subscribe(buffer=10_000)
    result = await loop.run_turn("go", session_id="s")
    assert result.text == "done"
    ends = of(sub.drain_nowait(), K.TOOL_EXEC_END)
    assert [(e.content, e.is_error) for e in ends] == [("one", False), ("two", False)]


async def test_a_child_of_a_live_turn_really_acts_and_a_dry_parent_makes_it_dry() -> None:
    wrote.clear()
    for dry in (False, True):
        child = kid(Reply(tool_calls=[("write", {"path": f"dry={dry}"})]), Reply(text="ok"))
        main = Agent(name="main", subagents=[child], dry_run=dry,
                     provider=ScriptedProvider([ask("write it"), Reply(text="done")]))
        assert (await AgentLoop(main).run_turn("go", session_id="s")).status \
            is TurnStatus.COMPLETED
        assert child.dry_run is False  # the parent's dry run never changes the child agent
    assert wrote == ["dry=False"]


async def test_a_turn_being_hard_aborted_gets_no_new_child() -> None:
    refusals: list[str] = []
    started = asyncio.Event()

    @tool(read_only=True)
    async def stubborn(ctx: ToolContext) -> str:
        """Start a child after being cancelled."""
        started.set()
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            try:
                ctx.spawn_subturn("kid", "too late")
            except SubturnError as exc:
                refusals.append(str(exc))
            raise
        return "never"

    main = Agent(name="main", subagents=[kid(Reply(text="never"))], tools=[stubborn],
                 provider=ScriptedProvider([Reply(tool_calls=[("stubborn", {})])]))
    loop = AgentLoop(main)
    sub = loop.subscribe(buffer=10_000)
    handle = loop.start_turn("go", session_id="s")
    await started.wait()
    loop.interrupt_hard("s")
    assert (await handle).status is TurnStatus.ABORTED
    assert refusals == ["Sub-turn refused: the turn that asked for it is ending."]
    assert not of(sub.drain_nowait(), K.SUBTURN_SPAWN)


async def test_a_childs_handle_steers_it_queues_its_follow_up_and_interrupts_it() -> None:
    gate = asyncio.Event()

    async def wait_then(text: str):
        async def answer(request: Any) -> Reply:
            await gate.wait()
            return Reply(text=text)
        return answer

    child_provider = ScriptedProvider([await wait_then("first answer"), Reply(text="follow")])
    child = Agent(name="kid", description="a kid", provider=child_provider)
    main = Agent(name="main", subagents=[child],
                 provider=ScriptedProvider([ask("work"), Reply(text="done")]))
    loop = AgentLoop(main)
    sub = loop.subscribe(buffer=10_000)
    handle = loop.start_turn("go", session_id="s")
    spawn = await wait_for(sub, K.SUBTURN_SPAWN)
    child_handle = loop.turn_handle(spawn.child_turn_id)
    assert child_handle is not None
    assert child_handle.inject_steering("also this")
    assert child_handle.inject_follow_up("and then that")
    gate.set()
    result = await handle
    assert result.status is TurnStatus.COMPLETED
    sent = [m.content for m in child_provider.requests[-1].messages if m.role == "user"]
    assert "also this" in sent
    queued = of(sub.drain_nowait(), K.FOLLOW_UP_QUEUED)
    assert [(e.turn_id, e.parent_turn_id, e.text) for e in queued] == [
        (spawn.child_turn_id, result.turn_id, "and then that")]


async def test_a_tools_child_handle_queues_follow_ups_and_interrupts_gracefully() -> None:
    gate = asyncio.Event()
    answers: list[Any] = []

    async def gated(request: Any) -> Reply:
        await gate.wait()
        return Reply(text="partial work")

    child = Agent(name="kid", description="a kid",
                  provider=ScriptedProvider([gated, Reply(text="summary of partial work")]))

    @tool(read_only=True)
    async def boss(ctx: ToolContext) -> str:
        """Start a child and stop it early."""
        handle = ctx.spawn_subturn("kid", "long job", deliver=False)
        answers.append(handle.inject_follow_up("then report"))
        answers.append(handle.interrupt_graceful("wrap up now"))
        answers.append(handle.interrupt_graceful("twice"))  # one interrupt per turn
        gate.set()
        result = await handle
        answers.append(result.status)
        return result.text

    main = Agent(name="main", subagents=[child], tools=[boss],
                 provider=ScriptedProvider([Reply(tool_calls=[("boss", {})]), Reply(text="ok")]))
    loop = AgentLoop(main)
    sub = loop.subscribe(buffer=10_000)
    await loop.run_turn("go", session_id="s")
    assert [bool(a) for a in answers[:3]] == [True, True, False]
    assert answers[3] is TurnStatus.INTERRUPTED
    events = sub.drain_nowait()
    (spawn,) = of(events, K.SUBTURN_SPAWN)
    queued = [e for e in of(events, K.FOLLOW_UP_QUEUED) if e.turn_id == spawn.child_turn_id]
    assert [e.text for e in queued] == ["then report"]
    (end,) = of(events, K.SUBTURN_END)
    assert (end.child_turn_id, end.text) == (spawn.child_turn_id, "partial work")
    interrupts = [e for e in of(events, K.INTERRUPT_RECEIVED) if e.turn_id == spawn.child_turn_id]
    assert [(e.mode, e.hint) for e in interrupts] == [("graceful", "wrap up now")]


async def test_the_model_reads_exact_descriptions_of_the_sub_agent_tools() -> None:
    first = Agent(name="finder", description="finds\n  things", provider=ScriptedProvider([]))
    second = Agent(name="fixer", description="", provider=ScriptedProvider([]))
    provider = ScriptedProvider([Reply(text="ok")])
    await AgentLoop(Agent(name="main", subagents=[first, second], provider=provider)).run_turn(
        "go", session_id="s")
    specs = {t.name: t for t in provider.requests[0].tools}
    roster = ("The sub-agent sees only the task text, so make it self-contained. Sub-agents:\n"
              "- finder: finds things\n- fixer: (no description)")
    assert specs["subagent"].description == (
        "Give a task to a sub-agent and wait for its answer. " + roster)
    assert specs["spawn"].description == (
        "Start a sub-agent on a task in the background and go on at once. Its answer is added "
        "to the conversation when it finishes. " + roster)
    assert specs["spawn"].parameters["properties"]["agent"]["enum"] == ["finder", "fixer"]


async def test_a_delivered_result_names_the_child_and_a_shortened_task() -> None:
    long_task = "step " * 40  # 200 characters: cut to 120 with an ellipsis
    provider = ScriptedProvider([
        Reply(tool_calls=[("spawn", {"agent": "kid", "task": long_task})]),
        Reply(tool_calls=[("spawn", {"agent": "kid", "task": "short\n task"})]),
        Reply(text="waiting"), Reply(text="done")])
    # One child agent serves both spawns: its script answers in order (the second with no text).
    child = Agent(name="kid", description="a kid",
                  provider=ScriptedProvider([Reply(text="kid answer"), Reply(text="")]))
    loop = AgentLoop(Agent(name="main", subagents=[child], provider=provider))
    sub = loop.subscribe(buffer=10_000)
    await loop.run_turn("go", session_id="s")
    await loop.wait_idle()
    spawns = of(sub.drain_nowait(), K.SUBTURN_SPAWN)
    shown = " ".join(long_task.split())[:119] + "…"
    texts = [m.content for m in loop.session_messages("s") if m.role == "user"]
    first = (f"[Result of sub-agent kid (turn {spawns[0].child_turn_id}), completed; "
             f"task: {shown}]\nkid answer")
    second = (f"[Result of sub-agent kid (turn {spawns[1].child_turn_id}), completed; "
              "task: short task]")
    assert first in texts and second in texts


async def test_starting_a_sub_turn_from_code_checks_the_agent_it_is_given() -> None:
    errors: list[str] = []

    @tool(read_only=True)
    async def starter(ctx: ToolContext) -> str:
        """Start children wrongly."""
        for bad in ("nobody", 42):
            try:
                ctx.spawn_subturn(bad, "task")  # type: ignore[arg-type]
            except (SubturnError, TypeError) as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
        return "tried"

    for children in ([kid(Reply(text="x"))], []):
        errors.clear()
        provider = ScriptedProvider([Reply(tool_calls=[("starter", {})]), Reply(text="ok")])
        await AgentLoop(Agent(name="main", subagents=children, tools=[starter],
                              provider=provider)).run_turn("go", session_id="s")
        valid = "kid" if children else "none (this agent has no subagents)"
        assert errors == [f"SubturnError: Unknown agent 'nobody'. Valid agents: {valid}.",
                          "TypeError: a sub-turn needs an agent or an agent's name, got 42"]


async def test_the_turn_tree_snapshot_describes_parent_and_child() -> None:
    import time

    gate = asyncio.Event()

    async def held(request: Any) -> Reply:
        await gate.wait()
        return Reply(text="kid done")

    child = Agent(name="kid", description="a kid", provider=ScriptedProvider([held]))
    main = Agent(name="main", subagents=[child],
                 provider=ScriptedProvider([ask("work"), Reply(text="done")]))
    loop = AgentLoop(main)
    sub = loop.subscribe(buffer=10_000)
    before = time.monotonic()
    handle = loop.start_turn("go", session_id="s")
    spawn = await wait_for(sub, K.SUBTURN_SPAWN)
    loop.inject_follow_up("then this", "s")
    loop.inject_steering("and that", "s")
    child_handle = loop.turn_handle(spawn.child_turn_id)
    assert child_handle is not None and child_handle.inject_steering("kid, hurry")
    info = loop.active_turn("s")
    assert info is not None
    assert (info.turn_id, info.session_id, info.parent_turn_id, info.agent, info.iteration,
            info.steering_pending, info.follow_ups_pending) == (
        spawn.turn_id, "s", None, "main", 1, 1, 1)
    assert before <= info.started <= time.monotonic()  # the loop's clock
    (kid_info,) = info.children
    assert (kid_info.turn_id, kid_info.parent_turn_id, kid_info.agent, kid_info.iteration,
            kid_info.steering_pending, kid_info.follow_ups_pending, kid_info.children) == (
        spawn.child_turn_id, spawn.turn_id, "kid", 1, 1, 0, ())
    gate.set()
    await handle
    assert loop.turn_handle(spawn.child_turn_id) is None and loop.active_turn("s") is None


async def test_an_unregistered_observer_hears_nothing_more() -> None:
    heard: list[Any] = []
    first_turn_heard = asyncio.Event()

    class Ear:
        def on_event(self, event: Any) -> None:
            heard.append(event.kind)
            if event.kind is K.TURN_END:
                first_turn_heard.set()

    loop = AgentLoop(Agent(provider=ScriptedProvider([Reply(text="one"), Reply(text="two")])))
    unregister = loop.register_hook(Ear())
    await loop.run_turn("first", session_id="s")
    await asyncio.wait_for(first_turn_heard.wait(), 5)  # observers hear in their own task
    count = len(heard)
    assert heard[0] is K.TURN_START and heard[-1] is K.TURN_END
    assert unregister() is True and unregister() is False
    await loop.run_turn("second", session_id="s")
    await loop.aclose()  # waits for every observer still registered to hear what it was sent
    assert len(heard) == count


async def test_a_child_that_failed_is_an_error_result_naming_how_it_ended() -> None:
    from steerable.errors import ProviderError

    def broken(request: Any) -> Reply:
        raise ProviderError("model offline")

    gate = asyncio.Event()

    async def held(request: Any) -> Reply:
        await gate.wait()
        return Reply(text="never")

    for child_script, expected in (([broken], "Sub-agent kid ended error: "),
                                   ([held], "Sub-agent kid ended aborted.")):
        child = Agent(name="kid", description="a kid", provider=ScriptedProvider(child_script))
        main = Agent(name="main", subagents=[child],
                     provider=ScriptedProvider([ask("try"), Reply(text="done")]))
        loop = AgentLoop(main)
        sub = loop.subscribe(buffer=10_000)
        handle = loop.start_turn("go", session_id="s")
        if child_script == [held]:
            spawn = await wait_for(sub, K.SUBTURN_SPAWN)
            child_handle = loop.turn_handle(spawn.child_turn_id)
            assert child_handle is not None and child_handle.interrupt_hard()
        await handle
        (end,) = of(sub.drain_nowait(), K.TOOL_EXEC_END)
        assert end.is_error and end.content.startswith(expected), end.content
        await loop.aclose()


async def test_a_tools_child_handle_steers_the_child() -> None:
    gate = asyncio.Event()

    async def held(request: Any) -> Reply:
        await gate.wait()
        return Reply(tool_calls=[("write", {"path": "x"})])

    child = Agent(name="kid", description="a kid", tools=[write],
                  provider=ScriptedProvider([held, Reply(text="kid done")]))
    steered: list[bool] = []

    @tool(read_only=True)
    async def boss(ctx: ToolContext) -> str:
        """Start a child and steer it."""
        handle = ctx.spawn_subturn("kid", "job", deliver=False)
        steered.append(handle.inject_steering("mind the tests"))
        gate.set()
        return (await handle).text

    main = Agent(name="main", subagents=[child], tools=[boss],
                 provider=ScriptedProvider([Reply(tool_calls=[("boss", {})]), Reply(text="ok")]))
    await AgentLoop(main).run_turn("go", session_id="s")
    assert [bool(s) for s in steered] == [True]
    last = [m.content for m in child.provider.requests[-1].messages if m.role == "user"]
    assert last == ["job", "mind the tests"]


async def test_starting_children_from_code_checks_task_and_agent_shape() -> None:
    errors: list[str] = []

    class NameOnly:
        name = "ghost"
        description = None

    @tool(read_only=True)
    async def starter(ctx: ToolContext) -> str:
        """Start children wrongly."""
        for agent, task in (("kid", "   "), ("kid", ""), (NameOnly(), "task")):
            try:
                ctx.spawn_subturn(agent, task)  # type: ignore[arg-type]
            except (SubturnError, TypeError) as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
        return "tried"

    main = Agent(name="main", subagents=[kid(Reply(text="x"))], tools=[starter],
                 provider=ScriptedProvider([Reply(tool_calls=[("starter", {})]),
                                            Reply(text="ok")]))
    await AgentLoop(main).run_turn("go", session_id="s")
    assert errors[:2] == ["SubturnError: a sub-turn needs a non-empty task text"] * 2
    assert errors[2].startswith("TypeError: a sub-turn needs an agent or an agent's name, got ")


async def test_the_spawn_tool_tells_the_model_the_child_started() -> None:
    child = Agent(name="kid", description="a kid",
                  provider=ScriptedProvider([Reply(text="kid answer")]))
    provider = ScriptedProvider([Reply(tool_calls=[("spawn", {"agent": "kid", "task": "go"})]),
                                 Reply(text="waiting"), Reply(text="done")])
    loop = AgentLoop(Agent(name="main", subagents=[child], provider=provider))
    sub = loop.subscribe(buffer=10_000)
    await loop.run_turn("go", session_id="s")
    await loop.wait_idle()
    events = sub.drain_nowait()
    (spawn,) = of(events, K.SUBTURN_SPAWN)
    assert spawn.is_async is True
    first_end = of(events, K.TOOL_EXEC_END)[0]
    assert first_end.content == (f"Started sub-agent kid (turn {spawn.child_turn_id}). Its "
                                 "answer will be added to the conversation when it finishes.")


async def test_a_composites_children_are_waited_for_not_spawned() -> None:
    from steerable import SequentialAgent

    first = Agent(name="first", description="one", provider=ScriptedProvider([Reply(text="1")]))
    second = Agent(name="second", description="two", provider=ScriptedProvider([Reply(text="2")]))
    loop = AgentLoop(SequentialAgent(name="both", agents=[first, second]))
    sub = loop.subscribe(buffer=10_000)
    await loop.run_turn("go", session_id="s")
    spawns = of(sub.drain_nowait(), K.SUBTURN_SPAWN)
    assert [(s.agent, s.is_async) for s in spawns] == [("first", False), ("second", False)]


async def test_an_orphaned_result_the_store_cannot_save_is_an_error_on_the_parent_turn() -> None:
    class FullStore(InMemorySessionStore):
        full = False

        def append(self, session_id: str, messages: Any, turn: Any) -> None:
            if self.full:
                raise OSError("disk full")
            super().append(session_id, messages, turn)

    async def late(request: Any) -> Reply:
        await gate.wait()
        return Reply(text="kid finished")

    gate = asyncio.Event()
    child = Agent(name="kid", description="a kid", provider=ScriptedProvider([late]))
    main = Agent(name="main", subagents=[child], provider=ScriptedProvider([
        Reply(tool_calls=[("spawn", {"agent": "kid", "task": "go"})]), Reply(text="waiting")]))
    store = FullStore()
    loop = AgentLoop(main, store=store)
    sub = loop.subscribe(buffer=10_000)
    result = await loop.run_turn("go", session_id="s")  # ends before its async child does
    store.full = True
    gate.set()
    await loop.wait_idle()
    events = sub.drain_nowait()
    (spawned,) = of(events, K.SUBTURN_SPAWN)
    assert [(e.turn_id, e.source, e.message) for e in of(events, K.ERROR)] == [
        (result.turn_id, "store", f"saving the result of sub-turn {spawned.child_turn_id} to "
         "session 's' failed: disk full")]
    assert of(events, K.SUBTURN_ORPHAN) == []  # not saved: not reported as delivered
    await loop.aclose()
