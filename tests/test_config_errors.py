"""A wrong argument to ``Agent`` or ``AgentLoop`` is a ``ConfigurationError`` that names it
and what it got, raised before anything runs: every check, its exact text."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from steerable import Agent, AgentLoop, Limits, ScriptedProvider, tool
from steerable.errors import ConfigurationError

P = ScriptedProvider([])


@tool
def subagent(x: str) -> str:
    """Named like the built-in."""
    return x


@tool
def twice(x: str) -> str:
    """A tool."""
    return x


def agent(**kw: Any) -> Callable[[], Any]:
    return lambda: Agent(**{"provider": P, **kw})


CASES: list[tuple[str, Callable[[], Any], str]] = [
    ("provider", lambda: Agent(provider=object()),  # type: ignore[arg-type]
     "Agent provider must have a stream(request) method, got object"),
    ("name", agent(name=""), "agent name must be a non-empty str, got ''"),
    ("description", agent(description=3), "agent description must be a str, got int"),
    ("instructions", agent(instructions=["be nice"]),
     "Agent instructions must be a str, got list"),
    ("max_iterations", agent(max_iterations=0), "max_iterations must be an int >= 1, got 0"),
    ("max_iterations_bool", agent(max_iterations=True),
     "max_iterations must be an int >= 1, got True"),
    ("dry_run", agent(dry_run="yes"), "dry_run must be a bool, got str"),
    ("context_window", agent(context_window=0), "context_window must be a positive int, got 0"),
    ("summary", agent(summary={"at_tokens": 5}), "summary must be a SummaryPolicy, got dict"),
    ("tools", agent(tools=twice), "Agent tools must be a list of tools"),
    ("tool", agent(tools=[len]), "<built-in function len> is not a tool: decorate the "
     "function with @tool or subclass BaseTool"),
    ("tool_names", agent(tools=[twice, twice]),
     "two tools are named 'twice'; tool names must be unique"),
    ("subagents", agent(subagents=Agent(provider=P)),
     "Agent 'agent' subagents needs a list of agents, got Agent"),
    ("subagents_str", agent(subagents="ab"),
     "Agent 'agent' subagents needs a list of agents, got str"),
    ("subagents_set", agent(subagents={Agent(provider=P, name="c")}),
     "Agent 'agent' subagents needs a list of agents, got set"),
    ("output_retries", agent(output_type=int, output_retries="2"),
     "output_retries must be an int >= 0, got '2'"),
    ("output_retries_bool", agent(output_type=int, output_retries=True),
     "output_retries must be an int >= 0, got True"),
    ("subagent", agent(subagents=[5]), "Agent 'agent' subagents: 5 is not an agent "
     "(expected Agent, SequentialAgent, LoopAgent or ParallelAgent)"),
    ("subagent_names", agent(subagents=[Agent(provider=P, name="c"),
                                        Agent(provider=P, name="c")]),
     "Agent 'agent' subagents: two child agents are named 'c'; names must be unique"),
    ("builtin", agent(tools=[subagent], subagents=[Agent(provider=P, name="c")]),
     "a tool is named 'subagent', the name of a built-in tool of agents with subagents; "
     "rename it"),
    ("loop_agent", lambda: AgentLoop("agent"),  # type: ignore[arg-type]
     "AgentLoop needs an agent (Agent or a composite), got str"),
    ("loop_store", lambda: AgentLoop(Agent(provider=P), store={}),  # type: ignore[arg-type]
     "store must implement SessionStore (load/append/replace...), got dict"),
    ("loop_limits", lambda: AgentLoop(Agent(provider=P), limits={}),  # type: ignore[arg-type]
     "limits must be a Limits, got dict"),
    ("loop_timeouts", lambda: AgentLoop(Agent(provider=P), timeouts=Limits()),  # type: ignore[arg-type]
     "timeouts must be a Timeouts, got Limits"),
    ("loop_policy", lambda: AgentLoop(Agent(provider=P), busy_policy="wait"),  # type: ignore[arg-type]
     "unknown busy policy 'wait'; use one of ['follow_up', 'interrupt', 'reject', "
     "'rollback', 'steer']"),
]


@pytest.mark.parametrize(("build", "text"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_wrong_argument_is_refused_by_name(build: Callable[[], Any], text: str) -> None:
    with pytest.raises(ConfigurationError, match=f"^{re.escape(text)}$"):
        build()


@pytest.mark.parametrize("buffer", ["3", 0, True])
def test_a_subscription_buffer_must_be_a_positive_int(buffer: Any) -> None:
    loop = AgentLoop(Agent(provider=P))
    with pytest.raises(ValueError, match=f"^subscription buffer must be an int >= 1, got "
                       f"{re.escape(repr(buffer))}$"):
        loop.subscribe(buffer=buffer)


def test_the_smallest_allowed_values_are_accepted() -> None:
    # The boundaries of the checks above: one iteration, a one-token window, no retry.
    built = Agent(provider=P, max_iterations=1, context_window=1, output_type=int,
                  output_retries=0)
    assert (built.max_iterations, built.context_window) == (1, 1)
