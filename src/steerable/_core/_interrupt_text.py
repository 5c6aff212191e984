"""The text a gracefully interrupted turn ends with, when the model's own summary is unusable.

Small models asked to sum up after an interrupt sometimes repeat the request itself ("The user
interrupted you. Stop here...") or say nothing; saved as the answer, that text then misleads the
next turn. Such a reply is replaced by a plain account built from what really ran.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["fallback_summary", "is_echo"]


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())


def is_echo(reply: str, hint: str) -> bool:
    """Whether ``reply`` is empty or mostly a repetition of ``hint``."""
    said, asked = _words(reply), _words(hint)
    if not said:
        return True
    if not asked:
        return False
    import difflib  # (only a graceful interrupt's summary is checked: not at import)

    matcher = difflib.SequenceMatcher(None, said, asked, autojunk=False)
    shared = sum(block.size for block in matcher.get_matching_blocks())
    # Most of the reply is the hint's words in the hint's order.
    return shared >= 0.6 * len(said) and shared >= min(6, len(asked))


def fallback_summary(tools_run: Sequence[str]) -> str:
    """"Interrupted after ..." naming the tools that ran (or that none did)."""
    if not tools_run:
        return "Interrupted before any tool ran."
    calls = "1 tool call" if len(tools_run) == 1 else f"{len(tools_run)} tool calls"
    return f"Interrupted after {calls} ({', '.join(tools_run)})."
