"""The page's "Waiting for you" list and question cards, in Chromium: parked approvals and
questions of any session answered from the sidebar (a refused answer said, the request kept),
a live question answered on its card."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from playwright.async_api import expect

from steerable import Reply, ToolContext, tool
from tests.server.conftest import gate_tools, serving
from tests.server.test_browser import open_page, send


@tool(read_only=True)
async def pick(ctx: ToolContext) -> str:
    """Ask for a size."""
    return "size " + await ctx.ask("Which size?", choices=["S", "M", "L"])


@tool(read_only=True)
async def count(ctx: ToolContext) -> str:
    """Ask for a number."""
    return f"n={await ctx.ask('How many?', schema={'type': 'integer', 'minimum': 1})}"


async def _park(s: Any, sid: str, text: str) -> None:
    r = await s.client.post(f"/v1/sessions/{sid}/messages", json={"text": text})
    assert r.status_code == 202
    for _ in range(200):
        if not s.loop.busy(sid) and s.loop.pending_requests(sid):
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the turn did not park")


async def test_parked_requests_of_two_sessions_are_answered_from_the_sidebar(
        tmp_path: Path, browser: Any) -> None:
    written: dict[str, str] = {}
    script = [Reply(tool_calls=[("write", {"path": "a.txt", "content": "A"})]),
              Reply(tool_calls=[("count", {})]), Reply(text="wrote it"), Reply(text="counted")]
    tools = [*gate_tools(asyncio.Event(), written), count]
    async with serving(tmp_path, script, tools, approvals=True, park=True) as s:
        await _park(s, "alpha", "write a")
        await _park(s, "beta", "count")
        page = await open_page(browser, s.url)
        items = page.locator("#waiting-list .waiting-item")
        await expect(items).to_have_count(2)
        assert await page.text_content("#waiting-count") == "2 wait for you"
        approval = items.filter(has_text="alpha")
        assert "write a.txt" in await approval.inner_text()
        question = items.filter(has_text="beta")
        await question.locator("input").fill("zero")
        await question.locator("button >> text=Answer").click()
        await question.locator(".w-error >> text=schema").wait_for()
        assert s.loop.pending_requests("beta")  # refused: still open
        await question.locator("input").fill("3")
        await question.locator("button >> text=Answer").click()
        await approval.locator("button >> text=Approve").click()
        await expect(items).to_have_count(0)
        await s.loop.wait_idle()
        assert written == {"a.txt": "A"}
        tools_said = [m.content for m in s.loop.session_messages("beta") if m.role == "tool"]
        assert tools_said == ["n=3"]
        assert page.errors == []


async def test_a_parked_session_opened_on_the_page_says_it_waits(tmp_path: Path,
                                                                 browser: Any) -> None:
    script = [Reply(tool_calls=[("pick", {})]), Reply(text="noted")]
    async with serving(tmp_path, script, [pick], park=True) as s:
        await _park(s, "gamma", "which size")
        page = await open_page(browser, s.url)
        await page.locator(".waiting-item .w-session >> text=gamma").click()
        await page.locator("#pending-text >> text=waits for your answer").wait_for()
        assert await page.locator("#pending-resume").is_hidden()
        await page.locator(".waiting-item button >> text=M").click()
        await page.wait_for_selector(".msg.user .tag >> text=resumed")
        await page.wait_for_selector(".turn-end >> text=completed")
        assert await page.locator("#pending").is_hidden()
        tools_said = [m.content for m in s.loop.session_messages("gamma") if m.role == "tool"]
        assert tools_said == ["size M"]
        assert page.errors == []


async def test_a_live_question_is_answered_on_its_card(tmp_path: Path, browser: Any) -> None:
    script = [Reply(tool_calls=[("pick", {})]), Reply(text="size noted")]
    async with serving(tmp_path, script, [pick]) as s:
        page = await open_page(browser, s.url)
        await send(page, "pick a size")
        bar = page.locator(".card .approval.question")
        await bar.locator("text=Which size?").wait_for()
        assert await page.inner_text("#status") == "waiting for you"
        await bar.locator("button >> text=L").click()
        await page.wait_for_selector(".approval.done >> text=Answered: L")
        await page.wait_for_selector(".turn-end >> text=completed")
        [session] = s.loop.store.list_sessions()
        tools_said = [m.content for m in s.loop.session_messages(session.session_id)
                      if m.role == "tool"]
        assert tools_said == ["size L"]
        assert page.errors == []
