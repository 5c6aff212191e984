"""The SSE fan-out: bounded replay, slow clients drop (counted) without slowing anyone,
sub-turn events routed to their top-level session."""

from __future__ import annotations

import asyncio
import json

from steerable import Agent, AgentLoop, Reply, ScriptedProvider
from steerable.server import EventHub


async def test_slow_client_drops_are_counted_and_never_block_the_turn() -> None:
    hub = EventHub(lambda t: t.replace("sk-secret-value", "[redacted]"), replay=8)
    loop = AgentLoop(Agent(name="t", provider=ScriptedProvider(
        [Reply(text="sk-secret-value " + "word " * 200)])))
    pump = asyncio.ensure_future(hub.pump(loop.subscribe(buffer=100_000)))
    slow = hub.attach("s", None, buffer=4)  # never read
    fast = hub.attach("s", None)
    got: list[int] = []

    async def read() -> None:
        async for seq, data in hub.stream(fast):
            got.append(seq)
            if json.loads(data)["kind"] == "turn_end":
                return

    reader = asyncio.ensure_future(read())
    result = await asyncio.wait_for(loop.run_turn("go", "s"), 10)
    await asyncio.wait_for(reader, 10)
    assert result.status.value == "completed"
    assert slow.dropped > 0 and hub.dropped == slow.dropped and fast.dropped == 0
    assert got == list(range(got[0], got[-1] + 1))  # the reader that kept up lost nothing
    # the replay buffer is bounded: a late client gets the last 8 events only
    late = hub.attach("s", 0)
    replayed = [late.queue.get_nowait() for _ in range(late.queue.qsize())]
    assert len(replayed) == 8 and replayed[-1][0] == got[-1]
    assert all("sk-secret-value" not in data for _, data in replayed)
    hub.detach(slow)
    hub.detach(late)
    await loop.aclose()
    await pump
    assert hub.client_count() == 0


async def test_sub_turn_events_go_to_the_top_level_session() -> None:
    child = Agent(name="helper", instructions="help", description="helps",
                  provider=ScriptedProvider([Reply(text="child says hi")]))
    parent = Agent(name="main", subagents=[child], provider=ScriptedProvider([
        Reply(tool_calls=[("subagent", {"agent": "helper", "task": "say hi"})]),
        Reply(text="done")]))
    loop = AgentLoop(parent)
    hub = EventHub(lambda t: t)
    pump = asyncio.ensure_future(hub.pump(loop.subscribe(buffer=100_000)))
    await loop.run_turn("go", "top")
    await loop.aclose()
    await pump
    client = hub.attach("top", 0)
    events = [json.loads(client.queue.get_nowait()[1]) for _ in range(client.queue.qsize())]
    child_events = [e for e in events if e["parent_turn_id"] is not None]
    assert child_events and any(e["kind"] == "llm_delta" for e in child_events)
    assert {e["kind"] for e in events} >= {"subturn_spawn", "subturn_end"}
