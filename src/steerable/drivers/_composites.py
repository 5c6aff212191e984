"""Composite agents: ``SequentialAgent``, ``LoopAgent``, ``ParallelAgent``.

Each is usable wherever an agent is (``AgentLoop(composite)``, a sub-agent, nested in another
composite). Its turn calls no model: every child runs as a sub-turn of it, on the one engine,
with the usual events and limits. Between children (and before a parallel group starts) the
composite checks for a stop request, so a graceful interrupt or any cancel ends it at the next
boundary with the output it has so far; a hard abort reaches every running child at once, and an
IMMEDIATE cancel gives them ``grace`` seconds (default 1) to stop at a safe point first.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from steerable._core._agent import BaseAgent, check_children
from steerable._core._composite import USABLE, CompositeAgent, CompositeScope
from steerable._core._turn import TurnResult
from steerable.errors import ConfigurationError, SubturnError

__all__ = ["LoopAgent", "ParallelAgent", "SequentialAgent"]

Until = Callable[[TurnResult], bool | Awaitable[bool]]


def _failed(owner: str, child: BaseAgent, result: TurnResult) -> SubturnError:
    why = f": {result.error}" if result.error is not None else ""
    return SubturnError(f"{owner}: step {child.name!r} ended {result.status.value}{why}")


def _need_children(owner: str, agents: object, *, allow_repeats: bool = False) -> tuple[BaseAgent, ...]:
    children = check_children(owner, agents, allow_repeats=allow_repeats)
    if not children:
        raise ConfigurationError(f"{owner} needs at least one child agent")
    return children


class SequentialAgent(CompositeAgent):
    """Runs ``agents`` one after another: the composite's input goes to the first, each one's
    answer is the next one's input, and the last answer is the composite's. A step that ends
    in error (or is aborted) ends the sequence in error. The same agent object may appear more
    than once (e.g. ``[draft, review, draft]``)."""

    def __init__(self, *, name: str, agents: Sequence[BaseAgent], description: str = "",
                 grace: float = 1.0) -> None:
        self._set_identity(name, description)
        self._set_grace(grace)
        self.agents = _need_children(f"SequentialAgent {name!r}", agents, allow_repeats=True)

    async def run(self, scope: CompositeScope) -> str:
        text = scope.input
        for child in self.agents:
            result = await scope.run_child(child, text)
            if result.status not in USABLE:
                raise _failed(f"SequentialAgent {self.name!r}", child, result)
            text = scope.text = result.text
        return text

    def __repr__(self) -> str:
        return f"<SequentialAgent {self.name} agents={[a.name for a in self.agents]}>"


class LoopAgent(CompositeAgent):
    """Runs ``agent`` up to ``max_loops`` times, each run's answer the next run's input, and
    stops early once ``until(result)`` (sync or async, given each run's ``TurnResult``) is
    true. The last answer is the composite's."""

    def __init__(self, *, name: str, agent: BaseAgent, max_loops: int,
                 until: Until | None = None, description: str = "",
                 grace: float = 1.0) -> None:
        self._set_identity(name, description)
        self._set_grace(grace)
        if not isinstance(agent, BaseAgent):
            raise ConfigurationError(f"LoopAgent {name!r}: {agent!r} is not an agent")
        if isinstance(max_loops, bool) or not isinstance(max_loops, int) or max_loops < 1:
            raise ConfigurationError(
                f"LoopAgent {name!r}: max_loops must be an int >= 1, got {max_loops!r}")
        if until is not None and not callable(until):
            raise ConfigurationError(f"LoopAgent {name!r}: until must be callable, got {until!r}")
        self.agent = agent
        self.agents = (agent,)
        self.max_loops = max_loops
        self.until = until

    async def _done(self, result: TurnResult) -> bool:
        if self.until is None:
            return False
        try:
            answer = self.until(result)
            if inspect.isawaitable(answer):
                answer = await answer
        except Exception as exc:
            raise SubturnError(
                f"LoopAgent {self.name!r}: until raised {type(exc).__name__}: {exc}") from exc
        return bool(answer)

    async def run(self, scope: CompositeScope) -> str:
        text = scope.input
        for _ in range(self.max_loops):
            result = await scope.run_child(self.agent, text)
            if result.status not in USABLE:
                raise _failed(f"LoopAgent {self.name!r}", self.agent, result)
            text = scope.text = result.text
            if await self._done(result):
                break
        return text

    def __repr__(self) -> str:
        return f"<LoopAgent {self.name} agent={self.agent.name} max_loops={self.max_loops}>"


class ParallelAgent(CompositeAgent):
    """Runs ``agents`` at once on the same input (at most ``Limits.subturns_per_turn`` at a
    time, the rest as slots free up). The answer lists each child's text under its name, in
    the order given; a child that fails is listed with its status and does not stop the
    others. The composite ends in error only if every child failed."""

    def __init__(self, *, name: str, agents: Sequence[BaseAgent], description: str = "",
                 grace: float = 1.0) -> None:
        self._set_identity(name, description)
        self._set_grace(grace)
        self.agents = _need_children(f"ParallelAgent {name!r}", agents)

    async def run(self, scope: CompositeScope) -> str:
        scope.check()  # the one boundary: before the group starts
        gate = asyncio.Semaphore(scope.max_parallel)

        async def one(child: BaseAgent) -> Any:
            async with gate:
                if scope.stopping():  # stopped while this child waited for a slot
                    return SubturnError("the composite was stopped before it started")
                try:
                    return await scope.run_child(child, scope.input, check=False)
                except SubturnError as exc:  # refused (a limit): listed like a failure
                    return exc

        results: list[TurnResult | SubturnError] = await asyncio.gather(
            *(one(c) for c in self.agents))
        sections, failed = [], 0
        for child, result in zip(self.agents, results, strict=True):
            if isinstance(result, SubturnError):
                failed += 1
                sections.append(f"## {child.name} (not started: {result})")
            elif result.status in USABLE:
                sections.append(f"## {child.name}\n{result.text}")
            else:
                failed += 1
                why = f": {result.error}" if result.error is not None else ""
                sections.append(f"## {child.name} ({result.status.value}{why})\n{result.text}")
        if failed == len(results):
            raise SubturnError(f"ParallelAgent {self.name!r}: every child failed\n\n"
                               + "\n\n".join(sections))
        return "\n\n".join(sections).rstrip()

    def __repr__(self) -> str:
        return f"<ParallelAgent {self.name} agents={[a.name for a in self.agents]}>"
