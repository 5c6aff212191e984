"""The server's undo endpoints through a real server on loopback, with the real coding tools:
list a session's changes, undo a turn, redo, a refused conflict, and a hard abort that puts the
aborted turn's files back."""

from __future__ import annotations

import asyncio
from pathlib import Path

from steerable import Reply
from steerable.coding import Sandbox, SnapshotHook, Snapshots, coding_tools
from tests.server.conftest import serving
from tests.server.test_api import wait_kind


def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("original\n")
    return ws


def bash(command: str) -> list[Reply]:
    return [Reply(tool_calls=[("bash", {"command": command})]), Reply(text="done")]


async def test_changes_undo_redo_and_a_refused_conflict(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    hook = SnapshotHook(Snapshots(ws, tmp_path / "data"))
    tools = coding_tools(ws, sandbox=Sandbox(enabled=False))
    async with serving(tmp_path, bash("echo agent > a.txt && touch new.txt"), tools,
                       undo=hook) as s:
        r = await s.client.post("/v1/sessions/s1/messages", json={"text": "change"})
        turn = r.json()["turn_id"]
        await wait_kind(s, "s1", "turn_end")
        changes = (await s.client.get("/v1/sessions/s1/changes")).json()
        assert changes == {"steps": [{"turn_id": turn, "files": ["a.txt", "new.txt"],
                                      "time": changes["steps"][0]["time"], "undone": False,
                                      "message_index": 0}], "redo_turns": []}
        r = await s.client.post("/v1/sessions/s1/undo", json={"turn_id": turn})
        assert r.status_code == 200, r.text
        assert r.json() == {"turns": [turn], "paths": ["a.txt", "new.txt"], "forced_over": []}
        assert (ws / "a.txt").read_text() == "original\n" and not (ws / "new.txt").exists()
        changes = (await s.client.get("/v1/sessions/s1/changes")).json()
        assert changes["steps"][0]["undone"] and changes["redo_turns"] == [turn]
        assert (await s.client.post("/v1/sessions/s1/redo", json={})).status_code == 200
        assert (ws / "a.txt").read_text() == "agent\n"
        (ws / "a.txt").write_text("the user's\n")
        r = await s.client.post("/v1/sessions/s1/undo", json={})
        assert r.status_code == 409 and r.json()["conflicts"] == ["a.txt"]
        assert "a.txt" in r.json()["error"]
        r = await s.client.post("/v1/sessions/s1/undo", json={"force": True})
        assert r.status_code == 200 and r.json()["forced_over"] == ["a.txt"]
        assert (ws / "a.txt").read_text() == "original\n"
        # Bad requests change nothing.
        r = await s.client.post("/v1/sessions/s1/undo", json={"n": 0})
        assert r.status_code == 400
        r = await s.client.post("/v1/sessions/s1/undo", json={"n": 1, "turn_id": turn})
        assert r.status_code == 400
        r = await s.client.post("/v1/sessions/s1/undo", json={"force": "yes"})
        assert r.status_code == 400
        r = await s.client.post("/v1/sessions/other/undo", json={})
        assert r.status_code == 404 and "no change left" in r.json()["error"]


async def test_busy_sessions_are_refused_and_a_hard_abort_restores_files(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    hook = SnapshotHook(Snapshots(ws, tmp_path / "data"))
    tools = coding_tools(ws, sandbox=Sandbox(enabled=False))
    script = bash("echo agent > a.txt; touch started; sleep 30")
    async with serving(tmp_path, script, tools, undo=hook) as s:
        r = await s.client.post("/v1/sessions/s1/messages", json={"text": "work"})
        turn = r.json()["turn_id"]
        for _ in range(250):
            if (ws / "started").exists():
                break
            await asyncio.sleep(0.02)
        r = await s.client.post("/v1/sessions/s1/undo", json={})
        assert r.status_code == 409 and "busy" in r.json()["error"]
        r = await s.client.post("/v1/sessions/s1/interrupt",
                                json={"mode": "graceful", "restore_files": True})
        assert r.status_code == 400
        r = await s.client.post("/v1/sessions/s1/interrupt",
                                json={"mode": "hard", "restore_files": True})
        assert r.json() == {"ok": True}
        await wait_kind(s, "s1", "turn_end")
        for _ in range(250):
            if turn in hook.restored:
                break
            await asyncio.sleep(0.02)
        assert (ws / "a.txt").read_text() == "original\n" and not (ws / "started").exists()


async def test_a_server_without_undo_says_so(tmp_path: Path) -> None:
    async with serving(tmp_path, [Reply(text="hi")]) as s:
        r = await s.client.get("/v1/sessions/s1/changes")
        assert r.status_code == 404 and "undo is off" in r.json()["error"]
        r = await s.client.post("/v1/sessions/s1/interrupt",
                                json={"mode": "hard", "restore_files": True})
        assert r.status_code == 400
