"""``Agent``: what an agent is (instructions, model, tools, budget), independent of any loop.

``BaseAgent`` is what every agent shares (a name, a description): the model-driven ``Agent``
here, and the composite agents that run other agents as sub-turns (``_subturn.CompositeAgent``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from steerable._config import SummaryPolicy
from steerable._messages import Message
from steerable.errors import ConfigurationError
from steerable.providers._base import Provider, ToolSpec
from steerable.tools._base import Tool

if TYPE_CHECKING:
    from steerable._core._output import OutputSpec

__all__ = ["Agent", "BaseAgent", "check_children"]


def _spec(tool: Tool) -> ToolSpec:
    return ToolSpec(tool.name, tool.description, tool.parameters, tool.read_only)


def _tools_by_name(tools: object) -> dict[str, Tool]:
    if isinstance(tools, str | bytes) or not isinstance(tools, Sequence):
        raise ConfigurationError("Agent tools must be a list of tools")
    by_name: dict[str, Tool] = {}
    for t in tools:
        if not (isinstance(getattr(t, "name", None), str) and callable(getattr(t, "run", None))):
            raise ConfigurationError(
                f"{t!r} is not a tool: decorate the function with @tool or subclass BaseTool"
            )
        if t.name in by_name:
            raise ConfigurationError(f"two tools are named {t.name!r}; tool names must be unique")
        by_name[t.name] = t
    return by_name


class BaseAgent:
    """What every agent has: a ``name`` (unique among siblings) and a ``description`` (what it
    is for, shown to a parent model that may delegate to it)."""

    name: str
    description: str

    def _set_identity(self, name: object, description: object) -> None:
        if not isinstance(name, str) or not name:
            raise ConfigurationError(f"agent name must be a non-empty str, got {name!r}")
        if not isinstance(description, str):
            raise ConfigurationError(
                f"agent description must be a str, got {type(description).__name__}")
        self.name = name
        self.description = description


def check_children(owner: str, children: object, *, allow_repeats: bool = False) -> tuple[BaseAgent, ...]:
    """Validate a list of child agents: each an agent, names unique (the same agent object may
    appear twice only with ``allow_repeats``, for a sequence that runs it again)."""
    if isinstance(children, str | bytes | BaseAgent) or not isinstance(children, Sequence):
        raise ConfigurationError(f"{owner} needs a list of agents, got {type(children).__name__}")
    seen: dict[str, BaseAgent] = {}
    for child in children:
        if not isinstance(child, BaseAgent):
            raise ConfigurationError(
                f"{owner}: {child!r} is not an agent (expected Agent, SequentialAgent, "
                "LoopAgent or ParallelAgent)")
        other = seen.get(child.name)
        if other is not None and not (allow_repeats and other is child):
            raise ConfigurationError(
                f"{owner}: two child agents are named {child.name!r}; names must be unique")
        seen[child.name] = child
    return tuple(children)


def _check_options(provider: Provider, instructions: str, max_iterations: int, dry_run: bool,
                   context_window: int | None, summary: SummaryPolicy | None) -> None:
    """Refuse, with a clear error, the options of an ``Agent`` that are of the wrong kind."""
    if not callable(getattr(provider, "stream", None)):
        raise ConfigurationError(
            f"Agent provider must have a stream(request) method, got {type(provider).__name__}"
        )
    if not isinstance(instructions, str):
        raise ConfigurationError(
            f"Agent instructions must be a str, got {type(instructions).__name__}"
        )
    if isinstance(max_iterations, bool) or not isinstance(max_iterations, int) or max_iterations < 1:
        raise ConfigurationError(f"max_iterations must be an int >= 1, got {max_iterations!r}")
    if not isinstance(dry_run, bool):
        raise ConfigurationError(f"dry_run must be a bool, got {type(dry_run).__name__}")
    if context_window is not None and (
        isinstance(context_window, bool) or not isinstance(context_window, int) or context_window < 1
    ):
        raise ConfigurationError(f"context_window must be a positive int, got {context_window!r}")
    if summary is not None and not isinstance(summary, SummaryPolicy):
        raise ConfigurationError(f"summary must be a SummaryPolicy, got {type(summary).__name__}")


def _add_delegates(by_name: dict[str, Tool], children: tuple[BaseAgent, ...]) -> None:
    """An agent with subagents gets the built-in ``subagent`` and ``spawn`` tools."""
    if not children:
        return
    for builtin in ("subagent", "spawn"):
        if builtin in by_name:
            raise ConfigurationError(
                f"a tool is named {builtin!r}, the name of a built-in tool of agents "
                "with subagents; rename it")
        # Imported by the agents that have subagents only: the core's import stays smaller.
        from steerable._core._subturn_tools import DelegateTool

        by_name[builtin] = DelegateTool(children, is_async=builtin == "spawn")


class Agent(BaseAgent):
    """An agent: a provider, instructions and tools, with an iteration budget.

    ``max_iterations`` is the number of LLM calls one turn may make; the last one may call no
    tool (``ToolChoice("none")``) so the model must answer. ``dry_run`` makes mutating tools
    return a preview instead of running. ``context_window`` (tokens) lets the loop compress
    before a request that would not fit; without it the loop compresses when the provider
    reports an overflow.
    ``summary`` turns on background summarisation of long sessions after each turn.
    ``subagents`` are agents this one may delegate to: the model is offered the ``subagent``
    (wait for the child's answer) and ``spawn`` (start it in the background) tools, whose
    description lists each child's name and ``description``.
    ``output_type`` (a pydantic model, dataclass, TypedDict or any type pydantic can
    validate) makes the final answer structured: it is asked for in the provider's native form
    where there is one, checked, asked again with the errors up to ``output_retries`` times,
    and returned in ``result.output`` (see ``_output``).
    """

    def __init__(
        self,
        *,
        provider: Provider,
        name: str = "agent",
        instructions: str = "",
        tools: Sequence[Tool] = (),
        max_iterations: int = 20,
        dry_run: bool = False,
        model: str | None = None,
        params: Mapping[str, Any] | None = None,
        context_window: int | None = None,
        summary: SummaryPolicy | None = None,
        description: str = "",
        subagents: Sequence[BaseAgent] = (),
        output_type: Any = None,
        output_retries: int = 2,
    ) -> None:
        _check_options(provider, instructions, max_iterations, dry_run, context_window, summary)
        self._set_identity(name, description)
        by_name = _tools_by_name(tools)
        children = check_children(f"Agent {name!r} subagents", subagents)
        _add_delegates(by_name, children)
        self.subagents: tuple[BaseAgent, ...] = children
        self.subagents_by_name: Mapping[str, BaseAgent] = MappingProxyType(
            {c.name: c for c in children})
        self.provider = provider
        self.instructions = instructions
        self.max_iterations = max_iterations
        self.dry_run = dry_run
        self.model = model
        self.params: Mapping[str, Any] = MappingProxyType(dict(params or {}))
        self.context_window = context_window
        self.summary = summary
        self.tools: tuple[Tool, ...] = tuple(by_name.values())
        self.tools_by_name: Mapping[str, Tool] = MappingProxyType(by_name)
        self.tool_specs: tuple[ToolSpec, ...] = tuple(_spec(t) for t in self.tools)
        self.tool_names: frozenset[str] = frozenset(by_name)
        """The names of ``tool_specs``: what a call is offered unless a hook changed it."""
        self.output: OutputSpec | None = None
        if output_type is not None:  # (structured output: imported when an agent asks for it)
            from steerable._core._output import OutputSpec

            self.output = OutputSpec(output_type, output_retries)
        self._head: tuple[Message, ...] = ()

    def system_head(self) -> tuple[Message, ...]:
        """The system message that starts each request (none without instructions): one for
        all calls while ``instructions`` stays the same (a request's own was two objects the
        collector tracks per model call in flight)."""
        instructions, head = self.instructions, self._head
        if not instructions:
            return ()
        if not head or head[0].content is not instructions:
            head = self._head = (Message("system", instructions),)
        return head

    def __repr__(self) -> str:
        return f"<Agent {self.name} tools={[t.name for t in self.tools]}>"
