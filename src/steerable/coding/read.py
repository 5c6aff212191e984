"""``read``: a text file with line numbers, a window of it at a time.

Huge files are read line by line up to the window, never whole. An image (PNG, JPEG, GIF,
WebP) or a PDF, recognised by its first bytes, comes back as a part the model can look at
where its provider takes images and files (a placeholder elsewhere), up to ``MAX_MEDIA``
bytes. Other binary files are refused with a message saying so, since bytes shown as text
only waste the model's context. The file is
opened beneath the workspace (``Workspace.beneath``), so a link swapped in meanwhile cannot
make it read something outside.
"""

from __future__ import annotations

import io
import os
from itertools import islice
from typing import BinaryIO

from steerable._parts import FilePart, ImagePart, size_label
from steerable.coding._beneath import Located, open_regular
from steerable.coding._missing import missing
from steerable.coding._text import is_binary
from steerable.coding._workspace import Workspace
from steerable.errors import ToolError
from steerable.tools import FunctionTool, ToolContext, tool

__all__ = ["make_read_tool"]

DEFAULT_LIMIT = 2000
MAX_LINE = 2000
MAX_CHARS = 60_000
MAX_MEDIA = 5_000_000
"""The largest image or PDF ``read`` returns (Anthropic's limit for one image)."""

_MAGIC = ((b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"),
          (b"GIF87a", "image/gif"), (b"GIF89a", "image/gif"), (b"%PDF-", "application/pdf"))
Shown = str | list[str | ImagePart | FilePart]


def make_read_tool(ws: Workspace, *, max_chars: int = MAX_CHARS) -> FunctionTool:
    @tool(name="read", permission_subjects=ws.path_subjects, read_only=True, permission_key="path")
    def read(path: str, ctx: ToolContext, offset: int = 1, limit: int = DEFAULT_LIMIT) -> Shown:
        """Read a text file from the workspace; lines come numbered. Images and PDFs come
        back whole, to look at.

        Args:
            path: File path, relative to the workspace root.
            offset: First line to show (1-based).
            limit: How many lines to show at most.
        """
        if offset < 1 or limit < 1:
            raise ToolError("offset and limit must be at least 1")

        def show(where: Located) -> Shown:
            name = ws.display(where.path)
            try:
                fh = open_regular(where)
            except IsADirectoryError:
                raise ToolError(f"{name} is a directory; use ls to list it") from None
            except FileNotFoundError:
                raise missing(ws, path, ctx.refuses) from None
            with fh:
                size = os.fstat(fh.fileno()).st_size
                head = fh.read(8192)
                media = _media_type(head)
                if media is not None:
                    return _media(fh, name, media, size)
                if is_binary(head):
                    raise ToolError(f"{name} is a binary file ({size} bytes); read shows text, "
                                    "images and PDFs only")
                fh.seek(0)
                return _window(fh, name, offset, limit, max_chars)

        try:
            return ws.beneath(path, show)
        except FileNotFoundError:
            raise missing(ws, path, ctx.refuses) from None

    return read


def _media_type(head: bytes) -> str | None:
    """The media type of an image or PDF from its first bytes (never from its name: a
    renamed file is what its bytes say)."""
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return next((media for magic, media in _MAGIC if head.startswith(magic)), None)


def _media(fh: BinaryIO, name: str, media: str, size: int) -> Shown:
    if size > MAX_MEDIA:
        raise ToolError(f"{name} is {media} of {size_label(size)}; read returns images and "
                        f"PDFs up to {size_label(MAX_MEDIA)}")
    fh.seek(0)
    data = fh.read(MAX_MEDIA + 1)
    if len(data) > MAX_MEDIA:  # it grew since the size was taken
        raise ToolError(f"{name} grew past {size_label(MAX_MEDIA)} while it was read")
    part = ImagePart(data=data, media_type=media) if media.startswith("image/") \
        else FilePart(data=data, media_type=media, name=name.rsplit("/", 1)[-1])
    kind = "an image" if media.startswith("image/") else "a PDF"
    return [f"{name} is {kind} ({media}, {size_label(len(data))}), attached.", part]


def _window(raw: BinaryIO, name: str, offset: int, limit: int, max_chars: int) -> str:
    out: list[str] = []
    used = 0
    last = offset - 1
    capped = False
    more = False
    fh = io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline="")
    lines = islice(fh, offset - 1, None)
    for number, line in enumerate(lines, start=offset):
        if number >= offset + limit:
            more = True
            break
        text = line.rstrip("\r\n")
        if len(text) > MAX_LINE:
            text = text[:MAX_LINE] + f" [... line cut at {MAX_LINE} characters]"
        row = f"{number:>6}\t{text}"
        if used + len(row) + 1 > max_chars and out:
            capped = more = True
            break
        out.append(row)
        used += len(row) + 1
        last = number
    fh.detach()  # the caller closes the file
    if not out:
        if offset == 1:
            return f"{name} is empty."
        raise ToolError(f"{name} has fewer than {offset} lines")
    body = "\n".join(out)
    if capped:
        body += (f"\n[output capped at {max_chars} characters; shown lines {offset}-{last}; "
                 f"continue with offset={last + 1}]")
    elif more:
        body += f"\n[more lines follow; continue with offset={last + 1}]"
    return body
