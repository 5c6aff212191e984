"""Context compression: drop the oldest whole exchanges until the history fits.

An exchange starts at a user message and runs to the next one, so dropping whole exchanges
never separates a tool call from its result. The exchange holding the latest user message is
always kept, and the system message is not part of the history here (it is added per request).
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from steerable._messages import Message
from steerable._parts import TextPart

__all__ = ["compress", "estimate_tokens"]

_PART_CHARS = 4 * 1500
"""What an image or file counts for: providers bill a typical image at 1-2k tokens."""


def estimate_tokens(messages: Iterable[Message]) -> int:
    """A cheap estimate (about four characters a token, plus a little per message)."""
    chars = 0
    for m in messages:
        chars += len(m.text) + 16
        if type(m.content) is not str:
            chars += _PART_CHARS * sum(not isinstance(p, TextPart) for p in m.content)
        for call in m.tool_calls:
            chars += len(call.name) + len(json.dumps(call.arguments, default=str))
    return chars // 4


def _exchange_starts(messages: list[Message]) -> list[int]:
    starts = [i for i, m in enumerate(messages) if m.role == "user"]
    if not starts or starts[0] != 0:
        starts.insert(0, 0)  # a history that does not start with a user message
    return starts


def compress(messages: list[Message], target_tokens: int | None) -> int:
    """How many leading messages to drop: whole exchanges, oldest first.

    With a target, drop until the estimate fits; without one (the provider only said "too
    long"), drop the older half of the exchanges. Returns 0 when nothing can be dropped.
    """
    starts = _exchange_starts(messages)
    if len(starts) < 2:
        return 0
    droppable = starts[1:]  # cut points; the last exchange is never dropped
    if target_tokens is None:
        return droppable[max(0, (len(droppable) - 1) // 2)]
    for cut in droppable:
        if estimate_tokens(messages[cut:]) <= target_tokens:
            return cut
    return droppable[-1]
