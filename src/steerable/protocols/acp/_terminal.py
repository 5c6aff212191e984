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
from collections.abc import Mapping
from typing import Any, Protocol

from steerable._messages import ToolResult
from steerable.coding import Sandbox, Workspace
from steerable.coding._sandbox import bwrap_usable
from steerable.coding._shell import command_subjects
from steerable.coding._text import cap_text
from steerable.coding.bash import DEFAULT_TIMEOUT, MAX_OUTPUT, MAX_TIMEOUT
from steerable.errors import ToolError
from steerable.tools import FunctionTool, ToolContext, tool

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
    writable = [ws.root, *ws.extra_roots]

    def preview(arguments: Mapping[str, Any]) -> str:
        return f"[dry-run] bash would run in {ws.root}; nothing was run:\n$ {arguments['command']}"

    @tool(name="bash", permission_key="command", preview=preview,
          permission_subjects=lambda a: command_subjects(str(a.get("command", ""))))
    # ``timeout`` is the model's argument (a JSON field), not an asyncio deadline of a caller.
    async def bash(command: str, ctx: ToolContext,
                   timeout: float | None = None) -> ToolResult:  # noqa: ASYNC109
        """Run a bash command in the workspace root (programs, and counts: wc -l, ls | wc -l);
        stdout and stderr are returned together.

        Args:
            command: The command line to run with bash -c.
            timeout: Seconds before the command is killed (default 120).
        """
        if not command.strip():
            raise ToolError("command must not be empty")
        limit = default_timeout if timeout is None else timeout
        if not 0 < limit <= MAX_TIMEOUT:
            raise ToolError(f"timeout must be between 0 and {MAX_TIMEOUT:g} seconds")
        if box.enabled:
            await asyncio.to_thread(bwrap_usable)  # the one-time probe, off the event loop
        argv = box.command(["/bin/bash", "-c", command], writable, ws.root)
        try:
            output, code, note = await _run(ctx=ctx, terms=terms, argv=argv, cwd=str(ws.root),
                                            limit=limit, max_output=max_output)
        except Exception as exc:  # the editor refused or went away: the model reads why
            raise ToolError(f"the editor's terminal failed: {exc}") from None
        body = cap_text(output, max_output) or "(no output)"
        if not body.endswith("\n"):
            body += "\n"
        status = f"[exit code {code}]" if code is not None else "[no exit code]"
        if note:
            status += f" [{note}]"
        return ToolResult(body + status, is_error=code != 0, metadata={"exit_code": code})

    return bash
