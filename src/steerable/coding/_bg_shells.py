"""Background shells: commands the model started with ``bash(background=True)``.

``BackgroundShells`` owns every such process of one front end (a ``run``, a ``chat``, a
server): it starts them (the argv is the foreground tool's, sandbox included), keeps their
output (the newest ``keep`` characters; older ones are counted as dropped), answers
``bash_output`` and ``bash_kill``, and when a command ends on its own it hands a
``ShellNotice`` to ``notify`` so the front end can tell the session (SPEC 10: as a message with
a receipt). Each command runs as the leader of its own process group, like foreground bash;
when it ends, whatever it left behind is killed with the group. ``stop_session`` and ``aclose``
kill what still runs, without notices: the session (or the front end) is ending; a
``GroupGuard`` process kills them if this process dies without doing so (``kill -9``).

A shell belongs to the session that started it: another session can neither read nor kill it.
With several processes serving the sessions (Temporal workers), each has a ``home`` and the ids
end in it, so ``bash_output`` and ``bash_kill`` are sent to the process that runs the command.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import itertools
import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from steerable._events import Event, EventKind, TurnStatus
from steerable.coding._group_guard import GroupGuard
from steerable.coding._text import cap_text
from steerable.errors import ToolError
from steerable.tools import FunctionTool, ToolContext, tool

__all__ = ["REAP_WAIT", "BackgroundShells", "Shell", "ShellNotice", "kill_group", "wait_reaped"]

log = logging.getLogger("steerable")

KEEP_OUTPUT = 200_000
"""Characters of a background command's output kept for ``bash_output`` (the newest)."""
NOTICE_OUTPUT = 4_000
"""Characters of unread output a completion notice carries (its start and end)."""
MAX_RUNNING = 8
"""Background commands one session may have running at once."""
PIPE_GRACE = 0.5
REAP_WAIT = 5.0
"""How long a killed process may take to be reaped (SIGKILL cannot be ignored, but on a busy
machine the exit can take more than a moment to be seen); unreaped, it would be a zombie."""


def kill_group(pid: int) -> None:
    """SIGKILL the process group led by ``pid`` (started with ``start_new_session``)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


async def wait_reaped(exited: asyncio.Future[None]) -> None:
    """After ``kill_group``, in a task being cancelled: wait (at most ``REAP_WAIT``) until the
    killed process's exit is seen, however often the task is cancelled meanwhile. A second
    cancel follows the first soon when the loop closes (its reaper cancels once more what a
    hard abort left); cut short there, the exit was never recorded, and the process's
    ``Popen`` was left "still running". The caller re-raises the cancellation it handles."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + REAP_WAIT
    while not exited.done() and (left := deadline - loop.time()) > 0:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait((exited,), timeout=left)


@dataclass(frozen=True, slots=True)
class ShellNotice:
    """A background command ended on its own: what the session is told."""

    session_id: str
    shell_id: str
    command: str
    exit_code: int | None
    text: str
    """The message for the model: which command, its exit code, its unread output."""


@dataclass(eq=False)
class Shell:
    """One background command and what it printed."""

    shell_id: str
    session_id: str
    command: str
    pid: int
    turn_id: str = ""
    """The turn that started it (a hard abort of that turn stops it)."""
    started: float = field(default_factory=time.monotonic)
    ended: float | None = None
    exit_code: int | None = None
    killed: bool = False
    buffer: str = ""
    read_upto: int = 0
    """Offset into ``buffer`` of the first character not read yet."""
    dropped: int = 0
    """Characters dropped from the front of ``buffer`` (over ``KEEP_OUTPUT``)."""
    missed: int = 0
    """Unread characters that were dropped before anyone read them."""

    @property
    def status(self) -> str:
        if self.ended is None:
            return "running"
        return "killed" if self.killed else "exited"

    def add(self, text: str, keep: int) -> None:
        self.buffer += text
        over = len(self.buffer) - keep
        if over > 0:
            self.buffer = self.buffer[over:]
            self.dropped += over
            lost_unread = over - self.read_upto
            if lost_unread > 0:
                self.missed += lost_unread
            self.read_upto = max(0, self.read_upto - over)

    def take_unread(self) -> tuple[str, int]:
        """The output not read yet and how many unread characters were dropped; now read."""
        text, missed = self.buffer[self.read_upto:], self.missed
        self.read_upto, self.missed = len(self.buffer), 0
        return text, missed

    def state_line(self) -> str:
        took = (self.ended or time.monotonic()) - self.started
        if self.ended is None:
            return f"[{self.shell_id} running for {took:.1f} s]"
        how = "killed" if self.killed else f"exit code {self.exit_code}"
        return f"[{self.shell_id} {how} after {took:.1f} s]"


