"""Attachments from the command line: ``run --attach FILE`` and the chat's ``/attach FILE``.

A file becomes an image part or a file part (its media type guessed from its name), capped in
size so a stray ``--attach`` of a video does not end up in every later request of the session.
"""

from __future__ import annotations

from collections.abc import Sequence

from steerable._parts import FilePart, ImagePart, Part, TextPart, part_from_file, text_of

__all__ = ["MAX_ATTACHMENT", "Attachments", "read_attachments", "with_attachments"]

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
