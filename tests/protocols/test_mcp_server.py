"""steerable as an MCP server, driven by the official ``mcp`` client: ``steerable mcp serve``
over stdio and ``/mcp`` on ``steerable serve``, both real processes with the scripted provider.
A turn with a tool (progress from its events), an approval, a steer, a cancel, the status."""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed")

from mcp import Client, StdioServerParameters

from tests.protocols._serving import agent_args, env, served  # noqa: F401 (fixture)

TOOLS = {"run", "steer", "cancel", "approve", "status"}


@asynccontextmanager
async def stdio_agent(tmp_path: Path, script: list[dict[str, Any]]) -> AsyncIterator[Client]:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "steerable", "mcp", "serve",
                                      *agent_args(tmp_path, script)], env=env(tmp_path))
    async with Client(params) as client:
        yield client


class Progress:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.changed = asyncio.Event()

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.lines.append(message or "")
        self.changed.set()

    async def wait_for(self, pattern: str) -> re.Match[str]:
        while True:
            for line in self.lines:
                found = re.search(pattern, line)
                if found:
                    return found
            self.changed.clear()
            await asyncio.wait_for(self.changed.wait(), 15)


def _data(result: Any) -> Any:
    assert not result.is_error, result
    return result.structured_content


async def _a_turn_with_a_tool(client: Client) -> None:
    assert {t.name for t in (await client.list_tools()).tools} >= TOOLS
    progress = Progress()
    result = await client.call_tool("run", {"prompt": "read it", "session_id": "m1"},
                                    progress_callback=progress)
    assert result.content[0].text == "it says hello"
    assert _data(result) == {"session_id": "m1", "turn_id": _data(result)["turn_id"],
                             "status": "completed", "text": "it says hello"}
    assert any(line.startswith("tool read ") for line in progress.lines), progress.lines
    assert any("tool read done: " in line and "hello from disk" in line
               for line in progress.lines), progress.lines
    status = _data(await client.call_tool("status", {"session_id": "m1"}))
    assert status["busy"] is False and status["last_answer"] == "it says hello"
    assert status["messages"] == 4  # the prompt, the call, its result, the answer


async def _approve_and_steer(client: Client, ws: Path) -> None:
    progress = Progress()
    run = asyncio.ensure_future(client.call_tool(
        "run", {"prompt": "write it", "session_id": "m2"}, progress_callback=progress))
    asked = await progress.wait_for(r"approval needed: tool write .*request_id (\S+)")
    assert _data(await client.call_tool("status", {"session_id": "m2"}))["busy"] is True
    again = await client.call_tool("run", {"prompt": "more", "session_id": "m2"})
    assert again.is_error and "busy" in again.content[0].text  # steer a session at work
    steered = await client.call_tool("steer", {"session_id": "m2", "text": "and be brief"})
    assert _data(steered)["ok"] is True and _data(steered)["state"] == "queued"
    assert _data(steered)["message_id"].startswith("msg_")
    approved = await client.call_tool("approve", {"request_id": asked.group(1),
                                                  "approved": True})
    assert _data(approved) == {"ok": True}
    result = await asyncio.wait_for(run, 20)
    assert _data(result)["status"] == "completed" and result.content[0].text == "written"
    assert (ws / "b.txt").read_text() == "new"
    assert "steered: and be brief" in progress.lines


async def _cancel(client: Client) -> None:
    progress = Progress()
    run = asyncio.ensure_future(client.call_tool(
        "run", {"prompt": "write it", "session_id": "m3"}, progress_callback=progress))
    await progress.wait_for(r"approval needed")
    # immediate: an after_model cancel would wait for the approval, which nobody gives here
    cancelled = await client.call_tool("cancel", {"session_id": "m3", "mode": "immediate"})
    assert _data(cancelled) == {"ok": True}
    result = await asyncio.wait_for(run, 20)
    assert _data(result)["status"] == "aborted", result
    assert result.content[0].text == "the turn ended aborted"
    steer_after = await client.call_tool("steer", {"session_id": "m3", "text": "late"})
    assert _data(steer_after)["ok"] is False  # nothing runs any more
    assert _data(steer_after)["state"] == "rejected"


READ = [{"tool_calls": [["read", {"path": "a.txt"}]]}, {"text": "it says hello"}]
WRITE = [{"tool_calls": [["write", {"path": "b.txt", "content": "new"}]]}, {"text": "written"}]
CANCELLED = [{"tool_calls": [["write", {"path": "c.txt", "content": "never"}]]}]


async def test_stdio_a_turn_with_a_tool(tmp_path: Path) -> None:
    async with stdio_agent(tmp_path, READ) as client:
        await _a_turn_with_a_tool(client)


async def test_stdio_an_approval_and_a_steer(tmp_path: Path) -> None:
    async with stdio_agent(tmp_path, WRITE) as client:
        await _approve_and_steer(client, tmp_path / "ws")


async def test_stdio_a_cancel(tmp_path: Path) -> None:
    async with stdio_agent(tmp_path, CANCELLED) as client:
        await _cancel(client)
    assert not (tmp_path / "ws" / "c.txt").exists()


async def test_stdio_a_bad_call_is_an_error_result(tmp_path: Path) -> None:
    async with stdio_agent(tmp_path, []) as client:
        result = await client.call_tool("status", {"session_id": "nowhere"})
        assert result.is_error and "no session 'nowhere'" in result.content[0].text
        result = await client.call_tool("cancel", {"session_id": "x", "mode": "sideways"})
        assert result.is_error


async def test_http_on_steerable_serve(tmp_path: Path, served: Any) -> None:  # noqa: F811
    url = served(READ + WRITE + CANCELLED)
    async with Client(url + "/mcp") as client:
        assert client.protocol_version == "2026-07-28"
        await _a_turn_with_a_tool(client)
        await _approve_and_steer(client, tmp_path / "ws")
        await _cancel(client)


async def test_http_is_behind_the_servers_guard(tmp_path: Path, served: Any) -> None:  # noqa: F811
    import httpx

    url = served([])
    answer = httpx.post(url + "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                        headers={"Host": "evil.example"})
    assert answer.status_code in (400, 403, 421)  # the server's guard, before the SDK


async def _busy(client: Client, sid: str) -> bool:
    status = await client.call_tool("status", {"session_id": sid})
    return not status.is_error and bool(_data(status)["busy"])  # error: no session (yet)


async def test_stdio_cancelling_the_run_request_stops_its_turn(tmp_path: Path) -> None:
    async with stdio_agent(tmp_path, [{"text": "too late", "delay": 30}]) as client:
        run = asyncio.ensure_future(client.call_tool("run", {"prompt": "go",
                                                             "session_id": "m4"}))
        while not await _busy(client, "m4"):
            await asyncio.sleep(0.05)
        run.cancel()  # the client abandons the request: the SDK sends notifications/cancelled
        with pytest.raises(asyncio.CancelledError):
            await run
        for _ in range(200):  # well before the model's 30 s answer
            if not await _busy(client, "m4"):
                break
            await asyncio.sleep(0.05)
        assert not await _busy(client, "m4")
        # The aborted first turn left nothing: the session is not saved.
        gone = await client.call_tool("status", {"session_id": "m4"})
        assert gone.is_error and "no session 'm4'" in gone.content[0].text
