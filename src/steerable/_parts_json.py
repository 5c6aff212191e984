"""The JSON form of content parts, kept apart from the values (``steerable._parts``).

``{"type": "text", "text": ...}``; ``{"type": "image" | "file", "media_type": ..., "name": ...}``
with the bytes inline as base64 (``"data"``), by reference (``"blob"``: their SHA-256, the bytes
kept by a store beside the history) or as a ``"url"``. The stores, the recordings, the command
wire forms and the server's API all read and write this one form.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import Any

from steerable._parts import FilePart, ImagePart, Part, TextPart
from steerable._secrets import Opaque

__all__ = ["BlobReader", "blob_key", "blob_refs", "part_from_json", "part_summary",
           "part_to_json", "parts_from_json", "parts_to_json"]

BlobReader = Callable[[str], bytes]
"""Gives the bytes stored under a blob key (a store raises ``MissingBlobError`` when gone)."""

_BLOB_KEY = re.compile(r"^[0-9a-f]{64}$")


def blob_key(data: bytes) -> str:
    """The key binary data is stored under: its SHA-256, in hex (the same bytes are kept
    once however often they are sent)."""
    return hashlib.sha256(data).hexdigest()


def blob_refs(raw: Any) -> set[str]:
    """The blob keys a message's JSON form refers to."""
    content = raw.get("content") if isinstance(raw, Mapping) else None
    if type(content) is not list:
        return set()
    return {str(p["blob"]) for p in content if isinstance(p, Mapping) and "blob" in p}


def part_to_json(part: Part, blobs: MutableMapping[str, bytes] | None) -> dict[str, Any]:
    """``part`` as JSON; its bytes go into ``blobs`` (by key) when given, else inline."""
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


def part_from_json(raw: Any, blobs: BlobReader | None) -> Part:
    """The part of a JSON form; ``ValueError`` (or ``TypeError``) says what is wrong."""
    if not isinstance(raw, Mapping):
        raise ValueError("a content part must be an object")
    kind = raw.get("type")
    if kind == "text":
        if not isinstance(raw.get("text"), str):
            raise ValueError("a text part needs its 'text'")
        return TextPart(raw["text"])
    if kind not in ("image", "file"):
        raise ValueError(f"unknown content part type {kind!r}")
    data: bytes | None = None
    if "data" in raw:
        try:
            data = base64.b64decode(str(raw["data"]), validate=True)
        except binascii.Error as exc:
            raise ValueError(f"bad base64 in a content part: {exc}") from None
    elif "blob" in raw:
        key = str(raw["blob"])
        if not _BLOB_KEY.match(key) or blobs is None:
            raise ValueError(f"a {kind} part refers to blob {key!r}, which cannot be read here: "
                             "give the bytes as 'data' (base64) or a 'url'")
        data = blobs(key)
    if kind == "image":
        return ImagePart(data=data, media_type=raw.get("media_type"), url=raw.get("url"))
    return FilePart(data=data, media_type=raw.get("media_type"), url=raw.get("url"),
                    name=raw.get("name"))


def parts_from_json(raw: Any) -> tuple[Part, ...]:
    """Content parts with their bytes inline or by URL (what an API client or a recording
    gives); ``ValueError`` names the first bad one."""
    if not isinstance(raw, list) or not raw:
        raise ValueError("parts must be a non-empty list of part objects")
    out = []
    for index, item in enumerate(raw):
        try:
            out.append(part_from_json(item, None))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"part {index}: {exc}") from None
    return tuple(out)


def parts_to_json(parts: Sequence[Part]) -> list[dict[str, Any]]:
    """``parts`` with their bytes inline (what ``parts_from_json`` reads)."""
    return [part_to_json(p, None) for p in parts]


def part_summary(part: Part) -> dict[str, Any]:
    """What an API shows of a part without its bytes: type, media type, name, URL, size."""
    out = part_to_json(part, {})
    out.pop("blob", None)
    return out
