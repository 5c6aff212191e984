"""The page's manners in Chromium, checked by what it shows (text, geometry), not pixels:
bash output as written (not double-spaced), the final answer scrolled into view after long
output, turn statuses after a reload, Esc to interrupt, and the session list when narrow."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from steerable import Reply
from steerable.coding import Sandbox, Workspace, make_bash_tool
from tests.server.conftest import gate_tools, serving
from tests.server.test_browser import browser, open_page, send

__all__ = ["browser"]  # the fixture, used by name


def bash(tmp_path: Path) -> Any:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    return make_bash_tool(Workspace(ws), sandbox=Sandbox(enabled=False))


async def test_bash_output_is_shown_as_written(tmp_path: Path, browser: Any) -> None:
    script = [Reply(tool_calls=[("bash", {"command": "echo one; sleep 0.2; echo two; "
                                                     "sleep 0.2; printf 'thr'; sleep 0.2; "
                                                     "echo ee"})]),
              Reply(text="Printed.")]
    async with serving(tmp_path, script, [bash(tmp_path)]) as s:
        page = await open_page(browser, s.url)
        await send(page, "print")
        await page.wait_for_selector(".turn-end >> text=completed")
        shown = await page.locator(".card .progress pre").evaluate("e => e.textContent")
        assert shown == "one\ntwo\nthree\n"  # one line each, none blank, none split
        assert page.errors == []


async def test_the_final_answer_is_scrolled_into_view_after_long_output(
        tmp_path: Path, browser: Any) -> None:
    chunks = "; sleep 0.05; ".join(f"seq {i * 100} {i * 100 + 99}" for i in range(6))
    script = [*[Reply(tool_calls=[("bash", {"command": chunks})]) for _ in range(3)],
              Reply(text="All six hundred lines are there.")]
    async with serving(tmp_path, script, [bash(tmp_path)]) as s:
        page = await open_page(browser, s.url)
        await page.set_viewport_size({"width": 1280, "height": 600})
        await send(page, "count")
        answer = page.locator(".msg.assistant >> text=All six hundred lines are there.")
        await answer.wait_for()
        await page.wait_for_selector(".turn-end >> text=completed")
        await page.wait_for_timeout(200)
        box = await answer.bounding_box()
        view = await page.locator("#log").bounding_box()
        assert box is not None and view is not None
        assert view["y"] <= box["y"] and box["y"] + box["height"] <= view["y"] + view["height"]
        # Scrolled up by the person: new content no longer pulls the log down.
        await page.locator("#log").evaluate("l => { l.scrollTop = 0; }")
        await page.wait_for_timeout(100)
        assert await page.evaluate("state.stick") is False
        assert page.errors == []


async def test_turn_statuses_survive_a_reload(tmp_path: Path, browser: Any) -> None:
    gate = asyncio.Event()
    script = [Reply(tool_calls=[("work", {"step": "a"})]), Reply(text="First done."),
              Reply(tool_calls=[("work", {"step": "b"})]), Reply(text="Summed up.")]
    async with serving(tmp_path, script, gate_tools(gate, {})) as s:
        page = await open_page(browser, s.url)
        gate.set()
        await send(page, "first")
        await page.wait_for_selector(".turn-end >> text=completed")
        gate.clear()
        await send(page, "second")
        await page.wait_for_selector(".card .badge >> text=running >> nth=0")
        await page.click("#interrupt")
        gate.set()
        await page.wait_for_selector(".turn-end >> text=interrupted")
        before = await page.locator(".turn-end").all_inner_texts()
        await page.reload()
        await page.wait_for_selector(".turn-end >> nth=1")
        after = await page.locator(".turn-end").all_inner_texts()
        assert [t.split(" · ")[:2] for t in before] == [t.split(" · ") for t in after]
        assert after == ["completed · 2 calls", "interrupted · 2 calls"]
        assert "bad" in (await page.locator(".turn-end").nth(1).get_attribute("class") or "")
        assert page.errors == []


async def test_esc_interrupts_and_twice_stops(tmp_path: Path, browser: Any) -> None:
    gate = asyncio.Event()
    script = [Reply(tool_calls=[("work", {"step": "a"}), ("work", {"step": "b"})]),
              Reply(text="Summed up after Esc."),
              Reply(tool_calls=[("work", {"step": "c"})])]
    async with serving(tmp_path, script, gate_tools(gate, {})) as s:
        page = await open_page(browser, s.url)
        await page.keyboard.press("Escape")  # nothing runs: nothing happens
        await send(page, "two steps")
        await page.wait_for_selector(".card .badge >> text=running")
        await page.keyboard.press("Escape")
        await page.wait_for_selector("text=Esc again within 2 s to stop at once")
        await page.wait_for_selector("text=interrupting: the agent will sum up")
        gate.set()
        await page.wait_for_selector(".turn-end >> text=interrupted")
        await page.wait_for_selector(".msg.assistant >> text=Summed up after Esc.")
        gate.clear()
        await page.wait_for_timeout(2100)  # the first press is no longer fresh
        await send(page, "third step")
        await page.wait_for_selector(".card >> nth=2")
        await page.keyboard.press("Escape")
        await page.keyboard.press("Escape")
        await page.wait_for_selector(".turn-end >> text=aborted")
        assert await page.is_disabled("#stop")
        assert page.errors == []


async def test_a_narrow_window_shows_the_sessions_behind_a_button(tmp_path: Path,
                                                                  browser: Any) -> None:
    script = [Reply(text="One."), Reply(text="Two.")]
    async with serving(tmp_path, script) as s:
        page = await open_page(browser, s.url)
        await send(page, "first session")
        await page.wait_for_selector(".turn-end >> text=completed")
        await page.click("#new-session")
        await send(page, "second session")
        await page.wait_for_selector(".turn-end >> text=completed")
        assert not await page.is_visible("#sessions-toggle")  # wide: the list is always there
        await page.set_viewport_size({"width": 600, "height": 800})
        assert not await page.is_visible("#sessions")
        await page.click("#sessions-toggle")
        assert await page.get_attribute("#sessions-toggle", "aria-expanded") == "true"
        first = page.locator("#sessions li >> text=first session")
        await first.wait_for()
        side = await page.locator(".sidebar").bounding_box()
        assert side is not None and side["x"] == 0 and side["width"] >= 200
        assert await page.locator("#sessions li").count() == 2
        await first.click()
        await page.wait_for_selector(".msg.assistant >> text=One.")
        assert not await page.is_visible("#sessions")  # choosing one closes the list
        await page.click("#sessions-toggle")
        await page.keyboard.press("Escape")  # Esc closes it too
        assert not await page.is_visible("#sessions")
        assert page.errors == []
