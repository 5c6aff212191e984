"""ACP figures: time from ``session/prompt`` to the first ``session/update`` and to the
response, on the scripted provider (``steerable acp`` as a subprocess over stdio, and the agent
in process over a socket pair), and the counts of the steer-against-the-turn's-end race.

Run: ``.venv/bin/python bench/bench_acp.py`` (needs the ``acp`` extra). Prints the figures.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import socket
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import acp
from acp import schema
from acp.core import AgentSideConnection, ClientSideConnection

from steerable import Agent, AgentLoop, Reply, ScriptedProvider
from steerable.protocols.acp import SteerableAcpAgent

SRC = Path(__file__).resolve().parents[1] / "src"
PROMPTS = 200
RACE = 1000


class Timer:
    """A client that notes when each session's first update after a prompt arrives."""

    def __init__(self) -> None:
        self.sent = 0.0
        self.first: float | None = None
        self.commands = asyncio.Event()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        if update.session_update == "available_commands_update":
            self.commands.set()
        elif self.first is None:
            self.first = time.perf_counter()

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the bench asks for no permission")

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    def on_connect(self, conn: Any) -> None:
        return None


def text(prompt: str) -> list[Any]:
    return [schema.TextContentBlock(type="text", text=prompt)]


async def measure(conn: Any, timer: Timer, cwd: str) -> tuple[list[float], list[float]]:
    await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
    firsts, totals = [], []
    for i in range(PROMPTS):
        timer.commands.clear()
        sid = (await conn.new_session(cwd=cwd)).session_id
        await timer.commands.wait()  # sent after session/new: not part of the figure
        timer.first = None
        t0 = time.perf_counter()
        await conn.prompt(session_id=sid, prompt=text(f"prompt {i}"))
        t1 = time.perf_counter()
        assert timer.first is not None
        firsts.append(timer.first - t0)
        totals.append(t1 - t0)
    return firsts, totals


def report(label: str, firsts: list[float], totals: list[float]) -> None:
    def ms(xs: list[float], q: float) -> str:
        return f"{statistics.quantiles(xs, n=100)[int(q) - 1] * 1000:.2f}"

    print(f"{label}: prompt -> first update median {statistics.median(firsts) * 1000:.2f} ms "
          f"(p95 {ms(firsts, 95)} ms); prompt -> response median "
          f"{statistics.median(totals) * 1000:.2f} ms (p95 {ms(totals, 95)} ms); "
          f"{PROMPTS} prompts")


async def over_stdio(tmp: Path) -> None:
    script = tmp / "script.json"
    script.write_text(json.dumps([{"text": "ok"}] * PROMPTS))
    env = {**os.environ, "PYTHONPATH": str(SRC), "STEERABLE_DATA_DIR": str(tmp / "data"),
           "XDG_CONFIG_HOME": str(tmp / "config")}
    timer = Timer()
    async with acp.spawn_agent_process(timer, sys.executable, "-m", "steerable", "acp",
                                       "--provider", "scripted", "--script", str(script),
                                       env=env) as (conn, _):
        report("steerable acp (subprocess, stdio)", *await measure(conn, timer, str(tmp)))


@asynccontextmanager
async def in_process(loop: AgentLoop, agent: Agent, client_impl: Any) -> AsyncIterator[Any]:
    near, far = socket.socketpair()
    a_reader, a_writer = await asyncio.open_connection(sock=near)
    c_reader, c_writer = await asyncio.open_connection(sock=far)
    async with SteerableAcpAgent(loop, lambda ws, stand_ins: (agent, agent)) as impl:
        server = AgentSideConnection(impl, a_writer, a_reader, use_unstable_protocol=True)
        client = ClientSideConnection(client_impl, c_writer, c_reader)
        try:
            yield client
        finally:
            await client.close()
            await server.close()
            for writer in (a_writer, c_writer):
                writer.close()
                await writer.wait_closed()


async def in_process_latency(tmp: Path) -> None:
    agent = Agent(name="bench", instructions="Answer.",
                  provider=ScriptedProvider([Reply(text="ok")] * PROMPTS))
    timer = Timer()
    async with in_process(AgentLoop(agent, checkpoints=False), agent, timer) as conn:
        report("SteerableAcpAgent (in process, socket pair)", *await measure(conn, timer,
                                                                              str(tmp)))


async def race(tmp: Path) -> None:
    rng = random.Random(22)
    agent = Agent(name="race", instructions="Answer.", provider=ScriptedProvider(
        [lambda request: Reply(text="ok", delay=rng.uniform(0, 0.003))] * (RACE * 3)))
    loop = AgentLoop(agent, checkpoints=False)
    outcomes: Counter[str] = Counter()
    lost = twice = 0
    timer = Timer()
    async with in_process(loop, agent, timer) as conn:
        await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        for i in range(RACE):
            sid = (await conn.new_session(cwd=str(tmp))).session_id
            turn = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=text(f"p{i}")))
            await asyncio.sleep(rng.uniform(0, 0.004))
            meta = {"steering": {"idleBehavior": "promptRequired"}} if i % 2 else {}
            out = await conn.ext_method("session/steering", {
                "sessionId": sid, "prompt": [{"type": "text", "text": f"s{i}"}], "_meta": meta})
            outcomes[out["outcome"]] += 1
            await turn
            if out["outcome"] == "promptRequired":
                await conn.prompt(session_id=sid, prompt=text(f"s{i}"))
            await loop.wait_session(sid)
            seen = [m.content for m in loop.session_messages(sid) if m.role == "user"]
            lost += seen.count(f"s{i}") == 0
            twice += seen.count(f"s{i}") > 1
    print(f"steer against the turn's end, {RACE} cases: {dict(outcomes)}; lost {lost}, "
          f"delivered twice {twice}")


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        await over_stdio(Path(tmp))
        await in_process_latency(Path(tmp))
        await race(Path(tmp))


if __name__ == "__main__":
    asyncio.run(main())
