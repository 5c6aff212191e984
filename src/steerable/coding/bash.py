"""``bash``: run a shell command in the workspace, in its own process group.

The command's whole process group is killed on timeout, on a hard abort (asyncio cancellation
of the tool) and when the call returns, so a ``make`` that started compilers, or a shell that
started a ``sleep`` in the background, leaves nothing behind. Output (stdout and stderr interleaved) is
streamed as ``TOOL_EXEC_PROGRESS`` while it arrives and capped in the result, keeping its start
and its end. The environment given to the command lacks the API keys of the model providers so
that ``env`` or a chatty script cannot copy them into the conversation. Given
``BackgroundShells``, the tool also starts commands in the background (``background=True``),
the same argv and environment, owned by those shells rather than by the call.
"""

from __future__ import annotations

import asyncio
import codecs
import os
import subprocess
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from steerable._messages import ToolResult
from steerable._secrets import SECRET_NAME_PATTERNS, scrub_env
from steerable.coding._bg_shells import BackgroundShells, kill_group, wait_reaped
from steerable.coding._group_guard import GroupGuard
from steerable.coding._sandbox import Sandbox, bwrap_usable
from steerable.coding._shell import command_subjects
from steerable.coding._text import cap_text
from steerable.coding._workspace import Workspace
from steerable.errors import ToolError
from steerable.tools import FunctionTool, ToolContext, tool

__all__ = ["DEFAULT_HIDDEN_ENV", "BashRun", "BashStart", "bash_tool", "exit_result", "gated_command", "make_bash_tool",
           "scrubbed_env"]

DEFAULT_TIMEOUT = 120.0
MAX_TIMEOUT = 1800.0
MAX_OUTPUT = 30_000
# After the shell exits, how long background children may keep the output pipe open before
# they are stopped (they would otherwise hold the tool open forever).
PIPE_GRACE = 0.5
DEFAULT_HIDDEN_ENV = SECRET_NAME_PATTERNS


