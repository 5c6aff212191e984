"""MCP tools for steerable agents (the ``mcp`` extra: ``pip install 'steerable[mcp]'``).

    async with MCPServer("fs", command="python", args=["server.py"]) as fs:
        agent = Agent(provider=..., tools=[*await fs.tools(), ...])

See ``MCPServer`` (stdio or streamable HTTP), ``MCPTool`` (naming, read-only hints, progress,
cancellation) and ``open_servers`` (several servers from configuration).
"""

from __future__ import annotations

try:
    import mcp  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise ImportError(
        "MCP support needs the official MCP SDK: pip install 'steerable[mcp]'"
    ) from exc

from steerable.integrations.mcp._config import MCPServers, open_servers, servers_from_config
from steerable.integrations.mcp._server import DEFAULT_TIMEOUT, MCPServer
from steerable.integrations.mcp._tool import MCPTool, mcp_tool_name

__all__ = [
    "DEFAULT_TIMEOUT",
    "MCPServer",
    "MCPServers",
    "MCPTool",
    "mcp_tool_name",
    "open_servers",
    "servers_from_config",
]
