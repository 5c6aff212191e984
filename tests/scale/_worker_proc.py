"""A worker process for the multi-process tests and benchmarks: ``RedisWorker`` with a model
that never runs out of script and reads its orders from the last user message:

- ``tool:<seconds>:<tag>``: call the mutating tool ``work`` (which logs ``<worker> start/end
  <tag>`` to the ledger file and sleeps), then answer ``done <tag>``;
- ``tools2:<seconds>:<tag>``: two such calls in one response (``<tag>-1``, ``<tag>-2``);
- ``slow:<seconds>:<tag>``: stream ``done <tag>`` slowly: the deltas are spread over the
  seconds, so a kill lands mid-stream;
- anything else: answer ``done <text>`` at once.

argv: redis url, worker name, ledger file, lease seconds, [sqlite path]. Environment:
``TEST_LEASE_RENEW`` (seconds between renewals), ``TEST_ASK=1`` (every ``work`` call waits for
a person's approval), ``TEST_PARK=1`` (an open approval parks its turn at once),
``TEST_MAX_SESSIONS`` (sessions this worker runs at once).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import AsyncGenerator

from steerable import Agent, HumanApprover, Reply, ScriptedProvider, tool
from steerable.providers._base import Chunk, LLMRequest, StreamEnd, TextDelta
from steerable.scale import LeaseTiming, RedisWorker
from steerable.storage import SQLiteSessionStore

url, name, ledger, ttl = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
sqlite = sys.argv[5] if len(sys.argv) > 5 else None


def log(line: str) -> None:
    with open(ledger, "a") as fh:
        fh.write(f"{name} {line} {time.time():.3f}\n")


@tool
async def work(seconds: float, tag: str) -> str:
    """Do some work."""
    log(f"start {tag}")
    await asyncio.sleep(seconds)
    log(f"end {tag}")
    return f"worked {tag}"


def answer(request: LLMRequest) -> Reply:
    last = request.messages[-1]
    if last.role == "tool":
        return Reply(text=f"done {last.content.removeprefix('worked ')}")
    order = last.content
    kind, _, rest = order.partition(":")
    if kind == "tool":
        seconds, _, tag = rest.partition(":")
        return Reply(tool_calls=[("work", {"seconds": float(seconds), "tag": tag})])
    if kind == "tools2":  # two mutating calls in one response: they run one after the other
        seconds, _, tag = rest.partition(":")
        return Reply(tool_calls=[("work", {"seconds": float(seconds), "tag": f"{tag}-1"}),
                                 ("work", {"seconds": float(seconds), "tag": f"{tag}-2"})])
    return Reply(text=f"done {order}")


class Endless:
    """A provider that answers every request with ``answer`` (a fresh one-step script)."""

    async def stream(self, request: LLMRequest) -> AsyncGenerator[Chunk, None]:
        kind, _, rest = request.messages[-1].content.partition(":")
        if kind == "slow" and request.messages[-1].role == "user":
            seconds, _, tag = rest.partition(":")
            pieces = ["done", " ", tag]
            for piece in pieces:
                yield TextDelta(piece)
                await asyncio.sleep(float(seconds) / len(pieces))
            yield StreamEnd(None, "stop")
            return
        async for chunk in ScriptedProvider([answer]).stream(request):
            yield chunk

    async def aclose(self) -> None:
        return None


async def main() -> None:
    # Every worker of a group runs the same agent (name and tools): resume checks it.
    agent = Agent(name="test-agent", instructions="test worker", provider=Endless(), tools=[work])
    store = SQLiteSessionStore(sqlite) if sqlite else None
    renew = os.environ.get("TEST_LEASE_RENEW")  # seconds between renewals, if not ttl/3
    worker = RedisWorker(agent, url, store=store,
                         lease=LeaseTiming(ttl=ttl, renew=float(renew) if renew else None),
                         worker_id=f"{name}-w",
                         max_sessions=int(os.environ.get("TEST_MAX_SESSIONS", "64")),
                         park=os.environ.get("TEST_PARK") == "1")
    if os.environ.get("TEST_ASK") == "1":
        worker.loop.register_hook(HumanApprover())
    runner = asyncio.get_running_loop().create_task(worker.run())
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, worker.stop)
    await worker.ready.wait()
    print(f"ready {worker.worker_id}", flush=True)
    await runner


asyncio.run(main())
