"""``MCPTool``: one tool of an MCP server, offered to an agent like any other tool.

Its name is ``mcp__<server>__<tool>`` (the convention other agent tools use), so permission
rules name MCP tools like any tool: ``deny: mcp__github__*``, ``allow: mcp__fs__read_file``.
``readOnlyHint`` makes it read-only (run in parallel, never asked); without the hint it is
mutating, as MCP's own default says. Arguments are checked by the server, which knows its schema.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Protocol

from mcp import types

from steerable import BaseTool, ToolContext, ToolResult

__all__ = ["MCPTool", "ToolServer", "mcp_tool_name"]


class ToolServer(Protocol):
    """What a tool needs of its server (``MCPServer``): its name and a call. A protocol, so
    this module never imports the server that makes its tools."""

    @property
    def name(self) -> str: ...

    async def call(self, tool: str, arguments: Mapping[str, Any], ctx: ToolContext) -> ToolResult: ...

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def mcp_tool_name(server: str, tool: str) -> str:
    """The name the model sees. Model APIs accept ``[A-Za-z0-9_-]{1,64}``, so other characters
    become ``_`` and the name is cut at 64; the server is still called by the tool's own name."""
    return _UNSAFE.sub("_", f"mcp__{server}__{tool}")[:64]


class MCPTool(BaseTool):
    """A tool of ``server`` described by ``spec`` (from the server's ``tools/list``)."""

    def __init__(self, server: ToolServer, spec: types.Tool) -> None:
        self.server = server
        self.remote_name = spec.name
        self.name = mcp_tool_name(server.name, spec.name)
        self.description = spec.description or spec.title or f"{spec.name} (MCP server {server.name})"
        hints = spec.annotations
        self.read_only = bool(hints is not None and hints.read_only_hint)
        # The server enforces its own per-call deadline (see MCPServer.call): a restart on the
        # next turn must not count against it, so the loop's tool timeout is not used here.
        self.timeout: float | None = None
        self._parameters: Mapping[str, Any] = dict(spec.input_schema or {"type": "object"})

    @property
    def parameters(self) -> Mapping[str, Any]:
        return self._parameters

    async def run(self, arguments: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        return await self.server.call(self.remote_name, arguments, ctx)

    def __repr__(self) -> str:
        return f"<MCPTool {self.name} read_only={self.read_only}>"
