"""Protocol front-end benchmarks: AG-UI at /v1/agui, MCP at /mcp and A2A at /a2a against the
native SSE of the same turn.

    python bench/bench_protocols.py

``steerable serve`` runs in its own process with the scripted provider (instant answers); each
turn is 40 read calls then a 4,000-word answer (one text delta per word), about 4,300 native
events. Printed: the events per second one AG-UI stream carries end to end (request to
RUN_FINISHED), the same for the native SSE of an identical turn, the AG-UI adapter's overhead
in wall time per turn, and the adapter alone in this process (translation plus encoding of a
recorded turn: the ceiling one stream can sustain); the MCP ``run`` tool's wall time per turn
(progress notifications included) against the native SSE's; the A2A streamed send's (the SDK's
client, status updates per tool call and result, the reply as an artifact) likewise; and the A2A
adapter alone in this process (the SDK's request handler and task store fed a turn of 100, 400
and 800 tool calls): the SDK copies the task, whose history keeps every status message, on each
update, so its cost per update grows with the turn.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import httpx
from a2a.client import ClientConfig, create_client
from a2a.helpers import new_text_part
from a2a.server.context import ServerCallContext
from a2a.types import Message, Role, SendMessageRequest
from ag_ui.encoder import EventEncoder
from mcp import Client

from steerable.protocols.a2a import a2a_endpoints
from steerable.protocols.agui import RunTranslator

ROOT = Path(__file__).resolve().parent.parent
WORDS = 4000
CALLS = 40
TURN = [{"tool_calls": [["read", {"path": "a.txt"}]] * CALLS},
        {"text": " ".join(f"word{i}" for i in range(WORDS))}]


@asynccontextmanager
async def server(turns: int) -> AsyncIterator[str]:
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "script.json"
        script.write_text(json.dumps(TURN * turns))
        (Path(tmp) / "a.txt").write_text("hello\n")
        env = {**os.environ, "STEERABLE_DATA_DIR": str(Path(tmp) / "data"),
               "XDG_CONFIG_HOME": str(Path(tmp) / "config"), "PYTHONPATH": str(ROOT / "src")}
        env.pop("STEERABLE_SERVER_TOKEN", None)
        proc = subprocess.Popen([sys.executable, "-m", "steerable", "serve", "--port", "0",
                                 "--yes", "--provider", "scripted", "--script", str(script),
                                 "--workspace", tmp], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True)
        assert proc.stdout is not None
        url = proc.stdout.readline().split()[-1]
        try:
            yield url
        finally:
            proc.terminate()
            proc.wait(10)


async def native(client: httpx.AsyncClient, sid: str) -> tuple[int, float, list[str]]:
    """Post a message and follow the SSE to the turn's end: events, seconds, raw data lines."""
    lines: list[str] = []
    ready = asyncio.Event()

    async def follow() -> None:
        async with client.stream("GET", f"/v1/sessions/{sid}/events") as response:
            ready.set()
            async for line in response.aiter_lines():
                if line.startswith("data:"):
                    lines.append(line[5:].strip())
                    if '"turn_end"' in line and '"parent_turn_id": null' in line:
                        return

    reader = asyncio.create_task(follow())
    await ready.wait()
    t0 = time.perf_counter()
    assert (await client.post(f"/v1/sessions/{sid}/messages", json={"text": "go"})).is_success
    await reader
    return len(lines), time.perf_counter() - t0, lines


async def agui(client: httpx.AsyncClient, sid: str) -> tuple[int, float]:
    body = {"threadId": sid, "runId": str(uuid.uuid4()), "state": {}, "tools": [],
            "context": [], "forwardedProps": {},
            "messages": [{"id": "u", "role": "user", "content": "go"}]}
    count = 0
    t0 = time.perf_counter()
    async with client.stream("POST", "/v1/agui", json=body) as response:
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                count += 1
                if '"RUN_FINISHED"' in line:
                    break
    return count, time.perf_counter() - t0


async def mcp_run(client: Client, sid: str) -> tuple[int, float]:
    notes = 0

    async def count(done: float, total: float | None, message: str | None) -> None:
        nonlocal notes
        notes += 1

    t0 = time.perf_counter()
    result = await client.call_tool("run", {"prompt": "go", "session_id": sid},
                                    progress_callback=count)
    assert not result.is_error, result
    return notes, time.perf_counter() - t0


async def a2a_send(client: httpx.AsyncClient, url: str, sid: str) -> tuple[int, float]:
    peer = await create_client(url, ClientConfig(httpx_client=client))
    message = Message(role=Role.ROLE_USER, message_id=str(uuid.uuid4()), context_id=sid,
                      parts=[new_text_part("go")])
    t0 = time.perf_counter()
    count = 0
    async for _ in peer.send_message(SendMessageRequest(message=message)):
        count += 1
    return count, time.perf_counter() - t0


