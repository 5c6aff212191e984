"""The page's usage figures in a real browser: tokens (cached too) and cost beside the status
while a turn runs, its sub-agent's calls included, and the turn's total on its end line.
Skips like tests/server/test_browser.py when Chromium or Playwright is missing."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from steerable import Agent, Reply, ScriptedProvider, Usage
from steerable._messages import ToolCall
from steerable.providers import LLMRequest, StreamEnd, TextDelta, ToolCallChunk
from tests.server.conftest import serving
from tests.server.test_browser import browser, open_page, send  # noqa: F401 (a fixture)

pytest.importorskip("genai_prices", reason="the prices extra (genai-prices) is not installed")


class PricedModel:
    """Reports usage as gpt-4o-mini (a model with a known price); waits at a gate before its
    final answer so the page can be read while the turn runs."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.calls = 0

    async def stream(self, request: LLMRequest) -> AsyncIterator[Any]:
        self.calls += 1
        if self.calls == 1:
            yield ToolCallChunk(ToolCall("c1", "subagent", {"agent": "kid", "task": "count"}))
            yield StreamEnd(Usage(10_000, 200, 8_000), "tool_calls", model="gpt-4o-mini")
            return
        await self.gate.wait()
        yield TextDelta("All counted.")
        yield StreamEnd(Usage(12_000, 50, 10_000), "stop", model="gpt-4o-mini")

    async def aclose(self) -> None:
        return None


async def test_usage_and_cost_are_shown_live_and_on_the_end_line(tmp_path: Path,
                                                                 browser: Any) -> None:  # noqa: F811
    kid = Agent(name="kid", description="counts", provider=ScriptedProvider(
        [Reply(text="42 files", usage=Usage(1_000, 20))]))
    provider = PricedModel()
    async with serving(tmp_path, [], provider=provider, subagents=[kid]) as s:
        page = await open_page(browser, s.url)
        await send(page, "count the files")
        # first call (priced) plus the sub-agent's (a scripted model: no price)
        await page.wait_for_selector("#usage >> text=11,000 in (8,000 cached) · 220 out · $0.0")
        live = await page.inner_text("#usage")
        # gpt-4o-mini: 2,000 input at $0.15/M, 8,000 cached at $0.075/M, 200 out at $0.60/M
        assert live == "11,000 in (8,000 cached) · 220 out · $0.0010"
        provider.gate.set()
        end = page.locator(".turn-end .turn-usage")
        await end.wait_for()
        assert await end.inner_text() == "23,000 in (18,000 cached) · 270 out · $0.0021"
        assert await page.inner_text("#usage") == "23,000 in (18,000 cached) · 270 out · $0.0021"
        if shot := os.environ.get("STEERABLE_SCREENSHOT"):
            await page.screenshot(path=shot)
        assert page.errors == []
