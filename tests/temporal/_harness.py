"""Run a TemporalWorker in the test's event loop and talk to it through a TemporalClient."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from steerable.temporal import CallOptions, TemporalClient, TemporalWorker


@asynccontextmanager
async def running(agent: Any, target: str, task_queue: str, events_url: str | None = None,
                  **worker_kw: Any) -> AsyncIterator[TemporalClient]:
    worker = TemporalWorker(agent, target=target, task_queue=task_queue, events_url=events_url,
                            options=worker_kw.pop("options", CallOptions(heartbeat_timeout=3)),
                            **worker_kw)
    task = asyncio.create_task(worker.run())
    ready = asyncio.create_task(worker.ready.wait())
    await asyncio.wait([task, ready], return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        ready.cancel()
        task.result()
    client = await TemporalClient.connect(target, task_queue=task_queue, events_url=events_url)
    try:
        yield client
        await replay_all(worker, client)
    finally:
        await client.aclose()
        worker.stop()
        await task


async def replay_all(worker: TemporalWorker, client: TemporalClient) -> None:
    """Replay every session workflow of the test's task queue from its history, as a worker
    taking it over after a crash would: a decision made differently (non-determinism in the
    engine or the workflow) fails the test."""
    query = f'TaskQueue="{client.task_queue}"'
    for _ in range(100):  # the server's list of workflows may trail a moment
        histories = [h async for h in client.client.list_workflows(query).map_histories()]
        if histories:
            break
        await asyncio.sleep(0.05)
    assert histories, "no session workflow to replay"

    async def each() -> AsyncIterator[Any]:
        for history in histories:
            yield history

    await worker.replay(each())


async def events_until(client: TemporalClient, session_id: str,
                       done: Callable[[dict[str, Any]], bool],
                       timeout: float = 20.0) -> list[dict[str, Any]]:
    """The session's events from the start until ``done(event)`` holds (that one included)."""
    seen: list[dict[str, Any]] = []

    async def read() -> None:
        async for _, event in client.events(session_id):
            seen.append(event)
            if done(event):
                return

    await asyncio.wait_for(read(), timeout)
    return seen


def turn_end(event: dict[str, Any]) -> bool:
    return event["kind"] == "turn_end" and event["parent_turn_id"] is None
