"""What the tool policy reads off the messages of this exchange (since the last answer): the
calls made, which repeat an earlier one, what the answer may draw on."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence, Set

from steerable._messages import Message
from steerable.coding._changes import Snapshot
from steerable.coding._classify import exchange_start
from steerable.providers._base import ToolSpec
from steerable.providers.profiles import tool_result_as_user

__all__ = ["as_shown", "call_key", "called", "changed_in", "evidence_of", "has_tool", "looked_at", "repeated",
           "turn_messages", "without_calls"]


def has_tool(tools: Sequence[ToolSpec], name: str) -> bool:
    return any(t.name == name for t in tools)


def turn_messages(messages: Sequence[Message]) -> list[Message]:
    return [m for m in messages[exchange_start(messages):] if m.role != "system"]


def looked_at(turn: Sequence[Message], looks: Set[str], blank: Set[str]) -> bool:
    """A tool that reads the workspace was called in this exchange and showed something."""
    return any(c.name in looks and c.id not in blank
               for m in turn if m.role == "assistant" for c in m.tool_calls)


def repeated(turn: Sequence[Message], changers: set[str] | None = None,
             looks: frozenset[str] = frozenset(), skip: set[str] | None = None) -> bool:
    """The latest calls repeat one already made in this exchange. A call of ``looks`` made
    before one of the calls ``changers`` (ids of calls that changed files) does not count:
    after a change, reading the same file again is a new look (its text is not what the first
    read showed); the same change is still a repeat. A call of ``skip`` (denied: it never ran)
    is matched only by a call denied again: the 1.5B's write denied before it read the file,
    sent again after the read and run, was no repeat; the same call denied twice is (the
    1.5B called a `bash` no question is offered three times, to the round limit, and then
    answered a count from the denials instead of the listing it had)."""
    denied = skip or set()
    seen: list[tuple[str, str, bool]] = []
    latest: list[tuple[str, str, bool]] = []
    for m in turn:
        if m.role == "assistant" and m.tool_calls:
            seen.extend(latest)
            latest = [(c.name, call_key(c.name, dict(c.arguments)), c.id in denied)
                      for c in m.tool_calls]
        elif m.role == "tool" and changers and m.tool_call_id in changers:
            seen = [call for call in seen if call[0] not in looks]
    return any(call in seen for call in latest)


def called(turn: Sequence[Message], ids: set[str]) -> set[str]:
    """The names of the tools of the calls ``ids`` in this exchange."""
    return {c.name for m in turn if m.role == "assistant" for c in m.tool_calls if c.id in ids}


def call_key(name: str, arguments: object) -> str:
    return f"{name}:{json.dumps(arguments, sort_keys=True, default=str)}"


def evidence_of(messages: Sequence[Message], turn: Sequence[Message]) -> tuple[str, list[str]]:
    """Everything the answer may draw on (the request, the calls, the results), and the
    results alone."""
    parts: list[str] = []
    results: list[str] = []
    for m in turn:
        if m.role == "tool":
            results.append(m.text)
        parts.append(m.text)
        parts.extend(json.dumps(dict(c.arguments), ensure_ascii=False) for c in m.tool_calls)
    return "\n".join(parts), results


def as_shown(turn: Sequence[Message]) -> list[str]:
    """The tool results as a profile that keeps the conversation in text shows them to the
    model ("Result of grep({...}):" and the text): a model that repeats one echoes it too."""
    calls = {c.id: c for m in turn if m.role == "assistant" for c in m.tool_calls}
    return [tool_result_as_user(m, calls) for m in turn if m.role == "tool"]


def without_calls(messages: Sequence[Message], ids: set[str],
                  keep: Set[str] = frozenset()) -> list[Message]:
    """``messages`` without the calls ``ids`` and their results (an assistant message left
    with neither calls nor words goes too), but for the calls on a ``path`` of ``keep`` that
    failed (a file that does not exist, not a search that matched nothing)."""
    failed = {m.tool_call_id for m in messages if m.role == "tool" and m.is_error}
    ids = {c.id for m in messages for c in m.tool_calls
           if c.id in ids and not (c.id in failed and c.arguments.get("path") in keep)}
    out: list[Message] = []
    for m in messages:
        if m.role == "tool" and m.tool_call_id in ids:
            continue
        if m.role == "assistant" and any(c.id in ids for c in m.tool_calls):
            kept = tuple(c for c in m.tool_calls if c.id not in ids)
            if not kept and not m.text:
                continue
            m = dataclasses.replace(m, tool_calls=kept)
        out.append(m)
    return out


def changed_in(turn: Sequence[Message], tools: Sequence[ToolSpec], start: Snapshot | None,
               now: Snapshot | None, commands: Set[str]) -> bool:
    """Something changed in this exchange: a file-changing tool succeeded, or the workspace
    differs from ``start`` (the success of one of ``commands`` alone is no change)."""
    acting = {t.name for t in tools if not t.read_only} - commands
    if any(m.role == "tool" and not m.is_error and m.name in acting for m in turn):
        return True
    return start is not None and now is not None and bool(start.changed(now))
