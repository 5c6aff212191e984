"""MCP tools against a real MCP server (the SDK's own), over stdio and streamable HTTP."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed")

from steerable import (
    Agent,
    AgentLoop,
    EventKind,
    HumanApprover,
    ImagePart,
    Reply,
    ScriptedProvider,
    TextPart,
)
from steerable.errors import ConfigurationError
from steerable.integrations.mcp import (
    MCPServer,
    mcp_tool_name,
    open_servers,
    servers_from_config,
)

from .conftest import SERVER


def stdio(timeout: float | None = None) -> MCPServer:
    return MCPServer("t", command=sys.executable, args=[str(SERVER), "stdio"], timeout=timeout)


async def _run(server: MCPServer, script: list[Any], **loop_kw: Any) -> tuple[AgentLoop, Any, list[Any]]:
    tools = await server.tools()
    agent = Agent(name="a", provider=ScriptedProvider(script), tools=tools)
    loop = AgentLoop(agent, **loop_kw)
    sub = loop.subscribe(buffer=10_000)
    result = await loop.run_turn("go", session_id="s1")
    sub.close()
    events = [e async for e in sub]
    return loop, result, events


def _ends(events: list[Any]) -> list[tuple[str, bool, str]]:
    return [(e.tool_name, e.is_error, e.content) for e in events if e.kind is EventKind.TOOL_EXEC_END]


async def test_stdio_tools_are_offered_named_and_hinted(marks: Path) -> None:
    async with stdio() as server:
        tools = {t.name: t for t in await server.tools()}
        assert {"mcp__t__echo", "mcp__t__add", "mcp__t__count"} <= set(tools)
        assert tools["mcp__t__echo"].read_only and not tools["mcp__t__add"].read_only
        assert tools["mcp__t__add"].parameters["properties"].keys() == {"a", "b"}
        loop, result, events = await _run(server, [
            Reply(tool_calls=[("mcp__t__echo", {"text": "hi"}), ("mcp__t__add", {"a": 2, "b": 3})]),
            Reply(text="done"),
        ])
        assert _ends(events) == [("mcp__t__echo", False, "echo: hi"), ("mcp__t__add", False, "5")]
        assert result.text == "done"
        await loop.aclose()


async def test_read_only_hint_decides_who_is_asked(marks: Path) -> None:
    async with stdio() as server:
        tools = await server.tools()
        agent = Agent(name="a", tools=tools, provider=ScriptedProvider([
            Reply(tool_calls=[("mcp__t__echo", {"text": "x"}), ("mcp__t__add", {"a": 1, "b": 1})]),
            Reply(text="ok")]))
        loop = AgentLoop(agent)
        loop.register_hook(HumanApprover())
        sub = loop.subscribe(buffer=1000)
        handle = loop.start_turn("go", session_id="s1")
        asked = []
        async for event in sub:
            if event.kind is EventKind.APPROVAL_REQUESTED:
                asked.append(event.tool_name)
                loop.resolve_approval(event.request_id, False, "no adding")
            if event.kind is EventKind.TURN_END:
                break
        await handle
        assert asked == ["mcp__t__add"]  # echo is read-only: nobody is asked
        await loop.aclose()


async def test_permission_rules_apply_by_mcp_name(marks: Path) -> None:
    async with stdio() as server:
        loop, _, events = await _run(server, [
            Reply(tool_calls=[("mcp__t__add", {"a": 1, "b": 1}), ("mcp__t__echo", {"text": "y"})]),
            Reply(text="ok")], permissions=[("deny", "mcp__t__add"), ("deny", "mcp__other__*")])
        skipped = [(e.tool_name, e.reason) for e in events if e.kind is EventKind.TOOL_EXEC_SKIPPED]
        assert skipped == [("mcp__t__add", "denied")]
        assert _ends(events) == [("mcp__t__echo", False, "echo: y")]
        await loop.aclose()


async def test_progress_notifications_become_progress_events(marks: Path) -> None:
    async with stdio() as server:
        loop, _, events = await _run(server, [Reply(tool_calls=[("mcp__t__count", {"n": 3})]),
                                              Reply(text="ok")])
        progress = [e for e in events if e.kind is EventKind.TOOL_EXEC_PROGRESS]
        assert [p.text for p in progress] == ["step 1 of 3", "step 2 of 3", "step 3 of 3"]
        assert progress[-1].data == {"progress": 3.0, "total": 3.0}
        await loop.aclose()


async def _wait_file(path: Path, tag: str, timeout: float = 10.0) -> str:
    """The file's text once it holds ``tag`` (the server writes it from another process)."""
    deadline = time.monotonic() + timeout
    while not (path.exists() and tag in path.read_text()):
        assert time.monotonic() < deadline, f"{path.name} never got {tag!r}"
        await asyncio.sleep(0.02)
    return path.read_text()


