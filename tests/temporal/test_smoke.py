from __future__ import annotations

import asyncio

from steerable import Agent, Reply, ScriptedProvider, tool
from tests.temporal._harness import events_until, running, turn_end


async def test_one_turn_with_a_tool_and_a_steer(temporal_target: str, events_url: str,
                                                task_queue: str) -> None:
    started = asyncio.Event()

    @tool(read_only=True)
    async def slow(seconds: float) -> str:
        """Wait.

        Args:
            seconds: How long.
        """
        started.set()
        await asyncio.sleep(seconds)
        return "slept"

    provider = ScriptedProvider([Reply(tool_calls=[("slow", {"seconds": 1.0})]),
                                 Reply(text="done")])
    agent = Agent(name="t", instructions="x", provider=provider, tools=[slow])
    async with running(agent, temporal_target, task_queue, events_url) as client:
        receipt = await client.send("go", "s1")
        assert receipt and receipt.action == "started"
        await asyncio.wait_for(started.wait(), 10)
        steer = await client.inject_steering("also this", "s1")
        assert steer and steer.state == "queued"
        outcome = await client.result("s1", receipt.message_id)
        assert outcome.status == "completed" and outcome.text == "done"
        events = await events_until(client, "s1", turn_end)
        kinds = [e["kind"] for e in events]
        assert kinds.count("turn_start") == 1 and kinds[-1] == "turn_end"
        assert "steering_injected" in kinds
        assert provider.requests[1].messages[-1].content == "also this"
        messages = await client.session_messages("s1")
        assert [m.role for m in messages] == ["user", "assistant", "tool", "user", "assistant"]
