"""A process that runs a durable turn and gets killed (by the test) at a chosen moment.

    python -m tests.durable.crash_worker DATA_DIR LOG MODE

MODE ``mid_tool``: the model asks for step 1, 2, 3 (mutating); step 2 hangs.
MODE ``mid_stream``: step 1 runs, then the second LLM response hangs after streaming a delta.
MODE ``send_jsonl`` / ``send_sqlite``: a message ``send`` starts a turn whose tool hangs; two
more are sent with the ``follow_up`` policy (``acked send ID`` each, ``acked all``, the kill).
MODE ``steer_jsonl`` / ``steer_sqlite``: as ``mid_tool``, and once step 2 runs a steer and a
follow-up are given to the turn; ``acked steer ID`` / ``acked follow_up ID`` is logged as
soon as each call has returned (the test kills the process right after).
Every provider request and tool start/end is appended to LOG (one line each, flushed), so the
test can tell what ran in this process and kill it at the right line.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from typing import Any

from steerable import Agent, AgentLoop, Reply, ScriptedProvider, ToolContext, tool
from steerable.providers._base import LLMRequest, TextDelta
from steerable.storage import JSONLSessionStore


def log(path: str, line: str) -> None:
    with open(path, "a") as fh:
        fh.write(line + "\n")


def make_tools(record: Any, hang_at: int | None = None) -> list[Any]:
    @tool
    async def step(n: int, ctx: ToolContext) -> str:
        """Do step n."""
        record(f"start {n}{' resumed' if ctx.resumed else ''}")
        if n == hang_at:
            await asyncio.Event().wait()
        record(f"end {n}")
        return f"step {n} done"

    return [step]


class HangingStream:
    """The second response streams a delta, then hangs (the process is killed there)."""

    def __init__(self, logfile: str) -> None:
        self.logfile = logfile
        self.calls = 0

    async def stream(self, request: LLMRequest) -> AsyncIterator[Any]:
        self.calls += 1
        log(self.logfile, f"request {self.calls}")
        if self.calls == 1:
            async for chunk in ScriptedProvider([Reply(tool_calls=[("step", {"n": 1})])]).stream(request):
                yield chunk
            return
        yield TextDelta("partial answer ")
        log(self.logfile, f"streaming {self.calls}")
        await asyncio.Event().wait()

    async def aclose(self) -> None:
        return None


async def main(data_dir: str, logfile: str, mode: str) -> None:
    def record(line: str) -> None:
        log(logfile, line)

    provider: Any
    if mode == "mid_tool":
        def first(request: Any) -> Reply:
            record("request 1")
            return Reply(tool_calls=[("step", {"n": 1}), ("step", {"n": 2}), ("step", {"n": 3})])

        provider = ScriptedProvider([first])
        tools = make_tools(record, hang_at=2)
    else:
        provider = HangingStream(logfile)
        tools = make_tools(record)
    if mode.startswith("steer"):
        await steer_then_die(data_dir, mode, record)
        return
    if mode.startswith("send"):
        await send_then_die(data_dir, mode, record)
        return
    loop = AgentLoop(Agent(name="crash", provider=provider, tools=tools),
                     store=JSONLSessionStore(data_dir))
    await loop.run_turn("do the steps", session_id="s")
    record("turn ended")  # never reached: the test kills the process first


def store_for(data_dir: str, mode: str) -> Any:
    if mode.endswith("sqlite"):
        from steerable.storage.sqlite import SQLiteSessionStore

        return SQLiteSessionStore(f"{data_dir}.sqlite")
    return JSONLSessionStore(data_dir)


async def steer_then_die(data_dir: str, mode: str, record: Any) -> None:
    running = asyncio.Event()

    @tool
    async def step(n: int, ctx: ToolContext) -> str:
        """Do step n."""
        record(f"start {n}")
        if n == 2:
            running.set()
            await asyncio.Event().wait()
        return f"step {n} done"

    provider = ScriptedProvider([Reply(tool_calls=[("step", {"n": 1}), ("step", {"n": 2})])])
    loop = AgentLoop(Agent(name="crash", provider=provider, tools=[step]),
                     store=store_for(data_dir, mode))
    handle = loop.start_turn("do the steps", session_id="s")
    await running.wait()
    steer = loop.inject_steering("change of plan", "s")
    record(f"acked steer {steer.message_id}")
    later = loop.inject_follow_up("and then this", "s")
    record(f"acked follow_up {later.message_id}")
    await handle  # never ends: the test kills the process



async def send_then_die(data_dir: str, mode: str, record: Any) -> None:
    running = asyncio.Event()

    @tool
    async def step(n: int) -> str:
        """Do step n."""
        running.set()
        await asyncio.Event().wait()
        return f"step {n} done"

    provider = ScriptedProvider([Reply(tool_calls=[("step", {"n": 1})])])
    loop = AgentLoop(Agent(name="crash", provider=provider, tools=[step]),
                     store=store_for(data_dir, mode))
    loop.send("first", "s")
    await running.wait()
    for text in ("second", "third"):
        sent = loop.send(text, "s", "follow_up")
        record(f"acked send {sent.message_id}")
    record("acked all")
    await asyncio.Event().wait()  # the test kills the process


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
