"""steerable as an MCP server: ``steerable mcp serve`` (stdio) and ``/mcp`` on ``steerable
serve``, both over the runner the HTTP API uses (``steerable.protocols.mcp_server``)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from contextlib import AbstractAsyncContextManager
from typing import Any

from steerable.cli._args import UsageError
from steerable.cli._settings import Settings

__all__ = ["mcp_endpoint", "mcp_serve"]


def _front() -> Any:
    """The protocol module, or a one-line reason why it cannot be loaded."""
    from steerable.integrations.mcp._sdk import check_sdk

    check_sdk()
    import steerable.protocols.mcp_server as front

    return front


def mcp_endpoint(runner: Any) -> tuple[list[Any], list[AbstractAsyncContextManager[Any]]]:
    """``/mcp`` for ``steerable serve``: its route and the context it needs; none (with a note)
    when the MCP SDK is not installed, so the server still starts."""
    try:
        front = _front()
    except ImportError as exc:
        print(f"no /mcp endpoint: {exc}", file=sys.stderr)
        return [], []
    from starlette.routing import Route

    endpoint, context = front.http_endpoint(front.build_server(runner))
    return [Route("/mcp", endpoint, methods=["GET", "POST", "DELETE"])], [context]


def mcp_serve(args: argparse.Namespace, settings: Settings) -> int:
    """Serve the agent over MCP on stdin/stdout until the client closes it."""
    try:
        front = _front()
        from steerable.server import LocalRunner
    except ImportError as exc:
        raise UsageError(f"mcp serve needs the mcp and server extras: "
                         f"pip install 'steerable[mcp,server]' ({exc})") from None
    from steerable.cli._app import build_app
    from steerable.cli._integrations import telemetry
    from steerable.cli._mcp import configured_tools

    async def main() -> int:
        async with configured_tools(settings) as mcp_tools:
            app = build_app(settings, session=None, can_ask=False, script=args.script,
                            record_events=args.record_events, ask_by_events=True,
                            extra_tools=mcp_tools)
            telemetry(app, settings)
            runner = LocalRunner(app.loop, app.redact)
            await runner.start()
            try:
                await front.build_server(runner).run_stdio_async()
            finally:
                await app.shells.aclose()  # background commands end with the server
                await runner.aclose()
        return 0

    return asyncio.run(main())