class _Replay:
    """A runner whose one turn is ``calls`` tool calls and their results, already done."""

    @dataclass
    class Sent:
        turn_id: str | None
        action: str
        message_id: str | None = None

    def __init__(self, calls: int) -> None:
        base = {"turn_id": "t1", "parent_turn_id": None, "tool_name": "read",
                "arguments": {"path": "a.txt"}, "content": "hello\n" * 20, "is_error": False}
        self.lines = [json.dumps({**base, "kind": kind, "call_id": f"c{i}"})
                      for i in range(calls) for kind in ("tool_exec_start", "tool_exec_end")]
        self.lines.append(json.dumps({**base, "kind": "turn_end", "status": "completed",
                                      "text": "done"}))

    async def send(self, session_id: str, text: str, policy: Any, *,
                   discard_pending: bool = False) -> _Replay.Sent:
        return self.Sent("t1", "started")

    async def events(self, session_id: str, after: int | None) -> AsyncIterator[tuple[int, str]]:
        for seq, line in enumerate(self.lines, 1):
            yield seq, line


async def a2a_alone(calls: int) -> tuple[int, float]:
    """Updates out and seconds for one streamed task over a replayed turn, no HTTP."""
    endpoints = a2a_endpoints(cast(Any, _Replay(calls)))
    message = Message(role=Role.ROLE_USER, message_id="m", context_id="c",
                      parts=[new_text_part("go")])
    t0 = time.perf_counter()
    out = 0
    async for _ in endpoints.handler.on_message_send_stream(
            SendMessageRequest(message=message), ServerCallContext()):
        out += 1
    seconds = time.perf_counter() - t0
    await endpoints.handler.aclose()
    return out, seconds


def adapter_alone(lines: list[str], rounds: int = 5) -> tuple[int, float]:
    """Translate and encode a recorded turn: AG-UI events out per second, best of ``rounds``."""
    events = [json.loads(line) for line in lines]
    turn = events[0]["turn_id"]
    encoder = EventEncoder()
    best = float("inf")
    for _ in range(rounds):
        translator = RunTranslator("t", "r", turn)
        t0 = time.perf_counter()
        out = 0
        for seq, raw in enumerate(events):
            for event in translator.feed(seq, raw):
                encoder.encode(event)
                out += 1
        best = min(best, time.perf_counter() - t0)
    return out, best


async def main(turns: int = 6) -> None:
    print(f"load average before: {Path('/proc/loadavg').read_text().split()[:3]}")
    async with server(4 * turns) as url, httpx.AsyncClient(base_url=url, timeout=120) as client, \
            Client(url + "/mcp") as mcp_client:
        rows_native, rows_agui, rows_mcp, rows_a2a, recorded = [], [], [], [], []
        for i in range(turns):  # interleaved, so all see the same machine load
            n, secs, lines = await native(client, f"n{i}")
            rows_native.append((n, secs))
            recorded = lines
            rows_agui.append(await agui(client, f"a{i}"))
            rows_mcp.append(await mcp_run(mcp_client, f"m{i}"))
            rows_a2a.append(await a2a_send(client, url, f"x{i}"))
    nat = statistics.median(s for _, s in rows_native)
    ag = statistics.median(s for _, s in rows_agui)
    n_native, n_agui = rows_native[-1][0], rows_agui[-1][0]
    print(f"native SSE: {n_native} events per turn, median {nat * 1000:.0f} ms "
          f"({n_native / nat:,.0f} events/s)")
    print(f"AG-UI:      {n_agui} events per turn, median {ag * 1000:.0f} ms "
          f"({n_agui / ag:,.0f} events/s on one stream)")
    print(f"AG-UI overhead over the native SSE: {(ag / nat - 1) * 100:+.1f}% wall time per turn")
    mc = statistics.median(s for _, s in rows_mcp)
    print(f"MCP run:    {rows_mcp[-1][0]} progress notifications per turn, median "
          f"{mc * 1000:.0f} ms: {(mc / nat - 1) * 100:+.1f}% wall time over the native SSE")
    a2 = statistics.median(s for _, s in rows_a2a)
    print(f"A2A stream: {rows_a2a[-1][0]} responses per turn, median {a2 * 1000:.0f} ms: "
          f"{(a2 / nat - 1) * 100:+.1f}% wall time over the native SSE")
    out, secs = adapter_alone(recorded)
    print(f"adapter alone (translate + encode a recorded turn): {out} events in "
          f"{secs * 1000:.1f} ms ({out / secs:,.0f} events/s)")
    for calls in (100, 400, 800):
        out, secs = await a2a_alone(calls)
        print(f"A2A adapter alone, a turn of {calls} tool calls: {out} updates in "
              f"{secs * 1000:.0f} ms ({secs / out * 1e6:,.0f} µs per update)")
    print(f"load average after: {Path('/proc/loadavg').read_text().split()[:3]}")


if __name__ == "__main__":
    asyncio.run(main())
