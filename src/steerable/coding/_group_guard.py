"""A guard process that kills the background commands' process groups if this process dies.

Background commands outlive the tool call that started them, so a front end killed with
SIGKILL (or dying of a crash) cannot stop them itself. The guard is a small Python process that
reads a pipe from this one: told each group as it starts and as it ends, it kills the groups
still listed once the pipe closes, which the kernel does when this process dies, however it
dies. It runs in a session of its own (a Ctrl+C at the terminal is not for it). With
bubblewrap, bwrap's ``--die-with-parent`` and PID namespace end the commands too; without it,
this is what does.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys

__all__ = ["GroupGuard"]

_SCRIPT = """\
import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
groups = set()
for line in sys.stdin:
    n = int(line)
    if n > 0:
        groups.add(n)
    else:
        groups.discard(-n)
for g in groups:
    try:
        os.killpg(g, signal.SIGKILL)
    except OSError:
        pass
"""


class GroupGuard:
    """Started on first use; ``aclose`` ends it (after the groups it watches have ended)."""

    def __init__(self) -> None:
        self._proc: asyncio.subprocess.Process | None = None
        self._starting: asyncio.Lock | None = None

    async def ready(self) -> None:
        """Start the guard if it is not running yet (before a command is started, so no
        command ever runs unguarded)."""
        if self._starting is None:
            self._starting = asyncio.Lock()
        async with self._starting:
            if self._proc is None:
                self._proc = await asyncio.create_subprocess_exec(
                    sys.executable, "-I", "-c", _SCRIPT, stdin=subprocess.PIPE,
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                    start_new_session=True)

    def watch(self, pgid: int) -> None:
        self._send(pgid)

    def forget(self, pgid: int) -> None:
        """The group ended (its id may be reused): no longer the guard's to kill."""
        self._send(-pgid)

    def _send(self, n: int) -> None:
        stdin = self._proc.stdin if self._proc is not None else None
        if stdin is not None and not stdin.is_closing():
            stdin.write(f"{n}\n".encode())

    async def aclose(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.stdin is not None:
            proc.stdin.close()
        await proc.wait()
