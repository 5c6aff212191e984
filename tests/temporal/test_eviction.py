"""A worker that stops evicts the sessions it holds in its cache: none of their coroutines is
left for the garbage collector, which would close it later in another workflow's context and
on its event loop (``steerable.temporal._eviction``; the SDK evicts on Temporal's request,
not at shutdown)."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from steerable import Agent, Reply, ScriptedProvider, ToolContext, tool
from steerable.server._worker_task import WorkerTask
from steerable.temporal import CallOptions, TemporalClient, TemporalWorker
from tests.temporal._harness import names, session_coroutines

pytestmark = pytest.mark.timeout(60)


@tool(read_only=True)
async def pick(ctx: ToolContext) -> str:
    """Ask which colour."""
    return str(await ctx.ask("Which colour?", choices=["red", "blue"]))


async def test_a_stopped_worker_leaves_no_session_coroutine_suspended(
        temporal_target: str, task_queue: str) -> None:
    agent = Agent(name="a", instructions="x", tools=[pick], provider=ScriptedProvider(
        [Reply(tool_calls=[("pick", {})]), Reply(text="done")]))
    worker = TemporalWorker(agent, target=temporal_target, task_queue=task_queue,
                            options=CallOptions(heartbeat_timeout=3))
    running = WorkerTask(worker)
    await running.start()
    client = await TemporalClient.connect(temporal_target, task_queue=task_queue)
    sid = f"{task_queue}-evict"
    result = None
    try:
        receipt = await client.send("which?", sid)
        # The turn waits on the question (a durable timer), an update waits on the turn.
        result = asyncio.ensure_future(client.result(sid, receipt.message_id))
        while not ((await client.state(sid)) or {}).get("requests"):
            await asyncio.sleep(0.05)
        while "SessionWorkflow.result" not in names(session_coroutines(sid)):
            await asyncio.sleep(0.05)  # the update reaches the workflow
        # Held here, so a collection meanwhile cannot hide what the stop leaves.
        held = session_coroutines(sid)
        assert {"SessionWorkflow.run", "SessionWorkflow.result"} <= set(names(held))
        await running.stop()
        assert names(held) == []
    finally:
        if result is not None:
            result.cancel()
            with contextlib.suppress(BaseException):
                await result
        await client.aclose()
        await running.stop()
