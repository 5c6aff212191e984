"""A graceful interrupt's summary on the embedded model: does it start from the server's cache?

Runs on a private llama-server (LocalModelProvider, shared=False) the coding agent's tools
plus one slow tool, with the same system message throughout (a warm server: the same agent
turn after turn). Each round is a turn with a request of its own: two calls that must call the
slow tool (the first result is long, ~40 lines, as a file read is), a graceful interrupt while
the second runs, then the summary call. Two ways, alternated round by round:

- ``kept``: what the loop does (the summary lists the tools, ``ToolChoice("none")``);
- ``dropped``: the request the loop sent before (a hook takes the tools off the summary call),
  so the prompt no longer starts as the first call's did.

Printed per way: the summary's time to first token (from its ``LLM_REQUEST`` to its first
``LLM_DELTA``), the prompt tokens the server read from its cache / evaluated, median [min-max].
Then the cost of configuring tools: the first request with a new tool list, and the next one.
Needs the model prepared: python -m steerable.providers.local setup

Run: python bench/bench_summary_cache.py [--model 0.5b|1.5b] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from steerable import Agent, AgentLoop, EventKind, Hook, HookAction, HookDecision, tool  # noqa: E402
from steerable.coding import Workspace, coding_tools  # noqa: E402
from steerable.providers._base import ToolChoice  # noqa: E402
from steerable.providers.local import LocalModelProvider  # noqa: E402

SUMMARY_TOKENS = 24  # the time to the first token is the figure; the rest only costs time
_CALLS = [0]  # survey calls so far: each turn makes two


@tool(read_only=True)
async def survey(topic: str) -> str:
    """Survey the project for a topic and report what was found (slow)."""
    await asyncio.sleep(0.5)
    _CALLS[0] += 1
    if _CALLS[0] % 2 == 0:  # a turn's second call (the one interrupted)
        return f"Nothing more about {topic}."
    return "\n".join(f"src/module_{k}.py:{10 * k}: {topic}: catches OSError and retries "
                     f"{k % 3 + 1} times before it logs the failure" for k in range(40))


class Shape(Hook):
    """The calls before the summary must call ``survey``; ``dropped`` takes the tools off
    the summary."""

    def __init__(self, drop: bool) -> None:
        self.drop = drop

    def before_llm(self, ctx: Any) -> Any:
        if ctx.request.tool_choice.mode == "none":
            short = {"max_tokens": SUMMARY_TOKENS}
            return HookDecision(HookAction.MODIFY, params=short, tools=() if self.drop else None)
        return HookDecision(HookAction.MODIFY,
                            tool_choice=ToolChoice("required", ("survey",), max_tokens=48))


SYSTEM = "You are a careful coding agent. Survey first, then survey more, then fix."


async def one_round(provider: LocalModelProvider, tools: list[Any], i: int,
                    drop: bool) -> dict[str, float]:
    agent = Agent(provider=provider, tools=tools, instructions=SYSTEM)
    loop = AgentLoop(agent)
    loop.register_hook(Shape(drop), timeout=600)
    sub = loop.subscribe()
    handle = loop.start_turn(f"Request {i} ({os.getpid()}): survey the project for its error "
                             "handling, then fix what you find.", session_id=f"s{i}")
    stamps: list[tuple[float, Any]] = []
    interrupted, started = False, 0
    while not handle.done():
        for e in sub.drain_nowait():
            stamps.append((time.perf_counter(), e))
            started += e.kind is EventKind.TOOL_EXEC_START
            if started == 2 and not interrupted:
                interrupted = loop.interrupt_graceful(session_id=f"s{i}")
        await asyncio.sleep(0.001)
    result = await handle
    stamps += [(time.perf_counter(), e) for e in sub.drain_nowait()]
    await loop.aclose()
    assert interrupted and result.status.value == "interrupted", result
    requests = [n for n, (_, e) in enumerate(stamps)
                if e.kind is EventKind.LLM_REQUEST and e.purpose == ""]
    last = requests[-1]
    first_delta = next(t for t, e in stamps[last:] if e.kind is EventKind.LLM_DELTA)
    usage = next(e.usage for _, e in stamps[last:] if e.kind is EventKind.LLM_RESPONSE)
    return {"ttft_s": first_delta - stamps[last][0], "cached": usage.cached_tokens,
            "evaluated": usage.input_tokens - usage.cached_tokens}


async def first_and_next(provider: LocalModelProvider, tools: list[Any]) -> list[dict[str, Any]]:
    """A new tool list (as when MCP servers are configured): the first request, then the next."""
    out = []
    agent = Agent(provider=provider, tools=tools, params={"max_tokens": 8},
                  instructions=f"Configured ({os.getpid()}). You are a careful coding agent.")
    loop = AgentLoop(agent)
    sub = loop.subscribe()
    for n in range(2):
        started = time.perf_counter()
        await loop.run_turn(f"Say hello ({n}).", session_id=f"cfg{n}")
        usage = next(e.usage for e in sub.drain_nowait() if e.kind is EventKind.LLM_RESPONSE)
        out.append({"wall_s": time.perf_counter() - started, "cached": usage.cached_tokens,
                    "evaluated": usage.input_tokens - usage.cached_tokens})
    await loop.aclose()
    return out


def fmt(values: list[float], unit: str = "") -> str:
    med = statistics.median(values)
    return f"{med:.2f}{unit} [{min(values):.2f}-{max(values):.2f}]"


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="0.5b")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    provider = LocalModelProvider(model=args.model, shared=False)
    with tempfile.TemporaryDirectory() as tmp:
        tools = [*coding_tools(Workspace(Path(tmp))), survey]
        try:
            await one_round(provider, tools, -1, False)  # the server starts; not counted
            figures: dict[str, list[dict[str, float]]] = {"kept": [], "dropped": []}
            for i in range(args.rounds):
                for way in (("kept", "dropped") if i % 2 == 0 else ("dropped", "kept")):
                    figures[way].append(await one_round(provider, tools, i * 2 + (way == "kept"),
                                                        way == "dropped"))
            configured = await first_and_next(provider, tools[:-1])
        finally:
            await provider.aclose()
    print(f"model {args.model}, {args.rounds} rounds, load {os.getloadavg()[0]:.2f}")
    for way, rows in figures.items():
        print(f"summary, tools {way}: first token {fmt([r['ttft_s'] for r in rows], ' s')}; "
              f"prompt tokens cached {fmt([r['cached'] for r in rows])}, "
              f"evaluated {fmt([r['evaluated'] for r in rows])}")
    for n, row in enumerate(configured):
        print(f"new tool list, request {n + 1}: {row['wall_s']:.2f} s, "
              f"{row['cached']} tokens cached, {row['evaluated']} evaluated")


if __name__ == "__main__":
    asyncio.run(main())
