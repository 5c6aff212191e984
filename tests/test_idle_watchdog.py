"""The LLM idle watchdog turns only its own cancel into a timeout: a silent stream fails the
call, while a hard abort during the same wait stays an abort (never an error or a retry)."""

from __future__ import annotations

import asyncio

from steerable import Agent, AgentLoop, EventKind, Reply, ScriptedProvider, Timeouts, TurnStatus


def _loop(script: list[Reply], idle: float) -> AgentLoop:
    agent = Agent(name="t", instructions="test", provider=ScriptedProvider(script))
    return AgentLoop(agent, timeouts=Timeouts(llm_idle=idle))


async def test_a_hard_abort_during_a_watched_wait_is_an_abort() -> None:
    loop = _loop([Reply(text="late", delay=30)], idle=20.0)
    sub = loop.subscribe(kinds=[EventKind.LLM_REQUEST])
    handle = loop.start_turn("go", session_id="s")
    await asyncio.wait_for(sub.__anext__(), 5)  # the model call (and its watchdog) is running
    assert loop.interrupt_hard(session_id="s")
    result = await asyncio.wait_for(handle, 5)
    assert result.status is TurnStatus.ABORTED and result.error is None
    await loop.aclose()


async def test_a_silent_stream_fails_the_turn_with_a_timeout() -> None:
    loop = _loop([Reply(text="late", delay=30)], idle=0.1)
    result = await asyncio.wait_for(loop.run_turn("go", session_id="s"), 10)
    assert result.status is TurnStatus.ERROR
    assert result.error is not None
    await loop.aclose()


async def test_watchdogs_sharing_one_timer_fire_only_the_silent_call() -> None:
    """Many model calls share one timer per event loop: a call that keeps streaming is never
    cut, while one that started later and stays silent is, even though the shared timer was
    armed for the first call's deadline."""
    from steerable.providers import StreamEnd, TextDelta

    class Streams:
        async def stream(self, request: object) -> object:
            text = request.messages[-1].content  # type: ignore[attr-defined]
            if text == "talk":
                for _ in range(12):  # 0.6 s in all, a chunk every 0.05 s: never 0.3 s silent
                    await asyncio.sleep(0.05)
                    yield TextDelta("x")
            else:
                await asyncio.sleep(30)
            yield StreamEnd(None, "stop")

        async def aclose(self) -> None:
            return None

    loop = AgentLoop(Agent(name="t", provider=Streams()), timeouts=Timeouts(llm_idle=0.3))
    talking = loop.start_turn("talk", session_id="a")
    await asyncio.sleep(0.01)
    silent = loop.start_turn("hush", session_id="b")
    done_talking, done_silent = await asyncio.wait_for(asyncio.gather(talking, silent), 10)
    assert done_talking.status is TurnStatus.COMPLETED and done_talking.text == "x" * 12
    assert done_silent.status is TurnStatus.ERROR and "llm_idle" in str(done_silent.error)
    await loop.aclose()


async def test_a_call_that_goes_silent_after_the_shared_timer_fired_is_still_cut() -> None:
    """The shared timer fires the silent call and re-arms for the one still streaming; that
    one, silent from then on, is cut at its own deadline by the re-armed timer."""
    from steerable.providers import StreamEnd, TextDelta

    first_cut = asyncio.Event()

    class Streams:
        async def stream(self, request: object) -> object:
            if request.messages[-1].content == "talk":  # type: ignore[attr-defined]
                while not first_cut.is_set():  # a chunk every 0.02 s: never 0.5 s silent
                    await asyncio.sleep(0.02)
                    yield TextDelta("x")
            await asyncio.Event().wait()  # silent for good
            yield StreamEnd(None, "stop")

        async def aclose(self) -> None:
            return None

    loop = AgentLoop(Agent(name="t", provider=Streams()), timeouts=Timeouts(llm_idle=0.5))
    silent = loop.start_turn("hush", session_id="a")
    talking = loop.start_turn("talk", session_id="b")
    done_silent = await asyncio.wait_for(silent, 10)
    assert done_silent.status is TurnStatus.ERROR and "llm_idle" in str(done_silent.error)
    first_cut.set()
    done_talking = await asyncio.wait_for(talking, 10)
    assert done_talking.status is TurnStatus.ERROR and "llm_idle" in str(done_talking.error)
    await loop.aclose()


async def test_fifty_waiting_model_calls_add_one_timer_not_fifty() -> None:
    import pytest

    running = asyncio.get_running_loop()
    scheduled = getattr(running, "_scheduled", None)  # asyncio's timer heap (CPython's loop)
    if scheduled is None:
        pytest.skip("this event loop does not expose its timer heap")
    gate = asyncio.Event()

    class Waits:
        async def stream(self, request: object) -> object:
            await gate.wait()  # no timer of its own: any timer added is the watchdog's
            yield TextDelta("ok")

        async def aclose(self) -> None:
            return None

    from steerable.providers import TextDelta

    loop = AgentLoop(Agent(name="t", provider=Waits()), timeouts=Timeouts(llm_idle=20.0))
    sub = loop.subscribe(kinds=[EventKind.LLM_REQUEST])
    before = sum(1 for h in scheduled if not h.cancelled())
    handles = [loop.start_turn("go", session_id=f"s{i}") for i in range(50)]
    for _ in range(50):
        await asyncio.wait_for(sub.__anext__(), 5)
    await asyncio.sleep(0)
    assert sum(1 for h in scheduled if not h.cancelled()) - before == 1
    gate.set()
    results = await asyncio.wait_for(asyncio.gather(*handles), 10)
    assert all(r.status is TurnStatus.COMPLETED for r in results)
    await loop.aclose()