def scrubbed_env(hidden: Iterable[str], base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a command: secrets removed by name, by shape and by value."""
    return scrub_env(os.environ if base is None else base, hidden)


class _Output:
    """Collects the command's output and streams each chunk as progress."""

    def __init__(self, ctx: ToolContext) -> None:
        self.ctx = ctx
        self.parts: list[str] = []
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def feed(self, data: bytes, final: bool = False) -> None:
        text = self.decoder.decode(data, final)
        if text:
            self.parts.append(text)
            self.ctx.progress(text, stream="output")

    def text(self) -> str:
        return "".join(self.parts)


class _Protocol(asyncio.SubprocessProtocol):
    """Tells apart the shell exiting and its output pipe closing.

    ``Process.wait()`` of asyncio's stream API waits for both, so a background child that
    keeps the pipe open would hold the tool; here each has its own future.
    """

    def __init__(self, out: _Output) -> None:
        loop = asyncio.get_running_loop()
        self.out = out
        self.exited: asyncio.Future[None] = loop.create_future()
        self.closed: asyncio.Future[None] = loop.create_future()

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        self.out.feed(data.encode() if isinstance(data, str) else data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if not self.closed.done():
            self.out.feed(b"", final=True)
            self.closed.set_result(None)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)


async def _run(argv: list[str], cwd: str, env: dict[str, str], limit: float,
               out: _Output, guard: GroupGuard | None = None) -> tuple[int | None, str]:
    """Run ``argv``; returns (exit code or None, a note about how it ended). With ``guard``
    the command's group is watched while it runs: killed if this process dies first."""
    loop = asyncio.get_running_loop()
    if guard is not None:
        await guard.ready()  # before the command starts: it never runs unguarded
    transport, proto = await loop.subprocess_exec(
        lambda: _Protocol(out), *argv, cwd=cwd, env=env,
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        start_new_session=True)
    pid = transport.get_pid()
    if guard is not None:
        guard.watch(pid)
    note = ""
    try:
        done, _ = await asyncio.wait((proto.exited,), timeout=limit)
        if not done:
            kill_group(pid)
            note = f"timed out after {limit:g} s; the command and its children were killed"
        done, _ = await asyncio.wait((proto.closed,), timeout=PIPE_GRACE)
        if not done:
            kill_group(pid)  # background children still hold the pipe open
            note = note or "background processes still writing output were stopped"
        await proto.closed
        await proto.exited
        # Nothing the command started outlives the call: children that left the pipe (``cmd >
        # log &``) go with the group (in the sandbox the PID namespace already took them).
        kill_group(pid)
    except asyncio.CancelledError:
        # A hard abort: kill the group at once (synchronously), then let the cancel proceed,
        # once the killed process has been reaped (a few ms): its exit is recorded before the
        # event loop may close, so no process object is left unreaped.
        kill_group(pid)
        await wait_reaped(proto.exited)
        raise
    finally:
        if guard is not None:
            guard.forget(pid)  # killed or ended: its id may be reused
        transport.close()
    code = transport.get_returncode()
    return (None if note.startswith("timed out") else code), note


def gated_command(box: Sandbox, ws: Workspace, turn_id: str, command: str,
                  env: Mapping[str, str] | None) -> list[str]:
    """The argv that runs ``command`` in ``ws`` for a call of ``turn_id``: in the sandbox with
    the workspace writable, or read-only when the turn's write gate is closed (a request that
    asks for no change); refused when the gate is closed and there is no sandbox to hold it."""
    argv = ["/bin/bash", "-c", command]
    roots = [ws.root, *ws.extra_roots]
    why = ws.gate.refusal(turn_id)
    if why is None:
        return box.command(argv, roots, ws.root, env)
    if box.enabled and bwrap_usable() is not None:
        return box.command(argv, (), ws.root, env, read_only=roots)
    raise ToolError(f"not run: {why}; without the sandbox (bubblewrap) a command cannot be "
                    "kept from changing files")


def make_bash_tool(ws: Workspace, *, default_timeout: float = DEFAULT_TIMEOUT,
                   max_output: int = MAX_OUTPUT,
                   hidden_env: Iterable[str] = DEFAULT_HIDDEN_ENV,
                   sandbox: Sandbox | None = None,
                   shells: BackgroundShells | None = None) -> FunctionTool:
    """The ``bash`` tool; with ``shells`` it also takes ``background=True`` (see
    ``BackgroundShells``, whose ``tools()`` are its ``bash_output`` and ``bash_kill``)."""
    hidden = tuple(hidden_env)
    box = Sandbox() if sandbox is None else sandbox
    writable = [ws.root, *ws.extra_roots]

    async def run(command: str, ctx: ToolContext, limit: float) -> ToolResult:
        out = _Output(ctx)
        env = scrubbed_env(hidden)
        argv = gated_command(box, ws, ctx.turn_id, command, env)
        code, note = await _run(argv, str(ws.root), env, limit, out,
                                None if shells is None else shells.guard)
        missing = box.explain_missing(out.text(), writable, env) if code == 127 else None
        return exit_result(cap_text(out.text(), max_output), code, [note, missing])

    async def start(command: str, ctx: ToolContext) -> str:
        assert shells is not None
        env = scrubbed_env(hidden)
        argv = gated_command(box, ws, ctx.turn_id, command, env)
        shell = await shells.start(argv, str(ws.root), env, command=command,
                                   session_id=ctx.session_id, turn_id=ctx.turn_id)
        return (f"started in the background as {shell.shell_id}; bash_output {shell.shell_id} "
                "shows its output, and you get a message when it ends")

    return bash_tool(ws, box, default_timeout, run, None if shells is None else start)


BashRun = Callable[[str, ToolContext, float], Awaitable[ToolResult]]
"""How a bash tool runs a checked command line (with its timeout in seconds)."""

BashStart = Callable[[str, ToolContext], Awaitable[str]]
"""How a bash tool starts a checked command line in the background (the answer for the model)."""


def bash_tool(ws: Workspace, box: Sandbox, default_timeout: float, run: BashRun,
              start: BashStart | None = None) -> FunctionTool:
    """The model's ``bash`` tool: its schema, preview, permission subjects and argument checks,
    over ``run`` (a local process here, the editor's terminal over ACP); with ``start`` it has
    a ``background`` argument too."""

    def preview(arguments: Mapping[str, Any]) -> str:
        how = " in the background" if arguments.get("background") else ""
        return (f"[dry-run] bash would run{how} in {ws.root}; nothing was run:\n"
                f"$ {arguments['command']}")

    async def checked(command: str, asked: float | None) -> float:
        if not command.strip():
            raise ToolError("command must not be empty")
        limit = default_timeout if asked is None else asked
        if not 0 < limit <= MAX_TIMEOUT:
            raise ToolError(f"timeout must be between 0 and {MAX_TIMEOUT:g} seconds")
        if box.enabled:
            await asyncio.to_thread(bwrap_usable)  # the one-time probe, off the event loop
        return limit

    decorate = tool(name="bash", permission_key="command", preview=preview,
                    permission_subjects=lambda a: command_subjects(str(a.get("command", ""))))
    if start is None:
        # ``timeout`` is the model's argument (a JSON field), not an asyncio deadline of a caller.
        async def bash(command: str, ctx: ToolContext,
                       timeout: float | None = None) -> ToolResult:  # noqa: ASYNC109
            """Run a bash command in the workspace root (programs, and counts: wc -l, ls | wc -l);
            stdout and stderr are returned together.

            Args:
                command: The command line to run with bash -c.
                timeout: Seconds before the command is killed (default 120).
            """
            return await run(command, ctx, await checked(command, timeout))

        return _gated(decorate(bash), ws)

    async def bash_bg(command: str, ctx: ToolContext, timeout: float | None = None,  # noqa: ASYNC109
                      background: bool = False) -> ToolResult | str:
        """Run a bash command in the workspace root (programs, and counts: wc -l, ls | wc -l);
        stdout and stderr are returned together.

        Args:
            command: The command line to run with bash -c.
            timeout: Seconds before the command is killed (default 120; none in background).
            background: Return at once with an id (for servers, long builds); you get a
                message when it ends.
        """
        limit = await checked(command, timeout)
        if background:
            return await start(command, ctx)
        return await run(command, ctx, limit)

    return _gated(decorate(bash_bg), ws)


def _gated(made: FunctionTool, ws: Workspace) -> FunctionTool:
    made.carried = (ws.gate,)  # the turn's verdict comes with a call run in another process
    return made


def exit_result(output: str, code: int | None, notes: Iterable[str | None]) -> ToolResult:
    """A command's output with its exit code and notes on one last line."""
    body = output or "(no output)"
    if not body.endswith("\n"):
        body += "\n"
    status = f"[exit code {code}]" if code is not None else "[no exit code]"
    status += "".join(f" [{note}]" for note in notes if note)
    return ToolResult(body + status, is_error=code != 0, metadata={"exit_code": code})
