"""How the CLI tells a person about a session's pending turn (a cancelled one, or one cut off
when its process stopped): ``run``, ``chat`` and ``sessions`` say it the same way."""

from __future__ import annotations

from typing import Any

__all__ = ["describe_pending"]


def describe_pending(session_id: str, cp: Any, resume: str, discard: str) -> str:
    """One paragraph on a session's pending turn, and the commands that continue or drop it."""
    why = f"cancelled ({cp.cancel_mode})" if cp.cancel_mode else "cut off (its process stopped)"
    tools = ", ".join(c.name for c in cp.pending_calls)
    todo = f"; tool calls still to run: {tools}" if tools else ""
    return (f"session {session_id} has a pending turn, {why} after {cp.iteration} LLM "
            f"call(s){todo}. Input: {cp.input[:80]!r}. Continue it with {resume}, or drop it "
            f"with {discard}.")
