"""MCP servers in the CLI: the configured servers' tools for run and chat, and ``steerable mcp
list``. The MCP SDK is imported only when a server is configured, and a missing, old or broken SDK
is a one-line usage error then (runs without MCP servers never import it)."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import ModuleType
from typing import Any

from steerable.cli._args import UsageError
from steerable.cli._settings import Settings, mask
from steerable.errors import ConfigurationError

__all__ = ["configured_tools", "describe_servers", "mcp_list"]


def _sdk() -> ModuleType:
    try:
        import steerable.integrations.mcp as sdk
    except ImportError as exc:
        raise UsageError(f"mcp_servers are configured but {exc}") from None
    return sdk


def _servers(settings: Settings) -> list[Any]:
    sdk = _sdk()
    try:
        servers: list[Any] = sdk.servers_from_config(
            {name: spec for name, (spec, _) in settings.mcp_servers.items()})
    except ConfigurationError as exc:
        raise UsageError(str(exc)) from None
    return servers


@asynccontextmanager
async def configured_tools(settings: Settings) -> AsyncIterator[list[Any]]:
    """The tools of every configured MCP server (none when no server is configured); a server
    that cannot be opened is left out with a warning, so the agent still runs."""
    if not settings.mcp_servers:
        yield []
        return
    servers = _servers(settings)
    async with _sdk().open_servers(servers) as opened:
        yield opened.tools


def describe_servers(settings: Settings) -> list[dict[str, Any]]:
    """The configured servers for ``config show``: header and env values masked."""
    out = []
    for name, (spec, source) in settings.mcp_servers.items():
        shown = {k: v for k, v in spec.items() if k not in ("env", "headers")}
        for key in ("env", "headers"):
            if isinstance(spec.get(key), dict):
                shown[key] = {k: mask(str(v)) for k, v in spec[key].items()}
        out.append({"name": name, "source": source, **shown})
    return out


async def mcp_list(settings: Settings, as_json: bool) -> int:
    """Connect to each configured server and print its tools; 1 if any server failed."""
    if not settings.mcp_servers:
        print("no MCP servers configured (add [mcp_servers.NAME] to your user config.toml)",
              file=sys.stderr)
        return 1
    servers = _servers(settings)
    async with _sdk().open_servers(servers) as opened:
        rows = [{"server": t.server.name, "name": t.name, "tool": t.remote_name,
                 "read_only": t.read_only, "description": t.description} for t in opened.tools]
        failures = dict(opened.failures)
    if as_json:
        print(json.dumps({"tools": rows, "failures": failures}, indent=2))
    else:
        for server in settings.mcp_servers:
            if server in failures:
                print(f"{server}: FAILED: {failures[server]}")
                continue
            mine = [r for r in rows if r["server"] == server]
            print(f"{server}: {len(mine)} tool(s)")
            for r in mine:
                flag = "read-only" if r["read_only"] else "mutating"
                first = (r["description"] or "").strip().splitlines()[:1]
                print(f"  {r['name']}  [{flag}]  {first[0] if first else ''}")
    return 1 if failures else 0
