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


async def test_a_write_is_asked_with_its_diff_and_refused(
        cli_env: dict[str, str], tmp_path: Path, ws: Path) -> None:
    steps = [{"tool_calls": [["write", {"path": "a.txt", "content": "bye\n"}]]},
             {"text": "I was not allowed."}]
    editor = Editor(choose=lambda call: "reject_once")
    async with agent(cli_env, editor, "--script", script(tmp_path, steps)) as conn:
        session = await conn.new_session(cwd=str(ws))
        done = await conn.prompt(session_id=session.session_id, prompt=text("say bye"))
    assert done.stop_reason == "end_turn"
    assert (ws / "a.txt").read_text() == "hello from disk\n"  # refused: nothing written
    [(asked, options)] = editor.permission_requests
    assert [o.kind for o in options] == ["allow_once", "allow_always", "reject_once",
                                         "reject_always"]
    [call] = editor.of("tool_call")
    assert asked.tool_call_id == call.tool_call_id and call.kind == "edit"
    # announced before it was asked, with the change as ACP diff content
    first_ask = next(i for i, (_, u) in enumerate(editor.updates) if u is call)
    assert first_ask >= 0
    diff = call.content[0]
    assert (diff.type, diff.path, diff.old_text, diff.new_text) == (
        "diff", str(ws / "a.txt"), "hello from disk\n", "bye\n")
    last = editor.of("tool_call_update")[-1]
    assert last.status == "failed" and "denied" in last.content[0].content.text


async def test_allow_always_becomes_a_rule_of_the_session(
        cli_env: dict[str, str], tmp_path: Path, ws: Path) -> None:
    steps = [{"tool_calls": [["write", {"path": "b.txt", "content": "1\n"}]]},
             {"tool_calls": [["write", {"path": "c.txt", "content": "2\n"}]]},
             {"text": "Both written."}]
    editor = Editor(choose=lambda call: "allow_always")
    async with agent(cli_env, editor, "--script", script(tmp_path, steps), caps=FS) as conn:
        session = await conn.new_session(cwd=str(ws))
        done = await conn.prompt(session_id=session.session_id, prompt=text("write two"))
    assert done.stop_reason == "end_turn"
    assert len(editor.permission_requests) == 1  # the second write was allowed by the rule
    # the editor offered to write, so the writes went through its buffers
    assert editor.writes == [(str(ws / "b.txt"), "1\n"), (str(ws / "c.txt"), "2\n")]


async def test_cancel_during_a_slow_answer_keeps_it_and_the_session_goes_on(
        cli_env: dict[str, str], tmp_path: Path, ws: Path) -> None:
    steps = [{"text": "A slow answer.", "delay": 1.5},
             {"tool_calls": [["bash", {"command": "echo never"}]], "delay": 1.0},
             {"text": "Next."}]
    editor = Editor()
    async with agent(cli_env, editor, "--script", script(tmp_path, steps), "--yes") as conn:
        session = await conn.new_session(cwd=str(ws))
        sid = session.session_id
        first = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=text("go slowly")))
        await asyncio.sleep(0.3)
        await conn.cancel(session_id=sid)
        assert (await first).stop_reason == "cancelled"
        # the next prompt in the same session works; a cancel before its tool runs skips it
        second = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=text("run it")))
        await asyncio.sleep(0.3)
        await conn.cancel(session_id=sid)
        assert (await second).stop_reason == "cancelled"
        third = await conn.prompt(session_id=sid, prompt=text("and then?"))
        assert third.stop_reason == "end_turn"
    said = "".join(u.content.text for u in editor.of("agent_message_chunk"))
    assert said == "A slow answer.Next."
    [skipped] = editor.of("tool_call_update")
    assert skipped.status == "failed" and skipped.field_meta["steerable"]["skipped"] == "cancelled"
    # nothing was rolled back: both cancelled turns are in the session, as the editor showed
    # them; a new process loads it and replays it
    replayed = Editor()
    async with agent(cli_env, replayed, "--script", script(tmp_path, [])) as conn:
        listed = await conn.list_sessions(cwd=str(ws))
        assert [(s.session_id, s.title) for s in listed.sessions] == [(sid, "go slowly")]
        await conn.load_session(cwd=str(ws), session_id=sid)
        await conn.resume_session(cwd=str(ws), session_id=sid)
    asked = [u.content.text for u in replayed.of("user_message_chunk")]
    assert asked == ["go slowly", "run it", "and then?"]
    said = [u.content.text for u in replayed.of("agent_message_chunk")]
    assert said == ["A slow answer.", "Next."]
    [call] = replayed.of("tool_call")
    assert call.status == "failed" and call.kind == "execute"


def steering(sid: str, message: str, idle: str | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"sessionId": sid, "prompt": [{"type": "text", "text": message}]}
    if idle is not None:
        params["_meta"] = {"steering": {"idleBehavior": idle}}
    return params


