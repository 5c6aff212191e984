"""The two built-in tools of an agent with ``subagents``: ``subagent`` (wait) and ``spawn``.

Both are thin: they check the arguments and go through the same ``ToolContext`` entry point a
user's tool would use, so limits, events and interrupts are the engine's, not theirs. They are
read-only: delegating changes nothing by itself (the child's own tools are asked for approval
like any other), and several ``subagent`` calls of one reply may then run side by side.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from steerable._events import TurnStatus
from steerable._messages import ToolResult
from steerable.errors import ToolArgumentsError
from steerable.tools._base import BaseTool, ToolContext

__all__ = ["DelegateTool"]

_USABLE = (TurnStatus.COMPLETED, TurnStatus.MAX_ITERATIONS, TurnStatus.INTERRUPTED,
           TurnStatus.BUDGET_EXCEEDED)


def _roster(children: Sequence[Any]) -> str:
    lines = []
    for child in children:
        about = " ".join(child.description.split()) or "(no description)"
        lines.append(f"- {child.name}: {about}")
    return "\n".join(lines)


class DelegateTool(BaseTool):
    read_only = True

    def __init__(self, children: Sequence[Any], *, is_async: bool) -> None:
        self._names = tuple(c.name for c in children)
        self._async = is_async
        self.name = "spawn" if is_async else "subagent"
        if is_async:
            what = ("Start a sub-agent on a task in the background and go on at once. Its answer "
                    "is added to the conversation when it finishes.")
        else:
            what = "Give a task to a sub-agent and wait for its answer."
        self.description = (f"{what} The sub-agent sees only the task text, so make it "
                            f"self-contained. Sub-agents:\n{_roster(children)}")

    @property
    def parameters(self) -> Mapping[str, Any]:
        return {
            "type": "object",
            "properties": {
                "agent": {"type": "string", "enum": list(self._names),
                          "description": "The sub-agent's name."},
                "task": {"type": "string", "description": "What the sub-agent should do."},
            },
            "required": ["agent", "task"],
            "additionalProperties": False,
        }

    def validate(self, arguments: Mapping[str, Any]) -> Mapping[str, Any]:
        agent, task = arguments.get("agent"), arguments.get("task")
        valid = ", ".join(self._names)
        if not isinstance(agent, str) or agent not in self._names:
            raise ToolArgumentsError(f"Unknown agent {agent!r} for tool '{self.name}'. "
                                     f"Valid agents: {valid}.")
        if not isinstance(task, str) or not task.strip():
            raise ToolArgumentsError(f"Tool '{self.name}' needs a non-empty 'task' text.")
        return {"agent": agent, "task": task}

    async def run(self, arguments: Mapping[str, Any], ctx: ToolContext) -> Any:
        agent, task = arguments["agent"], arguments["task"]
        if self._async:
            handle = ctx.spawn_subturn(agent, task)
            return (f"Started sub-agent {agent} (turn {handle.turn_id}). Its answer will be "
                    "added to the conversation when it finishes.")
        result = await ctx.run_subturn(agent, task)
        if result.status in _USABLE:
            return result.text
        why = f": {result.error}" if result.error is not None else ""
        return ToolResult(f"Sub-agent {agent} ended {result.status.value}{why}. "
                          f"{result.text}".rstrip(), is_error=True)

    def preview(self, arguments: Mapping[str, Any], ctx: ToolContext) -> str:
        # Read-only, so never asked for in dry-run; kept meaningful all the same.
        return f"[dry-run] would delegate to sub-agent {arguments.get('agent')!r}"
