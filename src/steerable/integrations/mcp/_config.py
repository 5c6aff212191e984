"""MCP servers from configuration, and opening several at once.

The TOML form (a user ``config.toml``; a project file may not start programs)::

    [mcp_servers.fs]
    command = "python"
    args = ["-m", "my_fs_server"]
    env = { ROOT = "/srv" }
    timeout = 30

    [mcp_servers.search]
    url = "http://127.0.0.1:8931/mcp"
    headers = { Authorization = "Bearer ${SEARCH_TOKEN}" }

``${NAME}`` in ``env`` and ``headers`` values is taken from the environment when the server is
opened, so secrets stay out of the file.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from steerable.errors import ConfigurationError
from steerable.integrations.mcp._server import MCPServer

__all__ = ["SERVER_KEYS", "MCPServers", "open_servers", "servers_from_config"]

log = logging.getLogger("steerable.mcp")

SERVER_KEYS = frozenset({"command", "args", "env", "cwd", "url", "headers", "timeout"})
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _expand(value: str, where: str) -> str:
    def one(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in os.environ:
            raise ConfigurationError(f"{where} uses ${{{name}}}, which is not set in the environment")
        return os.environ[name]

    return _VAR.sub(one, value)


def _strings(value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, Mapping) or not all(isinstance(v, str) for v in value.values()):
        raise ConfigurationError(f"{where} must be a table of strings")
    return {str(k): _expand(v, f"{where}.{k}") for k, v in value.items()}


def server_from_config(name: str, spec: Any) -> MCPServer:
    where = f"mcp_servers.{name}"
    if not isinstance(spec, Mapping):
        raise ConfigurationError(f"{where} must be a table (command = ... or url = ...)")
    unknown = set(spec) - SERVER_KEYS
    if unknown:
        raise ConfigurationError(f"{where}: unknown key(s) {sorted(unknown)}; "
                                 f"expected some of {sorted(SERVER_KEYS)}")
    args = spec.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise ConfigurationError(f"{where}.args must be a list of strings")
    timeout = spec.get("timeout")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int | float)):
        raise ConfigurationError(f"{where}.timeout must be a number of seconds")
    for key in ("command", "url", "cwd"):
        if key in spec and not isinstance(spec[key], str):
            raise ConfigurationError(f"{where}.{key} must be a string")
    return MCPServer(name, command=spec.get("command"), args=args,
                     env=_strings(spec.get("env", {}), f"{where}.env"), cwd=spec.get("cwd"),
                     url=spec.get("url"), headers=_strings(spec.get("headers", {}),
                                                           f"{where}.headers"),
                     timeout=None if timeout is None else float(timeout))


def servers_from_config(table: Mapping[str, Any]) -> list[MCPServer]:
    """``MCPServer``s from a ``[mcp_servers]`` table; a clear error names any bad entry."""
    if not isinstance(table, Mapping):
        raise ConfigurationError("mcp_servers must be a table of servers")
    return [server_from_config(str(name), spec) for name, spec in table.items()]


@dataclass
class MCPServers:
    """Opened servers: their tools, and the servers that could not be opened (with why)."""

    servers: list[MCPServer]
    tools: list[Any] = field(default_factory=list)
    failures: dict[str, str] = field(default_factory=dict)


@asynccontextmanager
async def open_servers(servers: Sequence[MCPServer], *, strict: bool = False,
                       ) -> AsyncIterator[MCPServers]:
    """Connect every server at once and list its tools; close them all on exit.

    A server that cannot be opened is left out (its reason in ``failures``, and a warning) so
    one broken server does not stop the agent; ``strict=True`` raises instead.
    """
    opened = MCPServers(list(servers))

    async def open_one(server: MCPServer) -> list[Any]:
        try:
            return await server.tools()
        except Exception as exc:
            if strict:
                raise
            opened.failures[server.name] = str(exc)
            log.warning("MCP server %s left out: %s", server.name, exc)
            return []

    try:
        for tools in await asyncio.gather(*(open_one(s) for s in servers)):
            opened.tools += tools
        yield opened
    finally:
        await asyncio.gather(*(s.aclose() for s in servers), return_exceptions=True)
