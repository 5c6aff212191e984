"""The ``todo`` tool: the agent's plan for a task, shown to the user as it changes.

The model sends the whole list each time (as Claude Code's TodoWrite takes it): each item's
``content`` and ``status`` (``pending``, ``in_progress`` or ``done``). Every accepted list is
emitted as a ``PLAN_UPDATED`` event, which the CLI draws as a checklist; the tool's answer
repeats the plan, so the model reads back what it set.
"""

from __future__ import annotations

from typing import Any

from steerable.errors import ToolError
from steerable.tools import FunctionTool, ToolContext, tool

__all__ = ["PLAN_STATUSES", "make_todo_tool", "plan_text"]

PLAN_STATUSES = ("pending", "in_progress", "done")
_ALIASES = {"completed": "done", "complete": "done", "in-progress": "in_progress",
            "todo": "pending"}
_MARKS = {"pending": "[ ]", "in_progress": "[~]", "done": "[x]"}
MAX_ITEMS = 50


def _item(raw: Any, index: int) -> dict[str, str]:
    if not isinstance(raw, dict):
        raise ToolError(f"item {index + 1} must be an object with content and status")
    content = raw.get("content")
    status = str(raw.get("status", "pending")).strip().lower()
    status = _ALIASES.get(status, status)
    if not isinstance(content, str) or not content.strip():
        raise ToolError(f"item {index + 1} needs a non-empty 'content' string")
    if status not in PLAN_STATUSES:
        raise ToolError(f"item {index + 1}: status must be one of {', '.join(PLAN_STATUSES)}, "
                        f"got {raw.get('status')!r}")
    return {"content": " ".join(content.split()), "status": status}


def plan_text(items: list[dict[str, str]]) -> str:
    return "\n".join(f"{_MARKS[i['status']]} {i['content']}" for i in items) or "(empty plan)"


def make_todo_tool() -> FunctionTool:
    @tool(read_only=True)
    def todo(items: list[dict[str, str]], ctx: ToolContext) -> str:
        """Write down your plan for a task of several steps, and keep it current: send the
        whole list each time, marking the step you work on in_progress and finished ones done.

        Args:
            items: Every step, in order: {"content": "what to do", "status": "pending" |
                "in_progress" | "done"}.
        """
        if not isinstance(items, list):
            raise ToolError("items must be a list of {content, status} objects")
        if len(items) > MAX_ITEMS:
            raise ToolError(f"a plan has at most {MAX_ITEMS} items")
        plan = [_item(raw, i) for i, raw in enumerate(items)]
        ctx.update_plan(plan)
        done = sum(i["status"] == "done" for i in plan)
        return f"plan updated ({done}/{len(plan)} done):\n{plan_text(plan)}"

    return todo