async def test_hard_abort_cancels_the_call_on_the_server(marks: Path) -> None:
    async with stdio() as server:
        tools = await server.tools()
        agent = Agent(name="a", tools=tools, provider=ScriptedProvider([
            Reply(tool_calls=[("mcp__t__wait_forever", {"tag": "abort-me"})])]))
        loop = AgentLoop(agent, permissions=[("allow", "mcp__t__*")])
        handle = loop.start_turn("go", session_id="s1")
        assert "abort-me" in await _wait_file(marks / "started", "abort-me")
        t0 = time.monotonic()
        assert loop.interrupt_hard("s1")
        result = await handle
        assert time.monotonic() - t0 < 1.0
        assert result.status.value == "aborted"
        assert "abort-me" in await _wait_file(marks / "cancelled", "abort-me")
        await loop.aclose()


async def test_tool_timeout_cancels_on_the_server_and_the_turn_goes_on(marks: Path) -> None:
    async with stdio(timeout=0.5) as server:
        loop, result, events = await _run(server, [
            Reply(tool_calls=[("mcp__t__wait_forever", {"tag": "slow"})]),
            Reply(tool_calls=[("mcp__t__echo", {"text": "still here"})]),
            Reply(text="ok")])
        ends = _ends(events)
        assert ends[0][:2] == ("mcp__t__wait_forever", True) and "timed out" in ends[0][2]
        assert ends[1] == ("mcp__t__echo", False, "echo: still here")  # suspect, pinged, fine
        assert "slow" in await _wait_file(marks / "cancelled", "slow")
        assert result.text == "ok" and server.starts == 1
        await loop.aclose()


async def test_a_dead_server_gives_errors_then_restarts_next_turn(marks: Path) -> None:
    async with stdio() as server:
        tools = await server.tools()
        provider = ScriptedProvider([
            Reply(tool_calls=[("mcp__t__pid", {})]),
            Reply(tool_calls=[("mcp__t__crash", {})]),
            Reply(tool_calls=[("mcp__t__echo", {"text": "same turn"})]),
            Reply(text="it broke"),
            Reply(tool_calls=[("mcp__t__pid", {})]),
            Reply(text="back"),
        ])
        loop = AgentLoop(Agent(name="a", tools=tools, provider=provider),
                         permissions=[("allow", "mcp__t__*")])
        sub = loop.subscribe(buffer=10_000)
        first = await loop.run_turn("one", session_id="s1")
        second = await loop.run_turn("two", session_id="s1")
        sub.close()
        ends = _ends([e async for e in sub])
        assert first.text == "it broke" and second.text == "back"
        assert ends[1][:2] == ("mcp__t__crash", True) and "restarted on the next turn" in ends[1][2]
        assert ends[2][:2] == ("mcp__t__echo", True) and "earlier in this turn" in ends[2][2]
        assert ends[3][1] is False and ends[3][2] != ends[0][2]  # a new process
        assert server.starts == 2
        assert len((marks / "starts").read_text().split()) == 2
        await loop.aclose()


