from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from temporalio.workflow import NondeterminismError

from steerable import Agent, Permissions, Reply, ScriptedProvider, tool
from steerable.temporal import TemporalWorker
from tests.temporal._harness import events_until, replay_all, running, turn_end


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


async def test_replay_catches_a_worker_that_would_decide_differently(
        temporal_target: str, events_url: str, task_queue: str) -> None:
    @tool
    async def touch(path: str) -> str:
        """Touch.

        Args:
            path: What.
        """
        return "touched"

    provider = ScriptedProvider([Reply(tool_calls=[("touch", {"path": "a"})]),
                                 Reply(text="done")])
    agent = Agent(name="t", instructions="x", provider=provider, tools=[touch])
    async with running(agent, temporal_target, task_queue, events_url) as client:
        sid = f"{task_queue}-replay"
        receipt = await client.send("go", sid)
        assert (await client.result(sid, receipt.message_id)).status == "completed"
        histories = [h async for h in client.client.list_workflows(
            f'TaskQueue="{task_queue}"').map_histories()]
        # The tests' own replay check says what it could not replay, and keeps the history.
        stricter = TemporalWorker(agent, target=temporal_target, task_queue=task_queue,
                                  permissions=Permissions([("deny", "touch")]))
        with pytest.raises(AssertionError) as failed:
            await replay_all(stricter, client)
        report = str(failed.value)
        assert "Nondeterminism" in report and "ACTIVITY_TASK_SCHEDULED steerable.tool" in report
        saved = Path(report.split("history saved: ")[1].split("\n")[0])
        assert json.loads(saved.read_text())["events"]

    async def each() -> Any:
        for history in histories:
            yield history

    # The same agent replays cleanly; one that now refuses the tool would skip its activity.
    same = TemporalWorker(agent, target=temporal_target, task_queue=task_queue)
    await same.replay(each())
    with pytest.raises(NondeterminismError):
        await stricter.replay(each())
