"""An MCP server reached over streamable HTTP that dies in the middle of a call fails that call
at once, as a stdio server does, instead of leaving it to its deadline."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed")

from steerable import Agent, AgentLoop, EventKind, Reply, ScriptedProvider
from steerable.integrations.mcp import MCPServer
from tests._components import free_port

from .conftest import SERVER


@pytest.fixture
def served(marks: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(SERVER), "http", str(port)],
                            env={**os.environ, "MCP_TEST_MARKS": str(marks)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    try:
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "no server"
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp", proc
    finally:
        proc.kill()
        proc.wait()


async def _started(marks: Path, tag: str) -> None:
    deadline = time.monotonic() + 20
    while not ((marks / "started").exists() and tag in (marks / "started").read_text()):
        assert time.monotonic() < deadline, "the call never started on the server"
        await asyncio.sleep(0.02)


@pytest.mark.parametrize("how", ["kill -9", "crash"])
async def test_an_http_server_dying_mid_call_fails_the_call_at_once(
        served: tuple[str, subprocess.Popen[bytes]], marks: Path, how: str) -> None:
    url, proc = served
    server = MCPServer("web", url=url, timeout=30)
    try:
        tools = await server.tools()
        call = (("mcp__web__wait_forever", {"tag": "k"}) if how == "kill -9"
                else ("mcp__web__crash", {}))
        loop = AgentLoop(Agent(name="a", tools=tools, provider=ScriptedProvider([
            Reply(tool_calls=[call]), Reply(text="after")])))
        sub = loop.subscribe(buffer=10_000)
        handle = loop.start_turn("go", session_id="s")
        if how == "kill -9":
            await _started(marks, "k")
            proc.kill()
        died = time.monotonic()
        await asyncio.wait_for(handle, 25)
        took = time.monotonic() - died
        ends = [e for e in sub.drain_nowait() if e.kind is EventKind.TOOL_EXEC_END]
        await loop.aclose()
    finally:
        await server.aclose()
    assert [(e.tool_name, e.is_error) for e in ends] == [(call[0], True)]
    assert "timed out" not in ends[0].content and "restarted on the next turn" in ends[0].content
    assert took < 3.0, f"the call waited {took:.1f} s for a dead server"
