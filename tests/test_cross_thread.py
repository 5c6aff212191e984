"""Control calls from other threads: answered by the loop's thread, and never left hanging
when that loop stops before it could answer."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from steerable import Agent, AgentLoop, Reply, ScriptedProvider


def test_a_call_queued_as_the_loop_stops_fails_at_once() -> None:
    agent_loop = AgentLoop(Agent(provider=ScriptedProvider([Reply(text="x", delay=30)])))
    loop = asyncio.new_event_loop()
    ready = threading.Event()

    async def bind() -> None:
        agent_loop.start_turn("go", session_id="s")  # binds the AgentLoop to this event loop
        ready.set()

    def stop_after_blocking() -> None:
        time.sleep(0.3)  # the loop is busy while the other thread's call is queued...
        loop.stop()      # ...and stops before it runs that call

    thread = threading.Thread(target=loop.run_forever)
    thread.start()
    try:
        asyncio.run_coroutine_threadsafe(bind(), loop).result(5)
        assert ready.wait(5)
        loop.call_soon_threadsafe(stop_after_blocking)
        time.sleep(0.05)
        started = time.monotonic()
        with pytest.raises(RuntimeError, match="stopped before it could answer"):
            agent_loop.inject_steering("hello", session_id="s")
        assert time.monotonic() - started < 5  # was a 30 s hang, then a TimeoutError
    finally:
        thread.join(5)
        for task in asyncio.all_tasks(loop):
            task.cancel()
        loop.run_until_complete(asyncio.sleep(0))
        loop.close()


def test_calls_from_another_thread_are_answered_by_the_loop() -> None:
    async def main() -> tuple[bool, str]:
        provider = ScriptedProvider([Reply(text="done", delay=0.3), Reply(text="after")])
        agent_loop = AgentLoop(Agent(provider=provider))
        handle = agent_loop.start_turn("go", session_id="s")
        await asyncio.sleep(0.05)
        seen: list[str] = []

        def other() -> bool:
            seen.append(threading.current_thread().name)
            return agent_loop.inject_follow_up("then this", session_id="s")

        queued = await asyncio.to_thread(other)
        result = await handle
        await agent_loop.aclose()
        return queued, seen[0] if result.follow_ups else ""

    queued, thread_name = asyncio.run(main())
    assert queued and thread_name != threading.main_thread().name
