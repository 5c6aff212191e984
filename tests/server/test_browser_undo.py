"""The page's undo in a real browser: each turn that changed files shows them with an Undo
button; Undo puts them back, Redo re-applies, a conflict is shown with its files and can be
overridden, the row survives a reload, and "Stop & undo" aborts and restores."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from steerable import Reply
from steerable.coding import Sandbox, SnapshotHook, Snapshots, coding_tools
from tests.server.conftest import serving
from tests.server.test_browser import browser, open_page, send

__all__ = ["browser"]  # the fixture, used by name


def _setup(tmp_path: Path) -> tuple[Path, SnapshotHook, list[Any]]:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("original\n")
    hook = SnapshotHook(Snapshots(ws, tmp_path / "data"))
    return ws, hook, coding_tools(ws, sandbox=Sandbox(enabled=False))


async def test_undo_redo_and_a_conflict_from_the_page(tmp_path: Path, browser: Any) -> None:
    ws, hook, tools = _setup(tmp_path)
    script = [Reply(tool_calls=[("bash", {"command": "echo agent > a.txt && mkdir out"})]),
              Reply(text="Changed a.txt.")]
    async with serving(tmp_path, script, tools, undo=hook) as s:
        page = await open_page(browser, s.url)
        await send(page, "change a.txt")
        row = page.locator(".turn .changes")
        await row.locator("button >> text=Undo").wait_for()
        assert "changed 2 path(s): a.txt, out" in await row.inner_text()
        await row.locator("button >> text=Undo").click()
        await row.locator("button >> text=Redo").wait_for()
        assert "undone" in await row.inner_text()
        assert (ws / "a.txt").read_text() == "original\n" and not (ws / "out").exists()
        await row.locator("button >> text=Redo").click()
        await row.locator("button >> text=Undo").wait_for()
        assert (ws / "a.txt").read_text() == "agent\n" and (ws / "out").is_dir()
        # The row is there again after a reload (the turn comes from the saved history).
        await page.reload()
        row = page.locator(".turn .changes")
        await row.locator("button >> text=Undo").wait_for()
        (ws / "a.txt").write_text("edited by the user\n")
        await row.locator("button >> text=Undo").click()
        conflict = row.locator(".changes-conflict")
        await conflict.wait_for()
        assert "a.txt" in await conflict.inner_text()
        assert (ws / "a.txt").read_text() == "edited by the user\n"
        await conflict.locator("button >> text=Undo anyway").click()
        await row.locator("button >> text=Redo").wait_for()
        assert (ws / "a.txt").read_text() == "original\n"
        assert page.errors == []


async def test_stop_and_undo_restores_the_aborted_turns_files(tmp_path: Path,
                                                              browser: Any) -> None:
    ws, hook, tools = _setup(tmp_path)
    script = [Reply(tool_calls=[("bash", {"command": "echo agent > a.txt; touch started; "
                                                     "sleep 30"})]),
              Reply(text="never")]
    async with serving(tmp_path, script, tools, undo=hook) as s:
        page = await open_page(browser, s.url)
        await send(page, "work")
        await page.wait_for_selector(".card .badge >> text=running")
        for _ in range(250):
            if (ws / "started").exists():
                break
            await asyncio.sleep(0.02)
        await page.click("#stop-undo")
        await page.wait_for_selector(".turn-end >> text=aborted")
        for _ in range(250):
            if hook.restored:
                break
            await asyncio.sleep(0.02)
        assert (ws / "a.txt").read_text() == "original\n" and not (ws / "started").exists()
        assert page.errors == []
