"""How many objects the garbage collector tracks per turn waiting on its model
(docs/performance.md, 2026-12-08 and after). With 10,000 turns in flight, each full collection
walks all of them, and how many full collections run depends on how many there are: one
object per turn is 10,000 in each. Counting objects, not time, keeps the test exact on a
loaded machine; the bound is what the design holds today, so a change that adds an object
per live turn (a frame, a wrapper, a tuple) fails here and has to say why it is worth it."""

from __future__ import annotations

import asyncio
import gc
from collections import Counter
from typing import Any

from steerable import Agent, AgentLoop
from steerable.providers import StreamEnd, TextDelta

TURNS = (100, 300)
"""Two runs: the difference of their growth, over the difference of their turns, is what one
turn holds (anything made once, a cache filled at first use by some earlier test, cancels)."""


class _Waiting:
    """A provider whose every call waits until released: each turn stays inside its model
    call (what a turn in flight mostly does)."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.waiting = 0

    async def stream(self, request: Any) -> Any:
        self.waiting += 1
        await self.release.wait()
        yield TextDelta("ok")
        yield StreamEnd(None, "stop")

    async def aclose(self) -> None:
        return None


def _tracked() -> Counter[str]:
    gc.collect()
    return Counter(type(o).__qualname__ for o in gc.get_objects())


async def _grown(turns: int) -> Counter[str]:
    provider = _Waiting()
    loop = AgentLoop(Agent(name="a", provider=provider))
    warm = asyncio.ensure_future(loop.run_turn("warm", session_id="warm"))
    while provider.waiting < 1:  # first-use caches are not per-turn state
        await asyncio.sleep(0)
    provider.release.set()
    await warm
    provider.release.clear()
    before = _tracked()
    runs = [asyncio.ensure_future(loop.run_turn("go", session_id=f"s{i}"))
            for i in range(turns)]
    while provider.waiting < turns + 1:
        await asyncio.sleep(0)
    grown = _tracked() - before
    provider.release.set()
    results = await asyncio.gather(*runs)
    await loop.aclose()
    assert all(r.text == "ok" for r in results)
    return grown


async def _per_turn() -> tuple[float, Counter[str]]:
    few, many = TURNS
    grown_few, grown_many = await _grown(few), await _grown(many)
    grown_many.subtract(grown_few)
    return grown_many.total() / (many - few), grown_many


async def test_a_turn_waiting_on_its_model_holds_few_tracked_objects() -> None:
    per_turn, grown = await _per_turn()
    # 27 with this provider and caller. Theirs: the caller's task, its context and weak
    # reference, its coroutine; the provider's generator, its weak reference, its step, the
    # event's waiter future, its callback and coroutine. The engine's: the turn state, its
    # message list, input message and receipt, the checkpoint and its view, the request and
    # its view, run_turn's and call_model's frames, the turn's task, context and weak
    # reference; the caller's waiter future and its iterator. It was 33 (main at 49712ce).
    assert per_turn <= 27.5, (per_turn, grown.most_common(20))
    # Nothing per turn is a second coroutine frame of the engine's, or a watchdog.
    assert grown["IdleWatchdog"] == 0 and grown["TurnHandle"] == 0, grown
