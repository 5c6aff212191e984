"""The storage form of messages and turn markers: plain JSON objects with a schema version.

Kept apart from the value types in ``steerable._messages`` so that the files on disk can keep
their shape while the classes change. Every record carries ``v`` (the schema version that wrote
it); a reader decodes each version it knows and refuses newer ones with a clear message.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import Any

from steerable._messages import Message, ToolCall
from steerable._parts import FilePart, ImagePart, Part, TextPart, text_of
from steerable._secrets import Opaque
from steerable.errors import SteerableError

__all__ = ["SCHEMA_VERSION", "BlobReader", "MissingBlobError", "RecordError", "blob_key",
           "blob_refs",
           "message_from_record", "message_to_record", "part_summary", "parts_from_records",
           "parts_to_records", "session_title"]

SCHEMA_VERSION = 1

BlobReader = Callable[[str], bytes]
"""Gives the bytes stored under a blob key, or raises ``MissingBlobError``."""

_BLOB_KEY = re.compile(r"^[0-9a-f]{64}$")


class RecordError(ValueError):
    """A record that is valid JSON but not a record this version can read."""


class MissingBlobError(SteerableError):
    """A message refers to binary data (an image, a file) that its store no longer holds."""


def blob_key(data: bytes) -> str:
    """The key binary data is stored under: its SHA-256, in hex (the same bytes are kept
    once however often they are sent)."""
    return hashlib.sha256(data).hexdigest()


def blob_refs(raw: Any) -> set[str]:
    """The blob keys a message record refers to."""
    content = raw.get("content") if isinstance(raw, Mapping) else None
    if type(content) is not list:
        return set()
    return {str(p["blob"]) for p in content if isinstance(p, Mapping) and "blob" in p}


def _part_to_record(part: Part, blobs: MutableMapping[str, bytes] | None) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    out: dict[str, Any] = {"type": "image" if isinstance(part, ImagePart) else "file"}
    if part.media_type is not None:
        out["media_type"] = part.media_type
    if isinstance(part, FilePart) and part.name is not None:
        out["name"] = part.name
    if part.data is None:
        out["url"] = part.url
    elif blobs is None:
        # Opaque: redaction passes it by (blanking a piece of base64 corrupts the data).
        out["data"] = Opaque(base64.b64encode(part.data).decode("ascii"))
    else:
        key = blob_key(part.data)
        blobs[key] = part.data
        out["blob"], out["size"] = key, len(part.data)
    return out


def _part_from_record(raw: Any, blobs: BlobReader | None) -> Part:
    if not isinstance(raw, Mapping):
        raise RecordError("a content part must be an object")
    kind = raw.get("type")
    if kind == "text":
        return TextPart(str(raw["text"]))
    if kind not in ("image", "file"):
        raise RecordError(f"unknown content part type {kind!r}")
    data: bytes | None = None
    if "data" in raw:
        try:
            data = base64.b64decode(str(raw["data"]), validate=True)
        except binascii.Error as exc:
            raise RecordError(f"bad base64 in a content part: {exc}") from None
    elif "blob" in raw:
        key = str(raw["blob"])
        if not _BLOB_KEY.match(key):
            raise RecordError(f"bad blob key {key!r}")
        if blobs is None:
            raise MissingBlobError(f"a {kind} part refers to blob {key}, but this record was "
                                   "read without its store's blobs")
        data = blobs(key)
    if kind == "image":
        return ImagePart(data=data, media_type=raw.get("media_type"), url=raw.get("url"))
    return FilePart(data=data, media_type=raw.get("media_type"), url=raw.get("url"),
                    name=raw.get("name"))


def parts_from_records(raw: Any) -> tuple[Part, ...]:
    """Content parts given as JSON objects with their bytes inline (``{"type": "image",
    "media_type": "image/png", "data": "<base64>"}``, ``{"type": "text", "text": ...}``, a
    ``url`` instead of ``data``...): what an API client sends. ``RecordError`` says what is
    wrong with the first bad one."""
    if not isinstance(raw, list) or not raw:
        raise RecordError("parts must be a non-empty list of part objects")
    out = []
    for index, item in enumerate(raw):
        if isinstance(item, Mapping) and "blob" in item:
            raise RecordError(f"part {index}: give the bytes as 'data' (base64) or a 'url'")
        try:
            out.append(_part_from_record(item, None))
        except (KeyError, TypeError, ValueError) as exc:
            raise RecordError(f"part {index}: {exc}") from None
    return tuple(out)


def parts_to_records(parts: Sequence[Part]) -> list[dict[str, Any]]:
    """``parts`` as JSON objects with their bytes inline (what ``parts_from_records`` reads)."""
    return [_part_to_record(p, None) for p in parts]


def part_summary(part: Part) -> dict[str, Any]:
    """What an API shows of a part without its bytes: type, media type, name, URL, size."""
    out = _part_to_record(part, {})
    out.pop("blob", None)
    return out


def message_to_record(message: Message,
                      blobs: MutableMapping[str, bytes] | None = None) -> dict[str, Any]:
    """The JSON object for ``message``; fields at their default value are left out.

    Content parts become objects; the bytes of an image or file go into ``blobs`` (key ->
    bytes, for the store to keep beside the history) and the record holds the key, or are
    written inline as base64 when ``blobs`` is None."""
    content = message.content
    out: dict[str, Any] = {"role": message.role, "content": content if isinstance(
        content, str) else [_part_to_record(p, blobs) for p in content]}
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
            content = [_part_from_record(p, blobs) for p in content]
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
