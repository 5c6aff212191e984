"""Integrations' costs. Prints the figures (and the load average: the machine is shared).

1. OpenTelemetry: wall time per iteration of a turn with the hook off vs on (SDK tracer, in-memory
   exporter, simple span processor), up to the moment every span is exported.
2. Replay: wall time to replay a recording of about 1,000 events, against the live run.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from steerable import Agent, AgentLoop, Reply, ScriptedProvider, tool
from steerable.replay import Recorder, load_recording, replay

ITERATIONS = 100
RUNS = 7


@tool(read_only=True)
async def look(path: str) -> str:
    """Look at a path."""
    return f"contents of {path}"


def _script(n: int) -> list[Reply]:
    steps = [Reply(text=f"step {i} looking", tool_calls=[("look", {"path": f"f{i}"})])
             for i in range(n - 1)]
    return [*steps, Reply(text="done")]


def _loop(n: int) -> AgentLoop:
    agent = Agent(name="bench", model="m", provider=ScriptedProvider(_script(n)), tools=[look],
                  max_iterations=n + 1)
    return AgentLoop(agent)


async def _turn(otel: bool) -> float:
    loop = _loop(ITERATIONS)
    exporter = None
    if otel:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        from steerable.integrations.otel import OpenTelemetryHook

        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        loop.register_hook(OpenTelemetryHook(tracer_provider=provider))
    t0 = time.perf_counter()
    await loop.run_turn("go", session_id="s")
    await loop.aclose(grace=30)  # the observer has exported every span when this returns
    elapsed = time.perf_counter() - t0
    if exporter is not None:
        assert len(exporter.get_finished_spans()) == 1 + ITERATIONS + ITERATIONS - 1
    return elapsed


async def bench_otel() -> None:
    await _turn(False)
    await _turn(True)  # warm imports
    off, on = [], []
    for _ in range(RUNS):
        off.append(await _turn(False))
        on.append(await _turn(True))
    per_off = statistics.median(off) / ITERATIONS * 1e6
    per_on = statistics.median(on) / ITERATIONS * 1e6
    print(f"OpenTelemetry hook, {ITERATIONS}-iteration turn (1 LLM call + 1 tool each), "
          f"median of {RUNS}:")
    print(f"  off: {per_off:8.0f} us/iteration")
    print(f"  on : {per_on:8.0f} us/iteration  (+{per_on - per_off:.0f} us, "
          f"{(per_on / per_off - 1) * 100:.0f}%; 2 spans and 4 observed events per "
          "iteration)")


async def bench_replay() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "rec.jsonl"
        n = 112
        loop = _loop(n)
        t0 = time.perf_counter()
        async with Recorder(loop, path):
            await loop.run_turn("go", session_id="s")
        live = time.perf_counter() - t0
        await loop.aclose()
        events = len(load_recording(path).events)
        times = []
        for _ in range(RUNS):
            t0 = time.perf_counter()
            out = await replay(path)
            times.append(time.perf_counter() - t0)
        assert len(out.events) == events
        size = path.stat().st_size
        print(f"Replay of a {events}-event recording ({n} iterations, {size / 1024:.0f} KiB), "
              f"median of {RUNS}:")
        print(f"  replay: {statistics.median(times) * 1000:7.1f} ms "
              f"(min {min(times) * 1000:.1f}, max {max(times) * 1000:.1f}); "
              f"{statistics.median(times) / events * 1e6:.0f} us/event")
        print(f"  the recorded live run (scripted model, recorder on): {live * 1000:.1f} ms")


def main() -> None:
    with open("/proc/loadavg") as f:
        print(f"load average: {f.read().split()[:3]}  python {sys.version.split()[0]}")
    asyncio.run(bench_otel())
    asyncio.run(bench_replay())


if __name__ == "__main__":
    main()
