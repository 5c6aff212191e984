"""The agents of the determinism fuzzer (``_fuzz``): what a session's workflow runs.

Their shape (names, tools, children) is fixed, so a replay in another process builds the same
tree; what their models answer is random, but it is only ever computed in activities, whose
results the history keeps. A model picks at random among a text answer, one tool call (slow,
instant, one past its timeout, one that asks a question, one that needs an approval), several
read-only calls at once, and (for ``main``) a subagent, a spawned child or a composite child,
with a random latency; it always answers with text after a few iterations, so turns end.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

from steerable import (
    Agent,
    LoopAgent,
    ParallelAgent,
    Permissions,
    Reply,
    ScriptedProvider,
    SequentialAgent,
    ToolContext,
    tool,
)
from steerable.tools import Tool

__all__ = ["KINDS", "PERMISSIONS", "build"]

KINDS = ("main", "pipeline")
"""``main``: an agent with tools, subagents and composite children; ``pipeline``: a
composite at the root (a sequence of an agent, a parallel pair, a loop)."""
PERMISSIONS = Permissions([("ask", "write")])
_LATENCY = 0.08
"""The longest a model or an instant tool takes (seconds): long enough that updates arrive
while calls are in flight, short enough for many sessions in a CI run."""


def _tools(rng: random.Random) -> list[Tool]:
    @tool(read_only=True)
    async def slow(n: int) -> str:
        """Take a while.

        Args:
            n: Anything.
        """
        await asyncio.sleep(rng.random() * 0.6)
        return f"slow {n}"

    @tool(read_only=True)
    async def quick(n: int) -> str:
        """Answer at once.

        Args:
            n: Anything.
        """
        return f"quick {n}"

    @tool(read_only=True, timeout=0.3)
    async def late() -> str:
        """Sometimes past its timeout."""
        await asyncio.sleep(rng.random() * 0.6)
        return "in time"

    @tool
    async def write(path: str) -> str:
        """Write (asks for approval).

        Args:
            path: Where.
        """
        return f"wrote {path}"

    @tool(read_only=True)
    async def pick(ctx: ToolContext) -> str:
        """Ask which colour."""
        return str(await ctx.ask("Which colour?", choices=["red", "blue"]))

    return [slow, quick, late, write, pick]


def _one_call(rng: random.Random, children: tuple[str, ...]) -> tuple[str, dict[str, Any]]:
    name = rng.choice(["slow", "quick", "late", "write", "pick", *(["child"] * 2 * bool(children))])
    if name == "child":
        return rng.choice(["subagent", "spawn"]), {"agent": rng.choice(children), "task": "go"}
    if name in ("slow", "quick"):
        return name, {"n": rng.randrange(100)}
    if name == "write":
        return name, {"path": f"f{rng.randrange(3)}"}
    return name, {}


def _brain(name: str, rng: random.Random, children: tuple[str, ...] = ()) -> Any:
    async def answer(request: Any) -> Reply:
        await asyncio.sleep(rng.random() * _LATENCY)
        iterations = sum(m.role == "assistant" for m in request.messages)
        roll = rng.random()
        if iterations >= 3 or roll < 0.3:
            return Reply(text=f"{name} says {rng.randrange(1000)}")
        if roll < 0.45:  # a read-only group: its calls run at once
            return Reply(tool_calls=[(rng.choice(["slow", "quick"]), {"n": i})
                                     for i in range(rng.randint(2, 3))])
        return Reply(tool_calls=[_one_call(rng, children)])

    return answer


def _agent(name: str, rng: random.Random, subagents: tuple[Any, ...] = ()) -> Agent:
    children = tuple(a.name for a in subagents)
    return Agent(name=name, instructions=f"You are {name}.", description=f"{name} agent",
                 provider=ScriptedProvider([_brain(name, rng, children)] * 100_000),
                 tools=_tools(rng), subagents=subagents, max_iterations=6)


def build(kind: str, seed: int = 0) -> Any:
    """The agent of ``kind`` (``KINDS``); ``seed`` draws its models' answers and latencies."""
    rng = random.Random(seed)
    if kind == "main":
        fan = ParallelAgent(name="fan", description="two at once",
                            agents=[_agent("b", rng), _agent("c", rng)])
        return _agent("main", rng, (_agent("helper", rng), fan))
    if kind == "pipeline":
        return SequentialAgent(name="pipeline", agents=[
            _agent("a", rng), ParallelAgent(name="fan", agents=[_agent("b", rng),
                                                                _agent("c", rng)]),
            LoopAgent(name="again", agent=_agent("d", rng), max_loops=2)])
    raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
