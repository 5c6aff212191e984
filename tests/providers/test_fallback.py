"""FallbackProvider against real loopback servers: each error class that moves on, those that
do not, the switch seen as LLM_RETRY, and the CLI settings that build one."""

from __future__ import annotations

import argparse
import json
import socket
from pathlib import Path
from typing import Any

import pytest
from loopback_llm import (
    LoopbackServer,
    anthropic_frames,
    json_response,
    openai_call_fragments,
    openai_frames,
    running_server,
    stream,
)

from conftest import kinds, run_turn
from steerable import EventKind, FallbackProvider, Reply, ScriptedProvider, TurnStatus, tool
from steerable.cli._app import make_provider
from steerable.cli._args import build_parser
from steerable.cli._settings import load_settings
from steerable.errors import ConfigurationError
from steerable.providers._retry import RetryPolicy
from steerable.providers.anthropic import AnthropicProvider
from steerable.providers.openai import OpenAIProvider


def openai(url: str, retry: RetryPolicy, model: str = "gpt-primary") -> OpenAIProvider:
    return OpenAIProvider(base_url=f"{url}/v1", api_key="sk-test", model=model, retry=retry,
                          environ={})


def anthropic(server: LoopbackServer, retry: RetryPolicy) -> AnthropicProvider:
    return AnthropicProvider(base_url=server.url, api_key="sk-ant-test", model="claude-second",
                             retry=retry, environ={})


def switches(events: list[Any]) -> list[str]:
    return [e.reason for e in kinds(events, EventKind.LLM_RETRY) if "falling back" in e.reason]


OVERLOADED = {"error": {"message": "slow down", "type": "rate_limit_error"}}


@pytest.mark.parametrize("status", [429, 500, 502])
async def test_a_failure_that_outlives_its_retries_moves_to_the_next_provider(status, retry,
                                                                           sleeps):
    async with running_server() as first, running_server() as second:
        first.add(*[json_response(status, OVERLOADED)] * retry.max_attempts)
        second.add(stream(anthropic_frames(["from the second"])))
        provider = FallbackProvider([openai(first.url, retry), anthropic(second, retry)])
        result, events = await run_turn(provider, "hi", model="gpt-primary")

    assert result.status is TurnStatus.COMPLETED and result.text == "from the second"
    assert len(first.requests) == retry.max_attempts  # its own retries first
    (switch,) = switches(events)
    assert "AnthropicProvider (claude-second)" in switch and "OpenAIProvider (gpt-primary)" in switch
    attempts = [e.attempt for e in kinds(events, EventKind.LLM_RETRY)]
    assert attempts == list(range(2, retry.max_attempts + 2))  # numbered across both
    # The first provider's model name is not sent to the second.
    assert second.requests[0].body["model"] == "claude-second"


async def test_a_refused_connection_moves_on(retry):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    async with running_server() as second:
        second.add(stream(openai_frames(["still here"])))
        provider = FallbackProvider([openai(dead, retry), openai(second.url, retry, "backup")])
        result, events = await run_turn(provider)
    assert result.text == "still here"
    assert "cannot reach" in switches(events)[0]


async def test_overflow_moves_to_the_first_provider_with_a_longer_window(retry):
    too_long = {"error": {"message": "This model's maximum context length is 8192 tokens",
                          "code": "context_length_exceeded"}}
    async with running_server() as small, running_server() as smaller, \
            running_server() as big:
        small.add(json_response(400, too_long))
        big.add(stream(openai_frames(["it fits"])))
        provider = FallbackProvider(
            [openai(small.url, retry), openai(smaller.url, retry), openai(big.url, retry, "big")],
            context_windows=[8192, 4096, 128000])
        result, events = await run_turn(provider)
        assert not smaller.requests  # a shorter window would not help: skipped
    assert result.text == "it fits"
    assert "OpenAIProvider (big)" in switches(events)[0]
    assert not kinds(events, EventKind.CONTEXT_COMPRESS)  # no history was dropped for it


