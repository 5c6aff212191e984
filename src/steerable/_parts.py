"""Content parts: what a message holds besides plain text (images and files).

``Message.content`` is a ``str`` (almost always) or a tuple of parts. Everything that only
reads text (rendering, summaries, token estimates, events, titles, redaction of text) goes
through one function, ``text_of``, which gives a string for either form: a part list reads as
its text parts with a short placeholder for each image or file (``[image: image/png, 12 KB]``).
Only the providers (their wire formats) and the stores (binary data kept by hash beside the
history) look at the parts themselves.

An image or file is given by its bytes and media type, or by a URL where the provider's wire
allows one. Parts are plain frozen values, hashable and comparable like every message.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import field

from steerable._records import Record, record

__all__ = ["Content", "FilePart", "ImagePart", "Part", "TextPart", "as_content",
           "size_label", "text_of"]


@record(kw_only=False)
class TextPart(Record):
    """A piece of text among other parts."""

    text: str

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise TypeError(f"TextPart.text must be a str, got {type(self.text).__name__}")


def _check_source(kind: str, data: bytes | None, url: str | None, media_type: str | None) -> None:
    if (data is None) == (url is None):
        raise ValueError(f"{kind} needs exactly one of data= (bytes) or url=")
    if data is not None:
        if not isinstance(data, bytes):
            raise TypeError(f"{kind}.data must be bytes, got {type(data).__name__}")
        if not media_type:
            raise ValueError(f"{kind} given as bytes needs its media_type (e.g. 'image/png')")
    elif not isinstance(url, str) or not url.startswith(("https://", "http://", "data:")):
        raise ValueError(f"{kind}.url must be an http(s) or data: URL, got {url!r}")
    if media_type is not None and (not isinstance(media_type, str) or "/" not in media_type):
        raise ValueError(f"{kind}.media_type must look like 'type/subtype', got {media_type!r}")


@record
class ImagePart(Record):
    """An image: ``ImagePart(data=png_bytes, media_type="image/png")`` or
    ``ImagePart(url="https://...")``."""

    data: bytes | None = field(default=None, repr=False)
    media_type: str | None = None
    url: str | None = None

    def __post_init__(self) -> None:
        _check_source("ImagePart", self.data, self.url, self.media_type)
        if self.media_type is not None and not self.media_type.startswith("image/"):
            raise ValueError(f"ImagePart.media_type must be image/*, got {self.media_type!r}; "
                             "use FilePart for other files")


@record
class FilePart(Record):
    """A file (a PDF, a text file...): ``FilePart(data=..., media_type="application/pdf",
    name="report.pdf")`` or ``FilePart(url=..., media_type=...)``."""

    data: bytes | None = field(default=None, repr=False)
    media_type: str | None = None
    url: str | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        _check_source("FilePart", self.data, self.url, self.media_type)


Part = TextPart | ImagePart | FilePart
Content = str | tuple[Part, ...]
"""What a message holds: text, or a tuple of parts."""

_PART_TYPES = (TextPart, ImagePart, FilePart)


def as_content(value: str | Sequence[Part]) -> Content:
    """``value`` checked: a string as it is, any sequence of parts as a tuple."""
    if type(value) is str:
        return value
    if isinstance(value, str):
        return str(value)
    if not isinstance(value, Sequence):
        raise TypeError(f"message content must be a str or a list of parts, got "
                        f"{type(value).__name__}")
    parts: list[Part] = []
    for part in value:
        if not isinstance(part, _PART_TYPES):
            raise TypeError("message content parts must be TextPart, ImagePart or FilePart, "
                            f"got {type(part).__name__}")
        parts.append(part)
    return tuple(parts)


def size_label(size: int) -> str:
    """``size`` bytes for people: ``812 B``, ``1.2 KB``, ``3.4 MB``."""
    if size < 1000:
        return f"{size} B"
    if size < 1_000_000:
        return f"{size / 1000:.1f} KB"
    return f"{size / 1_000_000:.1f} MB"


def _placeholder(part: ImagePart | FilePart) -> str:
    kind = "image" if isinstance(part, ImagePart) else "file"
    name = part.name if isinstance(part, FilePart) and part.name else None
    if part.data is None:
        what = [name or str(part.url)]
    else:
        what = [name] if name else []
        what += [str(part.media_type), size_label(len(part.data))]
    return f"[{kind}: {', '.join(what)}]"


def text_of(content: str | Sequence[Part]) -> str:
    """The text view of ``content``: itself for a string; for parts, the text parts and a
    placeholder per image or file, one per line."""
    if isinstance(content, str):
        return content
    return "\n".join(p.text if isinstance(p, TextPart) else _placeholder(p)
                     for p in content)


