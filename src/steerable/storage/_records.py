"""The storage form of messages and turn markers: plain JSON objects with a schema version.

Kept apart from the value types in ``steerable._messages`` so that the files on disk can keep
their shape while the classes change. Every record carries ``v`` (the schema version that wrote
it); a reader decodes each version it knows and refuses newer ones with a clear message.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import Any

from steerable._messages import Message, ToolCall
from steerable._parts import text_of
from steerable._parts_json import BlobReader, part_from_json, part_to_json
from steerable.errors import SteerableError

__all__ = ["SCHEMA_VERSION", "BlobReader", "MissingBlobError", "RecordError",
           "message_from_record", "message_to_record", "session_title"]

SCHEMA_VERSION = 1


class RecordError(ValueError):
    """A record that is valid JSON but not a record this version can read."""


class MissingBlobError(SteerableError):
    """A message refers to binary data (an image, a file) that its store no longer holds."""


def message_to_record(message: Message,
                      blobs: MutableMapping[str, bytes] | None = None) -> dict[str, Any]:
    """The JSON object for ``message``; fields at their default value are left out.

    Content parts become objects; the bytes of an image or file go into ``blobs`` (key ->
    bytes, for the store to keep beside the history) and the record holds the key, or are
    written inline as base64 when ``blobs`` is None."""
    content = message.content
    out: dict[str, Any] = {"role": message.role, "content": content if isinstance(
        content, str) else [part_to_json(p, blobs) for p in content]}
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


def message_from_record(raw: Any, version: int, blobs: BlobReader | None = None) -> Message:
    """Decode the ``message`` field of a record written by schema ``version``; ``blobs``
    gives the bytes of parts stored by key (``MissingBlobError`` when they are gone)."""
    if version != 1:
        raise RecordError(f"no decoder for schema version {version}")
    if not isinstance(raw, Mapping):
        raise RecordError("a message must be an object")
    try:
        content = raw.get("content", "")
        if type(content) is list:
            content = [part_from_json(p, blobs) for p in content]
        if "tool_calls" not in raw:  # most messages: skip the tool-call decoding
            return Message(raw["role"], content,
                           tool_call_id=raw.get("tool_call_id"), name=raw.get("name"),
                           is_error=bool(raw.get("is_error", False)))
        return Message(
            raw["role"], content,
            tool_calls=tuple(_call_v1(c) for c in raw.get("tool_calls", ())),
            tool_call_id=raw.get("tool_call_id"), name=raw.get("name"),
            is_error=bool(raw.get("is_error", False)),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise RecordError(f"bad message: {exc}") from None


def session_title(messages: Sequence[Message], redact: Callable[[str], str] | None) -> str:
    """A new session's title: its first user message on one line, at most 100 characters,
    redacted before it is cut (a cut secret would no longer be recognised)."""
    title = next((text_of(m.content) for m in messages if m.role == "user"), "")
    if redact is not None:
        title = redact(title)
    return " ".join(title.split())[:100]