class _Pipe(asyncio.SubprocessProtocol):
    def __init__(self, shell: Callable[[], Shell | None], keep: int) -> None:
        loop = asyncio.get_running_loop()
        self.shell = shell
        self.keep = keep
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self.early: list[str] = []
        self.exited: asyncio.Future[None] = loop.create_future()
        self.closed: asyncio.Future[None] = loop.create_future()

    def _feed(self, text: str) -> None:
        if not text:
            return
        sh = self.shell()
        if sh is None:  # output before the shell's record exists (the first few ms)
            self.early.append(text)
        else:
            sh.add(text, self.keep)

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        self._feed(self.decoder.decode(data.encode() if isinstance(data, str) else data))

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if not self.closed.done():
            self._feed(self.decoder.decode(b"", True))
            self.closed.set_result(None)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)


class BackgroundShells:
    """The background commands of one front end, by id (``bg1``, ``bg2``...).

    ``notify`` is called (on the event loop) with a ``ShellNotice`` when a command ends on its
    own; ``bash_kill``, ``stop_session`` and ``aclose`` send none (whoever stopped it knows).
    """

    def __init__(self, *, max_output: int = 30_000, keep: int = KEEP_OUTPUT,
                 max_running: int = MAX_RUNNING,
                 notify: Callable[[ShellNotice], object] | None = None,
                 home: str | None = None) -> None:
        self.max_output = max_output
        self.keep = keep
        self.max_running = max_running
        self.notify = notify
        self._shells: dict[str, Shell] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._ids = itertools.count(1)
        self.home = home
        """This process's home among several that serve the sessions (a Temporal worker's):
        the commands' ids end in it (``bg1@HOME``), so a call about one is sent here."""
        self._guard = GroupGuard()
        self._closed = False

    @property
    def guard(self) -> GroupGuard:
        """The guard of these shells' process groups; foreground bash calls are watched by it
        too, so a front end killed mid-call (kill -9) leaves none of them running either."""
        return self._guard

    def running(self, session_id: str | None = None) -> list[Shell]:
        return [s for s in self._shells.values() if s.ended is None
                and (session_id is None or s.session_id == session_id)]

    async def start(self, argv: Sequence[str], cwd: str, env: Mapping[str, str], *,
                    command: str, session_id: str, turn_id: str = "") -> Shell:
        """Start ``argv`` in the background for ``session_id``; returns at once."""
        if self._closed:
            raise ToolError("background commands are closed: the session is ending")
        if len(self.running(session_id)) >= self.max_running:
            raise ToolError(f"{self.max_running} background commands already run; stop one "
                            "with bash_kill first")
        await self._guard.ready()
        shell_id = f"bg{next(self._ids)}" + (f"@{self.home}" if self.home else "")
        holder: list[Shell] = []
        loop = asyncio.get_running_loop()
        transport, pipe = await loop.subprocess_exec(
            lambda: _Pipe(lambda: holder[0] if holder else None, self.keep), *argv, cwd=cwd,
            env=dict(env), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, start_new_session=True)
        shell = Shell(shell_id, session_id, command, transport.get_pid(), turn_id)
        self._guard.watch(shell.pid)
        for text in pipe.early:
            shell.add(text, self.keep)
        holder.append(shell)
        self._shells[shell_id] = shell
        self._tasks[shell_id] = loop.create_task(self._watch(shell, transport, pipe))
        return shell

    async def _watch(self, shell: Shell, transport: asyncio.SubprocessTransport,
                     pipe: _Pipe) -> None:
        try:
            await pipe.exited
            # Children that keep the pipe open after the shell exited are stopped, as in
            # foreground bash: nothing a command started outlives it.
            await asyncio.wait((pipe.closed,), timeout=PIPE_GRACE)
            kill_group(shell.pid)
            await pipe.closed
        except asyncio.CancelledError:
            kill_group(shell.pid)
            shell.killed = True
            await wait_reaped(pipe.exited)
            raise
        finally:
            self._guard.forget(shell.pid)
            transport.close()
            shell.exit_code = transport.get_returncode()
            shell.ended = time.monotonic()
            self._tasks.pop(shell.shell_id, None)
        if not shell.killed and not self._closed and self.notify is not None:
            try:
                self.notify(self._notice(shell))
            except Exception:  # the front end's delivery failed: the output stays readable
                log.exception("telling session %s that %s ended failed", shell.session_id,
                              shell.shell_id)

    def _notice(self, shell: Shell) -> ShellNotice:
        text, missed = shell.take_unread()
        took = (shell.ended or shell.started) - shell.started
        head = (f"Background command {shell.shell_id} finished (exit code {shell.exit_code}, "
                f"{took:.1f} s): {shell.command}")
        body = _output_text(cap_text(text, NOTICE_OUTPUT), missed)
        return ShellNotice(shell.session_id, shell.shell_id, shell.command, shell.exit_code,
                           f"{head}\n{body}")

    def _find(self, shell_id: str, session_id: str) -> Shell:
        shell = self._shells.get(shell_id.strip())
        if shell is None or shell.session_id != session_id:
            known = ", ".join(s.shell_id for s in self._shells.values()
                              if s.session_id == session_id) or "none"
            raise ToolError(f"no background command {shell_id!r} (this session's: {known})")
        return shell

    def output(self, shell_id: str, session_id: str) -> str:
        """The new output of a command since it was last read, then its state."""
        shell = self._find(shell_id, session_id)
        text, missed = shell.take_unread()
        return f"{_output_text(cap_text(text, self.max_output), missed)}\n{shell.state_line()}"

    async def kill(self, shell_id: str, session_id: str) -> str:
        shell = self._find(shell_id, session_id)
        if shell.ended is not None:
            return f"{shell.shell_id} had already ended {shell.state_line()}"
        await self._stop([shell])
        return f"killed {shell.shell_id} {shell.state_line()}"

    async def stop_session(self, session_id: str) -> list[Shell]:
        """Kill the session's running commands (no notices); those that were running."""
        stopped = self.running(session_id)
        await self._stop(stopped)
        return stopped

    async def aclose(self) -> list[Shell]:
        """Kill every running command and wait until each is reaped; those that were running.
        Nothing can be started afterwards."""
        self._closed = True
        stopped = self.running()
        await self._stop(stopped)
        await self._guard.aclose()
        return stopped

    at_every_home = True
    """On Temporal, its events reach every worker that ran one of the turn's calls: the
    commands a hard abort stops are where they were started (``steerable.temporal._homes``)."""

    def on_event(self, event: Event) -> None:
        """As a loop hook: a hard abort rolls its turn back, and with it the commands the turn
        started (the conversation no longer knows them); they end without a notice."""
        if event.kind is EventKind.TURN_END and event.status is TurnStatus.ABORTED:
            for shell in self.running():
                if shell.turn_id == event.turn_id:
                    self._kill_nowait(shell)

    @staticmethod
    def _kill_nowait(shell: Shell) -> None:
        """Kill the group now; its watcher reaps it."""
        if shell.ended is None:
            shell.killed = True
            kill_group(shell.pid)

    async def _stop(self, shells: list[Shell]) -> None:
        tasks = []
        for shell in shells:
            self._kill_nowait(shell)
            task = self._tasks.get(shell.shell_id)
            if task is not None:
                tasks.append(task)
        # Each watcher sees its command exit, stops what was left in its group and reaps it.
        await asyncio.gather(*tasks)

    def tools(self) -> list[FunctionTool]:
        """``bash_output`` and ``bash_kill`` over these shells."""

        # Reading output changes nothing; stopping a command is an action (asked like one).
        @tool(read_only=True)
        def bash_output(id: str, ctx: ToolContext) -> str:
            """New output of a background bash command since you last looked, and whether it
            still runs.

            Args:
                id: The id bash gave, like bg1.
            """
            return self.output(id, ctx.session_id)

        @tool(preview=lambda a: f"[dry-run] bash_kill would stop {a.get('id')}; nothing was "
                            "stopped")
        async def bash_kill(id: str, ctx: ToolContext) -> str:
            """Stop a background bash command.

            Args:
                id: The id bash gave, like bg1.
            """
            return await self.kill(id, ctx.session_id)

        for made in (bash_output, bash_kill):
            made.home_key = "id"  # run where the command runs (``BaseTool.home_of``)
        return [bash_output, bash_kill]


def _output_text(text: str, missed: int) -> str:
    lost = f"[{missed} earlier characters were dropped unread]\n" if missed else ""
    return lost + (text.rstrip("\n") if text else "(no new output)")