async def test_overflow_without_known_windows_is_left_to_the_loop(retry):
    too_long = {"error": {"message": "prompt is too long", "type": "invalid_request_error"}}
    async with running_server() as first, running_server() as second:
        first.add(json_response(400, too_long))
        provider = FallbackProvider([openai(first.url, retry), openai(second.url, retry)])
        result, events = await run_turn(provider)
        assert not second.requests
    # The loop's own answer to an overflow (compress, once) ran instead; nothing to drop here.
    assert result.status is TurnStatus.ERROR and "context window" in str(result.error)
    assert not switches(events)


async def test_no_fallback_once_the_reply_has_streamed(retry):
    async with running_server() as first, running_server() as second:
        frames = openai_frames(["Half an ans", "wer and then"], done=False, usage=None)
        first.add(stream(frames[:3], cut_after=3))
        provider = FallbackProvider([openai(first.url, retry), openai(second.url, retry)])
        result, events = await run_turn(provider)
        assert not second.requests  # another model would write another answer after this one
    assert result.status is TurnStatus.ERROR
    assert "had already arrived" in str(result.error)
    assert not switches(events)


async def test_a_failure_mid_tool_arguments_still_falls_back(retry):
    args = json.dumps({"path": "a.txt"})
    async with running_server() as first, running_server() as second:
        cut = openai_frames(tool_fragments=openai_call_fragments(0, "c1", "look", args),
                            finish="tool_calls", done=False, usage=None)
        first.add(*[stream(cut[:3], cut_after=3)] * retry.max_attempts,
                  stream(openai_frames(["read"])))  # the next request starts at the first again
        second.add(stream(openai_frames(tool_fragments=openai_call_fragments(
            0, "c9", "look", args), finish="tool_calls")))
        provider = FallbackProvider([openai(first.url, retry), openai(second.url, retry)])
        result, events = await run_turn(provider, tools=[look])
    assert result.status is TurnStatus.COMPLETED and result.text == "read"
    assert len(switches(events)) == 1
    assert [e.call_id for e in kinds(events, EventKind.TOOL_EXEC_START)] == ["c9"]


@tool(read_only=True)
async def look(path: str) -> str:
    """Read a file."""
    return f"contents of {path}"


async def test_a_rejected_key_does_not_fall_back(retry):
    async with running_server() as first, running_server() as second:
        first.add(json_response(401, {"error": {"message": "bad key"}}))
        provider = FallbackProvider([openai(first.url, retry), openai(second.url, retry)])
        result, _ = await run_turn(provider)
        assert not second.requests
    assert result.status is TurnStatus.ERROR and "401" in str(result.error)


async def test_when_every_provider_fails_the_last_error_is_the_turns(retry):
    async with running_server() as first, running_server() as second:
        first.add(*[json_response(503, OVERLOADED)] * retry.max_attempts)
        second.add(*[json_response(429, OVERLOADED)] * retry.max_attempts)
        provider = FallbackProvider([openai(first.url, retry), openai(second.url, retry)])
        result, events = await run_turn(provider)
    assert result.status is TurnStatus.ERROR and "rate limited" in str(result.error)
    assert len(switches(events)) == 1


async def test_each_request_starts_again_at_the_first_provider(retry):
    async with running_server() as first, running_server() as second:
        first.add(*[json_response(500, OVERLOADED)] * retry.max_attempts,
                  stream(openai_frames(["first is back"])))
        second.add(stream(openai_frames(tool_fragments=openai_call_fragments(
            0, "c1", "look", '{"path": "x"}'), finish="tool_calls")))
        provider = FallbackProvider([openai(first.url, retry), openai(second.url, retry)])
        result, _ = await run_turn(provider, tools=[look])
    assert result.text == "first is back"


async def test_close_closes_every_provider_even_when_one_fails() -> None:
    closed: list[str] = []

    class Broken(ScriptedProvider):
        async def aclose(self) -> None:
            closed.append("broken")
            raise RuntimeError("cannot close")

    class Fine(ScriptedProvider):
        async def aclose(self) -> None:
            closed.append("fine")

    provider = FallbackProvider([Broken([Reply("a")]), Fine([Reply("b")])])
    with pytest.raises(RuntimeError, match="cannot close"):
        await provider.aclose()
    assert closed == ["broken", "fine"]


