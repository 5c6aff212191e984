"""Sub-turns on the local engine and on Temporal alike: an agent's subagents (``subagent``
and ``spawn``) and composite agents, each child a sub-turn of the one engine in the workflow,
its model calls and tools activities of the agent at its path."""

from __future__ import annotations

import asyncio
from typing import Any

from steerable import (
    Agent,
    LoopAgent,
    ParallelAgent,
    Reply,
    ScriptedProvider,
    SequentialAgent,
    tool,
)
from tests.temporal._drivers import Event, Make


def echo(name: str) -> Agent:
    """Answers '<name>(<its input>)' every time it is asked."""

    def answer(request: Any) -> Reply:
        return Reply(text=f"{name}({request.messages[-1].content})")

    return Agent(name=name, description=f"{name} agent", provider=ScriptedProvider([answer] * 20))


def end(e: Event) -> bool:
    return e["kind"] == "turn_end" and e["parent_turn_id"] is None


async def test_a_subagent_answers_its_parent_and_its_events_name_the_parent(make: Make) -> None:
    parent_provider = ScriptedProvider([
        Reply(tool_calls=[("subagent", {"agent": "helper", "task": "look"})]),
        Reply(tool_calls=[("subagent", {"agent": "nobody", "task": "x"})]),
        Reply(text="done")])
    parent = Agent(name="main", instructions="x", provider=parent_provider,
                   subagents=[echo("helper")])
    async with make(parent) as d:
        sent = await d.send("go", "s")
        status, text, turn_id = await d.result("s", sent)
        assert (status, text) == ("completed", "done")
        events = await d.events("s", end)
        [spawn] = [e for e in events if e["kind"] == "subturn_spawn"]
        child_start = [e for e in events if e["kind"] == "turn_start"
                       and e["parent_turn_id"] == turn_id]
        assert [e["turn_id"] for e in child_start] == [spawn["child_turn_id"]]
        [sub_end] = [e for e in events if e["kind"] == "subturn_end"]
        assert sub_end["status"] == "completed"
        tools = [m for m in await d.messages("s") if m.role == "tool"]
        assert tools[0].content == "helper(look)"
        assert "nobody" in tools[1].content and "helper" in tools[1].content  # unknown name


async def test_a_spawned_child_reaches_the_parent_before_its_next_call(make: Make) -> None:
    gate = asyncio.Event()

    async def slow(request: Any) -> Reply:
        await gate.wait()
        return Reply(text="found it")

    child = Agent(name="bg", description="background", provider=ScriptedProvider([slow]))

    async def after_spawn(request: Any) -> Reply:
        gate.set()  # the child ends while the parent's next tool runs
        return Reply(tool_calls=[("wait_a_bit", {})])

    provider = ScriptedProvider([
        Reply(tool_calls=[("spawn", {"agent": "bg", "task": "search"})]),
        after_spawn, Reply(text="all done")])

    @tool(read_only=True)
    async def wait_a_bit() -> str:
        """Wait for the child."""
        await asyncio.sleep(0.5)
        return "waited"

    parent = Agent(name="main", instructions="x", provider=provider, subagents=[child],
                   tools=[wait_a_bit])
    async with make(parent) as d:
        sent = await d.send("go", "s")
        assert (await d.result("s", sent))[:2] == ("completed", "all done")
        events = await d.events("s", end)
        assert [e["kind"] for e in events].count("subturn_result_delivered") == 1
        last = provider.requests[-1].messages
        assert any("found it" in str(m.content) for m in last)


async def test_composites_run_their_children_as_sub_turns(make: Make) -> None:
    pipeline = SequentialAgent(name="pipeline", agents=[
        echo("a"), ParallelAgent(name="fan", agents=[echo("b"), echo("c")]),
        LoopAgent(name="again", agent=echo("d"), max_loops=2)])
    async with make(pipeline) as d:
        sent = await d.send("x", "s")
        status, text, turn_id = await d.result("s", sent)
        fan = "## b\nb(a(x))\n\n## c\nc(a(x))"
        assert (status, text) == ("completed", f"d(d({fan}))")
        events = await d.events("s", end)
        spawns = [e["agent"] for e in events if e["kind"] == "subturn_spawn"]
        assert sorted(spawns) == ["a", "again", "b", "c", "d", "d", "fan"]
        assert [(m.role, m.content) for m in await d.messages("s")] == [
            ("user", "x"), ("assistant", text)]


async def test_a_hard_interrupt_reaches_every_child(make: Make) -> None:
    gate = asyncio.Event()

    def gated(name: str) -> Agent:
        async def answer(request: Any) -> Reply:
            await gate.wait()
            return Reply(text=f"{name} done")

        return Agent(name=name, provider=ScriptedProvider([answer]))

    par = ParallelAgent(name="p", agents=[gated("a"), gated("b")])
    async with make(par) as d:
        sent = await d.send("x", "s")
        requests = 0

        def two_requests(e: Event) -> bool:
            nonlocal requests
            requests += e["kind"] == "llm_request"
            return requests == 2

        await d.events("s", two_requests)
        assert await d.interrupt("s", "hard")
        assert (await d.result("s", sent))[0] == "aborted"
        events = await d.events("s", end)
        ends = [e["status"] for e in events if e["kind"] == "turn_end"]
        assert ends == ["aborted"] * 3
        assert await d.messages("s") == []
