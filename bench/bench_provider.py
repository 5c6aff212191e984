"""Provider overhead over loopback, against the test suite's wire-format server.

1. Per streamed chunk: a 4,000-chunk OpenAI stream read (a) with httpx + httpx-sse alone and
   (b) through OpenAIProvider.stream; the difference per chunk is what the provider adds
   (JSON decoding, tool-call bookkeeping, retry wrapper, chunk objects). Target <= 20 us.
2. LLM_REQUEST -> first LLM_DELTA through AgentLoop for a short reply. Target <= 2 ms.
3. A tool call's arguments in 4,000 pieces (``TOOL_CALL_DELTA``) against 4,000 text pieces,
   both read through the provider and the loop's secret guard: what a piece of arguments costs.

Run: /work/venv/bin/python bench/bench_provider.py
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests" / "providers")]

import httpx  # noqa: E402
from httpx_sse import EventSource  # noqa: E402
from loopback_llm import LoopbackServer, openai_frames, stream  # noqa: E402

from steerable import Agent, AgentLoop, EventKind  # noqa: E402
from steerable.providers.openai import OpenAIProvider  # noqa: E402

CHUNKS = 4000
ROUNDS = 15
TURNS = 300


def big_stream() -> bytes:
    words = [f"w{i % 97} " for i in range(CHUNKS)]
    # One HTTP chunk holding every frame, so the server's cost is a single write and the
    # timing is the client's.
    return b"".join(openai_frames(words))


async def raw_httpx(server: LoopbackServer, body: bytes) -> float:
    server.add(stream([body]))
    async with httpx.AsyncClient() as client:
        started = time.perf_counter()
        async with client.stream("POST", f"{server.url}/v1/chat/completions",
                                 json={"stream": True}) as response:
            count = 0
            async for _event in EventSource(response).aiter_sse():
                count += 1
        elapsed = time.perf_counter() - started
    assert count >= CHUNKS
    return elapsed


async def through_provider(server: LoopbackServer, provider: OpenAIProvider,
                           body: bytes) -> float:
    from steerable._messages import Message
    from steerable.providers._base import LLMRequest, TextDelta

    server.add(stream([body]))
    request = LLMRequest(messages=(Message("user", "go"),))
    started = time.perf_counter()
    count = 0
    async for chunk in provider.stream(request):
        if type(chunk) is TextDelta:
            count += 1
    elapsed = time.perf_counter() - started
    assert count == CHUNKS, count
    return elapsed


async def per_chunk(server: LoopbackServer) -> None:
    body = big_stream()
    provider = OpenAIProvider(base_url=f"{server.url}/v1", environ={})
    raw, ours = [], []
    for _ in range(ROUNDS):  # interleaved, so drift in machine load hits both alike
        gc.collect()
        raw.append(await raw_httpx(server, body))
        gc.collect()
        ours.append(await through_provider(server, provider, body))
    await provider.aclose()
    raw_us = statistics.median(raw) / CHUNKS * 1e6
    ours_us = statistics.median(ours) / CHUNKS * 1e6
    print(f"per chunk: httpx+httpx-sse {raw_us:.2f} us, OpenAIProvider {ours_us:.2f} us, "
          f"provider overhead {ours_us - raw_us:.2f} us/chunk (target <= 20)")


def argument_stream() -> bytes:
    pieces = [{"index": 0, "id": "c1", "type": "function",
               "function": {"name": "write", "arguments": '{"content": "'}}]
    pieces += [{"index": 0, "function": {"arguments": f"w{i % 97} "}} for i in range(CHUNKS)]
    pieces.append({"index": 0, "function": {"arguments": '"}'}})
    return b"".join(openai_frames(tool_fragments=pieces, finish="tool_calls"))


async def guarded(server: LoopbackServer, provider: OpenAIProvider, body: bytes) -> float:
    from steerable._messages import Message
    from steerable._secrets import known_secrets
    from steerable.providers._base import LLMRequest, guard_secrets

    server.add(stream([body]))
    request = LLMRequest(messages=(Message("user", "go"),))
    started = time.perf_counter()
    async for _chunk in guard_secrets(provider.stream(request), known_secrets()):
        pass
    return time.perf_counter() - started


async def argument_pieces(server: LoopbackServer) -> None:
    text, args = big_stream(), argument_stream()
    provider = OpenAIProvider(base_url=f"{server.url}/v1", environ={})
    for_text, for_args = [], []
    for _ in range(ROUNDS):
        gc.collect()
        for_text.append(await guarded(server, provider, text))
        gc.collect()
        for_args.append(await guarded(server, provider, args))
    await provider.aclose()
    text_us = statistics.median(for_text) / CHUNKS * 1e6
    args_us = statistics.median(for_args) / CHUNKS * 1e6
    print(f"per piece through provider and guard: text {text_us:.2f} us, tool arguments "
          f"{args_us:.2f} us")


async def first_delta(server: LoopbackServer) -> None:
    provider = OpenAIProvider(base_url=f"{server.url}/v1", environ={})
    loop = AgentLoop(Agent(provider=provider))
    sub = loop.subscribe(kinds=[EventKind.LLM_REQUEST, EventKind.LLM_DELTA], buffer=4096)
    gaps = []
    for i in range(TURNS):
        server.add(stream(openai_frames(["Hello", " there"])))
        await loop.run_turn("hi", session_id=f"s{i}")
        events = sub.drain_nowait()
        request = next(e for e in events if e.kind is EventKind.LLM_REQUEST)
        delta = next(e for e in events if e.kind is EventKind.LLM_DELTA)
        gaps.append(delta.time - request.time)
    await provider.aclose()
    gaps = gaps[20:]  # the first turns warm up the connection pool and code paths
    gaps.sort()
    med = statistics.median(gaps) * 1e3
    p95 = gaps[int(len(gaps) * 0.95)] * 1e3
    print(f"LLM_REQUEST -> first LLM_DELTA: median {med:.2f} ms, p95 {p95:.2f} ms "
          f"over {len(gaps)} turns (target <= 2 ms)")


async def main() -> None:
    server = await LoopbackServer().start()
    try:
        await per_chunk(server)
        await first_delta(server)
        await argument_pieces(server)
    finally:
        await server.aclose()


if __name__ == "__main__":
    asyncio.run(main())
