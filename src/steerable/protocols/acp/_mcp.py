"""The MCP servers the editor passes in ``session/new|load|resume``, as the session's tools.

Stdio servers (which every ACP agent takes) and streamable-HTTP ones become
``steerable.integrations.mcp.MCPServer``s started in the session's folder; their tools join
the session's agent with the usual naming (``mcp__<server>__<tool>``), read-only hints and
permission rules. A server that cannot be started is left out with a warning on stderr, so one
broken server does not stop the session. Needs the ``mcp`` extra; without it a session that
asks for servers is refused with the reason, never run silently without them.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from acp import RequestError

__all__ = ["SessionServers", "mcp_available"]

log = logging.getLogger("steerable.acp")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


def mcp_available() -> bool:
    try:
        import steerable.integrations.mcp  # noqa: F401
    except ImportError:
        return False
    return True


def _server(spec: Any, root: Path) -> Any:
    from steerable.integrations.mcp import MCPServer

    name = _UNSAFE.sub("_", str(spec.name)).replace("__", "_").strip("_") or "server"
    if getattr(spec, "command", None):
        return MCPServer(name, command=spec.command, args=list(spec.args or ()),
                         env={e.name: e.value for e in spec.env or ()}, cwd=str(root))
    if getattr(spec, "type", None) == "http":
        return MCPServer(name, url=str(spec.url),
                         headers={h.name: h.value for h in spec.headers or ()})
    raise RequestError.invalid_params(
        {"message": f"MCP server {spec.name!r}: only stdio and http servers are supported"})


class SessionServers:
    """The editor's MCP servers of one session, open until ``aclose``."""

    def __init__(self) -> None:
        self.servers: list[Any] = []

    async def open(self, specs: Sequence[Any], root: Path) -> list[Any]:
        """Start ``specs``; the tools of those that started."""
        if not specs:
            return []
        if not mcp_available():
            raise RequestError.invalid_params(
                {"message": "this agent was installed without MCP support: pip install "
                            "'steerable[mcp]' to use the editor's MCP servers"})
        self.servers = [_server(spec, root) for spec in specs]
        tools: list[Any] = []
        for server, found in zip(self.servers, await asyncio.gather(
                *(s.tools() for s in self.servers), return_exceptions=True), strict=True):
            if isinstance(found, Exception):
                log.warning("MCP server %s left out: %s", server.name, found)
            elif isinstance(found, BaseException):
                raise found
            else:
                tools += found
        return tools

    async def aclose(self) -> None:
        servers, self.servers = self.servers, []
        await asyncio.gather(*(s.aclose() for s in servers), return_exceptions=True)
