"""One warm ``llama-server`` per model, shared by every steerable process of the user.

Loading a model and evaluating the ~1,000-token prefix of the coding prompt took seconds in
every CLI run when each run started its own server. Instead the first run starts a *keeper*
(``python -m steerable.providers._shared_server``, detached in its own session) that runs the
server and records it in ``<state_dir>/<key>.json``; later runs find it there and reuse it, so
llama.cpp's prompt cache is warm. The keeper stops the server and exits once nobody has used it
for ``idle`` seconds.

Races are settled by one lock file per server key (``fcntl.flock``): a client holds it while it
looks for a live server, starts one if needed and waits for it to be ready, and *touches* the
state file; the keeper holds it while it decides to exit, and only exits when the state file has
not been touched and no request ran for ``idle`` seconds. So two runs starting at once get one
server, and a server is never stopped between a client finding it and using it.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx

from steerable.errors import ProviderError
from steerable.providers._llama_server import LlamaServer, log_tail, server_command

__all__ = [
    "ServerSpec",
    "acquire",
    "crash_report",
    "default_state_dir",
    "healthy",
    "stop_all",
    "stop_idle",
    "touch",
]

_CHECK_EVERY = 2.0
# Keepers this process started: they outlive the call by design; held here so they are not
# reported as leaked, and reaped (poll) when they end so no zombie stays.
_KEEPERS: list[tuple[subprocess.Popen[bytes], Path]] = []


@dataclass(frozen=True, slots=True)
class ServerSpec:
    """What identifies a shared server: same binary, model and settings -> same server."""

    binary: str
    model_path: str
    n_ctx: int
    threads: int | None
    idle: float
    startup_timeout: float

    @property
    def key(self) -> str:
        ident = json.dumps([self.binary, self.model_path, self.n_ctx, self.threads])
        return f"{Path(self.model_path).stem}-{hashlib.sha256(ident.encode()).hexdigest()[:10]}"


def default_state_dir() -> Path:
    import platformdirs

    return platformdirs.user_cache_path("steerable") / "servers"


@contextlib.contextmanager
def _locked(state_dir: Path, key: str) -> Iterator[None]:
    state_dir.mkdir(parents=True, exist_ok=True)
    with open(state_dir / f"{key}.lock", "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _read_state(path: Path) -> dict[str, object] | None:
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) else None


def _alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def healthy(base_url: str) -> bool:
    """Whether an OpenAI-compatible server answers at ``base_url`` (blocking)."""
    with contextlib.suppress(httpx.HTTPError):
        return httpx.get(f"{base_url}/models", timeout=2.0).status_code == 200
    return False


def touch(state_dir: Path, key: str) -> None:
    """Mark the server as in use now (postpones its idle exit)."""
    with contextlib.suppress(OSError):
        os.utime(state_dir / f"{key}.json")


def _spawn(spec: ServerSpec, state_dir: Path) -> subprocess.Popen[bytes]:
    err = open(state_dir / f"{spec.key}.keeper.log", "wb")  # noqa: SIM115 - handed to the child
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "steerable.providers._shared_server", str(state_dir),
             json.dumps(asdict(spec))],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
            start_new_session=True)
    except OSError as exc:
        raise ProviderError(f"cannot start the local model server: {exc}") from None
    finally:
        err.close()


def _wait_for_keeper(keeper: subprocess.Popen[bytes], spec: ServerSpec,
                     state_dir: Path) -> str:
    state_file = state_dir / f"{spec.key}.json"
    deadline = time.monotonic() + spec.startup_timeout + 10.0
    while time.monotonic() < deadline:
        state = _read_state(state_file)
        if state is not None and state.get("pid") == keeper.pid:
            return str(state["base_url"])
        if keeper.poll() is not None:
            raise ProviderError(_keeper_error(state_dir / f"{spec.key}.keeper.log",
                                              keeper.returncode))
        time.sleep(0.1)
    keeper.kill()
    raise ProviderError(f"the local model server did not start within "
                        f"{spec.startup_timeout:g} s{log_tail(state_dir / f'{spec.key}.log')}")


def _keeper_error(path: Path, code: int) -> str:
    """What a keeper that failed to start wrote (its error names the server's log tail)."""
    try:
        text = path.read_text(errors="replace").strip()
    except OSError:
        text = ""
    path.unlink(missing_ok=True)
    return text or f"the local model server's keeper exited with code {code}"


def acquire(spec: ServerSpec, state_dir: Path) -> tuple[str, bool]:
    """The base URL of the shared server for ``spec``, started if none is running; and whether
    this call started it. Blocking: run it in a thread."""
    state_file = state_dir / f"{spec.key}.json"
    _KEEPERS[:] = [(k, d) for k, d in _KEEPERS if k.poll() is None]
    with _locked(state_dir, spec.key):
        state = _read_state(state_file)
        if state is not None and _alive(state.get("pid")) and healthy(str(state["base_url"])):
            touch(state_dir, spec.key)
            return str(state["base_url"]), False
        if state is not None and _alive(state.get("pid")):
            with contextlib.suppress(OSError):  # alive but not answering: replace it
                os.killpg(int(str(state["pid"])), signal.SIGTERM)
        state_file.unlink(missing_ok=True)
        keeper = _spawn(spec, state_dir)
        _KEEPERS.append((keeper, state_dir))
        return _wait_for_keeper(keeper, spec, state_dir), True


IN_USE_WINDOW = 120.0
"""Seconds after its last request during which a shared server counts as in use: a run that
is between two calls (a tool running, a command's output being read) still needs it."""


def _in_use(state_file: Path, state: dict[str, object], window: float) -> bool:
    """Whether a run is using the server now: a request is being served, or one was made
    within ``window`` seconds (every request touches the state file)."""
    try:
        if time.time() - state_file.stat().st_mtime < window:
            return True
    except OSError:
        return False
    root = str(state.get("base_url", "")).removesuffix("/v1")
    with contextlib.suppress(httpx.HTTPError, ValueError):
        for line in httpx.get(f"{root}/metrics", timeout=2.0).text.splitlines():
            if line.startswith("llamacpp:requests_processing"):
                return float(line.split()[-1]) > 0
    return False


def stop_idle(state_dir: Path, *, model: str | None = None, force: bool = False,
              window: float = IN_USE_WINDOW) -> tuple[list[str], list[str]]:
    """Stop the shared servers of ``model`` (a name or file stem; None: every model) that no
    run is using (``python -m steerable.providers.local stop``); ``force`` stops them anyway.
    Returns the keys stopped and the keys left running because a run is using them."""
    stopped, busy = [], []
    for state_file in sorted(state_dir.glob("*.json")):
        state = _read_state(state_file)
        if state is None or not _alive(state.get("pid")):
            continue
        if model is not None and model not in Path(str(state.get("model", ""))).stem:
            continue
        if not force and _in_use(state_file, state, window):
            busy.append(state_file.stem)
            continue
        with contextlib.suppress(OSError):
            os.kill(int(str(state["pid"])), signal.SIGTERM)
            stopped.append(state_file.stem)
    return stopped, busy


def stop_all(state_dir: Path, *, timeout: float = 10.0) -> list[str]:
    """Stop every shared server of ``state_dir``, in use or not (a test's private folder, a
    process that owns its servers).

    Keepers this process started for ``state_dir`` are stopped even when their state file is
    gone (a keeper whose server crashed is on its way out) and waited for, up to ``timeout``
    each, so none is left running or unreaped when the call returns."""
    stopped, _ = stop_idle(state_dir, force=True)
    for keeper, folder in list(_KEEPERS):
        if folder != state_dir:
            continue
        if keeper.poll() is None:
            with contextlib.suppress(OSError):
                keeper.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                keeper.wait(timeout)
        if keeper.returncode is not None:
            _KEEPERS.remove((keeper, folder))
    return stopped


# --- the keeper process --------------------------------------------------------------------

async def _busy(client: httpx.AsyncClient, base_url: str) -> bool:
    """Whether the server is serving a request now (``llamacpp:requests_processing``)."""
    root = base_url.removesuffix("/v1")
    with contextlib.suppress(httpx.HTTPError, ValueError):
        for line in (await client.get(f"{root}/metrics")).text.splitlines():
            if line.startswith("llamacpp:requests_processing"):
                return float(line.split()[-1]) > 0
    return False


def _should_exit(state_file: Path, idle: float) -> bool:
    try:
        return time.time() - state_file.stat().st_mtime > idle
    except OSError:
        return True  # the state file is gone (``stop``, or replaced): nobody can find us


async def _keep(spec: ServerSpec, state_dir: Path) -> None:
    state_file = state_dir / f"{spec.key}.json"
    log = state_dir / f"{spec.key}.log"
    server = LlamaServer(server_command(spec.binary, Path(spec.model_path), spec.n_ctx,
                                       spec.threads),
                         startup_timeout=spec.startup_timeout, log=log)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    base_url = await server.start()
    tmp = state_file.with_suffix(".tmp")
    tmp.write_text(json.dumps({"pid": os.getpid(), "base_url": base_url,
                               "model": spec.model_path}))
    os.replace(tmp, state_file)
    try:
        async with httpx.AsyncClient(timeout=2.0) as client:
            while not stop.is_set() and server.running:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(_CHECK_EVERY):
                        await stop.wait()
                if await _busy(client, base_url):
                    touch(state_dir, spec.key)
                elif _should_exit(state_file, spec.idle):
                    with _locked(state_dir, spec.key):  # no client is between finding and using
                        if _should_exit(state_file, spec.idle):
                            _forget(state_file)
                            break
    finally:
        _forget(state_file)
        crashed = not stop.is_set() and not server.running
        tail = server.exited_error("during a call") if crashed else None
        await server.stop()  # removes the log
        if tail is not None:  # for the client whose call failed
            (state_dir / f"{spec.key}.crash").write_text(str(tail))
        (state_dir / f"{spec.key}.keeper.log").unlink(missing_ok=True)


def _forget(state_file: Path) -> None:
    state = _read_state(state_file)
    if state is not None and state.get("pid") == os.getpid():
        state_file.unlink(missing_ok=True)


def crash_report(state_dir: Path, key: str) -> str | None:
    """Why the shared server died during a call, once (the report is removed when read)."""
    path = state_dir / f"{key}.crash"
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return None
    path.unlink(missing_ok=True)
    return text


def main() -> None:
    state_dir = Path(sys.argv[1])
    spec = ServerSpec(**json.loads(sys.argv[2]))
    try:
        asyncio.run(_keep(spec, state_dir))
    except ProviderError as exc:  # the client that is waiting reads this from our stderr
        sys.stderr.write(f"{exc}\n")
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
