"""``steerable acp``: the coding agent as an ACP agent on stdin/stdout, for editors.

Everything of ``steerable run``'s agent (tools, permission rules, sandbox, sessions in the same
store, the configured provider or the embedded model) behind the Agent Client Protocol. Each
ACP session works in the folder the editor opened it in; stdout carries only the protocol
(logs go to stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence
from typing import Any, cast

from steerable.cli._args import UsageError
from steerable.cli._settings import Settings

__all__ = ["acp_command"]

_LINE_LIMIT = 50 * 1024 * 1024  # a prompt may embed whole files


async def _protocol_streams() -> tuple[Any, Any]:
    """stdin/stdout as the protocol's streams, and stdout kept for the protocol alone: file
    descriptor 1 and ``sys.stdout`` then lead to stderr, so a stray print (ours, a library's,
    a child process's that inherits it) cannot corrupt the JSON-RPC stream."""
    import acp

    protocol_out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    sys.stdout = cast(Any, protocol_out)  # what acp.stdio_streams connects to
    try:
        return await acp.stdio_streams(limit=_LINE_LIMIT)
    finally:
        sys.stdout = sys.stderr


def acp_command(args: argparse.Namespace, settings: Settings) -> int:
    try:
        import acp

        from steerable.protocols.acp import AcpOptions, EditorApprover, SteerableAcpAgent
    except ImportError as exc:
        raise UsageError(f"acp needs the acp extra: pip install 'steerable[acp]' "
                         f"({exc.name} is missing)") from None
    from steerable.cli._app import build_app, coding_agents, workspace_tools
    from steerable.cli._integrations import telemetry
    from steerable.cli._mcp import configured_tools
    from steerable.coding import Sandbox, Workspace
    from steerable.tools import Tool

    async def main() -> int:
        async with configured_tools(settings) as mcp_tools:
            approver = EditorApprover()
            # No checkpoints: an ACP cancel keeps what the turn did, as the editor shows it,
            # so a cancelled turn is saved as it stands and the next prompt continues from it.
            app = build_app(settings, session=None, can_ask=False, script=args.script,
                            record_events=args.record_events, extra_tools=mcp_tools,
                            approver=approver, checkpoints=False, snapshots=False)
            telemetry(app, settings)

            def make_agent(ws: Workspace, given: Sequence[Tool]) -> tuple[Any, Any]:
                # One write gate for every session's folder: the tool policy closes it per
                # turn id, and an ACP session's tools work in a Workspace of its own.
                ws.gate = app.workspace.gate
                extra = {t.name: t for t in given}
                tools = [extra.pop(t.name, t) for t in workspace_tools(settings, ws)]
                return coding_agents(settings, app.agent.provider, ws,
                                     [*tools, *extra.values(), *mcp_tools])

            options = AcpOptions(busy_policy=args.busy_policy, unstable=args.unstable,
                                 editor_fs=args.editor_fs, editor_terminal=args.editor_terminal,
                                 sandbox=Sandbox(enabled=bool(settings["sandbox"]),
                                                 network=bool(settings["sandbox_network"])),
                                 bash_timeout=settings["bash_timeout"],
                                 registry=app.store.directory.parent / "acp-sessions.json")
            try:
                async with SteerableAcpAgent(app.loop, make_agent, approver=approver,
                                             options=options) as agent:
                    # The library still routes session/resume as unstable; it is stable in
                    # the schema (v1.19), and only what the agent implements is answered.
                    reader, writer = await _protocol_streams()
                    # The library's Agent protocol lists every method of the spec; the
                    # router answers method_not_found for those this agent leaves out.
                    await acp.run_agent(cast(Any, agent), writer, reader,
                                        use_unstable_protocol=True)
            finally:
                await app.shells.aclose()  # the default agent's, should a turn have used it
        return 0

    return asyncio.run(main())
