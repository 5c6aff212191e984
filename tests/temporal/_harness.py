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
    finally:
        await client.aclose()
        worker.stop()
        await task


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
