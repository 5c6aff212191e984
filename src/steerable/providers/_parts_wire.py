"""Content parts in each provider's wire format.

OpenAI Chat Completions: ``text``, ``image_url`` (a URL or a ``data:`` URL) and ``file``
(``file_data`` as a ``data:`` URL; the API takes PDFs) parts; a text file goes as a text part,
which every OpenAI-compatible server reads. Anthropic Messages: ``text``, ``image`` and
``document`` blocks with a ``base64``, ``text`` or ``url`` source.

A part a wire cannot carry raises ``FatalProviderError`` naming the part and what to do, before
anything is sent: retrying would not help and nothing of the conversation is lost.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from typing import Any

from steerable._parts import FilePart, ImagePart, Part, TextPart, text_of
from steerable.errors import FatalProviderError

__all__ = ["anthropic_blocks", "openai_parts", "unsupported_parts"]


def _data_url(media_type: str | None, data: bytes) -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode('ascii')}"


def _is_text(part: FilePart) -> bool:
    media = part.media_type or ""
    return media.startswith("text/") or media in ("application/json", "application/xml")


def _file_text(part: FilePart) -> str:
    assert part.data is not None
    name = f" name={part.name!r}" if part.name else ""
    return f"<file{name} type={part.media_type!r}>\n" \
           f"{part.data.decode('utf-8', errors='replace')}\n</file>"


def openai_parts(parts: Iterable[Part]) -> list[dict[str, Any]]:
    """The Chat Completions content array of a user message."""
    out: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, TextPart):
            out.append({"type": "text", "text": part.text})
        elif isinstance(part, ImagePart):
            url = part.url if part.data is None else _data_url(part.media_type, part.data)
            out.append({"type": "image_url", "image_url": {"url": url}})
        elif part.data is None:
            raise FatalProviderError(
                f"the OpenAI chat wire takes files by their bytes, not by URL ({part.url}); "
                "download the file and attach its bytes")
        elif _is_text(part):
            out.append({"type": "text", "text": _file_text(part)})
        else:
            file: dict[str, Any] = {"file_data": _data_url(part.media_type, part.data)}
            if part.name:
                file["filename"] = part.name
            out.append({"type": "file", "file": file})
    return out


def _source(part: ImagePart | FilePart) -> dict[str, Any]:
    if part.data is None:
        return {"type": "url", "url": part.url}
    return {"type": "base64", "media_type": part.media_type,
            "data": base64.b64encode(part.data).decode("ascii")}


def anthropic_blocks(parts: Iterable[Part]) -> list[dict[str, Any]]:
    """The Messages API content blocks of a user message (empty text parts left out: the
    API refuses them)."""
    out: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, TextPart):
            if part.text:
                out.append({"type": "text", "text": part.text})
        elif isinstance(part, ImagePart):
            out.append({"type": "image", "source": _source(part)})
        elif part.data is not None and _is_text(part):
            block: dict[str, Any] = {"type": "document", "source": {
                "type": "text", "media_type": "text/plain",
                "data": part.data.decode("utf-8", errors="replace")}}
            if part.name:
                block["title"] = part.name
            out.append(block)
        elif part.data is not None and part.media_type != "application/pdf":
            raise FatalProviderError(
                f"the Anthropic API reads PDF and text documents only, not "
                f"{text_of((part,))}; convert it to PDF or text first")
        else:
            block = {"type": "document", "source": _source(part)}
            if part.name:
                block["title"] = part.name
            out.append(block)
    return out


def unsupported_parts(parts: Iterable[Part]) -> list[str]:
    """The images and non-text files among ``parts``, as placeholders (``[image: ...]``):
    what a text-only model cannot read."""
    return [text_of((p,)) for p in parts
            if isinstance(p, ImagePart) or (isinstance(p, FilePart) and not _is_text(p))]
