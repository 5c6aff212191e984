"""Text helpers the file tools share: binary sniffing, unified diffs, output caps."""

from __future__ import annotations

import difflib

__all__ = ["MAX_SHOWN_DIFF", "cap_text", "decode_text", "is_binary", "unified_diff"]

MAX_SHOWN_DIFF = 20_000
"""Characters of a change's diff that write and edit report for the user to see (not the model)."""

_SNIFF = 8192


def is_binary(sample: bytes) -> bool:
    """A NUL byte in the first block, or bytes that are not UTF-8, mark a file as binary."""
    if b"\x00" in sample[:_SNIFF]:
        return True
    head = sample[:_SNIFF]
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        # A multi-byte character cut by the sample's end is not evidence of binary data.
        return exc.start < len(head) - 4
    return False


def decode_text(data: bytes) -> str | None:
    """A file's text, or None when it is binary. Newlines are kept exactly as written."""
    if is_binary(data):
        return None
    return data.decode("utf-8", errors="replace")


def unified_diff(old: str, new: str, name: str) -> str:
    lines = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True),
        fromfile=f"a/{name}", tofile=f"b/{name}",
    )
    out = []
    for line in lines:
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out) or "(no changes)\n"


def cap_text(text: str, limit: int, *, head: float = 0.3) -> str:
    """Keep the start and the end of ``text`` (errors are usually at the end) within ``limit``."""
    if len(text) <= limit:
        return text
    keep_head = int(limit * head)
    keep_tail = limit - keep_head
    omitted = len(text) - keep_head - keep_tail
    return (f"{text[:keep_head]}\n[... {omitted} characters omitted: output capped at "
            f"{limit} characters ...]\n{text[-keep_tail:]}")
