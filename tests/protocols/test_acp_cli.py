"""``steerable acp`` as a subprocess, driven by the ``agent-client-protocol`` package's client
side with the scripted provider; every message both ways is checked against the package's
schema models (``SchemaChecker``)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

acp = pytest.importorskip("acp")

from acp import schema  # noqa: E402

from tests.protocols._acp_client import Editor, SchemaChecker  # noqa: E402

FS = schema.ClientCapabilities(fs=schema.FileSystemCapabilities(read_text_file=True,
                                                               write_text_file=True))


def script(tmp_path: Path, steps: list[dict[str, Any]]) -> str:
    path = tmp_path / f"script{len(list(tmp_path.glob('script*')))}.json"
    path.write_text(json.dumps(steps))
    return str(path)


@contextlib.asynccontextmanager
async def agent(env: dict[str, str], editor: Editor, *args: str,
                caps: schema.ClientCapabilities | None = None) -> AsyncIterator[Any]:
    checker = SchemaChecker()
    async with acp.spawn_agent_process(
            editor, sys.executable, "-m", "steerable", "acp", "--provider", "scripted",
            "--no-sandbox", *args, env=env, observers=[checker]) as (conn, proc):
        conn.checker = checker
        conn.init = await conn.initialize(protocol_version=acp.PROTOCOL_VERSION,
                                          client_capabilities=caps or schema.ClientCapabilities())
        try:
            yield conn
        finally:
            assert not checker.errors, checker.errors
            assert checker.checked > 0
    assert proc.returncode is not None  # the agent exits when the editor closes its stdin


def text(prompt: str) -> list[schema.TextContentBlock]:
    return [schema.TextContentBlock(type="text", text=prompt)]


async def test_initialize_is_honest_and_a_read_goes_through_the_editor(
        cli_env: dict[str, str], tmp_path: Path, ws: Path) -> None:
    steps = [{"text": "Reading.", "tool_calls": [["read", {"path": "a.txt"}]]},
             {"text": "It says hello."}]
    editor = Editor(files={str(ws / "a.txt"): "hello from the editor\n"})
    async with agent(cli_env, editor, "--script", script(tmp_path, steps), caps=FS) as conn:
        caps = conn.init.agent_capabilities
        assert caps.load_session is True and caps.prompt_capabilities.image is False
        assert caps.session_capabilities.list is not None
        assert caps.session_capabilities.resume is not None
        assert conn.init.field_meta["steering"]["supported"] is True
        session = await conn.new_session(cwd=str(ws))
        done = await conn.prompt(session_id=session.session_id,
                                 prompt=text("what is in a.txt?"))
    assert done.stop_reason == "end_turn"
    assert editor.reads == [str(ws / "a.txt")]
    [call] = editor.of("tool_call")
    assert (call.kind, call.status, call.title) == ("read", "pending", "Read a.txt")
    assert call.locations[0].path == str(ws / "a.txt")
    statuses = [u.status for u in editor.of("tool_call_update")]
    assert statuses == ["in_progress", "completed"]
    result = editor.of("tool_call_update")[-1].content[0].content.text
    assert result == "     1\thello from the editor"
    said = "".join(u.content.text for u in editor.of("agent_message_chunk"))
    assert said == "Reading.It says hello."
    [commands] = editor.of("available_commands_update")
    assert {c.name for c in commands.available_commands} >= {"steer", "follow-up"}
