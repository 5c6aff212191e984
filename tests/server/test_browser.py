"""The web page in a real browser (Chromium from the OS packages, driven by Playwright):
send, watch text stream, approve a write, steer mid-turn, interrupt and stop, sub-turns nested.

Outside CI these skip (with the reason) when Chromium or Playwright is missing; in CI
(``STEERABLE_REQUIRE_BROWSER=1``) a missing browser is a failure.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from steerable import Agent, Reply, ScriptedProvider
from steerable.providers import LLMRequest, StreamEnd, TextDelta
from tests._components import missing
from tests.server.conftest import gate_tools, serving

CHROMIUM = os.environ.get("STEERABLE_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"


def _require_browser() -> Any:
    reason = None
    try:
        from playwright.async_api import async_playwright
    except ImportError:
        reason = "playwright is not installed (pip install -e '.[dev]')"
    if reason is None and not Path(CHROMIUM).exists():
        reason = "chromium is not installed (apt-get install chromium)"
    if reason is not None:
        missing("BROWSER", reason)
    return async_playwright


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    async_playwright = _require_browser()
    async with async_playwright() as p:
        b = await p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
            "--disable-dev-shm-usage"])
        try:
            yield b
        finally:
            await b.close()


async def open_page(browser: Any, url: str) -> Any:
    page = await browser.new_page(viewport={"width": 1280, "height": 800})
    page.set_default_timeout(15_000)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.errors = errors
    await page.goto(url + "/")
    await page.wait_for_selector("#conn.ok, #conn", state="attached")
    return page


async def send(page: Any, text: str) -> None:
    await page.fill("#input", text)
    await page.press("#input", "Enter")


class GatedText:
    """A provider whose answer streams in two parts with a gate between them."""

    def __init__(self, first: str, second: str) -> None:
        self.first, self.second = first, second
        self.gate = asyncio.Event()

    async def stream(self, request: LLMRequest) -> AsyncIterator[Any]:
        yield TextDelta(self.first)
        await self.gate.wait()
        yield TextDelta(self.second)
        yield StreamEnd(finish_reason="stop")

    async def aclose(self) -> None:
        return None


async def test_send_and_watch_the_text_stream(tmp_path: Path, browser: Any) -> None:
    provider = GatedText("The answer is ", "forty-two, with **care**.")
    async with serving(tmp_path, [], provider=provider) as s:
        page = await open_page(browser, s.url)
        await send(page, "What is the answer?")
        await page.wait_for_selector(".msg.user >> text=What is the answer?")
        streaming = page.locator(".msg.assistant.streaming")
        await streaming.wait_for()
        assert (await streaming.inner_text()).startswith("The answer is")
        assert await page.inner_text("#status") == "working"
        provider.gate.set()
        await page.wait_for_selector(".turn-end >> text=completed")
        final = page.locator(".msg.assistant").last
        assert await final.inner_text() == "The answer is forty-two, with care."
        assert await final.locator("strong").inner_text() == "care"
        assert await page.locator(".msg.assistant.streaming").count() == 0
        assert await page.inner_text("#status") == "idle"
        # the session is listed, titled by its first message, and survives a reload
        await page.wait_for_selector(".sessions li >> text=What is the answer?")
        await page.reload()
        await page.wait_for_selector(".msg.assistant >> text=forty-two")
        assert page.errors == []


async def test_approve_a_write(tmp_path: Path, browser: Any) -> None:
    written: dict[str, str] = {}
    script = [Reply(text="Writing it.", tool_calls=[("write", {"path": "notes.txt",
                                                                "content": "hello"})]),
              Reply(text="Wrote notes.txt.")]
    async with serving(tmp_path, script, gate_tools(asyncio.Event(), written),
                       approvals=True) as s:
        page = await open_page(browser, s.url)
        await send(page, "write the notes")
        approve = page.locator(".card[data-call] .approval button.btn-ok")
        await approve.wait_for()
        assert await page.inner_text("#status") == "waiting for you"
        assert "notes.txt" in await page.locator(".card .tool-sum").last.inner_text()
        assert written == {}
        await approve.click()
        await page.wait_for_selector(".approval.done >> text=Approved")
        await page.wait_for_selector(".turn-end >> text=completed")
        assert written == {"notes.txt": "hello"}
        assert await page.locator(".card .badge").last.inner_text() == "done"
        assert page.errors == []


async def test_deny_a_write(tmp_path: Path, browser: Any) -> None:
    written: dict[str, str] = {}
    script = [Reply(tool_calls=[("write", {"path": "x.txt", "content": "x"})]),
              Reply(text="Understood, not writing.")]
    async with serving(tmp_path, script, gate_tools(asyncio.Event(), written),
                       approvals=True) as s:
        page = await open_page(browser, s.url)
        await send(page, "write x")
        await page.locator(".approval button.btn-danger").click()
        await page.wait_for_selector(".turn-end >> text=completed")
        assert written == {}
        assert "denied" in await page.locator(".card .badge").last.inner_text()


async def test_steer_mid_turn(tmp_path: Path, browser: Any) -> None:
    gate = asyncio.Event()
    script = [Reply(tool_calls=[("work", {"step": "build"})]),
              lambda request: Reply(text=f"Steered by: {request.messages[-1].content}")]
    async with serving(tmp_path, script, gate_tools(gate, {})) as s:
        page = await open_page(browser, s.url)
        await send(page, "build it")
        await page.wait_for_selector(".card .badge >> text=running")
        assert await page.inner_text("#send") == "Steer"
        await send(page, "use the fast path")
        await page.wait_for_selector("text=steering sent")
        gate.set()  # steering reaches the model at the next checkpoint: after this tool
        await page.wait_for_selector(".msg.user.steer >> text=use the fast path")
        await page.wait_for_selector(".msg.assistant >> text=Steered by: use the fast path")
        await page.wait_for_selector(".turn-end >> text=completed")
        assert s.provider.requests[1].messages[-1].content == "use the fast path"
        assert page.errors == []


async def test_interrupt_and_stop_buttons(tmp_path: Path, browser: Any) -> None:
    gate = asyncio.Event()
    script = [Reply(tool_calls=[("work", {"step": "a"}), ("work", {"step": "b"})]),
              Reply(text="Stopped early as asked."),
              Reply(tool_calls=[("work", {"step": "c"})])]
    async with serving(tmp_path, script, gate_tools(gate, {})) as s:
        page = await open_page(browser, s.url)
        await send(page, "two steps")
        await page.wait_for_selector(".card .badge >> text=running")
        await page.click("#interrupt")
        await page.wait_for_selector("text=interrupting: the agent will sum up")
        gate.set()
        await page.wait_for_selector(".turn-end >> text=interrupted")
        await page.wait_for_selector(".msg.assistant >> text=Stopped early as asked.")
        assert "skipped" in await page.locator(".card .badge").nth(1).inner_text()
        gate.clear()
        await send(page, "third step")
        await page.wait_for_selector(".card >> nth=2")
        await page.click("#stop")
        await page.wait_for_selector(".turn-end >> text=aborted")
        assert await page.is_disabled("#stop")
        await s.loop.wait_session(await page.inner_text("#session-id"))
        users = [m.content for m in s.loop.session_messages(await page.inner_text("#session-id"))
                 if m.role == "user"]
        assert users == ["two steps"]  # the stopped turn was rolled back
        assert page.errors == []


async def test_sub_turns_are_shown_nested(tmp_path: Path, browser: Any) -> None:
    opened = asyncio.Event()
    opened.set()
    child = Agent(name="explorer", instructions="explore", description="looks around",
                  tools=gate_tools(opened, {})[:1], provider=ScriptedProvider([
                      Reply(tool_calls=[("work", {"step": "scan"})]),
                      Reply(text="Found three files.")]))
    script = [Reply(tool_calls=[("subagent", {"agent": "explorer", "task": "look around"})]),
              Reply(text="The explorer found three files.")]
    async with serving(tmp_path, script, subagents=[child]) as s:
        page = await open_page(browser, s.url)
        await send(page, "what is here?")
        await page.wait_for_selector(".turn-end >> text=completed")
        nested = page.locator(".turn .subturn")
        await nested.wait_for()
        assert "sub-agent explorer" in await nested.locator(".subturn-head").inner_text()
        assert await nested.locator(".msg.assistant").inner_text() == "Found three files."
        # the child's own tool call is a card inside the sub-turn (its call id may repeat
        # the parent's), and the parent's subagent card is finished
        assert await nested.locator(".card .tool-name").inner_text() == "work"
        assert await nested.locator(".card .badge").inner_text() == "done"
        parent_card = page.locator(".turn > .card")
        assert await parent_card.locator(".tool-name").inner_text() == "subagent"
        assert await parent_card.locator(".badge").inner_text() == "done"
        assert await nested.locator(".subturn-head .badge").inner_text() == "completed"
        assert page.errors == []


async def test_a_cancelled_turn_is_resumed_or_discarded_from_the_page(tmp_path: Path,
                                                                     browser: Any) -> None:
    gate = asyncio.Event()
    script = [Reply(tool_calls=[("work", {"step": "a"})]), Reply(text="Finished after all."),
              Reply(tool_calls=[("work", {"step": "b"})]),
              lambda request: Reply(text=f"New: {request.messages[-1].content}")]
    async with serving(tmp_path, script, gate_tools(gate, {})) as s:
        page = await open_page(browser, s.url)
        await send(page, "build it")
        await page.wait_for_selector(".card .badge >> text=running")
        sid = await page.inner_text("#session-id")
        r = await s.client.post(f"/v1/sessions/{sid}/cancel", json={"mode": "after_tools"})
        assert r.json() == {"ok": True}
        gate.set()
        await page.wait_for_selector(".turn-end >> text=cancelled")
        bar = page.locator("#pending")
        await bar.wait_for(state="visible")
        assert "cancelled (after_tools) after 1 model call" in await bar.inner_text()
        await page.reload()  # a reload finds it again (the session has no history yet)
        await bar.wait_for(state="visible")
        await page.click("#pending-resume")
        await page.wait_for_selector(".msg.user .tag >> text=resumed")
        await page.wait_for_selector(".msg.assistant >> text=Finished after all.")
        await bar.wait_for(state="hidden")
        await s.loop.wait_session(sid)
        gate.clear()
        await send(page, "once more")
        await page.wait_for_selector(".card .badge >> text=running")
        r = await s.client.post(f"/v1/sessions/{sid}/cancel", json={"mode": "after_tools"})
        gate.set()
        await bar.wait_for(state="visible")
        await page.click("#pending-discard")
        await page.wait_for_selector("text=the unfinished turn was discarded")
        await bar.wait_for(state="hidden")
        await send(page, "something else")
        await page.wait_for_selector(".msg.assistant >> text=New: something else")
        await s.loop.wait_session(sid)
        users = [m.content for m in s.loop.session_messages(sid) if m.role == "user"]
        assert users == ["build it", "something else"]
        assert page.errors == []


async def test_queued_messages_are_shown_edited_and_withdrawn(tmp_path: Path,
                                                             browser: Any) -> None:
    gate = asyncio.Event()
    script = [Reply(tool_calls=[("work", {"step": "build"})]),
              lambda request: Reply(text=f"Steered by: {request.messages[-1].content}")]
    async with serving(tmp_path, script, gate_tools(gate, {})) as s:
        page = await open_page(browser, s.url)
        await send(page, "build it")
        await page.wait_for_selector(".card .badge >> text=running")
        await send(page, "use the fast path")
        await page.check("#as-followup")
        await send(page, "then write docs")
        items = page.locator("#queue-list .queued")
        await page.wait_for_selector("#queue-list .queued >> nth=1")
        assert await page.inner_text("#queue-count") == "2 messages wait"
        assert await items.nth(0).locator(".q-text").inner_text() == "use the fast path"
        assert await items.nth(0).locator(".badge").inner_text() == "queued"
        assert await items.nth(1).locator(".q-text").inner_text() == "then write docs"
        await items.nth(0).locator("button >> text=Edit").click()
        await page.fill(".queue-edit", "use the slow path")
        await page.click(".queued button >> text=Save")
        await page.wait_for_selector(".queued .q-text >> text=use the slow path")
        await items.nth(1).locator("button >> text=Withdraw").click()
        await page.wait_for_selector(".note >> text=withdrawn: then write docs")
        await page.wait_for_selector("#queue-list .queued >> nth=1", state="detached")
        assert await page.inner_text("#queue-count") == "1 message waits"
        gate.set()
        await page.wait_for_selector(".msg.user.steer >> text=use the slow path")
        await page.wait_for_selector(".msg.assistant >> text=Steered by: use the slow path")
        await page.locator("#queue").wait_for(state="hidden")
        sid = await page.inner_text("#session-id")
        await s.loop.wait_session(sid)
        users = [m.content for m in s.loop.session_messages(sid) if m.role == "user"]
        assert users == ["build it", "use the slow path"]  # the withdrawn one never ran
        assert page.errors == []


async def test_the_page_draws_the_plan_and_a_write_as_a_diff(tmp_path: Path, browser: Any) -> None:
    from steerable.coding import Workspace, make_todo_tool, make_write_tool

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("old line\nkept\n")
    plan = [{"content": "look", "status": "done"}, {"content": "write", "status": "in_progress"},
            {"content": "check", "status": "pending"}]
    script = [Reply(tool_calls=[("todo", {"items": plan})]),
              Reply(tool_calls=[("write", {"path": "notes.txt", "content": "new line\nkept\n"})]),
              Reply(text="Done.")]
    tools = [make_todo_tool(), make_write_tool(Workspace(ws))]
    async with serving(tmp_path, script, tools) as s:
        page = await open_page(browser, s.url)
        await send(page, "plan and write")
        await page.wait_for_selector(".turn-end >> text=completed")
        assert await page.inner_text(".plan .plan-head") == "Plan (1/3 done)"
        assert await page.locator(".plan li.plan-in_progress").inner_text() == "write"
        assert await page.locator(".plan li.plan-done").inner_text() == "look"
        assert await page.locator("pre.diff .d-del").inner_text() == "-old line\n"
        assert await page.locator("pre.diff .d-add").inner_text() == "+new line\n"
        colour = await page.locator("pre.diff .d-add").evaluate("e => getComputedStyle(e).color")
        assert colour == "rgb(17, 99, 41)"  # additions are drawn green
        assert await page.locator(".card .progress").count() == 0  # no empty output box
        assert page.errors == []
