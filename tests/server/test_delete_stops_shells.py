"""Deleting a session through the server stops its background commands (they end with it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from steerable import Agent, AgentLoop, Reply, ScriptedProvider
from steerable.coding import BackgroundShells, Sandbox, Workspace, coding_tools
from steerable.server import LocalRunner
from steerable.storage import JSONLSessionStore


async def test_deleting_a_session_stops_its_background_commands(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    shells = BackgroundShells()
    tools = coding_tools(Workspace(ws), shells=shells, sandbox=Sandbox(enabled=False))
    provider = ScriptedProvider([
        Reply(tool_calls=[("bash", {"command": "sleep 30", "background": True})]),
        Reply(text="Started."), Reply(text="Other.")])
    loop = AgentLoop(Agent(name="a", instructions="", provider=provider, tools=tools),
                     store=JSONLSessionStore(tmp_path / "sessions"))
    runner = LocalRunner(loop, on_delete=shells.stop_session)
    await runner.start()
    try:
        await loop.run_turn("start it", session_id="doomed")
        await loop.run_turn("hello", session_id="kept")
        assert [s.session_id for s in shells.running()] == ["doomed"]
        with pytest.raises(LookupError):
            await runner.delete_session("nobody")
        await runner.delete_session("doomed")
        assert shells.running() == []
    finally:
        await shells.aclose()
        await runner.aclose()
