"""``bash`` run in the editor's terminal, when the client offers ``terminal/*``.

The command is the one the built-in ``bash`` would run, sandbox included (``bwrap`` with the
workspace writable and no network, when the machine has it): the editor only hosts the
process, so the person watches it live in the tool call (ACP ``terminal`` content) while the
agent's confinement is unchanged. Name, arguments, permission subjects and the result's shape
(output, then ``[exit code N]``) are those of the built-in tool, so permission rules and
approvals hold as before. A timeout kills the command; a hard abort kills it too and the
terminal is always released.

The process gets the editor's environment, not the agent's: secrets the built-in tool hides
from commands are hidden only when the editor does not have them set itself.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Protocol

from steerable._messages import ToolResult
from steerable.coding import Sandbox, Workspace
from steerable.coding._text import cap_text
from steerable.coding.bash import (
    DEFAULT_TIMEOUT,
    MAX_OUTPUT,
    bash_tool,
    exit_result,
    gated_command,
)
from steerable.errors import ToolError
from steerable.tools import FunctionTool, ToolContext

__all__ = ["EditorTerminals", "make_editor_bash_tool"]

_RELEASE_WAIT = 2.0


class EditorTerminals(Protocol):
    """What the tool needs of the client connection (``acp``'s ``Client`` side)."""

    async def create_terminal(self, session_id: str, command: str,
                              args: list[str] | None = None, env: Any = None,
                              cwd: str | None = None, output_byte_limit: int | None = None,
                              **kwargs: Any) -> Any: ...

    async def terminal_output(self, session_id: str, terminal_id: str, **kwargs: Any) -> Any: ...

    async def wait_for_terminal_exit(self, session_id: str, terminal_id: str,
                                     **kwargs: Any) -> Any: ...

    async def kill_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> Any: ...

    async def release_terminal(self, session_id: str, terminal_id: str,
                               **kwargs: Any) -> Any: ...


async def _quietly(call: Any) -> None:
    """A best-effort call to the editor that must not hang an abort or hide its cause."""
    with contextlib.suppress(Exception):
        await asyncio.wait_for(call, _RELEASE_WAIT)


async def _run(terms: EditorTerminals, ctx: ToolContext, argv: list[str], cwd: str,
               limit: float, max_output: int) -> tuple[str, int | None, str]:
    sid = ctx.session_id
    created = await terms.create_terminal(session_id=sid, command=argv[0], args=argv[1:],
                                          cwd=cwd, output_byte_limit=max_output)
    tid = created.terminal_id
    ctx.progress("running in the editor's terminal", terminalId=tid)
    note = ""
    try:
        try:
            status = await asyncio.wait_for(
                terms.wait_for_terminal_exit(session_id=sid, terminal_id=tid), limit)
            code, signal = status.exit_code, status.signal
        except TimeoutError:
            await terms.kill_terminal(session_id=sid, terminal_id=tid)
            code, signal, note = None, None, f"killed after {limit:g} s"
        if signal:
            note = note or f"ended by {signal}"
        output = await terms.terminal_output(session_id=sid, terminal_id=tid)
        if output.truncated:
            note = (note + "; " if note else "") + "output cut by the editor"
        return str(output.output), code, note
    except asyncio.CancelledError:
        await _quietly(terms.kill_terminal(session_id=sid, terminal_id=tid))
        raise
    finally:
        await _quietly(terms.release_terminal(session_id=sid, terminal_id=tid))


def make_editor_bash_tool(ws: Workspace, terms: EditorTerminals, *,
                          sandbox: Sandbox | None = None,
                          default_timeout: float = DEFAULT_TIMEOUT,
                          max_output: int = MAX_OUTPUT) -> FunctionTool:
    box = Sandbox() if sandbox is None else sandbox

    async def run(command: str, ctx: ToolContext, limit: float) -> ToolResult:
        argv = gated_command(box, ws, ctx.turn_id, command, None)
        try:
            output, code, note = await _run(ctx=ctx, terms=terms, argv=argv, cwd=str(ws.root),
                                            limit=limit, max_output=max_output)
        except Exception as exc:  # the editor refused or went away: the model reads why
            raise ToolError(f"the editor's terminal failed: {exc}") from None
        return exit_result(cap_text(output, max_output), code, [note])

    return bash_tool(ws, box, default_timeout, run)
