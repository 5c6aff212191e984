"""Content parts: what an image in the conversation costs the loop and the stores. Prints:

- per-iteration overhead of a turn whose input holds an image (in memory, and with the
  session in a JSON-lines file), beside the same turn with a text input (compare with
  ``bench_core.py overhead_floor`` on the tree before parts: ``STEERABLE_SRC=...``);
- saving a turn with a 1 MB image (its blob written and synced beside the history) and loading
  the session back;
- encoding a request with a 1 MB image for each wire (base64 into the JSON body).

    python bench/bench_parts.py
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.environ.get("STEERABLE_SRC") or str(Path(__file__).resolve().parent.parent / "src"))

from steerable import (
    Agent,
    AgentLoop,
    ImagePart,
    Message,
    Reply,
    ScriptedProvider,
    TextPart,
    TurnRecord,
    tool,
)
from steerable.providers.anthropic import wire_messages as anthropic_wire
from steerable.providers.openai import wire_messages as openai_wire
from steerable.providers.profiles import DEFAULT_PROFILE
from steerable.storage import JSONLSessionStore


@tool
async def noop(i: int) -> str:
    """Do nothing."""
    return "ok"


def image(size: int) -> ImagePart:
    return ImagePart(data=os.urandom(size), media_type="image/png")


async def _per_iteration(n: int, content: Any, store: Any = None) -> float:
    script = [Reply(tool_calls=[("noop", {"i": i})]) for i in range(n - 1)] + [Reply(text="done")]
    loop = AgentLoop(Agent(provider=ScriptedProvider(script), tools=[noop], max_iterations=n + 1),
                     store=store)
    t0 = time.perf_counter()
    result = await loop.run_turn(content, session_id="s")
    elapsed = time.perf_counter() - t0
    assert result.iterations == n, result
    await loop.aclose()
    return elapsed / n


async def overhead() -> None:
    picture = [TextPart("what is in it?"), image(200_000)]
    for label, content in (("text input", "what is in it?"), ("200 KB image input", picture)):
        runs = sorted([await _per_iteration(25, content) for _ in range(30)])
        print(f"overhead per iteration, 25 iterations, {label:<19} (in memory): "
              f"min {runs[0] * 1e6:6.1f} us, 10th percentile {runs[2] * 1e6:6.1f} us (30 runs)")
    with tempfile.TemporaryDirectory() as d:
        for label, content in (("text input", "what is in it?"), ("200 KB image input", picture)):
            runs = []
            for i in range(10):
                store = JSONLSessionStore(Path(d) / f"{label[:4]}{i}")
                runs.append(await _per_iteration(25, content, store))
            runs.sort()
            print(f"overhead per iteration, 25 iterations, {label:<19} (JSONL file): "
                  f"min {runs[0] * 1e6:6.1f} us, median {statistics.median(runs) * 1e6:6.1f} us "
                  f"(10 runs, one save per turn)")


def stores() -> None:
    picture = Message("user", [TextPart("what is in it?"), image(1_000_000)])
    with tempfile.TemporaryDirectory() as d:
        store = JSONLSessionStore(d)
        saves, loads = [], []
        for i in range(10):
            t0 = time.perf_counter()
            store.append(f"s{i}", [picture, Message("assistant", "a cat")],
                         TurnRecord("t", "completed", 1))
            saves.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            assert store.load(f"s{i}")[0] == picture
            loads.append(time.perf_counter() - t0)
        line = (Path(d) / "s0.jsonl").stat().st_size
        print(f"JSONL: save a turn with a 1 MB image (blob + history, fsynced): "
              f"{statistics.median(saves) * 1e3:.2f} ms; load it back: "
              f"{statistics.median(loads) * 1e3:.2f} ms (median of 10); history file "
              f"{line} bytes")


def wires() -> None:
    messages = [Message("user", [TextPart("what is in it?"), image(1_000_000)])]
    for name, encode in (("openai", lambda: openai_wire(messages, DEFAULT_PROFILE)),
                         ("anthropic", lambda: anthropic_wire(messages))):
        runs = []
        for _ in range(10):
            t0 = time.perf_counter()
            json.dumps(encode())
            runs.append(time.perf_counter() - t0)
        print(f"{name} wire: a request with a 1 MB image encoded to JSON: "
              f"{statistics.median(runs) * 1e3:.2f} ms (median of 10)")


if __name__ == "__main__":
    asyncio.run(overhead())
    stores()
    wires()
