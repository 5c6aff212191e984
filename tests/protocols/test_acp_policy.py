"""The tool policy in ``steerable acp``: an ACP session works in a Workspace of its own, and its
tools (the editor's terminal and buffers included) obey the write gate the policy closes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

acp = pytest.importorskip("acp")

from acp import schema  # noqa: E402

from steerable import Agent, AgentLoop, EventKind, Reply, ScriptedProvider  # noqa: E402
from steerable.coding import Workspace  # noqa: E402
from steerable.protocols.acp._editor import editor_tools  # noqa: E402
from tests.protocols._acp_client import Editor  # noqa: E402
from tests.protocols.test_acp_cli import agent, script, text  # noqa: E402

CAPS = schema.ClientCapabilities(
    fs=schema.FileSystemCapabilities(read_text_file=True, write_text_file=True), terminal=True)


async def test_a_run_request_cannot_change_files_through_the_editors_terminal(
        cli_env: dict[str, str], tmp_path: Path, ws: Path) -> None:
    steps = [{"text": json.dumps({"kind": "run"})},
             {"tool_calls": [["bash", {"command": "echo changed > a.txt"}]]},
             {"text": "Done."}, {"text": "Done."}]
    editor = Editor()
    async with agent(cli_env, editor, "--policy", "on", "--yes", "--script",
                     script(tmp_path, steps), caps=CAPS) as conn:
        session = await conn.new_session(cwd=str(ws))
        done = await conn.prompt(session_id=session.session_id, prompt=text("run the tests"))
    assert done.stop_reason == "end_turn"
    assert (ws / "a.txt").read_text() == "hello from disk\n"
    assert editor.terminals == {} and editor.writes == []
    result = editor.of("tool_call_update")[-1].content[0].content.text
    assert "not run:" in result and "bubblewrap" in result, result


async def test_the_editors_write_and_edit_refuse_in_a_closed_turn(ws: Path) -> None:
    workspace = Workspace(ws)
    workspace.gate.close_by_default("the request was not read as asking for a change")
    editor = Editor(files={str(ws / "a.txt"): "hello from the editor\n"})
    calls = [("write", {"path": "b.txt", "content": "new\n"}),
             ("edit", {"path": "a.txt", "old_text": "hello", "new_text": "bye"})]
    provider = ScriptedProvider([Reply(tool_calls=calls), Reply(text="done")])
    tools = editor_tools(workspace, editor, read=True, write=True)
    loop = AgentLoop(Agent(provider=provider, tools=tools))
    sub = loop.subscribe(kinds=[EventKind.TOOL_EXEC_END])
    await loop.run_turn("go", session_id="s")
    await loop.aclose()
    ends = sub.drain_nowait()
    assert len(ends) == 2 and editor.writes == [] and not (ws / "b.txt").exists()
    assert all(e.is_error and "nothing was changed: the request was not read" in e.content
               for e in ends), [e.content for e in ends]
