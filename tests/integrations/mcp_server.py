"""A small real MCP server, written with the official SDK, for the MCP tests.

``python mcp_server.py stdio`` serves on stdin/stdout; ``python mcp_server.py http PORT`` serves
streamable HTTP on 127.0.0.1:PORT at /mcp. ``MCP_TEST_MARKS`` names a folder where tools leave
files the tests look at (a call that was cancelled on the server, each start of the server).
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.types import ToolAnnotations

_MARKS = os.environ.get("MCP_TEST_MARKS")
MARKS = Path(_MARKS) if _MARKS else None
"""None for a test that does not look at marks: nothing is written (never into the checkout)."""
server = MCPServer("testserver", log_level="WARNING")


def _mark(name: str, text: str = "") -> None:
    if MARKS is None:
        return
    with (MARKS / name).open("a") as f:
        f.write(text + "\n")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def echo(text: str) -> str:
    """Say the text back."""
    return f"echo: {text}"


@server.tool()
def add(a: int, b: int) -> str:
    """Add two numbers (declared without a read-only hint: mutating for the agent)."""
    return str(a + b)


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def count(n: int, ctx: Context) -> str:  # type: ignore[type-arg]
    """Count to n, reporting progress at each step."""
    for i in range(1, n + 1):
        await ctx.report_progress(i, n, f"step {i} of {n}")
        await asyncio.sleep(0.01)
    return f"counted to {n}"


@server.tool()
async def wait_forever(tag: str) -> str:
    """Wait until cancelled; a cancelled call leaves a mark."""
    _mark("started", tag)
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        _mark("cancelled", tag)
        raise
    return "never"


@server.tool()
def crash() -> str:
    """Kill the server process."""
    os._exit(3)


@server.tool()
async def freeze() -> str:
    """Block the whole server (a hung server): a blocking sleep on the event loop (the SDK runs
    plain functions in a worker thread, which would leave the server answering)."""
    time.sleep(3600)
    return "never"


@server.tool()
def fail(reason: str) -> str:
    """Raise an error."""
    raise ValueError(reason)


@server.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=False)
def picture() -> list[object]:
    """A caption and a tiny image."""
    return ["a red dot", Image(data=b"\x89PNG\r\n\x1a\n0000", format="png")]


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def header(name: str, ctx: Context) -> str:  # type: ignore[type-arg]
    """The value of an HTTP request header (streamable HTTP only)."""
    request = ctx.request_context.request
    return str(request.headers.get(name)) if request is not None else "no http"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def pid() -> str:
    """The server's process id."""
    return str(os.getpid())


if __name__ == "__main__":
    _mark("starts", str(os.getpid()))
    if sys.argv[1] == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
