"""Attachments from the command line: ``run --attach FILE`` and the chat's ``/attach FILE``.

A file becomes an image part or a file part (its media type guessed from its name), capped in
size so a stray ``--attach`` of a video does not end up in every later request of the session.
"""

from __future__ import annotations

import mimetypes
from collections.abc import Sequence
from pathlib import Path

from steerable._parts import FilePart, ImagePart, Part, TextPart, size_label, text_of

__all__ = ["MAX_ATTACHMENT", "Attachments", "part_from_file", "read_attachments", "with_attachments"]

MAX_ATTACHMENT = 20_000_000
"""Bytes an attached file may have at most (the providers' own limits are of this order)."""


def read_attachments(paths: Sequence[str]) -> list[ImagePart | FilePart]:
    """The parts for ``paths``; ``ValueError`` naming the first file that cannot be taken."""
    return [part_from_file(path, MAX_ATTACHMENT) for path in paths]


def with_attachments(text: str, parts: Sequence[Part]) -> str | list[Part]:
    """A message of ``text`` and ``parts`` (just the text when there are none)."""
    return [TextPart(text), *parts] if parts else text


class Attachments:
    """Files the chat holds for the next message sent while the agent is idle."""

    def __init__(self) -> None:
        self.parts: list[ImagePart | FilePart] = []

    def add(self, path: str) -> str:
        """Attach ``path``; returns the line to show (``ValueError`` when it cannot be)."""
        if not path:
            raise ValueError("/attach FILE: the file is missing")
        part = part_from_file(path, MAX_ATTACHMENT)
        self.parts.append(part)
        return f"attached {text_of((part,))}: it goes with your next message"

    def take(self) -> list[ImagePart | FilePart]:
        parts, self.parts = self.parts, []
        return parts

    def label(self) -> str:
        """For the toolbar: `` · 2 attached`` (empty without attachments)."""
        return f" · {len(self.parts)} attached" if self.parts else ""


def part_from_file(path: str | Path, max_bytes: int) -> ImagePart | FilePart:
    """A part holding the file at ``path``: an ``ImagePart`` for an image, else a
    ``FilePart``; the media type is guessed from the file name (``text/plain`` for unknown
    text, ``application/octet-stream`` otherwise). Raises ``ValueError`` with a message for
    people when the file is missing, not a regular file, or larger than ``max_bytes``."""
    p = Path(path).expanduser()
    try:
        size = p.stat().st_size
    except OSError as exc:
        raise ValueError(f"cannot attach {path}: {exc.strerror or exc}") from None
    if not p.is_file():
        raise ValueError(f"cannot attach {path}: not a regular file")
    if size > max_bytes:
        raise ValueError(f"cannot attach {path}: {size_label(size)} is over the "
                         f"{size_label(max_bytes)} limit for an attachment")
    data = p.read_bytes()
    media_type = mimetypes.guess_type(p.name)[0] or _sniff(data)
    if media_type.startswith("image/"):
        return ImagePart(data=data, media_type=media_type)
    return FilePart(data=data, media_type=media_type, name=p.name)


def _sniff(data: bytes) -> str:
    try:
        data[:4096].decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < 4092:  # not merely a character cut at the end of the sample
            return "application/octet-stream"
    return "text/plain"
