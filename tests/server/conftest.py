"""A real server on a loopback port (uvicorn in the test's event loop) over a scripted agent."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("uvicorn", reason="the server extra is not installed")
import uvicorn

from steerable import Agent, AgentLoop, HumanApprover, ScriptedProvider, tool
from steerable.coding import SNAPSHOT_HOOK_PRIORITY, SNAPSHOT_HOOK_TIMEOUT, SnapshotHook
from steerable.server import LocalRunner, UndoAPI, create_app
from steerable.server._uvicorn import Server
from steerable.storage import JSONLSessionStore


@dataclass
class Served:
    url: str
    loop: AgentLoop
    runner: LocalRunner
    provider: Any
    store_dir: Path
    client: httpx.AsyncClient


def gate_tools(gate: asyncio.Event, written: dict[str, str]) -> list[Any]:
    @tool
    async def work(step: str) -> str:
        """A mutating step that waits for the gate."""
        await gate.wait()
        return f"did {step}"

    @tool
    async def write(path: str, content: str) -> str:
        """Write a file (recorded in memory)."""
        written[path] = content
        return f"wrote {path}"

    return [work, write]


@asynccontextmanager
async def serving(tmp_path: Path, script: Sequence[Any], tools: Sequence[Any] = (), *,
                  token: str | None = None, approvals: bool = False,
                  replay: int = 2048, provider: Any = None,
                  subagents: Sequence[Any] = (),
                  undo: SnapshotHook | None = None, park: bool = False) -> AsyncIterator[Served]:
    """``undo``: a snapshot hook to register, with the server's undo endpoints over it;
    ``park``: requests park their turn at once (``AgentLoop(park=True)``)."""
    provider = provider or ScriptedProvider(list(script))
    store_dir = tmp_path / "sessions"
    agent = Agent(name="t", instructions="test", provider=provider, tools=list(tools),
                  subagents=list(subagents))
    loop = AgentLoop(agent, store=JSONLSessionStore(store_dir), park=park)
    if approvals:
        loop.register_hook(HumanApprover())
    runner = LocalRunner(loop, replay=replay)
    undo_api = None
    if undo is not None:
        loop.register_hook(undo, priority=SNAPSHOT_HOOK_PRIORITY, timeout=SNAPSHOT_HOOK_TIMEOUT)
        undo_api = UndoAPI(undo, loop.busy, JSONLSessionStore(store_dir).turns)
    app = create_app(runner, token=token, undo=undo_api)
    config = uvicorn.Config(app, host="127.0.0.1", port=0,
                            log_level="warning", access_log=False, lifespan="on")
    server = Server(config, app)
    task = asyncio.ensure_future(server.serve())
    while not server.started:
        assert not task.done(), "server did not start"
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=10) as client:
        try:
            yield Served(url, loop, runner, provider, store_dir, client)
        finally:
            server.stop()  # ends the event streams still open, then the server
            await asyncio.wait_for(task, 10)


async def sse_events(client: httpx.AsyncClient, sid: str, *, until: str = "turn_end",
                     last_event_id: int | None = 0, limit: int = 10_000,
                     ids: list[int] | None = None) -> list[dict[str, Any]]:
    """Read a session's SSE stream until an event of kind ``until`` (top level) arrives."""
    from httpx_sse import aconnect_sse

    headers = {} if last_event_id is None else {"Last-Event-ID": str(last_event_id)}
    out: list[dict[str, Any]] = []
    async with aconnect_sse(client, "GET", f"/v1/sessions/{sid}/events",
                            headers=headers) as source:
        assert source.response.headers["content-type"].startswith("text/event-stream")
        async for sse in source.aiter_sse():
            if not sse.data:
                continue
            event = json.loads(sse.data)
            if ids is not None:
                ids.append(int(sse.id))
            assert int(sse.id) == event["seq"]
            out.append(event)
            if (event["kind"] == until and event["parent_turn_id"] is None) or len(out) >= limit:
                return out
    return out