def test_bad_construction_is_a_clear_error() -> None:
    with pytest.raises(ConfigurationError, match="at least one"):
        FallbackProvider([])
    with pytest.raises(ConfigurationError, match="not a provider"):
        FallbackProvider([object()])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match="2 context windows for 1"):
        FallbackProvider([ScriptedProvider([])], context_windows=[1, 2])
    with pytest.raises(ConfigurationError, match="positive int"):
        FallbackProvider([ScriptedProvider([])], context_windows=[0])


# --- the CLI's settings --------------------------------------------------------------------

def _settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, user: str, project: str = "",
              argv: tuple[str, ...] = ()) -> Any:
    config = tmp_path / "config.toml"
    config.write_text(user)
    (tmp_path / ".steerable.toml").write_text(project)
    monkeypatch.setenv("STEERABLE_CONFIG", str(config))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.delenv("STEERABLE_CONTEXT_WINDOW", raising=False)
    args = build_parser().parse_args(["run", *argv, "task"])
    return load_settings(args, cwd=tmp_path)


async def test_the_cli_config_builds_a_fallback_that_works(tmp_path, monkeypatch):
    async with running_server() as first, running_server() as second:
        first.add(*[json_response(429, OVERLOADED)] * 4)
        second.add(stream(anthropic_frames(["answered by the fallback"])))
        settings = _settings(tmp_path, monkeypatch, f"""
provider = "openai"
base_url = "{first.url}/v1"
context_window = 8192

[[fallback]]
provider = "anthropic"
model = "claude-backup"
base_url = "{second.url}"
context_window = 200000
""")
        provider = make_provider(settings)
        assert isinstance(provider, FallbackProvider)
        assert provider.context_windows == (8192, 200000)
        for p in provider.providers:
            p.retry = RetryPolicy(max_attempts=1)  # type: ignore[attr-defined]
        result, events = await run_turn(provider)
    assert result.text == "answered by the fallback"
    assert "AnthropicProvider (claude-backup)" in switches(events)[0]


def test_the_fallback_flag_replaces_the_config_list(tmp_path, monkeypatch):
    settings = _settings(tmp_path, monkeypatch, '[[fallback]]\nprovider = "local"\n',
                         argv=("--fallback", "anthropic:claude-x", "--fallback", "openai"))
    assert settings["fallback"] == [{"provider": "anthropic", "model": "claude-x"},
                                    {"provider": "openai"}]
    assert settings.sources["fallback"] == "flag"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--fallback", "nobody:x", "task"])


def test_a_project_file_cannot_add_fallbacks(tmp_path, monkeypatch, caplog):
    settings = _settings(tmp_path, monkeypatch, "",
                         project='[[fallback]]\nprovider = "openai"\nbase_url = "http://evil"\n')
    assert settings["fallback"] == []
    assert "'fallback' is not accepted from a project file" in caplog.text


@pytest.mark.parametrize(("text", "message"), [
    ('fallback = ["openai"]', "must be a list of tables"),
    ('[[fallback]]\nprovider = "scripted"', "'provider' must be one of"),
    ('[[fallback]]\nmodel = "x"', "'provider' must be one of"),
    ('[[fallback]]\nprovider = "openai"\ncontext_window = "big"', "'context_window' must be int"),
    ('[[fallback]]\nprovider = "openai"\ncontext_window = 0', "at least 1"),
    ('[[fallback]]\nprovider = "openai"\napi_key = "sk-x"', "unknown key 'api_key'"),
])
def test_bad_fallback_settings_are_clear_errors(tmp_path, monkeypatch, text, message):
    with pytest.raises(ConfigurationError, match=message):
        _settings(tmp_path, monkeypatch, text)


def test_the_args_module_is_what_the_cli_uses() -> None:
    parsed = build_parser().parse_args(["chat", "--fallback", "local"])
    assert isinstance(parsed, argparse.Namespace) and parsed.fallback == [{"provider": "local"}]