async def test_a_hung_server_never_hangs_the_turn(marks: Path) -> None:
    async with stdio(timeout=2.0) as server:
        tools = await server.tools()
        provider = ScriptedProvider([
            Reply(tool_calls=[("mcp__t__freeze", {})]),
            Reply(tool_calls=[("mcp__t__echo", {"text": "anyone?"})]),
            Reply(text="frozen"),
            Reply(tool_calls=[("mcp__t__echo", {"text": "again"})]),
            Reply(text="thawed"),
        ])
        loop = AgentLoop(Agent(name="a", tools=tools, provider=provider),
                         permissions=[("allow", "mcp__t__*")])
        sub = loop.subscribe(buffer=10_000)
        first = await asyncio.wait_for(loop.run_turn("one", session_id="s1"), 15)
        second = await asyncio.wait_for(loop.run_turn("two", session_id="s1"), 15)
        sub.close()
        ends = _ends([e async for e in sub])
        assert ends[0][:2] == ("mcp__t__freeze", True) and "timed out" in ends[0][2]
        assert ends[1][:2] == ("mcp__t__echo", True) and "ping" in ends[1][2]
        assert ends[2] == ("mcp__t__echo", False, "echo: again")
        assert (first.text, second.text, server.starts) == ("frozen", "thawed", 2)
        await loop.aclose()


async def test_streamable_http_tools_progress_and_cancel(http_server: str, marks: Path) -> None:
    server = MCPServer("web", url=http_server, headers={"X-Test": "1"})
    async with server:
        tools = {t.name: t for t in await server.tools()}
        assert tools["mcp__web__echo"].read_only
        loop, result, events = await _run(server, [
            Reply(tool_calls=[("mcp__web__echo", {"text": "over http"}),
                              ("mcp__web__count", {"n": 2})]),
            Reply(text="ok")])
        assert _ends(events)[0] == ("mcp__web__echo", False, "echo: over http")
        loop2, _, header_events = await _run(server, [
            Reply(tool_calls=[("mcp__web__header", {"name": "x-test"})]), Reply(text="ok")])
        assert _ends(header_events) == [("mcp__web__header", False, "1")]  # our headers reach it
        await loop2.aclose()
        assert [e.text for e in events if e.kind is EventKind.TOOL_EXEC_PROGRESS] == \
            ["step 1 of 2", "step 2 of 2"]
        await loop.aclose()
        agent = Agent(name="a", tools=list(tools.values()), provider=ScriptedProvider([
            Reply(tool_calls=[("mcp__web__wait_forever", {"tag": "http-abort"})])]))
        loop = AgentLoop(agent, permissions=[("allow", "mcp__web__*")])
        handle = loop.start_turn("go", session_id="s2")
        assert "http-abort" in await _wait_file(marks / "started", "http-abort")
        loop.interrupt_hard("s2")
        assert (await handle).status.value == "aborted"
        assert "http-abort" in await _wait_file(marks / "cancelled", "http-abort")
        await loop.aclose()


async def test_open_servers_leaves_out_a_broken_one(marks: Path) -> None:
    broken = MCPServer("gone", command=sys.executable, args=["-c", "import sys; sys.exit(1)"],
                       connect_timeout=10)
    async with open_servers([stdio(), broken]) as opened:
        names = {t.name for t in opened.tools}
        assert "mcp__t__echo" in names and not any(n.startswith("mcp__gone__") for n in names)
        assert "could not be started" in opened.failures["gone"]