async def test_a_steer_during_a_tool_reaches_the_next_request(
        cli_env: dict[str, str], tmp_path: Path, ws: Path) -> None:
    steps = [{"text": "Checking.", "tool_calls": [["bash", {"command": "sleep 1; echo slept"}],
                                                  ["bash", {"command": "echo second"}]]},
             {"text": "Done, in French."},
             {"text": "A turn of its own."}]
    editor = Editor()
    async with agent(cli_env, editor, "--script", script(tmp_path, steps), "--yes") as conn:
        sid = (await conn.new_session(cwd=str(ws))).session_id
        turn = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=text("check it")))
        await editor.wait_for(lambda u: u.session_update == "tool_call_update"
                              and u.status == "in_progress")
        answer = await conn.ext_method("session/steering", steering(sid, "answer in French"))
        assert answer["outcome"] == "injected"
        taken = answer["_meta"]["steerable"]
        assert taken["state"] == "queued"  # in the turn's queue until the next model call
        assert (await turn).stop_reason == "end_turn"
        # with no turn running: the editor may ask to keep the message, or to start a turn
        idle = await conn.ext_method("session/steering",
                                     steering(sid, "kept", idle="promptRequired"))
        assert idle == {"outcome": "promptRequired", "reason": "noRunningTurn"}
        started = await conn.ext_method("session/steering", steering(sid, "go on"))
        assert started["outcome"] == "startedNewTurn"
        await editor.wait_for(lambda u: u.session_update == "agent_message_chunk"
                              and "own" in u.content.text)
    # the editor was told that both messages reached the model
    told = {p["messageId"]: p["state"] for _, p in editor.notes}
    assert told == {taken["messageId"]: "delivered",
                    started["_meta"]["steerable"]["messageId"]: "delivered"}
    kinds = [(u.session_update, getattr(u, "status", None)) for _, u in editor.updates
             if u.session_update != "available_commands_update"]
    # the steer landed after the running tool ended, before the next model call; the tool
    # not yet started was skipped for it
    steer_at = kinds.index(("user_message_chunk", None))
    assert kinds[steer_at - 2:steer_at] == [("tool_call_update", "completed"),
                                            ("tool_call_update", "failed")]
    assert kinds[steer_at + 1][0] == "agent_message_chunk"
    assert editor.of("user_message_chunk")[0].content.text == "answer in French"
    skipped = editor.of("tool_call_update")[-1]
    assert skipped.field_meta["steerable"]["skipped"] == "steering"
    # and the saved history has it in the request after the tool's result
    replayed = Editor()
    async with agent(cli_env, replayed, "--script", script(tmp_path, [])) as conn:
        await conn.load_session(cwd=str(ws), session_id=sid)
    asked = [u.content.text for u in replayed.of("user_message_chunk")]
    assert asked == ["check it", "answer in French", "go on"]


async def test_inject_queue_revoke_and_replace_behind_unstable(
        cli_env: dict[str, str], tmp_path: Path, ws: Path) -> None:
    steps = [{"tool_calls": [["bash", {"command": "sleep 1"}]]}, {"text": "First done."},
             {"text": "Second done."}]
    editor = Editor()
    args = ("--script", script(tmp_path, steps), "--yes")
    async with agent(cli_env, Editor(), *args) as conn:  # not offered without --unstable
        sid = (await conn.new_session(cwd=str(ws))).session_id
        with pytest.raises(acp.RequestError, match="Method not found"):
            await conn.ext_method("session/inject", steering(sid, "x"))
    async with agent(cli_env, editor, *args, "--unstable") as conn:
        assert conn.init.field_meta["steerable"]["inject"] is True
        sid = (await conn.new_session(cwd=str(ws))).session_id
        turn = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=text("first")))
        await editor.wait_for(lambda u: getattr(u, "status", None) == "in_progress")

        async def inject(message: str) -> str:
            answer = await conn.ext_method("session/inject",
                                           {**steering(sid, message), "mode": "queue"})
            assert answer["outcome"] == "queued"
            return str(answer["_meta"]["steerable"]["messageId"])

        keep, drop = await inject("second, draft"), await inject("never")
        replaced = await conn.ext_method("session/inject", {
            **steering(sid, "second"), "action": "replace", "messageId": keep})
        revoked = await conn.ext_method("session/inject", {
            "sessionId": sid, "action": "revoke", "messageId": drop})
        assert replaced == {"replaced": True} and revoked == {"revoked": True}
        assert (await turn).stop_reason == "end_turn"
        await editor.wait_for(lambda u: u.session_update == "agent_message_chunk"
                              and u.content.text.startswith("Second"))
        again = await conn.ext_method("session/inject", {
            "sessionId": sid, "action": "revoke", "messageId": keep})
        assert again == {"revoked": False}  # delivered already: too late to withdraw
        replayed = Editor()
    async with agent(cli_env, replayed, "--script", script(tmp_path, [])) as conn:
        await conn.load_session(cwd=str(ws), session_id=sid)
    assert [u.content.text for u in replayed.of("user_message_chunk")] == ["first", "second"]
    told = {p["messageId"]: p["state"] for _, p in editor.notes}
    assert told == {keep: "delivered", drop: "revoked"}


