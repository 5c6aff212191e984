"""llama.cpp's ``llama-server`` run as a child process on a free loopback port.

The server runs in its own process group, so stopping it (or a crash of steerable) takes any
helper processes with it. Startup is bounded: the process must answer ``GET /v1/models`` within
``startup_timeout`` seconds, and if it exits first the error quotes the tail of its log instead
of leaving the caller waiting. A finalizer kills the group if the owner forgets ``stop()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import tempfile
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path

import httpx

from steerable.errors import ProviderError

__all__ = ["LlamaServer", "free_port", "log_tail", "server_command", "server_environ"]

_POLL = 0.1
_STOP_GRACE = 5.0


def free_port() -> int:
    """A port nobody listens on now (the server binds it a moment later; a clash fails fast)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def server_command(binary: str, model_path: Path, n_ctx: int,
                   threads: int | None) -> Callable[[int], list[str]]:
    """The command line of ``llama-server`` for a port.

    ``--jinja`` applies the model's own chat template, which is what makes llama.cpp parse
    Qwen-style tool calls and constrain them with a grammar built from the offered tools' schemas
    (lazily: only once the model opens a call). One slot (``-np 1``) keeps the whole context for
    the one conversation at a time a CLI has, and lets the next run reuse its cached prefix.
    ``--metrics`` is how the keeper sees that requests are being served.
    """
    def command(port: int) -> list[str]:
        args = [binary, "--model", str(model_path), "--host", "127.0.0.1", "--port", str(port),
                "--ctx-size", str(n_ctx), "--jinja", "--parallel", "1", "--metrics",
                "--no-webui"]
        if threads is not None:
            args += ["--threads", str(threads)]
        return args
    return command


def server_environ() -> dict[str, str]:
    """The server's environment: OpenMP threads sleep instead of spinning while they wait.

    Measured with Qwen2.5-Coder-0.5B on 2 cores shared with other work (load average 7-13):
    2 threads spinning (OpenMP's default) generated 0.3-0.4 tokens/s, 1 thread 2.4-2.5,
    2 threads with ``OMP_WAIT_POLICY=PASSIVE`` 4.4; a spinning thread burns the time slice the
    other one needs to reach the barrier. The user's own setting wins.
    """
    return {"OMP_WAIT_POLICY": "PASSIVE", **os.environ}


def log_tail(log: Path | None, lines: int = 12) -> str:
    """The last lines of a server log, formatted to end an error message ("" if none)."""
    if log is None:
        return ""
    try:
        text = log.read_text(errors="replace").strip().splitlines()[-lines:]
    except OSError:
        return ""
    return (":\n  " + "\n  ".join(text)) if text else ""


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


class LlamaServer:
    """One child server process. ``start()`` returns its base URL (ending in ``/v1``)."""

    def __init__(self, command: Callable[[int], Sequence[str]], *,
                 startup_timeout: float = 120.0, log: Path | None = None) -> None:
        self._command = command
        self._startup_timeout = startup_timeout
        self._process: asyncio.subprocess.Process | None = None
        self._finalizer: weakref.finalize[[int], LlamaServer] | None = None
        self._log_path = log
        self._log: Path | None = None
        self.base_url: str | None = None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.returncode is None

    async def start(self) -> str:
        port = free_port()
        if self._log_path is None:
            fd, log_name = tempfile.mkstemp(prefix="steerable-llama-", suffix=".log")
            self._log = Path(log_name)
        else:
            self._log = self._log_path
            fd = os.open(self._log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            self._process = await asyncio.create_subprocess_exec(
                *self._command(port), env=server_environ(), stdin=asyncio.subprocess.DEVNULL,
                stdout=fd,
                stderr=asyncio.subprocess.STDOUT, start_new_session=True)
        except OSError as exc:
            raise ProviderError(f"cannot start the local model server: {exc}") from None
        finally:
            os.close(fd)
        self._finalizer = weakref.finalize(self, _kill_group, self._process.pid)
        self.base_url = f"http://127.0.0.1:{port}/v1"
        try:
            await self._wait_ready(self.base_url)
        except BaseException:
            await self.stop()
            raise
        return self.base_url

    async def _wait_ready(self, base_url: str) -> None:
        assert self._process is not None
        deadline = asyncio.get_running_loop().time() + self._startup_timeout
        async with httpx.AsyncClient(timeout=httpx.Timeout(2.0)) as client:
            while True:
                if self._process.returncode is not None:
                    raise self.exited_error("while starting")
                with contextlib.suppress(httpx.TransportError):
                    if (await client.get(f"{base_url}/models")).status_code == 200:
                        return
                if asyncio.get_running_loop().time() > deadline:
                    raise ProviderError(
                        f"the local model server did not answer within "
                        f"{self._startup_timeout:g} s{self._log_tail()}")
                await asyncio.sleep(_POLL)

    def exited_error(self, when: str) -> ProviderError:
        code = None if self._process is None else self._process.returncode
        return ProviderError(f"the local model server exited {when} (exit code {code})"
                             f"{self._log_tail()}")

    def _log_tail(self) -> str:
        return log_tail(self._log)

    async def stop(self) -> None:
        """Terminate the process group; kill it if it has not gone after a grace period."""
        process, self._process = self._process, None
        if process is not None:
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.pid, signal.SIGTERM)
                try:
                    async with asyncio.timeout(_STOP_GRACE):
                        await process.wait()
                except TimeoutError:
                    _kill_group(process.pid)
                    await process.wait()
            else:
                _kill_group(process.pid)  # helpers it left behind
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if self._log is not None:
            self._log.unlink(missing_ok=True)
            self._log = None
