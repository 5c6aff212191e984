"""The storage form of messages and turn markers: plain JSON objects with a schema version.

Kept apart from the value types in ``steerable._messages`` so that the files on disk can keep
their shape while the classes change. Every record carries ``v`` (the schema version that wrote
it); a reader decodes each version it knows and refuses newer ones with a clear message.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from steerable._messages import Message, ToolCall

__all__ = ["SCHEMA_VERSION", "RecordError", "message_from_record", "message_to_record",
           "session_title"]

SCHEMA_VERSION = 1


class RecordError(ValueError):
    """A record that is valid JSON but not a record this version can read."""


def message_to_record(message: Message) -> dict[str, Any]:
    """The JSON object for ``message``; fields at their default value are left out."""
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        calls = []
        for call in message.tool_calls:
            item: dict[str, Any] = {"id": call.id, "name": call.name,
                                    "arguments": dict(call.arguments)}
            if call.arguments_error:
                item["arguments_error"] = call.arguments_error
            calls.append(item)
        out["tool_calls"] = calls
    if message.tool_call_id is not None:
        out["tool_call_id"] = message.tool_call_id
    if message.name is not None:
        out["name"] = message.name
    if message.is_error:
        out["is_error"] = True
    return out


def _call_v1(raw: Any) -> ToolCall:
    if not isinstance(raw, Mapping):
        raise RecordError("a tool call must be an object")
    return ToolCall(str(raw["id"]), str(raw["name"]), dict(raw.get("arguments") or {}),
                    raw.get("arguments_error"))


def message_from_record(raw: Any, version: int) -> Message:
    """Decode the ``message`` field of a record written by schema ``version``."""
    if version != 1:
        raise RecordError(f"no decoder for schema version {version}")
    if not isinstance(raw, Mapping):
        raise RecordError("a message must be an object")
    try:
        if "tool_calls" not in raw:  # most messages: skip the tool-call decoding
            return Message(raw["role"], raw.get("content", ""),
                           tool_call_id=raw.get("tool_call_id"), name=raw.get("name"),
                           is_error=bool(raw.get("is_error", False)))
        return Message(
            raw["role"], raw.get("content", ""),
            tool_calls=tuple(_call_v1(c) for c in raw.get("tool_calls", ())),
            tool_call_id=raw.get("tool_call_id"), name=raw.get("name"),
            is_error=bool(raw.get("is_error", False)),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise RecordError(f"bad message: {exc}") from None


def session_title(messages: Sequence[Message], redact: Callable[[str], str] | None) -> str:
    """A new session's title: its first user message on one line, at most 100 characters,
    redacted before it is cut (a cut secret would no longer be recognised)."""
    title = next((m.text for m in messages if m.role == "user"), "")
    if redact is not None:
        title = redact(title)
    return " ".join(title.split())[:100]
