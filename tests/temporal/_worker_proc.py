"""A worker process for the failover tests and the Temporal bench: ``python -m
tests.temporal._worker_proc TARGET QUEUE EVENTS_URL DIR [MODE [HEARTBEAT_TIMEOUT]]``.

Mode ``failover`` (the default): its model asks for the ``slow`` tool once, then answers; the
tool appends a line to DIR/runs (its pid and whether it was resumed) and sleeps. Each model
request's user messages are appended to DIR/requests, so the test can count deliveries.
Mode ``ask``: the same with the ``confirm`` tool, which logs its run the same way and asks
"Proceed?" (yes or no). Mode ``instant``: the model answers "ok" at once (one call per turn).
Mode ``stall``: as ``instant``, but the first workflow task of the first session this worker
runs (unless DIR/stalled exists) blocks the worker's event loop for a minute once the
workflow code is done, so the task's completion never reaches Temporal (a worker that hangs
after taking a task, not a deadlock in workflow code); DIR/stalled is written then.
EVENTS_URL "-": no events.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

from steerable import Agent, tool
from steerable._messages import ToolCall
from steerable.providers._base import Chunk, LLMRequest, StreamEnd, TextDelta, ToolCallChunk
from steerable.temporal import CallOptions, TemporalWorker, WorkerHook
from steerable.tools._base import ToolContext


class RuleProvider:
    """Calls ``slow`` until a tool result is in the context, then answers."""

    def __init__(self, folder: Path, tool_name: str = "slow") -> None:
        self.folder = folder
        self.tool_name = tool_name

    async def stream(self, request: LLMRequest) -> AsyncGenerator[Chunk, None]:
        users = [m.content for m in request.messages if m.role == "user"]
        with (self.folder / "requests").open("a") as f:
            f.write(json.dumps(users) + "\n")
        if any(m.role == "tool" for m in request.messages):
            yield TextDelta("all done")
        else:
            yield ToolCallChunk(ToolCall("call_1", self.tool_name, {"seconds": 8.0}))
        yield StreamEnd()

    async def aclose(self) -> None:
        return None


class InstantProvider:
    async def stream(self, request: LLMRequest) -> AsyncGenerator[Chunk, None]:
        yield TextDelta("ok")
        yield StreamEnd()

    async def aclose(self) -> None:
        return None


def _log_run(folder: Path, ctx: ToolContext) -> None:
    with (folder / "runs").open("a") as f:
        f.write(json.dumps({"pid": os.getpid(), "resumed": ctx.resumed}) + "\n")


def build(folder: Path) -> Agent:
    @tool(read_only=True)
    async def slow(seconds: float, ctx: ToolContext) -> str:
        """Wait.

        Args:
            seconds: How long.
        """
        _log_run(folder, ctx)
        await asyncio.sleep(0.5 if ctx.resumed else seconds)  # a resumed run finishes the rest
        return "slept"

    return Agent(name="failover", instructions="x", provider=RuleProvider(folder),
                 tools=[slow])


def build_asking(folder: Path) -> Agent:
    @tool(read_only=True)
    async def confirm(seconds: float, ctx: ToolContext) -> str:
        """Ask before going on.

        Args:
            seconds: Unused.
        """
        _log_run(folder, ctx)
        return "answered " + await ctx.ask("Proceed?", choices=["yes", "no"])

    return Agent(name="asking", instructions="x", provider=RuleProvider(folder, "confirm"),
                 tools=[confirm])


class Stall:
    """In the workflow, before the first model call: block the worker's event loop (where
    the SDK sends the task's completion) once the workflow task is done; decides nothing."""

    def __init__(self, folder: Path, loop: asyncio.AbstractEventLoop) -> None:
        self.marker = folder / "stalled"
        self.loop = loop

    def before_llm(self, ctx: Any) -> None:
        if not self.marker.exists():
            self.marker.write_text(str(os.getpid()))
            self.loop.call_soon_threadsafe(time.sleep, 60)


async def main(target: str, queue: str, events_url: str, folder: str, mode: str = "failover",
               heartbeat_timeout: str = "2") -> None:
    agent = (build(Path(folder)) if mode == "failover"
             else build_asking(Path(folder)) if mode == "ask"
             else Agent(name="instant", instructions="x", provider=InstantProvider()))
    loop = asyncio.get_running_loop()
    hooks = [WorkerHook(lambda: Stall(Path(folder), loop), in_workflow=True)] \
        if mode == "stall" else []
    worker = TemporalWorker(agent, target=target, task_queue=queue, hooks=hooks,
                            events_url=None if events_url == "-" else events_url,
                            options=CallOptions(heartbeat_timeout=float(heartbeat_timeout)))
    task = asyncio.create_task(worker.run())
    await worker.ready.wait()
    print("ready", flush=True)
    await task


if __name__ == "__main__":
    args: Any = sys.argv[1:]
    asyncio.run(main(*args))
