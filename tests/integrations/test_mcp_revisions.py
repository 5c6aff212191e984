"""The MCP client negotiates the revision: 2026-07-28 where the server has it, the 2025
handshake otherwise; a 2026 server that keeps answering ``input_required`` is given up after a
bounded number of rounds; an old or missing SDK is refused in one line."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed")

from steerable import Agent, AgentLoop, EventKind, Reply, ScriptedProvider
from steerable.integrations.mcp import MCPServer
from steerable.integrations.mcp import _sdk as sdk

from .conftest import SERVER

RAW = Path(__file__).with_name("raw_mcp_server.py")


async def _turn(server: MCPServer, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    tools = await server.tools()
    loop = AgentLoop(Agent(name="a", tools=tools, provider=ScriptedProvider(
        [Reply(tool_calls=calls), Reply(text="done")])), permissions=[("allow", "mcp__*")])
    sub = loop.subscribe(buffer=1000)
    await loop.run_turn("go", session_id="s1")
    sub.close()
    await loop.aclose()
    return [(e.tool_name, e.is_error, e.content) async for e in sub
            if e.kind is EventKind.TOOL_EXEC_END]


async def test_a_2025_server_is_reached_through_the_initialize_handshake() -> None:
    async with MCPServer("old", command=sys.executable, args=[str(RAW), "2025"]) as server:
        assert server.protocol_version == "2025-06-18"
        ends = await _turn(server, [("mcp__old__echo", {"text": "hi"})])
    assert ends == [("mcp__old__echo", False, "2025 echo: hi")]


async def test_a_2026_only_server_is_reached_through_discover() -> None:
    async with MCPServer("new", command=sys.executable, args=[str(RAW), "2026"]) as server:
        assert server.protocol_version == "2026-07-28"
        ends = await _turn(server, [("mcp__new__echo", {"text": "hi"})])
    assert ends == [("mcp__new__echo", False, "2026 echo: hi")]


async def test_the_sdks_own_server_speaks_the_current_revision(marks: Path) -> None:
    async with MCPServer("t", command=sys.executable, args=[str(SERVER), "stdio"]) as server:
        await server.tools()
        assert server.protocol_version == "2026-07-28"


async def test_a_server_that_keeps_asking_is_given_up_after_max_rounds() -> None:
    from steerable.integrations.mcp._input import MAX_ROUNDS

    async with MCPServer("new", command=sys.executable, args=[str(RAW), "2026"]) as server:
        loop = AgentLoop(Agent(name="a", tools=await server.tools(), provider=ScriptedProvider(
            [Reply(tool_calls=[("mcp__new__ask", {})]), Reply(text="done")])),
            permissions=[("allow", "mcp__*")])
        sub = loop.subscribe(buffer=1000)
        asked = 0

        async def answer() -> None:  # each round's question, every time
            nonlocal asked
            async for event in loop.subscribe(buffer=1000):
                if event.kind is EventKind.QUESTION_ASKED:
                    asked += 1
                    loop.answer(event.request_id, "accept")
                elif event.kind is EventKind.TURN_END:
                    return

        answering = asyncio.ensure_future(answer())
        await asyncio.sleep(0)
        await loop.run_turn("go", session_id="s1")
        await answering
        await loop.aclose()
    [end] = [e for e in sub.drain_nowait() if e.kind is EventKind.TOOL_EXEC_END]
    assert end.is_error and f"still asked for input after {MAX_ROUNDS} rounds" in end.content
    assert asked == MAX_ROUNDS  # one question per round; the last answer is not asked for


@pytest.mark.parametrize(("installed", "says"), [
    (None, "needs the official MCP SDK 2.x"),
    ("1.26.0", "but mcp 1.26 is installed"),
    ("2.1.0", "but mcp 2.1 is installed"),
    ("3.0.0", "but mcp 3.0 is installed"),
])
def test_a_missing_or_mismatched_sdk_is_one_line(monkeypatch: pytest.MonkeyPatch,
                                                 installed: str | None, says: str) -> None:
    def version(name: str) -> str:
        if installed is None:
            raise sdk.metadata.PackageNotFoundError(name)
        return installed

    monkeypatch.setattr(sdk.metadata, "version", version)
    with pytest.raises(ImportError) as caught:
        sdk.check_sdk()
    message = str(caught.value)
    assert says in message and "\n" not in message and "pip install" in message


def test_the_installed_sdk_is_accepted() -> None:
    sdk.check_sdk()
