"""The embedded model through steerable versus the same llama.cpp server called directly.

Starts the local model server once (LocalModelProvider), then alternates: (a) a streamed Chat
Completions request sent with bare httpx, (b) the same conversation as a turn through
AgentLoop. Reports first-token latency and tokens/s for each (llama-cpp-python streams one
token per delta). Every run opens with a different system line so llama.cpp cannot reuse the
previous run's prompt cache and favour whichever side goes second. steerable's side uses a
plain profile (temperature 0, no tool routing), so both sides send the same request and the
difference is steerable's own cost; the task suite (bench/tasks) measures the agent itself.
Needs the model prepared: python -m steerable.providers.local setup

Run: python bench/bench_local_model.py
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import httpx  # noqa: E402

from steerable import Agent, AgentLoop, EventKind, tool  # noqa: E402
from steerable.providers.local import LocalModelProvider  # noqa: E402
from steerable.providers.openai import wire_tools  # noqa: E402
from steerable.providers.profiles import ModelProfile  # noqa: E402

PLAIN = ModelProfile(name="plain", temperature=0.0)

ROUNDS = 5
PROMPT = "Write a Python function that reverses a string, with a one-line docstring."
MAX_TOKENS = 64


@tool(read_only=True)
async def read_file(path: str) -> str:
    """Read a text file and return its contents."""
    return ""


def system(i: int, side: str) -> str:
    return f"Session {side}-{i}. You are a concise coding assistant."


async def direct(base_url: str, i: int, tools: bool) -> tuple[float, float, int]:
    body = {"model": "local", "stream": True, "temperature": 0.0, "max_tokens": MAX_TOKENS,
            "messages": [{"role": "system", "content": system(i, "direct")},
                         {"role": "user", "content": PROMPT}]}
    if tools:
        agent = Agent(provider=LocalModelProvider(environ={}), tools=[read_file])
        body["tools"] = wire_tools(agent.tool_specs)
    times = []
    async with httpx.AsyncClient(timeout=300) as client:
        started = time.perf_counter()
        async with client.stream("POST", f"{base_url}/chat/completions", json=body) as resp:
            async for line in resp.aiter_lines():
                if line.startswith("data: ") and line != "data: [DONE]":
                    delta = json.loads(line[6:])["choices"][0]["delta"]
                    if delta.get("content"):
                        times.append(time.perf_counter())
    return _figures(started, times)


async def steerable_turn(loop: AgentLoop, i: int) -> tuple[float, float, int]:
    sub = loop.subscribe(kinds=[EventKind.LLM_REQUEST, EventKind.LLM_DELTA], buffer=4096)
    await loop.run_turn(PROMPT, session_id=f"s{i}")
    events = sub.drain_nowait()
    sub.close()
    started = next(e.time for e in events if e.kind is EventKind.LLM_REQUEST)
    return _figures(started, [e.time for e in events if e.kind is EventKind.LLM_DELTA])


def _figures(started: float, times: list[float]) -> tuple[float, float, int]:
    first = times[0] - started
    rate = (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 else 0.0
    return first, rate, len(times)


async def scenario(provider: LocalModelProvider, base_url: str, tools: bool) -> None:
    ours, theirs = [], []
    for i in range(ROUNDS):
        agent = Agent(provider=provider, instructions=system(i, "steerable"),
                      tools=[read_file] if tools else [],
                      params={"max_tokens": MAX_TOKENS})
        if i % 2:  # alternate who goes first
            ours.append(await steerable_turn(AgentLoop(agent), i))
            theirs.append(await direct(base_url, i, tools))
        else:
            theirs.append(await direct(base_url, i, tools))
            ours.append(await steerable_turn(AgentLoop(agent), i))
    label = "with tool definitions" if tools else "no tools"
    for name, runs in (("llama.cpp direct", theirs), ("through steerable", ours)):
        first = statistics.median(r[0] for r in runs)
        rate = statistics.median(r[1] for r in runs)
        spread = ", ".join(f"{r[0]:.2f}s/{r[1]:.0f}" for r in runs)
        print(f"{label:22} {name:18} median first token {first:.3f} s, {rate:.1f} tokens/s "
              f"({runs[0][2]} tokens; runs: {spread})")


async def main() -> None:
    provider = LocalModelProvider(threads=2, profile=PLAIN)
    base_url = (await provider._ensure_started()).base_url  # start once, share the server
    try:
        await scenario(provider, base_url, tools=False)
        await scenario(provider, base_url, tools=True)
    finally:
        await provider.aclose()


if __name__ == "__main__":
    asyncio.run(main())
