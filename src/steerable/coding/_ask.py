"""The ``ask_user`` tool: the coding agent asks the person a question and gets the answer.

Built on ``ToolContext.ask``, so the question waits as the loop says: answered inline on a
terminal, or parked (``steerable answer REQUEST_ID VALUE``, the server's page) when nobody is
there. Two simple arguments, so that a small model can call it: the question, and optionally
the answers to choose from.
"""

from __future__ import annotations

from steerable.errors import ToolError
from steerable.tools import FunctionTool, ToolContext, tool

__all__ = ["make_ask_user_tool"]

MAX_CHOICES = 10


def make_ask_user_tool() -> FunctionTool:
    @tool(read_only=True)
    async def ask_user(question: str, ctx: ToolContext, choices: list[str] | None = None) -> str:
        """Ask the user a question when you need their decision or a fact only they know.

        Args:
            question: The question, short and clear.
            choices: Optional answers the user picks from, e.g. ["yes", "no"].
        """
        if not question.strip():
            raise ToolError("question must not be empty")
        picks = None
        if choices:  # a small model sends [] or [""] for "no choices": that is none
            picks = list(dict.fromkeys(c.strip() for c in choices if c.strip()))[:MAX_CHOICES]
        answer = await ctx.ask(question.strip(), choices=picks or None)
        return f"The user answered: {answer}"

    return ask_user
