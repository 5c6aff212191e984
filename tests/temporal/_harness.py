"""Run a TemporalWorker in the test's event loop and talk to it through a TemporalClient."""

from __future__ import annotations

import asyncio
import gc
import inspect
import tempfile
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import temporalio.api.enums.v1
from temporalio.client import WorkflowHistory

from steerable.server._worker_task import WorkerTask
from steerable.temporal import CallOptions, TemporalClient, TemporalWorker


@asynccontextmanager
async def running(agent: Any, target: str, task_queue: str, events_url: str | None = None,
                  **worker_kw: Any) -> AsyncIterator[TemporalClient]:
    worker = TemporalWorker(agent, target=target, task_queue=task_queue, events_url=events_url,
                            options=worker_kw.pop("options", CallOptions(heartbeat_timeout=3)),
                            **worker_kw)
    task = WorkerTask(worker)
    await task.start()
    client = await TemporalClient.connect(target, task_queue=task_queue, events_url=events_url)
    try:
        yield client
        await replay_all(worker, client)
    finally:
        await client.aclose()
        await task.stop()


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

    for history in histories:
        async def one(h: WorkflowHistory = history) -> AsyncIterator[WorkflowHistory]:
            yield h

        try:
            await worker.replay(one())
        except Exception as exc:
            raise AssertionError(replay_report(history, exc)) from exc


def session_coroutines(prefix: str) -> list[Coroutine[Any, Any, Any]]:
    """The coroutines of session workflows (sessions whose id starts with ``prefix``) still
    suspended. After every worker of them stopped, each is one the garbage collector would
    close later, in whatever workflow runs then (``steerable.temporal._eviction``)."""
    from steerable.temporal._workflow import SessionWorkflow

    out = []
    for obj in gc.get_objects():
        if inspect.iscoroutine(obj) and obj.cr_frame is not None:
            owner = obj.cr_frame.f_locals.get("self")
            if isinstance(owner, SessionWorkflow) and owner.session_id.startswith(prefix):
                out.append(obj)
    return out


def names(coroutines: list[Coroutine[Any, Any, Any]]) -> list[str]:
    """What each coroutine still suspended runs (closed ones left out)."""
    return sorted(c.cr_code.co_qualname for c in coroutines if c.cr_frame is not None)


def replay_report(history: WorkflowHistory, exc: Exception) -> str:
    """What a failed replay needs to be understood later (a load-dependent failure may not
    come back): the error, the history's events in short, and the whole history saved as
    JSON outside the checkout (``temporal workflow show --input FILE`` reads it back)."""
    saved = Path(tempfile.mkdtemp(prefix="steerable-replay-")) / f"{history.workflow_id}.json"
    saved.write_text(history.to_json())
    lines = [f"replaying {history.workflow_id} failed: {exc}", f"history saved: {saved}"]
    for event in history.events:
        name = temporalio.api.enums.v1.EventType.Name(event.event_type)
        lines.append(f"{event.event_id:4} {name.removeprefix('EVENT_TYPE_')} {_detail(event)}")
    return "\n".join(lines)


def _detail(event: Any) -> str:
    """The name that tells events of one type apart: the activity's, the update's."""
    if event.HasField("activity_task_scheduled_event_attributes"):
        attrs = event.activity_task_scheduled_event_attributes
        return f"{attrs.activity_type.name} #{attrs.activity_id}"
    if event.HasField("workflow_execution_update_accepted_event_attributes"):
        return event.workflow_execution_update_accepted_event_attributes.accepted_request\
            .input.name
    return ""


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