def test_config_tables_and_their_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOKEN_FOR_TEST", "s3cret")
    servers = servers_from_config({
        "fs": {"command": "python", "args": ["-m", "x"], "env": {"A": "1"}, "timeout": 5},
        "web": {"url": "http://127.0.0.1:1/mcp", "headers": {"Authorization": "Bearer ${TOKEN_FOR_TEST}"}},
    })
    assert [(s.name, s.transport) for s in servers] == [("fs", "stdio"), ("web", "http")]
    assert servers[0].timeout == 5.0 and servers[1].headers["Authorization"] == "Bearer s3cret"
    with pytest.raises(ConfigurationError, match="exactly one of command"):
        servers_from_config({"x": {"command": "a", "url": "http://b"}})
    with pytest.raises(ConfigurationError, match=r"unknown key\(s\) \['comand'\]"):
        servers_from_config({"x": {"comand": "a"}})
    with pytest.raises(ConfigurationError, match=r"\$\{NOPE_NOT_SET\}"):
        servers_from_config({"x": {"url": "http://b", "headers": {"A": "${NOPE_NOT_SET}"}}})
    with pytest.raises(ConfigurationError, match="args must be a list"):
        servers_from_config({"x": {"command": "a", "args": "b c"}})
    with pytest.raises(ConfigurationError, match="part of tool names"):
        servers_from_config({"my.server": {"command": "a"}})
    assert mcp_tool_name("fs", "files/read.v2") == "mcp__fs__files_read_v2"
    assert len(mcp_tool_name("fs", "x" * 100)) == 64


async def test_an_image_reaches_the_model_as_a_part(marks: Path) -> None:
    async with stdio() as server:
        provider = ScriptedProvider([Reply(tool_calls=[("mcp__t__picture", {})]),
                                     Reply(text="ok")])
        loop = AgentLoop(Agent(provider=provider, tools=await server.tools()))
        sub = loop.subscribe(buffer=1000)
        await loop.run_turn("go", session_id="s1")
        ((name, is_error, content),) = _ends(sub.drain_nowait())
        assert not is_error  # the event shows the image's placeholder
        assert content.splitlines() == ["a red dot", "[image: image/png, 12 B]"]
        result = provider.requests[1].messages[-1]
        assert result.role == "tool" and result.parts == (
            TextPart("a red dot"), ImagePart(data=b"\x89PNG\r\n\x1a\n0000", media_type="image/png"))
        await loop.aclose()


async def test_open_servers_strict_raises() -> None:
    broken = MCPServer("gone", command=sys.executable, args=["-c", "import sys; sys.exit(1)"])
    with pytest.raises(Exception, match="could not be started"):
        async with open_servers([broken], strict=True):
            pass


async def test_an_http_server_that_goes_away_gives_errors_then_comes_back(marks: Path) -> None:
    import os
    import subprocess

    from tests._components import free_port

    port = free_port()

    def start() -> subprocess.Popen[bytes]:
        proc = subprocess.Popen([sys.executable, str(SERVER), "http", str(port)],
                                env={**os.environ, "MCP_TEST_MARKS": str(marks)},
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                return proc
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.05)

    import socket

    proc = start()
    server = MCPServer("web", url=f"http://127.0.0.1:{port}/mcp", timeout=5)
    try:
        tools = await server.tools()
        provider = ScriptedProvider([
            Reply(tool_calls=[("mcp__web__echo", {"text": "one"})]), Reply(text="first"),
            Reply(tool_calls=[("mcp__web__echo", {"text": "two"})]), Reply(text="second"),
            Reply(tool_calls=[("mcp__web__echo", {"text": "three"})]), Reply(text="third"),
        ])
        loop = AgentLoop(Agent(name="a", tools=tools, provider=provider))
        sub = loop.subscribe(buffer=10_000)
        await loop.run_turn("1", session_id="s1")
        proc.kill()
        proc.wait()
        await asyncio.wait_for(loop.run_turn("2", session_id="s1"), 20)  # an error, not a hang
        proc = start()
        await loop.run_turn("3", session_id="s1")
        sub.close()
        ends = _ends([e async for e in sub])
        assert ends[0] == ("mcp__web__echo", False, "echo: one")
        assert ends[1][:2] == ("mcp__web__echo", True) and "timed out" not in ends[1][2]
        assert "restarted on the next turn" in ends[1][2]
        assert ends[2] == ("mcp__web__echo", False, "echo: three")
        await loop.aclose()
    finally:
        await server.aclose()
        proc.kill()
        proc.wait()
