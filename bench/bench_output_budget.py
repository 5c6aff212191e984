"""Per-iteration overhead of structured output, usage with cost, and turn budgets.

    python bench/bench_output_budget.py            # every variant
    python bench/bench_output_budget.py none cost  # some

Each variant runs turns of 200 iterations (one instant tool per iteration, as
``bench_core.py overhead``) and prints the floor (least of 30 runs) and the median per
iteration. ``none`` uses none of the features (compare two trees with
``STEERABLE_SRC=/other/src``, as for ``bench_core.py overhead_floor``); the others turn on one:

- ``usage``: every reply reports token counts with cached tokens (no model name: no price);
- ``cost``: the same on ``gpt-4o-mini``, priced from genai-prices on every call;
- ``budgets``: ``Limits(max_turn_tokens=, max_turn_cost_usd=, max_tool_calls=)``, never reached,
  with priced usage (the checks at every checkpoint, the tool-call admission per group);
- ``output``: ``Agent(output_type=...)``: the schema in every request, the final answer checked.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.environ.get("STEERABLE_SRC") or str(Path(__file__).resolve().parent.parent / "src"))

from pydantic import BaseModel

from steerable import Agent, AgentLoop, Limits, Reply, ScriptedProvider, tool
from steerable._messages import Usage


@tool
async def noop(i: int) -> str:
    """Do nothing."""
    return "ok"


class Answer(BaseModel):
    city: str
    population: int


N = 200
RUNS = 30


def _script(usage: Any, final: str) -> list[Reply]:
    steps = [Reply(tool_calls=[("noop", {"i": i})], usage=usage) for i in range(N - 1)]
    return [*steps, Reply(text=final, usage=usage)]


def _variant(name: str) -> tuple[dict[str, Any], Limits | None, Any, str]:
    """Agent options, limits, the usage each reply reports, the final text."""
    usage = Usage(1200, 40, 1000) if name in ("usage", "cost", "budgets") else None
    if name == "output":
        return {"output_type": Answer}, None, None, '{"city": "Paris", "population": 2}'
    if name in ("cost", "budgets"):
        limits = Limits(max_turn_tokens=10**9, max_turn_cost_usd=10**6,
                        max_tool_calls=10**6) if name == "budgets" else None
        return {"model": "gpt-4o-mini"}, limits, usage, "done"
    return {}, None, usage, "done"


async def _per_iteration(name: str) -> float:
    options, limits, usage, final = _variant(name)
    agent = Agent(provider=ScriptedProvider(_script(usage, final)), tools=[noop],
                  max_iterations=N + 1, **options)
    loop = AgentLoop(agent, limits=limits) if limits is not None else AgentLoop(agent)
    t0 = time.perf_counter()
    result = await loop.run_turn("go", session_id="s")
    elapsed = time.perf_counter() - t0
    assert result.iterations == N and result.status.value == "completed", result
    await loop.aclose()
    return elapsed / N


async def run(name: str) -> None:
    await _per_iteration(name)  # warm: imports, the price table's first load
    runs = sorted([await _per_iteration(name) for _ in range(RUNS)])
    print(f"{name:>8}: floor {runs[0] * 1e6:6.1f} us, median {statistics.median(runs) * 1e6:6.1f} us "
          f"per iteration ({N} iterations, {RUNS} runs)")


VARIANTS = ("none", "usage", "cost", "budgets", "output")


def main() -> None:
    for name in sys.argv[1:] or VARIANTS:
        if name not in VARIANTS:
            raise SystemExit(f"unknown variant {name!r}; one of {', '.join(VARIANTS)}")
        asyncio.run(run(name))


if __name__ == "__main__":
    main()
