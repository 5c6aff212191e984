"""The conversation so far, compactly, for a chat that continues a saved session.

Each user message as a ``>`` line, each tool call as one line (``✓``, or ``✗`` when its result
was an error), and the model's answers as Markdown cut to a few lines. A long session shows
only its last turns, saying how many messages came before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rich.console import RenderableType
from rich.markdown import Markdown
from rich.text import Text

from steerable import Message
from steerable.cli._render import describe_call

__all__ = ["recap"]

LAST_TURNS = 10
ANSWER_LINES = 12
USER_LINES = 4


def _cut(text: str, lines: int) -> str:
    rows = text.strip().splitlines()
    return "\n".join(rows[:lines]) + (f"\n… {len(rows) - lines} more lines"
                                      if len(rows) > lines else "")


def recap(messages: Sequence[Message], redact: Callable[[str], str],
          last_turns: int = LAST_TURNS) -> list[RenderableType]:
    """Printable blocks for ``messages`` (the last ``last_turns`` user messages on)."""
    starts = [i for i, m in enumerate(messages) if m.role == "user"]
    first = starts[-last_turns] if len(starts) > last_turns else 0
    failed = {m.tool_call_id for m in messages if m.role == "tool" and m.is_error}
    blocks: list[RenderableType] = []
    if first:
        blocks.append(Text(f"… {first} earlier messages (steerable sessions show lists them)",
                           style="dim"))
    for m in messages[first:]:
        if m.role == "user":
            blocks.append(Text(f"> {redact(_cut(m.text, USER_LINES))}", style="bold cyan"))
        elif m.role == "assistant":
            if m.text.strip():
                blocks.append(Markdown(redact(_cut(m.text, ANSWER_LINES))))
            for call in m.tool_calls:
                mark, style = ("✗", "red") if call.id in failed else ("✓", "green")
                line = redact(describe_call(call.name, call.arguments))
                blocks.append(Text(f"  {mark} {call.name} {line}", style=style))
    return blocks
