"""The SDK's A2A client as the tests use it: a streaming and a blocking client over one
recorded httpx client (every answer is checked strictly when the peer closes), requests, and
short readers of what came back."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from a2a.client import A2ACardResolver, Client, ClientConfig, create_client
from a2a.helpers import new_text_part
from a2a.types import AgentCard, Message, Role, SendMessageRequest, StreamResponse, Task, TaskState

from tests.protocols._a2a_wire import Recorder

W, IR = TaskState.TASK_STATE_WORKING, TaskState.TASK_STATE_INPUT_REQUIRED
DONE, CANCELED = TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_CANCELED


class Peer:
    """The SDK's client (streaming and not) over one recorded httpx client."""

    def __init__(self, card: AgentCard, http: httpx.AsyncClient) -> None:
        self.card = card
        self.http = http
        self.stream: Client
        self.blocking: Client

    async def open(self) -> None:
        self.stream = await create_client(self.card, ClientConfig(httpx_client=self.http))
        self.blocking = await create_client(self.card, ClientConfig(httpx_client=self.http,
                                                                    streaming=False))

    async def send(self, *parts: Any, context: str, task: str | None = None,
                   policy: str | None = None, stream: bool = True) -> list[StreamResponse]:
        client = self.stream if stream else self.blocking
        return [r async for r in client.send_message(request(
            *parts, context=context, task=task, policy=policy))]


def request(*parts: Any, context: str, task: str | None = None,
            policy: str | None = None) -> SendMessageRequest:
    message = Message(role=Role.ROLE_USER, message_id=f"m-{id(parts)}-{len(parts)}",
                      context_id=context,
                      parts=[new_text_part(p) if isinstance(p, str) else p for p in parts])
    if task is not None:
        message.task_id = task
    if policy is not None:
        message.metadata.update({"busy_policy": policy})
    return SendMessageRequest(message=message)


@asynccontextmanager
async def peer(url: str, token: str | None = None) -> AsyncIterator[Peer]:
    recorder = Recorder()
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(transport=recorder, timeout=20, headers=headers) as http:
        card = await A2ACardResolver(http, url).get_agent_card()
        p = Peer(card, http)
        await p.open()
        yield p
    assert recorder.check() > 0


def state(r: StreamResponse | Task) -> TaskState:
    if isinstance(r, Task):
        return r.status.state
    return r.task.status.state if r.HasField("task") else r.status_update.status.state


def states(responses: list[StreamResponse]) -> list[TaskState]:
    """The states in order, each run of one state shown once (artifacts are left out)."""
    out: list[TaskState] = []
    for r in responses:
        if r.HasField("artifact_update"):
            continue
        if not out or out[-1] != state(r):
            out.append(state(r))
    return out


def texts(responses: list[StreamResponse]) -> list[str]:
    return [p.text for r in responses if r.HasField("status_update")
            for p in r.status_update.status.message.parts if p.text]


def task_id(responses: list[StreamResponse]) -> str:
    first = responses[0]
    return first.task.id if first.HasField("task") else first.status_update.task_id


class Background:
    """A streamed send read in the background, its answers kept as they come."""

    def __init__(self, a2a: Peer, *parts: Any, context: str, task: str | None = None,
                 policy: str | None = None) -> None:
        self.got: list[StreamResponse] = []
        self.done = asyncio.ensure_future(self._read(a2a.stream.send_message(
            request(*parts, context=context, task=task, policy=policy))))

    async def _read(self, stream: AsyncIterator[StreamResponse]) -> list[StreamResponse]:
        async for r in stream:
            self.got.append(r)
        return self.got

    async def working(self, wanted: TaskState = W) -> str:
        """The task's id once it works (or reaches ``wanted``)."""
        for _ in range(400):
            if wanted in states(self.got):
                return task_id(self.got)
            assert not self.done.done(), self.done.result()
            await asyncio.sleep(0.025)
        raise AssertionError("the task never started working")
