"""The agents of a worker's tree by path: how an activity finds, among an agent's subagents
and a composite's children, the agent whose model or tool the workflow calls."""

from __future__ import annotations

from steerable import Agent
from steerable._core._agent import BaseAgent
from steerable._core._composite import CompositeAgent
from steerable.errors import ConfigurationError

__all__ = ["agent_table"]


def agent_table(root: object) -> dict[str, Agent]:
    """Every model-driven agent of ``root``'s tree (its subagents, a composite's children, to
    any depth) by its path of names (``coder/explorer``): how an activity finds the agent
    whose provider or tool the workflow calls. Names are unique among siblings, so the path
    names one agent (the same object repeated in a sequence is one entry)."""
    table: dict[str, Agent] = {}

    def walk(agent: object, path: str) -> None:
        if type(agent) is Agent:
            table.setdefault(path, agent)
            children: tuple[BaseAgent, ...] = agent.subagents
        elif isinstance(agent, CompositeAgent):
            children = agent.agents
        else:
            raise ConfigurationError(
                "a Temporal worker runs an Agent or a composite agent (SequentialAgent, "
                f"LoopAgent, ParallelAgent) of them, got {type(agent).__name__} at {path!r}")
        for child in children:
            walk(child, f"{path}/{child.name}")

    walk(root, root.name if isinstance(root, BaseAgent) else "?")
    return table
