"""MCP tools for steerable agents (the ``mcp`` extra: ``pip install 'steerable[mcp]'``).

    async with MCPServer("fs", command="python", args=["server.py"]) as fs:
        agent = Agent(provider=..., tools=[*await fs.tools(), ...])

See ``MCPServer`` (stdio or streamable HTTP), ``MCPTool`` (naming, read-only hints, progress,
cancellation) and ``open_servers`` (several servers from configuration).
"""

from __future__ import annotations

from steerable.integrations.mcp._sdk import check_sdk

# Before the SDK is imported below: a missing or mismatched SDK is one line, not a traceback.
check_sdk()

from steerable.integrations.mcp._config import (  # noqa: E402
    MCPServers,
    open_servers,
    servers_from_config,
)
from steerable.integrations.mcp._server import DEFAULT_TIMEOUT, MCPServer  # noqa: E402
from steerable.integrations.mcp._tool import MCPTool, mcp_tool_name  # noqa: E402

__all__ = [
    "DEFAULT_TIMEOUT",
    "MCPServer",
    "MCPServers",
    "MCPTool",
    "mcp_tool_name",
    "open_servers",
    "servers_from_config",
]
