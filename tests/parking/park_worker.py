"""A process that parks a turn, or answers one, and is killed (by the test) afterwards.

    python -m tests.parking.park_worker DATA_DIR LOG STORE MODE [REQUEST_ID VALUE]

MODE ``ask``: a turn whose tool asks a question parks; ``parked REQUEST_ID`` is logged and the
process stays up, as a server would, until it is killed.
MODE ``answer``: answer REQUEST_ID with VALUE on a new loop; the resumed turn's tool runs to
its end, then the next model request hangs (``request 2`` logged) until the kill.
Every tool start and side effect is appended to LOG, one line each.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from steerable import Agent, AgentLoop, Reply, ScriptedProvider, ToolContext, tool
from steerable.providers._base import LLMRequest


def log(path: str, line: str) -> None:
    with open(path, "a") as fh:
        fh.write(line + "\n")


def make_tools(record: Any) -> list[Any]:
    @tool
    async def deploy(target: str, ctx: ToolContext) -> str:
        """Deploy to a target."""
        record(f"start resumed={ctx.resumed}")
        answer = await ctx.ask(f"Deploy to {target}?", choices=["yes", "no"])
        record(f"side effect {answer}")
        return f"deployed: {answer}"

    return [deploy]


def store_for(data_dir: str, kind: str) -> Any:
    if kind == "sqlite":
        from steerable.storage import SQLiteSessionStore

        return SQLiteSessionStore(f"{data_dir}.sqlite")
    from steerable.storage import JSONLSessionStore

    return JSONLSessionStore(data_dir)


async def main(data_dir: str, logfile: str, kind: str, mode: str, *rest: str) -> None:
    def record(line: str) -> None:
        log(logfile, line)

    if mode == "ask":
        provider = ScriptedProvider([Reply(tool_calls=[("deploy", {"target": "prod"})])])
        loop = AgentLoop(Agent(name="park", provider=provider, tools=make_tools(record)),
                         store=store_for(data_dir, kind), park=True)
        result = await loop.run_turn("ship it", session_id="s")
        record(f"parked {result.pending[0].request_id}")
        await asyncio.Event().wait()  # up, like a server, until the kill

    def hang(request: LLMRequest) -> Any:
        record("request 2")
        return asyncio.Event().wait()  # an awaitable that never ends

    provider = ScriptedProvider([hang])
    loop = AgentLoop(Agent(name="park", provider=provider, tools=make_tools(record)),
                     store=store_for(data_dir, kind), park=True)
    handle = loop.answer(rest[0], rest[1])
    record("answered")
    await handle  # type: ignore[misc]  # never ends: the test kills the process


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
