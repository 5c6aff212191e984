"""An MCP server that asks the person for input, written with the official SDK.

``python asking_mcp_server.py 2026`` serves stdio in both eras (a 2026-07-28 client gets
``input_required`` results); ``python asking_mcp_server.py 2025`` serves only the 2025
handshake (``server/discover`` is refused before ``initialize``), so its questions come as
``elicitation/create`` requests in the middle of the call. The tools are the same: the SDK's
resolvers (``Resolve`` with ``Elicit``) pick the way the connection's revision asks.

``MCP_TEST_MARKS`` names a folder where each call of a tool body leaves a line (``calls``), so
a test sees how often the server ran the tool.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

from mcp.server.elicitation import AcceptedElicitation, ElicitationResult
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.resolve import Elicit, Resolve, Sample
from mcp.types import CreateMessageResult, SamplingMessage, TextContent
from pydantic import BaseModel

_MARKS = os.environ.get("MCP_TEST_MARKS")
MARKS = Path(_MARKS) if _MARKS else None
"""None for a test that does not look at marks: nothing is written (never into the checkout)."""
server = MCPServer("asker", log_level="WARNING")


def _mark(text: str) -> None:
    if MARKS is None:
        return
    with (MARKS / "calls").open("a") as f:
        f.write(text + "\n")


class When(BaseModel):
    date: str


class Seats(BaseModel):
    seats: int


class Nothing(BaseModel):
    pass


def ask_date(city: str) -> Elicit[When]:
    return Elicit(f"Which date do you travel to {city}?", When)


def ask_seats() -> Elicit[Seats]:
    return Elicit("How many seats?", Seats)


def ask_sure(path: str) -> Elicit[Nothing]:
    return Elicit(f"Delete {path}?", Nothing)


@server.tool()
def book(city: str, when: Annotated[ElicitationResult[When], Resolve(ask_date)],
         seats: Annotated[ElicitationResult[Seats], Resolve(ask_seats)]) -> str:
    """Book a trip; asks the person for the date and the number of seats."""
    if not isinstance(when, AcceptedElicitation) or not isinstance(seats, AcceptedElicitation):
        _mark(f"book {city}: not booked")
        return f"not booked ({when.action}, {seats.action})"
    _mark(f"book {city} {when.data.date} {seats.data.seats}")
    return f"booked {city} on {when.data.date} for {seats.data.seats}"


@server.tool()
def delete(path: str, sure: Annotated[ElicitationResult[Nothing], Resolve(ask_sure)]) -> str:
    """Delete a file, once the person confirms."""
    _mark(f"delete {path}: {sure.action}")
    return f"deleted {path}" if isinstance(sure, AcceptedElicitation) else f"kept {path}"


def ask_model() -> Sample:
    return Sample([SamplingMessage(role="user", content=TextContent(type="text", text="hi"))],
                  max_tokens=10)


@server.tool()
def summarize(said: Annotated[CreateMessageResult, Resolve(ask_model)]) -> str:
    """Needs the client's model (sampling), which steerable does not offer."""
    return "never"


def main() -> None:
    if sys.argv[1] == "2026":
        server.run("stdio")
        return
    # Only the 2025 handshake: the SDK's loop-mode server, which answers nothing before
    # initialize, so the client falls back from server/discover.
    import anyio
    from mcp.server.runner import serve_loop
    from mcp.server.stdio import stdio_server

    low = server._lowlevel_server

    async def legacy() -> None:
        async with stdio_server() as (read, write), low.lifespan(low) as state:
            await serve_loop(low, read, write, lifespan_state=state,
                             init_options=low.create_initialization_options())

    anyio.run(legacy)


if __name__ == "__main__":
    main()
