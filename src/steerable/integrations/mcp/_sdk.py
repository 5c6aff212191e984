"""Which MCP SDK is installed: steerable speaks MCP through the official SDK 2.x (the 2026-07-28
revision, with the 2025 revisions' handshake as fallback). Any other install (none, 1.x, a
half-upgraded one where ``mcp`` and ``mcp-types`` disagree) is refused at import with one line
that says what to install, instead of an ImportError from deep inside the SDK."""

from __future__ import annotations

import importlib
from importlib import metadata

__all__ = ["SDK_RANGE", "check_sdk"]

SDK_RANGE = (2, 3)
"""The oldest SDK release this module is written against (major, minor); the next major is not
accepted either, as the 1 to 2 change showed that a major renames the API."""

_FIX = "pip install 'steerable[mcp]'"


def _version(name: str) -> tuple[int, ...] | None:
    try:
        text = metadata.version(name)
    except metadata.PackageNotFoundError:
        return None
    parts: list[int] = []
    for piece in text.split(".")[:2]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def check_sdk() -> None:
    """Raise ``ImportError`` with a one-line reason unless a usable MCP SDK is installed."""
    found = _version("mcp")
    if found is None:
        raise ImportError(f"MCP support needs the official MCP SDK 2.x: {_FIX}")
    shown = ".".join(map(str, found))
    if found < SDK_RANGE or found[0] != SDK_RANGE[0]:
        raise ImportError(f"MCP support needs the MCP SDK >=2.3,<3 (the 2026-07-28 revision) "
                          f"but mcp {shown} is installed: {_FIX}")
    try:
        # The modules steerable uses; a broken install fails here rather than mid-run.
        for module in ("mcp", "mcp_types", "mcp.client.stdio", "mcp.client.streamable_http"):
            importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f"the installed MCP SDK (mcp {shown}) cannot be loaded "
                          f"({exc.msg.splitlines()[0]}): {_FIX}") from None
