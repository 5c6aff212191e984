"""The protocol front ends ``steerable serve`` mounts beside its own API (SPEC 12): ``/mcp``
and ``/v1/agui``, each present when its extra is installed (a note on stderr otherwise)."""

from __future__ import annotations

import sys
from contextlib import AbstractAsyncContextManager
from typing import Any

from steerable.cli._mcp_serve import mcp_endpoint

__all__ = ["protocol_routes"]


def protocol_routes(runner: Any) -> tuple[list[Any], list[AbstractAsyncContextManager[Any]]]:
    """The routes over ``runner`` and the contexts they need open while the server runs."""
    routes, contexts = mcp_endpoint(runner)
    try:
        from steerable.protocols.agui import agui_route
    except ImportError as exc:
        print(f"no /v1/agui endpoint: pip install 'steerable[agui]' ({exc.name} is missing)",
              file=sys.stderr)
    else:
        routes.append(agui_route(runner))
    return routes, contexts