async def test_bash_runs_in_the_editors_terminal_when_it_offers_one(
        cli_env: dict[str, str], tmp_path: Path, ws: Path) -> None:
    steps = [{"tool_calls": [["bash", {"command": "echo hi from $PWD; exit 3"}]]},
             {"tool_calls": [["bash", {"command": "sleep 30", "timeout": 0.5}]]},
             {"text": "Ran."}]
    editor = Editor()
    caps = schema.ClientCapabilities(terminal=True)
    async with agent(cli_env, editor, "--script", script(tmp_path, steps), "--yes",
                     caps=caps) as conn:
        session = await conn.new_session(cwd=str(ws))
        done = await conn.prompt(session_id=session.session_id, prompt=text("run it"))
    assert done.stop_reason == "end_turn"
    first, second = editor.terminals.values()
    assert first["argv"] == ["/bin/bash", "-c", "echo hi from $PWD; exit 3"]  # --no-sandbox
    assert first["cwd"] == str(ws) and first["released"] and second["released"]
    updates = editor.of("tool_call_update")
    shown = [u for u in updates if u.content and u.content[0].type == "terminal"]
    assert shown[0].content[0].terminal_id == "term-1"  # the editor showed it live
    results = [u for u in updates if u.status in ("completed", "failed")]
    assert [u.status for u in results] == ["failed", "failed"]
    assert results[0].content[1].content.text == f"hi from {ws}\n[exit code 3]"
    assert "killed after 0.5 s" in results[1].content[1].content.text


async def test_stdout_is_the_protocols_alone(cli_env: dict[str, str], tmp_path: Path,
                                            ws: Path) -> None:
    # a command that writes straight to the agent process's stdout (half a line: it would glue
    # itself to the next message and spoil it): it must land on stderr
    steps = [{"tool_calls": [["bash", {"command": "printf stray > /proc/$PPID/fd/1"}]]},
             {"text": "Still talking."}]
    editor = Editor()
    async with agent(cli_env, editor, "--script", script(tmp_path, steps), "--yes") as conn:
        session = await conn.new_session(cwd=str(ws))
        done = await conn.prompt(session_id=session.session_id, prompt=text("print"))
    assert done.stop_reason == "end_turn"
    kinds = [u.session_update for _, u in editor.updates]
    assert kinds == ["available_commands_update", "tool_call", "tool_call_update",
                     "tool_call_update", "agent_message_chunk", "agent_message_chunk"]
    said = "".join(u.content.text for u in editor.of("agent_message_chunk"))
    assert said == "Still talking."


async def test_the_editors_mcp_servers_are_the_sessions_tools(
        cli_env: dict[str, str], tmp_path: Path, ws: Path) -> None:
    pytest.importorskip("mcp")
    server = Path(__file__).resolve().parents[1] / "integrations" / "mcp_server.py"
    steps = [{"tool_calls": [["mcp__files__echo", {"text": "hi"}]]}, {"text": "Echoed."}]
    editor = Editor()
    spec = schema.McpServerStdio(name="files", command=sys.executable,
                                 args=[str(server), "stdio"], env=[])
    async with agent(cli_env, editor, "--script", script(tmp_path, steps)) as conn:
        assert conn.init.agent_capabilities.mcp_capabilities.http is True
        session = await conn.new_session(cwd=str(ws), mcp_servers=[spec])
        done = await conn.prompt(session_id=session.session_id, prompt=text("echo hi"))
    assert done.stop_reason == "end_turn"
    [call] = editor.of("tool_call")
    assert (call.title, call.kind) == ("mcp__files__echo", "read")  # its read-only hint
    assert editor.of("tool_call_update")[-1].content[0].content.text == "echo: hi"
    assert not editor.permission_requests  # read-only: nobody is asked


async def test_an_editor_that_quits_mid_turn_loses_nothing_done(
        cli_env: dict[str, str], tmp_path: Path, ws: Path) -> None:
    steps = [{"text": "Writing.", "tool_calls": [["bash", {"command": "sleep 1; echo made > f"}],
                                                 ["bash", {"command": "echo never > g"}]]},
             {"text": "never asked"}]
    editor = Editor()
    async with agent(cli_env, editor, "--script", script(tmp_path, steps), "--yes") as conn:
        sid = (await conn.new_session(cwd=str(ws))).session_id
        turn = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=text("make f")))
        await editor.wait_for(lambda u: getattr(u, "status", None) == "in_progress")
        # the editor closes here, the turn still running
    with contextlib.suppress(ConnectionError):
        await turn
    # the running command finished and the turn was saved as it stood: a cancel, not a rollback
    assert (ws / "f").read_text() == "made\n" and not (ws / "g").exists()
    replayed = Editor()
    async with agent(cli_env, replayed, "--script", script(tmp_path, [])) as conn:
        await conn.load_session(cwd=str(ws), session_id=sid)
    assert [u.content.text for u in replayed.of("agent_message_chunk")] == ["Writing."]
    assert [u.status for u in replayed.of("tool_call")] == ["completed", "failed"]
