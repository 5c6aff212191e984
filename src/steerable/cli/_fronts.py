"""The protocol front ends ``steerable serve`` mounts beside its own API (SPEC 12): ``/mcp``,
``/v1/agui`` and A2A (its card and ``/a2a``), each present when its extra is installed (a note
on stderr otherwise)."""

from __future__ import annotations

import sys
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any

from steerable.cli._mcp_serve import mcp_endpoint

__all__ = ["Fronts", "protocol_routes"]


@dataclass
class Fronts:
    """What the front ends add to the app: routes, the contexts they need open while the
    server runs, and the paths that need no token (A2A's agent card)."""

    routes: list[Any] = field(default_factory=list)
    contexts: list[AbstractAsyncContextManager[Any]] = field(default_factory=list)
    public: list[str] = field(default_factory=list)


def protocol_routes(runner: Any, *, agent_name: str = "steerable",
                    secured: bool = False) -> Fronts:
    """The front ends over ``runner``; ``secured``: the server requires a token."""
    routes, contexts = mcp_endpoint(runner)
    fronts = Fronts(routes, contexts)
    try:
        from steerable.protocols.agui import agui_route
    except ImportError as exc:
        print(f"no /v1/agui endpoint: pip install 'steerable[agui]' ({exc.name} is missing)",
              file=sys.stderr)
    else:
        fronts.routes.append(agui_route(runner))
    try:
        from steerable.protocols.a2a import a2a_endpoints
    except ImportError as exc:
        print(f"no A2A endpoint: pip install 'steerable[a2a]' ({exc.name} is missing)",
              file=sys.stderr)
    else:
        a2a = a2a_endpoints(runner, name=agent_name, secured=secured,
                            description="steerable's coding agent: it reads, searches and "
                                        "edits files and runs commands in its workspace.")
        fronts.routes += a2a.routes
        fronts.contexts.append(a2a.lifespan())
        fronts.public += a2a.public
    return fronts
